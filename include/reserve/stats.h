/*
 * reserve/stats.h - statistics: counters, outcomes and latency histograms per
 * context and per batcher, snapshots that add them up, and Prometheus
 * text.
 *
 * Part of the libreserve public API: include it where it is used; it
 * includes <reserve.h>, the core.  The conventions at the top of
 * reserve.h (codes, ownership, threads, the connection) hold here too.
 */
#ifndef RESERVE_STATS_H
#define RESERVE_STATS_H

#include <reserve.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Statistics                                                         */
/* ------------------------------------------------------------------ */

/*
 * Every context counts what its calls did, in fixed arrays inside the
 * context (about 6 KiB; nothing grows).  The counters are per context like
 * everything else: read them from the thread that uses the context, or
 * while no call on it is running.  To add several contexts up, or to read
 * them from another thread, copy them into a snapshot (see
 * rsv_stats_snapshot_add below).  Operation kinds (RSV_OP_*) are in
 * reserve.h.
 */

/* Counters for rsv_stats_get().  A call is counted once it returns, under
 * its kind, whatever it returned (also RSV_EINVAL or RSV_EDISABLED); a
 * call with a NULL context is not counted anywhere.  rsv_open() and the
 * cart, option and code functions are not operations and are not
 * counted.
 *
 * Contract and diagnostics.  CALLS, OK, EXPECTED, FAILED, RETRIES,
 * DEADLOCKS, LOCK_WAIT_TIMEOUTS, LATENCY_US, LATENCY_MAX_US,
 * POOL_DRAINED and STMT_EVICTIONS mean exactly what they say in every
 * release: alert and graph on them.  INLINE_REFILLS, SLOW_PATHS,
 * SHORT_READS, STATEMENTS, ONE_TRIP, BACK_TO_FAST and LEDGER_TAKES
 * describe how the engine served the calls; they are kept (the numbers
 * never change meaning or get reused) but what they count follows the
 * engine and may change between releases: read them to understand, not
 * to alert. */
enum rsv_stat {
    RSV_STAT_CALLS = 0,       /* calls returned (any code) */
    RSV_STAT_OK = 1,          /* calls that returned RSV_OK */
    RSV_STAT_EXPECTED = 2,    /* calls that returned an expected outcome:
                                 RSV_EOUTOFSTOCK .. RSV_EINDOUBT (-1..-7) */
    RSV_STAT_FAILED = 3,      /* calls that returned any other code
                                 (failures, including RSV_EDISABLED) */
    RSV_STAT_RETRIES = 4,     /* transaction attempts beyond the first
                                 (after a deadlock or lock-wait timeout) */
    RSV_STAT_DEADLOCKS = 5,   /* deadlocks the server reported to the
                                 library (ER_LOCK_DEADLOCK, 1213) */
    RSV_STAT_LOCK_WAIT_TIMEOUTS = 6, /* lock-wait timeouts reported to the
                                 library (ER_LOCK_WAIT_TIMEOUT, 1205) */
    RSV_STAT_INLINE_REFILLS = 7, /* pool refills a reserve did itself: a
                                 top-up transaction after its commit (pool
                                 running low; also one that found the
                                 ledger row held and did nothing), such a
                                 top-up left pending and done inside a
                                 later reserve procedure that got the row,
                                 or a slow-path run (pool short: ledger
                                 rows locked, pool refilled from the
                                 ledger) */
    RSV_STAT_SLOW_PATHS = 8,  /* the slow-path runs alone (included in
                                 RSV_STAT_INLINE_REFILLS) */
    RSV_STAT_SHORT_READS = 9, /* fast-path pool reads (one per item and
                                 location of a cart, per attempt) that
                                 returned fewer rows than asked: the pool
                                 was short, or SKIP LOCKED passed over rows
                                 other checkouts hold */
    RSV_STAT_STATEMENTS = 10, /* statements executed on the server,
                                 transaction control included (prepares
                                 and rsv_open's checks are not counted) */
    RSV_STAT_LATENCY_US = 11, /* sum of the calls' latencies, in
                                 microseconds (divide by RSV_STAT_CALLS for
                                 the mean) */
    RSV_STAT_LATENCY_MAX_US = 12, /* the slowest call, in microseconds */
    RSV_STAT_ONE_TRIP = 13,   /* reserves done in one round trip by the
                                 schema's reserve procedures (a new checkout
                                 whose lines could all be held at their
                                 first location, up to 32 of them; see
                                 rsv_reserve); the others sent their
                                 statements one by one.  0 with a schema
                                 loaded without the procedures */
    RSV_STAT_BACK_TO_FAST = 14, /* slow paths that found, once they had the
                                 ledger row, that another reserve had
                                 refilled the short pools since, and went
                                 back to the fast path (a hot pool that ran
                                 dry); not in RSV_STAT_SLOW_PATHS */
    RSV_STAT_LEDGER_TAKES = 15 /* item/location keys whose units came
                                 straight from the ledger row instead of
                                 the pool: one-trip reserves
                                 (RSV_STAT_ONE_TRIP) when no other
                                 transaction holds the row and it has
                                 enough units not yet issued; and a new
                                 checkout of one key that found its pool
                                 short and waited for the row, then took
                                 from it */,
    RSV_STAT_POOL_DRAINED = 16 /* pool units given back to their ledger row:
                                 by rsv_pool_drain (counted under
                                 RSV_OP_REPLENISH) and by rsv_sweep's pass
                                 over idle pools (RSV_OP_SWEEP; see
                                 rsv_options.pool_idle_s) */,
    RSV_STAT_STMT_EVICTIONS = 17 /* prepared statements this context closed
                                 because the server held
                                 max_prepared_stmt_count of them (see
                                 rsv_options.stmt_cache_max) */
};

