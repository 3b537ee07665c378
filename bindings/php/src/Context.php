<?php
/*
 * Context.php - a libreserve context on a connection of its own
 * (rsv_open_dsn): the hold lifecycle, stock, audit, batches, statistics
 * and the kill switch, and the per-worker context PHP-FPM reuses across
 * requests.
 */

declare(strict_types=1);

namespace Libreserve;

use FFI;
use FFI\CData;
use Libreserve\Exception\AlreadyClaimed;
use Libreserve\Exception\InvalidArgument;
use Libreserve\Exception\ReserveException;

/**
 * Which calls answer and which throw: a checkout branches on "out of
 * stock" and on a repeated claim, so reserve()/reserveOne() answer false
 * when the stock is not there and claim() answers
 * ClaimResult::AlreadyClaimed for a checkout claimed before (both leave
 * the database as it was).  Everything else the library answers with a
 * code other than RSV_OK is thrown: an ExpectedOutcome (Expired, NotFound,
 * AlreadyReleased, AlreadyClaimed from release/reserve, Busy, InDoubt) or
 * a Failure.  Arguments PHP cannot hand to the library (a negative id, a
 * location that is not an int) throw \ValueError / \TypeError before it
 * is called.
 *
 * Ids are PHP ints, 0 .. PHP_INT_MAX (the library takes unsigned 64-bit
 * ones).  Tokens are byte strings, 1..128 bytes, compared byte for byte.
 */
final class Context
{
    /** The most entries one batch call takes (RSV_BATCH_MAX). */
    public const BATCH_MAX = 256;
    private const SLOT_PREFIX = 'LIBRESERVE_CTX_';

    /** @var array<string, Context> this request's persistent contexts */
    private static array $persistent = [];

    private FFI $ffi;
    private ?CData $ctx;
    private ?string $slot = null;

    private function __construct(FFI $ffi, CData $ctx)
    {
        $this->ffi = $ffi;
        $this->ctx = $ctx;
    }

    /**
     * Open a context on a connection of its own:
     * mariadb://USER:PASSWORD@HOST:PORT/DATABASE?socket=...&connect_timeout=...
     * (reserve.h lists the keys).  close() (or the object's end) closes
     * the connection.
     *
     * @throws ReserveException ConnectionLost, AuthenticationError, SchemaError,
     *         SchemaVersionError, InvalidArgument (a malformed DSN or option), ...
     */
    public static function open(string $dsn, ?Options $options = null): self
    {
        if (str_contains($dsn, "\0")) {
            throw new \ValueError('Context::open(): the DSN must not contain NUL bytes');
        }
        $ffi = Library::ffi();
        $keep = [];
        $opts = $options?->toC($ffi, $keep);
        $out = $ffi->new('rsv_ctx *');
        $rc = $ffi->rsv_open_dsn(FFI::addr($out), $dsn, $opts === null ? null : FFI::addr($opts));
        if ($rc !== 0) {
            $msg = FFI::isNull($out) ? '' : (string) $ffi->rsv_errmsg($out);
            // a context allocated before the failure was found holds the
            // message; it (and any connection it made) goes now
            $ffi->rsv_close($out);
            throw ReserveException::fromCode($rc, $msg, 'rsv_open_dsn');
        }
        return new self($ffi, $out);
    }

    /**
     * The worker's context for this DSN and options: opened on the
     * process's first call, then the same context (and connection) in
     * every later request the process serves, as a persistent connection
     * is.  For PHP-FPM and other SAPIs whose processes serve many
     * requests.  Its end of request does not close it; close() does, and
     * the process's exit.  After ConnectionLost or InDoubt (a server
     * restart), call reconnect() on it and repeat the call.
     */
    public static function persistent(string $dsn, ?Options $options = null): self
    {
        $key = $dsn . "\0" . ($options?->key() ?? '');
        $mine = self::$persistent[$key] ?? null;
        if ($mine !== null && $mine->ctx !== null) {
            return $mine;
        }
        $ffi = Library::ffi();
        $slot = ProcessSlot::name(self::SLOT_PREFIX, $key);
        $p = ProcessSlot::find($ffi, $slot, 'rsv_ctx *');
        if ($p !== null) {
            $ctx = new self($ffi, $p);
        } else {
            $ctx = self::open($dsn, $options);
            ProcessSlot::keep($ffi, $slot, $ctx->ctx);
        }
        $ctx->slot = $slot;
        return self::$persistent[$key] = $ctx;
    }

