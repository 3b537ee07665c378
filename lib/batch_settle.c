/*
 * batch_settle.c - the one CALL of rsv_claim_batch and rsv_release_batch:
 * the sent entries as the JSON argument of rsv_settle_batch_v1
 * (sql/schema.sql) and its answer read back into them; batch.c turns each
 * answer into the code rsv_claim or rsv_release gives for it
 * (settle_answer_code, checkout.c).
 */
#include "batch.h"

#define SETTLE_COLS "iiiiii" /* idx, found, status, hold_count, holds, done */

int b_call_settle_batch(strbuf *s, uint32_t shape)
{
    (void)shape;
    buf_puts(s, "CALL " RSV_PROC_SETTLE_BATCH "(?, ?)");
    return 0;
}

static int settle_batch_body(rsv_ctx *ctx, void *p)
{
    rbatch *b = p;
    b->json.len = 0;
    buf_puts(&b->json, "[");
    for (size_t i = 0; i < b->nsend; i++) {
        bentry *e = b->send[i];
        e->answered = 0;
        buf_printf_u(&b->json, i ? ",[" : "[", e->idx, ",\"");
        buf_printf_u(&b->json, "", e->shop, "\",");
        batch_json_token(&b->json, e->token, e->len);
        buf_puts(&b->json, "]");
    }
    buf_puts(&b->json, "]");
    if (b->json.oom)
        return ctx_fail(ctx, RSV_ENOMEM, "out of memory");
    int rc = sql_res_room(ctx, SETTLE_COLS, b->nsend);
    if (rc)
        return rc;
    args_reset(&ctx->args);
    arg_bin(&ctx->args, b->json.p, b->json.len);
    arg_i64(&ctx->args, b->kind);
    rc = sql_run(ctx, b_call_settle_batch, 0, SETTLE_COLS, NULL);
    if (rc) {
        if (sql_proc_unusable(ctx->db_errno)) {
            ctx->has_settle_batch_proc = 0;
            return BATCH_ONE_BY_ONE;
        }
        return rc;
    }
    return batch_answer(ctx, b, sizeof SETTLE_COLS - 1,
                        RSV_PROC_SETTLE_BATCH);
}

int batch_settle_call(rsv_ctx *ctx, rbatch *b)
{
    return txn_run(ctx, TXN_SELF_COMMIT | TXN_READS_AFTER_COMMIT,
                   settle_batch_body, b);
}
