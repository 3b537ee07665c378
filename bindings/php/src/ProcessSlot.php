<?php
/*
 * ProcessSlot.php - where a PHP-FPM worker keeps the address of a library
 * object that outlives the request (Context::persistent(),
 * Migration::persistent()): an environment variable of the process, which
 * PHP leaves alone between requests.
 */

declare(strict_types=1);

namespace Libreserve;

use FFI;
use FFI\CData;

/** @internal */
final class ProcessSlot
{
    /** The slot's variable for $key (any bytes), under $prefix. */
    public static function name(string $prefix, string $key): string
    {
        return $prefix . substr(hash('sha256', $key), 0, 24);
    }

    /**
     * The pointer of C type $type (say 'rsv_ctx *') this process keeps in
     * $slot, or null.  The value is "pid:address": one inherited from a
     * parent process names the parent's memory (and threads that did not
     * survive the fork), not ours.
     */
    public static function find(FFI $ffi, string $slot, string $type): ?CData
    {
        $held = $ffi->getenv($slot);
        if ($held === null) {
            return null;
        }
        [$owner, $addr] = explode(':', FFI::string($held), 2) + [1 => ''];
        if ((int) $owner !== getmypid() || preg_match('/^[0-9]+$/', $addr) !== 1) {
            return null;
        }
        // a cast CData shares the memory it was cast from: the pointer is
        // copied into storage of its own
        $u = $ffi->new('uintptr_t');
        $u->cdata = (int) $addr;
        $p = $ffi->new($type);
        FFI::memcpy(FFI::addr($p), FFI::addr($u), FFI::sizeof($u));
        return $p;
    }

    /** Keep $ptr in $slot for this process. */
    public static function keep(FFI $ffi, string $slot, CData $ptr): void
    {
        $ffi->setenv($slot, getmypid() . ':' . $ffi->cast('uintptr_t', $ptr)->cdata, 1);
    }

    public static function clear(FFI $ffi, string $slot): void
    {
        $ffi->unsetenv($slot);
    }
}
