<?php
/*
 * Expired.php - RSV_EEXPIRED.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_EEXPIRED: the hold ran out and its units were given back; nothing was claimed. */
class Expired extends ExpectedOutcome
{
}
