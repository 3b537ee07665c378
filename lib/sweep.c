/*
 * sweep.c - giving back expired holds, draining idle pools and purging old
 * checkout records.
 *
 * The sweeper is optional: a pool's refill folds its own expired holds.
 * rsv_sweep() finds (item, location) keys of one shop with expired holds
 * or unfolded settlements and folds each in its own short transaction,
 * taking the ledger row with SKIP LOCKED: a key another sweeper or
 * refiller holds is being folded already, so many sweepers can run at once
 * and none waits for another or for a checkout.  Then it drains the pools
 * nobody used for opts.pool_idle_s (pool_drain.c), the same way.
 * rsv_sweep_report() says what each of those passes did, for the
 * sweeper's log and metrics.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define SWEEP_KEYS 64

/* Keys with expired holds or unfolded settlements, read per key rather
 * than per row.  The holds' half is a loose index scan, one index dive
 * per (item, location) key: the expiry index leads with (shop_id, item,
 * location, expires_at), so a key's earliest deadline is its first entry
 * (GROUP BY with MIN).  The index is named: with the statistics of a
 * freshly loaded schema the optimizer read every hold of the shop through
 * the primary key; with them it may still read the shop's entries of the
 * expiry index (index only) until InnoDB has recalculated them.  With
 * 148,000 holds over 20 keys: 0.55 ms instead of 35-62 ms
 * (docs/performance.md).  The settlements' half is
 * DISTINCT over the leading columns of their primary key, shop_id
 * included (MariaDB 10.11 uses the loose scan only then, and only once
 * the table's statistics are current); otherwise it reads the unfolded
 * settlements, which the sweep is about to fold anyway. */
static const char SQL_DUE_KEYS[] =
    "(SELECT CAST(item_id AS SIGNED), "
    "CAST(location_id AS SIGNED) FROM rsv_holds "
    "FORCE INDEX (rsv_holds_expiry) "
    "WHERE shop_id = ? GROUP BY shop_id, item_id, "
    "location_id HAVING MIN(expires_at) <= NOW(6) LIMIT ?) "
    "UNION (SELECT CAST(item_id AS SIGNED), "
    "CAST(location_id AS SIGNED) FROM (SELECT DISTINCT "
    "shop_id, item_id, location_id FROM "
    "rsv_journal WHERE shop_id = ? LIMIT ?) k)";

/* Checkouts to purge: settled ones past the retention, and held ones
 * whose holds were all given back long ago.  The status list names every
 * status there is (ST_*): with it the index (shop_id, status, updated_at)
 * gives one range per status that ends at the retention, so only old
 * checkouts are read; without it the purge read every checkout of the
 * shop at every sweep (25,000 for 25,000 recent ones, measured). */
#define PURGE_WHERE                                                        \
    "c.status IN (" SQLV(ST_HELD) ", " SQLV(ST_CLAIMED) ", "                 \
    SQLV(ST_RELEASED) ", " SQLV(ST_EXPIRED) ") AND c.updated_at < NOW(6) "   \
    "- INTERVAL ? SECOND AND (c.status <> " SQLV(ST_HELD) " OR "            \
    "(c.expires_at < NOW(6) - INTERVAL ? SECOND AND NOT EXISTS (SELECT 1 "   \
    "FROM rsv_holds h WHERE h.shop_id = c.shop_id AND h.checkout_token = "   \
    "c.checkout_token)))"

/* Read without locks (a consistent read), then deleted by primary key
 * with the conditions checked again on the locked row.  A DELETE through
 * the secondary index locked its entry before the checkout row, against
 * the lock order of everyone else: a re-reserve of the same checkout,
 * which holds the checkout row and then moves the row's entry in that
 * index (new status and time), deadlocked with it (check_soak caught
 * one). */
static const char SQL_PURGE_CANDIDATES[] =
    "SELECT c.checkout_token FROM rsv_checkouts c "
    "WHERE c.shop_id = ? AND " PURGE_WHERE " LIMIT ?";

