<?php
/*
 * CheckoutStatus.php - where a checkout stands (rsv_checkout_status).
 */

declare(strict_types=1);

namespace Libreserve;

final class CheckoutStatus
{
    public function __construct(
        public readonly Status $status,
        /** Units the checkout holds now. */
        public readonly int $units,
        /** Milliseconds to its deadline, negative once passed. */
        public readonly int $expiresInMs,
    ) {
    }
}
