<?php
/*
 * OutOfStock.php - RSV_EOUTOFSTOCK.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_EOUTOFSTOCK: not thrown by Context::reserve()/reserveOne(), which answer false; fromCode() gives it for a batch entry. */
class OutOfStock extends ExpectedOutcome
{
}
