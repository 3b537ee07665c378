<?php
/*
 * Options.php - context options (struct rsv_options), by name; every one
 * left null keeps the library's default.
 */

declare(strict_types=1);

namespace Libreserve;

use FFI;
use FFI\CData;

/**
 * new Options(holdTtlMs: 300_000, callTimeoutMs: 2_000).  reserve.h
 * documents each field and its range; the library checks the ranges when
 * a context opens (InvalidArgument).
 */
final class Options
{
    private const OPTIONS_VERSION = 1;
    private const OPT_NO_PROACTIVE_REFILL = 0x2;
    private const OPT_REPLICA_ACK = 0x10;
    private const INT32 = ['maxRetries', 'retryBaseUs', 'lockWaitTimeoutS', 'stmtCacheMax'];

    public function __construct(
        public readonly ?int $poolCap = null,
        public readonly ?int $refillLowWater = null,
        public readonly ?int $holdTtlMs = null,
        public readonly ?int $maxRetries = null,
        public readonly ?int $retryBaseUs = null,
        public readonly ?int $lockWaitTimeoutS = null,
        public readonly ?string $connTagPrefix = null,
        public readonly ?int $settledRetentionS = null,
        public readonly ?int $poolIdleS = null,
        public readonly ?int $callTimeoutMs = null,
        public readonly ?int $stmtCacheMax = null,
        /** RSV_OPT_NO_PROACTIVE_REFILL */
        public readonly bool $noProactiveRefill = false,
        /** RSV_OPT_REPLICA_ACK */
        public readonly bool $replicaAck = false,
    ) {
        foreach (self::INT32 as $name) {
            $v = $this->$name;
            if ($v !== null && ($v < -2147483648 || $v > 2147483647)) {
                throw new \ValueError("Options::\$$name must fit in 32 bits, $v given");
            }
        }
        if ($connTagPrefix !== null && str_contains($connTagPrefix, "\0")) {
            throw new \ValueError('Options::$connTagPrefix must not contain NUL bytes');
        }
    }

    /**
     * The C struct, filled by rsv_options_init() and then by the fields
     * set here.  $keep receives what must outlive the call that reads it.
     *
     * @param list<mixed> $keep
     * @internal
     */
    public function toC(FFI $ffi, array &$keep): CData
    {
        $o = $ffi->new('rsv_options');
        $ffi->rsv_options_init(FFI::addr($o), self::OPTIONS_VERSION);
        $map = [
            'poolCap' => 'pool_cap', 'refillLowWater' => 'refill_low_water',
            'holdTtlMs' => 'hold_ttl_ms', 'maxRetries' => 'max_retries',
            'retryBaseUs' => 'retry_base_us', 'lockWaitTimeoutS' => 'lock_wait_timeout_s',
            'settledRetentionS' => 'settled_retention_s', 'poolIdleS' => 'pool_idle_s',
            'callTimeoutMs' => 'call_timeout_ms', 'stmtCacheMax' => 'stmt_cache_max',
        ];
        foreach ($map as $php => $c) {
            if ($this->$php !== null) {
                $o->$c = $this->$php;
            }
        }
        $flags = 0;
        if ($this->noProactiveRefill) {
            $flags |= self::OPT_NO_PROACTIVE_REFILL;
        }
        if ($this->replicaAck) {
            $flags |= self::OPT_REPLICA_ACK;
        }
        $o->flags = $flags;
        if ($this->connTagPrefix !== null) {
            $len = strlen($this->connTagPrefix);
            $buf = $ffi->new('char[' . ($len + 1) . ']');
            FFI::memcpy($buf, $this->connTagPrefix . "\0", $len + 1);
            $keep[] = $buf;
            $o->conn_tag_prefix = $ffi->cast('char *', FFI::addr($buf));
        }
        return $o;
    }

    /** A key naming these options, for the persistent context's slot. */
    public function key(): string
    {
        return serialize(get_object_vars($this));
    }
}
