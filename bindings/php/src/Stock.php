<?php
/*
 * Stock.php - the stock of one item at one location (rsv_stock_get).
 */

declare(strict_types=1);

namespace Libreserve;

final class Stock
{
    public function __construct(
        /** Stock on hand after every committed claim. */
        public readonly int $onHand,
        /** Units held by active (unexpired) checkouts. */
        public readonly int $held,
        /** Units in the pool of reservable rows. */
        public readonly int $pooled,
        /** Units a new checkout could still reserve (on hand - held). */
        public readonly int $available,
    ) {
    }
}