    /** Close the context and its connection; later calls throw. */
    public function close(): void
    {
        if ($this->ctx === null) {
            return;
        }
        if ($this->slot !== null) {
            ProcessSlot::clear($this->ffi, $this->slot);
            $this->slot = null;
        }
        $this->ffi->rsv_close($this->ctx);
        $this->ctx = null;
    }

    public function __destruct()
    {
        // a persistent context outlives this request's objects
        if ($this->slot === null) {
            $this->close();
        }
    }

    public function isClosed(): bool
    {
        return $this->ctx === null;
    }

    /** Whether the context stays open across requests (persistent()). */
    public function isPersistent(): bool
    {
        return $this->slot !== null;
    }

    /**
     * Connect again after ConnectionLost, InDoubt or NotPrimary (a server
     * restart, a failover), then repeat the call: every call is
     * idempotent for its token.
     */
    public function reconnect(): void
    {
        $this->check($this->ffi->rsv_reconnect($this->p()), 'rsv_reconnect');
    }

    /** The message of the last failing call ("" after a success). */
    public function errmsg(): string
    {
        return (string) $this->ffi->rsv_errmsg($this->p());
    }

    /** The code of the last call (0 after a success). */
    public function errcode(): int
    {
        return $this->ffi->rsv_errcode($this->p());
    }

    // ---- the hold lifecycle ----

    /**
     * Hold every line of the cart for the checkout $token, all or nothing,
     * for $ttlMs milliseconds (0: the context's holdTtlMs).  Reserving
     * again with the same token replaces its holds.  Returns true when
     * held ($cart->allocations() say where), false when out of stock
     * ($cart->failedLine() says which line; nothing held).
     *
     * @throws AlreadyClaimed the checkout was claimed before
     * @throws ReserveException NoItem (failedLine set), Busy, InDoubt, ...
     */
    public function reserve(int $shopId, string $token, Cart $cart, int $ttlMs = 0): bool
    {
        self::checkId($shopId, 'shopId');
        $rc = $this->ffi->rsv_reserve($this->p(), $shopId, $token, strlen($token), $cart->ptr(), $ttlMs);
        if ($rc === -1) {
            return false;
        }
        if ($rc !== 0) {
            $e = ReserveException::fromCode($rc, $this->errmsg(), 'rsv_reserve');
            $e->failedLine = $cart->failedLine();
            throw $e;
        }
        return true;
    }

    /**
     * Hold $quantity units of one item at one location for $token.  True
     * when held, false when out of stock; throws as reserve().
     */
    public function reserveOne(int $shopId, string $token, int $itemId, int $locationId, int $quantity, int $ttlMs = 0): bool
    {
        self::checkId($shopId, 'shopId');
        self::checkId($itemId, 'itemId');
        self::checkId($locationId, 'locationId');
        $rc = $this->ffi->rsv_reserve_one($this->p(), $shopId, $token, strlen($token), $itemId, $locationId, $quantity, $ttlMs);
        if ($rc === -1) {
            return false;
        }
        if ($rc !== 0) {
            $e = ReserveException::fromCode($rc, $this->errmsg(), 'rsv_reserve_one');
            // its one line is line 0, as the library's message says
            $e->failedLine = $rc === -14 ? 0 : null;
            throw $e;
        }
        return true;
    }

