<?php
/*
 * AlreadyClaimed.php - RSV_ECLAIMED.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_ECLAIMED: the checkout is claimed (release() and reserve() throw it; claim() answers ClaimResult::AlreadyClaimed instead). */
class AlreadyClaimed extends ExpectedOutcome
{
}
