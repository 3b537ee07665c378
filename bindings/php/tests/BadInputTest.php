<?php
/*
 * BadInputTest.php - the bad inputs of the C suite (tests/check_badinput.c)
 * through the package: the library's codes as its exceptions, and what PHP
 * cannot hand to the library refused before it is called.
 */

declare(strict_types=1);

namespace Libreserve\Tests;

use Libreserve\Cart;
use Libreserve\Context;
use Libreserve\Exception\AuthenticationError;
use Libreserve\Exception\CartTooBig;
use Libreserve\Exception\ConnectionLost;
use Libreserve\Exception\EmptyCart;
use Libreserve\Exception\Failure;
use Libreserve\Exception\InvalidArgument;
use Libreserve\Exception\InvalidQuantity;
use Libreserve\Exception\InvalidToken;
use Libreserve\Exception\NoItem;
use Libreserve\Exception\NotFound;
use Libreserve\Exception\SchemaError;
use Libreserve\Exception\StockError;
use Libreserve\Options;
use PHPUnit\Framework\TestCase;

final class BadInputTest extends TestCase
{
    private const SHOP = 2;
    private Context $ctx;

    protected function setUp(): void
    {
        $this->ctx = Context::open(TestDB::dsn());
    }

    protected function tearDown(): void
    {
        $this->ctx->close();
    }

    private function rows(): int
    {
        return TestDB::int('SELECT (SELECT COUNT(*) FROM rsv_checkouts WHERE shop_id = 2) + (SELECT COUNT(*) FROM rsv_holds WHERE shop_id = 2)');
    }

    /** @param callable(): mixed $fn */
    private function throws(string $class, callable $fn, string $needle = ''): void
    {
        try {
            $fn();
        } catch (\Throwable $e) {
            $this->assertInstanceOf($class, $e, $e->getMessage());
            if ($needle !== '') {
                $this->assertStringContainsString($needle, $e->getMessage());
            }
            return;
        }
        $this->fail("no $class thrown");
    }

    public function testBadQuantities(): void
    {
        $item = TestDB::item();
        $this->ctx->stockSet(self::SHOP, $item, 1, 10);
        $before = $this->rows();
        $cart = new Cart();
        foreach ([0, -1, PHP_INT_MIN, 1000000001, PHP_INT_MAX] as $bad) {
            $this->throws(InvalidQuantity::class, fn () => $cart->add($item, 1, $bad));
            $this->throws(InvalidQuantity::class, fn () => $this->ctx->reserveOne(self::SHOP, 'q', $item, 1, $bad), 'quantity');
        }
        $this->assertCount(0, $cart);
        $this->throws(InvalidQuantity::class, fn () => $this->ctx->stockSet(self::SHOP, $item, 1, -5));
        $this->throws(InvalidQuantity::class, fn () => $this->ctx->stockSet(self::SHOP, $item, 1, PHP_INT_MAX));
        $this->throws(InvalidQuantity::class, fn () => $this->ctx->stockAdjust(self::SHOP, $item, 1, PHP_INT_MIN));
        $this->throws(StockError::class, fn () => $this->ctx->stockAdjust(self::SHOP, $item, 1, -11));
        $this->throws(InvalidQuantity::class, fn () => $this->ctx->reserveOne(self::SHOP, 'q', $item, 1, 1, -5), 'ttl');
        $this->throws(InvalidQuantity::class, fn () => $this->ctx->reserveOne(self::SHOP, 'q', $item, 1, 1, PHP_INT_MAX));
        for ($i = 0; $i < 3; $i++) {
            $cart->add($item, 1, 1000000000);
        }
        $this->assertFalse($this->ctx->reserve(self::SHOP, 'q', $cart));
        $this->assertSame($before, $this->rows());
        $this->assertSame(10, $this->ctx->stockGet(self::SHOP, $item, 1)->onHand);
        $big = TestDB::item();
        $this->ctx->stockSet(self::SHOP, $big, 1, 1 << 62);
        $this->throws(InvalidQuantity::class, fn () => $this->ctx->stockAdjust(self::SHOP, $big, 1, 1 << 62));
        $this->assertSame(1 << 62, $this->ctx->stockGet(self::SHOP, $big, 1)->onHand);
    }

