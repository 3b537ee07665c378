<?php
/*
 * RangeError.php - RSV_ERANGE.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_ERANGE: index out of range or buffer too small. */
class RangeError extends Failure
{
}
