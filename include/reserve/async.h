/*
 * reserve/async.h - the non-blocking interface: a context's calls
 * started on the caller's thread and finished by its event loop.
 *
 * Part of the libreserve public API: include it where it is used; it
 * includes <reserve.h>, the core.  The conventions at the top of
 * reserve.h (codes, ownership, threads, the connection) hold here too.
 */
#ifndef RESERVE_ASYNC_H
#define RESERVE_ASYNC_H

#include <reserve.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* The non-blocking interface                                         */
/* ------------------------------------------------------------------ */

/*
 * For event-loop servers, which must never wait on the database.  Each
 * rsv_*_start function takes the arguments of its blocking counterpart
 * and returns at once: RSV_PENDING when the call was handed to the
 * context's worker thread, or the call's final code when the blocking
 * function answers without a statement (a NULL or bad token, an empty
 * cart, a bad quantity or ttl_ms, NULL status_out, the kill switch: the
 * blocking function itself then ran, on the calling thread).  Wait until
 * rsv_async_fd(ctx) is readable (poll, epoll, a uv_poll_t, a struct
 * event: include/reserve/libuv.h and reserve/libevent.h do it), then call
 * rsv_cont(ctx): it returns the call's final code, or RSV_PENDING if it
 * has not finished.  No callback and no thread of the caller's is needed.
 *
 *   int rc = rsv_claim_start(ctx, shop, token, len);
 *   while (rc == RSV_PENDING) {
 *       struct pollfd p = {rsv_async_fd(ctx), POLLIN, 0};
 *       poll(&p, 1, -1);          (in a loop: register the fd once)
 *       rc = rsv_cont(ctx);
 *   }
 *
 * The worker runs exactly the blocking function on the context, so the
 * codes, retries, the time budget (call_timeout_ms), the in-doubt rules,
 * the statistics and the completion callback are the blocking call's;
 * the callback then runs on the worker thread.  When rsv_cont has
 * returned the final code, rsv_errmsg() and rsv_errcode() say what the
 * blocking call would have said, and the out-pointers given to the start
 * function (rsv_checkout_status_start) are written.
 *
 * Ownership.  The token is copied.  The cart of rsv_reserve_start, and
 * the out-pointers of rsv_checkout_status_start, are used in place: do
 * not touch or free them until rsv_cont has returned the final code.
 *
 * While a call is pending (from the start that returned RSV_PENDING until
 * rsv_cont returns something else), only the worker uses the context and
 * its connection: do not use the connection either.  Every other
 * function on the context then refuses with RSV_EINVAL without touching
 * it (not counted, no callback), except rsv_cont, rsv_async_fd,
 * rsv_pending, rsv_cancel, rsv_close and rsv_connection;
 * rsv_errcode() answers RSV_PENDING and rsv_errmsg() "a non-blocking
 * call is in progress on this context ...".  One call at a time per
 * context: use several contexts (connections) for concurrency.
 *
 * Cost: the first start makes one worker thread for the context, which
 * sleeps between calls and ends in rsv_close(); and one pipe (two
 * descriptors) made by the first start or rsv_async_fd().
 */

/* Non-blocking rsv_reserve(): same arguments; the cart is used in place
 * until the call completes (its allocation functions then answer).
 * Returns RSV_PENDING, or a final code as rsv_reserve() (RSV_EINVAL also
 * while another call is pending on ctx). */
RSV_EXTERN int rsv_reserve_start(rsv_ctx *ctx, uint64_t shop_id,
                                 const void *token, size_t token_len,
                                 rsv_cart *cart, int64_t ttl_ms);

/* Non-blocking rsv_reserve_one().  Returns as rsv_reserve_start(). */
RSV_EXTERN int rsv_reserve_one_start(rsv_ctx *ctx, uint64_t shop_id,
                                     const void *token, size_t token_len,
                                     uint64_t item_id, uint64_t location_id,
                                     int64_t quantity, int64_t ttl_ms);

/* Non-blocking rsv_claim().  Returns RSV_PENDING, or a final code as
 * rsv_claim(). */
RSV_EXTERN int rsv_claim_start(rsv_ctx *ctx, uint64_t shop_id,
                               const void *token, size_t token_len);

/* Non-blocking rsv_release().  Returns as rsv_claim_start(). */
RSV_EXTERN int rsv_release_start(rsv_ctx *ctx, uint64_t shop_id,
                                 const void *token, size_t token_len);

/* Non-blocking rsv_extend().  Returns as rsv_claim_start(). */
RSV_EXTERN int rsv_extend_start(rsv_ctx *ctx, uint64_t shop_id,
                                const void *token, size_t token_len,
                                int64_t ttl_ms);

/* Non-blocking rsv_checkout_status(): the out-pointers are written by the
 * worker, before completion is signalled, and must stay valid until then.
 * Returns as rsv_claim_start(). */
RSV_EXTERN int rsv_checkout_status_start(rsv_ctx *ctx, uint64_t shop_id,
                                         const void *token, size_t token_len,
                                         int32_t *status_out,
                                         int64_t *units_out,
                                         int64_t *expires_in_ms_out);

/*
 * Continue the pending call: never blocks.  Returns RSV_PENDING while it
 * runs; once it has finished, its final code (the first time only:
 * the context is then free for the next call), and consumes the
 * readiness of rsv_async_fd().  RSV_EINVAL for NULL ctx, or when no call
 * was started (or its result was already returned; the message says so).
 */
RSV_EXTERN int rsv_cont(rsv_ctx *ctx);

/*
 * The descriptor to wait on: readable once the pending call has finished
 * (then call rsv_cont), not readable otherwise.  Made on the first call
 * of this function or of a start function, so a loop may register it once
 * up front; the same descriptor until rsv_close(), which closes it.  Only
 * wait on it for readability; never read, write or close it.
 * Returns the descriptor (>= 0), RSV_EINVAL for NULL ctx, or RSV_ENOMEM
 * when no descriptor could be made (the message says why).
 */
RSV_EXTERN int rsv_async_fd(rsv_ctx *ctx);

/* 1 while a non-blocking call is pending on ctx (started, its final code
 * not yet returned by rsv_cont), else 0 (also for NULL). */
RSV_EXTERN int rsv_pending(const rsv_ctx *ctx);

/*
 * Ask the pending call to stop; never waits for it.  What the call then
 * completes with (rsv_cont):
 *
 *  - it had not begun: RSV_ECANCELED; nothing was sent, the connection
 *    is untouched.
 *  - it was running: the worker stops before its next attempt or during
 *    a backoff pause (RSV_ECANCELED, nothing applied), and a statement in
 *    flight is cut at once by shutting the connection's socket down:
 *    RSV_ECONN (nothing applied) or, if its COMMIT (or the one-statement
 *    procedure) had been sent, RSV_EINDOUBT (repeat the call with the
 *    same token to settle it: every call is idempotent by token).  After
 *    any of these the connection is cut: call rsv_reconnect() before the
 *    next call (the message of RSV_ECANCELED says whether it was cut).
 *  - it had already finished: its own result.  If it finished just as
 *    the cancel came, the connection may have been cut all the same: the
 *    next call then answers RSV_ECONN having sent nothing; reconnect.
 *
 * Returns RSV_OK (the call will complete soon; keep waiting for the
 * descriptor), or RSV_EINVAL for NULL ctx or no call pending.
 * rsv_close() with a call pending cancels it the same way, waits for the
 * worker and frees everything.
 */
RSV_EXTERN int rsv_cancel(rsv_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif /* RESERVE_ASYNC_H */
