<?php
/*
 * InvalidQuantity.php - RSV_EQUANTITY.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_EQUANTITY: a quantity, stock figure or ttl out of range. */
class InvalidQuantity extends Failure
{
}
