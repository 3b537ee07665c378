/*
 * reserve/batch.h - many checkouts per call: batches on one context, and the
 * batcher, which coalesces many threads' calls onto a few connections.
 *
 * Part of the libreserve public API: include it where it is used; it
 * includes <reserve.h>, the core.  The conventions at the top of
 * reserve.h (codes, ownership, threads, the connection) hold here too.
 */
#ifndef RESERVE_BATCH_H
#define RESERVE_BATCH_H

#include <reserve.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Batches                                                            */
/* ------------------------------------------------------------------ */

/* The most entries one batch call takes. */
#define RSV_BATCH_MAX 256

/*
 * Reserve n independent one-line checkouts at once: for each i, quantity
 * quantities[i] of item_ids[i] at location_ids[i] for the checkout
 * tokens[i] (token_lens[i] bytes) of shop shop_ids[i], all for ttl_ms
 * milliseconds (0 = the context default).  For a server that serves many
 * buyers at once (a flash sale): the new checkouts that the one-round-trip
 * path of rsv_reserve_one() can decide are reserved by one statement and
 * one COMMIT (one flush of the server's logs) for the whole batch.
 *
 * results[i] receives exactly the code rsv_reserve_one() would have
 * returned for entry i (RSV_OK, RSV_EOUTOFSTOCK, RSV_ECLAIMED,
 * RSV_ENOITEM, RSV_ETOKEN, RSV_EQUANTITY, RSV_EINVAL for a NULL token,
 * ...); one entry's outcome never changes another's, and an entry refused
 * by its arguments writes nothing.  The entries the batch cannot decide
 * (a checkout that exists, a pool short of units, an unknown item, a
 * quantity above 64, an item this context saw sold out) are then run one
 * by one, as rsv_reserve_one() runs them, inside this call: extra round
 * trips for those entries only.  A batch left with one entry to send
 * sends it as rsv_reserve_one() does: for one checkout the single call's
 * procedure is cheaper; the batch statement pays from two entries on.
 * Without the schema's batch procedure (an older schema) every entry runs
 * one by one, with the same outcomes.  Entries are decided as if each
 * were a call of its own made in some order: the batch's entries before the
 * others, so a later entry of the same token re-reserves that checkout,
 * as a second rsv_reserve_one() would.  Each entry counts as one
 * RSV_OP_RESERVE call in the statistics and is reported to the
 * completion callback with its own token and code (a batch refused as a
 * whole counts as one call); RSV_STAT_ONE_TRIP counts the entries the
 * batch statement reserved, and RSV_STAT_STATEMENTS its one CALL.
 *
 * Runs its own transactions, like rsv_reserve(): refused with RSV_EINTXN
 * inside the caller's transaction.  The arrays are the caller's, read
 * only during the call.
 *
 * Returns RSV_OK when every results[i] holds its entry's outcome (which
 * may be a failure: an entry run on its own after the connection was lost
 * gets RSV_ECONN).  Otherwise a code for the whole batch, also written to
 * every results[i]: RSV_EINVAL (NULL ctx, array or results, n == 0 or n >
 * RSV_BATCH_MAX; results, if not NULL, is still written: n entries),
 * RSV_EQUANTITY (ttl_ms negative or above 30 days), RSV_EINTXN,
 * RSV_EDISABLED, and for the batch statement RSV_EBUSY, RSV_ECONN (nothing applied),
 * RSV_EINDOUBT (the batch may have committed: reconnect and repeat the
 * same batch; each entry is idempotent by its token, so a repeat answers
 * RSV_OK for the checkouts it holds), RSV_EDB, RSV_ENOMEM.
 */
RSV_EXTERN int rsv_reserve_batch(rsv_ctx *ctx, size_t n,
                                 const uint64_t *shop_ids,
                                 const void *const *tokens,
                                 const size_t *token_lens,
                                 const uint64_t *item_ids,
                                 const uint64_t *location_ids,
                                 const int64_t *quantities, int64_t ttl_ms,
                                 int *results);

