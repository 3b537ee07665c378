/*
 * reserve_proc.c - the reserve fast path in one round trip: calling the
 * schema's procedures (RSV_PROC_RESERVE for one key, RSV_PROC_CART
 * for a cart; sql/schema.sql) and reading their answer into the job as the
 * statement path's read would have left it.  Unlike the statements, the
 * procedures take a key's units straight from its ledger row when no other
 * transaction holds it (they hold it only while the CALL runs on the
 * server, never across a round trip).  Also the waited ledger take in one
 * round trip (the same procedure, waiting for the ledger row).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <mysqld_error.h>

#include "reserve_job.h"

/* The answer's status. */
enum {
    PROC_DONE = 0, PROC_EXISTS = 1, PROC_SHORT = 2, PROC_NO_LEDGER = 3
};
#define PROC_MAX_UNITS 64 /* the procedures take units one by one; bigger
                             holds send their statements (one read) */
#define PROC_MAX_KEYS 32  /* keys a cart CALL takes units at */

/* Which procedure can do this pass, if any.  The procedures do what
 * fast_body does for a new checkout, with the same commit, and they hold
 * at every key exactly what they take there (from its pool, or from its
 * ledger row when that row is free).
 * That is right when every line takes its first location: in the first
 * pass (see job_set_wants), or when no line names more than one.  The
 * statement path's read also sees the ledger row of every other key, and
 * answers RSV_ENOITEM for a location that has none; so the keys this
 * context has not seen exist (ledger_seen.c) go to the cart procedure to
 * be checked.  Everything else (re-reserves, the pass that reads every
 * location, big holds, many keys) sends the statements, which handle
 * every case. */
typedef struct proc_plan {
    int which;      /* PLAN_NONE, PLAN_ONE (RSV_PROC_RESERVE) or
                       PLAN_CART (RSV_PROC_CART) */
    size_t taken;   /* keys units are taken at */
    size_t checked; /* other keys the procedure checks exist */
} proc_plan;
enum { PLAN_NONE, PLAN_ONE, PLAN_CART };

static proc_plan plan_for(const rsv_ctx *ctx, const rjob *j)
{
    proc_plan p = {PLAN_NONE, 0, 0};
    int64_t units = 0;
    for (size_t k = 0; k < j->nkeys; k++) {
        const rkey *key = &j->keys[k];
        if (j->st.wide && key->plan.want_all != key->plan.want_first)
            return p;
        if (key->plan.want > 0) {
            p.taken++;
            units += key->plan.want;
        } else if (!ledger_seen(ctx, j->shop, key->item, key->loc)) {
            p.checked++;
        }
    }
    if (p.taken == 0 || units > PROC_MAX_UNITS)
        return p;
    if (p.taken == 1 && p.checked == 0 &&
        proc_usable(ctx, PROC_RESERVE))
        p.which = PLAN_ONE;
    else if (p.taken <= PROC_MAX_KEYS && p.taken + p.checked <= PROC_MAX_LIST &&
             proc_usable(ctx, PROC_CART))
        p.which = PLAN_CART;
    return p;
}

int reserve_proc_fits(const rsv_ctx *ctx, const rjob *j)
{
    return plan_for(ctx, j).which != PLAN_NONE;
}

/* The one key with units to take. */
static rkey *proc_only_key(rjob *j)
{
    for (size_t k = 0; k < j->nkeys; k++)
        if (j->keys[k].plan.want > 0)
            return &j->keys[k];
    return NULL;
}

/* The pool cap to top a key's pool up to inside the CALL, if a top-up
 * after an earlier reserve found its ledger row held (pool_cursor.c); 0
 * if none is pending. */
static int64_t proc_fill(rsv_ctx *ctx, const rjob *j, const rkey *key)
{
    return pool_refill_pending(ctx, j->shop, key->item, key->loc)
               ? ctx->opts.pool_cap : 0;
}

static size_t proc_key_text(char *out, size_t cap, size_t k, const rkey *key,
                            int64_t want, int64_t fill)
{
    return (size_t)snprintf(out, cap, "%zu,%llu,%llu,%lld,%llu,%lld;", k,
                            (unsigned long long)key->item,
                            (unsigned long long)key->loc, (long long)want,
                            (unsigned long long)key->plan.start, (long long)fill);
}

/* The cart procedure's key list: first the keys to check (0 units; they
 * lock nothing), then the keys with units to take, in key order (the
 * order their pool rows are locked in). */