    /**
     * Payment succeeded: the checkout's held units leave the stock for
     * good.  Claimed, or AlreadyClaimed for a repeat: the units were taken
     * once either way.
     *
     * @throws ReserveException Expired (the units went back: no stock for
     *         this order), AlreadyReleased, NotFound, Busy, InDoubt, ...
     */
    public function claim(int $shopId, string $token): ClaimResult
    {
        self::checkId($shopId, 'shopId');
        $rc = $this->ffi->rsv_claim($this->p(), $shopId, $token, strlen($token));
        if ($rc === -4) {
            return ClaimResult::AlreadyClaimed;
        }
        $this->check($rc, 'rsv_claim');
        return ClaimResult::Claimed;
    }

    /**
     * Payment failed or the buyer left: give the units back.  Quiet for a
     * checkout already released or expired.
     *
     * @throws AlreadyClaimed a claimed checkout cannot be released
     */
    public function release(int $shopId, string $token): void
    {
        self::checkId($shopId, 'shopId');
        $this->check($this->ffi->rsv_release($this->p(), $shopId, $token, strlen($token)), 'rsv_release');
    }

    /** Keep the holds $ttlMs from now (0: holdTtlMs), e.g. for a slow payment. */
    public function extend(int $shopId, string $token, int $ttlMs = 0): void
    {
        self::checkId($shopId, 'shopId');
        $this->check($this->ffi->rsv_extend($this->p(), $shopId, $token, strlen($token), $ttlMs), 'rsv_extend');
    }

    /** Where the checkout stands; NotFound for an unknown token. */
    public function status(int $shopId, string $token): CheckoutStatus
    {
        self::checkId($shopId, 'shopId');
        $st = $this->ffi->new('int32_t');
        $units = $this->ffi->new('int64_t');
        $ms = $this->ffi->new('int64_t');
        $rc = $this->ffi->rsv_checkout_status($this->p(), $shopId, $token, strlen($token), FFI::addr($st), FFI::addr($units), FFI::addr($ms));
        $this->check($rc, 'rsv_checkout_status');
        return new CheckoutStatus(Status::from($st->cdata), $units->cdata, $ms->cdata);
    }

    // ---- pools, expiry, stock ----

    /** Top the pool up from the ledger; returns the units added. */
    public function replenish(int $shopId, int $itemId, int $locationId): int
    {
        return $this->keyCall('rsv_replenish', $shopId, $itemId, $locationId);
    }

    /** Give the pool back to its ledger row (a sale is over); returns the units. */
    public function poolDrain(int $shopId, int $itemId, int $locationId): int
    {
        return $this->keyCall('rsv_pool_drain', $shopId, $itemId, $locationId);
    }

    /**
     * Give back expired holds (up to $maxHolds, 0: 10000), drain idle
     * pools, purge old checkouts; returns the holds given back.  Run it
     * every 10-60 s from one cron job or worker (many may run at once).
     */
    public function sweep(int $shopId, int $maxHolds = 0): int
    {
        self::checkId($shopId, 'shopId');
        $n = $this->ffi->new('int64_t');
        $this->check($this->ffi->rsv_sweep($this->p(), $shopId, $maxHolds, FFI::addr($n)), 'rsv_sweep');
        return $n->cdata;
    }

    /** sweep(), saying what each of its passes did. */
    public function sweepReport(int $shopId, int $maxHolds = 0): SweepResult
    {
        self::checkId($shopId, 'shopId');
        $r = $this->ffi->new('rsv_sweep_result');
        $r->version = 1;
        $this->check($this->ffi->rsv_sweep_report($this->p(), $shopId, $maxHolds, FFI::addr($r)), 'rsv_sweep_report');
        return new SweepResult($r->holds_released, $r->units_released, $r->journal_folded, $r->pool_rows_drained, $r->checkouts_purged);
    }

    /** Set the stock on hand (creating the ledger row); StockError below what is held. */
    public function stockSet(int $shopId, int $itemId, int $locationId, int $onHand): void
    {
        self::checkId($shopId, 'shopId');
        self::checkId($itemId, 'itemId');
        self::checkId($locationId, 'locationId');
        $this->check($this->ffi->rsv_stock_set($this->p(), $shopId, $itemId, $locationId, $onHand), 'rsv_stock_set');
    }