/*
 * Reserve n checkouts of carts at once: for each i, every line of
 * carts[i] for the checkout tokens[i] (token_lens[i] bytes) of shop
 * shop_ids[i], all or nothing per cart, all for ttl_ms milliseconds (0 =
 * the context default).  As rsv_reserve_batch() for carts: the new
 * checkouts that the one-round-trip path of rsv_reserve() can decide (a
 * cart every line of which its first location can cover, up to 32 item /
 * location pairs and 64 units) are reserved by one statement and one
 * COMMIT for the whole batch; the others run one by one, as rsv_reserve()
 * runs them, inside this call.
 *
 * results[i] receives exactly the code rsv_reserve() would have returned
 * for entry i (RSV_OK, RSV_EOUTOFSTOCK, RSV_ENOITEM, RSV_ECLAIMED,
 * RSV_EEMPTY, RSV_ETOOBIG, RSV_ETOKEN, RSV_EINVAL for a NULL token or
 * cart, ...), and carts[i] tells afterwards, as after rsv_reserve(), how
 * its lines were allocated (rsv_cart_allocation) or which line failed
 * (rsv_cart_failed_line); a cart given for several entries tells of the
 * one run last.  The carts are read and written only during the call.
 * Otherwise as rsv_reserve_batch(): the same entry order, statistics,
 * transactions and codes for the whole batch (RSV_EINVAL also for a NULL
 * carts array; RSV_EQUANTITY only for ttl_ms).
 */
RSV_EXTERN int rsv_reserve_cart_batch(rsv_ctx *ctx, size_t n,
                                      const uint64_t *shop_ids,
                                      const void *const *tokens,
                                      const size_t *token_lens,
                                      rsv_cart *const *carts, int64_t ttl_ms,
                                      int *results);

/*
 * Claim n checkouts at once: results[i] receives exactly the code
 * rsv_claim() would have returned for checkout tokens[i] of shop
 * shop_ids[i] (RSV_OK, RSV_ECLAIMED, RSV_EEXPIRED, RSV_ERELEASED,
 * RSV_ENOTFOUND, RSV_ETOKEN, RSV_EINVAL for a NULL token).  In one
 * statement and one COMMIT with the schema's batch procedure, else one by
 * one.  Unlike rsv_claim(), a batch never joins the caller's transaction:
 * inside one it is refused with RSV_EINTXN (claim one by one to commit
 * claims with the application's own rows).  A token listed twice is
 * claimed once; its second entry answers what a repeated rsv_claim()
 * would (RSV_ECLAIMED).  Each entry counts as one RSV_OP_CLAIM call and
 * is reported to the completion callback.
 * Returns RSV_OK when every results[i] is set; else the whole batch's code
 * as for rsv_reserve_batch() (without RSV_EQUANTITY), also in every
 * results[i]; after RSV_EINDOUBT repeat the same batch: a claim that
 * committed answers RSV_ECLAIMED, never takes twice.
 */
RSV_EXTERN int rsv_claim_batch(rsv_ctx *ctx, size_t n,
                               const uint64_t *shop_ids,
                               const void *const *tokens,
                               const size_t *token_lens, int *results);

/*
 * Release n checkouts at once: results[i] receives exactly the code
 * rsv_release() would have returned (RSV_OK, also for a checkout already
 * released or expired; RSV_ECLAIMED, RSV_ENOTFOUND, RSV_ETOKEN,
 * RSV_EINVAL for a NULL token).  Otherwise as rsv_claim_batch(), each
 * entry counted as one RSV_OP_RELEASE call.
 */
RSV_EXTERN int rsv_release_batch(rsv_ctx *ctx, size_t n,
                                 const uint64_t *shop_ids,
                                 const void *const *tokens,
                                 const size_t *token_lens, int *results);

/* ------------------------------------------------------------------ */
/* The batcher                                                        */
/* ------------------------------------------------------------------ */

