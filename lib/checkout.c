/*
 * checkout.c - the life of a checkout after its reserve: claim, release,
 * extend and status.
 *
 * A checkout's row in rsv_checkouts is the first lock every
 * operation on that checkout takes (lock order in internal.h), so two
 * operations on one checkout serialize, and its status makes claims
 * idempotent: a claimed checkout stays claimed, and a repeated claim is
 * answered from the row without touching stock.  Claim and release never
 * touch the ledger row: they move the holds into the settlement journal,
 * which the next refill folds into the ledger.  That keeps claims off the
 * one hot row every checkout of an item would otherwise queue on.
 *
 * A claim or release in a transaction of the library's own is one CALL of
 * the schema's RSV_PROC_SETTLE when it is there, which runs the same
 * statements on the server and commits; in the caller's transaction, or
 * without it, the statements below.
 */
#include <string.h>

#include "internal.h"

/* FOR UPDATE matters: under READ COMMITTED the SELECT of an INSERT ...
 * SELECT is otherwise a consistent (non-locking) read, which still sees a
 * hold the reaper has locked and deleted but not yet committed.  The hold
 * would then be given back twice (reaped, and settled as released), and
 * the ledger's `issued` would fall below what is really out: an oversell.
 * The locking read waits for the reaper and then skips what it deleted. */
static const char SQL_SETTLE_INSERT[] =
    "INSERT INTO rsv_journal (shop_id, "
    "item_id, location_id, checkout_token, "
    "generation, kind, quantity, settled_at) SELECT shop_id, "
    "item_id, location_id, checkout_token, ?, ?, "
    "quantity, NOW(6) FROM rsv_holds WHERE shop_id = ? "
    "AND checkout_token = ? FOR UPDATE";

static const char SQL_HOLDS_DELETE[] =
    "DELETE FROM rsv_holds WHERE shop_id = ? AND "
    "checkout_token = ?";

int holds_settle(rsv_ctx *ctx, uint64_t shop, const void *token, size_t len,
                 uint32_t generation, int kind)
{
    args_reset(&ctx->args);
    arg_i64(&ctx->args, generation);
    arg_i64(&ctx->args, kind);
    arg_u64(&ctx->args, shop);
    arg_bin(&ctx->args, token, len);
    uint64_t n = 0;
    int rc = sql_fixed(ctx, SQL_SETTLE_INSERT, NULL, &n);
    if (rc || n == 0)
        return rc;
    args_reset(&ctx->args);
    arg_u64(&ctx->args, shop);
    arg_bin(&ctx->args, token, len);
    return sql_fixed(ctx, SQL_HOLDS_DELETE, NULL, NULL);
}

/* Reads the checkout row first, then its holds: lock order 1 then 4. */
static const char SQL_LOCK_CHECKOUT[] =
    "SELECT c.status, CAST(c.generation AS SIGNED), c.hold_count, "
    "h.quantity FROM rsv_checkouts c LEFT JOIN "
    "rsv_holds h ON h.shop_id = c.shop_id AND "
    "h.checkout_token = c.checkout_token WHERE c.shop_id = ? AND "
    "c.checkout_token = ? FOR UPDATE";

static const char SQL_SET_STATUS[] =
    "UPDATE rsv_checkouts SET status = ?, "
    "updated_at = NOW(6) WHERE shop_id = ? AND checkout_token = ?";

static int b_extend_holds(strbuf *s, uint32_t shape)
{
    buf_puts(s, shape ? "UPDATE rsv_checkouts SET "
                      : "UPDATE rsv_holds SET ");
    buf_puts(s, "expires_at = NOW(6) + INTERVAL ? MICROSECOND WHERE "
                "shop_id = ? AND checkout_token = ?");
    return 0;
}

struct co_arg {
    uint64_t shop;
    const void *token;
    size_t len;
    int64_t ttl_ms;
};

typedef struct co_state {
    int found;
    int status;
    uint32_t generation;
    int64_t hold_count, holds, units;
} co_state;

