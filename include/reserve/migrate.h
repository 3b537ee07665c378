/*
 * reserve/migrate.h - moving a live shop from the store it sold through
 * before (Redis counters, a counter row, a platform's table: "the old
 * store") to libreserve, one shop and one stage at a time, reversibly.
 * Not included by <reserve.h>: include it where the checkout's one call
 * site is.  docs/migration.md is the operator's guide.
 *
 * The application makes its reserves, claims and releases through one
 * migration handle (rsv_migrate_reserve_one, rsv_migrate_claim,
 * rsv_migrate_release) and hands the handle the old store's operations
 * (rsv_migrate_set_legacy).  What reaches which store follows the shop's
 * stage, stored in the database (rsv_migration_stage, set with
 * `rsv-admin migrate`):
 *
 *   RSV_STAGE_OLD       the old store only (a shop without a row);
 *   RSV_STAGE_SHADOW    the old store answers the buyer; the same call
 *                       is made on libreserve off the request path (the
 *                       handle's own thread and connection, through a
 *                       bounded queue) and the two answers compared;
 *   RSV_STAGE_PRIMARY   libreserve answers; the old store is kept
 *                       current off the request path (same thread and
 *                       queue), so that going back to shadow is safe;
 *   RSV_STAGE_COMPLETE  libreserve only.
 *
 * Nothing is done on the store that did not decide that could not be
 * undone: a hold it made that the deciding store refused is released at
 * once; a claim or release the deciding store refused is not sent to it
 * (in shadow libreserve's answer is read instead, from the checkout's
 * status; in primary the old store is left alone).
 *
 * Following a change.  The handle's thread reads the rows changed since
 * its last read (one statement) every refresh interval (default 1,000 ms,
 * rsv_migrate_set_refresh_ms); a call made one interval after a change
 * was committed follows it, unless the handle's thread is inside a call
 * of its own on libreserve then (bounded by call_timeout_ms).  The
 * request path sends no statement for it; every fifth interval the
 * handle's thread also adds its counters to rsv_migration_counts (one
 * statement) and writes its mismatch samples.  When the stage cannot be read
 * (the server down, the table gone, a statement failing) the handle keeps
 * the stages it read last, counts the failure (RSV_MIG_STAGE_READ_FAILED)
 * and tries again next interval: a shop at primary stays primary, never
 * silently back on the old store.
 *
 * Threads.  A handle belongs to one thread at a time, like its context,
 * except rsv_migrate_stage, rsv_migrate_stat, rsv_migrate_prometheus and
 * rsv_migrate_drain, which only read the handle under its lock and may be
 * called from any thread (a monitoring thread), and
 * rsv_migrate_mirror_next and rsv_migrate_mirror_done, which may be
 * called from any thread (the application's own mirroring thread or
 * loop) until rsv_migrate_close is called.  The old store's
 * function is called on the handle's user's thread (stages old and
 * shadow) and on the handle's own thread (primary: keeping the old store
 * current), so it must be safe to call from both.
 *
 * A flip.  The store that decides a shop's call first sees what the
 * other decided before: right after a flip, a call of that shop waits
 * until the handle's thread has done the shop's work queued at the
 * previous stage (at most the context's call_timeout_ms).  In steady
 * state nothing waits; under load, a queue that lags makes the first
 * calls after a flip wait that long (watch
 * libreserve_migration_queue_depth before flipping).
 *
 * Conventions are those of <reserve.h>: int codes, fixed-width integers,
 * no struct by value, no varargs.
 */
#ifndef RESERVE_MIGRATE_H
#define RESERVE_MIGRATE_H

#include <reserve.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A shop's stage (rsv_migration_stage.stage). */
#define RSV_STAGE_OLD 0
#define RSV_STAGE_SHADOW 1
#define RSV_STAGE_PRIMARY 2
#define RSV_STAGE_COMPLETE 3

/* How the two stores' answers to one call compared, and the handle's
 * books: counters per shop for rsv_migrate_stat().  Accepted means
 * RSV_OK; refused means an expected outcome (RSV_EOUTOFSTOCK,
 * RSV_ECLAIMED, RSV_EEXPIRED, RSV_ERELEASED; for the old store also
 * RSV_ENOTFOUND). */
