<?php
/*
 * Op.php - operation kinds of the statistics (enum rsv_op_kind).
 */

declare(strict_types=1);

namespace Libreserve;

enum Op: int
{
    /** Every kind summed. */
    case All = 0;
    case Reserve = 1;
    case Claim = 2;
    case Release = 3;
    case Extend = 4;
    case Status = 5;
    case Replenish = 6;
    case Sweep = 7;
    case Stock = 8;
    case Audit = 9;
}