static int lock_checkout(rsv_ctx *ctx, const struct co_arg *a, co_state *st)
{
    args_reset(&ctx->args);
    arg_u64(&ctx->args, a->shop);
    arg_bin(&ctx->args, a->token, a->len);
    int rc = sql_fixed(ctx, SQL_LOCK_CHECKOUT, "iiii", NULL);
    if (rc)
        return rc;
    sql_res *r = &ctx->res;
    memset(st, 0, sizeof *st);
    st->found = r->rows > 0;
    if (!st->found)
        return RSV_OK;
    st->status = (int)RES_I(r, 0, 0);
    st->generation = (uint32_t)RES_I(r, 0, 1);
    st->hold_count = RES_I(r, 0, 2);
    for (size_t i = 0; i < r->rows; i++) {
        if (!RES_NULL(r, i, 3)) {
            st->holds++;
            st->units += RES_I(r, i, 3);
        }
    }
    return RSV_OK;
}

static int set_status(rsv_ctx *ctx, const struct co_arg *a, int status)
{
    args_reset(&ctx->args);
    arg_i64(&ctx->args, status);
    arg_u64(&ctx->args, a->shop);
    arg_bin(&ctx->args, a->token, a->len);
    return sql_fixed(ctx, SQL_SET_STATUS, NULL, NULL);
}

static int not_found(rsv_ctx *ctx, const struct co_arg *a)
{
    return ctx_fail(ctx, RSV_ENOTFOUND,
                    "no checkout with this token in shop %llu",
                    (unsigned long long)a->shop);
}

static int expired_rest_code(rsv_ctx *ctx, const co_state *st)
{
    return ctx_fail(ctx, RSV_EEXPIRED,
                    "the hold expired and %lld of its %lld allocations were "
                    "given back to other buyers; nothing was claimed",
                    (long long)(st->hold_count - st->holds),
                    (long long)st->hold_count);
}

/* Some holds of a held checkout were given back by the reaper: the rest
 * cannot be claimed either, so release them now rather than wait for them
 * to expire too.  Committed although the call reports RSV_EEXPIRED. */
static int expire_rest(rsv_ctx *ctx, const struct co_arg *a,
                       const co_state *st)
{
    int rc = holds_settle(ctx, a->shop, a->token, a->len, st->generation,
                          ST_RELEASED);
    if (rc == RSV_OK)
        rc = set_status(ctx, a, ST_EXPIRED);
    if (rc)
        return rc;
    ctx->commit_anyway = 1;
    return expired_rest_code(ctx, st);
}

static int settled_code(rsv_ctx *ctx, int status)
{
    switch (status) {
    case ST_CLAIMED:
        return ctx_fail(ctx, RSV_ECLAIMED, "the checkout was already claimed");
    case ST_RELEASED:
        return ctx_fail(ctx, RSV_ERELEASED, "the checkout was released");
    default:
        return ctx_fail(ctx, RSV_EEXPIRED,
                        "the checkout expired and its units were given back");
    }
}

static int claimed_not_released(rsv_ctx *ctx)
{
    return ctx_fail(ctx, RSV_ECLAIMED,
                    "the checkout was claimed; it cannot be released");
}

/* Lock the checkout row (lock order 1) and check that it is held with
 * all its holds, as a claim and an extension need; otherwise the code to
 * return: not found, already settled, or expired now (the reaper took some
 * of its holds: the rest are given back, see expire_rest). */
static int lock_whole_checkout(rsv_ctx *ctx, const struct co_arg *a,
                               co_state *st)
{
    int rc = lock_checkout(ctx, a, st);
    if (rc)
        return rc;
    if (!st->found)
        return not_found(ctx, a);
    if (st->status != ST_HELD)
        return settled_code(ctx, st->status);
    if (st->holds < st->hold_count)
        return expire_rest(ctx, a, st);
    return RSV_OK;
}

static int claim_body(rsv_ctx *ctx, void *p)
{
    struct co_arg *a = p;
    co_state st;
    int rc = lock_whole_checkout(ctx, a, &st);
    if (rc)
        return rc;
    rc = holds_settle(ctx, a->shop, a->token, a->len, st.generation,
                      ST_CLAIMED);
    return rc ? rc : set_status(ctx, a, ST_CLAIMED);
}