enum rsv_migrate_stat_kind {
    RSV_MIG_BOTH_ACCEPTED = 0,
    RSV_MIG_BOTH_REFUSED = 1,
    RSV_MIG_OLD_REFUSED_NEW_ACCEPTED = 2, /* would oversell once primary */
    RSV_MIG_OLD_ACCEPTED_NEW_REFUSED = 3, /* would undersell */
    RSV_MIG_NEW_FAILED = 4,    /* libreserve failed (RSV_EBUSY, RSV_ECONN,
                                  RSV_ENOITEM: not imported ...) */
    RSV_MIG_UNKNOWN = 5,       /* a claim or release libreserve answered
                                  RSV_ENOTFOUND: the hold was made before
                                  shadowing began (falls to 0 within the
                                  longest hold's TTL) or its reserve was
                                  dropped */
    RSV_MIG_OLD_FAILED = 6,    /* the old store failed (any other code):
                                  not compared */
    RSV_MIG_OFFERED = 7,       /* work offered to the queue ... */
    RSV_MIG_APPLIED = 8,       /* ... done by the handle's thread ... */
    RSV_MIG_DROPPED = 9,       /* ... or dropped, the queue full (the shop
                                  is marked for a compare); offered =
                                  applied + dropped + waiting */
    RSV_MIG_STAGE_READ_FAILED = 10 /* reads of the stage table that failed
                                      (all shops only) */
};
#define RSV_MIG_STAT_COUNT 11

/*
 * The old store's operation, called by the handle: op is RSV_OP_RESERVE
 * (item_id, location_id, quantity, ttl_ms given), RSV_OP_CLAIM or
 * RSV_OP_RELEASE (those four 0: the old store finds the checkout by its
 * token).  Return the old store's answer as a libreserve code: RSV_OK when
 * it accepted, RSV_EOUTOFSTOCK, RSV_ECLAIMED, RSV_EEXPIRED, RSV_ERELEASED
 * or RSV_ENOTFOUND when it refused, any other negative code when it
 * failed.  token is valid during the call only.
 */
typedef int (*rsv_legacy_fn)(void *user, uint32_t op, uint64_t shop_id,
                             const void *token, size_t token_len,
                             uint64_t item_id, uint64_t location_id,
                             int64_t quantity, int64_t ttl_ms);

typedef struct rsv_migration rsv_migration;

/*
 * Open a migration handle for ctx (the context that answers when a shop
 * is primary or complete; the handle uses it on the caller's thread only,
 * inside its calls).  shadow_dsn (rsv_open_dsn's format) is the
 * connection of the handle's own thread: the libreserve side of shadow
 * calls, the stage reads, the counters.  Reads the stages once before it
 * returns.  queue_max bounds the work waiting for that thread (0: 4,096).
 * The thread does queued shadow work in batches (rsv_reserve_batch(),
 * rsv_claim_batch(), rsv_release_batch(): one commit for up to 64 calls,
 * waiting up to 10 ms for more to join), each call still answered and
 * classified as on its own.  Returns RSV_OK with *out set; RSV_EINVAL, RSV_ENOMEM, RSV_ESCHEMA (the
 * migration tables are missing: load sql/schema.sql), and the codes of
 * rsv_open_dsn.  Close with rsv_migrate_close() before closing ctx.
 */
RSV_EXTERN int rsv_migrate_open(rsv_migration **out, rsv_ctx *ctx,
                                const char *shadow_dsn, uint32_t queue_max);

/* Stop the handle's thread (the work still queued is done first, for at
 * most the context's call_timeout_ms per call) and free it.  Work left in
 * the outbox or handed out and not done is counted dropped (see
 * rsv_migrate_mirror_done).  NULL is a no-op. */
RSV_EXTERN void rsv_migrate_close(rsv_migration *m);

/* Register the old store's operation (NULL removes it: the calls of
 * shops at stages old and shadow then answer RSV_EINVAL, and primary's
 * work on the old store goes to the outbox; see "Handing the old store's
 * answer over" below).  Returns RSV_OK or RSV_EINVAL. */
RSV_EXTERN int rsv_migrate_set_legacy(rsv_migration *m, rsv_legacy_fn fn,
                                      void *user);

/* The refresh interval of the stage reads, in milliseconds (50..60,000;
 * default 1,000).  Returns RSV_OK or RSV_EINVAL. */
RSV_EXTERN int rsv_migrate_set_refresh_ms(rsv_migration *m, uint32_t ms);

/*
 * Send the libreserve side of the handle's shadow calls through b, a
 * batcher (<reserve/batch.h>) the application opened on libreserve's
 * server, instead of the handle's own connection (NULL: back to it).  For
 * a server with a handle per thread: handles that share one batcher have
 * their shadow calls coalesced into batches across threads, so shadow
 * costs libreserve's server a commit per batch rather than per call even
 * when each handle's queue holds one call at a time.  The handle's thread
 * then sends its calls one at a time, each answered and classified as on
 * its own; its connection still reads the stages, writes the counters and
 * reads a checkout's status where the old store refused a claim or
 * release.  Close the handles (or set NULL and rsv_migrate_drain()) before
 * closing b.  Returns RSV_OK or RSV_EINVAL (NULL m).
 */