/* Latency histogram buckets per operation kind: bucket 0 counts calls
 * under 1 microsecond, bucket b (1..30) calls of [2^(b-1), 2^b)
 * microseconds, bucket 31 calls of 2^30 microseconds (about 18 minutes) or
 * more. */
#define RSV_STATS_BUCKETS 32

/*
 * Read one counter (RSV_STAT_*) for one operation kind (RSV_OP_*, or
 * RSV_OP_ALL for the sum over every kind; for RSV_STAT_LATENCY_MAX_US the
 * maximum) into *out.  Counters start at zero when the context is opened
 * and wrap around at 2^64.
 * Returns RSV_OK, or RSV_EINVAL (NULL ctx or out, unknown stat or op).
 */
RSV_EXTERN int rsv_stats_get(const rsv_ctx *ctx, uint32_t stat, uint32_t op,
                             uint64_t *out);

/*
 * How many calls of kind op (RSV_OP_*, or RSV_OP_ALL) returned `code`:
 * RSV_OK or any RSV_E* code (an unused number in that range gives 0).
 * Returns RSV_OK, or RSV_EINVAL (NULL ctx or out, unknown op, a code
 * outside RSV_ENOTPRIMARY..RSV_OK).
 */
RSV_EXTERN int rsv_stats_outcome(const rsv_ctx *ctx, uint32_t op, int code,
                                 uint64_t *out);

/*
 * Copy the latency histogram of kind op (RSV_OP_*, or RSV_OP_ALL) into
 * buckets[0..n-1]: min(n, RSV_STATS_BUCKETS) buckets are written (see
 * RSV_STATS_BUCKETS for their bounds) and any further entries set to 0.
 * The buckets of a kind add up to its RSV_STAT_CALLS.
 * Returns RSV_OK, or RSV_EINVAL (NULL ctx, NULL buckets with n > 0,
 * unknown op).
 */
RSV_EXTERN int rsv_stats_histogram(const rsv_ctx *ctx, uint32_t op,
                                   uint64_t *buckets, size_t n);

/*
 * Estimate the p-th percentile (0 <= p <= 100; 50 is the median, 99 the
 * p99) of the latency of kind op (RSV_OP_*, or RSV_OP_ALL) into *us_out,
 * in microseconds: interpolated inside the histogram bucket that holds it,
 * so within a factor of two of the true value, and never above the
 * slowest call.  0 when no call of that kind was counted.
 * Returns RSV_OK, or RSV_EINVAL (NULL ctx or us_out, unknown op, p outside
 * 0..100 or NaN).
 */
RSV_EXTERN int rsv_stats_percentile(const rsv_ctx *ctx, uint32_t op,
                                    double p, uint64_t *us_out);

/* Set every counter, outcome and histogram of ctx back to zero.  Returns
 * RSV_OK, or RSV_EINVAL for NULL. */
RSV_EXTERN int rsv_stats_reset(rsv_ctx *ctx);

/*
 * What a crowd does to a key.  Per (shop, item, location), the events
 * that grow with the number of buyers competing for the key's pool:
 */
