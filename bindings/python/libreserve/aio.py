"""asyncio interface of libreserve: AsyncContext and AsyncBatcher.

The calls of a checkout (reserve, reserve_one, claim, release, extend,
checkout_status) use the library's non-blocking interface: the call is
handed to the context's own worker thread in the C library
(rsv_*_start), the event loop watches the context's descriptor
(loop.add_reader on rsv_async_fd) and rsv_cont gives the answer.  No
thread of Python's waits for them, however many are in flight.  The calls
without a non-blocking form (opening, closing, stock, pools, sweep,
audit, batches) run in the loop's default executor.

Calls on one AsyncContext run one at a time, in the order they were made
(the C context takes one call at a time); use several contexts for
concurrency.  Cancelling the task that awaits a call cancels the call in
the library (rsv_cancel) and waits for it to stop, so the context is free
again; the connection may have been cut then (the next call raises
ConnectionLost: reconnect()).
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

from . import (EINVAL, OK, PENDING, ArgumentTypeError, Batcher, Cart,
               CheckoutStatus, Context, InvalidArgument, NoItem, Options,
               OutOfStock, ReserveError, Status, Stock, Token, Violation,
               _error, _i64, _s, _token, _u64, lib, strerror)

__all__ = ["AsyncContext", "AsyncBatcher", "connect_async"]


async def _readable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    """Resolves once fd is readable."""
    fut = loop.create_future()

    def ready() -> None:
        if not fut.done():
            fut.set_result(None)

    loop.add_reader(fd, ready)
    try:
        await fut
    finally:
        loop.remove_reader(fd)


class AsyncContext:
    """A Context for asyncio: the same calls, as coroutines.

        async with await libreserve.connect_async(dsn) as ctx:
            await ctx.reserve_one(1, "checkout-1", 42, 7, 2)
            await ctx.claim(1, "checkout-1")

    AsyncContext(context) wraps a Context you opened (on a connection
    string, a Connection or a MySQLdb connection); ``.context`` is it,
    for the calls that need no waiting (stats, set_enabled, ...).
    """

    def __init__(self, context: Context) -> None:
        if not isinstance(context, Context):
            raise InvalidArgument(EINVAL, "AsyncContext wraps a Context, not "
                                  "%s" % type(context).__name__)
        self.context = context
        self._lock = asyncio.Lock()

    @classmethod
    async def connect(cls, dsn: Union[str, bytes],
                      options: Optional[Options] = None,
                      **fields: Any) -> "AsyncContext":
        """Open a context on a connection of its own (as
        libreserve.connect), without blocking the event loop."""
        loop = asyncio.get_running_loop()
        ctx = await loop.run_in_executor(
            None, functools.partial(Context, dsn, options, **fields))
        return cls(ctx)

    async def __aenter__(self) -> "AsyncContext":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        return self.context.closed

    # -- the non-blocking calls --

    async def _nonblocking(self, fn: str, *args: Any) -> None:
        ctx = self.context
        p = ctx._ptr()
        loop = asyncio.get_running_loop()
        rc = getattr(lib, fn + "_start")(p, *args)
        cancelled = False
        while rc == PENDING:
            try:
                await _readable(loop, lib.rsv_async_fd(p))
            except asyncio.CancelledError:
                # Stop the call in the library and wait until it has: the
                # context and its arguments must not be left to the worker.
                if not cancelled:
                    cancelled = True
                    lib.rsv_cancel(p)
                continue
            rc = lib.rsv_cont(p)
        if cancelled:
            raise asyncio.CancelledError()
        if rc != OK:
            raise _error(rc, _s(lib.rsv_errmsg(p)), fn)

    async def reserve(self, shop_id: int, token: Token, cart: Cart,
                      ttl_ms: int = 0) -> Cart:
        """Hold every line of the cart for the checkout, all or nothing
        (Context.reserve).  The cart must not be used until it returns."""
        tok = _token(token)
        args = (_u64(shop_id, "shop_id"), tok, len(tok))
        ttl = _i64(ttl_ms, "ttl_ms")
        async with self._lock:
            try:
                await self._nonblocking("rsv_reserve", *args, cart._ptr(), ttl)
            except ReserveError as e:
                e.failed_line = cart.failed_line  # type: ignore[attr-defined]
                raise
        return cart

    async def reserve_one(self, shop_id: int, token: Token, item_id: int,
                          location_id: int, quantity: int,
                          ttl_ms: int = 0) -> None:
        """Hold quantity units of an item at a location for the checkout
        (Context.reserve_one)."""
        tok = _token(token)
        args = (_u64(shop_id, "shop_id"), tok, len(tok),
                _u64(item_id, "item_id"), _u64(location_id, "location_id"),
                _i64(quantity, "quantity"), _i64(ttl_ms, "ttl_ms"))
        async with self._lock:
            await self._nonblocking("rsv_reserve_one", *args)

    async def _token_call(self, fn: str, shop_id: int, token: Token,
                          *extra: Any) -> None:
        tok = _token(token)
        args = (_u64(shop_id, "shop_id"), tok, len(tok)) + extra
        async with self._lock:
            await self._nonblocking(fn, *args)

    async def claim(self, shop_id: int, token: Token) -> None:
        """Payment succeeded: take the held units for good
        (Context.claim)."""
        await self._token_call("rsv_claim", shop_id, token)

    async def release(self, shop_id: int, token: Token) -> None:
        """Give the checkout's units back (Context.release)."""
        await self._token_call("rsv_release", shop_id, token)

    async def extend(self, shop_id: int, token: Token, ttl_ms: int = 0) -> None:
        """Keep the holds ttl_ms from now (Context.extend)."""
        await self._token_call("rsv_extend", shop_id, token,
                               _i64(ttl_ms, "ttl_ms"))

    async def checkout_status(self, shop_id: int,
                              token: Token) -> CheckoutStatus:
        """Where the checkout stands (Context.checkout_status)."""
        # written by the library's worker after the start returned: kept
        # alive here until the call has finished
        st, units, ms = ctypes.c_int32(), ctypes.c_int64(), ctypes.c_int64()
        await self._token_call("rsv_checkout_status", shop_id, token,
                               ctypes.byref(st), ctypes.byref(units),
                               ctypes.byref(ms))
        try:
            status = Status(st.value)
        except ValueError:
            status = st.value  # type: ignore[assignment]
        return CheckoutStatus(status, units.value, ms.value)

    # -- the calls without a non-blocking form: the default executor --

    async def _blocking(self, method: Callable[..., Any], *args: Any,
                        **kw: Any) -> Any:
        loop = asyncio.get_running_loop()
        async with self._lock:
            return await loop.run_in_executor(
                None, functools.partial(method, *args, **kw))

    async def stock_set(self, shop_id: int, item_id: int, location_id: int,
                        on_hand: int) -> None:
        """Set the stock on hand (Context.stock_set)."""
        await self._blocking(self.context.stock_set, shop_id, item_id,
                             location_id, on_hand)

    async def stock_adjust(self, shop_id: int, item_id: int,
                           location_id: int, delta: int) -> int:
        """Add delta to the stock on hand (Context.stock_adjust)."""
        return await self._blocking(self.context.stock_adjust, shop_id,
                                    item_id, location_id, delta)

    async def stock_get(self, shop_id: int, item_id: int,
                        location_id: int) -> Stock:
        """The stock of an item at a location (Context.stock_get)."""
        return await self._blocking(self.context.stock_get, shop_id, item_id,
                                    location_id)

    async def replenish(self, shop_id: int, item_id: int,
                        location_id: int) -> int:
        """Top the pool up (Context.replenish)."""
        return await self._blocking(self.context.replenish, shop_id, item_id,
                                    location_id)

    async def pool_drain(self, shop_id: int, item_id: int,
                         location_id: int) -> int:
        """Give the pool back to the ledger (Context.pool_drain)."""
        return await self._blocking(self.context.pool_drain, shop_id,
                                    item_id, location_id)

    async def sweep(self, shop_id: int, max_holds: int = 0) -> int:
        """Give back expired holds (Context.sweep)."""
        return await self._blocking(self.context.sweep, shop_id, max_holds)

    async def audit(self, shop_id: int = 0,
                    all_shops: bool = False) -> List[Violation]:
        """Check the invariants (Context.audit)."""
        return await self._blocking(self.context.audit, shop_id, all_shops)

    async def reserve_batch(self, entries: Iterable[Tuple[int, Token, int, int, int]],
                            ttl_ms: int = 0) -> List[int]:
        """Many one-line reserves at once (Context.reserve_batch)."""
        return await self._blocking(self.context.reserve_batch, list(entries),
                                    ttl_ms)

    async def claim_batch(self, checkouts: Iterable[Tuple[int, Token]]
                          ) -> List[int]:
        """Many claims at once (Context.claim_batch)."""
        return await self._blocking(self.context.claim_batch, list(checkouts))

    async def release_batch(self, checkouts: Iterable[Tuple[int, Token]]
                            ) -> List[int]:
        """Many releases at once (Context.release_batch)."""
        return await self._blocking(self.context.release_batch,
                                    list(checkouts))

    async def reconnect(self) -> None:
        """Connect again after ConnectionLost or InDoubt
        (Context.reconnect)."""
        await self._blocking(self.context.reconnect)

    async def close(self) -> None:
        """Close the context once the calls made before have finished."""
        await self._blocking(self.context.close)