    /**
     * Add $delta (negative: take off) to the stock on hand; returns the
     * new stock on hand.  Not idempotent: after InDoubt read stockGet()
     * before repeating it.
     */
    public function stockAdjust(int $shopId, int $itemId, int $locationId, int $delta): int
    {
        self::checkId($shopId, 'shopId');
        self::checkId($itemId, 'itemId');
        self::checkId($locationId, 'locationId');
        $n = $this->ffi->new('int64_t');
        $this->check($this->ffi->rsv_stock_adjust($this->p(), $shopId, $itemId, $locationId, $delta, FFI::addr($n)), 'rsv_stock_adjust');
        return $n->cdata;
    }

    /** The stock of an item at a location, from one consistent read. */
    public function stockGet(int $shopId, int $itemId, int $locationId): Stock
    {
        self::checkId($shopId, 'shopId');
        self::checkId($itemId, 'itemId');
        self::checkId($locationId, 'locationId');
        $v = [$this->ffi->new('int64_t'), $this->ffi->new('int64_t'), $this->ffi->new('int64_t'), $this->ffi->new('int64_t')];
        $rc = $this->ffi->rsv_stock_get($this->p(), $shopId, $itemId, $locationId, FFI::addr($v[0]), FFI::addr($v[1]), FFI::addr($v[2]), FFI::addr($v[3]));
        $this->check($rc, 'rsv_stock_get');
        return new Stock($v[0]->cdata, $v[1]->cdata, $v[2]->cdata, $v[3]->cdata);
    }

    /**
     * Check the library's invariants for one shop (or every shop) on one
     * consistent snapshot; returns the violations (empty: clean).
     *
     * @return list<Violation>
     */
    public function audit(int $shopId = 0, bool $allShops = false): array
    {
        self::checkId($shopId, 'shopId');
        $found = [];
        $fn = static function ($arg, $shop, $item, $loc, $problem) use (&$found): void {
            $found[] = new Violation((int) $shop, (int) $item, (int) $loc, is_string($problem) ? $problem : FFI::string($problem));
        };
        $n = $this->ffi->new('int64_t');
        $rc = $this->ffi->rsv_audit($this->p(), $shopId, $allShops ? 1 : 0, $fn, null, FFI::addr($n));
        $this->check($rc, 'rsv_audit');
        return $found;
    }

    // ---- batches: many checkouts in one transaction's round trips ----

    /**
     * Hold many one-line checkouts at once: entries of [shopId, token,
     * itemId, locationId, quantity], at most 256.  Returns each entry's
     * answer (Code::Ok, Code::OutOfStock, ...; ReserveException::fromCode()
     * makes one an exception); throws only when the whole batch failed.
     *
     * @param list<array{int, string, int, int, int}> $entries
     * @return list<Code>
     */
    public function reserveBatch(array $entries, int $ttlMs = 0): array
    {
        [$n, $shops, $toks, $lens, $res, $keep] = $this->batchArrays($entries);
        $items = $this->ffi->new("uint64_t[$n]");
        $locs = $this->ffi->new("uint64_t[$n]");
        $qtys = $this->ffi->new("int64_t[$n]");
        foreach (array_values($entries) as $i => $e) {
            if (!is_int($e[2] ?? null) || !is_int($e[3] ?? null) || !is_int($e[4] ?? null)) {
                throw new \TypeError(sprintf('batch entry %d must be [int shopId, string token, int itemId, int locationId, int quantity]', $i));
            }
            self::checkId($e[2], 'itemId');
            self::checkId($e[3], 'locationId');
            $items[$i] = $e[2];
            $locs[$i] = $e[3];
            $qtys[$i] = $e[4];
        }
        $rc = $this->ffi->rsv_reserve_batch($this->p(), $n, $shops, $toks, $lens, $items, $locs, $qtys, $ttlMs, $res);
        $this->check($rc, 'rsv_reserve_batch');
        return self::codes($res, $n);
    }

