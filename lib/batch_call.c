/*
 * batch_call.c - the one CALL of a batch: the sent entries as the JSON
 * argument of RSV_PROC_RESERVE_BATCH, RSV_PROC_CART_BATCH or
 * RSV_PROC_SETTLE_BATCH (sql/schema.sql), and the answer read back into
 * the entries.
 *
 * A reserve entry carries what the one-key procedure's CALL would pass
 * for it (its pool cursor, its pending top-up); what a committed entry
 * then leaves in its job and the context is the one-key procedure's own
 * bookkeeping (reserve_proc_one_done; a cart's, reserve_proc_cart_*).  A
 * settle entry's answer becomes the code rsv_claim or rsv_release gives
 * for it in batch.c (settle_answer_code, checkout.c).
 */
#include <string.h>

#include "batch_call.h"

/* A checkout token as a JSON string of hex digits (the procedures UNHEX
 * it: tokens are bytes, JSON text is not). */
static void batch_json_token(strbuf *s, const void *token, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    char out[2 * RSV_TOKEN_MAX + 2];
    const unsigned char *t = token;
    size_t o = 0;
    out[o++] = '"';
    for (size_t i = 0; i < len && i < RSV_TOKEN_MAX; i++) {
        out[o++] = hex[t[i] >> 4];
        out[o++] = hex[t[i] & 15];
    }
    out[o++] = '"';
    buf_putn(s, out, o);
}

/* An entry's JSON up to its token: [idx, "shop", "token in hex" (the
 * caller writes the rest and the closing bracket). */
static void batch_json_head(strbuf *s, const bentry *e, int first)
{
    buf_printf_u(s, first ? "[" : ",[", e->idx, ",\"");
    buf_printf_u(s, "", e->shop, "\",");
    batch_json_token(s, e->token, e->len);
}

/* Read the CALL's answer rows into the sent entries' ans[] (ncols
 * columns, idx first).  Returns RSV_OK or RSV_EDB for an answer that does
 * not match what was sent. */
static int batch_answer(rsv_ctx *ctx, rbatch *b, size_t ncols, const char *proc)
{
    const sql_res *r = &ctx->res;
    if (r->rows != b->nsend)
        return ctx_fail(ctx, RSV_EDB, "internal: %s answered %zu rows for "
                        "%zu entries", proc, r->rows, b->nsend);
    for (size_t row = 0; row < r->rows; row++) {
        int64_t idx = RES_I(r, row, 0);
        bentry *e = idx >= 0 && (size_t)idx < b->n ? &b->e[idx] : NULL;
        if (!e || e->state != BE_SEND || e->answered)
            return ctx_fail(ctx, RSV_EDB, "internal: %s answered entry "
                            "%lld", proc, (long long)idx);
        e->answered = 1;
        for (size_t c = 1; c < ncols; c++)
            e->ans[c - 1] = RES_I(r, row, c);
    }
    return RSV_OK;
}

/* The CALL of procedure `proc` (named `name`, built by `call`) with the
 * entries' JSON and its last argument, and its answer (`cols`, idx
 * first) read into the sent entries. */
static int batch_call_run(rsv_ctx *ctx, rbatch *b, const char *cols,
                          sql_builder call, int proc, const char *name,
                          int64_t last_arg)
{
    int rc = sql_res_room(ctx, cols, b->nsend);
    if (rc)
        return rc;
    args_reset(&ctx->args);
    arg_bin(&ctx->args, b->json.p, b->json.len);
    arg_i64(&ctx->args, last_arg);
    rc = sql_run(ctx, call, 0, cols, NULL);
    if (rc)
        return proc_unusable(ctx, proc) ? RSV__NO_PROC : rc;
    return batch_answer(ctx, b, strlen(cols), name);
}

/* ---- reserves ---- */

#define RESERVE_COLS "iiiiiiiii" /* idx, status, the seven values */

/* [idx, "shop", "token", "item", "location", units, "start", fill]: the
 * 64-bit values as strings (see the procedure). */
static void json_entry(rsv_ctx *ctx, strbuf *s, bentry *e, int first)
{
    rjob *j = &e->job;
    job_reset_pass(j);
    job_choose_starts(ctx, j);
    const rkey *k = &j->keys[0];
    batch_json_head(s, e, first);
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
    return batch_call_run(ctx, b, RESERVE_COLS, b_call_reserve_batch,
                          PROC_RESERVE_BATCH, RSV_PROC_RESERVE_BATCH,
                          b->ttl_ms * 1000);
}

int batch_reserve_call(rsv_ctx *ctx, rbatch *b)
{
    return txn_run(ctx, TXN_SELF_COMMIT | TXN_READS_AFTER_COMMIT,
                   reserve_batch_body, b);
}

/* ---- reserves of carts ---- */

