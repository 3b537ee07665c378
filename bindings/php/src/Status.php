<?php
/*
 * Status.php - where a checkout stands (RSV_STATUS_* of reserve.h).
 */

declare(strict_types=1);

namespace Libreserve;

enum Status: int
{
    case Held = 1;
    case Claimed = 2;
    case Released = 3;
    /** Held, but its deadline passed (its units may already be back). */
    case Expired = 4;
}