    /**
     * Hold many carts at once: entries of [shopId, token, Cart], at most
     * 256.  Returns each entry's answer, as reserveBatch(); each cart held
     * says where in its allocations().
     *
     * @param list<array{int, string, Cart}> $entries
     * @return list<Code>
     */
    public function reserveCartBatch(array $entries, int $ttlMs = 0): array
    {
        [$n, $shops, $toks, $lens, $res, $keep] = $this->batchArrays($entries);
        $carts = $this->ffi->new("rsv_cart *[$n]");
        foreach (array_values($entries) as $i => $e) {
            if (!(($e[2] ?? null) instanceof Cart)) {
                throw new \TypeError(sprintf('batch entry %d must be [int shopId, string token, Cart cart]', $i));
            }
            $carts[$i] = $e[2]->ptr();
        }
        $rc = $this->ffi->rsv_reserve_cart_batch($this->p(), $n, $shops, $toks, $lens, $carts, $ttlMs, $res);
        $this->check($rc, 'rsv_reserve_cart_batch');
        return self::codes($res, $n);
    }

    /**
     * Claim many checkouts at once: entries of [shopId, token].  Returns
     * each entry's answer (Code::Ok, Code::Claimed for a repeat, ...).
     *
     * @param list<array{int, string}> $entries
     * @return list<Code>
     */
    public function claimBatch(array $entries): array
    {
        [$n, $shops, $toks, $lens, $res, $keep] = $this->batchArrays($entries);
        $this->check($this->ffi->rsv_claim_batch($this->p(), $n, $shops, $toks, $lens, $res), 'rsv_claim_batch');
        return self::codes($res, $n);
    }

    /**
     * Release many checkouts at once, as claimBatch().
     *
     * @param list<array{int, string}> $entries
     * @return list<Code>
     */
    public function releaseBatch(array $entries): array
    {
        [$n, $shops, $toks, $lens, $res, $keep] = $this->batchArrays($entries);
        $this->check($this->ffi->rsv_release_batch($this->p(), $n, $shops, $toks, $lens, $res), 'rsv_release_batch');
        return self::codes($res, $n);
    }

    // ---- statistics and the kill switch ----

    /** A counter of this context's calls of one kind. */
    public function stats(Stat $stat, Op $op = Op::All): int
    {
        $v = $this->ffi->new('uint64_t');
        $this->checkPlain($this->ffi->rsv_stats_get($this->p(), $stat->value, $op->value, FFI::addr($v)), 'rsv_stats_get');
        return (int) $v->cdata;
    }

    /** How many calls of kind $op answered $code. */
    public function statsOutcome(Op $op, Code $code): int
    {
        $v = $this->ffi->new('uint64_t');
        $this->checkPlain($this->ffi->rsv_stats_outcome($this->p(), $op->value, $code->value, FFI::addr($v)), 'rsv_stats_outcome');
        return (int) $v->cdata;
    }

    /** The estimated $p-th percentile latency (0..100) in microseconds. */
    public function statsPercentile(Op $op, float $p): int
    {
        $v = $this->ffi->new('uint64_t');
        $this->checkPlain($this->ffi->rsv_stats_percentile($this->p(), $op->value, $p, FFI::addr($v)), 'rsv_stats_percentile');
        return (int) $v->cdata;
    }

    public function statsReset(): void
    {
        $this->checkPlain($this->ffi->rsv_stats_reset($this->p()), 'rsv_stats_reset');
    }

