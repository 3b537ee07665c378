<?php
/*
 * Migration.php - moving a live shop from the store it sold through
 * before (the old store) to libreserve (reserve/migrate.h): the checkout's
 * one call site, sent to the old store, to libreserve or to both by the
 * shop's stage, through the library's handover calls.
 */

declare(strict_types=1);

namespace Libreserve;

use FFI;
use FFI\CData;
use Libreserve\Exception\AlreadyClaimed;
use Libreserve\Exception\InvalidArgument;
use Libreserve\Exception\ReserveException;

/**
 * The old store is a PHP callable:
 *
 *   fn(Op $op, int $shopId, string $token, int $itemId, int $locationId,
 *      int $quantity, int $ttlMs): Code
 *
 * $op is Op::Reserve, Op::Claim or Op::Release (the last four 0 but for a
 * reserve: the old store finds the checkout by its token).  It answers
 * Code::Ok when it accepted, Code::OutOfStock, Code::NotFound,
 * Code::Expired, Code::Claimed or Code::Released when it refused.  A
 * throw, or a return that is no Code, is the old store failing
 * (RSV_EDB: counted MigrationStat::OldFailed, never compared); another
 * failure code (Code::Conn, ...) fails the same way with that code.
 *
 * PHP cannot take a call on the library's thread, so no C callback is
 * registered: each call asks the library for the stage to act at
 * (rsv_migrate_route), asks the callable itself at stages old and shadow,
 * and hands its answer over (rsv_migrate_*_answered).  At primary the
 * library puts the old store's side into the handle's outbox, which this
 * object empties after each call and in drain() and close(), calling the
 * callable on this thread (rsv_migrate_mirror_next, rsv_migrate_mirror_done).
 *
 * reserveOne(), claim() and release() answer and throw as Context's do,
 * with the answer of the store the stage names.
 */
final class Migration
{
    /** The longest token (RSV_TOKEN_MAX). */
    private const TOKEN_MAX = 128;
    private const ROUTE_NOWAIT = 1;
    /** What close() waits for the work offered to be done. */
    private const CLOSE_DRAIN_MS = 5000;
    private const SLOT_PREFIX = 'LIBRESERVE_MIG_';
    /** The answers of a failing old store kept for mirrorErrors(). */
    private const ERRORS_KEPT = 16;
    private const ANSWERED = [
        1 => 'rsv_migrate_reserve_one_answered',
        2 => 'rsv_migrate_claim_answered',
        3 => 'rsv_migrate_release_answered',
    ];

    /** @var array<string, Migration> this request's persistent handles */
    private static array $persistent = [];
    /** @var list<\WeakReference<Migration>> */
    private static array $live = [];
    private static bool $hooked = false;

    private FFI $ffi;
    private ?CData $m;
    private Context $ctx;
    /** @var callable */
    private $oldStore;
    private ?string $slot = null;
    /** The ticket of the outbox item whose call on the old store is under way. */
    private ?int $inFlight = null;
    private string $detail = '';
    private ?\Throwable $cause = null;
    /** @var list<\Throwable> */
    private array $mirrorErrors = [];

    private function __construct(FFI $ffi, CData $m, Context $ctx, callable $oldStore)
    {
        $this->ffi = $ffi;
        $this->m = $m;
        $this->ctx = $ctx;
        $this->oldStore = $oldStore;
        self::watch($this);
    }

