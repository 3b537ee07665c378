/*
 * stock.c - the merchant's side of the ledger: setting, adjusting and
 * reading stock on hand.
 *
 * A stock change locks the ledger row (lock order 2), folds settled and
 * expired holds first so it works on current numbers, and when stock drops
 * below what the pool holds, shrinks the pool in the same transaction so
 * "pool + holds <= on hand" holds at every commit.  Units held by active
 * checkouts are never taken away: such a change is refused (RSV_ESTOCK).
 *
 * The shrink takes pool rows with SKIP LOCKED and never waits for one: the
 * fold before it has locked expired holds, and a reserve holding pool rows
 * may be waiting for exactly those (to settle its own old cart), so a
 * waiting shrink could deadlock with it.  Rows an in-flight reserve holds
 * come free within milliseconds: the transaction is retried (backoff, then
 * RSV_EBUSY) rather than refused.
 */
#include <string.h>

#include <mysqld_error.h>

#include "internal.h"

#define STOCK_MAX (INT64_C(1) << 62)

static const char SQL_LEDGER_INSERT[] =
    "INSERT INTO rsv_ledger (shop_id, item_id, "
    "location_id, on_hand, issued, next_unit_id, "
    "updated_at) VALUES (?, ?, ?, 0, 0, 1, NOW(6))";

static const char SQL_SET_ON_HAND[] =
    "UPDATE rsv_ledger SET on_hand = ?, issued = issued - ?, "
    "updated_at = NOW(6) WHERE shop_id = ? AND "
    "item_id = ? AND location_id = ?";

struct stock_arg {
    uint64_t shop, key[2];
    int is_set;
    int64_t value; /* new on_hand, or delta */
    int64_t result;
};

static int stock_body(rsv_ctx *ctx, void *p)
{
    struct stock_arg *a = p;
    ledger_row lv;
    size_t found = 0;
    int rc = ledger_lock(ctx, a->shop, a->key, 1, LEDGER_WAIT, &lv, &found);
    if (rc)
        return rc;
    if (!found) {
        if (!a->is_set)
            return ledger_no_row(ctx, a->shop, a->key[0], a->key[1]);
        args_reset(&ctx->args);
        arg_u64(&ctx->args, a->shop);
        arg_u64(&ctx->args, a->key[0]);
        arg_u64(&ctx->args, a->key[1]);
        rc = sql_fixed(ctx, SQL_LEDGER_INSERT, NULL, NULL);
        if (rc)
            /* created concurrently: retry and lock it */
            return ctx->db_errno == ER_DUP_ENTRY ? RSV__RETRY : rc;
        memset(&lv, 0, sizeof lv);
        lv.item = a->key[0];
        lv.loc = a->key[1];
        lv.next_id = 1;
    } else if ((rc = ledger_fold(ctx, a->shop, &lv, INT64_MAX, NULL))) {
        return rc;
    }
    /* on_hand is 0..2^62 and the delta -2^62..2^62, so the sum can
     * reach 2^63: refuse before adding. */
    if (!a->is_set && a->value > STOCK_MAX - lv.on_hand)
        return ctx_fail(ctx, RSV_EQUANTITY,
                        "stock on hand would be above 2^62 (%lld + %lld)",
                        (long long)lv.on_hand, (long long)a->value);
    int64_t target = a->is_set ? a->value : lv.on_hand + a->value;
    if (target < 0 || target > STOCK_MAX)
        return ctx_fail(ctx, target < 0 ? RSV_ESTOCK : RSV_EQUANTITY,
                        "stock on hand would be %lld (allowed 0..2^62)",
                        (long long)target);
    int64_t shrunk = 0;
    if (target < lv.issued) {
        if ((rc = ledger_pool_shrink(ctx, a->shop, &lv,
                                     lv.issued - target, &shrunk)))
            return rc;
        int64_t pooled = 0;
        if (lv.issued - shrunk > target &&
            (rc = ledger_pool_count(ctx, a->shop, &lv, &pooled)))
            return rc;
        /* What is left in the pool (our deletes are already invisible to
         * us) is locked by in-flight reserves, which commit or roll back
         * in milliseconds: if those rows could cover the rest, try again
         * rather than call the units held. */
        if (lv.issued - shrunk > target && pooled >= lv.issued - shrunk - target)
            return ctx_fail(ctx, RSV__RETRY,
                            "pool rows of shop %llu item %llu location %llu "
                            "are taken by checkouts in flight",
                            (unsigned long long)a->shop,
                            (unsigned long long)lv.item,
                            (unsigned long long)lv.loc);
        if (lv.issued - shrunk > target)
            return ctx_fail(ctx, RSV_ESTOCK,
                            "cannot set stock on hand to %lld: %lld units "
                            "are held by active checkouts (claim, release "
                            "or let them expire first)", (long long)target,
                            (long long)(lv.issued - shrunk));
    }
    args_reset(&ctx->args);
    arg_i64(&ctx->args, target);
    arg_i64(&ctx->args, shrunk);
    arg_u64(&ctx->args, a->shop);
    arg_u64(&ctx->args, lv.item);
    arg_u64(&ctx->args, lv.loc);
    if ((rc = sql_fixed(ctx, SQL_SET_ON_HAND, NULL, NULL)))
        return rc;
    a->result = target;
    return RSV_OK;
}

