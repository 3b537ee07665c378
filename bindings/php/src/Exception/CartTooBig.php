<?php
/*
 * CartTooBig.php - RSV_ETOOBIG.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_ETOOBIG: too many lines, locations or item/location pairs. */
class CartTooBig extends Failure
{
}
