"""Moving a live shop from the store it sold through before to libreserve,
stage by stage (the C library's <reserve/migrate.h>; docs/migration.md).

    from libreserve.migrate import Migration, Stage

    def old_store(op, shop_id, token, item_id, location_id, quantity, ttl_ms):
        # op is an Op: RESERVE, CLAIM or RELEASE.  Return to accept;
        # raise OutOfStock, NotFound, AlreadyClaimed, Expired or
        # AlreadyReleased to refuse; any other exception is a failure.
        ...

    with rsv.Context(dsn) as ctx, Migration(ctx, dsn, old_store) as m:
        m.reserve_one(shop, token, item, location, 1)
        m.claim(shop, token)

The shop's stage, set with ``rsv-admin migrate``, decides which store
answers: the old store (OLD, SHADOW) or libreserve (PRIMARY, COMPLETE);
the other side runs on the handle's own thread and connection.  The old
store's function is called on the caller's thread and on that thread, so
it must be safe on both.
"""
import ctypes
import enum
from typing import Any, Callable, Optional

from . import (OK, Batcher, Context, Op, ReserveError, Token, _Closable,
               _error, _i64, _s, _token, _u64, lib, strerror)

__all__ = ["Migration", "Stage", "MigrationStat", "LegacyFn", "class_name"]


class Stage(enum.IntEnum):
    """A shop's stage (RSV_STAGE_*)."""
    OLD = 0
    SHADOW = 1
    PRIMARY = 2
    COMPLETE = 3


class MigrationStat(enum.IntEnum):
    """The handle's counters per shop (RSV_MIG_*)."""
    BOTH_ACCEPTED = 0
    BOTH_REFUSED = 1
    OLD_REFUSED_NEW_ACCEPTED = 2
    OLD_ACCEPTED_NEW_REFUSED = 3
    NEW_FAILED = 4
    UNKNOWN = 5
    OLD_FAILED = 6
    OFFERED = 7
    APPLIED = 8
    DROPPED = 9
    STAGE_READ_FAILED = 10


LegacyFn = Callable[[Op, int, bytes, int, int, int, int], Any]

# int (*)(void *user, uint32_t op, uint64_t shop_id, const void *token,
#         size_t token_len, uint64_t item_id, uint64_t location_id,
#         int64_t quantity, int64_t ttl_ms)
_LEGACY_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32,
                              ctypes.c_uint64, ctypes.c_void_p,
                              ctypes.c_size_t, ctypes.c_uint64,
                              ctypes.c_uint64, ctypes.c_int64, ctypes.c_int64)
_p = ctypes.c_void_p
_PROTOS = {
    "rsv_migrate_open": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), _p,
                                        ctypes.c_char_p, ctypes.c_uint32]),
    "rsv_migrate_close": (None, [_p]),
    "rsv_migrate_set_legacy": (ctypes.c_int, [_p, _LEGACY_FN, _p]),
    "rsv_migrate_set_refresh_ms": (ctypes.c_int, [_p, ctypes.c_uint32]),
    "rsv_migrate_set_batcher": (ctypes.c_int, [_p, _p]),
    "rsv_migrate_reserve_one": (ctypes.c_int, [_p, ctypes.c_uint64,
                                               ctypes.c_char_p, ctypes.c_size_t,
                                               ctypes.c_uint64, ctypes.c_uint64,
                                               ctypes.c_int64, ctypes.c_int64]),
    "rsv_migrate_claim": (ctypes.c_int, [_p, ctypes.c_uint64, ctypes.c_char_p,
                                         ctypes.c_size_t]),
    "rsv_migrate_release": (ctypes.c_int, [_p, ctypes.c_uint64,
                                           ctypes.c_char_p, ctypes.c_size_t]),
    "rsv_migrate_stage": (ctypes.c_int, [_p, ctypes.c_uint64,
                                         ctypes.POINTER(ctypes.c_int32)]),
    "rsv_migrate_stat": (ctypes.c_int, [_p, ctypes.c_uint64, ctypes.c_int32,
                                        ctypes.c_uint32,
                                        ctypes.POINTER(ctypes.c_uint64)]),
    "rsv_migrate_drain": (ctypes.c_int, [_p, ctypes.c_uint32]),
    "rsv_migrate_prometheus": (ctypes.c_int, [_p, ctypes.c_char_p,
                                              ctypes.c_size_t,
                                              ctypes.POINTER(ctypes.c_size_t)]),
    "rsv_migrate_class_name": (ctypes.c_char_p, [ctypes.c_uint32]),
}
for _name, (_res, _args) in _PROTOS.items():
    try:
        _f = getattr(lib, _name)
    except AttributeError:  # a library older than this module
        raise ImportError("the loaded libreserve has no %s: it predates "
                          "the migration interface" % _name) from None
    _f.restype = _res
    _f.argtypes = _args
