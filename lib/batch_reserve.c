/*
 * batch_reserve.c - the one CALL of rsv_reserve_batch: the sent entries
 * as the JSON argument of rsv_reserve_batch_v1 (sql/schema.sql), each
 * with what the one-key procedure's CALL would pass for it (its pool
 * cursor, its pending top-up), and the answer read back into the entries.
 * What a committed entry then leaves in its job and the context is the
 * one-key procedure's own bookkeeping (reserve_proc_one_done).
 */
#include "batch.h"

#define RESERVE_COLS "iiiiiiiii" /* idx, status, the seven values */

int b_call_reserve_batch(strbuf *s, uint32_t shape)
{
    (void)shape;
    buf_puts(s, "CALL " RSV_PROC_RESERVE_BATCH "(?, ?)");
    return 0;
}

/* [idx, "shop", "token", "item", "location", units, "start", fill]: the
 * 64-bit values as strings (see the procedure). */
static void json_entry(rsv_ctx *ctx, strbuf *s, bentry *e, int first)
{
    rjob *j = &e->job;
    job_reset_pass(j);
    job_choose_starts(ctx, j);
    const rkey *k = &j->keys[0];
    buf_printf_u(s, first ? "[" : ",[", e->idx, ",\"");
    buf_printf_u(s, "", e->shop, "\",");
    batch_json_token(s, e->token, e->len);
    buf_printf_u(s, ",\"", k->item, "\",\"");
    buf_printf_u(s, "", k->loc, "\",");
    buf_printf_u(s, "", (uint64_t)k->plan.want, ",\"");
    buf_printf_u(s, "", k->plan.start, "\",");
    buf_printf_u(s, "", (uint64_t)reserve_proc_fill(ctx, j), "]");
}

/* One attempt (TXN_SELF_COMMIT: the procedure begins and commits).  The
 * argument is written again on every attempt: the cursors move. */
static int reserve_batch_body(rsv_ctx *ctx, void *p)
{
    rbatch *b = p;
    b->json.len = 0;
    buf_puts(&b->json, "[");
    for (size_t i = 0; i < b->nsend; i++) {
        b->send[i]->answered = 0;
        json_entry(ctx, &b->json, b->send[i], i == 0);
    }
    buf_puts(&b->json, "]");
    if (b->json.oom)
        return ctx_fail(ctx, RSV_ENOMEM, "out of memory");
    int rc = sql_res_room(ctx, RESERVE_COLS, b->nsend);
    if (rc)
        return rc;
    args_reset(&ctx->args);
    arg_bin(&ctx->args, b->json.p, b->json.len);
    arg_i64(&ctx->args, b->ttl_ms * 1000);
    rc = sql_run(ctx, b_call_reserve_batch, 0, RESERVE_COLS, NULL);
    if (rc) {
        if (sql_proc_unusable(ctx->db_errno)) {
            ctx->has_batch_proc = 0;
            return BATCH_ONE_BY_ONE;
        }
        return rc;
    }
    return batch_answer(ctx, b, sizeof RESERVE_COLS - 1,
                        RSV_PROC_RESERVE_BATCH);
}

int batch_reserve_call(rsv_ctx *ctx, rbatch *b)
{
    return txn_run(ctx, TXN_SELF_COMMIT | TXN_READS_AFTER_COMMIT,
                   reserve_batch_body, b);
}
