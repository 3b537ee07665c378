"""libreserve - Python binding (ctypes) of the libreserve C library.

Covers the whole public API of reserve.h.  Only the Python standard library
is needed.  The usual way in is a connection string: the library opens and
owns the MariaDB connection (rsv_open_dsn):

    import libreserve as rsv

    with rsv.connect("mariadb://shop:secret@localhost/shop"
                     "?socket=/run/mysqld/mysqld.sock") as ctx:
        ctx.stock_set(shop_id=1, item_id=42, location_id=7, on_hand=10)
        ctx.reserve_one(1, "checkout-123", item_id=42, location_id=7,
                        quantity=2)
        try:
            ctx.claim(1, "checkout-123")          # payment succeeded
        except rsv.AlreadyClaimed:
            pass                                  # a retried claim

Connection (MariaDB Connector/C through ctypes) is there for SQL of one's
own (loading the schema, a claim joined to the application's
transaction) and for callers who already have a connection:
Context(conn) then works on it (rsv_open), as it does on a mysqlclient
(MySQLdb, Django) connection.  AsyncContext (libreserve/aio.py) is the
asyncio interface.

Every failing call raises a ReserveError subclass carrying the library's
code (``.code``, a Code), its name (``.name``), its short text
(``.strerror``), the detailed message of rsv_errmsg() (``.message``) and
the server's error number behind it (``.errno``).  Expected outcomes (out
of stock, expired, already claimed, ...) derive from ExpectedOutcome, the
rest from Failure; ConnectionLost is also a ConnectionError,
AuthenticationError (a refused account) a PermissionError, arguments of
the wrong type raise TypeErrors, bad values ValueErrors.

Which libreserve.so is loaded (first match wins):
  1. $LIBRESERVE_PATH: the library file itself, or a directory holding
     libreserve.so.0 / libreserve.so (nothing else is tried then);
  2. the directory `pkg-config --variable=libdir reserve` reports (the
     reserve.pc that make install wrote; PKG_CONFIG_PATH for a prefix of
     one's own);
  3. libreserve.so.0 as the system's dynamic loader finds it
     (LD_LIBRARY_PATH, the ldconfig cache);
  4. the in-tree build: build/libreserve.so of the source tree holding this
     package (when it is used from a checkout).
When none loads, importing raises LibraryNotFound (an OSError) naming
every place tried.
libmariadb is found with $LIBMARIADB_PATH, else find_library("mariadb"),
else "libmariadb.so.3".
"""

from __future__ import annotations

import ctypes
import ctypes.util
import enum
import os
import re
import sys
from collections import namedtuple
from typing import (Any, Callable, Dict, Iterable, List, NamedTuple, Optional,
                    Sequence, Tuple, TypeVar, Union)

_Self = TypeVar("_Self")

__all__ = [
    "Connection", "Context", "Cart", "Options", "Violation", "Stock",
    "CheckoutStatus", "ReserveError", "ExpectedOutcome", "Failure",
    "OutOfStock", "NotFound", "Expired", "AlreadyClaimed", "AlreadyReleased",
    "Busy", "InDoubt", "ConnectionLost", "InvalidArgument", "InvalidQuantity",
    "EmptyCart", "InvalidToken", "NoItem", "SchemaError", "UnsupportedServer",
    "InTransaction", "OutOfMemory", "DatabaseError", "CartTooBig",
    "StockError", "ConfigError", "RangeError", "Disabled", "Canceled",
    "MariaDBError",
    "version", "version_number", "schema_version", "schema_procedures",
    "strerror", "code_name",
    "options_size", "SchemaVersionError",
    "library_path", "find_schema", "lib", "mariadb",
    "StatsSnapshot", "connect", "make_dsn", "Batcher",
    "Code", "Status", "Op", "Stat", "KeyStat", "Token", "AuthenticationError",
    "LibraryNotFound",
    "ArgumentTypeError", "AUTH_ERRNOS", "native_handle", "exception_for",
    "AsyncContext", "AsyncBatcher", "connect_async",
]

# The version of this package: the libreserve release whose reserve.h it
# was written for (HEADER_VERSION below).
__version__ = "0.1.0"

# ---------------------------------------------------------------------------
# Constants (mirroring reserve.h)
# ---------------------------------------------------------------------------

HEADER_VERSION = __version__      # the reserve.h this binding was written for
HEADER_VERSION_NUMBER = 100


class Code(enum.IntEnum):
    """The library's return codes (RSV_OK, RSV_E*, RSV_PENDING).  An int:
    ``Code.EOUTOFSTOCK == -1``; each exception's ``.code`` is one."""
    OK = 0
    EOUTOFSTOCK = -1
    ENOTFOUND = -2
    EEXPIRED = -3
    ECLAIMED = -4
    ERELEASED = -5
    EBUSY = -6
    EINDOUBT = -7
    ECONN = -8
    EINVAL = -10
    EQUANTITY = -11
    EEMPTY = -12
    ETOKEN = -13
    ENOITEM = -14
    ESCHEMA = -15
    ESERVER = -16
    EINTXN = -17
    ENOMEM = -18
    EDB = -19
    ETOOBIG = -20
    ESTOCK = -21
    ECONFIG = -22
    ERANGE = -23
    EDISABLED = -24
    ESCHEMAVER = -25
    ECANCELED = -26
    ENOTPRIMARY = -27
    # Not an error: a call of the non-blocking interface is in progress
    # (AsyncContext waits for it; the blocking calls never return it).
    PENDING = 1


# The older names, spelled out rather than made in a loop so that type
# checkers and editors see every one (the same for Status, Op and Stat).
OK = Code.OK
EOUTOFSTOCK = Code.EOUTOFSTOCK
ENOTFOUND = Code.ENOTFOUND
EEXPIRED = Code.EEXPIRED
ECLAIMED = Code.ECLAIMED
ERELEASED = Code.ERELEASED
EBUSY = Code.EBUSY
EINDOUBT = Code.EINDOUBT
ECONN = Code.ECONN
EINVAL = Code.EINVAL
EQUANTITY = Code.EQUANTITY
EEMPTY = Code.EEMPTY
ETOKEN = Code.ETOKEN
ENOITEM = Code.ENOITEM
ESCHEMA = Code.ESCHEMA
ESERVER = Code.ESERVER
EINTXN = Code.EINTXN
ENOMEM = Code.ENOMEM
EDB = Code.EDB
ETOOBIG = Code.ETOOBIG
ESTOCK = Code.ESTOCK
ECONFIG = Code.ECONFIG
ERANGE = Code.ERANGE
EDISABLED = Code.EDISABLED
ESCHEMAVER = Code.ESCHEMAVER
ECANCELED = Code.ECANCELED
ENOTPRIMARY = Code.ENOTPRIMARY
PENDING = Code.PENDING

ALL_CODES = (OK, EOUTOFSTOCK, ENOTFOUND, EEXPIRED, ECLAIMED, ERELEASED, EBUSY,
             EINDOUBT, ECONN, EINVAL, EQUANTITY, EEMPTY, ETOKEN, ENOITEM,
             ESCHEMA, ESERVER, EINTXN, ENOMEM, EDB, ETOOBIG, ESTOCK, ECONFIG,
             ERANGE, EDISABLED, ESCHEMAVER, ECANCELED, ENOTPRIMARY)

TOKEN_MAX = 128
QUANTITY_MAX = 1000000000
CART_MAX_LINES = 1000
LINE_MAX_LOCATIONS = 16

OPTIONS_VERSION = 1
OPT_NO_PROACTIVE_REFILL = 0x2

LINE_SPLIT = 0x1


class Status(enum.IntEnum):
    """Where a checkout stands (checkout_status().status).  An int, so
    ``status == 1`` and ``status == STATUS_HELD`` still hold."""
    HELD = 1
    CLAIMED = 2
    RELEASED = 3
    EXPIRED = 4

    def __str__(self) -> str:
        return self.name.lower()


STATUS_HELD = Status.HELD
STATUS_CLAIMED = Status.CLAIMED
STATUS_RELEASED = Status.RELEASED
STATUS_EXPIRED = Status.EXPIRED
STATUS_NAMES = {STATUS_HELD: "held", STATUS_CLAIMED: "claimed",
                STATUS_RELEASED: "released", STATUS_EXPIRED: "expired"}

# Operation kinds (enum rsv_op_kind) and counters (enum rsv_stat).
class Op(enum.IntEnum):
    """Operation kinds of the statistics (enum rsv_op_kind)."""
    ALL = 0
    RESERVE = 1
    CLAIM = 2
    RELEASE = 3
    EXTEND = 4
    STATUS = 5
    REPLENISH = 6
    SWEEP = 7
    STOCK = 8
    AUDIT = 9


OP_ALL = Op.ALL
OP_RESERVE = Op.RESERVE
OP_CLAIM = Op.CLAIM
OP_RELEASE = Op.RELEASE
OP_EXTEND = Op.EXTEND
OP_STATUS = Op.STATUS
OP_REPLENISH = Op.REPLENISH
OP_SWEEP = Op.SWEEP
OP_STOCK = Op.STOCK
OP_AUDIT = Op.AUDIT
OP_NAMES = {OP_ALL: "all", OP_RESERVE: "reserve", OP_CLAIM: "claim",
            OP_RELEASE: "release", OP_EXTEND: "extend", OP_STATUS: "status",
            OP_REPLENISH: "replenish", OP_SWEEP: "sweep", OP_STOCK: "stock",
            OP_AUDIT: "audit"}

class Stat(enum.IntEnum):
    """The counters of the statistics (enum rsv_stat)."""
    CALLS = 0
    OK = 1
    EXPECTED = 2
    FAILED = 3
    RETRIES = 4
    DEADLOCKS = 5
    LOCK_WAIT_TIMEOUTS = 6
    INLINE_REFILLS = 7
    SLOW_PATHS = 8
    SHORT_READS = 9
    STATEMENTS = 10
    LATENCY_US = 11
    LATENCY_MAX_US = 12
    ONE_TRIP = 13
    BACK_TO_FAST = 14
    LEDGER_TAKES = 15
    POOL_DRAINED = 16
    STMT_EVICTIONS = 17


class KeyStat(enum.IntEnum):
    """What a crowd does to a key (enum rsv_key_stat; rsv_stats_key(3))."""
    SHORT = 0
    REFILL_WAITS = 1
    PASSED_ROWS = 2


STAT_CALLS = Stat.CALLS
STAT_OK = Stat.OK
STAT_EXPECTED = Stat.EXPECTED
STAT_FAILED = Stat.FAILED
STAT_RETRIES = Stat.RETRIES
STAT_DEADLOCKS = Stat.DEADLOCKS
STAT_LOCK_WAIT_TIMEOUTS = Stat.LOCK_WAIT_TIMEOUTS
STAT_INLINE_REFILLS = Stat.INLINE_REFILLS
STAT_SLOW_PATHS = Stat.SLOW_PATHS
STAT_SHORT_READS = Stat.SHORT_READS
STAT_STATEMENTS = Stat.STATEMENTS
STAT_LATENCY_US = Stat.LATENCY_US
STAT_LATENCY_MAX_US = Stat.LATENCY_MAX_US
STAT_ONE_TRIP = Stat.ONE_TRIP
STAT_BACK_TO_FAST = Stat.BACK_TO_FAST
STAT_LEDGER_TAKES = Stat.LEDGER_TAKES
STAT_POOL_DRAINED = Stat.POOL_DRAINED
STAT_STMT_EVICTIONS = Stat.STMT_EVICTIONS
STAT_NAMES = {STAT_CALLS: "calls", STAT_OK: "ok", STAT_EXPECTED: "expected",
              STAT_FAILED: "failed", STAT_RETRIES: "retries",
              STAT_DEADLOCKS: "deadlocks",
              STAT_LOCK_WAIT_TIMEOUTS: "lock_wait_timeouts",
              STAT_INLINE_REFILLS: "inline_refills",
              STAT_SLOW_PATHS: "slow_paths", STAT_SHORT_READS: "short_reads",
              STAT_STATEMENTS: "statements", STAT_LATENCY_US: "latency_us",
              STAT_LATENCY_MAX_US: "latency_max_us",
              STAT_ONE_TRIP: "one_trip", STAT_BACK_TO_FAST: "back_to_fast",
              STAT_LEDGER_TAKES: "ledger_takes",
              STAT_POOL_DRAINED: "pool_drained",
              STAT_STMT_EVICTIONS: "stmt_evictions"}

