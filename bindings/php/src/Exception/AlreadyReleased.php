<?php
/*
 * AlreadyReleased.php - RSV_ERELEASED.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_ERELEASED: the checkout was released; nothing was claimed. */
class AlreadyReleased extends ExpectedOutcome
{
}
