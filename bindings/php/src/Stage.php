<?php
/*
 * Stage.php - a shop's stage in its move from the old store
 * (RSV_STAGE_* of reserve/migrate.h; docs/migration.md says what each
 * sends where).
 */

declare(strict_types=1);

namespace Libreserve;

enum Stage: int
{
    /** The old store only (a shop without a row). */
    case Old = 0;
    /** The old store answers; libreserve's answer is compared off the request path. */
    case Shadow = 1;
    /** libreserve answers; the old store is kept current. */
    case Primary = 2;
    /** libreserve only. */
    case Complete = 3;
}
