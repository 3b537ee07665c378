<?php
/*
 * InTransaction.php - RSV_EINTXN.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_EINTXN: the connection is inside a transaction and this call needs its own. */
class InTransaction extends Failure
{
}