RSV_EXTERN int rsv_migrate_set_batcher(rsv_migration *m, rsv_batcher *b);

/*
 * The calls of the checkout, by the shop's stage.  Each returns what the
 * deciding store answered: the old store's code (stages old and shadow)
 * or libreserve's (primary, complete; the codes of rsv_reserve_one,
 * rsv_claim, rsv_release, rsv_errmsg(ctx) has the message).  RSV_EINVAL
 * for a NULL handle, or no old store registered where one is needed;
 * RSV_ETOKEN at every stage for a token libreserve could not take (empty,
 * longer than RSV_TOKEN_MAX), so that no stage accepts what a later one
 * would refuse.
 */
RSV_EXTERN int rsv_migrate_reserve_one(rsv_migration *m, uint64_t shop_id,
                                       const void *token, size_t token_len,
                                       uint64_t item_id, uint64_t location_id,
                                       int64_t quantity, int64_t ttl_ms);
RSV_EXTERN int rsv_migrate_claim(rsv_migration *m, uint64_t shop_id,
                                 const void *token, size_t token_len);
RSV_EXTERN int rsv_migrate_release(rsv_migration *m, uint64_t shop_id,
                                   const void *token, size_t token_len);

/*
 * Handing the old store's answer over.  An application whose old store
 * cannot be called from C (an old store reached asynchronously, a
 * language that cannot take a call on a foreign thread) registers no
 * function and makes each call in two steps, on its own thread:
 *
 *   rsv_migrate_route()            the stage to act at;
 *   at RSV_STAGE_OLD and RSV_STAGE_SHADOW: ask the old store itself;
 *   rsv_migrate_*_answered()       with that stage and the old store's
 *                                  answer (any stage: at primary and
 *                                  complete libreserve decides and the
 *                                  answer given is not read).
 *
 * Each *_answered call returns what the calls above return for the same
 * stage and the same old store's answer, and does the same (one path in
 * the library): at shadow libreserve's side is queued and compared, and
 * an old store's failure is counted RSV_MIG_OLD_FAILED; at primary
 * libreserve answers.  A flip between the two steps does not change the
 * stage a call acts at, as a flip during the old store's function does
 * not: the next call follows it.
 *
 * At primary the old store is kept current by the application: with no
 * function registered, that work goes to the handle's outbox (bounded by
 * queue_max, a full one drops and counts as a full queue does).  A
 * thread or loop of the application's takes one item at a time
 * (rsv_migrate_mirror_next), makes the call on the old store and reports
 * its answer (rsv_migrate_mirror_done), which is classified and counted
 * as the handle's thread counts its own.  A reserve the old store
 * accepted and libreserve had refused comes back as a RELEASE item (with
 * the reserve's item, location and quantity), so that the old store
 * gives its hold back; it is not offered or counted on its own.  An item
 * handed out and not done counts as waiting (offered = applied + dropped
 * + waiting), and a flip back to shadow waits for it as for queued work.
 */

/* rsv_migrate_route flags: do not wait for the shop's earlier work. */
#define RSV_ROUTE_NOWAIT 0x1u

/*
 * The stage (RSV_STAGE_*) the shop's next call acts at, into *stage:
 * right after a flip it waits, as the calls do, until the work of the
 * previous stage is done (at most the context's call_timeout_ms, then
 * answers anyway).  With RSV_ROUTE_NOWAIT it never waits: RSV_EBUSY
 * (*stage set) when it would have, so that an event loop can ask again
 * from a thread that may wait.  Returns RSV_OK, RSV_EBUSY, or RSV_EINVAL
 * (NULL handle or stage, unknown flags).
 */
RSV_EXTERN int rsv_migrate_route(rsv_migration *m, uint64_t shop_id,
                                 uint32_t flags, int32_t *stage);

/*
 * A call at stage (what rsv_migrate_route answered) given old_answer,
 * the old store's answer to the same call as a libreserve code (what an
 * rsv_legacy_fn would have returned).  Returns old_answer at stages old
 * and shadow; libreserve's answer at primary and complete (rsv_errmsg(ctx)
 * has the message); RSV_EINVAL for a NULL handle or a stage not
 * RSV_STAGE_*; RSV_ETOKEN at every stage for a token libreserve could not
 * take.
 */
RSV_EXTERN int rsv_migrate_reserve_one_answered(
    rsv_migration *m, int32_t stage, uint64_t shop_id, const void *token,
    size_t token_len, uint64_t item_id, uint64_t location_id,
    int64_t quantity, int64_t ttl_ms, int32_t old_answer);