static size_t proc_key_list(rsv_ctx *ctx, const rjob *j, char *out,
                            size_t cap)
{
    size_t len = 0;
    for (size_t k = 0; k < j->nkeys; k++) {
        const rkey *key = &j->keys[k];
        if (key->plan.want <= 0 &&
            !ledger_seen(ctx, j->shop, key->item, key->loc))
            len += proc_key_text(out + len, cap - len, k, key, 0, 0);
    }
    for (size_t k = 0; k < j->nkeys; k++)
        if (j->keys[k].plan.want > 0)
            len += proc_key_text(out + len, cap - len, k, &j->keys[k],
                                 j->keys[k].plan.want,
                                 proc_fill(ctx, j, &j->keys[k]));
    return len;
}

/* The one-key procedure's CALL for key k, with the top-up fill and, for
 * the waited ledger take, wait.  Answers one row of the key's values in
 * columns. */
static int proc_call_one(rsv_ctx *ctx, const rjob *j, const rkey *k,
                         int64_t fill, int wait)
{
    args_reset(&ctx->args);
    arg_u64(&ctx->args, j->shop);
    arg_bin(&ctx->args, j->token, j->len);
    arg_u64(&ctx->args, k->item);
    arg_u64(&ctx->args, k->loc);
    arg_i64(&ctx->args, k->plan.want);
    arg_u64(&ctx->args, k->plan.start);
    arg_i64(&ctx->args, j->ttl_ms * 1000);
    arg_i64(&ctx->args, fill);
    arg_i64(&ctx->args, wait);
    arg_outs(&ctx->args, CALL_RESERVE_OUTS);
    return sql_run(ctx, b_call_reserve, 0, "iiiiiiii", NULL);
}

/* Send the CALL: the one-key procedure, or the cart's.  Either answers
 * one row: the one key's values in columns, or the cart's keys as text
 * (proc_cart_text). */
static int proc_call(rsv_ctx *ctx, rjob *j, const proc_plan *plan)
{
    if (plan->which == PLAN_ONE) {
        const rkey *k = proc_only_key(j);
        return proc_call_one(ctx, j, k, proc_fill(ctx, j, k), 0);
    }
    args_reset(&ctx->args);
    arg_u64(&ctx->args, j->shop);
    arg_bin(&ctx->args, j->token, j->len);
    char keys[PROC_CART_LIST_MAX];
    size_t len = proc_key_list(ctx, j, keys, sizeof keys);
    arg_bin(&ctx->args, keys, len);
    arg_i64(&ctx->args, (int64_t)plan->taken);
    arg_i64(&ctx->args, j->ttl_ms * 1000);
    arg_outs(&ctx->args, CALL_CART_OUTS);
    return sql_run(ctx, b_call_cart, 0, "it", NULL);
}

/* What the procedure answered for one key (v: units taken from the pool,
 * first and last pool id, ledger hints, units taken from the ledger, pool
 * rows minted), as the statement path's read would have left it. */
static void proc_key_answer(rsv_ctx *ctx, rjob *j, rkey *k, const int64_t *v)
{
    k->read.units = v[0];
    k->read.first_id = (uint64_t)v[1];
    k->read.last_id = (uint64_t)v[2];
    /* next_unit_id 0: the ledger row was held elsewhere and a read from
     * the cursor succeeded without reading it */
    k->read.hint_next = (uint64_t)v[3];
    k->read.have_hint = k->read.hint_next != 0;
    k->read.hint_avail = v[4];
    k->read.ledger_took = v[5];
    k->read.minted = v[6];
    /* (a take straight from the ledger row may answer no hint: the
     * guarded UPDATE reads nothing back, yet the row exists) */
    if (k->read.have_hint || k->read.ledger_took > 0)
        ledger_seen_note(ctx, j->shop, k->item, k->loc);
    /* a key served by its ledger row read no pool: its cursor stays */
    if (k->read.ledger_took == 0)
        job_note_read(ctx, j, k);
}

#define PROC_KEY_VALUES 7

/* The cart procedure's answer text: one "idx,v0,...,v6;" per key units
 * were taken at.  Returns the number of keys read, or -1 if the text is
 * not that. */
static long proc_cart_text(rsv_ctx *ctx, rjob *j)
{
    const char *p = ctx->res.text;
    long n = 0;
    while (*p) {
        int64_t v[1 + PROC_KEY_VALUES];
        for (int f = 0; f <= PROC_KEY_VALUES; f++) {
            char *end;
            errno = 0;
            v[f] = (int64_t)strtoll(p, &end, 10);
            if (end == p || errno ||
                *end != (f == PROC_KEY_VALUES ? ';' : ','))
                return -1;
            p = end + 1;
        }
        if (reserve_proc_cart_key(ctx, j, v[0], v + 1))
            return -1;
        n++;
    }
    return n;
}

