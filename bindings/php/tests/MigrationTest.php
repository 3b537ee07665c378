<?php
/*
 * MigrationTest.php - Migration (reserve/migrate.h) against a real server
 * with an old store kept in PHP arrays (OldStore): the shop's stage set in
 * rsv_migration_stage as rsv-admin migrate sets it; shadow with a planted
 * mismatch; primary keeping the old store current through the outbox; the
 * flip back; the books after a drain and after a close; the persistent
 * handle; bad input.
 */

declare(strict_types=1);

namespace Libreserve\Tests;

use Libreserve\ClaimResult;
use Libreserve\Code;
use Libreserve\Context;
use Libreserve\Exception\AlreadyClaimed;
use Libreserve\Exception\Busy;
use Libreserve\Exception\DatabaseError;
use Libreserve\Exception\InvalidArgument;
use Libreserve\Exception\InvalidToken;
use Libreserve\Exception\NotFound;
use Libreserve\Migration;
use Libreserve\MigrationStat;
use Libreserve\Stage;
use Libreserve\Status;
use PHPUnit\Framework\TestCase;

final class MigrationTest extends TestCase
{
    private const ITEM = 1;
    private const LOC = 1;
    private static int $nextShop = 700;
    private Context $ctx;
    private int $shop;

    protected function setUp(): void
    {
        $this->ctx = Context::open(TestDB::dsn());
        $this->shop = ++self::$nextShop;
    }

    protected function tearDown(): void
    {
        $this->ctx->close();
    }

    /** As rsv-admin migrate sets a stage: the change row locked, then the next version. */
    private static function setStage(int $shop, Stage $stage): void
    {
        TestDB::sql('START TRANSACTION; UPDATE rsv_migration_change SET changes = changes + 1, changed_at = NOW(6) WHERE id = 1; '
            . 'INSERT INTO rsv_migration_stage (shop_id, stage, version, changed_at, reason) '
            . "SELECT $shop, {$stage->value}, COALESCE(MAX(version), 0) + 1, NOW(6), 'php test' "
            . 'FROM rsv_migration_stage ON DUPLICATE KEY UPDATE stage = VALUES(stage), '
            . 'version = VALUES(version), changed_at = VALUES(changed_at); COMMIT');
    }

    private function moveTo(Migration $m, Stage $stage): void
    {
        self::setStage($this->shop, $stage);
        for ($i = 0; $i < 3000; $i++) {
            if ($m->stage($this->shop) === $stage) {
                return;
            }
            usleep(10000);
        }
        $this->fail("stage {$stage->name} never followed");
    }

    /** A handle over the test's context; libreserve holds $libStock units, the old store $oldStock. */
    private function scene(int $libStock, OldStore $old, int $queueMax = 0): Migration
    {
        $this->ctx->stockSet($this->shop, self::ITEM, self::LOC, $libStock);
        return Migration::open($this->ctx, TestDB::dsn(), $old, $queueMax, 100);
    }

    private function status(string $token): ?Status
    {
        try {
            return $this->ctx->status($this->shop, $token)->status;
        } catch (NotFound) {
            return null;
        }
    }

    /** @param callable(): mixed $fn */
    private function throws(string $class, callable $fn): \Throwable
    {
        try {
            $fn();
        } catch (\Throwable $e) {
            $this->assertInstanceOf($class, $e, $e->getMessage());
            return $e;
        }
        $this->fail("no $class thrown");
    }

    private function counted(string $class): int
    {
        return TestDB::int("SELECT COALESCE(SUM(n), 0) FROM rsv_migration_counts WHERE shop_id = {$this->shop} AND class = '$class'");
    }