async def connect_async(dsn: Union[str, bytes],
                        options: Optional[Options] = None,
                        **fields: Any) -> AsyncContext:
    """libreserve.connect for asyncio: an AsyncContext on a connection of
    its own (AsyncContext.connect)."""
    return await AsyncContext.connect(dsn, options, **fields)


class AsyncBatcher:
    """A Batcher for asyncio: any number of reserve_one, claim and release
    calls in flight at once from one event loop, coalesced into batches by
    the C batcher (rsv_batcher_*_start); the loop watches the batcher's
    descriptor (rsv_batcher_fd) and hands each answer to its caller.

        async with await libreserve.AsyncBatcher.open(dsn, connections=8) as b:
            await asyncio.gather(*(b.reserve_one(1, t, 42, 7, 1) for t in tokens))
    """

    def __init__(self, batcher: Batcher) -> None:
        self.batcher = batcher
        self._calls: Dict[int, Tuple["asyncio.Future[int]", str, Any]] = {}
        self._loop: Optional[asyncio.AbstractEventLoop] = None

    @classmethod
    async def open(cls, dsn: Union[str, bytes], connections: int = 4,
                   options: Optional[Options] = None,
                   **fields: Any) -> "AsyncBatcher":
        """Open a batcher (as Batcher) without blocking the event loop."""
        loop = asyncio.get_running_loop()
        b = await loop.run_in_executor(None, functools.partial(
            Batcher, dsn, connections, options, **fields))
        return cls(b)

    async def __aenter__(self) -> "AsyncBatcher":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def _answer(self) -> None:
        # the descriptor is readable while answered calls wait
        p = self.batcher._p
        call, code = ctypes.c_void_p(), ctypes.c_int()
        while p and lib.rsv_batcher_next_done(p, ctypes.byref(call),
                                              ctypes.byref(code)) == OK:
            key = call.value or 0
            lib.rsv_batcher_call_free(call.value)
            if key not in self._calls:
                continue
            fut, fn, _keep = self._calls.pop(key)
            if fut.done():
                continue
            if code.value == OK:
                fut.set_result(OK)
            else:
                fut.set_exception(_error(code.value, strerror(code.value), fn))
        if not self._calls and self._loop is not None:
            self._loop.remove_reader(lib.rsv_batcher_fd(p))
            self._loop = None

    async def _start(self, fn: str, *args: Any, keep: Any = None) -> None:
        # keep: what the request uses in place until it is answered (a
        # cart), held here so that a cancelled caller cannot free it
        p = self.batcher._ptr()
        call = ctypes.c_void_p()
        rc = getattr(lib, fn + "_start")(p, *args, ctypes.byref(call))
        if rc != PENDING:
            if rc != OK:
                raise _error(rc, strerror(rc), fn)
            return
        loop = asyncio.get_running_loop()
        fut: "asyncio.Future[int]" = loop.create_future()
        self._calls[call.value or 0] = (fut, fn, keep)
        if self._loop is None:
            self._loop = loop
            loop.add_reader(lib.rsv_batcher_fd(p), self._answer)
        # the request is the batcher's now: a cancelled wait leaves it to
        # finish there (its answer is dropped)
        await asyncio.shield(fut)

    async def reserve_one(self, shop_id: int, token: Token, item_id: int,
                          location_id: int, quantity: int,
                          ttl_ms: int = 0) -> None:
        """Hold units for a checkout (Batcher.reserve_one)."""
        tok = _token(token)
        await self._start("rsv_batcher_reserve_one", _u64(shop_id, "shop_id"),
                          tok, len(tok), _u64(item_id, "item_id"),
                          _u64(location_id, "location_id"),
                          _i64(quantity, "quantity"), _i64(ttl_ms, "ttl_ms"))

    async def reserve(self, shop_id: int, token: Token, cart: Cart,
                      ttl_ms: int = 0) -> Cart:
        """Hold every line of a cart (Batcher.reserve); returns the cart,
        whose allocations() say where each line is held."""
        tok = _token(token)
        if not isinstance(cart, Cart):
            raise ArgumentTypeError(EINVAL, "cart must be a Cart, not %s"
                                    % type(cart).__name__)
        try:
            await self._start("rsv_batcher_reserve",
                              _u64(shop_id, "shop_id"), tok, len(tok),
                              cart._ptr(), _i64(ttl_ms, "ttl_ms"), keep=cart)
        except (OutOfStock, NoItem) as e:
            e.failed_line = cart.failed_line
            raise
        return cart

    async def claim(self, shop_id: int, token: Token) -> None:
        """Claim a checkout (Batcher.claim)."""
        tok = _token(token)
        await self._start("rsv_batcher_claim", _u64(shop_id, "shop_id"), tok,
                          len(tok))

    async def release(self, shop_id: int, token: Token) -> None:
        """Release a checkout (Batcher.release)."""
        tok = _token(token)
        await self._start("rsv_batcher_release", _u64(shop_id, "shop_id"),
                          tok, len(tok))

    async def close(self) -> None:
        """Close the batcher once the calls in flight are answered."""
        while self._calls:
            await asyncio.gather(*(c[0] for c in list(self._calls.values())),
                                 return_exceptions=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.batcher.close)