    public function testEmptyCartAndTooBig(): void
    {
        $before = $this->rows();
        $cart = new Cart();
        $this->throws(EmptyCart::class, fn () => $this->ctx->reserve(self::SHOP, 'e', $cart));
        $this->throws(CartTooBig::class, fn () => $cart->add(1, range(1, Cart::MAX_LOCATIONS + 1), 1));
        for ($i = 0; $i < Cart::MAX_LINES; $i++) {
            $cart->add($i, 1, 1);
        }
        $this->throws(CartTooBig::class, fn () => $cart->add(9999, 1, 1));
        $this->throws(InvalidArgument::class, fn () => (new Cart())->add(1, [3, 3], 1));
        $this->throws(InvalidArgument::class, fn () => (new Cart())->add(1, [], 1));
        $this->assertSame($before, $this->rows());
    }

    public function testTokensByteExact(): void
    {
        $item = TestDB::item();
        $this->ctx->stockSet(self::SHOP, $item, 1, 10);
        $long = str_repeat('x', 129);
        $this->throws(InvalidToken::class, fn () => $this->ctx->reserveOne(self::SHOP, $long, $item, 1, 1));
        $this->throws(InvalidToken::class, fn () => $this->ctx->reserveOne(self::SHOP, '', $item, 1, 1));
        $this->throws(InvalidToken::class, fn () => $this->ctx->claim(self::SHOP, $long));
        $this->assertTrue($this->ctx->reserveOne(self::SHOP, substr($long, 1), $item, 1, 1));
        $nasty = "a'b\"c\\d\0e;--%_\xff";
        $this->assertTrue($this->ctx->reserveOne(self::SHOP, $nasty, $item, 1, 2));
        $this->assertSame(1, TestDB::int("SELECT COUNT(*) FROM rsv_checkouts WHERE shop_id = 2 AND checkout_token = X'61276222635C6400653B2D2D255FFF'"));
        $this->throws(NotFound::class, fn () => $this->ctx->claim(self::SHOP, substr($nasty, 0, 6)));
        $this->assertTrue($this->ctx->reserveOne(self::SHOP, 'Token', $item, 1, 1));
        $this->throws(NotFound::class, fn () => $this->ctx->claim(self::SHOP, 'token'));
        $this->throws(NotFound::class, fn () => $this->ctx->claim(self::SHOP, 'token '));
        $this->ctx->claim(self::SHOP, $nasty);
        $this->assertSame(8, $this->ctx->stockGet(self::SHOP, $item, 1)->onHand);
    }

    public function testUnknownItemOrLocation(): void
    {
        $item = TestDB::item();
        $this->ctx->stockSet(self::SHOP, $item, 1, 10);
        $before = $this->rows();
        $cart = new Cart();
        $cart->add($item, 1, 1);
        $cart->add(555555, 1, 1);
        try {
            $this->ctx->reserve(self::SHOP, 'u', $cart);
            $this->fail('reserve of an unknown item');
        } catch (NoItem $e) {
            $this->assertSame(1, $e->failedLine);
            $this->assertStringContainsString('item 555555', $e->detail);
        }
        // reserveOne's one line is line 0, as in every binding
        try {
            $this->ctx->reserveOne(self::SHOP, 'u1', 555555, 1, 1);
            $this->fail('reserveOne of an unknown item');
        } catch (NoItem $e) {
            $this->assertSame(0, $e->failedLine);
        }
        $this->throws(NoItem::class, fn () => $this->ctx->stockAdjust(self::SHOP, $item, 78, 1));
        $this->throws(NoItem::class, fn () => $this->ctx->stockGet(self::SHOP, $item, 78));
        $this->throws(NoItem::class, fn () => $this->ctx->poolDrain(self::SHOP, $item, 78), 'location 78');
        $this->assertSame($before, $this->rows());
    }