    /**
     * Open a migration handle over $ctx (it answers at stages primary and
     * complete; close the handle before it).  $shadowDsn is the connection
     * of the handle's own thread (libreserve's side of shadow, the stage
     * reads, the counters); $queueMax bounds the work waiting (0: 4096);
     * $refreshMs is how often the stages are read (50..60000, default
     * 1000).  The handle starts a thread and a connection: in PHP-FPM use
     * persistent(), one per worker.
     *
     * @throws ReserveException SchemaError (no migration tables: load
     *         sql/schema.sql), ConnectionLost, InvalidArgument, ...
     */
    public static function open(Context $ctx, string $shadowDsn, callable $oldStore, int $queueMax = 0, ?int $refreshMs = null): self
    {
        self::checkArgs($shadowDsn, $queueMax, $refreshMs);
        $ffi = Library::ffi();
        $out = $ffi->new('rsv_migration *');
        $rc = $ffi->rsv_migrate_open(FFI::addr($out), $ctx->ptr(), $shadowDsn, $queueMax);
        if ($rc !== 0) {
            throw ReserveException::fromCode($rc, $ctx->errmsg(), 'rsv_migrate_open');
        }
        if ($refreshMs !== null) {
            $ffi->rsv_migrate_set_refresh_ms($out, $refreshMs);
        }
        return new self($ffi, $out, $ctx, $oldStore);
    }

    /**
     * The worker's handle over its persistent context (Context::persistent()),
     * opened on the process's first call and found again in every later
     * request, with this request's $oldStore.  The end of a request leaves
     * it open, its thread reading the stages; close() closes it.  The
     * worker's exit ends it with the process, without rsv_migrate_close:
     * see the README's "Migrating a live shop".
     */
    public static function persistent(Context $ctx, string $shadowDsn, callable $oldStore, int $queueMax = 0, ?int $refreshMs = null): self
    {
        if (!$ctx->isPersistent()) {
            throw new \ValueError('Migration::persistent() takes a Context::persistent() context: the handle outlives the request');
        }
        self::checkArgs($shadowDsn, $queueMax, $refreshMs);
        $ffi = Library::ffi();
        $ctxAddr = $ffi->cast('uintptr_t', $ctx->ptr())->cdata;
        $key = $ctxAddr . "\0" . $shadowDsn . "\0" . $queueMax;
        $mine = self::$persistent[$key] ?? null;
        if ($mine !== null && $mine->m !== null) {
            $mine->oldStore = $oldStore;
            return $mine;
        }
        $slot = ProcessSlot::name(self::SLOT_PREFIX, $key);
        $p = ProcessSlot::find($ffi, $slot, 'rsv_migration *');
        if ($p !== null) {
            $mig = new self($ffi, $p, $ctx, $oldStore);
            if ($refreshMs !== null) {
                $ffi->rsv_migrate_set_refresh_ms($p, $refreshMs);
            }
        } else {
            $mig = self::open($ctx, $shadowDsn, $oldStore, $queueMax, $refreshMs);
            ProcessSlot::keep($ffi, $slot, $mig->m);
        }
        $mig->slot = $slot;
        return self::$persistent[$key] = $mig;
    }

    /** Whether the handle stays open across requests (persistent()). */
    public function isPersistent(): bool
    {
        return $this->slot !== null;
    }

    public function isClosed(): bool
    {
        return $this->m === null;
    }

    // ---- the checkout's calls ----

    /**
     * Hold $quantity units for $token in the store the shop's stage names.
     * True when held, false when out of stock; throws as
     * Context::reserveOne() (an old store that failed: DatabaseError with
     * its exception as getPrevious(), or the code it answered).
     */
    public function reserveOne(int $shopId, string $token, int $itemId, int $locationId, int $quantity, int $ttlMs = 0): bool
    {
        Context::checkId($shopId, 'shopId');
        Context::checkId($itemId, 'itemId');
        Context::checkId($locationId, 'locationId');
        $rc = $this->call(Op::Reserve, $shopId, $token, [$itemId, $locationId, $quantity, $ttlMs]);
        if ($rc === -1) {
            return false;
        }
        if ($rc !== 0) {
            $e = $this->error($rc, 'rsv_migrate_reserve_one');
            $e->failedLine = $rc === -14 ? 0 : null;
            throw $e;
        }
        return true;
    }

