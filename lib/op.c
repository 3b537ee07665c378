/*
 * op.c - the frame of every public operation, outside its transactions.
 *
 * Owns: op_begin/op_end (the tag, the call's clock and time budget, the
 * kill switch, counting the outcome, the completion callback) and the two
 * public switches they read, rsv_set_callback and rsv_set_enabled.  The
 * counters themselves live in stats.c, the transactions in txn.c.
 */
#include "internal.h"

int op_begin(rsv_ctx *ctx, int op, int writes, uint64_t shop,
             const void *token, size_t token_len)
{
    if (nb_busy(ctx))
        return RSV__REFUSED; /* the worker owns ctx: write nothing */
    ctx->op = op;
    ctx->ack_checked = 0;
    ctx->commit_anyway = 0;
    ctx->db_errno = 0;
    ctx->op_open = 1;
    ctx->op_start_us = now_us();
    ctx->deadline_us = ctx->opts.call_timeout_ms > 0
                           ? ctx->op_start_us +
                                 (uint64_t)ctx->opts.call_timeout_ms * 1000u
                           : 0;
    ctx->op_shop = shop;
    ctx->op_token = token;
    /* the callback must never be handed a length to read behind NULL */
    ctx->op_token_len = token ? token_len : 0;
    if (writes && ctx->disabled)
        return ctx_fail(ctx, RSV_EDISABLED,
                        "libreserve is switched off on this context "
                        "(rsv_set_enabled): nothing was sent to the server");
    return ctx_ok(ctx);
}

int op_end(rsv_ctx *ctx, int rc)
{
    if (rc == RSV__REFUSED)
        return RSV_EINVAL;
    if (!ctx || !ctx->op_open)
        return rc;
    ctx->op_open = 0;
    uint64_t us = now_us() - ctx->op_start_us;
    stats_call(ctx, ctx->op, rc, us);
    if (ctx->callback && !ctx->in_callback) {
        /* The callback may call the library on this context; the caller
         * must still see this call's code and message afterwards. */
        ctx_error said;
        ctx_error_save(ctx, &said);
        ctx->in_callback = 1;
        ctx->callback(ctx->callback_user, (uint32_t)ctx->op, rc,
                      ctx->op_shop, ctx->op_token, ctx->op_token_len, us);
        ctx->in_callback = 0;
        ctx_error_restore(ctx, &said);
    }
    return rc;
}

int op_end_entry(rsv_ctx *ctx, int op, int rc, uint64_t shop,
                 const void *token, size_t token_len, uint64_t start_us)
{
    ctx->op = op;
    ctx->op_open = 1;
    ctx->op_start_us = start_us;
    ctx->op_shop = shop;
    ctx->op_token = token;
    ctx->op_token_len = token ? token_len : 0;
    return op_end(ctx, rc);
}

RSV_EXTERN int rsv_set_callback(rsv_ctx *ctx, rsv_op_fn fn, void *user)
{
    if (!ctx || nb_busy(ctx))
        return RSV_EINVAL;
    ctx->callback = fn;
    ctx->callback_user = fn ? user : NULL;
    return RSV_OK;
}

RSV_EXTERN int rsv_set_enabled(rsv_ctx *ctx, int enabled)
{
    if (!ctx || nb_busy(ctx))
        return RSV_EINVAL;
    ctx->disabled = !enabled;
    return RSV_OK;
}