/* Sort the answer into the keys; *status: the procedure's; *nkeys: keys
 * answered. */
static int proc_answer(rsv_ctx *ctx, rjob *j, const proc_plan *plan,
                       int64_t *status, size_t *nkeys)
{
    sql_res *r = &ctx->res;
    *nkeys = 0;
    if (r->rows != 1)
        return ctx_fail(ctx, RSV_EDB, "internal: a reserve procedure "
                        "answered %zu rows", r->rows);
    *status = RES_I(r, 0, 0);
    if (*status == PROC_EXISTS || *status == PROC_NO_LEDGER)
        return RSV_OK; /* (rolled back; the statements follow) */
    if (plan->which == PLAN_ONE) {
        int64_t v[PROC_KEY_VALUES];
        for (int f = 0; f < PROC_KEY_VALUES; f++)
            v[f] = RES_I(r, 0, 1 + f);
        proc_key_answer(ctx, j, proc_only_key(j), v);
        *nkeys = 1;
        return RSV_OK;
    }
    long n = proc_cart_text(ctx, j);
    if (n < 0)
        return ctx_fail(ctx, RSV_EDB, "internal: %s answered \"%.64s\"",
                        RSV_PROC_CART, r->text);
    *nkeys = (size_t)n;
    return RSV_OK;
}

/* After a procedure rolled back because a key came up short: what the
 * statement path decides after its read (fast_body), from what the
 * procedure read.  A read that did not start at the bottom looks again
 * from there, still in one round trip; otherwise job_allocate() says whether
 * a line's other locations (END_NARROW) or the slow path (END_SHORT) come
 * next.  The cart procedure reads every key even after a short one, so
 * this sees what the statements' one read would have: in particular every
 * line that may have sold out, for the answer without the ledger lock. */
static int proc_short(rsv_ctx *ctx, rjob *j)
{
    for (size_t k = 0; k < j->nkeys; k++) {
        const rkey *key = &j->keys[k];
        if (key->plan.start > 0 && key->read.ledger_took == 0 &&
            key->read.units < key->plan.want)
            return pass_end(j, END_CURSOR_SHORT);
    }
    int rc = job_allocate(ctx, j, 0);
    return rc == RSV_OK ? pass_end(j, END_NO_PROC) : rc;
}

/* After a procedure committed the reserve: the allocation, the pending
 * top-ups it did, and the counters, as after the statement path's commit. */
static void proc_committed(rsv_ctx *ctx, rjob *j)
{
    for (size_t i = 0; i < j->nkeys; i++) {
        rkey *key = &j->keys[i];
        key->alloc.pool = key->read.units;
        key->alloc.direct = key->read.ledger_took;
        key->alloc.take = key->plan.want;
        stats_add(ctx, RSV_STAT_LEDGER_TAKES, key->read.ledger_took > 0);
        /* a pending top-up done in the CALL (minted >= 0: it had the
         * ledger row; -1: still held elsewhere) */
        if (key->plan.want > 0 && key->read.minted >= 0 &&
            pool_refill_pending(ctx, j->shop, key->item, key->loc)) {
            pool_refill_done(ctx, j->shop, key->item, key->loc, 0);
            stats_add(ctx, RSV_STAT_INLINE_REFILLS, key->read.minted > 0);
        }
        /* every key has a ledger row: the checked ones were checked, the
         * others had pool rows or were read */
        ledger_seen_note(ctx, j->shop, key->item, key->loc);
    }
    for (size_t l = 0; l < j->cart->n; l++)
        j->cart->lines[l].alloc[0] = j->cart->lines[l].qty;
    stats_add(ctx, RSV_STAT_ONE_TRIP, 1);
}

int reserve_proc_body(rsv_ctx *ctx, void *p)
{
    rjob *j = p;
    job_reset_pass(j);
    proc_plan plan = plan_for(ctx, j);
    if (plan.which == PLAN_NONE)
        return pass_end(j, END_NO_PROC); /* (a pass reading every location) */
    job_choose_starts(ctx, j);
    int rc = proc_call(ctx, j, &plan);
    if (rc) {
        if (proc_unusable(ctx, plan.which == PLAN_ONE ? PROC_RESERVE
                                                      : PROC_CART))
            return pass_end(j, END_NO_PROC);
        return rc;
    }
    int64_t status = 0;
    size_t answered = 0;
    if ((rc = proc_answer(ctx, j, &plan, &status, &answered)))
        return rc;
    if (status == PROC_EXISTS || status == PROC_NO_LEDGER)
        return pass_end(j, END_NO_PROC); /* rolled back: statements decide */
    if (status != PROC_DONE && status != PROC_SHORT)
        return ctx_fail(ctx, RSV_EDB, "internal: a reserve procedure "
                        "answered status %lld", (long long)status);
    stats_add(ctx, RSV_STAT_SHORT_READS, status == PROC_SHORT);
    if (status == PROC_SHORT)
        return proc_short(ctx, j); /* rolled back */
    if (answered != plan.taken)
        return ctx_fail(ctx, RSV_EDB, "internal: %s answered %zu keys of "
                        "%zu", RSV_PROC_CART, answered, plan.taken);
    proc_committed(ctx, j);
    return RSV_OK;
}

