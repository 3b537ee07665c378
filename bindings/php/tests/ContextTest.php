<?php
/*
 * ContextTest.php - the hold lifecycle, stock, audit, batches, statistics
 * and the kill switch through the package, against a real server; which
 * outcomes are answers and which are exceptions.
 */

declare(strict_types=1);

namespace Libreserve\Tests;

use Libreserve\Cart;
use Libreserve\ClaimResult;
use Libreserve\Code;
use Libreserve\Context;
use Libreserve\Exception\AlreadyClaimed;
use Libreserve\Exception\AlreadyReleased;
use Libreserve\Exception\Disabled;
use Libreserve\Exception\ExpectedOutcome;
use Libreserve\Exception\NotFound;
use Libreserve\Exception\ReserveException;
use Libreserve\Op;
use Libreserve\Options;
use Libreserve\Stat;
use Libreserve\Status;
use PHPUnit\Framework\TestCase;

final class ContextTest extends TestCase
{
    private const SHOP = 1;
    private Context $ctx;

    protected function setUp(): void
    {
        $this->ctx = Context::open(TestDB::dsn());
    }

    protected function tearDown(): void
    {
        $this->ctx->close();
    }

    public function testReserveClaimAnswers(): void
    {
        $item = TestDB::item();
        $this->ctx->stockSet(self::SHOP, $item, 1, 3);
        $this->assertTrue($this->ctx->reserveOne(self::SHOP, 'a', $item, 1, 2));
        // out of stock is an answer, and nothing is held
        $this->assertFalse($this->ctx->reserveOne(self::SHOP, 'b', $item, 1, 2));
        $this->assertSame(0, TestDB::int("SELECT COUNT(*) FROM rsv_checkouts WHERE shop_id = 1 AND checkout_token = 'b'"));
        $st = $this->ctx->status(self::SHOP, 'a');
        $this->assertSame(Status::Held, $st->status);
        $this->assertSame(2, $st->units);
        $this->assertGreaterThan(0, $st->expiresInMs);
        $this->assertSame(ClaimResult::Claimed, $this->ctx->claim(self::SHOP, 'a'));
        // a repeated claim takes nothing again
        $this->assertSame(ClaimResult::AlreadyClaimed, $this->ctx->claim(self::SHOP, 'a'));
        $stock = $this->ctx->stockGet(self::SHOP, $item, 1);
        $this->assertSame(1, $stock->onHand);
        $this->assertSame(0, $stock->held);
        $this->assertSame(1, $stock->available);
        $this->assertSame(Status::Claimed, $this->ctx->status(self::SHOP, 'a')->status);
        // releasing a claimed checkout and re-reserving its token throw
        try {
            $this->ctx->release(self::SHOP, 'a');
            $this->fail('release of a claimed checkout');
        } catch (AlreadyClaimed $e) {
            $this->assertSame(-4, $e->getCode());
            $this->assertSame('RSV_ECLAIMED', $e->codeName);
            $this->assertSame(Code::Claimed, $e->reserveCode());
            $this->assertSame('rsv_release', $e->function);
            $this->assertInstanceOf(ExpectedOutcome::class, $e);
            $this->assertStringContainsString('rsv_release: RSV_ECLAIMED (-4)', $e->getMessage());
        }
        $this->expectException(AlreadyClaimed::class);
        $this->ctx->reserveOne(self::SHOP, 'a', $item, 1, 1);
    }

