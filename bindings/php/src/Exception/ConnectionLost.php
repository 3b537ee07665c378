<?php
/*
 * ConnectionLost.php - RSV_ECONN.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_ECONN: cannot connect, or the connection was lost before COMMIT (nothing applied).  Call Context::reconnect() and repeat. */
class ConnectionLost extends Failure
{
}
