/*
 * batch.c - many checkouts per call: rsv_reserve_batch,
 * rsv_reserve_cart_batch, rsv_claim_batch and rsv_release_batch.
 *
 * Owns what a batch adds to the single calls: checking every entry as the
 * single call would, choosing which entries go into the one batch
 * statement (batch_call.c) and in which order, counting
 * each entry as a call of its own, and running the entries the batch
 * statement cannot decide one by one through the single calls, so that
 * every entry gets exactly the single call's answer.  The single calls'
 * paths stay the only ones that decide anything hard (re-reserves, short
 * pools, sold-out answers).
 */
#include <stdlib.h>
#include <string.h>

#include "batch_call.h"

static void fill(int *results, size_t n, int code)
{
    if (results)
        for (size_t i = 0; i < n; i++)
            results[i] = code;
}

static int same_checkout(const bentry *a, const bentry *b)
{
    return a->shop == b->shop && a->len == b->len &&
           memcmp(a->token, b->token, a->len) == 0;
}

/* Lock order of a reserve batch: ascending (shop, the job's first key:
 * a one-line entry's item and location), so ledger and pool rows are
 * asked for in key order across the batch, and the carts that begin with
 * the same key are taken together.  (Only sent entries are sorted; each
 * has its job.) */
static int cmp_reserve(const void *x, const void *y)
{
    const bentry *a = *(bentry *const *)x, *b = *(bentry *const *)y;
    const rkey *ka = &a->job.keys[0], *kb = &b->job.keys[0];
    if (a->shop != b->shop)
        return a->shop < b->shop ? -1 : 1;
    if (ka->item != kb->item)
        return ka->item < kb->item ? -1 : 1;
    if (ka->loc != kb->loc)
        return ka->loc < kb->loc ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* Lock order of a settle batch: the checkout rows in key order (shop,
 * then the token's bytes, as VARBINARY compares them), so two batches
 * that share checkouts take them in the same order. */
static int cmp_settle(const void *x, const void *y)
{
    const bentry *a = *(bentry *const *)x, *b = *(bentry *const *)y;
    if (a->shop != b->shop)
        return a->shop < b->shop ? -1 : 1;
    int c = memcmp(a->token, b->token, a->len < b->len ? a->len : b->len);
    if (c)
        return c;
    if (a->len != b->len)
        return a->len < b->len ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static void batch_free(rbatch *b)
{
    for (size_t i = 0; b->e && i < b->n; i++)
        if (b->e[i].have_job)
            job_free(&b->e[i].job);
    free(b->e);
    free(b->send);
    buf_free(&b->json);
}

/* The entries, checked as the single call checks its arguments: a token
 * NULL or of a wrong length is that entry's code.  A checkout listed
 * twice goes alone after its first entry (as a second single call). */
static int batch_entries(rsv_ctx *ctx, rbatch *b, size_t n,
                         const uint64_t *shop_ids, const void *const *tokens,
                         const size_t *token_lens)
{
    b->n = n;
    b->e = calloc(n, sizeof *b->e);
    b->send = calloc(n, sizeof *b->send);
    if (!b->e || !b->send)
        return ctx_fail(ctx, RSV_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        bentry *e = &b->e[i];
        e->idx = i;
        e->shop = shop_ids[i];
        e->token = tokens[i];
        e->len = token_lens[i];
        e->state = BE_SEND;
    }
    return RSV_OK;
}

/* What the single call of entry e checks (the batch's TTL is checked
 * once, before the entries). */
static call_args entry_args(const rbatch *b, const bentry *e)
{
    call_args a = {.kind = b->call, .token = e->token, .token_len = e->len,
                   .quantity = e->qty, .cart = e->job.cart,
                   .ttl_ms = b->ttl_ms};
    return a;
}

/* Entry e checked as its single call checks its arguments (the same
 * function): a bad argument is that entry's code. */
static void entry_check(rbatch *b, bentry *e)
{
    if (e->state != BE_SEND)
        return;
    call_args a = entry_args(b, e);
    char msg[ARG_MSG_MAX];
    int rc = call_check(&a, msg);
    if (rc) {
        e->state = BE_DONE;
        e->rc = rc;
        e->bad_args = 1;
        return;
    }
    for (size_t k = 0; k < e->idx; k++) {
        const bentry *o = &b->e[k];
        if (o->state != BE_DONE && same_checkout(o, e)) {
            e->state = BE_ALONE;
            return;
        }
    }
}

/* The entries to send, in lock order.  A lone entry goes by the single
 * call instead: for one checkout the batch statement (JSON in and out, a
 * savepoint) costs more than the single call's procedure, about a third
 * more per reserve (docs/performance.md); from two entries on it costs
 * less. */
static void batch_sort(rbatch *b, int (*cmp)(const void *, const void *))
{
    b->nsend = 0;
    for (size_t i = 0; i < b->n; i++)
        if (b->e[i].state == BE_SEND)
            b->send[b->nsend++] = &b->e[i];
    if (b->nsend == 1) {
        b->send[0]->state = BE_ALONE;
        b->nsend = 0;
    }
    qsort(b->send, b->nsend, sizeof *b->send, cmp);
}

/* Count each decided entry as a call of its own and report it to the
 * callback (the entries run alone count themselves). */
static void count_decided(rsv_ctx *ctx, rbatch *b, int op, uint64_t start_us)
{
    for (size_t i = 0; i < b->n; i++) {
        const bentry *e = &b->e[i];
        if (e->state != BE_DONE)
            continue;
        char msg[ARG_MSG_MAX];
        if (e->bad_args) {
            /* the single call's message, for the callback */
            call_args a = entry_args(b, e);
            call_check(&a, msg);
        }
        if (e->rc == RSV_OK)
            ctx_ok(ctx);
        else
            ctx_fail(ctx, e->rc, "batch entry %zu: %s", e->idx,
                     e->bad_args ? msg : rsv_strerror(e->rc));
        op_end_entry(ctx, op, e->rc, e->shop, e->token, e->len, start_us);
    }
}

/* Before any entry is looked at: the whole batch's code, one call. */
static int refuse_whole(rsv_ctx *ctx, size_t n, int *results, int rc)
{
    rc = op_end(ctx, rc); /* (a refusal while a call is pending: EINVAL) */
    fill(results, n, rc);
    return rc;
}

/* A code for the whole batch once the entries were read: every result,
 * one call. */
static int fail_whole(rsv_ctx *ctx, rbatch *b, int *results, int rc)
{
    fill(results, b->n, rc);
    batch_free(b);
    return op_end(ctx, rc);
}

static int args_missing(rsv_ctx *ctx, size_t n, const void *a, const void *b,
                        const void *c, const int *results)
{
    if (!a || !b || !c || !results)
        return ctx_fail(ctx, RSV_EINVAL, "a batch array is NULL");
    if (n == 0 || n > RSV_BATCH_MAX)
        return ctx_fail(ctx, RSV_EINVAL, "a batch has 1..%d entries, not %zu",
                        RSV_BATCH_MAX, n);
    return RSV_OK;
}

/* ---- reserves ---- */

/* What a reserve batch's entries reserve: one line each (items, locs,
 * qty) or the caller's carts. */
typedef struct reserve_src {
    int carts;
    const uint64_t *items, *locs;
    const int64_t *qty;
    rsv_cart *const *cart;
} reserve_src;

/* Whether the single call would start with a procedure: then the batch
 * statement does that CALL's work for it. */
static int reserve_fits(rsv_ctx *ctx, bentry *e)
{
    rfacts f;
    rstate st = e->job.st;
    reserve_facts(ctx, &e->job, END_FINAL, &f);
    return reserve_next(&st, PASS_START, RSV_OK, END_FINAL, &f) ==
               PASS_CALL && reserve_proc_fits(ctx, &e->job);
}

/* The job of an entry of one line at one location. */
static void line_job(bentry *e)
{
    e->line_loc = e->loc;
    cart_one_line(&e->cart, &e->line, e->item, &e->line_loc, e->qty,
                  &e->line_alloc);
    e->job.cart = &e->cart;
}

/* Entry i checked as its single call checks its arguments, and its job
 * built: BE_SEND if the batch statement can do its first pass. */
static int reserve_entry(rsv_ctx *ctx, rbatch *b, const reserve_src *src,
                         size_t i, int proc)
{
    bentry *e = &b->e[i];
    if (src->carts) {
        rsv_cart *c = src->cart[i];
        if (c)
            c->failed_line = (size_t)-1;
        e->job.cart = c;
        entry_check(b, e);
    } else {
        e->item = src->items[i];
        e->loc = src->locs[i];
        e->qty = src->qty[i];
        entry_check(b, e);
        line_job(e);
    }
    if (e->state != BE_SEND)
        return RSV_OK;
    if (!proc_usable(ctx, proc)) {
        e->state = BE_ALONE;
        return RSV_OK;
    }
    e->job.shop = e->shop;
    e->job.token = e->token;
    e->job.len = e->len;
    e->job.ttl_ms = b->ttl_ms;
    /* (freed also after a failed build, which may have allocated part) */
    e->have_job = 1;
    int rc = job_build(ctx, &e->job);
    if (rc) {
        /* a cart too big: its single call says so */
        if (rc != RSV_ETOOBIG)
            return rc;
        e->state = BE_ALONE;
        return RSV_OK;
    }
    if (!reserve_fits(ctx, e))
        e->state = BE_ALONE;
    return RSV_OK;
}

/* After the batch statement committed: each sent entry decided, or
 * (statuses 1-3, rolled back to its savepoint) left to its single call,
 * which decides from the start. */
static void reserve_sent_done(rsv_ctx *ctx, rbatch *b, int carts)
{
    for (size_t i = 0; i < b->nsend; i++) {
        bentry *e = b->send[i];
        int undecided = carts ? !e->answered || e->ans[0] != 0
                              : e->ans[0] != 0;
        stats_add(ctx, RSV_STAT_SHORT_READS, e->answered && e->ans[0] == 2);
        if (undecided) {
            e->state = BE_ALONE;
            continue;
        }
        e->state = BE_DONE;
        e->rc = RSV_OK;
        if (!carts) {
            reserve_proc_one_done(ctx, &e->job, &e->ans[1]);
        } else if ((size_t)e->answered == e->taken) {
            reserve_proc_cart_done(ctx, &e->job);
        } else {
            /* (committed, yet keys missing from the answer) */
            e->rc = ctx_fail(ctx, RSV_EDB, "internal: %s answered %d keys "
                             "of %zu", RSV_PROC_CART_BATCH, e->answered,
                             e->taken);
        }
    }
    /* the top-ups a single call makes after its commit */
    for (size_t i = 0; i < b->nsend; i++)
        if (b->send[i]->state == BE_DONE && b->send[i]->rc == RSV_OK)
            reserve_refill_ahead(ctx, &b->send[i]->job);
}

static int reserve_batch(rsv_ctx *ctx, size_t n, const uint64_t *shop_ids,
                         const void *const *tokens, const size_t *token_lens,
                         const reserve_src *src, int64_t ttl_ms,
                         int *results)
{
    if (!ctx) {
        fill(results, n, RSV_EINVAL);
        return RSV_EINVAL;
    }
    int began = op_begin(ctx, RSV_OP_RESERVE, 1, 0, NULL, 0);
    if (began)
        return refuse_whole(ctx, n, results, began);
    uint64_t start_us = ctx->op_start_us;
    int carts = src->carts;
    int rc = args_missing(ctx, n, shop_ids, tokens, token_lens, results);
    if (!rc && (carts ? !src->cart
                      : !src->items || !src->locs || !src->qty))
        rc = ctx_fail(ctx, RSV_EINVAL, "a batch array is NULL");
    if (rc)
        return refuse_whole(ctx, n, results, rc);
    rbatch b;
    memset(&b, 0, sizeof b);
    if ((rc = check_ttl(ctx, &ttl_ms)))
        return refuse_whole(ctx, n, results, rc);
    if (txn_caller_open(ctx))
        return refuse_whole(ctx, n, results,
                            ctx_fail(ctx, RSV_EINTXN, "a reserve batch runs "
                                     "its own transactions; the connection "
                                     "is inside one (commit or roll back "
                                     "first)"));
    if ((rc = batch_entries(ctx, &b, n, shop_ids, tokens, token_lens)))
        return fail_whole(ctx, &b, results, rc);
    b.ttl_ms = ttl_ms;
    b.call = carts ? CALL_RESERVE : CALL_RESERVE_ONE;
    int proc = carts ? PROC_CART_BATCH : PROC_RESERVE_BATCH;
    for (size_t i = 0; i < n; i++)
        if ((rc = reserve_entry(ctx, &b, src, i, proc)))
            return fail_whole(ctx, &b, results, rc);
    batch_sort(&b, cmp_reserve);
    if (b.nsend > 0) {
        rc = carts ? batch_cart_call(ctx, &b) : batch_reserve_call(ctx, &b);
        if (rc == RSV__NO_PROC) {
            for (size_t i = 0; i < b.nsend; i++)
                b.send[i]->state = BE_ALONE;
        } else if (rc != RSV_OK) {
            return fail_whole(ctx, &b, results, rc);
        } else {
            reserve_sent_done(ctx, &b, carts);
        }
    }
    count_decided(ctx, &b, RSV_OP_RESERVE, start_us);
    for (size_t i = 0; i < n; i++) {
        const bentry *e = &b.e[i];
        results[i] = e->state == BE_DONE ? e->rc
                     : carts ? rsv_reserve(ctx, e->shop, e->token, e->len,
                                           src->cart[i], ttl_ms)
                             : rsv_reserve_one(ctx, e->shop, e->token,
                                               e->len, e->item, e->loc,
                                               e->qty, ttl_ms);
    }
    batch_free(&b);
    return ctx_ok(ctx);
}

RSV_EXTERN int rsv_reserve_batch(rsv_ctx *ctx, size_t n,
                                 const uint64_t *shop_ids,
                                 const void *const *tokens,
                                 const size_t *token_lens,
                                 const uint64_t *item_ids,
                                 const uint64_t *location_ids,
                                 const int64_t *quantities, int64_t ttl_ms,
                                 int *results)
{
    reserve_src src = {0, item_ids, location_ids, quantities, NULL};
    return reserve_batch(ctx, n, shop_ids, tokens, token_lens, &src, ttl_ms,
                         results);
}

RSV_EXTERN int rsv_reserve_cart_batch(rsv_ctx *ctx, size_t n,
                                      const uint64_t *shop_ids,
                                      const void *const *tokens,
                                      const size_t *token_lens,
                                      rsv_cart *const *carts, int64_t ttl_ms,
                                      int *results)
{
    reserve_src src = {1, NULL, NULL, NULL, carts};
    return reserve_batch(ctx, n, shop_ids, tokens, token_lens, &src, ttl_ms,
                         results);
}

/* ---- claims and releases ---- */

static int settle_batch(rsv_ctx *ctx, int op, size_t n,
                        const uint64_t *shop_ids, const void *const *tokens,
                        const size_t *token_lens, int *results)
{
    if (!ctx) {
        fill(results, n, RSV_EINVAL);
        return RSV_EINVAL;
    }
    int began = op_begin(ctx, op, 1, 0, NULL, 0);
    if (began)
        return refuse_whole(ctx, n, results, began);
    uint64_t start_us = ctx->op_start_us;
    int rc = args_missing(ctx, n, shop_ids, tokens, token_lens, results);
    if (rc)
        return refuse_whole(ctx, n, results, rc);
    /* A batch never joins the caller's transaction: its entries would
     * then commit or roll back with the caller's, one by one. */
    if (txn_caller_open(ctx))
        return refuse_whole(ctx, n, results,
                            ctx_fail(ctx, RSV_EINTXN, "a batch runs its own "
                                     "transaction; the connection is inside "
                                     "one (commit or roll back first, or "
                                     "call rsv_claim/rsv_release to join "
                                     "it)"));
    rbatch b;
    memset(&b, 0, sizeof b);
    b.kind = op == RSV_OP_CLAIM ? ST_CLAIMED : ST_RELEASED;
    if ((rc = batch_entries(ctx, &b, n, shop_ids, tokens, token_lens)))
        return fail_whole(ctx, &b, results, rc);
    b.call = op == RSV_OP_CLAIM ? CALL_CLAIM : CALL_RELEASE;
    for (size_t i = 0; i < n; i++) {
        entry_check(&b, &b.e[i]);
        if (b.e[i].state == BE_SEND && !proc_usable(ctx, PROC_SETTLE_BATCH))
            b.e[i].state = BE_ALONE;
    }
    batch_sort(&b, cmp_settle);
    if (b.nsend > 0) {
        rc = batch_settle_call(ctx, &b);
        if (rc != RSV_OK && rc != RSV__NO_PROC)
            return fail_whole(ctx, &b, results, rc);
        for (size_t i = 0; i < b.nsend; i++) {
            bentry *e = b.send[i];
            if (rc == RSV__NO_PROC) {
                e->state = BE_ALONE;
                continue;
            }
            e->state = BE_DONE;
            e->rc = settle_answer_code(ctx, b.kind, e->shop, e->ans[0] != 0,
                                       (int)e->ans[1], e->ans[2], e->ans[3],
                                       e->ans[4]);
            /* On Galera "no such checkout" may be a commit made through
             * another node, not applied here yet: the single call waits
             * for it (checkout.c) */
            if (e->rc == RSV_ENOTFOUND && ctx->galera)
                e->state = BE_ALONE;
        }
    }
    count_decided(ctx, &b, op, start_us);
    for (size_t i = 0; i < n; i++) {
        const bentry *e = &b.e[i];
        results[i] = e->state == BE_DONE ? e->rc
                     : op == RSV_OP_CLAIM
                         ? rsv_claim(ctx, e->shop, e->token, e->len)
                         : rsv_release(ctx, e->shop, e->token, e->len);
    }
    batch_free(&b);
    return ctx_ok(ctx);
}

RSV_EXTERN int rsv_claim_batch(rsv_ctx *ctx, size_t n,
                               const uint64_t *shop_ids,
                               const void *const *tokens,
                               const size_t *token_lens, int *results)
{
    return settle_batch(ctx, RSV_OP_CLAIM, n, shop_ids, tokens, token_lens,
                        results);
}

RSV_EXTERN int rsv_release_batch(rsv_ctx *ctx, size_t n,
                                 const uint64_t *shop_ids,
                                 const void *const *tokens,
                                 const size_t *token_lens, int *results)
{
    return settle_batch(ctx, RSV_OP_RELEASE, n, shop_ids, tokens, token_lens,
                        results);
}
