<?php
/*
 * The failing situations of tests/errors-test.sh through the PHP binding:
 * one line per situation, "SITUATION ERROR CODE FAILED_LINE ERRNO".  Out
 * of stock and a repeated claim are answers in PHP (false,
 * ClaimResult::AlreadyClaimed), not exceptions: for them the line names
 * the exception ReserveException::fromCode() gives for the code the
 * context reports.
 */

declare(strict_types=1);

require dirname(__DIR__, 2) . '/bindings/php/autoload.php';

use Libreserve\Cart;
use Libreserve\ClaimResult;
use Libreserve\Context;
use Libreserve\Exception\ReserveException;
use Libreserve\Options;

$shop = (int) getenv('RSV_SHOP');

function line(string $situation, ?ReserveException $e, ?int $failedLine = null): void
{
    if ($e === null) {
        echo "$situation no-error 0 - -\n";
        return;
    }
    printf("%s %s %d %s %s\n", $situation, (new ReflectionClass($e))->getShortName(), $e->getCode(),
        $failedLine ?? $e->failedLine ?? '-', $e->serverErrno ?? '-');
}

function show(string $situation, callable $call): void
{
    try {
        $call();
        line($situation, null);
    } catch (ReserveException $e) {
        line($situation, $e);
    }
}

/** The exception of the code the context's last call answered. */
function answered(Context $ctx): ReserveException
{
    return ReserveException::fromCode($ctx->errcode(), $ctx->errmsg());
}

if (($argv[1] ?? '') === 'readonly') {
    show('not_primary', fn () => Context::open((string) getenv('RSV_DSN'))->close());
    exit(0);
}
if (($argv[1] ?? '') === 'indoubt') {
    $ctx = Context::open((string) getenv('RSV_DSN_INDOUBT'),
        new Options(callTimeoutMs: (int) getenv('RSV_BUDGET_MS')));
    show('in_doubt', fn () => $ctx->reserveOne($shop, 'php-indoubt', 1, 1, 1));
    $ctx->close();
    exit(0);
}
show('wrong_password', fn () => Context::open((string) getenv('RSV_DSN_BADPW')));
show('no_server', fn () => Context::open((string) getenv('RSV_DSN_GONE')));
$ctx = Context::open((string) getenv('RSV_DSN'));
$ctx->stockSet($shop, 1, 1, 3);
// the line that failed is the cart's to say: a cart of the one line
// reserveOne() would hold
$cart = new Cart();
$cart->add(1, 1, 5);
if ($ctx->reserve($shop, 'php-oos', $cart)) {
    line('out_of_stock', null);
} else {
    line('out_of_stock', answered($ctx), $cart->failedLine());
}
$ctx->reserveOne($shop, 'php-claimed', 1, 1, 1);
$ctx->claim($shop, 'php-claimed');
if ($ctx->claim($shop, 'php-claimed') === ClaimResult::AlreadyClaimed) {
    line('already_claimed', answered($ctx));
} else {
    line('already_claimed', null);
}
show('expired', function () use ($ctx, $shop): void {
    $ctx->reserveOne($shop, 'php-expired', 1, 1, 1, ttlMs: 1);
    usleep(50_000); // past its deadline; the sweep gives the units back
    $ctx->sweep($shop);
    $ctx->claim($shop, 'php-expired');
});
show('bad_token', fn () => $ctx->reserveOne($shop, '', 1, 1, 1));
$ctx->close();