#define CART_COLS "iiiiiiiiii" /* idx, status, key, the seven values */

/* A cart's rows: one (idx, status, -1, ...) when it was rolled back, else
 * one (idx, 0, key, values) per key taken at, applied to its job at once
 * (the CALL committed).  Returns RSV_OK or RSV_EDB for an answer that
 * does not match what was sent. */
static int cart_answer(rsv_ctx *ctx, rbatch *b)
{
    const sql_res *r = &ctx->res;
    for (size_t row = 0; row < r->rows; row++) {
        int64_t idx = RES_I(r, row, 0), k = RES_I(r, row, 2);
        bentry *e = idx >= 0 && (size_t)idx < b->n ? &b->e[idx] : NULL;
        if (!e || e->state != BE_SEND || e->taken == 0)
            return ctx_fail(ctx, RSV_EDB, "internal: %s answered entry "
                            "%lld", RSV_PROC_CART_BATCH, (long long)idx);
        e->ans[0] = RES_I(r, row, 1);
        e->answered++;
        if (k == -1)
            continue;
        int64_t v[7];
        for (int c = 0; c < 7; c++)
            v[c] = RES_I(r, row, 3 + c);
        if (e->ans[0] != 0 || reserve_proc_cart_key(ctx, &e->job, k, v))
            return ctx_fail(ctx, RSV_EDB, "internal: %s answered key %lld "
                            "of entry %lld", RSV_PROC_CART_BATCH,
                            (long long)k, (long long)idx);
    }
    return RSV_OK;
}

/* [idx, "shop", "token", "keys", keys taken]: the cart procedure's
 * arguments for the entry's pass (the cursors move: written again on
 * every attempt).  An entry whose pass is no longer the procedure's is
 * left out (taken 0) and runs on its own. */
static void json_cart(rsv_ctx *ctx, strbuf *s, bentry *e, int *first)
{
    char keys[PROC_CART_LIST_MAX];
    size_t len = reserve_proc_cart_list(ctx, &e->job, keys, sizeof keys,
                                        &e->taken);
    if (len == 0) {
        e->taken = 0;
        return;
    }
    batch_json_head(s, e, *first);
    buf_puts(s, ",\"");
    buf_putn(s, keys, len);
    buf_printf_u(s, "\",", (uint64_t)e->taken, "]");
    *first = 0;
}

static int cart_batch_body(rsv_ctx *ctx, void *p)
{
    rbatch *b = p;
    size_t rows = 0;
    int first = 1;
    b->json.len = 0;
    buf_puts(&b->json, "[");
    for (size_t i = 0; i < b->nsend; i++) {
        bentry *e = b->send[i];
        e->answered = 0;
        json_cart(ctx, &b->json, e, &first);
        rows += e->taken;
    }
    buf_puts(&b->json, "]");
    if (b->json.oom)
        return ctx_fail(ctx, RSV_ENOMEM, "out of memory");
    if (first)
        return RSV_OK; /* (nothing left to send) */
    int rc = sql_res_room(ctx, CART_COLS, rows);
    if (rc)
        return rc;
    args_reset(&ctx->args);
    arg_bin(&ctx->args, b->json.p, b->json.len);
    arg_i64(&ctx->args, b->ttl_ms * 1000);
    rc = sql_run(ctx, b_call_cart_batch, 0, CART_COLS, NULL);
    if (rc)
        return proc_unusable(ctx, PROC_CART_BATCH) ? RSV__NO_PROC : rc;
    return cart_answer(ctx, b);
}

int batch_cart_call(rsv_ctx *ctx, rbatch *b)
{
    return txn_run(ctx, TXN_SELF_COMMIT | TXN_READS_AFTER_COMMIT,
                   cart_batch_body, b);
}

/* ---- claims and releases ---- */

#define SETTLE_COLS "iiiiii" /* idx, found, status, hold_count, holds, done */

static int settle_batch_body(rsv_ctx *ctx, void *p)
{
    rbatch *b = p;
    b->json.len = 0;
    buf_puts(&b->json, "[");
    for (size_t i = 0; i < b->nsend; i++) {
        bentry *e = b->send[i];
        e->answered = 0;
        batch_json_head(&b->json, e, i == 0);
        buf_puts(&b->json, "]");
    }
    buf_puts(&b->json, "]");
    if (b->json.oom)
        return ctx_fail(ctx, RSV_ENOMEM, "out of memory");
    return batch_call_run(ctx, b, SETTLE_COLS, b_call_settle_batch,
                          PROC_SETTLE_BATCH, RSV_PROC_SETTLE_BATCH, b->kind);
}

int batch_settle_call(rsv_ctx *ctx, rbatch *b)
{
    return txn_run(ctx, TXN_SELF_COMMIT | TXN_READS_AFTER_COMMIT,
                   settle_batch_body, b);
}
