<?php
/*
 * AuthenticationError.php - RSV_ECONN for a refused account.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_ECONN because the server refused the account ($serverErrno 1045, 1044, ...): reconnecting with the same credentials will not help. */
class AuthenticationError extends ConnectionLost
{
}
