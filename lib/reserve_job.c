/*
 * reserve_job.c - a reserve's job: the cart's distinct (item, location)
 * keys in lock order, what each pass reads at each key, where each line is
 * held (job_allocate), and where each read starts (the context's pool
 * cursors, pool_cursor.c).
 */
#include <stdlib.h>
#include <string.h>

#include "reserve_job.h"

#define RSV_MAX_KEYS 1000 /* distinct (item, location) pairs per cart */

/* "((l.item_id = ? AND l.location_id = ?) OR ...)" for n
 * keys: for statements that read ledger rows without locking them, where
 * a plain list of keys is safe (a scan would cost time, never lock order)
 * and much cheaper than the join the locking statements need. */
void job_ledger_keys(strbuf *s, uint32_t n)
{
    buf_puts(s, "(");
    for (uint32_t i = 0; i < n; i++)
        buf_puts(s, i ? " OR (l.item_id = ? AND "
                        "l.location_id = ?)"
                      : "(l.item_id = ? AND "
                        "l.location_id = ?)");
    buf_puts(s, ")");
}

/* ---------------- the job ---------------- */

static int cmp_key(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    if (x[1] != y[1])
        return x[1] < y[1] ? -1 : 1;
    return 0;
}

void job_free(rjob *j)
{
    if (j->keys)
        for (size_t k = 0; k < j->nkeys; k++)
            free(j->keys[k].read.rows);
    free(j->keys);
    free(j->pairs);
    free(j->line_keys);
    free(j->line_off);
}

/* What each pool read asks for in this pass.  A line usually gets its
 * units at the first location it names, so the fast path first reads only
 * there (for a 5-line cart with 3 locations a line: 5 pool reads that lock
 * rows instead of 15) and reads every location (END_NARROW, then wide)
 * only when a line's first location cannot cover it.  Either pass decides
 * the same allocation when the first succeeds: every line takes its first
 * location when that covers it. */
void job_set_wants(rjob *j)
{
    for (size_t k = 0; k < j->nkeys; k++)
        j->keys[k].plan.want = j->st.wide ? j->keys[k].plan.want_all
                                  : j->keys[k].plan.want_first;
}

/* Distinct (item, location) keys in ascending order: the order pool rows
 * and ledger rows are locked in. */
int job_build(rsv_ctx *ctx, rjob *j)
{
    rsv_cart *c = j->cart;
    size_t total = 0;
    int wide = 1; /* every line names one location: one pass is enough */
    for (size_t l = 0; l < c->n; l++)
        total += c->lines[l].n_locs;
    uint64_t *pairs = malloc(total * 2 * sizeof *pairs);
    j->line_keys = malloc(total * sizeof *j->line_keys);
    j->line_off = malloc(c->n * sizeof *j->line_off);
    if (!pairs || !j->line_keys || !j->line_off) {
        free(pairs);
        return ctx_fail(ctx, RSV_ENOMEM, "out of memory");
    }
    size_t p = 0;
    for (size_t l = 0; l < c->n; l++) {
        j->line_off[l] = p;
        for (size_t i = 0; i < c->lines[l].n_locs; i++, p++) {
            pairs[2 * p] = c->lines[l].item;
            pairs[2 * p + 1] = c->lines[l].locs[i];
        }
    }
    qsort(pairs, total, 2 * sizeof *pairs, cmp_key);
    size_t n = 0;
    for (size_t i = 0; i < total; i++)
        if (n == 0 || cmp_key(&pairs[2 * i], &pairs[2 * (n - 1)]) != 0) {
            pairs[2 * n] = pairs[2 * i];
            pairs[2 * n + 1] = pairs[2 * i + 1];
            n++;
        }
    if (n > RSV_MAX_KEYS) {
        free(pairs);
        return ctx_fail(ctx, RSV_ETOOBIG,
                        "the cart names %zu distinct item/location pairs; "
                        "at most %d per reserve", n, RSV_MAX_KEYS);
    }
    j->keys = calloc(n, sizeof *j->keys);
    if (!j->keys) {
        free(pairs);
        return ctx_fail(ctx, RSV_ENOMEM, "out of memory");
    }
    j->nkeys = n;
    j->pairs = pairs; /* the first n pairs: the keys, sorted and unique */
    for (size_t k = 0; k < n; k++) {
        j->keys[k].item = pairs[2 * k];
        j->keys[k].loc = pairs[2 * k + 1];
    }
    for (size_t l = 0; l < c->n; l++) {
        cart_line *ln = &c->lines[l];
        for (size_t i = 0; i < ln->n_locs; i++) {
            uint64_t key[2] = {ln->item, ln->locs[i]};
            uint64_t *hit = bsearch(key, pairs, n, 2 * sizeof *pairs, cmp_key);
            size_t k = (size_t)(hit - pairs) / 2;
            j->line_keys[j->line_off[l] + i] = k;
            /* Enough rows at every candidate location for every line
             * that may use it (the surplus is unlocked at commit); and,
             * for the first pass, at first locations only. */
            if (j->keys[k].plan.want_all <= RSV_QUANTITY_MAX)
                j->keys[k].plan.want_all += ln->qty;
            if (i == 0 && j->keys[k].plan.want_first <= RSV_QUANTITY_MAX)
                j->keys[k].plan.want_first += ln->qty;
        }
        if (ln->n_locs > 1)
            wide = 0;
    }
    j->st.wide = wide;
    job_set_wants(j);
    return RSV_OK;
}

/* Location i of line l. */
rkey *job_line_key(const rjob *j, size_t l, size_t i)
{
    return &j->keys[j->line_keys[j->line_off[l] + i]];
}

