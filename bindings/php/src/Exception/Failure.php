<?php
/*
 * Failure.php - the family of failures.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** A failure: bad arguments, schema, server or connection problems. */
abstract class Failure extends ReserveException
{
}