/*
 * For a multi-threaded checkout server: any number of threads call the
 * batcher at once, and it coalesces their reserves, claims and releases
 * onto a few connections of its own, as batches (rsv_reserve_batch,
 * rsv_reserve_cart_batch, rsv_claim_batch, rsv_release_batch).  It owns
 * `connections` contexts opened with rsv_open_dsn(), each with one worker
 * thread.
 *
 * Coalescing.  A call joins one shared queue and its thread waits for
 * its own answer only.  A worker that is free takes the oldest waiting
 * request and, with it, every other waiting request of the same kind
 * (reserves of one line with the same ttl_ms, reserves of carts with the
 * same ttl_ms, claims, or releases), oldest first, up to RSV_BATCH_MAX,
 * and runs them as one batch call on its context; the others keep their
 * places for the next free worker.  Whatever arrives
 * while batches are in flight goes into the next ones, so batches grow
 * with the load by themselves.  A lone request goes at once, as a batch
 * of one (which a batch sends as its single call does): at low load a
 * call costs its single call plus a hand-over between threads.
 *
 * Answers.  Each call returns exactly what its single call
 * (rsv_reserve_one, rsv_reserve, rsv_claim, rsv_release) would have
 * returned, made on its own context at its place in the queue, with one
 * difference: a worker whose batch lost its connection (RSV_ECONN, RSV_EINDOUBT, for the whole batch or
 * for entries run on their own) reconnects (rsv_reconnect) and sends
 * those entries once more, and their callers get what that repeat says.
 * Every entry is idempotent by its token (a repeated reserve holds the
 * checkout once, a claim that had committed answers RSV_ECLAIMED), so a
 * caller only sees RSV_ECONN or RSV_EINDOUBT when the repeat also failed
 * or the worker could not reconnect; then reconnecting is the batcher's
 * business (the next batch tries again), and repeating the call with the
 * same token settles it, as for the single call.  Arguments the single
 * call refuses before it reaches the server (a NULL or bad token, a bad
 * quantity or ttl_ms) are answered at once on the calling thread, in the
 * single call's order, and are not counted in the statistics.
 *
 * Messages.  There is no per-call message (a message kept in the batcher
 * would belong to whichever call failed last, on any thread):
 * rsv_strerror() names each code.  To see why the server cannot be
 * reached, open one context with rsv_open_dsn() and read rsv_errmsg().
 *
 * Threads.  Every rsv_batcher_* function but rsv_batcher_open and
 * rsv_batcher_close may be called from any thread at any time; the
 * token of a blocking call is the caller's, read while the call runs
 * (the non-blocking form below copies it).  The workers start with
 * every signal blocked.
 */

/* The most connections one batcher opens. */
#define RSV_BATCHER_MAX_CONNECTIONS 64

/*
 * Open `connections` (1..RSV_BATCHER_MAX_CONNECTIONS) contexts with
 * rsv_open_dsn(dsn, opts) and start one worker thread for each.  opts
 * may be NULL for defaults; it is copied.  On success *out owns the
 * batcher; on failure *out is NULL and nothing stays open.
 * Returns RSV_OK; RSV_EINVAL (NULL out or dsn, connections out of range,
 * a malformed dsn or bad option), RSV_ENOMEM (also when a thread cannot
 * be started), or the first failing rsv_open_dsn()'s code (RSV_ECONN,
 * RSV_ESCHEMA, RSV_ESCHEMAVER, RSV_ESERVER, ...).
 */
RSV_EXTERN int rsv_batcher_open(rsv_batcher **out, const char *dsn,
                                const rsv_options *opts,
                                uint32_t connections);

/*
 * Stop the batcher and free it.  Calls made from the moment it begins
 * answer RSV_EDISABLED at once; requests already queued are still run
 * and their callers answered; then the workers end and the contexts and
 * their connections are closed.  Returns once every caller inside the
 * batcher has left it; no call may be made once it has returned.  NULL is
 * a no-op.
 */
RSV_EXTERN void rsv_batcher_close(rsv_batcher *b);

/*
 * rsv_reserve_one() through the batcher: blocks until this request's
 * batch has run.  Returns what rsv_reserve_one() would (see "Answers"
 * above), RSV_EINVAL for a NULL b, or RSV_EDISABLED once
 * rsv_batcher_close() has begun.
 */
RSV_EXTERN int rsv_batcher_reserve_one(rsv_batcher *b, uint64_t shop_id,
                                       const void *token, size_t token_len,
                                       uint64_t item_id,
                                       uint64_t location_id,
                                       int64_t quantity, int64_t ttl_ms);

/*
 * rsv_reserve() of a cart through the batcher, as an entry of an
 * rsv_reserve_cart_batch(): blocks until this request's batch has run.
 * The cart is the caller's, read and written (its allocation, its failed
 * line) by a worker while the call runs.  Returns what rsv_reserve() would
 * (see "Answers" above), RSV_EINVAL for a NULL b, or RSV_EDISABLED once
 * rsv_batcher_close() has begun.
 */
RSV_EXTERN int rsv_batcher_reserve(rsv_batcher *b, uint64_t shop_id,
                                   const void *token, size_t token_len,
                                   rsv_cart *cart, int64_t ttl_ms);

/* rsv_claim() through the batcher, never joining a transaction (the
 * batcher's connections are its own).  Returns as
 * rsv_batcher_reserve_one() does for rsv_claim(). */
RSV_EXTERN int rsv_batcher_claim(rsv_batcher *b, uint64_t shop_id,
                                 const void *token, size_t token_len);

/* rsv_release() through the batcher.  Returns as rsv_batcher_claim(). */
RSV_EXTERN int rsv_batcher_release(rsv_batcher *b, uint64_t shop_id,
                                   const void *token, size_t token_len);