void job_reset_pass(rjob *j)
{
    j->prev_found = 0;
    for (size_t k = 0; k < j->nkeys; k++) {
        rkey *key = &j->keys[k];
        key->read.nrows = 0;
        key->read.units = key->alloc.pool = 0;
        key->read.first_id = key->read.last_id = 0;
        key->alloc.direct = key->alloc.take = key->read.ledger_took = key->read.minted = 0;
        key->read.have_hint = 0;
    }
    for (size_t l = 0; l < j->cart->n; l++)
        memset(j->cart->lines[l].alloc, 0,
               j->cart->lines[l].n_locs * sizeof(int64_t));
}

/* Units key k can still give: its pool rows not yet allocated, plus what
 * the ledger row gives (the slow path's locked row, or what a procedure
 * took from it) less what was allocated from the ledger so far. */
static int64_t key_cover(const rkey *k, int slow)
{
    int64_t c = k->read.units - k->alloc.pool + k->read.ledger_took - k->alloc.direct;
    if (slow)
        c += k->slow.lv.on_hand - k->slow.lv.issued;
    return c;
}

static void key_take(rkey *k, int64_t n)
{
    int64_t from_pool = k->read.units - k->alloc.pool;
    if (from_pool > n)
        from_pool = n;
    k->alloc.pool += from_pool;
    k->alloc.direct += n - from_pool;
    k->alloc.take += n;
}

/* The fast path may pass over a short location only when its ledger had
 * nothing left to refill it with (as last committed). */
static int fast_may_skip(const rkey *k)
{
    return k->read.have_hint && k->read.hint_avail <= 0;
}

/* The out-of-stock answer for line l. */
int job_line_short(rsv_ctx *ctx, rsv_cart *c, size_t l)
{
    const cart_line *ln = &c->lines[l];
    c->failed_line = l;
    return ctx_fail(ctx, RSV_EOUTOFSTOCK,
                    "line %zu (item %llu, %lld units) cannot be covered at "
                    "its %zu location(s)", l, (unsigned long long)ln->item,
                    (long long)ln->qty, ln->n_locs);
}

/* Decide where every line is held.  Returns RSV_OK, a pass end
 * (END_NARROW or END_SHORT, fast path only), or RSV_EOUTOFSTOCK with the cart's failed_line set. */
int job_allocate(rsv_ctx *ctx, rjob *j, int slow)
{
    rsv_cart *c = j->cart;
    for (size_t l = 0; l < c->n; l++) {
        cart_line *ln = &c->lines[l];
        const size_t *lk = &j->line_keys[j->line_off[l]];
        int64_t remaining = ln->qty;
        if (!slow && !j->st.wide && ln->n_locs > 1 &&
            key_cover(&j->keys[lk[0]], 0) < ln->qty)
            return pass_end(j, END_NARROW); /* (only first ones read) */
        if (!(ln->flags & RSV_LINE_SPLIT)) {
            size_t i;
            for (i = 0; i < ln->n_locs; i++) {
                rkey *k = &j->keys[lk[i]];
                if (key_cover(k, slow) >= ln->qty)
                    break;
                if (!slow && !fast_may_skip(k))
                    return pass_end(j, END_SHORT);
            }
            if (i < ln->n_locs) {
                key_take(&j->keys[lk[i]], ln->qty);
                ln->alloc[i] = ln->qty;
                remaining = 0;
            }
        } else {
            for (size_t i = 0; i < ln->n_locs && remaining > 0; i++) {
                rkey *k = &j->keys[lk[i]];
                int64_t t = key_cover(k, slow);
                if (t > remaining)
                    t = remaining;
                if (t < remaining && !slow && !fast_may_skip(k))
                    return pass_end(j, END_SHORT);
                if (t > 0) {
                    key_take(k, t);
                    ln->alloc[i] = t;
                    remaining -= t;
                }
            }
        }
        if (remaining > 0) {
            if (!slow)
                return pass_end(j, END_SHORT);
            return job_line_short(ctx, c, l);
        }
    }
    return RSV_OK;
}

/* ---------------- where reads start (pool_cursor.c) ---------------- */

void job_choose_starts(rsv_ctx *ctx, rjob *j)
{
    for (size_t i = 0; i < j->nkeys; i++) {
        rkey *k = &j->keys[i];
        k->plan.start = j->st.rescan ? 0
                             : pool_cursor_start(ctx, j->shop, k->item, k->loc);
    }
}

/* After a fast-path read of key k: what the crowd did to it
 * (key_stats.c), and its cursor moved. */
void job_note_read(rsv_ctx *ctx, const rjob *j, const rkey *k)
{
    /* (a read from a cursor that comes up short reads again from the
     * bottom: only that one says the pool had too few units free) */
    if (k->plan.want > 0 && k->plan.start == 0 &&
        k->read.units < k->plan.want)
        key_stats_add(&ctx->stats, j->shop, k->item, k->loc, RSV_KEY_SHORT,
                      1);
    /* pool ids are minted in ascending order and a read takes the lowest
     * free ones from its start, so every id it passed was held by another
     * buyer or taken since */
    if (k->plan.want > 0 && k->plan.start > 0 && k->read.units > 0 &&
        k->read.first_id > k->plan.start)
        key_stats_add(&ctx->stats, j->shop, k->item, k->loc,
                      RSV_KEY_PASSED_ROWS, k->read.first_id - k->plan.start);
    if (k->plan.want > 0 && (k->read.have_hint || k->plan.start > 0))
        pool_cursor_note(ctx, j->shop, k->item, k->loc,
                         k->read.have_hint ? k->read.hint_next : 0, k->read.hint_avail,
                         k->plan.start, k->read.first_id, k->read.last_id);
}

void job_note_reads(rsv_ctx *ctx, rjob *j)
{
    for (size_t i = 0; i < j->nkeys; i++)
        job_note_read(ctx, j, &j->keys[i]);
}
