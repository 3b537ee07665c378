<?php
/*
 * Violation.php - one broken invariant that rsv_audit() found.
 */

declare(strict_types=1);

namespace Libreserve;

final class Violation
{
    public function __construct(
        public readonly int $shopId,
        public readonly int $itemId,
        public readonly int $locationId,
        /** The library's sentence describing it. */
        public readonly string $problem,
    ) {
    }
}
