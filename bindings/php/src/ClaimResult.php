<?php
/*
 * ClaimResult.php - the two answers of a claim that took the units.
 */

declare(strict_types=1);

namespace Libreserve;

/**
 * Both cases mean the same for the order: its units are off the stock,
 * exactly once.  AlreadyClaimed is what a repeated claim answers (a
 * retry after InDoubt, a payment webhook delivered twice).
 */
enum ClaimResult
{
    case Claimed;
    case AlreadyClaimed;
}
