<?php
/*
 * Canceled.php - RSV_ECANCELED.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_ECANCELED: a call was canceled before or between its attempts; nothing applied. */
class Canceled extends Failure
{
}
