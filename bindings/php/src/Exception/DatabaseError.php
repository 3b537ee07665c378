<?php
/*
 * DatabaseError.php - RSV_EDB.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_EDB: any other database error ($serverErrno says which). */
class DatabaseError extends Failure
{
}
