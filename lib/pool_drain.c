/*
 * pool_drain.c - giving a pool's rows back to its ledger row: on request
 * (rsv_pool_drain), and for pools left idle (rsv_sweep's last pass).
 *
 * A pool is made for contention: the first buyers who find an item's
 * ledger row held by another reserve take from it.  Once the sale is over
 * its rows only sit there, up to pool_cap rows per key, with their units
 * still counted as issued.  Draining deletes them and lowers issued by as
 * many, in one transaction under the ledger row lock (lock order 2, then
 * pool rows 3), so "issued = pool rows + holds + unfolded settlements"
 * holds at every commit.  Pool rows are taken with SKIP LOCKED: a row an
 * in-flight reserve is taking is that reserve's (it deletes it, or rolls
 * back and it stays, still counted in issued).  A drained item that gets
 * contended again gets a new pool from the next refill; its ids continue
 * from next_unit_id, so the contexts' pool cursors stay valid.
 */
#include <stdint.h>

#include "internal.h"

#define IDLE_KEYS 64
#define IDLE_ROUNDS 16

struct drain_arg {
    uint64_t shop, key[2];
    int skip;
    int64_t units;
};

static int drain_body(rsv_ctx *ctx, void *p)
{
    struct drain_arg *a = p;
    ledger_row lv;
    int held;
    a->units = 0;
    int rc = ledger_lock_key(ctx, a->shop, a->key, a->skip, &lv, &held);
    if (rc || !held)
        /* not held: a refill, reserve or stock change holds the row right
         * now, so the key is not idle after all */
        return rc;
    int64_t n = 0;
    if ((rc = ledger_pool_shrink(ctx, a->shop, &lv, INT64_MAX, &n)))
        return rc;
    if (n > 0 && (rc = ledger_update(ctx, a->shop, &lv, 0, n, 0, 0)))
        return rc;
    a->units = n;
    return RSV_OK;
}

static int drain_run(rsv_ctx *ctx, uint64_t shop_id, uint64_t item_id,
                     uint64_t location_id, int64_t *units_out)
{
    int began = op_begin(ctx, RSV_OP_REPLENISH, 1, shop_id, NULL, 0);
    if (began)
        return began;
    struct drain_arg a = {shop_id, {item_id, location_id}, 0, 0};
    int rc = txn_run(ctx, 0, drain_body, &a);
    if (rc)
        return rc;
    stats_add(ctx, RSV_STAT_POOL_DRAINED, (uint64_t)a.units);
    *units_out = a.units;
    return ctx_ok(ctx);
}

RSV_EXTERN int rsv_pool_drain(rsv_ctx *ctx, uint64_t shop_id, uint64_t item_id,
                              uint64_t location_id, int64_t *units_out)
{
    int64_t units = 0;
    if (units_out)
        *units_out = 0;
    if (!ctx)
        return RSV_EINVAL;
    int rc = op_end(ctx, drain_run(ctx, shop_id, item_id, location_id,
                                   &units));
    if (units_out && rc == RSV_OK)
        *units_out = units;
    return rc;
}

/* Pooled keys come from the pool's primary key, one index dive per key:
 * DISTINCT over its leading columns, shop_id included, is a loose index
 * scan ("Using index for group-by"; without shop_id in the list MariaDB
 * 10.11 reads every pool row), so the scan costs the number of pooled
 * keys, not pool rows or catalogue size.  Keys from a given one on, in
 * order (the item bound also inside, where the loose scan can use it), so
 * that a key that could not be drained (its ledger row held) does not
 * come back in the next round. */
static const char SQL_IDLE_POOLS[] =
    "SELECT CAST(l.item_id AS SIGNED), "
    "CAST(l.location_id AS SIGNED) FROM (SELECT DISTINCT "
    "shop_id, item_id, location_id FROM "
    "rsv_pool WHERE shop_id = ? AND item_id "
    ">= ?) u JOIN rsv_ledger l FORCE INDEX (PRIMARY) ON "
    "l.shop_id = ? AND l.item_id = "
    "u.item_id AND l.location_id = "
    "u.location_id WHERE (l.item_id, "
    "l.location_id) >= (?, ?) AND l.updated_at < NOW(6) - "
    "INTERVAL ? SECOND ORDER BY l.item_id, "
    "l.location_id LIMIT ?";

struct idle_scan {
    uint64_t shop, from[2];
};

/* A plain read: each drain locks the ledger row and counts again. */
static int idle_scan_body(rsv_ctx *ctx, void *p)
{
    const struct idle_scan *a = p;
    args_reset(&ctx->args);
    arg_u64(&ctx->args, a->shop);
    arg_u64(&ctx->args, a->from[0]);
    arg_u64(&ctx->args, a->shop);
    arg_u64(&ctx->args, a->from[0]);
    arg_u64(&ctx->args, a->from[1]);
    arg_i64(&ctx->args, ctx->opts.pool_idle_s);
    arg_i64(&ctx->args, IDLE_KEYS);
    return sql_fixed(ctx, SQL_IDLE_POOLS, "ii", NULL);
}

int pool_drain_idle(rsv_ctx *ctx, uint64_t shop)
{
    if (ctx->opts.pool_idle_s == 0)
        return RSV_OK;
    struct idle_scan scan = {shop, {0, 0}};
    uint64_t *from = scan.from;
    for (int round = 0; round < IDLE_ROUNDS; round++) {
        int rc = txn_run(ctx, TXN_ONE_READ, idle_scan_body, &scan);
        if (rc)
            return rc;
        size_t n = ctx->res.rows;
        uint64_t keys[2 * IDLE_KEYS];
        for (size_t i = 0; i < n && i < IDLE_KEYS; i++) {
            keys[2 * i] = (uint64_t)RES_I(&ctx->res, i, 0);
            keys[2 * i + 1] = (uint64_t)RES_I(&ctx->res, i, 1);
        }
        for (size_t i = 0; i < n && i < IDLE_KEYS; i++) {
            struct drain_arg a = {shop, {keys[2 * i], keys[2 * i + 1]}, 1, 0};
            if ((rc = txn_run(ctx, 0, drain_body, &a)))
                return rc;
            stats_add(ctx, RSV_STAT_POOL_DRAINED, (uint64_t)a.units);
        }
        if (n < IDLE_KEYS)
            break;
        /* the next round starts just after the last key */
        from[0] = keys[2 * (n - 1)];
        from[1] = keys[2 * (n - 1) + 1] + 1;
        if (from[1] == 0 && ++from[0] == 0)
            break; /* that was the last key there can be */
    }
    return RSV_OK;
}
