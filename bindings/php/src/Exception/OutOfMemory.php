<?php
/*
 * OutOfMemory.php - RSV_ENOMEM.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_ENOMEM. */
class OutOfMemory extends Failure
{
}
