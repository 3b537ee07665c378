<?php
/*
 * UnsupportedServer.php - RSV_ESERVER.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_ESERVER: the server lacks SKIP LOCKED or logs statements. */
class UnsupportedServer extends Failure
{
}