STATS_BUCKETS = 32

# A checkout token: bytes as they are, a str as UTF-8.
Token = Union[bytes, bytearray, memoryview, str]

_U64_MAX = (1 << 64) - 1
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_SIZE_MAX = (1 << (8 * ctypes.sizeof(ctypes.c_size_t))) - 1

# ---------------------------------------------------------------------------
# Exceptions
# ---------------------------------------------------------------------------


_ERRNO_RE = re.compile(r"\(MySQL error (\d+)\)")

# The server's (or Connector/C's) errors that mean the account was refused:
# access denied (1045), to the database (1044), without a password (1698),
# password expired (1820, 1862), unknown authentication plugin (1251,
# 2059).
AUTH_ERRNOS = frozenset((1044, 1045, 1251, 1698, 1820, 1862, 2059))


class ReserveError(Exception):
    """A libreserve call failed.

    code     the library's code (a Code: Code.EOUTOFSTOCK == -1)
    name     its symbolic name ("RSV_EOUTOFSTOCK")
    strerror the library's short text for the code
    message  the detailed message of the failing call (rsv_errmsg())
    function the C function that failed ("rsv_claim")
    errno    the MariaDB server's (or Connector/C's) error number behind
             it (1045 for a wrong password, 1205 for a lock wait timeout),
             or None when the server said nothing
    """

    code: Code
    name: str
    message: str
    function: Optional[str]
    errno: Optional[int]
    #: the cart line that could not be served (Context.reserve), or None
    failed_line: Optional[int] = None

    def __init__(self, code: int, message: Optional[str] = None,
                 function: Optional[str] = None) -> None:
        try:
            code = Code(code)
        except ValueError:
            pass  # a code this binding does not know: kept as the int
        name = code_name(code) or "RSV_UNKNOWN(%d)" % code
        text = strerror(code)
        message = message or text
        where = "%s: " % function if function else ""
        self._text = "%s%s (%d): %s" % (where, name, code, message)
        # first, as OSError's own __init__ (ConnectionLost) resets errno
        # and strerror
        super().__init__(self._text)
        self.code = code  # type: ignore[assignment]
        self.name = name
        self.strerror = text
        self.message = message
        self.function = function
        found = _ERRNO_RE.findall(message)
        self.errno = int(found[-1]) if found else None

    def __str__(self) -> str:
        # (ConnectionLost is also an OSError, whose text would be
        # "[Errno N] strerror")
        return self._text


class ExpectedOutcome(ReserveError):
    """An outcome a checkout handles as business logic."""


class Failure(ReserveError):
    """A failure: bad arguments, schema, server or connection problems."""


class OutOfStock(ExpectedOutcome):
    """RSV_EOUTOFSTOCK; .failed_line is the cart line that could not be
    served (0 after reserve_one, None if unknown)."""


class NotFound(ExpectedOutcome):
    """RSV_ENOTFOUND: no such checkout."""


class Expired(ExpectedOutcome):
    """RSV_EEXPIRED: the hold expired and its units were given back."""


class AlreadyClaimed(ExpectedOutcome):
    """RSV_ECLAIMED."""


class AlreadyReleased(ExpectedOutcome):
    """RSV_ERELEASED."""


class Busy(ExpectedOutcome, TimeoutError):  # type: ignore[misc]
    """RSV_EBUSY: lock conflicts persisted through every retry, or the
    call's time budget (call_timeout_ms) was spent; nothing was applied.
    Also a TimeoutError."""


class InDoubt(ExpectedOutcome, ConnectionError):  # type: ignore[misc]
    """RSV_EINDOUBT: the connection was lost during COMMIT, so the outcome
    is unknown: reconnect and repeat the same call, which settles it (every
    call is idempotent for its token).  Also a ConnectionError, as
    reconnecting and repeating is what both want."""


class ConnectionLost(Failure, ConnectionError):  # type: ignore[misc]
    """RSV_ECONN: cannot connect, not connected, or the connection was lost
    before COMMIT (nothing applied).  Also a ConnectionError.  Reconnect
    (Context.reconnect) and repeat the call."""


class AuthenticationError(Failure, PermissionError):  # type: ignore[misc]
    """RSV_ECONN because the server refused the account: a wrong user or
    password, no access to the database (``.errno`` 1045, 1044, ...).
    Reconnecting with the same credentials will not help, so it is not a
    ConnectionLost (nor a ConnectionError), which a retry loop repeats:
    a PermissionError instead."""


class InvalidArgument(Failure, ValueError):
    """RSV_EINVAL: an argument the library refuses (also a ValueError)."""


class ArgumentTypeError(InvalidArgument, TypeError):
    """An argument of the wrong type (a str where an id belongs, a float
    quantity, a token that is neither bytes nor str): a TypeError, and an
    InvalidArgument as the library would answer it.  Nothing was sent."""


class InvalidQuantity(Failure, ValueError):
    """RSV_EQUANTITY."""


class EmptyCart(Failure, ValueError):
    """RSV_EEMPTY."""


class InvalidToken(Failure, ValueError):
    """RSV_ETOKEN."""


class NoItem(Failure):
    """RSV_ENOITEM: no stock ledger row for the item/location."""


class SchemaError(Failure):
    """RSV_ESCHEMA."""


class UnsupportedServer(Failure):
    """RSV_ESERVER."""


class InTransaction(Failure):
    """RSV_EINTXN."""


class OutOfMemory(Failure):
    """RSV_ENOMEM."""


class DatabaseError(Failure):
    """RSV_EDB: any other database error."""


class CartTooBig(Failure, ValueError):
    """RSV_ETOOBIG."""


class StockError(Failure):
    """RSV_ESTOCK: the stock change is refused."""


class ConfigError(Failure):
    """RSV_ECONFIG: unusable connection configuration."""


class RangeError(Failure, IndexError):
    """RSV_ERANGE: index out of range / buffer too small."""


class SchemaVersionError(Failure):
    """RSV_ESCHEMAVER: the database's schema version does not match the
    library's; the message names the command that fixes it."""


class Disabled(Failure):
    """RSV_EDISABLED: the context is switched off (Context.set_enabled);
    nothing was sent to the server."""


class Canceled(Failure):
    """RSV_ECANCELED: a non-blocking call of the C library was canceled
    (rsv_cancel) before or between its attempts; nothing was applied.
    (AsyncContext raises asyncio.CancelledError for a cancelled task.)"""


class NotPrimary(ConnectionLost):
    """RSV_ENOTPRIMARY: the server takes no writes now (a read-only
    replica, a Galera node outside the primary component); nothing was
    applied.  Reconnect (Context.reconnect: with several hosts in the dsn
    it finds the writable one) and repeat the call."""


_EXC_BY_CODE: Dict[int, type] = {
    EOUTOFSTOCK: OutOfStock, ENOTFOUND: NotFound, EEXPIRED: Expired,
    ECLAIMED: AlreadyClaimed, ERELEASED: AlreadyReleased, EBUSY: Busy,
    EINDOUBT: InDoubt, ECONN: ConnectionLost, EINVAL: InvalidArgument,
    EQUANTITY: InvalidQuantity, EEMPTY: EmptyCart, ETOKEN: InvalidToken,
    ENOITEM: NoItem, ESCHEMA: SchemaError, ESERVER: UnsupportedServer,
    EINTXN: InTransaction, ENOMEM: OutOfMemory, EDB: DatabaseError,
    ETOOBIG: CartTooBig, ESTOCK: StockError, ECONFIG: ConfigError,
    ERANGE: RangeError, EDISABLED: Disabled, ESCHEMAVER: SchemaVersionError,
    ECANCELED: Canceled, ENOTPRIMARY: NotPrimary,
}


def exception_for(code: int, message: Optional[str] = None) -> type:
    """The exception class raised for a return code (and, for RSV_ECONN,
    its message: AuthenticationError when the server refused the
    account)."""
    if code == ECONN and message:
        found = _ERRNO_RE.findall(message)
        if found and int(found[-1]) in AUTH_ERRNOS:
            return AuthenticationError
    if code in _EXC_BY_CODE:
        return _EXC_BY_CODE[code]
    return ExpectedOutcome if -7 <= code < 0 else Failure


# The calls of one line: their line is line 0, as the library's message
# says ("line 0 (item 42, 5 units) cannot be covered ...").
_ONE_LINE = frozenset(("rsv_reserve_one", "rsv_batcher_reserve_one"))


def _error(code: int, message: Optional[str] = None,
           function: Optional[str] = None) -> ReserveError:
    e = exception_for(code, message)(code, message, function)
    if function in _ONE_LINE and code in (EOUTOFSTOCK, ENOITEM):
        e.failed_line = 0
    return e


def _raise(code: int, message: Optional[str] = None,
           function: Optional[str] = None) -> None:
    raise _error(code, message, function)


class _UnknownKeyword(TypeError, AttributeError):
    """An unknown keyword argument: a TypeError, as Python reports one, and
    an AttributeError for code written against earlier releases."""


def _set_fields(options: "Options", fields: Dict[str, Any],
                where: str) -> None:
    for k, v in fields.items():
        if k not in Options._field_names:
            raise _UnknownKeyword("%s got an unexpected keyword argument %r "
                                  "(options: %s)" % (where, k, ", ".join(
                                      Options._field_names)))
        setattr(options, k, v)


class MariaDBError(Exception):
    """An error of MariaDB Connector/C (connect, query) outside libreserve."""

    def __init__(self, errno, message, sqlstate=None):
        self.errno = errno
        self.message = message
        self.sqlstate = sqlstate
        super().__init__("MariaDB error %d%s: %s" % (
            errno, " (%s)" % sqlstate if sqlstate else "", message))


# ---------------------------------------------------------------------------
# Loading the libraries
# ---------------------------------------------------------------------------

_HERE = os.path.dirname(os.path.abspath(__file__))


def _source_tree():
    """The libreserve source tree this package is used from (a checkout:
    bindings/python/libreserve/ in it), or None once installed elsewhere."""
    d = _HERE
    for _ in range(4):
        d = os.path.dirname(d)
        if os.path.isfile(os.path.join(d, "include", "reserve.h")) and \
                os.path.isfile(os.path.join(d, "sql", "schema.sql")):
            return d
    return None


_REPO = _source_tree()


class LibraryNotFound(OSError):
    """The C library libreserve.so could not be loaded (raised by
    ``import libreserve``).  ``.tried`` lists each place looked in and why
    it failed, in order."""

    def __init__(self, tried: List[str]) -> None:
        self.tried = tried
        super().__init__(
            "libreserve: cannot load the C library libreserve.so.0; tried "
            + "; ".join(tried) + ".  Install it (make install), or set "
            "LIBRESERVE_PATH to the library or its directory, or "
            "PKG_CONFIG_PATH to the directory of reserve.pc")

    def __str__(self) -> str:
        return str(self.args[0])


