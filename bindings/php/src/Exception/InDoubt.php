<?php
/*
 * InDoubt.php - RSV_EINDOUBT.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_EINDOUBT: the connection was lost during COMMIT; the outcome is unknown.  Call Context::reconnect() and repeat the same call with the same token: it settles it. */
class InDoubt extends ExpectedOutcome
{
}