static int release_body(rsv_ctx *ctx, void *p)
{
    struct co_arg *a = p;
    co_state st;
    int rc = lock_checkout(ctx, a, &st);
    if (rc)
        return rc;
    if (!st.found)
        return not_found(ctx, a);
    if (st.status == ST_CLAIMED)
        return claimed_not_released(ctx);
    if (st.status != ST_HELD)
        return RSV_OK; /* already released or expired: idempotent */
    rc = holds_settle(ctx, a->shop, a->token, a->len, st.generation,
                      ST_RELEASED);
    return rc ? rc : set_status(ctx, a, ST_RELEASED);
}

static int extend_body(rsv_ctx *ctx, void *p)
{
    struct co_arg *a = p;
    co_state st;
    int rc = lock_whole_checkout(ctx, a, &st);
    if (rc)
        return rc;
    for (uint32_t table = 0; table < 2; table++) {
        args_reset(&ctx->args);
        arg_i64(&ctx->args, a->ttl_ms * 1000);
        arg_u64(&ctx->args, a->shop);
        arg_bin(&ctx->args, a->token, a->len);
        if ((rc = sql_run(ctx, b_extend_holds, table, NULL, NULL)))
            return rc;
    }
    return RSV_OK;
}

/* ---- claim and release in one round trip (RSV_PROC_SETTLE) ---- */

/* The procedure runs the statements of claim_body or release_body (kind)
 * on the server and commits; its answer says what it found and did, and
 * the return code and message are the ones those bodies give. */
static int settle_call(rsv_ctx *ctx, struct co_arg *a, int kind)
{
    args_reset(&ctx->args);
    arg_u64(&ctx->args, a->shop);
    arg_bin(&ctx->args, a->token, a->len);
    arg_i64(&ctx->args, kind);
    int rc = sql_run(ctx, b_call_settle, 0, "iiiii", NULL);
    if (rc) {
        return proc_unusable(ctx, PROC_SETTLE) ? RSV__NO_PROC : rc;
    }
    sql_res *r = &ctx->res;
    if (r->rows != 1)
        return ctx_fail(ctx, RSV_EDB, "internal: %s answered %zu rows",
                        RSV_PROC_SETTLE, r->rows);
    return settle_answer_code(ctx, kind, a->shop, RES_I(r, 0, 0) != 0,
                              (int)RES_I(r, 0, 1), RES_I(r, 0, 2),
                              RES_I(r, 0, 3), RES_I(r, 0, 4));
}

int settle_answer_code(rsv_ctx *ctx, int kind, uint64_t shop, int found,
                       int status, int64_t hold_count, int64_t holds,
                       int64_t done)
{
    co_state st;
    memset(&st, 0, sizeof st);
    st.found = found;
    st.status = status;
    st.hold_count = hold_count;
    st.holds = holds;
    struct co_arg a = {shop, NULL, 0, 0};
    if (!st.found)
        return not_found(ctx, &a);
    if (done == 2) /* (a claim; committed) */
        return expired_rest_code(ctx, &st);
    if (done == 1)
        return ctx_ok(ctx);
    if (kind == ST_RELEASED) /* (already released or expired: done) */
        return st.status == ST_CLAIMED ? claimed_not_released(ctx)
                                       : ctx_ok(ctx);
    return settled_code(ctx, st.status);
}

static int claim_proc_body(rsv_ctx *ctx, void *p)
{
    return settle_call(ctx, p, ST_CLAIMED);
}

static int release_proc_body(rsv_ctx *ctx, void *p)
{
    return settle_call(ctx, p, ST_RELEASED);
}

/* On a Galera node a checkout committed through another node a moment
 * ago may not be applied here yet: a client that moved to this node (a
 * failover, rsv_reconnect) would be told its checkout does not exist.
 * So before an answer of "no such checkout" stands, this node waits
 * until it has applied what the cluster committed before (the session's
 * wsrep_sync_wait, set for one read and put back: as a SET STATEMENT
 * prefix it did not make the read wait) and looks again; 1 if the
 * checkout is there now.  The value put back is read first and sent as a
 * parameter: a user variable would stay in the application's session.
 * Never inside the caller's transaction (its reads are its own). */
