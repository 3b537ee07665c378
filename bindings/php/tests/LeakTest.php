<?php
/*
 * LeakTest.php - an exception never leaves a context or a connection
 * behind; the worker's persistent context keeps one connection across
 * requests and comes back after the server dropped it.
 */

declare(strict_types=1);

namespace Libreserve\Tests;

use Libreserve\Cart;
use Libreserve\ClaimResult;
use Libreserve\Context;
use Libreserve\Exception\ConnectionLost;
use Libreserve\Exception\NotFound;
use Libreserve\Exception\ReserveException;
use Libreserve\Exception\SchemaError;
use PHPUnit\Framework\TestCase;

final class LeakTest extends TestCase
{
    /** A request handler that fails half way, its context a local. */
    private static function failingRequest(string $dsn, int $i): void
    {
        $ctx = Context::open($dsn);
        $cart = new Cart();
        $cart->add(1, 1, 1);
        if ($i % 2 === 0) {
            $ctx->claim(3, "no-such-checkout-$i"); // throws NotFound
        }
        throw new \RuntimeException("the application fails after the call ($i)");
    }

    public function testExceptionsLeaveNoConnection(): void
    {
        $base = TestDB::connections();
        $empty = TestDB::$name . '_noschema';
        TestDB::sql("CREATE DATABASE `$empty`", '');
        try {
            foreach (['0', '1'] as $ignoreArgs) {
                // with zend.exception_ignore_args off, a trace holds the
                // frames' arguments until the exception goes
                ini_set('zend.exception_ignore_args', $ignoreArgs);
                for ($i = 0; $i < 20; $i++) {
                    try {
                        self::failingRequest(TestDB::dsn(), $i);
                    } catch (NotFound | \RuntimeException $e) {
                        $this->assertTrue($e instanceof NotFound || $i % 2 === 1);
                    }
                    try {
                        Context::open(TestDB::dsn($empty)); // opens, then finds no schema
                        $this->fail('a context on a database without the schema');
                    } catch (SchemaError $e) {
                        $this->assertSame(-15, $e->getCode());
                    }
                }
                unset($e);
                $this->assertSame($base, TestDB::connections(), "zend.exception_ignore_args=$ignoreArgs");
            }
        } finally {
            TestDB::sql("DROP DATABASE `$empty`", '');
        }
    }

    public function testPersistentContextAcrossRequests(): void
    {
        $base = TestDB::connections();
        $a = Context::persistent(TestDB::dsn());
        $this->assertTrue($a->isPersistent());
        $this->assertSame($a, Context::persistent(TestDB::dsn()));
        $item = TestDB::item();
        $a->stockSet(3, $item, 1, 5);
        $this->assertSame($base + 1, TestDB::connections());
        // the end of a request: PHP drops every object and static
        $slots = new \ReflectionProperty(Context::class, 'persistent');
        $slots->setAccessible(true);
        $slots->setValue(null, []);
        unset($a);
        gc_collect_cycles();
        $this->assertSame($base + 1, TestDB::connections(), 'the connection outlives the request');
        // the next request finds the same context, and its connection
        $b = Context::persistent(TestDB::dsn());
        $this->assertTrue($b->reserveOne(3, 'p', $item, 1, 1));
        $this->assertSame($base + 1, TestDB::connections());
        // the server drops the connection (a restart): reconnect, repeat
        $ids = TestDB::sql("SELECT id FROM information_schema.processlist WHERE db = '" . TestDB::$name . "' AND id <> CONNECTION_ID()", '');
        $this->assertSame(1, count(explode("\n", $ids)));
        TestDB::sql("KILL $ids", '');
        try {
            $b->claim(3, 'p');
            $this->fail('a call on a killed connection');
        } catch (ConnectionLost | \Libreserve\Exception\InDoubt $e) {
            $b->reconnect();
            $this->assertContains($b->claim(3, 'p'), [ClaimResult::Claimed, ClaimResult::AlreadyClaimed]);
        }
        $this->assertSame(4, $b->stockGet(3, $item, 1)->onHand);
        $this->assertSame($base + 1, TestDB::connections());
        // another DSN or other options: another context
        $c = Context::persistent(TestDB::dsn(), new \Libreserve\Options(holdTtlMs: 5000));
        $this->assertNotSame($b, $c);
        $c->close();
        $b->close();
        $this->assertSame($base, TestDB::connections());
        // closed for good: the next call opens a new one
        $slots->setValue(null, []);
        $d = Context::persistent(TestDB::dsn());
        $this->assertFalse($d->isClosed());
        $d->close();
        $this->assertSame($base, TestDB::connections());
    }
}
