<?php
/*
 * UnknownFailure.php - a failure code newer than this package.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** A failure code this package does not know. */
class UnknownFailure extends Failure
{
}