static const char SQL_SYNC_WAIT_GET[] = "SELECT @@session.wsrep_sync_wait";
static const char SQL_SYNC_WAIT_ON[] = "SET SESSION wsrep_sync_wait = 1";
static const char SQL_SYNC_WAIT_BACK[] = "SET SESSION wsrep_sync_wait = ?";
static const char SQL_CHECKOUT_EXISTS[] =
    "SELECT 1 FROM rsv_checkouts WHERE shop_id = ? AND checkout_token = ?";

struct late_arg {
    const struct co_arg *co;
    int found;
};

static int caught_up_body(rsv_ctx *ctx, void *p)
{
    struct late_arg *a = p;
    args_reset(&ctx->args);
    int rc = sql_fixed(ctx, SQL_SYNC_WAIT_GET, "i", NULL);
    if (rc)
        return rc;
    int64_t was = ctx->res.rows ? RES_I(&ctx->res, 0, 0) : 0;
    args_reset(&ctx->args);
    if ((rc = sql_fixed(ctx, SQL_SYNC_WAIT_ON, NULL, NULL)))
        return rc;
    args_reset(&ctx->args);
    arg_u64(&ctx->args, a->co->shop);
    arg_bin(&ctx->args, a->co->token, a->co->len);
    rc = sql_fixed(ctx, SQL_CHECKOUT_EXISTS, "i", NULL);
    a->found = rc == RSV_OK && ctx->res.rows > 0;
    args_reset(&ctx->args);
    arg_i64(&ctx->args, was);
    int back = sql_fixed(ctx, SQL_SYNC_WAIT_BACK, NULL, NULL);
    return rc ? rc : back;
}

static int applied_late(rsv_ctx *ctx, const struct co_arg *a)
{
    if (!ctx->galera || txn_caller_open(ctx))
        return 0;
    struct late_arg la = {a, 0};
    if (txn_run(ctx, TXN_ONE_READ, caught_up_body, &la) == RSV_OK &&
        la.found)
        return 1;
    not_found(ctx, a); /* (the answer, and its message, stand) */
    return 0;
}

/* One claim, release or extension: in one round trip when the procedure
 * is there and the caller has no transaction open (the procedure commits
 * its own; a claim may join the caller's, which the statements do). */
static int checkout_once(rsv_ctx *ctx, int op, struct co_arg *a,
                         txn_body body)
{
    txn_body proc = op == RSV_OP_CLAIM     ? claim_proc_body
                    : op == RSV_OP_RELEASE ? release_proc_body
                                           : NULL;
    if (proc && proc_usable(ctx, PROC_SETTLE) && !txn_caller_open(ctx)) {
        int rc = txn_run(ctx, TXN_SELF_COMMIT, proc, a);
        if (rc != RSV__NO_PROC)
            return rc ? rc : ctx_ok(ctx);
    }
    int rc = txn_run(ctx, TXN_MAY_JOIN, body, a);
    return rc ? rc : ctx_ok(ctx);
}

static int checkout_op(rsv_ctx *ctx, int op, uint64_t shop, const void *token,
                       size_t len, int64_t ttl_ms, txn_body body)
{
    if (!ctx)
        return RSV_EINVAL;
    int began = op_begin(ctx, op, 1, shop, token, len);
    if (began)
        return began;
    call_args args = {.kind = op == RSV_OP_CLAIM     ? CALL_CLAIM
                              : op == RSV_OP_RELEASE ? CALL_RELEASE
                                                     : CALL_EXTEND,
                      .token = token, .token_len = len, .ttl_ms = ttl_ms};
    int rc = check_call(ctx, &args);
    if (rc)
        return rc;
    struct co_arg a = {shop, token, len, ttl_or_default(ctx, ttl_ms)};
    rc = checkout_once(ctx, op, &a, body);
    if (rc == RSV_ENOTFOUND && applied_late(ctx, &a))
        rc = checkout_once(ctx, op, &a, body);
    return rc;
}

RSV_EXTERN int rsv_claim(rsv_ctx *ctx, uint64_t shop_id, const void *token,
                         size_t token_len)
{
    return op_end(ctx, checkout_op(ctx, RSV_OP_CLAIM, shop_id, token, token_len,
                                   0, claim_body));
}