    public function testReleaseExtendAndTheirExceptions(): void
    {
        $item = TestDB::item();
        $this->ctx->stockSet(self::SHOP, $item, 1, 5);
        $this->assertTrue($this->ctx->reserveOne(self::SHOP, 'r', $item, 1, 5, 60000));
        $this->ctx->extend(self::SHOP, 'r', 120000);
        $this->assertGreaterThan(60000, $this->ctx->status(self::SHOP, 'r')->expiresInMs);
        $this->ctx->release(self::SHOP, 'r');
        $this->ctx->release(self::SHOP, 'r'); // quiet: released already
        $this->assertSame(5, $this->ctx->stockGet(self::SHOP, $item, 1)->available);
        try {
            $this->ctx->claim(self::SHOP, 'r');
            $this->fail('claim of a released checkout');
        } catch (AlreadyReleased $e) {
            $this->assertSame(-5, $e->getCode());
        }
        try {
            $this->ctx->claim(self::SHOP, 'never');
            $this->fail('claim of an unknown checkout');
        } catch (NotFound $e) {
            $this->assertSame('rsv_claim', $e->function);
            $this->assertStringContainsString('no checkout', $e->detail);
        }
    }

    public function testCartAcrossLocations(): void
    {
        $item = TestDB::item();
        $other = TestDB::item();
        $this->ctx->stockSet(self::SHOP, $item, 1, 2);
        $this->ctx->stockSet(self::SHOP, $item, 2, 5);
        $this->ctx->stockSet(self::SHOP, $other, 1, 1);
        $cart = new Cart();
        $this->assertSame(0, $cart->add($item, [1, 2], 4, split: true));
        $this->assertSame(1, $cart->add($other, 1, 1));
        $this->assertCount(2, $cart);
        $this->assertTrue($this->ctx->reserve(self::SHOP, 'cart', $cart));
        $this->assertSame([1 => 2, 2 => 2], $cart->allocations(0));
        $this->assertSame([1 => 1], $cart->allocations(1));
        $this->assertNull($cart->failedLine());
        $cart->clear();
        $cart->add($item, [1, 2], 1);
        $cart->add($other, 1, 1);
        $this->assertFalse($this->ctx->reserve(self::SHOP, 'cart2', $cart));
        $this->assertSame(1, $cart->failedLine());
        $this->assertSame(ClaimResult::Claimed, $this->ctx->claim(self::SHOP, 'cart'));
        $this->assertSame(3, $this->ctx->stockGet(self::SHOP, $item, 2)->onHand);
        $cart->free();
        $cart->free();
    }

    public function testStockPoolsSweepAudit(): void
    {
        $item = TestDB::item();
        $this->ctx->stockSet(self::SHOP, $item, 1, 10);
        $this->assertSame(13, $this->ctx->stockAdjust(self::SHOP, $item, 1, 3));
        $this->assertGreaterThan(0, $this->ctx->replenish(self::SHOP, $item, 1));
        $this->assertSame(13, $this->ctx->stockGet(self::SHOP, $item, 1)->pooled);
        $this->assertSame(13, $this->ctx->poolDrain(self::SHOP, $item, 1));
        $this->assertTrue($this->ctx->reserveOne(self::SHOP, 'short', $item, 1, 2, 1));
        usleep(20000);
        $this->assertSame(Status::Expired, $this->ctx->status(self::SHOP, 'short')->status);
        $report = $this->ctx->sweepReport(self::SHOP);
        $this->assertGreaterThanOrEqual(1, $report->holdsReleased);
        $this->assertGreaterThanOrEqual(2, $report->unitsReleased);
        $this->assertSame(0, $this->ctx->sweep(self::SHOP));
        $this->assertSame([], $this->ctx->audit(self::SHOP));
        $this->assertSame([], $this->ctx->audit(0, allShops: true));
        // a broken ledger is reported, one Violation per problem
        TestDB::sql("UPDATE rsv_ledger SET issued = issued + 1 WHERE shop_id = 1 AND item_id = $item");
        $found = $this->ctx->audit(self::SHOP);
        TestDB::sql("UPDATE rsv_ledger SET issued = issued - 1 WHERE shop_id = 1 AND item_id = $item");
        $this->assertNotEmpty($found);
        $this->assertSame($item, $found[0]->itemId);
        $this->assertNotSame('', $found[0]->problem);
        $this->assertSame([], $this->ctx->audit(self::SHOP));
    }

