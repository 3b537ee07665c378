<?php
/*
 * checkout.php - a checkout endpoint for PHP-FPM: one request reserves a
 * unit, "takes the payment" and claims it (or, when the payment fails,
 * releases it).  The worker's context is opened on its first request and
 * reused by every later one (Context::persistent); after a server restart
 * it reconnects and repeats the call, which is safe for the same token.
 *
 *   GET /checkout.php?item=42           200 claimed | 200 released |
 *                                        409 sold out | 503 busy
 *
 * The database comes from RSV_DSN (in the FPM pool: env[RSV_DSN] = ...),
 * by default mariadb://shop:secret@localhost/shop?socket=/run/mysqld/mysqld.sock
 */

declare(strict_types=1);

use Libreserve\Context;
use Libreserve\Exception\Busy;
use Libreserve\Exception\ConnectionLost;
use Libreserve\Exception\InDoubt;

require getenv('LIBRESERVE_AUTOLOAD') ?: dirname(__DIR__) . '/autoload.php';

const SHOP = 1;
const LOCATION = 1;

/**
 * The call, repeated once after the connection was lost: a server
 * restart, a failover.  Every call is idempotent for its token.
 *
 * @template T
 * @param callable(): T $call
 * @return T
 */
function withReconnect(Context $ctx, callable $call): mixed
{
    try {
        return $call();
    } catch (ConnectionLost | InDoubt) {
        $ctx->reconnect();
        return $call();
    }
}

$dsn = getenv('RSV_DSN') ?: 'mariadb://shop:secret@localhost/shop?socket=/run/mysqld/mysqld.sock';
$ctx = Context::persistent($dsn);
$item = (int) ($_GET['item'] ?? 1);
$token = bin2hex(random_bytes(12));
header('Content-Type: text/plain');
try {
    if (!withReconnect($ctx, fn () => $ctx->reserveOne(SHOP, $token, $item, LOCATION, 1, 60_000))) {
        http_response_code(409);
        echo "sold out\n";
        return;
    }
    $paid = random_int(1, 5) !== 1; // one payment in five fails
    if ($paid) {
        withReconnect($ctx, fn () => $ctx->claim(SHOP, $token));
        echo "claimed\n";
    } else {
        withReconnect($ctx, fn () => $ctx->release(SHOP, $token));
        echo "released\n";
    }
} catch (Busy) {
    http_response_code(503);
    echo "busy\n";
}
