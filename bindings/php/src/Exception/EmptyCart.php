<?php
/*
 * EmptyCart.php - RSV_EEMPTY.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_EEMPTY: the cart has no lines. */
class EmptyCart extends Failure
{
}
