<?php
/*
 * NoItem.php - RSV_ENOITEM.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_ENOITEM: the item/location has no stock ledger row (Context::stockSet() first). */
class NoItem extends Failure
{
}