def _pkg_config_libdir(tried: List[str]) -> Optional[str]:
    import subprocess
    tool = os.environ.get("PKG_CONFIG") or "pkg-config"
    try:
        out = subprocess.run([tool, "--variable=libdir", "reserve"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        tried.append("pkg-config (%s)" % e)
        return None
    libdir = out.stdout.strip()
    if out.returncode != 0 or not libdir:
        tried.append("pkg-config --variable=libdir reserve (no reserve.pc "
                     "in its search path)")
        return None
    return libdir


def _try(cand: str, where: str, tried: List[str]):
    try:
        return ctypes.CDLL(cand), cand
    except OSError as e:
        tried.append("%s: %s (%s)" % (where, cand, e))
        return None


def _in_dir(d: str) -> Optional[str]:
    for name in ("libreserve.so.0", "libreserve.so"):
        p = os.path.join(d, name)
        if os.path.exists(p):
            return p
    return None


def _load_reserve():
    # First match wins: LIBRESERVE_PATH (alone when set), the libdir
    # pkg-config reports for reserve, the system's loader, the in-tree
    # build of a checkout.
    tried: List[str] = []
    env = os.environ.get("LIBRESERVE_PATH")
    if env:
        cand = _in_dir(env) if os.path.isdir(env) else env
        if cand is None:
            raise LibraryNotFound(["LIBRESERVE_PATH=%s (no libreserve.so.0 "
                                   "or libreserve.so in that directory)"
                                   % env])
        got = _try(cand, "LIBRESERVE_PATH", tried)
        if got:
            return got
        raise LibraryNotFound(tried)
    tried.append("LIBRESERVE_PATH (not set)")
    libdir = _pkg_config_libdir(tried)
    if libdir:
        cand = _in_dir(libdir)
        if cand is None:
            tried.append("pkg-config's libdir %s (no libreserve.so.0 there)"
                         % libdir)
        else:
            got = _try(cand, "pkg-config's libdir", tried)
            if got:
                return got
    got = _try("libreserve.so.0", "the system loader", tried)
    if got:
        return got
    if _REPO:
        cand = os.path.join(_REPO, "build", "libreserve.so")
        if os.path.exists(cand):
            got = _try(cand, "the source tree's build", tried)
            if got:
                return got
    raise LibraryNotFound(tried)


def _load_mariadb():
    # Loaded after libreserve, so the same libmariadb.so.3 instance it links
    # is returned by the dynamic loader.
    env = os.environ.get("LIBMARIADB_PATH")
    names = [env] if env else [ctypes.util.find_library("mariadb"),
                               "libmariadb.so.3", "libmariadb.so"]
    errors = []
    for n in names:
        if not n:
            continue
        try:
            return ctypes.CDLL(n)
        except OSError as e:
            errors.append("%s: %s" % (n, e))
    raise OSError("cannot load libmariadb (set LIBMARIADB_PATH): " +
                  "; ".join(errors))


lib, _lib_name = _load_reserve()
mariadb = _load_mariadb()


def library_path() -> str:
    """The file the loaded libreserve was mapped from (resolved through
    /proc/self/maps when it was loaded by name)."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and "libreserve" in \
                        os.path.basename(parts[5].strip()):
                    return parts[5].strip()
    except OSError:
        pass
    return _lib_name


# ---- prototypes: libmariadb ----

_c_p = ctypes.c_void_p
_mdb = mariadb
_mdb.mysql_init.argtypes = [_c_p]
_mdb.mysql_init.restype = _c_p
_mdb.mysql_real_connect.argtypes = [_c_p, ctypes.c_char_p, ctypes.c_char_p,
                                    ctypes.c_char_p, ctypes.c_char_p,
                                    ctypes.c_uint, ctypes.c_char_p,
                                    ctypes.c_ulong]
_mdb.mysql_real_connect.restype = _c_p
_mdb.mysql_close.argtypes = [_c_p]
_mdb.mysql_close.restype = None
_mdb.mysql_error.argtypes = [_c_p]
_mdb.mysql_error.restype = ctypes.c_char_p
_mdb.mysql_errno.argtypes = [_c_p]
_mdb.mysql_errno.restype = ctypes.c_uint
_mdb.mysql_sqlstate.argtypes = [_c_p]
_mdb.mysql_sqlstate.restype = ctypes.c_char_p
_mdb.mysql_options.argtypes = [_c_p, ctypes.c_int, _c_p]
_mdb.mysql_options.restype = ctypes.c_int
_mdb.mysql_real_query.argtypes = [_c_p, ctypes.c_char_p, ctypes.c_ulong]
_mdb.mysql_real_query.restype = ctypes.c_int
_mdb.mysql_store_result.argtypes = [_c_p]
_mdb.mysql_store_result.restype = _c_p
_mdb.mysql_free_result.argtypes = [_c_p]
_mdb.mysql_free_result.restype = None
_mdb.mysql_field_count.argtypes = [_c_p]
_mdb.mysql_field_count.restype = ctypes.c_uint
_mdb.mysql_num_fields.argtypes = [_c_p]
_mdb.mysql_num_fields.restype = ctypes.c_uint
_mdb.mysql_fetch_row.argtypes = [_c_p]
_mdb.mysql_fetch_row.restype = ctypes.POINTER(ctypes.c_void_p)
_mdb.mysql_fetch_lengths.argtypes = [_c_p]
_mdb.mysql_fetch_lengths.restype = ctypes.POINTER(ctypes.c_ulong)
_mdb.mysql_affected_rows.argtypes = [_c_p]
_mdb.mysql_affected_rows.restype = ctypes.c_ulonglong
_mdb.mysql_next_result.argtypes = [_c_p]
_mdb.mysql_next_result.restype = ctypes.c_int
_mdb.mysql_set_server_option.argtypes = [_c_p, ctypes.c_int]
_mdb.mysql_set_server_option.restype = ctypes.c_int
_mdb.mysql_select_db.argtypes = [_c_p, ctypes.c_char_p]
_mdb.mysql_select_db.restype = ctypes.c_int
_mdb.mysql_thread_id.argtypes = [_c_p]
_mdb.mysql_thread_id.restype = ctypes.c_ulong
_mdb.mysql_get_server_info.argtypes = [_c_p]
_mdb.mysql_get_server_info.restype = ctypes.c_char_p

_CLIENT_MULTI_STATEMENTS = 1 << 16
_MYSQL_OPT_CONNECT_TIMEOUT = 0
_MYSQL_OPT_READ_TIMEOUT = 11
_MYSQL_OPT_WRITE_TIMEOUT = 12
_MYSQL_OPT_RECONNECT = 20
_MYSQL_OPTION_MULTI_STATEMENTS_ON = 0
_MYSQL_OPTION_MULTI_STATEMENTS_OFF = 1


# ---- prototypes: libreserve ----

class Options(ctypes.Structure):
    """struct rsv_options.  Options() is filled by rsv_options_init() with the
    library's defaults; keyword arguments then override fields, e.g.
    Options(pool_cap=50, hold_ttl_ms=30000).  conn_tag_prefix takes str or
    bytes (the library copies it at rsv_open())."""

    _fields_ = [
        ("version", ctypes.c_uint),
        ("flags", ctypes.c_uint32),
        ("pool_cap", ctypes.c_int64),
        ("refill_low_water", ctypes.c_int64),
        ("hold_ttl_ms", ctypes.c_int64),
        ("max_retries", ctypes.c_int32),
        ("retry_base_us", ctypes.c_int32),
        ("lock_wait_timeout_s", ctypes.c_int32),
        ("conn_tag_prefix", ctypes.c_char_p),
        ("settled_retention_s", ctypes.c_int64),
        ("pool_idle_s", ctypes.c_int64),
        ("call_timeout_ms", ctypes.c_int64),
        ("stmt_cache_max", ctypes.c_int32),
    ]

    _field_names: Tuple[str, ...] = ()
    version: int
    flags: int
    pool_cap: int
    refill_low_water: int
    hold_ttl_ms: int
    max_retries: int
    retry_base_us: int
    lock_wait_timeout_s: int
    conn_tag_prefix: Optional[bytes]
    settled_retention_s: int
    pool_idle_s: int
    call_timeout_ms: int
    stmt_cache_max: int

    def __init__(self, version: int = OPTIONS_VERSION, **fields: Any) -> None:
        super().__init__()
        rc = lib.rsv_options_init(ctypes.byref(self), version)
        if rc != OK:
            _raise(rc, "rsv_options_init(version=%d) failed" % version,
                   "rsv_options_init")
        _set_fields(self, fields, "Options()")

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "conn_tag_prefix" and isinstance(value, str):
            value = value.encode("utf-8")
        if name not in self._field_names and not name.startswith("_"):
            raise AttributeError("rsv_options has no field %r" % name)
        if name != "conn_tag_prefix" and not name.startswith("_") and \
                (isinstance(value, bool) or not isinstance(value, int)):
            raise ArgumentTypeError(EINVAL, "option %s must be an int, not "
                                    "%s" % (name, type(value).__name__))
        if name == "conn_tag_prefix" and value is not None and \
                not isinstance(value, bytes):
            raise ArgumentTypeError(EINVAL, "option conn_tag_prefix must be "
                                    "a str, bytes or None, not %s"
                                    % type(value).__name__)
        super().__setattr__(name, value)

    def as_dict(self) -> Dict[str, Any]:
        """Every field by name."""
        return {name: getattr(self, name) for name, _ in self._fields_}

    def __repr__(self) -> str:
        return "Options(%s)" % ", ".join("%s=%r" % kv
                                         for kv in self.as_dict().items())


SWEEP_RESULT_VERSION = 1


class SweepResult(ctypes.Structure):
    """struct rsv_sweep_result: what one Context.sweep_report() did."""

    _fields_ = [
        ("version", ctypes.c_uint32),
        ("holds_released", ctypes.c_int64),
        ("units_released", ctypes.c_int64),
        ("journal_folded", ctypes.c_int64),
        ("pool_rows_drained", ctypes.c_int64),
        ("checkouts_purged", ctypes.c_int64),
    ]

    def as_dict(self):
        return {name: getattr(self, name) for name, _ in self._fields_[1:]}

    def __repr__(self):
        return "SweepResult(%s)" % ", ".join("%s=%r" % kv
                                             for kv in self.as_dict().items())

Options._field_names = tuple(name for name, _ in Options._fields_)

_AUDIT_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint64,
                             ctypes.c_uint64, ctypes.c_uint64,
                             ctypes.c_char_p)

# void (*)(void *user, uint32_t op, int code, uint64_t shop_id,
#         const void *token, size_t token_len, uint64_t latency_us)
_OP_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32,
                          ctypes.c_int, ctypes.c_uint64, ctypes.c_void_p,
                          ctypes.c_size_t, ctypes.c_uint64)

_pp = ctypes.POINTER(ctypes.c_void_p)
_i64p = ctypes.POINTER(ctypes.c_int64)
_u64p = ctypes.POINTER(ctypes.c_uint64)
_tok = ctypes.c_char_p  # bytes (may hold NULs; the length is passed too)

_PROTOS = {
    "rsv_version": (ctypes.c_char_p, []),
    "rsv_version_number": (ctypes.c_int, []),
    "rsv_schema_version": (ctypes.c_int, []),
    "rsv_schema_procedure": (ctypes.c_char_p, [ctypes.c_size_t]),
    "rsv_strerror": (ctypes.c_char_p, [ctypes.c_int]),
    "rsv_code_name": (ctypes.c_char_p, [ctypes.c_int]),
    "rsv_options_init": (ctypes.c_int, [ctypes.POINTER(Options), ctypes.c_uint]),
    "rsv_options_size": (ctypes.c_size_t, []),
    "rsv_open": (ctypes.c_int, [_pp, _c_p, ctypes.POINTER(Options)]),
    "rsv_open_dsn": (ctypes.c_int, [_pp, ctypes.c_char_p,
                                    ctypes.POINTER(Options)]),
    "rsv_reconnect": (ctypes.c_int, [_c_p]),
    "rsv_close": (None, [_c_p]),
    "rsv_errmsg": (ctypes.c_char_p, [_c_p]),
    "rsv_errcode": (ctypes.c_int, [_c_p]),
    "rsv_connection": (_c_p, [_c_p]),
    "rsv_cart_new": (ctypes.c_int, [_pp]),
    "rsv_cart_free": (None, [_c_p]),
    "rsv_cart_clear": (None, [_c_p]),
    "rsv_cart_add": (ctypes.c_int, [_c_p, ctypes.c_uint64, _u64p,
                                    ctypes.c_size_t, ctypes.c_int64,
                                    ctypes.c_uint32]),
    "rsv_cart_lines": (ctypes.c_size_t, [_c_p]),
    "rsv_cart_allocation_count": (ctypes.c_int, [_c_p, ctypes.c_size_t,
                                                 ctypes.POINTER(ctypes.c_size_t)]),
    "rsv_cart_allocation": (ctypes.c_int, [_c_p, ctypes.c_size_t,
                                           ctypes.c_size_t, _u64p, _i64p]),
    "rsv_cart_failed_line": (ctypes.c_size_t, [_c_p]),
    "rsv_reserve": (ctypes.c_int, [_c_p, ctypes.c_uint64, _tok,
                                   ctypes.c_size_t, _c_p, ctypes.c_int64]),
    "rsv_reserve_one": (ctypes.c_int, [_c_p, ctypes.c_uint64, _tok,
                                       ctypes.c_size_t, ctypes.c_uint64,
                                       ctypes.c_uint64, ctypes.c_int64,
                                       ctypes.c_int64]),
    "rsv_claim": (ctypes.c_int, [_c_p, ctypes.c_uint64, _tok,
                                 ctypes.c_size_t]),
    "rsv_release": (ctypes.c_int, [_c_p, ctypes.c_uint64, _tok,
                                   ctypes.c_size_t]),
    "rsv_extend": (ctypes.c_int, [_c_p, ctypes.c_uint64, _tok,
                                  ctypes.c_size_t, ctypes.c_int64]),
    "rsv_reserve_batch": (ctypes.c_int, [_c_p, ctypes.c_size_t, _u64p,
                                         ctypes.POINTER(ctypes.c_char_p),
                                         ctypes.POINTER(ctypes.c_size_t),
                                         _u64p, _u64p, _i64p, ctypes.c_int64,
                                         ctypes.POINTER(ctypes.c_int)]),
    "rsv_reserve_cart_batch": (ctypes.c_int, [_c_p, ctypes.c_size_t, _u64p,
                                              ctypes.POINTER(ctypes.c_char_p),
                                              ctypes.POINTER(ctypes.c_size_t),
                                              ctypes.POINTER(_c_p),
                                              ctypes.c_int64,
                                              ctypes.POINTER(ctypes.c_int)]),
    "rsv_claim_batch": (ctypes.c_int, [_c_p, ctypes.c_size_t, _u64p,
                                       ctypes.POINTER(ctypes.c_char_p),
                                       ctypes.POINTER(ctypes.c_size_t),
                                       ctypes.POINTER(ctypes.c_int)]),
    "rsv_release_batch": (ctypes.c_int, [_c_p, ctypes.c_size_t, _u64p,
                                         ctypes.POINTER(ctypes.c_char_p),
                                         ctypes.POINTER(ctypes.c_size_t),
                                         ctypes.POINTER(ctypes.c_int)]),
    "rsv_checkout_status": (ctypes.c_int, [_c_p, ctypes.c_uint64, _tok,
                                           ctypes.c_size_t,
                                           ctypes.POINTER(ctypes.c_int32),
                                           _i64p, _i64p]),
    "rsv_replenish": (ctypes.c_int, [_c_p, ctypes.c_uint64, ctypes.c_uint64,
                                     ctypes.c_uint64, _i64p]),
    "rsv_pool_drain": (ctypes.c_int, [_c_p, ctypes.c_uint64, ctypes.c_uint64,
                                      ctypes.c_uint64, _i64p]),
    "rsv_sweep": (ctypes.c_int, [_c_p, ctypes.c_uint64, ctypes.c_int64,
                                 _i64p]),
    "rsv_sweep_report": (ctypes.c_int, [_c_p, ctypes.c_uint64,
                                        ctypes.c_int64,
                                        ctypes.POINTER(SweepResult)]),
    "rsv_stock_set": (ctypes.c_int, [_c_p, ctypes.c_uint64, ctypes.c_uint64,
                                     ctypes.c_uint64, ctypes.c_int64]),
    "rsv_stock_adjust": (ctypes.c_int, [_c_p, ctypes.c_uint64,
                                        ctypes.c_uint64, ctypes.c_uint64,
                                        ctypes.c_int64, _i64p]),
    "rsv_stock_get": (ctypes.c_int, [_c_p, ctypes.c_uint64, ctypes.c_uint64,
                                     ctypes.c_uint64, _i64p, _i64p, _i64p,
                                     _i64p]),
    "rsv_audit": (ctypes.c_int, [_c_p, ctypes.c_uint64, ctypes.c_int,
                                 _AUDIT_FN, ctypes.c_void_p, _i64p]),
    "rsv_stats_get": (ctypes.c_int, [_c_p, ctypes.c_uint32, ctypes.c_uint32,
                                     _u64p]),
    "rsv_stats_outcome": (ctypes.c_int, [_c_p, ctypes.c_uint32, ctypes.c_int,
                                         _u64p]),
    "rsv_stats_histogram": (ctypes.c_int, [_c_p, ctypes.c_uint32, _u64p,
                                           ctypes.c_size_t]),
    "rsv_stats_percentile": (ctypes.c_int, [_c_p, ctypes.c_uint32,
                                            ctypes.c_double, _u64p]),
    "rsv_stats_reset": (ctypes.c_int, [_c_p]),
    "rsv_stats_key": (ctypes.c_int, [_c_p, ctypes.c_uint64, ctypes.c_uint64,
                                     ctypes.c_uint64, ctypes.c_uint32,
                                     _u64p]),
    "rsv_stats_key_at": (ctypes.c_int, [_c_p, ctypes.c_uint32, _u64p, _u64p,
                                        _u64p]),
    "rsv_stats_snapshot_new": (ctypes.c_int, [_pp]),
    "rsv_stats_snapshot_free": (None, [_c_p]),
    "rsv_stats_snapshot_clear": (None, [_c_p]),
    "rsv_stats_snapshot_add": (ctypes.c_int, [_c_p, _c_p]),
    "rsv_stats_snapshot_merge": (ctypes.c_int, [_c_p, _c_p]),
    "rsv_stats_prometheus": (ctypes.c_int, [_c_p, ctypes.c_char_p,
                                            ctypes.c_char_p, ctypes.c_size_t,
                                            ctypes.POINTER(ctypes.c_size_t)]),
    "rsv_set_callback": (ctypes.c_int, [_c_p, _OP_FN, ctypes.c_void_p]),
    "rsv_set_enabled": (ctypes.c_int, [_c_p, ctypes.c_int]),
    # The non-blocking interface: declared so that its prototypes are
    # checked; the binding itself blocks (asyncio users run its calls in
    # an executor).
    "rsv_reserve_start": (ctypes.c_int, [_c_p, ctypes.c_uint64, _tok,
                                         ctypes.c_size_t, _c_p,
                                         ctypes.c_int64]),
    "rsv_reserve_one_start": (ctypes.c_int, [_c_p, ctypes.c_uint64, _tok,
                                             ctypes.c_size_t, ctypes.c_uint64,
                                             ctypes.c_uint64, ctypes.c_int64,
                                             ctypes.c_int64]),
    "rsv_claim_start": (ctypes.c_int, [_c_p, ctypes.c_uint64, _tok,
                                       ctypes.c_size_t]),
    "rsv_release_start": (ctypes.c_int, [_c_p, ctypes.c_uint64, _tok,
                                         ctypes.c_size_t]),
    "rsv_extend_start": (ctypes.c_int, [_c_p, ctypes.c_uint64, _tok,
                                        ctypes.c_size_t, ctypes.c_int64]),
    "rsv_checkout_status_start": (ctypes.c_int, [_c_p, ctypes.c_uint64, _tok,
                                                 ctypes.c_size_t,
                                                 ctypes.POINTER(ctypes.c_int32),
                                                 _i64p, _i64p]),
    "rsv_cont": (ctypes.c_int, [_c_p]),
    "rsv_async_fd": (ctypes.c_int, [_c_p]),
    "rsv_pending": (ctypes.c_int, [_c_p]),
    "rsv_cancel": (ctypes.c_int, [_c_p]),
    # The batcher (class Batcher).  ctypes lets go of the GIL during each
    # call, so Python threads wait for their answers in parallel.
    "rsv_batcher_open": (ctypes.c_int, [_pp, ctypes.c_char_p,
                                        ctypes.POINTER(Options),
                                        ctypes.c_uint32]),
    "rsv_batcher_close": (None, [_c_p]),
    "rsv_batcher_reserve_one": (ctypes.c_int, [_c_p, ctypes.c_uint64, _tok,
                                               ctypes.c_size_t,
                                               ctypes.c_uint64,
                                               ctypes.c_uint64,
                                               ctypes.c_int64,
                                               ctypes.c_int64]),
    "rsv_batcher_reserve": (ctypes.c_int, [_c_p, ctypes.c_uint64, _tok,
                                           ctypes.c_size_t, _c_p,
                                           ctypes.c_int64]),
    "rsv_batcher_claim": (ctypes.c_int, [_c_p, ctypes.c_uint64, _tok,
                                         ctypes.c_size_t]),
    "rsv_batcher_release": (ctypes.c_int, [_c_p, ctypes.c_uint64, _tok,
                                           ctypes.c_size_t]),
    "rsv_batcher_stats_get": (ctypes.c_int, [_c_p, ctypes.c_uint32,
                                             ctypes.c_uint32, _u64p]),
    "rsv_batcher_stats_snapshot_add": (ctypes.c_int, [_c_p, _c_p]),
    # its non-blocking form: declared so that its prototypes are checked,
    # as the contexts' above
    "rsv_batcher_reserve_one_start": (ctypes.c_int, [_c_p, ctypes.c_uint64,
                                                     _tok, ctypes.c_size_t,
                                                     ctypes.c_uint64,
                                                     ctypes.c_uint64,
                                                     ctypes.c_int64,
                                                     ctypes.c_int64, _pp]),
    "rsv_batcher_reserve_start": (ctypes.c_int, [_c_p, ctypes.c_uint64, _tok,
                                                 ctypes.c_size_t, _c_p,
                                                 ctypes.c_int64, _pp]),
    "rsv_batcher_claim_start": (ctypes.c_int, [_c_p, ctypes.c_uint64, _tok,
                                               ctypes.c_size_t, _pp]),
    "rsv_batcher_release_start": (ctypes.c_int, [_c_p, ctypes.c_uint64, _tok,
                                                 ctypes.c_size_t, _pp]),
    "rsv_batcher_fd": (ctypes.c_int, [_c_p]),
    "rsv_batcher_next_done": (ctypes.c_int, [_c_p, _pp,
                                             ctypes.POINTER(ctypes.c_int)]),
    "rsv_batcher_call_free": (None, [_c_p]),
}

for _name, (_res, _args) in _PROTOS.items():
    _f = getattr(lib, _name)  # AttributeError here = a function is missing
    _f.restype = _res
    _f.argtypes = _args
del _name, _res, _args, _f

# Names of every wrapped public function (for completeness checks).
WRAPPED_FUNCTIONS = tuple(sorted(_PROTOS))


def _s(b):
    return b.decode("utf-8", "replace") if b is not None else None


def version() -> str:
    """rsv_version(): the loaded library's version string."""
    return _s(lib.rsv_version())


def version_number() -> int:
    """rsv_version_number(): MAJOR * 10000 + MINOR * 100 + PATCH."""
    return lib.rsv_version_number()


def schema_version() -> int:
    """rsv_schema_version(): the schema version the library works on."""
    return lib.rsv_schema_version()


def schema_procedures() -> List[str]:
    """The stored procedures the library calls (rsv_schema_procedure()):
    a database without them works, with more round trips per call."""
    names: List[str] = []
    while True:
        n = lib.rsv_schema_procedure(len(names))
        if n is None:
            return names
        names.append(_s(n))


def strerror(code: int) -> str:
    """rsv_strerror(): short static text for any code."""
    return _s(lib.rsv_strerror(code))


def code_name(code: int) -> Optional[str]:
    """rsv_code_name(): "RSV_EOUTOFSTOCK", ...; None if unknown."""
    return _s(lib.rsv_code_name(code))


def options_size() -> int:
    """rsv_options_size(): sizeof(rsv_options) in the loaded library."""
    return lib.rsv_options_size()


if options_size() < ctypes.sizeof(Options):
    raise ImportError("libreserve at %s has a smaller rsv_options (%d bytes) "
                      "than this binding expects (%d)" % (
                          library_path(), options_size(),
                          ctypes.sizeof(Options)))


def find_schema() -> str:
    """Path of schema.sql: $RSV_SCHEMA, else share/libreserve/schema.sql
    next to the loaded library's lib directory, the usual install paths,
    else the in-tree sql/schema.sql."""
    env = os.environ.get("RSV_SCHEMA")
    if env:
        return env
    libdir = os.path.dirname(library_path() or "")
    cands = []
    if libdir:
        d = libdir
        for _ in range(2):  # lib/ or lib/<multiarch>/
            d = os.path.dirname(d)
            cands.append(os.path.join(d, "share", "libreserve", "schema.sql"))
    if _REPO:
        cands.append(os.path.join(_REPO, "sql", "schema.sql"))
    cands += ["/usr/local/share/libreserve/schema.sql",
              "/usr/share/libreserve/schema.sql"]
    for c in cands:
        if os.path.exists(c):
            return c
    raise FileNotFoundError("schema.sql not found (set RSV_SCHEMA); tried " +
                            ", ".join(cands))


# ---------------------------------------------------------------------------
# Argument checks (ctypes would silently truncate out-of-range integers)
# ---------------------------------------------------------------------------

def _int(v: Any, what: str, lo: int, hi: int, kind: str) -> int:
    # bool is an int to Python, never an id or a quantity here
    if isinstance(v, bool) or not isinstance(v, int):
        raise ArgumentTypeError(EINVAL, "%s must be an int, not %s"
                                % (what, type(v).__name__))
    if not lo <= v <= hi:
        raise InvalidArgument(EINVAL, "%s must be %s, not %r"
                              % (what, kind, v))
    return int(v)


def _u64(v: Any, what: str) -> int:
    return _int(v, what, 0, _U64_MAX, "in 0..2**64-1")


def _i64(v: Any, what: str) -> int:
    return _int(v, what, _I64_MIN, _I64_MAX, "a 64-bit signed int")


def _token(token: Any) -> bytes:
    """bytes for a token: bytes/bytearray/memoryview as is, str UTF-8."""
    if isinstance(token, str):
        return token.encode("utf-8")
    if isinstance(token, (bytes, bytearray, memoryview)):
        return bytes(token)
    raise ArgumentTypeError(EINVAL, "token must be bytes or str, not %s"
                            % type(token).__name__)


# ---------------------------------------------------------------------------
# MariaDB connection (Connector/C through ctypes)
# ---------------------------------------------------------------------------

class _Closable:
    """Context-manager support and close-on-collect for the wrappers of
    library handles (each defines close(), idempotent)."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class Connection(_Closable):
    """A MariaDB connection opened with mysql_real_connect().

    Connection(unix_socket=..., host=..., port=..., user=..., password=...,
               db=..., connect_timeout=..., read_timeout=..., reconnect=False,
               multi_statements=False)

    ``handle`` is the MYSQL* (an int); the object also converts to it as a
    ctypes argument.  Closing the connection first closes every Context still
    open on it.  Values come back as bytes (or None for NULL).
    """

    def __init__(self, unix_socket: Optional[str] = None,
                 host: Optional[str] = None, port: int = 0,
                 user: Optional[str] = None, password: Optional[str] = None,
                 db: Optional[str] = None,
                 connect_timeout: Optional[int] = None,
                 read_timeout: Optional[int] = None, reconnect: bool = False,
                 multi_statements: bool = False) -> None:
        self._contexts: List[Context] = []
        h = _mdb.mysql_init(None)
        if not h:
            raise MemoryError("mysql_init failed")
        self.handle = h
        try:
            for opt, val in ((_MYSQL_OPT_CONNECT_TIMEOUT, connect_timeout),
                             (_MYSQL_OPT_READ_TIMEOUT, read_timeout)):
                if val is not None:
                    v = ctypes.c_uint(int(val))
                    _mdb.mysql_options(h, opt, ctypes.byref(v))
            if reconnect:
                b = ctypes.c_char(1)
                _mdb.mysql_options(h, _MYSQL_OPT_RECONNECT, ctypes.byref(b))
            enc = lambda s: s.encode("utf-8") if isinstance(s, str) else s
            flags = _CLIENT_MULTI_STATEMENTS if multi_statements else 0
            if not _mdb.mysql_real_connect(h, enc(host), enc(user),
                                           enc(password), enc(db), int(port),
                                           enc(unix_socket), flags):
                raise self._error()
        except BaseException:
            _mdb.mysql_close(h)
            self.handle = None
            raise

    # -- plumbing --
    @property
    def _as_parameter_(self):
        if not self.handle:
            raise InvalidArgument(EINVAL, "the connection is closed")
        return ctypes.c_void_p(self.handle)

    def _h(self):
        if not self.handle:
            raise MariaDBError(2006, "the connection is closed")
        return self.handle

    def _error(self):
        h = self.handle
        return MariaDBError(_mdb.mysql_errno(h), _s(_mdb.mysql_error(h)),
                            _s(_mdb.mysql_sqlstate(h)))

    @property
    def closed(self) -> bool:
        """True once closed."""
        return not self.handle

    def close(self) -> None:
        """Close every context on this connection, then the connection
        itself (mysql_close); idempotent."""
        for ctx in list(self._contexts):
            ctx.close()
        if self.handle:
            _mdb.mysql_close(self.handle)
            self.handle = None

    # -- info --
    @property
    def thread_id(self) -> int:
        return _mdb.mysql_thread_id(self._h())

    @property
    def server_info(self) -> Optional[str]:
        return _s(_mdb.mysql_get_server_info(self._h()))

    @property
    def errno(self) -> int:
        return _mdb.mysql_errno(self._h())

    @property
    def error(self) -> Optional[str]:
        """mysql_error() of the last call on the connection."""
        return _s(_mdb.mysql_error(self._h()))

    # -- queries --
    def _fetch(self, res):
        n = _mdb.mysql_num_fields(res)
        rows = []
        while True:
            row = _mdb.mysql_fetch_row(res)
            if not row:
                break
            lens = _mdb.mysql_fetch_lengths(res)
            rows.append(tuple(
                ctypes.string_at(row[i], lens[i]) if row[i] else None
                for i in range(n)))
        return rows

    def _run(self, sql):
        """Send sql, read every result; returns [(rows or None, affected)]."""
        h = self._h()
        if isinstance(sql, str):
            sql = sql.encode("utf-8")
        if _mdb.mysql_real_query(h, sql, len(sql)) != 0:
            raise self._error()
        out = []
        while True:
            res = _mdb.mysql_store_result(h)
            if res:
                try:
                    out.append((self._fetch(res), None))
                finally:
                    _mdb.mysql_free_result(res)
            elif _mdb.mysql_field_count(h) != 0:
                raise self._error()
            else:
                out.append((None, _mdb.mysql_affected_rows(h)))
            st = _mdb.mysql_next_result(h)
            if st > 0:
                raise self._error()
            if st != 0:
                return out

    def query(self, sql: Union[str, bytes]) -> List[Tuple[Optional[bytes], ...]]:
        """Run one statement, return its rows: a list of tuples of bytes or
        None (an empty list for a statement without a result set)."""
        rows, _ = self._run(sql)[-1]
        return rows if rows is not None else []

    def scalar(self, sql: Union[str, bytes]) -> Optional[bytes]:
        """The first column of the first row (bytes), or None."""
        rows = self.query(sql)
        return rows[0][0] if rows else None

    def scalar_int(self, sql: Union[str, bytes]) -> Optional[int]:
        """scalar() as an int (None stays None)."""
        v = self.scalar(sql)
        return int(v) if v is not None else None

    def execute(self, sql: Union[str, bytes]) -> int:
        """Run one statement, return the affected row count."""
        _, n = self._run(sql)[-1]
        return n or 0

    def execute_script(self, sql: Union[str, bytes]) -> List[Tuple[Any, Any]]:
        """Run a script the way the mariadb client does: ;-separated
        statements, sent in one round trip per part (multi-statements are
        switched on for the call only), and "DELIMITER xx" lines for
        stored procedures (sql/schema.sql has one).  tests/loaders-test.py
        checks that sql/schema.sql loaded here, by the C library's loader
        and by the mariadb client leaves the same schema."""
        h = self._h()
        if isinstance(sql, str):
            sql = sql.encode("utf-8")
        if _mdb.mysql_set_server_option(h, _MYSQL_OPTION_MULTI_STATEMENTS_ON):
            raise self._error()
        try:
            out = []
            for part in _script_parts(sql):
                out += self._run(part)
            return out
        finally:
            _mdb.mysql_set_server_option(h, _MYSQL_OPTION_MULTI_STATEMENTS_OFF)

    def execute_file(self, path: str) -> List[Tuple[Any, Any]]:
        """Run an SQL file (e.g. find_schema()) with execute_script()."""
        with open(path, "rb") as f:
            return self.execute_script(f.read())

    def select_db(self, db: str) -> None:
        """Make db the connection's default database."""
        if _mdb.mysql_select_db(self._h(), db.encode("utf-8")) != 0:
            raise self._error()

    def begin(self) -> None:
        """START TRANSACTION: a claim made now joins it."""
        self.execute("START TRANSACTION")

    def commit(self) -> None:
        """COMMIT the open transaction."""
        self.execute("COMMIT")

    def rollback(self) -> None:
        """ROLLBACK the open transaction (and a claim that joined it)."""
        self.execute("ROLLBACK")


def _script_blank(b):
    return all(not ln.strip() or ln.strip().startswith(b"--")
               for ln in b.split(b"\n"))


def _script_parts(sql):
    """Split a script at DELIMITER lines: the ;-parts whole (sent as
    multi-statements), each statement of a DELIMITER xx part alone."""
    parts, chunk, delim = [], [], b";"
    for line in sql.split(b"\n"):
        s = line.strip()
        if s[:10].upper() == b"DELIMITER " and len(s) > 10:
            if delim == b";":
                parts.append(b"\n".join(chunk))
            chunk, delim = [], s[10:].strip()
        elif delim != b";" and s.endswith(delim):
            chunk.append(line.rstrip()[:-len(delim)])
            parts.append(b"\n".join(chunk))
            chunk = []
        else:
            chunk.append(line)
    if delim != b";" and not _script_blank(b"\n".join(chunk)):
        raise ValueError("script ends inside DELIMITER " + delim.decode())
    if delim == b";":
        parts.append(b"\n".join(chunk))
    return [p for p in parts if not _script_blank(p)]


def _is_mysqldb(conn: Any) -> bool:
    """A MySQLdb (mysqlclient) connection: it can hand over its MYSQL*."""
    return hasattr(type(conn), "_get_native_connection")


def _client_libraries() -> List[str]:
    """The MySQL client libraries mapped into this process."""
    found = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                name = os.path.basename(line.split(None, 5)[-1].strip())
                if name.startswith(("libmariadb", "libmysqlclient")):
                    found.add(name)
    except OSError:
        pass
    return sorted(found)


def native_handle(conn: Any) -> int:
    """The MYSQL* address of a MySQLdb (mysqlclient) connection, such as
    Django's ``django.db.connection.connection``, for Context(): the
    context then works on that connection, inside its transactions.

    It needs a mysqlclient built against MariaDB Connector/C, the client
    library libreserve uses (Debian's python3-mysqldb is); one built
    against MySQL's libmysqlclient has a different MYSQL and is refused
    (ConfigError).  The handle comes from mysqlclient's
    _get_native_connection(), which it provides for transaction managers.
    """
    if not _is_mysqldb(conn):
        raise ArgumentTypeError(EINVAL, "expected a MySQLdb connection, not %s"
                                % type(conn).__name__)
    if not getattr(conn, "open", 1):
        raise InvalidArgument(EINVAL, "the MySQLdb connection is closed")
    others = [n for n in _client_libraries() if n.startswith("libmysqlclient")]
    if others:
        raise ConfigError(ECONFIG, "mysqlclient is built against %s (MySQL's "
                          "client library), not MariaDB Connector/C, which "
                          "libreserve uses: its MYSQL cannot be shared; "
                          "install a mysqlclient built against libmariadb "
                          "(Debian: python3-mysqldb)" % others[0])
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return get(conn._get_native_connection(),
               b"_mysql.connection.native_connection")


def _conn_ptr(conn: Any) -> Optional[int]:
    if conn is None:
        return None
    if isinstance(conn, Connection):
        return conn._h()
    if isinstance(conn, bool):
        raise ArgumentTypeError(EINVAL, "conn must be a connection, not bool")
    if isinstance(conn, int):
        return conn
    if isinstance(conn, ctypes.c_void_p):
        return conn.value
    if _is_mysqldb(conn):
        return native_handle(conn)
    raise ArgumentTypeError(EINVAL, "conn must be a connection string, a "
                            "Connection, a MySQLdb connection or a MYSQL* "
                            "address (int), not %s" % type(conn).__name__)


# ---------------------------------------------------------------------------
# Cart
# ---------------------------------------------------------------------------

class Cart:
    """rsv_cart: lines of (item, locations in order of preference, quantity).

    Cart([(item, [loc, ...], qty), (item, [loc], qty, LINE_SPLIT), ...])
    After a successful Context.reserve(), allocations(line) says where each
    line is held.  Use as a context manager or call free().
    """

    def __init__(self, lines: Iterable[Sequence[Any]] = ()) -> None:
        p = ctypes.c_void_p()
        rc = lib.rsv_cart_new(ctypes.byref(p))
        if rc != OK:
            _raise(rc, None, "rsv_cart_new")
        self._p = p.value
        for line in lines:
            self.add(*line)

    @property
    def _as_parameter_(self):
        return ctypes.c_void_p(self._ptr())

    def _ptr(self):
        if not self._p:
            raise InvalidArgument(EINVAL, "the cart was freed")
        return self._p

    def add(self, item_id: int, locations: Union[int, Sequence[int]],
            quantity: int, flags: int = 0, split: Optional[bool] = None) -> int:
        """Add a line: quantity units of item_id from the first of
        locations (an id, or ids in order of preference) that has them all,
        or, with split=True, from several of them.  Returns the line's
        index."""
        if isinstance(locations, int):
            locations = [locations]
        locs = [_u64(l, "location_id") for l in locations]
        if split:
            flags |= LINE_SPLIT
        arr = (ctypes.c_uint64 * max(len(locs), 1))(*locs)
        rc = lib.rsv_cart_add(self._ptr(), _u64(item_id, "item_id"), arr,
                              len(locs), _i64(quantity, "quantity"),
                              ctypes.c_uint32(flags))
        if rc != OK:
            _raise(rc, "rsv_cart_add(item %r, locations %r, quantity %r, "
                       "flags %#x): %s" % (item_id, locs, quantity, flags,
                                           strerror(rc)), "rsv_cart_add")
        return len(self) - 1

    def clear(self) -> None:
        """Remove every line."""
        lib.rsv_cart_clear(self._ptr())

    def __len__(self) -> int:
        return lib.rsv_cart_lines(self._ptr())

    @property
    def lines(self) -> int:
        """rsv_cart_lines()."""
        return len(self)

    def allocation_count(self, line: int) -> int:
        """rsv_cart_allocation_count(): locations holding units for line."""
        n = ctypes.c_size_t()
        rc = lib.rsv_cart_allocation_count(self._ptr(), line, ctypes.byref(n))
        if rc != OK:
            _raise(rc, "line %r of a %d-line cart" % (line, len(self)),
                   "rsv_cart_allocation_count")
        return n.value

    def allocation(self, line: int, idx: int) -> Tuple[int, int]:
        """rsv_cart_allocation(): (location_id, quantity)."""
        loc, qty = ctypes.c_uint64(), ctypes.c_int64()
        rc = lib.rsv_cart_allocation(self._ptr(), line, idx,
                                     ctypes.byref(loc), ctypes.byref(qty))
        if rc != OK:
            _raise(rc, "allocation %r of line %r" % (idx, line),
                   "rsv_cart_allocation")
        return loc.value, qty.value

    def allocations(self, line: int) -> List[Tuple[int, int]]:
        """Every (location_id, quantity) holding units for line."""
        return [self.allocation(line, i)
                for i in range(self.allocation_count(line))]

    @property
    def failed_line(self) -> Optional[int]:
        """rsv_cart_failed_line(); None instead of (size_t)-1."""
        v = lib.rsv_cart_failed_line(self._ptr())
        return None if v == _SIZE_MAX else v

    def free(self) -> None:
        """rsv_cart_free(); idempotent."""
        if self._p:
            lib.rsv_cart_free(self._p)
            self._p = None

    close = free

    @property
    def closed(self) -> bool:
        return not self._p

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.free()

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass


# ---------------------------------------------------------------------------
# Context
# ---------------------------------------------------------------------------

class Stock(NamedTuple):
    """The stock of one item at one location, from one consistent read."""
    on_hand: int    #: units in the ledger (sold ones already taken off)
    held: int       #: units held by checkouts that have not expired
    pooled: int     #: units in the pool of reservable rows
    available: int  #: what a new checkout can still hold


class CheckoutStatus(NamedTuple):
    """Where a checkout stands (Context.checkout_status)."""
    status: Status      #: Status.HELD, CLAIMED, RELEASED or EXPIRED
    units: int          #: units held (or claimed, released)
    expires_in_ms: int  #: until the hold expires (negative once it has)

    @property
    def name(self) -> str:
        """"held", "claimed", "released" or "expired"."""
        return STATUS_NAMES.get(self.status, "?")


class Violation(NamedTuple):
    """A broken invariant found by Context.audit."""
    shop_id: int
    item_id: int
    location_id: int
    problem: str


class StatsSnapshot(_Closable):
    """rsv_stats_snapshot: the statistics of several contexts added up, and
    their Prometheus text.

        with rsv.StatsSnapshot() as snap:
            snap.add(ctx1)
            snap.add(ctx2)
            text = snap.prometheus({"instance": "a"})

    Not locked, like the C object: use it from one thread at a time, and
    add() a context on the thread that uses it (see reserve.h).
    """

    def __init__(self):
        self._p = None
        p = ctypes.c_void_p()
        rc = lib.rsv_stats_snapshot_new(ctypes.byref(p))
        if rc != OK:
            _raise(rc, strerror(rc), "rsv_stats_snapshot_new")
        self._p = p.value

    def _ptr(self):
        if not self._p:
            raise InvalidArgument(EINVAL, "the snapshot was freed")
        return self._p

    def _check(self, rc, function):
        if rc != OK:
            _raise(rc, strerror(rc), function)

    def add(self, ctx: "Context") -> None:
        """rsv_stats_snapshot_add(): add the statistics of a Context."""
        self._check(lib.rsv_stats_snapshot_add(self._ptr(), ctx._ptr()),
                    "rsv_stats_snapshot_add")

    def merge(self, other: "StatsSnapshot") -> None:
        """rsv_stats_snapshot_merge(): add another StatsSnapshot."""
        self._check(lib.rsv_stats_snapshot_merge(self._ptr(), other._ptr()),
                    "rsv_stats_snapshot_merge")

    def clear(self) -> None:
        """rsv_stats_snapshot_clear(): back to zero, no context added."""
        lib.rsv_stats_snapshot_clear(self._ptr())

    def prometheus(self, labels: Union[None, str, bytes, Dict[str, Any]] = None
                   ) -> str:
        """rsv_stats_prometheus() -> str.  labels: None, a dict {name:
        value} (values escaped here), or the C string as is
        ('instance="a"')."""
        if isinstance(labels, dict):
            esc = lambda v: (str(v).replace("\\", "\\\\")
                             .replace('"', '\\"').replace("\n", "\\n"))
            labels = ",".join('%s="%s"' % (k, esc(v))
                              for k, v in labels.items())
        text = labels.encode("utf-8") if isinstance(labels, str) else labels
        need = ctypes.c_size_t()
        rc = lib.rsv_stats_prometheus(self._ptr(), text, None, 0,
                                      ctypes.byref(need))
        while rc == ERANGE:
            buf = ctypes.create_string_buffer(need.value)
            rc = lib.rsv_stats_prometheus(self._ptr(), text, buf,
                                          need.value, ctypes.byref(need))
        self._check(rc, "rsv_stats_prometheus")
        return buf.value.decode("utf-8")

    def close(self) -> None:
        """rsv_stats_snapshot_free(); idempotent."""
        if self._p:
            lib.rsv_stats_snapshot_free(self._p)
            self._p = None

    free = close

    @property
    def closed(self) -> bool:
        return not self._p


class Batcher(_Closable):
    """rsv_batcher: one handle for every thread of a server, which
    coalesces their reserves, claims and releases into batches on
    `connections` connections of its own (rsv_batcher_open()).

        with rsv.Batcher(dsn, connections=8) as b:
            # on any number of threads:
            b.reserve_one(shop, token, item, location, 1)
            b.claim(shop, token)

    Each call blocks only its own thread (ctypes lets go of the GIL) and
    raises what the same Context call would raise; the exceptions carry
    rsv_strerror()'s text, as there is no message per call.  Close it once
    no thread calls it any more.
    """

    def __init__(self, dsn: Union[str, bytes], connections: int = 4,
                 options: Optional["Options"] = None, **fields: Any) -> None:
        self._p = None
        if not isinstance(dsn, (str, bytes)):
            raise ArgumentTypeError(EINVAL, "dsn must be a str, not %s"
                                    % type(dsn).__name__)
        if fields:
            if options is None:
                options = Options()
            _set_fields(options, fields, "Batcher()")
        dsn = dsn.encode("utf-8") if isinstance(dsn, str) else dsn
        connections = _int(connections, "connections", 0, 0xFFFFFFFF,
                            "in 0..2**32-1")
        p = ctypes.c_void_p()
        opts = ctypes.byref(options) if options is not None else None
        rc = lib.rsv_batcher_open(ctypes.byref(p), dsn, opts, connections)
        if rc != OK:
            # The batcher keeps no message: a context on the same dsn says
            # what went wrong (a refused password ...), if it fails alike.
            msg = None
            q = ctypes.c_void_p()
            if lib.rsv_open_dsn(ctypes.byref(q), dsn, opts) == rc and q.value:
                msg = _s(lib.rsv_errmsg(q.value))
            lib.rsv_close(q.value)
            _raise(rc, msg or strerror(rc), "rsv_batcher_open")
        self._p = p.value

    def _ptr(self):
        if not self._p:
            raise InvalidArgument(EINVAL, "the batcher is closed")
        return self._p

    @staticmethod
    def _check(rc, function):
        if rc != OK:
            _raise(rc, strerror(rc), function)

    def reserve_one(self, shop_id: int, token: Token, item_id: int,
                    location_id: int, quantity: int, ttl_ms: int = 0) -> None:
        """Hold units for a checkout, as Context.reserve_one, coalesced
        with the other threads' calls into one batch."""
        tok = _token(token)
        self._check(lib.rsv_batcher_reserve_one(
            self._ptr(), _u64(shop_id, "shop_id"), tok, len(tok),
            _u64(item_id, "item_id"), _u64(location_id, "location_id"),
            _i64(quantity, "quantity"), _i64(ttl_ms, "ttl_ms")),
            "rsv_batcher_reserve_one")

    def reserve(self, shop_id: int, token: Token, cart: "Cart",
                ttl_ms: int = 0) -> "Cart":
        """Hold every line of the cart, as Context.reserve, coalesced with
        the other threads' carts into one batch.  Returns the cart, whose
        allocations() say where each line is held; OutOfStock and NoItem
        carry ``.failed_line``."""
        tok = _token(token)
        if not isinstance(cart, Cart):
            raise ArgumentTypeError(EINVAL, "cart must be a Cart, not %s"
                                    % type(cart).__name__)
        rc = lib.rsv_batcher_reserve(self._ptr(), _u64(shop_id, "shop_id"),
                                     tok, len(tok), cart._ptr(),
                                     _i64(ttl_ms, "ttl_ms"))
        if rc != OK:
            e = _error(rc, strerror(rc), "rsv_batcher_reserve")
            e.failed_line = cart.failed_line
            raise e
        return cart

    def claim(self, shop_id: int, token: Token) -> None:
        """Claim a checkout, as Context.claim (never joining a transaction:
        the connections are the batcher's)."""
        tok = _token(token)
        self._check(lib.rsv_batcher_claim(self._ptr(),
                                          _u64(shop_id, "shop_id"), tok,
                                          len(tok)), "rsv_batcher_claim")

    def release(self, shop_id: int, token: Token) -> None:
        """Release a checkout, as Context.release."""
        tok = _token(token)
        self._check(lib.rsv_batcher_release(self._ptr(),
                                            _u64(shop_id, "shop_id"), tok,
                                            len(tok)), "rsv_batcher_release")

    def stats_get(self, stat: int, op: int = 0) -> int:
        """rsv_batcher_stats_get(): a counter summed over the connections
        (RSV_STAT_* number, RSV_OP_* number, 0 = every kind)."""
        out = ctypes.c_uint64()
        self._check(lib.rsv_batcher_stats_get(self._ptr(), stat, op,
                                              ctypes.byref(out)),
                    "rsv_batcher_stats_get")
        return out.value

    def add_stats_to(self, snapshot: "StatsSnapshot") -> None:
        """rsv_batcher_stats_snapshot_add(): add the statistics of every
        connection to a StatsSnapshot."""
        self._check(lib.rsv_batcher_stats_snapshot_add(snapshot._ptr(),
                                                       self._ptr()),
                    "rsv_batcher_stats_snapshot_add")

    def close(self) -> None:
        """rsv_batcher_close(): runs what is queued, then frees it;
        idempotent."""
        if self._p:
            lib.rsv_batcher_close(self._p)
            self._p = None

    @property
    def closed(self) -> bool:
        return not self._p


class Context(_Closable):
    """Holds, claims and releases stock on one MariaDB connection.

    Context(conn, options=None, **fields): conn is
      - a connection string ("mariadb://user:password@host:port/database
        ?socket=..."): the context opens and owns its connection (as
        connect() does);
      - a Connection of this package (kept alive by the context);
      - a MySQLdb (mysqlclient) connection, e.g. Django's
        ``django.db.connection.connection``: a claim then joins that
        connection's open transaction (see the README);
      - a MYSQL* address (an int) from another user of Connector/C.
    options is an Options, or fields set on the defaults
    (Context(conn, pool_cap=50)); an unknown field is a TypeError.  A
    context on a connection of yours must be closed before it
    (Connection.close() does so).  Use it as a context manager or call
    close().  One thread at a time per context.
    """

    options: Optional["Options"]
    connection: Optional["Connection"]
    owns_connection: bool
    callback_errors: List[BaseException]

    def __init__(self, conn: Union[str, bytes, "Connection", int, Any],
                 options: Optional["Options"] = None, **fields: Any) -> None:
        self._p = None
        self.owns_connection = isinstance(conn, (str, bytes))
        self._callback: Any = None  # keeps the C trampoline alive
        self.callback_errors = []  # exceptions raised by the callback
        self.connection = conn if isinstance(conn, Connection) else None
        # a MySQLdb connection must outlive the context: keep it
        self._foreign = conn if _is_mysqldb(conn) else None
        if fields:
            if options is None:
                options = Options()
            _set_fields(options, fields, "Context()")
        self.options = options
        p = ctypes.c_void_p()
        opts = ctypes.byref(options) if options is not None else None
        if isinstance(conn, (str, bytes)):
            dsn = conn.encode("utf-8") if isinstance(conn, str) else conn
            function = "rsv_open_dsn"
            rc = lib.rsv_open_dsn(ctypes.byref(p), dsn, opts)
        else:
            function = "rsv_open"
            rc = lib.rsv_open(ctypes.byref(p), _conn_ptr(conn), opts)
        if rc != OK:
            msg = _s(lib.rsv_errmsg(p.value)) if p.value else None
            lib.rsv_close(p.value)
            _raise(rc, msg or strerror(rc), function)
        self._p = p.value
        if self.connection is not None:
            self.connection._contexts.append(self)

    @property
    def _as_parameter_(self):
        return ctypes.c_void_p(self._ptr())

    def _ptr(self):
        if not self._p:
            raise InvalidArgument(EINVAL, "the context is closed")
        return self._p

    def _check(self, rc, function):
        if rc != OK:
            _raise(rc, _s(lib.rsv_errmsg(self._p)), function)

    def reconnect(self) -> None:
        """Connect again after ConnectionLost or InDoubt (rsv_reconnect),
        keeping the context; then repeat the call that failed: every call
        is idempotent for the same token."""
        self._check(lib.rsv_reconnect(self._ptr()), "rsv_reconnect")

    def close(self) -> None:
        """Free the context (rsv_close), and its connection if it opened it;
        idempotent."""
        if self._p:
            lib.rsv_close(self._p)
            self._p = None
            self._callback = None
            if self.connection is not None:
                try:
                    self.connection._contexts.remove(self)
                except ValueError:
                    pass

    @property
    def closed(self) -> bool:
        return not self._p

    @property
    def errmsg(self) -> str:
        """rsv_errmsg(): message of the last failing call ("" after OK)."""
        return _s(lib.rsv_errmsg(self._ptr()))

    @property
    def errcode(self) -> int:
        """rsv_errcode(): code of the last call."""
        return lib.rsv_errcode(self._ptr())

    @property
    def connection_handle(self) -> Optional[int]:
        """rsv_connection(): the MYSQL* address the context is bound to."""
        return lib.rsv_connection(self._ptr())

    # -- the hold lifecycle --
    def reserve(self, shop_id: int, token: Token, cart: "Cart",
                ttl_ms: int = 0) -> "Cart":
        """Hold every line of the cart for the checkout token, all or
        nothing, for ttl_ms milliseconds (0: the context's hold_ttl_ms).
        Reserving again with the same token replaces the checkout's holds.
        Returns the cart, whose allocations() say where each line is held.
        Raises OutOfStock or NoItem (``.failed_line`` names the line),
        AlreadyClaimed for a claimed checkout; nothing is held then."""
        tok = _token(token)
        c = cart._ptr() if isinstance(cart, Cart) else cart
        rc = lib.rsv_reserve(self._ptr(), _u64(shop_id, "shop_id"), tok,
                             len(tok), c, _i64(ttl_ms, "ttl_ms"))
        if rc != OK:
            e = _error(rc, _s(lib.rsv_errmsg(self._p)), "rsv_reserve")
            if isinstance(cart, Cart):
                e.failed_line = cart.failed_line
            raise e
        return cart

    def reserve_one(self, shop_id: int, token: Token, item_id: int,
                    location_id: int, quantity: int, ttl_ms: int = 0) -> None:
        """Hold quantity units of item_id at location_id for the checkout
        token, for ttl_ms milliseconds (0: the context's hold_ttl_ms).
        Raises OutOfStock when they are not there (nothing held),
        NoItem for an item with no stock row, AlreadyClaimed for a claimed
        checkout."""
        tok = _token(token)
        rc = lib.rsv_reserve_one(self._ptr(), _u64(shop_id, "shop_id"), tok,
                                 len(tok), _u64(item_id, "item_id"),
                                 _u64(location_id, "location_id"),
                                 _i64(quantity, "quantity"),
                                 _i64(ttl_ms, "ttl_ms"))
        self._check(rc, "rsv_reserve_one")

    def claim(self, shop_id: int, token: Token) -> None:
        """Payment succeeded: the checkout's held units leave the stock for
        good.  Inside a transaction open on the connection it joins that
        transaction (commits or rolls back with it); otherwise it commits
        at once.  Raises AlreadyClaimed on a repeat (nothing taken twice),
        Expired when the hold ran out, NotFound for an unknown token."""
        tok = _token(token)
        self._check(lib.rsv_claim(self._ptr(), _u64(shop_id, "shop_id"), tok,
                                  len(tok)), "rsv_claim")

    def _batch_arrays(self, shops, tokens):
        n = len(tokens)
        toks = [_token(t) for t in tokens]
        return (n, toks, (ctypes.c_uint64 * n)(*[_u64(x, "shop_id")
                                                 for x in shops]),
                (ctypes.c_char_p * n)(*toks),
                (ctypes.c_size_t * n)(*[len(t) for t in toks]),
                (ctypes.c_int * n)())

    def reserve_batch(self, entries: Iterable[Tuple[int, Token, int, int, int]],
                      ttl_ms: int = 0) -> List[int]:
        """rsv_reserve_batch(): entries is a sequence of (shop_id, token,
        item_id, location_id, quantity), at most 256.  Returns one code
        per entry (OK or the RSV_E* code reserve_one would raise); raises
        only for a failure of the whole batch."""
        entries = list(entries)
        n, toks, shops, tp, tl, res = self._batch_arrays(
            [e[0] for e in entries], [e[1] for e in entries])
        items = (ctypes.c_uint64 * n)(*[_u64(e[2], "item_id")
                                        for e in entries])
        locs = (ctypes.c_uint64 * n)(*[_u64(e[3], "location_id")
                                       for e in entries])
        qty = (ctypes.c_int64 * n)(*[_i64(e[4], "quantity") for e in entries])
        self._check(lib.rsv_reserve_batch(self._ptr(), n, shops, tp, tl,
                                          items, locs, qty,
                                          _i64(ttl_ms, "ttl_ms"), res),
                    "rsv_reserve_batch")
        del toks  # (kept alive until the call returned)
        return list(res)

    def reserve_cart_batch(self, entries: Iterable[Tuple[int, Token, "Cart"]],
                           ttl_ms: int = 0) -> List[int]:
        """rsv_reserve_cart_batch(): entries is a sequence of (shop_id,
        token, Cart), at most 256.  Returns one code per entry (OK or the
        RSV_E* code reserve would raise); each cart then tells its
        allocations() or failed_line, as after reserve.  Raises only for
        a failure of the whole batch."""
        entries = list(entries)
        for e in entries:
            if not isinstance(e[2], Cart):
                raise ArgumentTypeError(EINVAL, "a cart must be a Cart, not "
                                        "%s" % type(e[2]).__name__)
        n, toks, shops, tp, tl, res = self._batch_arrays(
            [e[0] for e in entries], [e[1] for e in entries])
        carts = (ctypes.c_void_p * n)(*[e[2]._ptr() for e in entries])
        self._check(lib.rsv_reserve_cart_batch(self._ptr(), n, shops, tp, tl,
                                               carts, _i64(ttl_ms, "ttl_ms"),
                                               res),
                    "rsv_reserve_cart_batch")
        del toks
        return list(res)

    def claim_batch(self, checkouts: Iterable[Tuple[int, Token]]) -> List[int]:
        """rsv_claim_batch(): checkouts is a sequence of (shop_id, token);
        returns one code per entry, as claim would answer it.  Never joins
        the connection's open transaction (raises InTransaction)."""
        checkouts = list(checkouts)
        n, toks, shops, tp, tl, res = self._batch_arrays(
            [c[0] for c in checkouts], [c[1] for c in checkouts])
        self._check(lib.rsv_claim_batch(self._ptr(), n, shops, tp, tl, res),
                    "rsv_claim_batch")
        del toks
        return list(res)

    def release_batch(self, checkouts: Iterable[Tuple[int, Token]]
                      ) -> List[int]:
        """rsv_release_batch(): as claim_batch, for releases."""
        checkouts = list(checkouts)
        n, toks, shops, tp, tl, res = self._batch_arrays(
            [c[0] for c in checkouts], [c[1] for c in checkouts])
        self._check(lib.rsv_release_batch(self._ptr(), n, shops, tp, tl,
                                          res), "rsv_release_batch")
        del toks
        return list(res)

    def release(self, shop_id: int, token: Token) -> None:
        """Payment failed or the buyer left: give the checkout's units
        back.  Idempotent for released and expired checkouts; raises
        AlreadyClaimed for a claimed one."""
        tok = _token(token)
        self._check(lib.rsv_release(self._ptr(), _u64(shop_id, "shop_id"),
                                    tok, len(tok)), "rsv_release")

    def extend(self, shop_id: int, token: Token, ttl_ms: int = 0) -> None:
        """Keep the checkout's holds ttl_ms milliseconds from now (0: the
        context's hold_ttl_ms), e.g. while a slow payment completes.
        Raises Expired once they have run out."""
        tok = _token(token)
        self._check(lib.rsv_extend(self._ptr(), _u64(shop_id, "shop_id"), tok,
                                   len(tok), _i64(ttl_ms, "ttl_ms")),
                    "rsv_extend")

    def checkout_status(self, shop_id: int, token: Token) -> CheckoutStatus:
        """Where the checkout stands: CheckoutStatus(status, units,
        expires_in_ms), status a Status (HELD, CLAIMED, RELEASED,
        EXPIRED).  Raises NotFound for an unknown token."""
        tok = _token(token)
        st, units, ms = ctypes.c_int32(), ctypes.c_int64(), ctypes.c_int64()
        rc = lib.rsv_checkout_status(self._ptr(), _u64(shop_id, "shop_id"),
                                     tok, len(tok), ctypes.byref(st),
                                     ctypes.byref(units), ctypes.byref(ms))
        self._check(rc, "rsv_checkout_status")
        try:
            status = Status(st.value)
        except ValueError:  # a status newer than this binding
            status = st.value  # type: ignore[assignment]
        return CheckoutStatus(status, units.value, ms.value)

    # -- pools, expiry, stock --
    def _pool_call(self, name, shop_id, item_id, location_id):
        # rsv_replenish and rsv_pool_drain: one key in, one count out
        n = ctypes.c_int64()
        rc = getattr(lib, name)(self._ptr(), _u64(shop_id, "shop_id"),
                                _u64(item_id, "item_id"),
                                _u64(location_id, "location_id"),
                                ctypes.byref(n))
        self._check(rc, name)
        return n.value

    def replenish(self, shop_id: int, item_id: int, location_id: int) -> int:
        """Top the item's pool of reservable rows up from the ledger (a
        reserve does it by itself when needed); returns the rows added."""
        return self._pool_call("rsv_replenish", shop_id, item_id,
                               location_id)

    def pool_drain(self, shop_id: int, item_id: int, location_id: int) -> int:
        """Give the item's pool back to its ledger row (e.g. when a sale
        ends); returns the rows given back."""
        return self._pool_call("rsv_pool_drain", shop_id, item_id,
                               location_id)

    def sweep(self, shop_id: int, max_holds: int = 0) -> int:
        """Give back the units of expired holds (up to max_holds, 0: the
        library's batch), fold claims into the ledger and purge old
        checkouts; run it every 10-60 s.  Returns the holds given back."""
        n = ctypes.c_int64()
        rc = lib.rsv_sweep(self._ptr(), _u64(shop_id, "shop_id"),
                           _i64(max_holds, "max_holds"), ctypes.byref(n))
        self._check(rc, "rsv_sweep")
        return n.value

    def sweep_report(self, shop_id: int, max_holds: int = 0) -> "SweepResult":
        """rsv_sweep_report() -> SweepResult: expired holds given back and
        their units, journal rows folded, idle pool rows drained, checkout
        records purged."""
        r = SweepResult(version=SWEEP_RESULT_VERSION)
        rc = lib.rsv_sweep_report(self._ptr(), _u64(shop_id, "shop_id"),
                                  _i64(max_holds, "max_holds"),
                                  ctypes.byref(r))
        self._check(rc, "rsv_sweep_report")
        return r

    def stock_set(self, shop_id: int, item_id: int, location_id: int,
                  on_hand: int) -> None:
        """Set the stock on hand of an item at a location (creating its
        row).  Raises StockError below what is held."""
        rc = lib.rsv_stock_set(self._ptr(), _u64(shop_id, "shop_id"),
                               _u64(item_id, "item_id"),
                               _u64(location_id, "location_id"),
                               _i64(on_hand, "on_hand"))
        self._check(rc, "rsv_stock_set")

    def stock_adjust(self, shop_id: int, item_id: int, location_id: int,
                     delta: int) -> int:
        """Add delta (negative: take off) to the stock on hand; returns the
        new stock on hand.  Raises StockError below what is held."""
        n = ctypes.c_int64()
        rc = lib.rsv_stock_adjust(self._ptr(), _u64(shop_id, "shop_id"),
                                  _u64(item_id, "item_id"),
                                  _u64(location_id, "location_id"),
                                  _i64(delta, "delta"), ctypes.byref(n))
        self._check(rc, "rsv_stock_adjust")
        return n.value

    def stock_get(self, shop_id: int, item_id: int, location_id: int) -> Stock:
        """The stock of an item at a location: Stock(on_hand, held,
        pooled, available), from one consistent read."""
        v = [ctypes.c_int64() for _ in range(4)]
        rc = lib.rsv_stock_get(self._ptr(), _u64(shop_id, "shop_id"),
                               _u64(item_id, "item_id"),
                               _u64(location_id, "location_id"),
                               *[ctypes.byref(x) for x in v])
        self._check(rc, "rsv_stock_get")
        return Stock(*[x.value for x in v])

    # -- audit --
    def audit(self, shop_id: int = 0, all_shops: bool = False,
              callback: Optional[Callable[[Violation], Any]] = None
              ) -> List[Violation]:
        """Check the library's invariants for one shop (or all_shops) on
        one consistent snapshot; returns the violations found (empty:
        clean), each a Violation(shop_id, item_id, location_id, problem).  callback(violation) is also called for each one; an
        exception it raises stops further callbacks and is re-raised once
        the audit has returned."""
        found: List[Violation] = []
        errors: List[BaseException] = []

        def trampoline(_arg, shop, item, loc, problem):
            v = Violation(shop, item, loc, _s(problem))
            found.append(v)
            if callback is not None and not errors:
                try:
                    callback(v)
                except BaseException as e:  # cannot cross the C frame
                    errors.append(e)

        fn = _AUDIT_FN(trampoline)
        n = ctypes.c_int64()
        rc = lib.rsv_audit(self._ptr(), _u64(shop_id, "shop_id"),
                           1 if all_shops else 0, fn, None, ctypes.byref(n))
        if errors:
            raise errors[0]
        self._check(rc, "rsv_audit")
        if n.value != len(found):
            raise AssertionError("rsv_audit reported %d violations but "
                                 "called back %d times" % (n.value,
                                                           len(found)))
        return found

    # -- observability and the kill switch --
    def stats(self, stat: int, op: int = OP_ALL) -> int:
        """A counter (a Stat) of this context's calls of one kind (an Op;
        Op.ALL: every kind), e.g. ctx.stats(Stat.RETRIES, Op.RESERVE)."""
        v = ctypes.c_uint64()
        rc = lib.rsv_stats_get(self._ptr(), stat, op, ctypes.byref(v))
        self._check_plain(rc, "rsv_stats_get")
        return v.value

    def stats_outcome(self, op: int, code: int) -> int:
        """How many calls of kind op (an Op) answered code (a Code)."""
        v = ctypes.c_uint64()
        rc = lib.rsv_stats_outcome(self._ptr(), op, code, ctypes.byref(v))
        self._check_plain(rc, "rsv_stats_outcome")
        return v.value

    def stats_histogram(self, op: int = OP_ALL) -> List[int]:
        """rsv_stats_histogram() -> list of STATS_BUCKETS call counts
        (bucket b: latency in [2^(b-1), 2^b) microseconds)."""
        buf = (ctypes.c_uint64 * STATS_BUCKETS)()
        rc = lib.rsv_stats_histogram(self._ptr(), op, buf, STATS_BUCKETS)
        self._check_plain(rc, "rsv_stats_histogram")
        return list(buf)

    def stats_percentile(self, op: int, p: float) -> int:
        """rsv_stats_percentile() -> estimated p-th percentile latency in
        microseconds (0 <= p <= 100; 0 when nothing was counted)."""
        v = ctypes.c_uint64()
        rc = lib.rsv_stats_percentile(self._ptr(), op, float(p),
                                      ctypes.byref(v))
        self._check_plain(rc, "rsv_stats_percentile")
        return v.value

    def stats_reset(self) -> None:
        """Set every counter of this context back to zero."""
        self._check_plain(lib.rsv_stats_reset(self._ptr()), "rsv_stats_reset")

    def stats_key(self, shop_id: int, item_id: int, location_id: int,
                  stat: int) -> int:
        """A counter (a KeyStat) of one key: what a crowd did to it (0 for
        a key this context keeps no counters of)."""
        v = ctypes.c_uint64()
        rc = lib.rsv_stats_key(self._ptr(), shop_id, item_id, location_id,
                               stat, ctypes.byref(v))
        self._check_plain(rc, "rsv_stats_key")
        return v.value

    def stats_keys(self) -> List[Tuple[int, int, int]]:
        """The (shop_id, item_id, location_id) keys this context keeps
        crowd counters of (at most RSV_KEY_STATS_MAX, the busiest)."""
        keys: List[Tuple[int, int, int]] = []
        sh, it, lo = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint64()
        while True:
            rc = lib.rsv_stats_key_at(self._ptr(), len(keys),
                                      ctypes.byref(sh), ctypes.byref(it),
                                      ctypes.byref(lo))
            if rc == ERANGE:
                return keys
            self._check_plain(rc, "rsv_stats_key_at")
            keys.append((sh.value, it.value, lo.value))

    def stats_dict(self, op: int = OP_ALL) -> Dict[str, int]:
        """Every counter of kind op as {name: value}."""
        return {name: self.stats(k, op) for k, name in STAT_NAMES.items()}

    def stats_prometheus(self, labels: Union[None, str, Dict[str, Any]] = None
                         ) -> str:
        """This context's statistics as Prometheus text (a StatsSnapshot of
        it alone; see StatsSnapshot.prometheus for labels)."""
        with StatsSnapshot() as snap:
            snap.add(self)
            return snap.prometheus(labels)

    def set_callback(self, fn: Optional[Callable[[int, int, int, Optional[bytes], int], Any]]
                     ) -> None:
        """rsv_set_callback(): fn(op, code, shop_id, token, latency_us) is
        called after every completed operation (token: bytes or None);
        None removes it.  An exception fn raises cannot cross the C frame:
        it is appended to self.callback_errors and the call goes on."""
        if fn is None:
            rc = lib.rsv_set_callback(self._ptr(),
                                      ctypes.cast(None, _OP_FN),  # type: ignore[arg-type]
                                      None)
            self._check_plain(rc, "rsv_set_callback")
            self._callback = None
            return

        def trampoline(_user, op, code, shop, token, length, us):
            tok = ctypes.string_at(token, length) if token else None
            try:
                fn(op, code, shop, tok, us)
            except BaseException as e:  # cannot cross the C frame
                self.callback_errors.append(e)

        cb = _OP_FN(trampoline)
        rc = lib.rsv_set_callback(self._ptr(), cb, None)
        self._check_plain(rc, "rsv_set_callback")
        self._callback = cb

    def set_enabled(self, enabled: bool) -> None:
        """rsv_set_enabled(): the kill switch; False makes every function
        that changes the database raise Disabled without touching it."""
        rc = lib.rsv_set_enabled(self._ptr(), 1 if enabled else 0)
        self._check_plain(rc, "rsv_set_enabled")

    def _check_plain(self, rc, function):
        """For functions that do not set the context's message."""
        if rc != OK:
            _raise(rc, strerror(rc), function)


# ---------------------------------------------------------------------------
# Connection strings: the usual way to open a context
# ---------------------------------------------------------------------------

def make_dsn(database: str, user: Optional[str] = None,
             password: Optional[str] = None, host: Optional[str] = None,
             port: Optional[int] = None, socket: Optional[str] = None,
             **params: Any) -> str:
    """A connection string for connect() / rsv_open_dsn(), every part
    %XX-escaped:

        make_dsn("shop", user="app", password="p@ss",
                 socket="/run/mysqld/mysqld.sock", connect_timeout=5)
        -> "mariadb://app:p%40ss@/shop?socket=%2Frun%2Fmysqld%2F...&..."

    params are the other keys the library knows (connect_timeout,
    read_timeout, write_timeout, ssl, ssl_ca, ssl_capath, ssl_cert,
    ssl_key, ssl_verify); None values are left out."""
    from urllib.parse import quote

    def q(v):
        return quote(str(v), safe="")

    auth = ""
    if user is not None:
        auth = q(user)
        if password is not None:
            auth += ":" + q(password)
        auth += "@"
    where = q(host) if host else ""
    if port is not None:
        where += ":%d" % int(port)
    pairs = [("socket", socket)] + sorted(params.items())
    query = "&".join("%s=%s" % (q(k), q(int(v) if isinstance(v, bool)
                                       else v))
                     for k, v in pairs if v is not None)
    return "mariadb://%s%s/%s%s" % (auth, where, q(database),
                                    "?" + query if query else "")


def connect(dsn: Union[str, bytes], options: Optional[Options] = None,
            **fields: Any) -> Context:
    """Open a Context on a connection of its own (rsv_open_dsn()):

        with libreserve.connect("mariadb://app:secret@db:3306/shop",
                                hold_ttl_ms=300000) as ctx:
            ctx.reserve_one(...)

    dsn: mariadb://[USER[:PASSWORD]@][HOST][:PORT]/DATABASE[?KEY=VALUE&...]
    (see make_dsn() and reserve.h); options / fields as for Context.  The
    context owns the connection: close() closes it, reconnect() opens it
    again after ConnectionLost or InDoubt."""
    if not isinstance(dsn, (str, bytes)):
        raise ArgumentTypeError(EINVAL, "dsn must be a str, not %s"
                                % type(dsn).__name__)
    return Context(dsn, options, **fields)


# The asyncio interface (libreserve/aio.py), on the names above.
from .aio import AsyncBatcher, AsyncContext, connect_async  # noqa: E402
