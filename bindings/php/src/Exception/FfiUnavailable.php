<?php
/*
 * FfiUnavailable.php - PHP's FFI is missing or switched off here.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** The message names the extension or the ini setting (ffi.enable) to change. */
final class FfiUnavailable extends \RuntimeException
{
}