    /**
     * Claim the checkout in the store the shop's stage names: Claimed, or
     * AlreadyClaimed for a repeat; throws as Context::claim().
     */
    public function claim(int $shopId, string $token): ClaimResult
    {
        Context::checkId($shopId, 'shopId');
        $rc = $this->call(Op::Claim, $shopId, $token, [0, 0, 0, 0]);
        if ($rc === -4) {
            return ClaimResult::AlreadyClaimed;
        }
        if ($rc !== 0) {
            throw $this->error($rc, 'rsv_migrate_claim');
        }
        return ClaimResult::Claimed;
    }

    /**
     * Release the checkout in the store the shop's stage names.
     *
     * @throws AlreadyClaimed a claimed checkout cannot be released
     */
    public function release(int $shopId, string $token): void
    {
        Context::checkId($shopId, 'shopId');
        $rc = $this->call(Op::Release, $shopId, $token, [0, 0, 0, 0]);
        if ($rc !== 0) {
            throw $this->error($rc, 'rsv_migrate_release');
        }
    }

    // ---- what the handle follows and counts ----

    /** The shop's stage as the handle follows it now. */
    public function stage(int $shopId): Stage
    {
        Context::checkId($shopId, 'shopId');
        $st = $this->ffi->new('int32_t');
        $this->check($this->ffi->rsv_migrate_stage($this->p(), $shopId, FFI::addr($st)), 'rsv_migrate_stage');
        return Stage::from($st->cdata);
    }

    /** A counter of one shop, or of every shop when $shopId is null. */
    public function stat(?int $shopId, MigrationStat $kind): int
    {
        if ($shopId !== null) {
            Context::checkId($shopId, 'shopId');
        }
        $v = $this->ffi->new('uint64_t');
        $rc = $this->ffi->rsv_migrate_stat($this->p(), $shopId ?? 0, $shopId === null ? 1 : 0, $kind->value, FFI::addr($v));
        $this->check($rc, 'rsv_migrate_stat');
        return (int) $v->cdata;
    }

    /**
     * Every counter of one shop (or of every shop), by the names of
     * MigrationStat: ['BothAccepted' => 3, ...].
     *
     * @return array<string, int>
     */
    public function stats(?int $shopId = null): array
    {
        $out = [];
        foreach (MigrationStat::cases() as $k) {
            $out[$k->name] = $this->stat($shopId, $k);
        }
        return $out;
    }

    /** The counters, stages and queue depth in the Prometheus text format. */
    public function prometheus(): string
    {
        $m = $this->p();
        $needed = $this->ffi->new('size_t');
        $len = 1 << 14;
        for (;;) {
            $buf = $this->ffi->new("char[$len]");
            $rc = $this->ffi->rsv_migrate_prometheus($m, $buf, $len, FFI::addr($needed));
            if ($rc === -23 && $needed->cdata >= $len) {
                $len = (int) $needed->cdata + 1;
                continue;
            }
            $this->check($rc, 'rsv_migrate_prometheus');
            return FFI::string($buf, (int) $needed->cdata);
        }
    }

    /**
     * The old store's exceptions (and returns that were no Code) while it
     * was kept current at primary, the last 16, oldest first: those calls
     * are counted OldFailed and nobody else sees them.
     *
     * @return list<\Throwable>
     */
    public function mirrorErrors(): array
    {
        return $this->mirrorErrors;
    }

    /**
     * Wait until the work offered is done (libreserve's side of shadow on
     * the handle's thread; the old store's side of primary here, first),
     * at most $timeoutMs: true, or false if some is left.
     */
    public function drain(int $timeoutMs = 10000): bool
    {
        if ($timeoutMs < 0 || $timeoutMs > 0xffffffff) {
            throw new \ValueError(sprintf('timeoutMs must be in 0..4294967295, %d given', $timeoutMs));
        }
        $m = $this->p();
        // the outbox fills only from this object's own calls (and from
        // the answers it reports): once emptied here, the rest is the
        // handle's thread's
        $this->pump();
        return $this->ffi->rsv_migrate_drain($m, $timeoutMs) === 0;
    }

