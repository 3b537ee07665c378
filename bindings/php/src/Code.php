<?php
/*
 * Code.php - the library's return codes (enum rsv_code of reserve.h).
 */

declare(strict_types=1);

namespace Libreserve;

enum Code: int
{
    case Ok = 0;
    case Pending = 1;
    case OutOfStock = -1;
    case NotFound = -2;
    case Expired = -3;
    case Claimed = -4;
    case Released = -5;
    case Busy = -6;
    case InDoubt = -7;
    case Conn = -8;
    case Inval = -10;
    case Quantity = -11;
    case Empty = -12;
    case Token = -13;
    case NoItem = -14;
    case Schema = -15;
    case Server = -16;
    case InTxn = -17;
    case NoMem = -18;
    case Db = -19;
    case TooBig = -20;
    case Stock = -21;
    case Config = -22;
    case Range = -23;
    case Disabled = -24;
    case SchemaVer = -25;
    case Canceled = -26;
    case NotPrimary = -27;

    /** The C name, "RSV_EOUTOFSTOCK". */
    public function cName(): string
    {
        return self::nameOf($this->value);
    }

    /** The library's short text, "out of stock". */
    public function text(): string
    {
        return self::textOf($this->value);
    }

    /**
     * An expected outcome a checkout handles as business logic
     * (RSV_EOUTOFSTOCK .. RSV_EINDOUBT), as against a failure.
     */
    public function isExpected(): bool
    {
        return $this->value <= -1 && $this->value >= -7;
    }

    public static function nameOf(int $code): string
    {
        $name = Library::ffi()->rsv_code_name($code);
        return $name ?? sprintf('RSV_UNKNOWN(%d)', $code);
    }

    public static function textOf(int $code): string
    {
        return (string) Library::ffi()->rsv_strerror($code);
    }
}