    public function testBatchesAnswerPerEntry(): void
    {
        $item = TestDB::item();
        $this->ctx->stockSet(self::SHOP, $item, 1, 2);
        $res = $this->ctx->reserveBatch([
            [self::SHOP, 'b1', $item, 1, 1],
            [self::SHOP, 'b2', $item, 1, 1],
            [self::SHOP, 'b3', $item, 1, 1],
        ]);
        $this->assertSame([Code::Ok, Code::Ok, Code::OutOfStock], $res);
        $this->assertSame([Code::Ok, Code::NotFound], $this->ctx->claimBatch([[self::SHOP, 'b1'], [self::SHOP, 'b3']]));
        $this->assertSame([Code::Ok, Code::Claimed], $this->ctx->releaseBatch([[self::SHOP, 'b2'], [self::SHOP, 'b1']]));
        $a = new Cart();
        $a->add($item, 1, 1);
        $b = new Cart();
        $b->add($item, 1, 5);
        $this->assertSame([Code::Ok, Code::OutOfStock], $this->ctx->reserveCartBatch([[self::SHOP, 'c1', $a], [self::SHOP, 'c2', $b]]));
        $this->assertSame([1 => 1], $a->allocations(0));
        $this->assertSame(0, $b->failedLine());
        $e = ReserveException::fromCode(Code::OutOfStock->value);
        $this->assertInstanceOf(\Libreserve\Exception\OutOfStock::class, $e);
        $this->assertSame('out of stock', $e->detail);
    }

    public function testStatsAndKillSwitch(): void
    {
        $item = TestDB::item();
        $this->ctx->stockSet(self::SHOP, $item, 1, 1);
        $this->ctx->statsReset();
        $this->assertTrue($this->ctx->reserveOne(self::SHOP, 'k', $item, 1, 1));
        $this->assertSame(1, $this->ctx->stats(Stat::Calls, Op::Reserve));
        $this->assertSame(1, $this->ctx->statsOutcome(Op::Reserve, Code::Ok));
        $this->assertGreaterThan(0, $this->ctx->statsPercentile(Op::Reserve, 50.0));
        $text = $this->ctx->statsPrometheus('worker="7"');
        $this->assertStringContainsString('libreserve_calls_total{worker="7",op="reserve"', $text);
        $this->ctx->setEnabled(false);
        try {
            $this->ctx->claim(self::SHOP, 'k');
            $this->fail('claim while switched off');
        } catch (Disabled $e) {
            $this->assertSame(-24, $e->getCode());
        }
        $this->assertSame(Status::Held, $this->ctx->status(self::SHOP, 'k')->status);
        $this->ctx->setEnabled(true);
        $this->assertSame(ClaimResult::Claimed, $this->ctx->claim(self::SHOP, 'k'));
    }

    public function testOptionsReachTheLibrary(): void
    {
        $ctx = Context::open(TestDB::dsn(), new Options(holdTtlMs: 1234, connTagPrefix: 'php.test:'));
        $item = TestDB::item();
        $ctx->stockSet(self::SHOP, $item, 1, 1);
        $this->assertTrue($ctx->reserveOne(self::SHOP, 'opt', $item, 1, 1));
        $this->assertLessThanOrEqual(1234, $ctx->status(self::SHOP, 'opt')->expiresInMs);
        $ctx->close();
        $ctx->close();
        $this->assertTrue($ctx->isClosed());
    }

    public function testCodesHaveNamesAndTexts(): void
    {
        foreach (Code::cases() as $code) {
            $this->assertStringStartsWith('RSV_', $code->cName());
            $this->assertNotSame('unknown error code', $code->text(), $code->name);
            if ($code->value < 0) {
                $this->assertSame($code, ReserveException::fromCode($code->value)->reserveCode());
            }
        }
        $this->assertTrue(Code::InDoubt->isExpected());
        $this->assertFalse(Code::Conn->isExpected());
        $this->assertSame(\Libreserve\Library::HEADER_VERSION, \Libreserve\Library::ffi()->rsv_version());
    }
}