    /**
     * This context's statistics as Prometheus text; $labels is added to
     * every sample, e.g. 'worker="3"'.
     */
    public function statsPrometheus(string $labels = ''): string
    {
        $snap = $this->ffi->new('rsv_stats_snapshot *');
        $this->checkPlain($this->ffi->rsv_stats_snapshot_new(FFI::addr($snap)), 'rsv_stats_snapshot_new');
        try {
            $this->checkPlain($this->ffi->rsv_stats_snapshot_add($snap, $this->p()), 'rsv_stats_snapshot_add');
            $needed = $this->ffi->new('size_t');
            $len = 1 << 16;
            for (;;) {
                $buf = $this->ffi->new("char[$len]");
                $rc = $this->ffi->rsv_stats_prometheus($snap, $labels === '' ? null : $labels, $buf, $len, FFI::addr($needed));
                if ($rc === -23 && $needed->cdata > $len) {
                    $len = (int) $needed->cdata;
                    continue;
                }
                $this->checkPlain($rc, 'rsv_stats_prometheus');
                return FFI::string($buf);
            }
        } finally {
            $this->ffi->rsv_stats_snapshot_free($snap);
        }
    }

    /**
     * The kill switch: with false, every call that writes throws Disabled
     * without touching the database; reads go on.
     */
    public function setEnabled(bool $enabled): void
    {
        $this->checkPlain($this->ffi->rsv_set_enabled($this->p(), $enabled ? 1 : 0), 'rsv_set_enabled');
    }

    // ---- helpers ----

    /** @internal */
    public static function checkId(int $id, string $what): void
    {
        if ($id < 0) {
            throw new \ValueError(sprintf('%s must be 0 or more, %d given', $what, $id));
        }
    }

    /** @internal the library's context, for a Migration over it */
    public function ptr(): CData
    {
        return $this->p();
    }

    private function p(): CData
    {
        if ($this->ctx === null) {
            throw new InvalidArgument(-10, 'the context is closed');
        }
        return $this->ctx;
    }

    private function check(int $rc, string $function): void
    {
        if ($rc !== 0) {
            throw ReserveException::fromCode($rc, $this->errmsg(), $function);
        }
    }

    /** For functions that leave the context's message alone. */
    private function checkPlain(int $rc, string $function): void
    {
        if ($rc !== 0) {
            throw ReserveException::fromCode($rc, '', $function);
        }
    }

    private function keyCall(string $fn, int $shopId, int $itemId, int $locationId): int
    {
        self::checkId($shopId, 'shopId');
        self::checkId($itemId, 'itemId');
        self::checkId($locationId, 'locationId');
        $n = $this->ffi->new('int64_t');
        $this->check($this->ffi->$fn($this->p(), $shopId, $itemId, $locationId, FFI::addr($n)), $fn);
        return $n->cdata;
    }

    /**
     * @param array<mixed> $entries
     * @return array{int, CData, CData, CData, CData, list<CData>}
     */
    private function batchArrays(array $entries): array
    {
        $n = count($entries);
        if ($n < 1 || $n > self::BATCH_MAX) {
            throw new \ValueError(sprintf('a batch takes 1..%d entries, %d given', self::BATCH_MAX, $n));
        }
        $shops = $this->ffi->new("uint64_t[$n]");
        $toks = $this->ffi->new("void *[$n]");
        $lens = $this->ffi->new("size_t[$n]");
        $res = $this->ffi->new("int[$n]");
        $keep = [];
        foreach (array_values($entries) as $i => $e) {
            if (!is_array($e) || !is_int($e[0] ?? null) || !is_string($e[1] ?? null)) {
                throw new \TypeError(sprintf('batch entry %d must start with [int shopId, string token]', $i));
            }
            self::checkId($e[0], 'shopId');
            $len = strlen($e[1]);
            $buf = $this->ffi->new('char[' . max(1, $len) . ']');
            FFI::memcpy($buf, $e[1], $len);
            $keep[] = $buf;
            $shops[$i] = $e[0];
            $toks[$i] = $this->ffi->cast('void *', FFI::addr($buf));
            $lens[$i] = $len;
        }
        return [$n, $shops, $toks, $lens, $res, $keep];
    }

    /** @return list<Code> */
    private static function codes(CData $res, int $n): array
    {
        $out = [];
        for ($i = 0; $i < $n; $i++) {
            $out[] = Code::tryFrom($res[$i]) ?? Code::Db;
        }
        return $out;
    }
}