    public function testWhatPhpCannotPassIsRefusedFirst(): void
    {
        $calls = $this->ctx->stats(\Libreserve\Stat::Calls);
        $this->throws(\ValueError::class, fn () => $this->ctx->reserveOne(-1, 't', 1, 1, 1), 'shopId');
        $this->throws(\ValueError::class, fn () => $this->ctx->stockSet(self::SHOP, -5, 1, 1), 'itemId');
        $this->throws(\ValueError::class, fn () => $this->ctx->claim(PHP_INT_MIN, 't'));
        $this->throws(\ValueError::class, fn () => (new Cart())->add(1, [1, -2], 1), 'location');
        $this->throws(\TypeError::class, fn () => (new Cart())->add(1, [1, '2'], 1));
        $this->throws(\TypeError::class, fn () => $this->ctx->reserveOne(self::SHOP, 't', '1', 1, 1)); // strict_types
        $this->throws(\TypeError::class, fn () => $this->ctx->reserveOne(self::SHOP, 't', 1, 1, 1.5));
        $this->throws(\ValueError::class, fn () => $this->ctx->claimBatch([]));
        $this->throws(\ValueError::class, fn () => $this->ctx->claimBatch(array_fill(0, 257, [self::SHOP, 't'])));
        $this->throws(\TypeError::class, fn () => $this->ctx->claimBatch([[self::SHOP, 5]]));
        $this->throws(\TypeError::class, fn () => $this->ctx->reserveBatch([[self::SHOP, 't', 1, 1, '1']]));
        $this->throws(\ValueError::class, fn () => new Options(maxRetries: 1 << 40));
        $this->throws(\ValueError::class, fn () => Context::open("mariadb://x\0y"));
        $this->assertSame($calls, $this->ctx->stats(\Libreserve\Stat::Calls));
    }

    public function testBadOptionsAndDsns(): void
    {
        $bad = [
            ['poolCap' => 0], ['poolCap' => 10001], ['refillLowWater' => -2], ['refillLowWater' => 5000],
            ['holdTtlMs' => 0], ['maxRetries' => -1], ['retryBaseUs' => 0], ['lockWaitTimeoutS' => -1],
            ['poolIdleS' => -1], ['poolIdleS' => 30 * 24 * 3600 + 1], ['connTagPrefix' => 'evil*/ DROP'],
        ];
        foreach ($bad as $fields) {
            $this->throws(InvalidArgument::class, fn () => Context::open(TestDB::dsn(), new Options(...$fields)));
        }
        Context::open(TestDB::dsn(), new Options(connTagPrefix: 'app.checkout:'))->close();
        $this->throws(InvalidArgument::class, fn () => Context::open('postgres://x@/y'));
        $this->throws(InvalidArgument::class, fn () => Context::open(TestDB::dsn() . '&colour=blue'));
        $this->throws(ConnectionLost::class, fn () => Context::open('mariadb://root@/x?socket=/nonexistent/sock&connect_timeout=1'));
        $this->throws(AuthenticationError::class, fn () => Context::open(sprintf('mariadb://nobody:wrong@/%s?socket=%s', TestDB::$name, rawurlencode(TestDB::socket()))));
        $db = TestDB::$name . '_empty';
        TestDB::sql("CREATE DATABASE `$db`", '');
        try {
            $this->throws(SchemaError::class, fn () => Context::open(TestDB::dsn($db)), 'rsv_');
        } finally {
            TestDB::sql("DROP DATABASE `$db`", '');
        }
    }

    public function testClosedObjects(): void
    {
        $ctx = Context::open(TestDB::dsn());
        $ctx->close();
        $this->throws(InvalidArgument::class, fn () => $ctx->claim(self::SHOP, 't'), 'closed');
        $cart = new Cart();
        $cart->free();
        $this->throws(Failure::class, fn () => $cart->count(), 'freed');
        $this->throws(\Libreserve\Exception\RangeError::class, fn () => (new Cart())->allocations(5));
    }
}