enum rsv_key_stat {
    RSV_KEY_SHORT = 0,        /* reserves that came up short at the key:
                                 a read of its pool from the bottom found
                                 fewer units free than they asked for (a
                                 pool running dry, the key sold out, or
                                 its rows held by other buyers) */
    RSV_KEY_REFILL_WAITS = 1, /* reserves that then waited for the key's
                                 ledger row: for a refill in flight, or
                                 to take the units from it themselves */
    RSV_KEY_PASSED_ROWS = 2   /* pool ids a read passed over before the
                                 row it took, counted from where the
                                 read began: rows other buyers held, or
                                 had taken since (a read from the pool's
                                 bottom counts none) */
};
#define RSV_KEY_STAT_COUNT 3

/* A context (and a snapshot) keeps these counters for at most
 * RSV_KEY_STATS_MAX keys: the ones with the most events.  A key pushed
 * out by a busier one starts again from zero if it comes back, so a
 * counter of a key may go down (Prometheus takes it as a reset). */
#define RSV_KEY_STATS_MAX 16

/*
 * Read a counter (RSV_KEY_*) of one key into *out: 0 for a key the
 * context keeps no counters of (no event, or pushed out).
 * Returns RSV_OK, or RSV_EINVAL (NULL ctx or out, unknown stat).
 */
RSV_EXTERN int rsv_stats_key(const rsv_ctx *ctx, uint64_t shop_id,
                             uint64_t item_id, uint64_t location_id,
                             uint32_t stat, uint64_t *out);

/*
 * The i-th key (0-based, i < RSV_KEY_STATS_MAX) the context keeps
 * counters of, into *shop_id, *item_id and *location_id, in no particular
 * order: read them with rsv_stats_key().  Returns RSV_OK, RSV_ERANGE when
 * there is no i-th key (i at or past the number kept), or RSV_EINVAL
 * (NULL argument).
 */
RSV_EXTERN int rsv_stats_key_at(const rsv_ctx *ctx, uint32_t i,
                                uint64_t *shop_id, uint64_t *item_id,
                                uint64_t *location_id);

/*
 * Snapshots: the statistics of one or more contexts added up, in memory
 * the caller owns (about 6 KiB, tied to no context or connection).  They
 * are how counters leave the thread that owns a context, and how several
 * contexts become one set of metrics.  Adding sums every counter, outcome
 * and histogram bucket; RSV_STAT_LATENCY_MAX_US keeps the maximum.
 *
 * Threads.  rsv_stats_snapshot_add() is the only one of these functions
 * that reads a context: call it where rsv_stats_get() may be called (on
 * the thread that uses the context, or while no call on it is running).
 * A snapshot belongs to one thread at a time, like a cart: the library
 * takes no lock, so calls on the same snapshot must not overlap.  When
 * threads share snapshots, hold the application's own mutex around every
 * call on them.  For a server whose threads each own a context:
 *
 *   each worker, every second or so, between two of its own calls:
 *     lock(m); rsv_stats_snapshot_clear(mine);
 *              rsv_stats_snapshot_add(mine, ctx); unlock(m);
 *   the exporter, on each scrape (total is its own):
 *     rsv_stats_snapshot_clear(total);
 *     lock(m); for each worker: rsv_stats_snapshot_merge(total, its mine);
 *     unlock(m);
 *     rsv_stats_prometheus(total, "instance=\"a\"", buf, len, &needed);
 *
 * A worker's snapshot keeps its last figures after its context is
 * closed, so the exported counters never go down (unless a context's
 * counters are reset with rsv_stats_reset()).
 */
typedef struct rsv_stats_snapshot rsv_stats_snapshot;

/* A new snapshot, every statistic zero and no context added; free it with
 * rsv_stats_snapshot_free().  Returns RSV_OK, RSV_EINVAL (NULL out) or
 * RSV_ENOMEM (then *out is NULL). */
RSV_EXTERN int rsv_stats_snapshot_new(rsv_stats_snapshot **out);

/* Free a snapshot.  NULL is a no-op. */
RSV_EXTERN void rsv_stats_snapshot_free(rsv_stats_snapshot *snap);

/* Set every statistic of snap, and its count of contexts, back to zero.
 * NULL is a no-op. */
RSV_EXTERN void rsv_stats_snapshot_clear(rsv_stats_snapshot *snap);

