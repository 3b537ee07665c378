<?php
/*
 * Cart.php - a cart of lines to hold together (rsv_cart), freed with the
 * object.
 */

declare(strict_types=1);

namespace Libreserve;

use FFI;
use FFI\CData;
use Libreserve\Exception\InvalidArgument;
use Libreserve\Exception\ReserveException;

/**
 * $cart = new Cart();
 * $cart->add(itemId: 42, locations: [7, 8], quantity: 2, split: true);
 * if ($ctx->reserve($shopId, $token, $cart)) { $cart->allocations(0); }
 */
final class Cart implements \Countable
{
    /** The most lines a cart takes (RSV_CART_MAX_LINES). */
    public const MAX_LINES = 1000;
    /** The most locations one line names (RSV_LINE_MAX_LOCATIONS). */
    public const MAX_LOCATIONS = 16;
    private const LINE_SPLIT = 0x1;
    private const SIZE_MAX = -1;

    private FFI $ffi;
    private ?CData $ptr;

    public function __construct()
    {
        $this->ffi = Library::ffi();
        $out = $this->ffi->new('rsv_cart *');
        $rc = $this->ffi->rsv_cart_new(FFI::addr($out));
        if ($rc !== 0) {
            throw ReserveException::fromCode($rc, '', 'rsv_cart_new');
        }
        $this->ptr = $out;
    }

    /**
     * Append a line: $quantity units of $itemId from $locations, in order
     * of preference.  Without $split the whole line is held at the first
     * location that covers it; with it, units are taken from the locations
     * in order.  Returns the line's index.
     *
     * @param int|list<int> $locations
     * @throws \ValueError a negative id
     * @throws \TypeError a location that is not an int
     */
    public function add(int $itemId, int|array $locations, int $quantity, bool $split = false): int
    {
        $locations = is_int($locations) ? [$locations] : array_values($locations);
        Context::checkId($itemId, 'itemId');
        $n = count($locations);
        $locs = $this->ffi->new('uint64_t[' . max(1, $n) . ']');
        foreach ($locations as $i => $loc) {
            if (!is_int($loc)) {
                throw new \TypeError(sprintf('Cart::add(): each location must be an int, %s given', get_debug_type($loc)));
            }
            Context::checkId($loc, 'location');
            $locs[$i] = $loc;
        }
        $rc = $this->ffi->rsv_cart_add($this->ptr(), $itemId, $locs, $n, $quantity, $split ? self::LINE_SPLIT : 0);
        if ($rc !== 0) {
            throw ReserveException::fromCode($rc, '', 'rsv_cart_add');
        }
        return $this->count() - 1;
    }

    /** Remove every line. */
    public function clear(): void
    {
        $this->ffi->rsv_cart_clear($this->ptr());
    }

    public function count(): int
    {
        return (int) $this->ffi->rsv_cart_lines($this->ptr());
    }

    /**
     * After a reserve that held the cart: where line $line is held, as
     * location id => units, in the line's order of preference.
     *
     * @return array<int, int>
     */
    public function allocations(int $line): array
    {
        if ($line < 0) {
            throw new \ValueError('Cart::allocations(): $line must be 0 or more');
        }
        $n = $this->ffi->new('size_t');
        $rc = $this->ffi->rsv_cart_allocation_count($this->ptr(), $line, FFI::addr($n));
        if ($rc !== 0) {
            throw ReserveException::fromCode($rc, '', 'rsv_cart_allocation_count');
        }
        $loc = $this->ffi->new('uint64_t');
        $qty = $this->ffi->new('int64_t');
        $out = [];
        for ($i = 0; $i < $n->cdata; $i++) {
            $rc = $this->ffi->rsv_cart_allocation($this->ptr(), $line, $i, FFI::addr($loc), FFI::addr($qty));
            if ($rc !== 0) {
                throw ReserveException::fromCode($rc, '', 'rsv_cart_allocation');
            }
            $out[(int) $loc->cdata] = (int) $qty->cdata;
        }
        return $out;
    }

    /** After a reserve answered out of stock (or NoItem): the line that could not be served. */
    public function failedLine(): ?int
    {
        $v = (int) $this->ffi->rsv_cart_failed_line($this->ptr());
        return $v === self::SIZE_MAX ? null : $v;
    }

    /** Free the cart now (the destructor does it otherwise). */
    public function free(): void
    {
        if ($this->ptr !== null) {
            $this->ffi->rsv_cart_free($this->ptr);
            $this->ptr = null;
        }
    }

    public function __destruct()
    {
        $this->free();
    }

    /** @internal */
    public function ptr(): CData
    {
        if ($this->ptr === null) {
            throw new InvalidArgument(-10, 'the cart was freed');
        }
        return $this->ptr;
    }
}