    /**
     * Do the work offered (at most 5 s more), then close the handle: what
     * is still left is counted dropped and its shops marked for a
     * compare (rsv_migrate_close).  A persistent handle too.
     */
    public function close(): void
    {
        if ($this->m === null) {
            return;
        }
        // from inside the old store's call (an item in flight) nothing
        // more can be done here: what is left is dropped now
        $this->pump();
        $this->ffi->rsv_migrate_drain($this->m, $this->inFlight === null ? self::CLOSE_DRAIN_MS : 0);
        $this->pump();
        if ($this->slot !== null) {
            ProcessSlot::clear($this->ffi, $this->slot);
            $this->slot = null;
        }
        $this->ffi->rsv_migrate_close($this->m);
        $this->m = null;
    }

    public function __destruct()
    {
        // a persistent handle outlives this request's objects
        if ($this->slot === null) {
            $this->close();
        }
    }

    // ---- how a call is made ----

    /**
     * One call of the checkout; returns the deciding store's code and
     * leaves its message (and the old store's exception) for error().
     *
     * @param array{int, int, int, int} $res item, location, quantity, TTL
     */
    private function call(Op $op, int $shopId, string $token, array $res): int
    {
        $m = $this->p();
        $ctx = $this->ctx->ptr(); // its message, when libreserve answered
        $this->detail = '';
        $this->cause = null;
        $fn = self::ANSWERED[$op->value];
        $len = strlen($token);
        $args = $op === Op::Reserve ? $res : [];
        // the library's own token check before the old store is asked: at
        // stage old a call does nothing else
        $rc = $this->ffi->$fn($m, Stage::Old->value, $shopId, $token, $len, ...[...$args, 0]);
        if ($rc !== 0) {
            return $rc;
        }
        $stage = $this->route($m, $shopId);
        if ($stage <= Stage::Shadow->value) {
            $old = $this->askOld($op, $shopId, $token, ...$res);
            // at shadow this only queues libreserve's side
            $rc = $this->ffi->$fn($m, $stage, $shopId, $token, $len, ...[...$args, $old]);
            if ($rc !== 0 && $rc === $old) {
                $this->detail = $this->cause !== null
                    ? 'the old store failed: ' . $this->cause->getMessage()
                    : 'the old store answered ' . Code::nameOf($old);
            }
        } else {
            $rc = $this->ffi->$fn($m, $stage, $shopId, $token, $len, ...[...$args, 0]);
            if ($rc !== 0) {
                $this->detail = (string) $this->ffi->rsv_errmsg($ctx);
            }
            $this->pump();
        }
        return $rc;
    }

    /** The stage the shop's call acts at. */
    private function route(CData $m, int $shopId): int
    {
        $st = $this->ffi->new('int32_t');
        $rc = $this->ffi->rsv_migrate_route($m, $shopId, self::ROUTE_NOWAIT, FFI::addr($st));
        if ($rc === -6) {
            // right after a flip: the earlier work first, ours (the
            // outbox) done here, the thread's waited for
            $this->pump();
            $rc = $this->ffi->rsv_migrate_route($m, $shopId, 0, FFI::addr($st));
        }
        $this->check($rc, 'rsv_migrate_route');
        return $st->cdata;
    }

    /** The old store's answer as a code; its exception left in $this->cause. */
    private function askOld(Op $op, int $shopId, string $token, int $itemId, int $locationId, int $quantity, int $ttlMs): int
    {
        try {
            $r = ($this->oldStore)($op, $shopId, $token, $itemId, $locationId, $quantity, $ttlMs);
        } catch (\Throwable $e) {
            $this->cause = $e;
            return Code::Db->value;
        }
        if (!$r instanceof Code || $r->value > 0) {
            $this->cause = new \UnexpectedValueException(sprintf(
                'the old store returned %s, not a Libreserve\Code',
                $r instanceof Code ? 'Code::' . $r->name : get_debug_type($r)
            ));
            return Code::Db->value;
        }
        return $r->value;
    }

