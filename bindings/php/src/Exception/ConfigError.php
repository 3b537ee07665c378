<?php
/*
 * ConfigError.php - RSV_ECONFIG.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_ECONFIG: a connection setting or option the library cannot use safely. */
class ConfigError extends Failure
{
}
