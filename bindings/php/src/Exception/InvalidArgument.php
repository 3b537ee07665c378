<?php
/*
 * InvalidArgument.php - RSV_EINVAL.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_EINVAL: an argument the library refused (the package throws \ValueError or \TypeError itself for those PHP cannot pass). */
class InvalidArgument extends Failure
{
}