RSV_EXTERN int rsv_release(rsv_ctx *ctx, uint64_t shop_id, const void *token,
                           size_t token_len)
{
    return op_end(ctx, checkout_op(ctx, RSV_OP_RELEASE, shop_id, token,
                                   token_len, 0, release_body));
}

RSV_EXTERN int rsv_extend(rsv_ctx *ctx, uint64_t shop_id, const void *token,
                          size_t token_len, int64_t ttl_ms)
{
    return op_end(ctx, checkout_op(ctx, RSV_OP_EXTEND, shop_id, token,
                                   token_len, ttl_ms, extend_body));
}

static const char SQL_STATUS[] =
    "SELECT c.status, c.hold_count, "
    "TIMESTAMPDIFF(MICROSECOND, NOW(6), c.expires_at), "
    "COUNT(h.quantity), CAST(COALESCE(SUM(h.quantity), 0) AS "
    "SIGNED) FROM rsv_checkouts c LEFT JOIN "
    "rsv_holds h ON h.shop_id = c.shop_id AND "
    "h.checkout_token = c.checkout_token WHERE c.shop_id = ? AND "
    "c.checkout_token = ? GROUP BY c.status, c.hold_count, "
    "c.expires_at";

struct status_arg {
    struct co_arg co;
    int32_t status;
    int64_t units, expires_us;
};

/* One statement: a consistent read, no locks. */
static int status_body(rsv_ctx *ctx, void *p)
{
    struct status_arg *a = p;
    args_reset(&ctx->args);
    arg_u64(&ctx->args, a->co.shop);
    arg_bin(&ctx->args, a->co.token, a->co.len);
    int rc = sql_fixed(ctx, SQL_STATUS, "iiiii", NULL);
    if (rc)
        return rc;
    sql_res *r = &ctx->res;
    if (r->rows == 0)
        return not_found(ctx, &a->co);
    a->status = (int32_t)RES_I(r, 0, 0);
    /* A settled checkout has no deadline left: its expires_at is only
     * the deadline it had while held. */
    a->expires_us = a->status == ST_HELD ? RES_I(r, 0, 2) : 0;
    if (a->status == ST_HELD &&
        (a->expires_us <= 0 || RES_I(r, 0, 3) < RES_I(r, 0, 1)))
        a->status = ST_EXPIRED;
    a->units = RES_I(r, 0, 4);
    return RSV_OK;
}

static int status_run(rsv_ctx *ctx, uint64_t shop_id, const void *token,
                      size_t token_len, int32_t *status_out,
                      int64_t *units_out, int64_t *expires_in_ms_out)
{
    if (!ctx)
        return RSV_EINVAL;
    int began = op_begin(ctx, RSV_OP_STATUS, 0, shop_id, token, token_len);
    if (began)
        return began;
    call_args args = {.kind = CALL_STATUS, .token = token,
                      .token_len = token_len, .out = status_out};
    int rc = check_call(ctx, &args);
    if (rc)
        return rc;
    struct status_arg a = {{shop_id, token, token_len, 0}, 0, 0, 0};
    rc = txn_run(ctx, TXN_ONE_READ | TXN_NO_DIRTY | TXN_MAY_JOIN,
                 status_body, &a);
    if (rc == RSV_ENOTFOUND && applied_late(ctx, &a.co))
        rc = txn_run(ctx, TXN_ONE_READ | TXN_NO_DIRTY | TXN_MAY_JOIN,
                     status_body, &a);
    if (rc)
        return rc;
    *status_out = a.status;
    if (units_out)
        *units_out = a.units;
    if (expires_in_ms_out)
        *expires_in_ms_out = a.expires_us / 1000;
    return ctx_ok(ctx);
}

RSV_EXTERN int rsv_checkout_status(rsv_ctx *ctx, uint64_t shop_id,
                                   const void *token, size_t token_len,
                                   int32_t *status_out, int64_t *units_out,
                                   int64_t *expires_in_ms_out)
{
    return op_end(ctx, status_run(ctx, shop_id, token, token_len, status_out,
                                  units_out, expires_in_ms_out));
}
