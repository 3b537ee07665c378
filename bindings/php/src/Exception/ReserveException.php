<?php
/*
 * ReserveException.php - the base of every exception that carries a code
 * of the library, and the one place codes become exception classes.
 */

declare(strict_types=1);

namespace Libreserve\Exception;

use Libreserve\Code;

/**
 * A libreserve call answered a code other than RSV_OK.  getCode() is the
 * library's code (-2 for RSV_ENOTFOUND); $codeName its C name; $detail the
 * detailed message of the failing call (rsv_errmsg()); $function the C
 * function; $serverErrno the MariaDB error number behind it, if any.
 * Expected outcomes derive from ExpectedOutcome, the rest from Failure.
 */
abstract class ReserveException extends \RuntimeException
{
    /** The server's errors that mean the account was refused. */
    public const AUTH_ERRNOS = [1044, 1045, 1251, 1698, 1820, 1862, 2059];

    private const CLASSES = [
        -1 => OutOfStock::class, -2 => NotFound::class, -3 => Expired::class,
        -4 => AlreadyClaimed::class, -5 => AlreadyReleased::class, -6 => Busy::class,
        -7 => InDoubt::class, -8 => ConnectionLost::class, -10 => InvalidArgument::class,
        -11 => InvalidQuantity::class, -12 => EmptyCart::class, -13 => InvalidToken::class,
        -14 => NoItem::class, -15 => SchemaError::class, -16 => UnsupportedServer::class,
        -17 => InTransaction::class, -18 => OutOfMemory::class, -19 => DatabaseError::class,
        -20 => CartTooBig::class, -21 => StockError::class, -22 => ConfigError::class,
        -23 => RangeError::class, -24 => Disabled::class, -25 => SchemaVersionError::class,
        -26 => Canceled::class, -27 => NotPrimary::class,
    ];

    public readonly string $codeName;
    public readonly string $detail;
    public readonly ?string $function;
    public readonly ?int $serverErrno;
    /** The cart line that could not be served (NoItem: from reserve(), the cart's; from reserveOne(), 0), or null. */
    public ?int $failedLine = null;

    final public function __construct(int $code, string $detail = '', ?string $function = null, ?\Throwable $previous = null)
    {
        $this->codeName = Code::nameOf($code);
        $this->detail = $detail !== '' ? $detail : Code::textOf($code);
        $this->function = $function;
        $this->serverErrno = preg_match_all('/\(MySQL error (\d+)\)/', $this->detail, $m) > 0
            ? (int) end($m[1]) : null;
        parent::__construct(
            sprintf('%s%s (%d): %s', $function !== null ? "$function: " : '', $this->codeName, $code, $this->detail),
            $code,
            $previous
        );
    }

    /** The code as the enum (null for a code newer than this package). */
    public function reserveCode(): ?Code
    {
        return Code::tryFrom($this->getCode());
    }

    /**
     * The exception for a code: e.g. to throw a batch entry's result.
     *
     * @return ReserveException
     */
    public static function fromCode(int $code, string $detail = '', ?string $function = null, ?\Throwable $previous = null): self
    {
        $class = self::CLASSES[$code] ?? ($code <= -1 && $code >= -7 ? UnknownOutcome::class : UnknownFailure::class);
        if ($code === -8 && preg_match_all('/\(MySQL error (\d+)\)/', $detail, $m) > 0
            && in_array((int) end($m[1]), self::AUTH_ERRNOS, true)) {
            $class = AuthenticationError::class;
        }
        return new $class($code, $detail, $function, $previous);
    }
}