static int stock_change(rsv_ctx *ctx, uint64_t shop, uint64_t item,
                        uint64_t loc, int is_set, int64_t value,
                        int64_t *out)
{
    if (out)
        *out = 0;
    if (!ctx)
        return RSV_EINVAL;
    int began = op_begin(ctx, RSV_OP_STOCK, 1, shop, NULL, 0);
    if (began)
        return began;
    if (is_set && (value < 0 || value > STOCK_MAX))
        return ctx_fail(ctx, RSV_EQUANTITY,
                        "stock on hand must be 0..2^62, not %lld",
                        (long long)value);
    if (!is_set && (value < -STOCK_MAX || value > STOCK_MAX))
        return ctx_fail(ctx, RSV_EQUANTITY, "delta out of range");
    struct stock_arg a = {shop, {item, loc}, is_set, value, 0};
    int rc = txn_run(ctx, 0, stock_body, &a);
    if (rc)
        return rc;
    if (out)
        *out = a.result;
    return ctx_ok(ctx);
}

RSV_EXTERN int rsv_stock_set(rsv_ctx *ctx, uint64_t shop_id, uint64_t item_id,
                             uint64_t location_id, int64_t on_hand)
{
    return op_end(ctx, stock_change(ctx, shop_id, item_id, location_id, 1,
                                    on_hand, NULL));
}

RSV_EXTERN int rsv_stock_adjust(rsv_ctx *ctx, uint64_t shop_id,
                                uint64_t item_id, uint64_t location_id,
                                int64_t delta, int64_t *on_hand_out)
{
    return op_end(ctx, stock_change(ctx, shop_id, item_id, location_id, 0,
                                    delta, on_hand_out));
}

static const char SQL_STOCK_GET[] =
    "SELECT l.on_hand - COALESCE((SELECT SUM(x.quantity) FROM "
    "rsv_journal x" BY_KEY " WHERE x.shop_id = l.shop_id AND "
    "x.item_id = l.item_id AND x.location_id = "
    "l.location_id AND x.kind = " SQLV(ST_CLAIMED) "), 0), COALESCE((SELECT "
    "SUM(h.quantity) FROM rsv_holds h" HOLDS_BY_KEY " WHERE "
    "h.shop_id = l.shop_id AND h.item_id = l.item_id "
    "AND h.location_id = l.location_id AND h.expires_at > "
    "NOW(6)), 0), COALESCE((SELECT SUM(u.units) FROM rsv_pool u" BY_KEY
    " WHERE u.shop_id = l.shop_id AND u.item_id = "
    "l.item_id AND u.location_id = l.location_id), 0) "
    "FROM "
    "rsv_ledger l WHERE l.shop_id = ? AND l.item_id = ? "
    "AND l.location_id = ?";

struct stock_read {
    uint64_t shop, item, loc;
    int64_t on_hand, held, pooled;
};

/* One statement: one consistent snapshot, no locks. */
static int stock_get_body(rsv_ctx *ctx, void *p)
{
    struct stock_read *a = p;
    args_reset(&ctx->args);
    arg_u64(&ctx->args, a->shop);
    arg_u64(&ctx->args, a->item);
    arg_u64(&ctx->args, a->loc);
    int rc = sql_fixed(ctx, SQL_STOCK_GET, "iii", NULL);
    if (rc)
        return rc;
    if (ctx->res.rows == 0)
        return ledger_no_row(ctx, a->shop, a->item, a->loc);
    a->on_hand = RES_I(&ctx->res, 0, 0);
    a->held = RES_I(&ctx->res, 0, 1);
    a->pooled = RES_I(&ctx->res, 0, 2);
    return RSV_OK;
}

static int stock_get_run(rsv_ctx *ctx, uint64_t shop_id, uint64_t item_id,
                         uint64_t location_id, int64_t *on_hand_out,
                         int64_t *held_out, int64_t *pooled_out,
                         int64_t *available_out)
{
    if (!ctx)
        return RSV_EINVAL;
    int began = op_begin(ctx, RSV_OP_STOCK, 0, shop_id, NULL, 0);
    if (began)
        return began;
    struct stock_read a = {shop_id, item_id, location_id, 0, 0, 0};
    int rc = txn_run(ctx, TXN_ONE_READ | TXN_NO_DIRTY | TXN_MAY_JOIN,
                     stock_get_body, &a);
    if (rc)
        return rc;
    if (on_hand_out)
        *on_hand_out = a.on_hand;
    if (held_out)
        *held_out = a.held;
    if (pooled_out)
        *pooled_out = a.pooled;
    if (available_out)
        *available_out = a.on_hand - a.held;
    return ctx_ok(ctx);
}

RSV_EXTERN int rsv_stock_get(rsv_ctx *ctx, uint64_t shop_id, uint64_t item_id,
                             uint64_t location_id, int64_t *on_hand_out,
                             int64_t *held_out, int64_t *pooled_out,
                             int64_t *available_out)
{
    return op_end(ctx, stock_get_run(ctx, shop_id, item_id, location_id,
                                     on_hand_out, held_out, pooled_out,
                                     available_out));
}