del _name, _res, _args, _f
# The functions of <reserve/migrate.h> this module calls.  The handover
# calls (rsv_migrate_route, the _answered twins, rsv_migrate_mirror_*)
# are for an old store that cannot be called from C; a Python one can.
WRAPPED_FUNCTIONS = tuple(sorted(_PROTOS))


def class_name(stat: int) -> Optional[str]:
    """rsv_migrate_class_name(): a counter's name as the Prometheus text,
    the tables and rsv-admin spell it ("old_refused_new_accepted" for
    MigrationStat.OLD_REFUSED_NEW_ACCEPTED ...); None if unknown."""
    stat = int(stat)
    if not 0 <= stat < 2 ** 32:
        return None
    return _s(lib.rsv_migrate_class_name(stat))


# The library's code for an exception the old store's function raised.
_EDB = -19


class Migration(_Closable):
    """A migration handle (rsv_migrate_open): the checkout's calls sent to
    the old store, to libreserve or to both by the shop's stage.

    Migration(ctx, shadow_dsn, legacy=None, queue_max=0, refresh_ms=None):
    ctx (a Context) answers at stages PRIMARY and COMPLETE; shadow_dsn is
    the connection string of the handle's own thread.  Close it (or use
    it as a context manager) before the context.  One thread at a time,
    except stage(), stat(), prometheus() and drain().
    """

    def __init__(self, ctx: Context, shadow_dsn: str,
                 legacy: Optional[LegacyFn] = None, queue_max: int = 0,
                 refresh_ms: Optional[int] = None) -> None:
        self._p = None
        self._ctx = ctx  # must outlive the handle
        self._legacy: Any = None
        self._batcher: Optional[Batcher] = None
        self.legacy_errors: list = []
        p = ctypes.c_void_p()
        dsn = shadow_dsn.encode() if isinstance(shadow_dsn, str) else shadow_dsn
        rc = lib.rsv_migrate_open(ctypes.byref(p), ctx._ptr(), dsn,
                                  int(queue_max))
        if rc != OK:
            raise _error(rc, _s(lib.rsv_errmsg(ctx._ptr())) or strerror(rc),
                         "rsv_migrate_open")
        self._p = p.value
        if refresh_ms is not None:
            self._check(lib.rsv_migrate_set_refresh_ms(self._p,
                                                       int(refresh_ms)),
                        "rsv_migrate_set_refresh_ms")
        if legacy is not None:
            self.set_legacy(legacy)

    def _ptr(self):
        if not self._p:
            raise ValueError("the migration handle is closed")
        return self._p

    def close(self) -> None:
        """Does the queued work, stops the handle's thread, frees it."""
        if getattr(self, "_p", None):
            lib.rsv_migrate_close(self._p)
            self._p = None

    def _check(self, rc: int, function: str, from_ctx: bool = False) -> None:
        if rc != OK:
            msg = _s(lib.rsv_errmsg(self._ctx._ptr())) if from_ctx else None
            raise _error(rc, msg or strerror(rc), function)

    def set_legacy(self, fn: Optional[LegacyFn]) -> None:
        """The old store's operation: fn(op, shop_id, token, item_id,
        location_id, quantity, ttl_ms) returns to accept, raises an
        ExpectedOutcome (OutOfStock, NotFound ...) to refuse; any other
        exception is the old store failing (kept in legacy_errors)."""
        if fn is None:
            self._check(lib.rsv_migrate_set_legacy(
                self._ptr(), ctypes.cast(None, _LEGACY_FN),  # type: ignore[arg-type]
                None),
                "rsv_migrate_set_legacy")
            self._legacy = None
            return

        def trampoline(_user, op, shop, token, length, item, loc, qty, ttl):
            tok = ctypes.string_at(token, length) if token else b""
            try:
                fn(Op(op), shop, tok, item, loc, qty, ttl)
                return OK
            except ReserveError as e:
                return int(e.code)
            except BaseException as e:  # cannot cross the C frame
                self.legacy_errors.append(e)
                return _EDB

        cb = _LEGACY_FN(trampoline)
        self._check(lib.rsv_migrate_set_legacy(self._ptr(), cb, None),
                    "rsv_migrate_set_legacy")
        self._legacy = cb  # keeps the C trampoline alive

    def set_batcher(self, batcher: Optional[Batcher]) -> None:
        """Send libreserve's side of shadow calls through batcher (a
        Batcher on libreserve's server, shared by the handles of several
        threads so that their shadow calls coalesce), or None: the
        handle's own connection again.  Close the handles before the
        batcher."""
        self._check(lib.rsv_migrate_set_batcher(
            self._ptr(), batcher._ptr() if batcher is not None else None),
            "rsv_migrate_set_batcher")
        self._batcher = batcher  # must outlive its use here

    def _call(self, rc: int, function: str, shop_id: int) -> None:
        if rc != OK:
            # libreserve's answer carries the context's message
            decided_by_new = self.stage(shop_id) >= Stage.PRIMARY
            self._check(rc, function, from_ctx=decided_by_new)

    def reserve_one(self, shop_id: int, token: Token, item_id: int,
                    location_id: int, quantity: int, ttl_ms: int = 0) -> None:
        """Hold units for a checkout in the store the shop's stage names;
        raises what that store answered (OutOfStock ...)."""
        tok = _token(token)
        rc = lib.rsv_migrate_reserve_one(
            self._ptr(), _u64(shop_id, "shop_id"), tok, len(tok),
            _u64(item_id, "item_id"), _u64(location_id, "location_id"),
            _i64(quantity, "quantity"), _i64(ttl_ms, "ttl_ms"))
        self._call(rc, "rsv_migrate_reserve_one", shop_id)

    def claim(self, shop_id: int, token: Token) -> None:
        """Claim a checkout in the store the shop's stage names."""
        tok = _token(token)
        rc = lib.rsv_migrate_claim(self._ptr(), _u64(shop_id, "shop_id"), tok,
                                   len(tok))
        self._call(rc, "rsv_migrate_claim", shop_id)

    def release(self, shop_id: int, token: Token) -> None:
        """Release a checkout in the store the shop's stage names."""
        tok = _token(token)
        rc = lib.rsv_migrate_release(self._ptr(), _u64(shop_id, "shop_id"),
                                     tok, len(tok))
        self._call(rc, "rsv_migrate_release", shop_id)

    def stage(self, shop_id: int) -> Stage:
        """The shop's stage as the handle follows it now."""
        st = ctypes.c_int32()
        self._check(lib.rsv_migrate_stage(self._ptr(),
                                          _u64(shop_id, "shop_id"),
                                          ctypes.byref(st)),
                    "rsv_migrate_stage")
        return Stage(st.value)

    def stat(self, stat: MigrationStat, shop_id: Optional[int] = None) -> int:
        """A counter of one shop, or of every shop (shop_id None)."""
        out = ctypes.c_uint64()
        self._check(lib.rsv_migrate_stat(
            self._ptr(), _u64(shop_id or 0, "shop_id"),
            1 if shop_id is None else 0, int(stat), ctypes.byref(out)),
            "rsv_migrate_stat")
        return out.value

    def drain(self, timeout_ms: int = 10000) -> bool:
        """Wait until the queue is empty: True, or False after timeout_ms."""
        return lib.rsv_migrate_drain(self._ptr(), int(timeout_ms)) == OK

    def prometheus(self) -> str:
        """The counters and stages in the Prometheus text format."""
        need = ctypes.c_size_t()
        lib.rsv_migrate_prometheus(self._ptr(), None, 0, ctypes.byref(need))
        while True:
            buf = ctypes.create_string_buffer(need.value + 1)
            rc = lib.rsv_migrate_prometheus(self._ptr(), buf, len(buf),
                                            ctypes.byref(need))
            if rc == OK:
                return buf.value.decode()