RSV_EXTERN int rsv_migrate_claim_answered(rsv_migration *m, int32_t stage,
                                          uint64_t shop_id, const void *token,
                                          size_t token_len,
                                          int32_t old_answer);
RSV_EXTERN int rsv_migrate_release_answered(rsv_migration *m, int32_t stage,
                                            uint64_t shop_id,
                                            const void *token,
                                            size_t token_len,
                                            int32_t old_answer);

/*
 * The next item of the outbox, waiting at most timeout_ms for one: the
 * call to make on the old store, as an rsv_legacy_fn would get it (op
 * RSV_OP_RESERVE, RSV_OP_CLAIM or RSV_OP_RELEASE; item, location,
 * quantity and TTL 0 but for a reserve), and the ticket to report its
 * answer with.  The token (up to RSV_TOKEN_MAX bytes) is copied into
 * token (token_cap bytes, owned by the caller); *token_len gets its
 * length.  Every pointer is required.  Returns RSV_OK with one item;
 * RSV_EBUSY when none came within timeout_ms (or queue_max tickets are
 * out and not done); RSV_ERANGE when token_cap is too small (*token_len
 * says how much is needed; the item stays in the outbox); RSV_ECANCELED
 * once rsv_migrate_close has begun (a thread waiting here returns at
 * once: stop calling); RSV_EINVAL.
 */
RSV_EXTERN int rsv_migrate_mirror_next(rsv_migration *m, uint32_t timeout_ms,
                                       uint64_t *ticket, uint32_t *op,
                                       uint64_t *shop_id, void *token,
                                       size_t token_cap, size_t *token_len,
                                       uint64_t *item_id,
                                       uint64_t *location_id,
                                       int64_t *quantity, int64_t *ttl_ms);

/*
 * The old store's answer (as for rsv_legacy_fn) to the item of ticket,
 * which is done: classified against libreserve's answer and counted.
 * Returns RSV_OK, or RSV_EINVAL (a NULL handle, a ticket not handed out
 * or already done).  Items handed out and not done when the handle is
 * closed are counted RSV_MIG_DROPPED and their shops marked for a
 * compare: drain the outbox (rsv_migrate_drain while the mirroring
 * thread runs) before closing.
 */
RSV_EXTERN int rsv_migrate_mirror_done(rsv_migration *m, uint64_t ticket,
                                       int32_t old_answer);

/* The shop's stage as the handle follows it now (RSV_STAGE_*) into
 * *stage.  Returns RSV_OK or RSV_EINVAL. */
RSV_EXTERN int rsv_migrate_stage(rsv_migration *m, uint64_t shop_id,
                                 int32_t *stage);

/* A counter (RSV_MIG_*) of one shop, or of every shop when all_shops is
 * non-zero (shop_id ignored), into *out.  Returns RSV_OK or RSV_EINVAL
 * (an unknown stat). */
RSV_EXTERN int rsv_migrate_stat(rsv_migration *m, uint64_t shop_id,
                                int32_t all_shops, uint32_t stat,
                                uint64_t *out);

/* The name of a counter (RSV_MIG_*): "both_accepted",
 * "old_refused_new_accepted", ...: the class label of
 * rsv_migrate_prometheus(), the class column of rsv_migration_counts and
 * rsv_migration_mismatch, and rsv-admin's, so a dashboard matches one
 * spelling everywhere ("stage_read_failed", the handle's own, is not per
 * shop: its Prometheus family is
 * libreserve_migration_stage_read_failures_total).  Stable across
 * releases: the tables store it.  A static string, or NULL for an unknown
 * stat.  Needs no handle: any thread, any time. */
RSV_EXTERN const char *rsv_migrate_class_name(uint32_t stat);

/* Wait until every work item offered is done (the queue empty and its
 * last call done, the outbox empty and every ticket done), at most
 * timeout_ms.  Returns RSV_OK, or RSV_EBUSY if work is still waiting. */
RSV_EXTERN int rsv_migrate_drain(rsv_migration *m, uint32_t timeout_ms);

/*
 * The handle's counters and each shop's stage in the Prometheus text
 * format (libreserve_migration_calls_total{shop,class},
 * libreserve_migration_stage{shop}, libreserve_migration_queue_depth),
 * written to buf (cap bytes, NUL-terminated).  *needed (may be NULL)
 * gets the length without the NUL.  Returns RSV_OK, or RSV_ERANGE when
 * cap is too small (buf then holds nothing useful).
 */
RSV_EXTERN int rsv_migrate_prometheus(rsv_migration *m, char *buf, size_t cap,
                                      size_t *needed);

#ifdef __cplusplus
}
#endif

#endif /* RESERVE_MIGRATE_H */
