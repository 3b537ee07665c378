<?php
/*
 * LibraryNotFound.php - libreserve.so could not be found or loaded.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

/** The message lists every place tried and why each was passed over. */
final class LibraryNotFound extends \RuntimeException
{
}
