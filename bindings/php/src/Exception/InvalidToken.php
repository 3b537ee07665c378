<?php
/*
 * InvalidToken.php - RSV_ETOKEN.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_ETOKEN: the token is empty or longer than 128 bytes. */
class InvalidToken extends Failure
{
}
