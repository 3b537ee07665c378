<?php
/*
 * NotFound.php - RSV_ENOTFOUND.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_ENOTFOUND: no such checkout (never reserved, or purged after the retention). */
class NotFound extends ExpectedOutcome
{
}
