<?php
/*
 * UnknownOutcome.php - an expected outcome newer than this package.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** An expected-outcome code this package does not know. */
class UnknownOutcome extends ExpectedOutcome
{
}
