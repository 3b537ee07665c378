<?php
/*
 * ExpectedOutcome.php - the family of expected outcomes.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** An outcome a checkout handles as business logic (RSV_EOUTOFSTOCK .. RSV_EINDOUBT). */
abstract class ExpectedOutcome extends ReserveException
{
}
