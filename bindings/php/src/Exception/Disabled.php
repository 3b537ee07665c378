<?php
/*
 * Disabled.php - RSV_EDISABLED.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** RSV_EDISABLED: the context is switched off (Context::setEnabled(false)); nothing was sent. */
class Disabled extends Failure
{
}