    public function testShadowAnswersAsTheOldStoreAndCountsAPlantedMismatch(): void
    {
        $old = new OldStore(10);
        $m = $this->scene(10, $old);
        $this->assertSame(Stage::Old, $m->stage($this->shop));
        $this->assertTrue($m->reserveOne($this->shop, 'before', self::ITEM, self::LOC, 1));
        $this->assertSame(0, $m->stat($this->shop, MigrationStat::Offered));
        $this->assertNull($this->status('before'), 'stage old reaches the old store only');

        $this->moveTo($m, Stage::Shadow);
        $this->assertTrue($m->reserveOne($this->shop, 's1', self::ITEM, self::LOC, 2));
        // planted: the old store refuses one reserve libreserve can make
        $old->refuseNext = true;
        $this->assertFalse($m->reserveOne($this->shop, 's2', self::ITEM, self::LOC, 1));
        $this->assertSame(ClaimResult::Claimed, $m->claim($this->shop, 's1'));
        $this->assertSame(ClaimResult::Claimed, $m->claim($this->shop, 'before')); // libreserve never saw it
        $this->assertSame(ClaimResult::AlreadyClaimed, $m->claim($this->shop, 's1'));
        $e = $this->throws(AlreadyClaimed::class, fn () => $m->release($this->shop, 's1'));
        $this->assertSame('rsv_migrate_release', $e->function);
        $this->assertStringContainsString('the old store answered RSV_ECLAIMED', $e->getMessage());

        // the old store failing: thrown, or no Code returned
        $old->failNext = new \RuntimeException('redis down');
        $e = $this->throws(DatabaseError::class, fn () => $m->release($this->shop, 's1'));
        $this->assertSame('redis down', $e->getPrevious()?->getMessage());
        $this->assertStringContainsString('the old store failed: redis down', $e->getMessage());
        $old->failNext = true;
        $e = $this->throws(DatabaseError::class, fn () => $m->claim($this->shop, 's1'));
        $this->assertInstanceOf(\UnexpectedValueException::class, $e->getPrevious());
        // a failure code of its own is the old store failing with that code
        $old->failNext = Code::Busy;
        $this->throws(Busy::class, fn () => $m->claim($this->shop, 's1'));

        $this->assertTrue($m->drain(10000));
        $this->assertSame(Status::Claimed, $this->status('s1'));
        $this->assertSame(Status::Released, $this->status('s2'), "libreserve's hold the old store refused is given back");
        $this->assertSame([
            'BothAccepted' => 2, 'BothRefused' => 2, 'OldRefusedNewAccepted' => 1, 'OldAcceptedNewRefused' => 0,
            'NewFailed' => 0, 'Unknown' => 1, 'OldFailed' => 3, 'Offered' => 6, 'Applied' => 6, 'Dropped' => 0,
            'StageReadFailed' => 0,
        ], $m->stats($this->shop));
        $this->assertGreaterThanOrEqual(1, $m->stat(null, MigrationStat::OldRefusedNewAccepted));
        $this->assertStringContainsString(
            "libreserve_migration_calls_total{shop=\"{$this->shop}\",class=\"old_refused_new_accepted\"} 1\n",
            $m->prometheus()
        );
        $this->assertStringContainsString("libreserve_migration_stage{shop=\"{$this->shop}\"} 1\n", $m->prometheus());
        $m->close();
        $this->assertSame(1, $this->counted('old_refused_new_accepted'), 'close writes the counters');
    }

    public function testPrimaryKeepsTheOldStoreCurrentAndShadowTakesOverAgain(): void
    {
        $old = new OldStore(10);
        $m = $this->scene(2, $old);
        $this->moveTo($m, Stage::Shadow);
        $this->moveTo($m, Stage::Primary);
        // libreserve answers; the old store has the hold when the call returns
        $this->assertTrue($m->reserveOne($this->shop, 'p1', self::ITEM, self::LOC, 2));
        $this->assertSame('held', $old->state('p1'));
        $this->assertSame(8, $old->stock);
        // libreserve has none left, the old store has: the buyer hears
        // libreserve, and the old store's hold is given back
        $this->assertFalse($m->reserveOne($this->shop, 'p2', self::ITEM, self::LOC, 1));
        $this->assertSame('released', $old->state('p2'));
        $this->assertSame(8, $old->stock);
        $this->assertSame(ClaimResult::Claimed, $m->claim($this->shop, 'p1'));
        $this->assertSame('claimed', $old->state('p1'));
        $e = $this->throws(NotFound::class, fn () => $m->release($this->shop, 'never'));
        $this->assertSame('rsv_migrate_release', $e->function);
        // the old store failing while kept current: counted, kept, not thrown
        $this->ctx->stockSet($this->shop, self::ITEM, self::LOC, 3);
        $old->failNext = new \RuntimeException('redis down');
        $this->assertTrue($m->reserveOne($this->shop, 'p3', self::ITEM, self::LOC, 1));
        $this->assertSame('redis down', $m->mirrorErrors()[0]->getMessage());
        $this->assertTrue($m->drain(10000));
        $st = $m->stats($this->shop);
        $this->assertSame(2, $st['BothAccepted']);
        $this->assertSame(1, $st['OldAcceptedNewRefused']);
        $this->assertSame(1, $st['OldFailed']);
        $this->assertSame(4, $st['Offered']);
        $this->assertSame($st['Offered'], $st['Applied'] + $st['Dropped']);

        // the kill switch: back to shadow, the old store answers again; a
        // hold made at primary is in both stores
        $this->assertTrue($m->reserveOne($this->shop, 'p4', self::ITEM, self::LOC, 1));
        $this->moveTo($m, Stage::Shadow);
        $this->assertSame(ClaimResult::Claimed, $m->claim($this->shop, 'p4'));
        $old->refuseNext = true;
        $this->assertFalse($m->reserveOne($this->shop, 's5', self::ITEM, self::LOC, 1));
        $this->assertTrue($m->drain(10000));
        $this->assertSame(Status::Claimed, $this->status('p4'));
        $this->assertSame('claimed', $old->state('p4'));
        $this->assertSame(4, $m->stat($this->shop, MigrationStat::BothAccepted));

        // complete: libreserve alone
        $this->moveTo($m, Stage::Complete);
        $calls = count($old->calls);
        $this->assertTrue($m->reserveOne($this->shop, 'c1', self::ITEM, self::LOC, 1));
        $this->assertTrue($m->drain(10000));
        $this->assertCount($calls, $old->calls);
        $this->assertSame(Status::Held, $this->status('c1'));
        $m->close();
    }

