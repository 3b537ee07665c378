<?php
/*
 * Stat.php - the counters of rsv_stats_get() (enum rsv_stat of
 * reserve/stats.h; the header says what each counts).
 */

declare(strict_types=1);

namespace Libreserve;

enum Stat: int
{
    case Calls = 0;
    case Ok = 1;
    case Expected = 2;
    case Failed = 3;
    case Retries = 4;
    case Deadlocks = 5;
    case LockWaitTimeouts = 6;
    case InlineRefills = 7;
    case SlowPaths = 8;
    case ShortReads = 9;
    case Statements = 10;
    case LatencyUs = 11;
    case LatencyMaxUs = 12;
    case OneTrip = 13;
    case BackToFast = 14;
    case LedgerTakes = 15;
    case PoolDrained = 16;
    case StmtEvictions = 17;
}
