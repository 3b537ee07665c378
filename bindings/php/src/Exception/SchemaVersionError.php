<?php
/*
 * SchemaVersionError.php - RSV_ESCHEMAVER.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_ESCHEMAVER: the database's schema version does not match the library's; the detail names the command that fixes it. */
class SchemaVersionError extends Failure
{
}