    public function testTheBooksBalanceAfterADrainAndAfterAClose(): void
    {
        $old = new OldStore(100);
        $m = $this->scene(100, $old);
        $this->moveTo($m, Stage::Shadow);
        for ($i = 0; $i < 20; $i++) {
            $this->assertTrue($m->reserveOne($this->shop, "b$i", self::ITEM, self::LOC, 1));
        }
        $this->moveTo($m, Stage::Primary);
        for ($i = 0; $i < 20; $i++) {
            $this->assertSame(ClaimResult::Claimed, $m->claim($this->shop, "b$i"));
        }
        $this->assertTrue($m->drain(10000));
        $st = $m->stats($this->shop);
        $this->assertSame(40, $st['Offered']);
        $this->assertSame($st['Offered'], $st['Applied'] + $st['Dropped'], json_encode($st));
        $this->assertSame(80, $old->stock);
        $this->assertSame(20, count(array_filter($old->holds, fn ($h) => $h[1] === 'claimed')));

        // work left at close (a call on the old store cut short: the
        // outbox never emptied) is counted dropped and the shop marked
        $this->assertTrue($m->reserveOne($this->shop, 'left', self::ITEM, self::LOC, 1));
        $inFlight = new \ReflectionProperty(Migration::class, 'inFlight');
        $inFlight->setValue($m, PHP_INT_MAX); // its pump stands aside
        $this->assertTrue($m->reserveOne($this->shop, 'cut', self::ITEM, self::LOC, 1));
        $this->assertFalse($m->drain(0));
        $this->assertNull($old->state('cut'));
        $m->close();
        $this->assertSame(1, $this->counted('dropped'));
        $this->assertSame(42, $this->counted('offered'));
        $this->assertSame($this->counted('offered'), $this->counted('applied') + $this->counted('dropped'));
        $this->assertSame(1, TestDB::int("SELECT needs_compare FROM rsv_migration_stage WHERE shop_id = {$this->shop}"));
    }

    public function testPersistentHandleAcrossRequests(): void
    {
        $base = TestDB::connections();
        $ctx = Context::persistent(TestDB::dsn());
        $first = new OldStore(10);
        $a = Migration::persistent($ctx, TestDB::dsn(), $first, 0, 100);
        $this->assertTrue($a->isPersistent());
        $this->assertSame($a, Migration::persistent($ctx, TestDB::dsn(), $first));
        $this->assertSame($base + 2, TestDB::connections(), 'the context and the handle\'s thread');
        $this->ctx->stockSet($this->shop, self::ITEM, self::LOC, 10);
        $this->moveTo($a, Stage::Shadow);
        $this->assertTrue($a->reserveOne($this->shop, 'r1', self::ITEM, self::LOC, 1));
        // the end of a request: PHP drops every object and static
        foreach ([Context::class, Migration::class] as $class) {
            (new \ReflectionProperty($class, 'persistent'))->setValue(null, []);
        }
        unset($a, $ctx);
        gc_collect_cycles();
        $this->assertSame($base + 2, TestDB::connections(), 'the handle outlives the request');
        // the next request: the same handle (its counters), this request's old store
        $second = new OldStore(9);
        $second->holds = $first->holds;
        $b = Migration::persistent(Context::persistent(TestDB::dsn()), TestDB::dsn(), $second);
        $this->assertSame(Stage::Shadow, $b->stage($this->shop));
        $this->assertSame(ClaimResult::Claimed, $b->claim($this->shop, 'r1'));
        $this->assertSame([['Claim', 'r1']], $second->calls);
        $this->assertTrue($b->drain(10000));
        $this->assertSame(2, $b->stat($this->shop, MigrationStat::Offered));
        $b->close();
        Context::persistent(TestDB::dsn())->close();
        $this->assertSame($base, TestDB::connections());
    }

