<?php
/*
 * StockError.php - RSV_ESTOCK.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_ESTOCK: the stock change would leave less than is held, or below zero. */
class StockError extends Failure
{
}