    /** The outbox's items done on the old store, until it is empty. */
    private function pump(): void
    {
        if ($this->inFlight !== null || $this->m === null) {
            return; // the old store calling this handle back
        }
        $f = $this->ffi;
        $ticket = $f->new('uint64_t');
        $op = $f->new('uint32_t');
        $shop = $f->new('uint64_t');
        $tok = $f->new('char[' . self::TOKEN_MAX . ']');
        $len = $f->new('size_t');
        $item = $f->new('uint64_t');
        $loc = $f->new('uint64_t');
        $qty = $f->new('int64_t');
        $ttl = $f->new('int64_t');
        while ($f->rsv_migrate_mirror_next($this->m, 0, FFI::addr($ticket), FFI::addr($op), FFI::addr($shop), $tok, self::TOKEN_MAX, FFI::addr($len), FFI::addr($item), FFI::addr($loc), FFI::addr($qty), FFI::addr($ttl)) === 0) {
            $this->inFlight = (int) $ticket->cdata;
            $this->cause = null;
            $old = Code::Db->value;
            try {
                $old = $this->askOld(Op::from($op->cdata), (int) $shop->cdata, FFI::string($tok, (int) $len->cdata), (int) $item->cdata, (int) $loc->cdata, (int) $qty->cdata, (int) $ttl->cdata);
            } finally {
                $f->rsv_migrate_mirror_done($this->m, $this->inFlight, $old);
                $this->inFlight = null;
            }
            if ($this->cause !== null) {
                $this->mirrorErrors[] = $this->cause;
                $this->mirrorErrors = array_slice($this->mirrorErrors, -self::ERRORS_KEPT);
                $this->cause = null;
            }
        }
    }

    private function error(int $rc, string $function): ReserveException
    {
        return ReserveException::fromCode($rc, $this->detail, $function, $this->cause);
    }

    private function p(): CData
    {
        if ($this->m === null) {
            throw new InvalidArgument(-10, 'the migration handle is closed');
        }
        if ($this->ctx->isClosed()) {
            throw new InvalidArgument(-10, 'the context of the migration handle is closed: close the handle first');
        }
        return $this->m;
    }

    private function check(int $rc, string $function): void
    {
        if ($rc !== 0) {
            throw ReserveException::fromCode($rc, '', $function);
        }
    }

    private static function checkArgs(string $shadowDsn, int $queueMax, ?int $refreshMs): void
    {
        if (str_contains($shadowDsn, "\0")) {
            throw new \ValueError('the shadow DSN must not contain NUL bytes');
        }
        if ($queueMax < 0 || $queueMax > 0xffffffff) {
            throw new \ValueError(sprintf('queueMax must be in 0..4294967295, %d given', $queueMax));
        }
        if ($refreshMs !== null && ($refreshMs < 50 || $refreshMs > 60000)) {
            throw new \ValueError(sprintf('refreshMs must be in 50..60000, %d given', $refreshMs));
        }
    }

    /**
     * A fatal error (max_execution_time) inside the old store's call at
     * primary skips every finally: the request's shutdown reports that
     * item failed, so that it does not hold a persistent handle's books
     * and its next flip open for ever.
     */
    private static function watch(self $m): void
    {
        self::$live[] = \WeakReference::create($m);
        if (!self::$hooked) {
            self::$hooked = true;
            register_shutdown_function(static function (): void {
                foreach (self::$live as $ref) {
                    $mig = $ref->get();
                    if ($mig !== null && $mig->m !== null && $mig->inFlight !== null) {
                        $mig->ffi->rsv_migrate_mirror_done($mig->m, $mig->inFlight, Code::Db->value);
                        $mig->inFlight = null;
                    }
                }
            });
        }
        self::$live = array_values(array_filter(self::$live, static fn (\WeakReference $r): bool => $r->get() !== null));
    }
}
