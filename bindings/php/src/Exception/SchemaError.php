<?php
/*
 * SchemaError.php - RSV_ESCHEMA.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_ESCHEMA: the libreserve tables are missing or wrong. */
class SchemaError extends Failure
{
}
