<?php
/*
 * MigrationStat.php - the migration handle's counters (enum
 * rsv_migrate_stat_kind of reserve/migrate.h, which says what each
 * counts): how the two stores' answers compared, and the books of the
 * work offered.
 */

declare(strict_types=1);

namespace Libreserve;

enum MigrationStat: int
{
    case BothAccepted = 0;
    case BothRefused = 1;
    /** Would oversell once primary. */
    case OldRefusedNewAccepted = 2;
    /** Would undersell. */
    case OldAcceptedNewRefused = 3;
    case NewFailed = 4;
    /** A claim or release of a hold libreserve never saw. */
    case Unknown = 5;
    /** The old store failed (threw, or answered no code): not compared. */
    case OldFailed = 6;
    /** Offered = Applied + Dropped + waiting. */
    case Offered = 7;
    case Applied = 8;
    case Dropped = 9;
    /** Failed reads of the stage table (all shops only). */
    case StageReadFailed = 10;
}