/*
 * The non-blocking form, for event loops: the same requests, started
 * without waiting, their answers collected from a descriptor.
 *
 *   rsv_batcher_call *c;
 *   int rc = rsv_batcher_claim_start(b, shop, token, len, &c);
 *   if (rc != RSV_PENDING)
 *       answer(rc);                  (decided at once; c is NULL)
 *   ... when rsv_batcher_fd(b) is readable:
 *   rsv_batcher_call *done;
 *   int code;
 *   while (rsv_batcher_next_done(b, &done, &code) == RSV_OK) {
 *       answer_the_request_of(done, code);
 *       rsv_batcher_call_free(done);
 *   }
 *
 * A start copies the token and queues the request as the blocking call
 * would; the answer is the blocking call's.  It returns RSV_PENDING with
 * *out set to a new call, which the batcher owns until
 * rsv_batcher_next_done() hands it back; then the caller frees it with
 * rsv_batcher_call_free().  Or it returns the final code at once with
 * *out NULL: the argument checks of the single call, RSV_EINVAL (NULL b
 * or out), RSV_EDISABLED (close has begun), RSV_ENOMEM.  Calls started
 * on one batcher complete in any order, from any of its workers;
 * compare the handles to tell them apart.  rsv_batcher_close() still
 * runs every queued call, and frees the calls nobody collected.
 */
typedef struct rsv_batcher_call rsv_batcher_call;

/* Non-blocking rsv_batcher_reserve_one(). */
RSV_EXTERN int rsv_batcher_reserve_one_start(rsv_batcher *b,
                                             uint64_t shop_id,
                                             const void *token,
                                             size_t token_len,
                                             uint64_t item_id,
                                             uint64_t location_id,
                                             int64_t quantity,
                                             int64_t ttl_ms,
                                             rsv_batcher_call **out);

/* Non-blocking rsv_batcher_reserve(): the cart is used in place, as by
 * rsv_reserve_start(): keep it, unchanged, until the call is collected;
 * then it tells the allocation or the failed line. */
RSV_EXTERN int rsv_batcher_reserve_start(rsv_batcher *b, uint64_t shop_id,
                                         const void *token, size_t token_len,
                                         rsv_cart *cart, int64_t ttl_ms,
                                         rsv_batcher_call **out);

/* Non-blocking rsv_batcher_claim(). */
RSV_EXTERN int rsv_batcher_claim_start(rsv_batcher *b, uint64_t shop_id,
                                       const void *token, size_t token_len,
                                       rsv_batcher_call **out);

/* Non-blocking rsv_batcher_release(). */
RSV_EXTERN int rsv_batcher_release_start(rsv_batcher *b, uint64_t shop_id,
                                         const void *token, size_t token_len,
                                         rsv_batcher_call **out);

/*
 * The descriptor to wait on: readable while some started call has
 * completed and not yet been collected with rsv_batcher_next_done().
 * The same descriptor for the batcher's life; only wait on it for
 * readability, never read, write or close it.  Returns it (>= 0), or
 * RSV_EINVAL for NULL.
 */
RSV_EXTERN int rsv_batcher_fd(const rsv_batcher *b);

/*
 * Collect one completed call, oldest answer first, never waiting:
 * RSV_OK with *done the call (now the caller's, to free) and *code its
 * final code; RSV_PENDING with *done NULL when none has completed;
 * RSV_EINVAL for a NULL argument.
 */
RSV_EXTERN int rsv_batcher_next_done(rsv_batcher *b, rsv_batcher_call **done,
                                     int *code);

/* Free a call rsv_batcher_next_done() returned.  NULL is a no-op. */
RSV_EXTERN void rsv_batcher_call_free(rsv_batcher_call *call);

/*
 * A counter as rsv_stats_get() reads it, summed over the batcher's
 * contexts (RSV_STAT_LATENCY_MAX_US: the maximum), as of the last batch
 * each worker finished.  Each batch entry counts as one call of its
 * kind, so RSV_STAT_STATEMENTS per RSV_STAT_CALLS of RSV_OP_RESERVE shows
 * how well reserves coalesce (1 or more: one by one).  Latencies are
 * those of the batch calls on the connections, without the time spent
 * queued.  Returns RSV_OK, or RSV_EINVAL (NULL b or out, unknown stat or
 * op).
 */
RSV_EXTERN int rsv_batcher_stats_get(const rsv_batcher *b, uint32_t stat,
                                     uint32_t op, uint64_t *out);

#ifdef __cplusplus
}
#endif

#endif /* RESERVE_BATCH_H */