/* The waited take in one round trip (PASS_LEDGER): the one-key procedure
 * with p_wait, which waits for the key's ledger row in share mode, gives
 * the lock back and reserves as the fast path does from the bottom of the
 * pool (wait 1: a refill in flight lets every buyer so waiting in at
 * once), or waits for the row exclusively and takes
 * them straight from the row, topping the pool up to its cap from what is
 * left (wait 2: the pool was just found short); or rolls back: END_SHORT
 * (short again, the row no longer had the units, the checkout now exists,
 * or the key has no ledger row: what next is reserve_next's), END_NO_PROC
 * when the procedure cannot be called.  Its only key is the job's one
 * (reserve_ledger_fits). */
int reserve_proc_ledger_body(rsv_ctx *ctx, void *p)
{
    rjob *j = p;
    job_reset_pass(j);
    rkey *k = &j->keys[0];
    k->plan.start = 0;
    /* (a top-up is due either way: the pool was just found short) */
    int rc = proc_call_one(ctx, j, k, ctx->opts.pool_cap,
                           j->st.ledger_tried == 1 ? 1 : 2);
    if (rc) {
        if (proc_unusable(ctx, PROC_RESERVE))
            return pass_end(j, END_NO_PROC);
        return rc;
    }
    sql_res *r = &ctx->res;
    if (r->rows != 1)
        return ctx_fail(ctx, RSV_EDB, "internal: a reserve procedure "
                        "answered %zu rows", r->rows);
    int64_t status = RES_I(r, 0, 0), v[PROC_KEY_VALUES];
    for (int f = 0; f < PROC_KEY_VALUES; f++)
        v[f] = RES_I(r, 0, 1 + f);
    /* (what it read, the ledger row as it held it: the next pass's facts) */
    proc_key_answer(ctx, j, k, v);
    if (status != PROC_DONE)
        return pass_end(j, END_SHORT); /* rolled back */
    return job_allocate(ctx, j, 0);
}

/* For a cart batch: the key list the cart procedure's CALL would pass
 * for this pass, and in *taken its p_nkeys; 0 when no procedure can do
 * the pass or the cart procedure cannot be called (the single call then
 * decides), or the list does not fit cap. */
size_t reserve_proc_cart_list(rsv_ctx *ctx, rjob *j, char *out, size_t cap,
                              size_t *taken)
{
    job_reset_pass(j);
    proc_plan plan = plan_for(ctx, j);
    *taken = plan.taken;
    if (plan.which == PLAN_NONE || !proc_usable(ctx, PROC_CART) ||
        plan.taken > PROC_MAX_KEYS || plan.taken + plan.checked > PROC_MAX_LIST ||
        cap < PROC_CART_LIST_MAX)
        return 0;
    job_choose_starts(ctx, j);
    return proc_key_list(ctx, j, out, cap);
}

/* For a cart batch: what the cart procedure answered for key k of a
 * committed entry (the seven values of its text).  Returns -1 for a key
 * the list did not take units at. */
int reserve_proc_cart_key(rsv_ctx *ctx, rjob *j, int64_t k, const int64_t *v)
{
    if (k < 0 || (size_t)k >= j->nkeys || j->keys[k].plan.want <= 0)
        return -1;
    proc_key_answer(ctx, j, &j->keys[k], v);
    return 0;
}

void reserve_proc_cart_done(rsv_ctx *ctx, rjob *j)
{
    proc_committed(ctx, j);
}

int64_t reserve_proc_fill(rsv_ctx *ctx, const rjob *j)
{
    const rkey *k = &j->keys[0];
    return proc_fill(ctx, j, k);
}

void reserve_proc_one_done(rsv_ctx *ctx, rjob *j, const int64_t *v)
{
    proc_key_answer(ctx, j, proc_only_key(j), v);
    proc_committed(ctx, j);
}