/* Add the statistics of ctx, as rsv_stats_get() would read them now, to
 * snap, and count one context more; ctx is not changed.  Adding the same
 * context again counts its calls again: clear snap first to replace them.
 * Returns RSV_OK, or RSV_EINVAL (NULL snap or ctx). */
RSV_EXTERN int rsv_stats_snapshot_add(rsv_stats_snapshot *snap,
                                      const rsv_ctx *ctx);

/* Add the statistics of src, and its count of contexts, to dst.
 * Returns RSV_OK, or RSV_EINVAL (NULL dst or src). */
RSV_EXTERN int rsv_stats_snapshot_merge(rsv_stats_snapshot *dst,
                                        const rsv_stats_snapshot *src);

/* Add the statistics of every context of the batcher, as
 * rsv_batcher_stats_get() reads them, to snap (one context each), for
 * rsv_stats_prometheus().  Returns RSV_OK, or RSV_EINVAL (NULL snap or
 * b). */
RSV_EXTERN int rsv_batcher_stats_snapshot_add(rsv_stats_snapshot *snap,
                                              const rsv_batcher *b);

/*
 * Write snap into buf as Prometheus text (exposition format 0.0.4: serve
 * it as "text/plain; version=0.0.4"), NUL-terminated.  Every family has
 * one # HELP and one # TYPE line:
 *
 *   libreserve_contexts                        gauge: contexts added up
 *   libreserve_calls_total{op,result,class}    counter: calls returned
 *   libreserve_<stat>_total{op}                counter: RSV_STAT_<STAT>,
 *       one family for each counter but those of calls and latencies:
 *       retries, deadlocks, lock_wait_timeouts, inline_refills,
 *       slow_paths, short_reads, statements, one_trip, back_to_fast,
 *       ledger_takes, pool_drained, stmt_evictions
 *   libreserve_call_duration_seconds{op}       histogram: _bucket{le}
 *       cumulative over the RSV_STATS_BUCKETS buckets (le = 2^b
 *       microseconds for b = 0..30, then "+Inf"), _sum, _count (the
 *       kind's RSV_STAT_CALLS)
 *   libreserve_call_duration_max_seconds{op}   gauge: the slowest call
 *   libreserve_key_short_total{shop_id,item_id,location_id}
 *   libreserve_key_refill_waits_total{...}
 *   libreserve_key_passed_rows_total{...}      counters: RSV_KEY_SHORT,
 *       RSV_KEY_REFILL_WAITS and RSV_KEY_PASSED_ROWS of each key kept
 *       (at most RSV_KEY_STATS_MAX; the families appear once a key is)
 *
 * op names the kind: "reserve", "claim", "release", "extend", "status",
 * "replenish", "sweep", "stock" or "audit"; a kind's series appear once a
 * call of it was counted.  result is the code's rsv_code_name() in lower
 * case without "rsv_" ("ok", "eoutofstock", ...; "other" for a code
 * without a name), and appears once counted ("ok" always); class is "ok",
 * "expected" or "failed", as RSV_STAT_OK, RSV_STAT_EXPECTED and
 * RSV_STAT_FAILED count them.
 *
 * labels (NULL or "" for none) comes first in the labels of every series,
 * e.g. "instance=\"a\",shard=\"3\"": name="value" pairs separated by
 * commas, without spaces, exactly as they appear in the output.  Names
 * match [a-zA-Z_][a-zA-Z0-9_]*, do not begin with "__", are not op,
 * result, class, le, shop_id, item_id or location_id, and appear once; a value is UTF-8 in which a
 * backslash, a double quote and a newline are written \\, \" and \n.
 *
 * *needed_out (may be NULL) receives the size of buffer the text needs,
 * its terminating NUL included (after RSV_OK, strlen(buf) + 1).  Pass
 * len 0 (buf may then be NULL) to learn it: the same snapshot gives the
 * same text again.  Numbers are written without floating point, so the
 * process's locale cannot change them.  Reads snap only.
 * Returns RSV_OK; RSV_ERANGE when len is less than *needed_out (buf then
 * holds "" if len > 0, never a truncated text); RSV_EINVAL (NULL snap,
 * NULL buf with len > 0, labels not as above).
 */
RSV_EXTERN int rsv_stats_prometheus(const rsv_stats_snapshot *snap,
                                    const char *labels, char *buf,
                                    size_t len, size_t *needed_out);

#ifdef __cplusplus
}
#endif

#endif /* RESERVE_STATS_H */