static int b_purge_delete(strbuf *s, uint32_t n)
{
    buf_puts(s, "DELETE c FROM ");
    sql_key_rows(s, 1, n);
    buf_puts(s, "rsv_checkouts c FORCE INDEX (PRIMARY) ON "
                "c.shop_id = ? AND c.checkout_token = k.k0 WHERE " PURGE_WHERE);
    return 0;
}

struct fold_arg {
    uint64_t shop, key[2];
    int64_t max_reap; /* what is left of the caller's max_holds */
    fold_counts done; /* of the attempt that committed */
};

static int fold_body(rsv_ctx *ctx, void *p)
{
    struct fold_arg *a = p;
    ledger_row lv;
    int held;
    a->done = (fold_counts){0, 0, 0};
    int rc = ledger_lock_key(ctx, a->shop, a->key, 1, &lv, &held);
    if (rc || !held)
        return rc;
    return ledger_fold(ctx, a->shop, &lv, a->max_reap, &a->done);
}

#define PURGE_BATCH 64
#define PURGE_MAX 1024 /* checkouts per rsv_sweep */

static void purge_args(rsv_ctx *ctx)
{
    arg_i64(&ctx->args, ctx->opts.settled_retention_s);
    arg_i64(&ctx->args, ctx->opts.settled_retention_s);
}

struct purge_arg {
    uint64_t shop;
    token_list *batch;
    int64_t purged; /* by the attempt that committed */
};

static int purge_body(rsv_ctx *ctx, void *p)
{
    struct purge_arg *a = p;
    a->purged = 0;
    for (size_t done = 0; done < PURGE_MAX;) {
        args_reset(&ctx->args);
        arg_u64(&ctx->args, a->shop);
        purge_args(ctx);
        arg_i64(&ctx->args, PURGE_BATCH);
        int rc = sql_fixed(ctx, SQL_PURGE_CANDIDATES, "b", NULL);
        if (rc)
            return rc;
        tokens_read(a->batch, &ctx->res, 0);
        size_t n = a->batch->n;
        if (n == 0)
            return RSV_OK;
        args_reset(&ctx->args);
        uint32_t bucket = args_tokens(&ctx->args, a->batch, 0);
        arg_u64(&ctx->args, a->shop);
        purge_args(ctx);
        uint64_t deleted = 0;
        if ((rc = sql_run(ctx, b_purge_delete, bucket, NULL, &deleted)))
            return rc;
        a->purged += (int64_t)deleted;
        if (n < PURGE_BATCH)
            return RSV_OK;
        done += n;
    }
    return RSV_OK;
}

/* The keys with holds due (a plain read: the folds lock and check). */
static int due_keys_body(rsv_ctx *ctx, void *p)
{
    const uint64_t *shop = p;
    args_reset(&ctx->args);
    arg_u64(&ctx->args, *shop);
    arg_i64(&ctx->args, SWEEP_KEYS);
    arg_u64(&ctx->args, *shop);
    arg_i64(&ctx->args, SWEEP_KEYS);
    return sql_fixed(ctx, SQL_DUE_KEYS, "ii", NULL);
}

/* The passes of a sweep; *r gets what each did, also when one fails
 * (what committed before it).  r comes from the caller of
 * rsv_sweep_report as given (NULL, or of any version): checked here, once
 * the call is counted, and zeroed by the public functions when valid. */
