<?php
/*
 * Busy.php - RSV_EBUSY.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_EBUSY: lock conflicts persisted through every retry, or the call's time budget was spent; nothing was applied.  Try again. */
class Busy extends ExpectedOutcome
{
}
