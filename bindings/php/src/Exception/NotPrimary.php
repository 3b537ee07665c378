<?php
/*
 * NotPrimary.php - RSV_ENOTPRIMARY.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_ENOTPRIMARY: the server takes no writes now (a replica, a Galera node outside the primary component); nothing applied.  Context::reconnect() finds the writable host of the DSN. */
class NotPrimary extends ConnectionLost
{
}
