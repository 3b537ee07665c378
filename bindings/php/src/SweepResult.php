<?php
/*
 * SweepResult.php - what one sweep did (rsv_sweep_report).
 */

declare(strict_types=1);

namespace Libreserve;

final class SweepResult
{
    public function __construct(
        /** Expired holds given back. */
        public readonly int $holdsReleased,
        /** Their units, reservable again. */
        public readonly int $unitsReleased,
        /** Journal rows (settled claims and releases) folded into the ledger. */
        public readonly int $journalFolded,
        /** Rows of idle pools given back to their ledger rows. */
        public readonly int $poolRowsDrained,
        /** Settled checkout records purged after the retention. */
        public readonly int $checkoutsPurged,
    ) {
    }
}