static int sweep_run(rsv_ctx *ctx, uint64_t shop_id, int64_t max_holds,
                     rsv_sweep_result *r)
{
    int began = op_begin(ctx, RSV_OP_SWEEP, 1, shop_id, NULL, 0);
    if (began)
        return began;
    if (!r)
        return ctx_fail(ctx, RSV_EINVAL, "the result pointer is NULL");
    if (r->version != RSV_SWEEP_RESULT_VERSION)
        return ctx_fail(ctx, RSV_EINVAL,
                        "result->version is %u: set it to "
                        "RSV_SWEEP_RESULT_VERSION (%d)",
                        (unsigned)r->version, RSV_SWEEP_RESULT_VERSION);
    if (max_holds < 0)
        return ctx_fail(ctx, RSV_EINVAL, "max_holds must be >= 0");
    if (max_holds == 0)
        max_holds = 10000;
    if (txn_caller_open(ctx))
        return ctx_fail(ctx, RSV_EINTXN,
                        "rsv_sweep runs its own transactions; the connection "
                        "is inside one");
    int64_t released = 0;
    int rc = RSV_OK;
    for (int round = 0; round < 16 && released < max_holds; round++) {
        if ((rc = txn_run(ctx, TXN_ONE_READ, due_keys_body, &shop_id)))
            break;
        size_t n = ctx->res.rows;
        if (n == 0)
            break;
        uint64_t keys[2 * 2 * SWEEP_KEYS];
        for (size_t i = 0; i < n && i < 2 * SWEEP_KEYS; i++) {
            keys[2 * i] = (uint64_t)RES_I(&ctx->res, i, 0);
            keys[2 * i + 1] = (uint64_t)RES_I(&ctx->res, i, 1);
        }
        int64_t this_round = 0;
        for (size_t i = 0; i < n && released < max_holds; i++) {
            struct fold_arg a = {shop_id, {keys[2 * i], keys[2 * i + 1]},
                                 max_holds - released, {0, 0, 0}};
            if ((rc = txn_run(ctx, 0, fold_body, &a)))
                break;
            released += a.done.holds;
            this_round += a.done.holds;
            r->units_released += a.done.hold_units;
            r->journal_folded += a.done.settled;
        }
        if (rc || (this_round == 0 && n < SWEEP_KEYS))
            break;
        if (this_round == 0)
            break; /* everything due is locked by others right now */
    }
    r->holds_released = released;
    if (rc == RSV_OK) {
        /* pool_drain_idle counts what each committed drain gave back */
        const uint64_t *drained =
            &ctx->stats.counter[RSV_OP_SWEEP][RSV_STAT_POOL_DRAINED];
        uint64_t before = *drained;
        rc = pool_drain_idle(ctx, shop_id);
        r->pool_rows_drained = (int64_t)(*drained - before);
    }
    if (rc == RSV_OK) {
        struct purge_arg pa = {shop_id, malloc(sizeof(token_list)), 0};
        if (!pa.batch)
            rc = ctx_fail(ctx, RSV_ENOMEM, "out of memory purging");
        else if ((rc = txn_run(ctx, 0, purge_body, &pa)) == RSV_OK)
            r->checkouts_purged = pa.purged;
        free(pa.batch);
    }
    return rc ? rc : ctx_ok(ctx);
}

static const rsv_sweep_result SWEEP_ZERO = {RSV_SWEEP_RESULT_VERSION, 0, 0,
                                            0, 0, 0};

RSV_EXTERN int rsv_sweep(rsv_ctx *ctx, uint64_t shop_id, int64_t max_holds,
                         int64_t *released_out)
{
    if (released_out)
        *released_out = 0;
    if (!ctx)
        return RSV_EINVAL;
    rsv_sweep_result r = SWEEP_ZERO;
    int rc = op_end(ctx, sweep_run(ctx, shop_id, max_holds, &r));
    if (released_out)
        *released_out = r.holds_released;
    return rc;
}

RSV_EXTERN int rsv_sweep_report(rsv_ctx *ctx, uint64_t shop_id,
                                int64_t max_holds, rsv_sweep_result *result)
{
    if (result && result->version == RSV_SWEEP_RESULT_VERSION)
        *result = SWEEP_ZERO;
    if (!ctx)
        return RSV_EINVAL;
    return op_end(ctx, sweep_run(ctx, shop_id, max_holds, result));
}