    public function testACallCutShortByAFatalErrorIsReportedAtShutdown(): void
    {
        $this->ctx->stockSet($this->shop, self::ITEM, self::LOC, 5);
        self::setStage($this->shop, Stage::Primary);
        // a process of its own: the fatal error ends it; a shutdown function
        // registered after the package's prints what the handle counted
        $script = sprintf(<<<'PHP'
            require %s;
            use Libreserve\{Context, Migration, MigrationStat};
            $m = Migration::open(Context::open(%s), %s, function (): never { trigger_error('cut short', E_USER_ERROR); });
            register_shutdown_function(function () use ($m): void {
                echo json_encode([$m->stat(%d, MigrationStat::OldFailed), $m->drain(0)]);
            });
            $m->reserveOne(%d, 'f1', 1, 1, 1);
            PHP, var_export(dirname(__DIR__) . '/autoload.php', true), var_export(TestDB::dsn(), true), var_export(TestDB::dsn(), true), $this->shop, $this->shop);
        $p = proc_open([PHP_BINARY, '-d', 'display_errors=stderr', '-r', $script], [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
        $out = (string) stream_get_contents($pipes[1]);
        $err = (string) stream_get_contents($pipes[2]);
        proc_close($p);
        $this->assertStringContainsString('cut short', $err);
        $this->assertSame('[1,true]', $out, $err);
        $this->assertSame(Status::Held, $this->status('f1'), 'libreserve answered before the old store was asked');
    }

    public function testBadInput(): void
    {
        $old = new OldStore(10);
        $m = $this->scene(10, $old);
        $this->moveTo($m, Stage::Shadow);
        // a token libreserve could not take: refused at every stage, before the old store is asked
        $this->throws(InvalidToken::class, fn () => $m->reserveOne($this->shop, '', self::ITEM, self::LOC, 1));
        $this->throws(InvalidToken::class, fn () => $m->claim($this->shop, str_repeat('x', 129)));
        $this->throws(InvalidToken::class, fn () => $m->release($this->shop, ''));
        $this->throws(\ValueError::class, fn () => $m->reserveOne(-1, 't', self::ITEM, self::LOC, 1));
        $this->throws(\ValueError::class, fn () => $m->reserveOne($this->shop, 't', -1, self::LOC, 1));
        $this->throws(\ValueError::class, fn () => $m->claim(-1, 't'));
        $this->throws(\ValueError::class, fn () => $m->stat(-1, MigrationStat::Offered));
        $this->throws(\ValueError::class, fn () => $m->drain(-1));
        $this->throws(\TypeError::class, fn () => $m->claim($this->shop, null));
        $this->assertSame([], $old->calls);
        $this->assertTrue($m->drain(10000));
        $this->assertSame(0, $m->stat($this->shop, MigrationStat::Offered));
        $this->assertSame(0, TestDB::int("SELECT COUNT(*) FROM rsv_checkouts WHERE shop_id = {$this->shop}"));

        $this->throws(\ValueError::class, fn () => Migration::open($this->ctx, "x\0", $old));
        $this->throws(\ValueError::class, fn () => Migration::open($this->ctx, TestDB::dsn(), $old, -1));
        $this->throws(\ValueError::class, fn () => Migration::open($this->ctx, TestDB::dsn(), $old, 0, 10));
        $this->throws(\TypeError::class, fn () => Migration::open($this->ctx, TestDB::dsn(), 'no such function'));
        $this->throws(InvalidArgument::class, fn () => Migration::open($this->ctx, 'nonsense://', $old));
        $this->throws(\ValueError::class, fn () => Migration::persistent($this->ctx, TestDB::dsn(), $old));

        $m->close();
        $m->close(); // twice is quiet
        $this->assertTrue($m->isClosed());
        $this->throws(InvalidArgument::class, fn () => $m->claim($this->shop, 't'));
        $this->throws(InvalidArgument::class, fn () => $m->stage($this->shop));
        $this->throws(InvalidArgument::class, fn () => $m->drain());
        // the context closed under a handle
        $n = Migration::open($this->ctx, TestDB::dsn(), $old);
        $this->ctx->close();
        $this->throws(InvalidArgument::class, fn () => $n->claim($this->shop, 't'));
        $n->close();
        $this->ctx = Context::open(TestDB::dsn());
    }
}
