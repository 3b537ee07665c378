/*
 * reserve.c - holding a cart: the fast path, the slow path, and the
 * statements both share to write the holds.
 *
 * Fast path (one transaction, a fixed number of statements whatever the
 * cart size; first reading each line's first location only, see
 * set_wants):
 *   1. one UNION ALL statement locks the checkout row, reads the ledger
 *      rows of every (item, location) of the cart without locking them
 *      (hints: how far the pool reaches and whether the ledger has more),
 *      and takes pool rows for every (item, location) with
 *      FOR UPDATE SKIP LOCKED, so concurrent checkouts take different rows
 *      instead of queueing;
 *   2. the rows used are deleted, then the holds are written (pool before
 *      holds: the lock order of internal.h);
 *   3. COMMIT.  If a pool is running low, the pool is then topped up in a
 *      separate transaction that skips the ledger row if another refiller
 *      holds it, so no buyer ever waits behind a refill.
 *
 * One round trip: a new checkout calls one of the schema's procedures
 * instead, rsv_fast_reserve_v2 when it takes units at one (item,
 * location), rsv_fast_cart_v1 at up to 32, which run the statements of
 * the fast path on the server and commit; if they cannot (the checkout
 * exists, a pool is short, no ledger row) they roll back and the
 * statements below take over.
 *
 * Slow path, only when a pool read comes back short and the ledger may
 * have more (the fast-path transaction is rolled back first, so nothing is
 * held while waiting): lock the ledger rows in key order (and if another
 * reserve has refilled the short pools meanwhile, let go at once and take
 * the fast path again: the buyers queued behind a refill), fold settled and
 * expired holds back, read the pool *waiting* for rows other checkouts hold
 * (they may roll back), cover what the pool lacks straight from the ledger
 * and top the pool up.  Only if the committed state then still cannot
 * cover a line is the answer "out of stock".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mysqld_error.h>

#include "internal.h"

#define RSV_MAX_KEYS 1000 /* distinct (item, location) pairs per cart */
#define DELETE_CHUNK 1024
#define NEED_SLOW 1       /* allocate(): the fast path cannot decide */
#define NEED_RESCAN 2     /* a read from a spread start came up short */
#define NEED_STATEMENTS 3 /* the procedure did nothing: send statements */
#define NEED_FAST 4       /* the slow path found the pools refilled since */
#define NEED_WIDE 5       /* a line's first location cannot cover it */
#define NEED_EXCL 6       /* the slow path waited in share mode for nothing:
                             again, locking the ledger rows exclusively */
#define MAX_BACK_TO_FAST 2 /* times one reserve may go back */
#define PROC_MAX_UNITS 64 /* the procedure takes units one by one; bigger
                             holds send their statements (one read) */

typedef struct rkey {
    uint64_t item, loc;
    int64_t want;        /* LIMIT of the pool read (this pass) */
    int64_t want_all;    /* units of every line that may use the key */
    int64_t want_first;  /* units of the lines that name it first */
    uint64_t start;      /* the pool read begins at this id */
    uint64_t *ids;       /* pool rows read, ascending (statement path) */
    size_t nids, cap_ids;
    uint64_t first_id, last_id; /* lowest and highest pool id read */
    size_t used;         /* ids allocated to lines */
    int64_t direct;      /* units issued straight from the ledger */
    int64_t take;        /* units held at this key in total */
    int have_hint;
    uint64_t hint_next;  /* next_unit_id as last committed */
    uint64_t fast_next;  /* hint_next of the last fast-path read that came
                            up short, else 0 (kept across passes) */
    int64_t fast_avail;  /* and hint_avail of that read */
    int64_t hint_avail;  /* on_hand - issued as last committed */
    int so_ask;          /* the sold-out read asks about this key: */
    int so_found;        /* its ledger row exists, */
    int so_live;         /* units may come back (pool rows, expired
                            holds, releases not folded, a re-reserve's
                            own holds), */
    int64_t so_avail;    /* and on_hand - issued */
    rsv_level lv;        /* slow path: the locked ledger row */
} rkey;

typedef struct rjob {
    uint64_t shop;
    const void *token;
    size_t len;
    rsv_cart *cart;
    int64_t ttl_ms;
    rkey *keys;
    size_t nkeys;
    size_t *line_keys;   /* per line, per location: index into keys */
    size_t *line_off;    /* per line: offset into line_keys */
    int prev_found, prev_status;
    uint32_t prev_gen;
    int64_t refill_added;
    int rescan;          /* read every pool from its bottom */
    uint64_t *pairs;     /* the keys as (item, location) pairs */
    int back_to_fast;    /* times the slow path went back (NEED_FAST) */
    int ledger_excl;     /* this slow path locks the ledger rows FOR
                            UPDATE at once (see ledger_mode) */
    int wide;            /* pool reads at every candidate location, not
                            only at each line's first (see set_wants) */
} rjob;

/* ---------------- statements ---------------- */

#define SLOW_BIT 0x80000000u

/* "((l.inventory_item_id = ? AND l.inventory_group_id = ?) OR ...)" for n
 * keys: for statements that read ledger rows without locking them, where
 * a plain list of keys is safe (a scan would cost time, never lock order)
 * and much cheaper than the join the locking statements need. */
static void ledger_key_list(rsv_buf *s, uint32_t n)
{
    buf_puts(s, "(");
    for (uint32_t i = 0; i < n; i++)
        buf_puts(s, i ? " OR (l.inventory_item_id = ? AND "
                        "l.inventory_group_id = ?)"
                      : "(l.inventory_item_id = ? AND "
                        "l.inventory_group_id = ?)");
    buf_puts(s, ")");
}

static void pool_part(rsv_buf *s, uint32_t k, int slow, int first)
{
    buf_printf_u(s, first ? "(SELECT 2, " : " UNION ALL (SELECT 2, ", k,
                 ", CAST(id AS SIGNED), 0, 0 FROM reservation_units WHERE "
                 "shop_id = ? AND inventory_item_id = ? AND "
                 "inventory_group_id = ? AND id >= ? ORDER BY id LIMIT ?");
    buf_puts(s, slow ? ")" : " FOR UPDATE SKIP LOCKED)");
}

/* shape: number of keys, SLOW_BIT for the slow path's variant.  Columns:
 *   (0, status, generation, hold_count, 0)   the checkout row, locked
 *   (1, item, location, next_unit_id, on_hand - issued)   ledger, unlocked
 *   (2, key index, pool row id, 0, 0)        pool rows, locked
 * The slow variant has only the pool parts, and does not lock: the rows it
 * reads are then locked by primary key (take_waiting). */
static int b_take(rsv_buf *s, uint32_t shape)
{
    uint32_t n = shape & ~SLOW_BIT;
    int slow = (shape & SLOW_BIT) != 0;
    if (!slow) {
        buf_puts(s, "(SELECT 0, status, CAST(generation AS SIGNED), "
                    "hold_count, 0 FROM reservation_checkouts WHERE "
                    "shop_id = ? AND checkout_token = ? FOR UPDATE)");
        buf_puts(s, " UNION ALL (SELECT 1, CAST(l.inventory_item_id AS "
                    "SIGNED), CAST(l.inventory_group_id AS SIGNED), "
                    "CAST(l.next_unit_id AS SIGNED), l.on_hand - l.issued "
                    "FROM ");
        /* (this part takes no lock: see ledger_key_list) */
        buf_puts(s, "inventory_levels l WHERE ");
        ledger_key_list(s, n);
        buf_puts(s, " AND l.shop_id = ?)");
    }
    for (uint32_t k = 0; k < n; k++)
        pool_part(s, k, slow, slow && k == 0);
    return 0;
}

/* The slow path locks the checkout row on its own, before the ledger rows
 * (lock order 1 then 2), and only then waits for pool rows (3). */
static int b_lock_checkout_row(rsv_buf *s, uint32_t shape)
{
    (void)shape;
    buf_puts(s, "SELECT status, CAST(generation AS SIGNED), hold_count FROM "
                "reservation_checkouts WHERE shop_id = ? AND "
                "checkout_token = ? FOR UPDATE");
    return 0;
}

/* Padding rows repeat the last hold; ON DUPLICATE KEY UPDATE makes the
 * repeat a no-op (holds are one row per key by construction). */
static int b_holds_insert(rsv_buf *s, uint32_t n)
{
    buf_puts(s, "INSERT INTO reserved_quantities (shop_id, checkout_token, "
                "inventory_item_id, inventory_group_id, quantity, generation, "
                "expires_at, created_at) VALUES ");
    for (uint32_t i = 0; i < n; i++)
        buf_puts(s, i ? ",(?,?,?,?,?,?,NOW(6) + INTERVAL ? MICROSECOND,NOW(6))"
                      : "(?,?,?,?,?,?,NOW(6) + INTERVAL ? MICROSECOND,NOW(6))");
    buf_puts(s, " ON DUPLICATE KEY UPDATE quantity = VALUES(quantity)");
    return 0;
}

static int b_checkout_write(rsv_buf *s, uint32_t update)
{
    if (update)
        buf_puts(s, "UPDATE reservation_checkouts SET status = 1, "
                    "generation = ?, hold_count = ?, expires_at = NOW(6) + "
                    "INTERVAL ? MICROSECOND, updated_at = NOW(6) WHERE "
                    "shop_id = ? AND checkout_token = ?");
    else
        buf_puts(s, "INSERT INTO reservation_checkouts (generation, "
                    "hold_count, expires_at, shop_id, checkout_token, status, "
                    "created_at, updated_at) VALUES (?, ?, NOW(6) + INTERVAL ? "
                    "MICROSECOND, ?, ?, 1, NOW(6), NOW(6))");
    return 0;
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

static void job_free(rjob *j)
{
    if (j->keys)
        for (size_t k = 0; k < j->nkeys; k++)
            free(j->keys[k].ids);
    free(j->keys);
    free(j->pairs);
    free(j->line_keys);
    free(j->line_off);
}

/* What each pool read asks for in this pass.  A line usually gets its
 * units at the first location it names, so the fast path first reads only
 * there (for a 5-line cart with 3 locations a line: 5 pool reads that lock
 * rows instead of 15) and reads every location (NEED_WIDE, then wide)
 * only when a line's first location cannot cover it.  Either pass decides
 * the same allocation when the first succeeds: every line takes its first
 * location when that covers it. */
static void set_wants(rjob *j)
{
    for (size_t k = 0; k < j->nkeys; k++)
        j->keys[k].want = j->wide ? j->keys[k].want_all
                                  : j->keys[k].want_first;
}

/* Distinct (item, location) keys in ascending order: the order pool rows
 * and ledger rows are locked in. */
static int job_build(rsv_ctx *ctx, rjob *j)
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
        rsv_line *ln = &c->lines[l];
        for (size_t i = 0; i < ln->n_locs; i++) {
            uint64_t key[2] = {ln->item, ln->locs[i]};
            uint64_t *hit = bsearch(key, pairs, n, 2 * sizeof *pairs, cmp_key);
            size_t k = (size_t)(hit - pairs) / 2;
            j->line_keys[j->line_off[l] + i] = k;
            /* Enough rows at every candidate location for every line
             * that may use it (the surplus is unlocked at commit); and,
             * for the first pass, at first locations only. */
            if (j->keys[k].want_all <= RSV_QUANTITY_MAX)
                j->keys[k].want_all += ln->qty;
            if (i == 0 && j->keys[k].want_first <= RSV_QUANTITY_MAX)
                j->keys[k].want_first += ln->qty;
        }
        if (ln->n_locs > 1)
            wide = 0;
    }
    j->wide = wide;
    set_wants(j);
    return RSV_OK;
}

/* Location i of line l. */
static rkey *line_key(const rjob *j, size_t l, size_t i)
{
    return &j->keys[j->line_keys[j->line_off[l] + i]];
}

static int key_push_id(rsv_ctx *ctx, rkey *k, uint64_t id)
{
    if (k->nids == k->cap_ids) {
        size_t cap = k->cap_ids ? k->cap_ids * 2 : 8;
        uint64_t *ids = realloc(k->ids, cap * sizeof *ids);
        if (!ids)
            return ctx_fail(ctx, RSV_ENOMEM, "out of memory");
        k->ids = ids;
        k->cap_ids = cap;
    }
    k->ids[k->nids++] = id;
    return RSV_OK;
}

static void job_reset_pass(rjob *j)
{
    j->prev_found = 0;
    for (size_t k = 0; k < j->nkeys; k++) {
        rkey *key = &j->keys[k];
        key->nids = key->used = 0;
        key->first_id = key->last_id = 0;
        key->direct = key->take = 0;
        key->have_hint = 0;
    }
    for (size_t l = 0; l < j->cart->n; l++)
        memset(j->cart->lines[l].alloc, 0,
               j->cart->lines[l].n_locs * sizeof(int64_t));
}

/* Run the take statement and sort its rows into the job. */
static int take(rsv_ctx *ctx, rjob *j, int slow)
{
    uint32_t n = (uint32_t)j->nkeys;
    args_reset(&ctx->args);
    if (!slow) {
        arg_u64(&ctx->args, j->shop);
        arg_bin(&ctx->args, j->token, j->len);
        for (size_t k = 0; k < j->nkeys; k++) {
            arg_u64(&ctx->args, j->keys[k].item);
            arg_u64(&ctx->args, j->keys[k].loc);
        }
        arg_u64(&ctx->args, j->shop);
    }
    for (size_t k = 0; k < j->nkeys; k++) {
        arg_u64(&ctx->args, j->shop);
        arg_u64(&ctx->args, j->keys[k].item);
        arg_u64(&ctx->args, j->keys[k].loc);
        arg_u64(&ctx->args, slow ? 0 : j->keys[k].start);
        arg_i64(&ctx->args, j->keys[k].want);
    }
    int rc = sql_run(ctx, b_take, n | (slow ? SLOW_BIT : 0), "iiiii", NULL);
    if (rc)
        return rc;
    rsv_res *r = &ctx->res;
    size_t hk = 0; /* ledger rows come back in key order */
    for (size_t i = 0; i < r->rows; i++) {
        switch (RES_I(r, i, 0)) {
        case 0:
            j->prev_found = 1;
            j->prev_status = (int)RES_I(r, i, 1);
            j->prev_gen = (uint32_t)RES_I(r, i, 2);
            break;
        case 1: {
            uint64_t item = (uint64_t)RES_I(r, i, 1);
            uint64_t loc = (uint64_t)RES_I(r, i, 2);
            while (hk < j->nkeys &&
                   (j->keys[hk].item != item || j->keys[hk].loc != loc))
                hk++;
            if (hk < j->nkeys) {
                j->keys[hk].have_hint = 1;
                j->keys[hk].hint_next = (uint64_t)RES_I(r, i, 3);
                j->keys[hk].hint_avail = RES_I(r, i, 4);
            }
            break;
        }
        default: {
            size_t k = (size_t)RES_I(r, i, 1);
            if (k < j->nkeys &&
                (rc = key_push_id(ctx, &j->keys[k], (uint64_t)RES_I(r, i, 2))))
                return rc;
            break;
        }
        }
    }
    for (size_t k = 0; k < j->nkeys; k++)
        if (j->keys[k].nids) {
            j->keys[k].first_id = j->keys[k].ids[0];
            j->keys[k].last_id = j->keys[k].ids[j->keys[k].nids - 1];
        }
    return RSV_OK;
}

static int cmp_id(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Where a walk over the job's (key, pool id) pairs stands.  The pairs are
 * walked in key order and, within a key, in id order: primary key order. */
typedef struct id_walk {
    size_t k, i;
} id_walk;

static int walk_before(const id_walk *w, const id_walk *stop)
{
    return !stop || w->k < stop->k || (w->k == stop->k && w->i < stop->i);
}

/* Bind the next chunk of (key, pool id) pairs, in key order: of each key
 * its first `used` ids (rows to delete) or, with read_all, every id read
 * (rows to lock), each as item, location and id, preceded by the key's
 * index with with_index; up to `stop` if given.  Padded up to the
 * statement's size bucket with id 0 (pool ids start at 1: it matches
 * nothing), then the shop.  Returns the number of real pairs bound; 0 when
 * the walk is done. */
static size_t bind_id_chunk(rsv_ctx *ctx, const rjob *j, int read_all,
                            int with_index, id_walk *w, const id_walk *stop,
                            uint32_t *bucket)
{
    args_reset(&ctx->args);
    size_t n = 0, last_k = 0;
    while (w->k < j->nkeys && n < DELETE_CHUNK && walk_before(w, stop)) {
        const rkey *key = &j->keys[w->k];
        if (w->i >= (read_all ? key->nids : key->used)) {
            w->k++;
            w->i = 0;
            continue;
        }
        if (with_index)
            arg_u64(&ctx->args, w->k);
        arg_u64(&ctx->args, key->item);
        arg_u64(&ctx->args, key->loc);
        arg_u64(&ctx->args, key->ids[w->i++]);
        last_k = w->k;
        n++;
    }
    if (n == 0)
        return 0;
    *bucket = sql_bucket(n);
    for (size_t p = n; p < *bucket; p++) {
        if (with_index)
            arg_u64(&ctx->args, last_k);
        arg_u64(&ctx->args, j->keys[last_k].item);
        arg_u64(&ctx->args, j->keys[last_k].loc);
        arg_u64(&ctx->args, 0);
    }
    arg_u64(&ctx->args, j->shop);
    return n;
}

/* The rows read, locked by primary key: columns (key index, pool row id)
 * of the rows still there.  shape: size bucket, SKIP_BIT to pass over rows
 * other transactions hold instead of waiting for them. */
#define SKIP_BIT 0x80000000u
static int b_pool_lock(rsv_buf *s, uint32_t shape)
{
    buf_puts(s, "SELECT CAST(k.k0 AS SIGNED), CAST(u.id AS SIGNED) FROM ");
    sql_key_rows(s, 4, shape & ~SKIP_BIT);
    buf_puts(s, "reservation_units u FORCE INDEX (PRIMARY) ON u.shop_id = ? "
                "AND u.inventory_item_id = k.k1 AND u.inventory_group_id = "
                "k.k2 AND u.id = k.k3 FOR UPDATE");
    if (shape & SKIP_BIT)
        buf_puts(s, " SKIP LOCKED");
    return 0;
}

#define WAIT_ROUNDS 8

/* Lock the pairs from *w up to stop (NULL: to the end), waiting for
 * holders or (skip) passing over them.  Locked rows overwrite the front of
 * each key's id list, never beyond the rows already sent: got[] counts
 * them per key, *locked in all. */
static int lock_pairs(rsv_ctx *ctx, rjob *j, int skip, id_walk *w,
                      const id_walk *stop, size_t *got, size_t *locked)
{
    uint32_t bucket = 0;
    while (bind_id_chunk(ctx, j, 1, 1, w, stop, &bucket)) {
        int rc = sql_run(ctx, b_pool_lock, bucket | (skip ? SKIP_BIT : 0),
                         "ii", NULL);
        if (rc)
            return rc;
        for (size_t r = 0; r < ctx->res.rows; r++) {
            size_t key = (size_t)RES_I(&ctx->res, r, 0);
            if (key < j->nkeys && got[key] < j->keys[key].nids) {
                j->keys[key].ids[got[key]++] =
                    (uint64_t)RES_I(&ctx->res, r, 1);
                (*locked)++;
            }
        }
    }
    return RSV_OK;
}

/* The slow path's pool read, which waits for rows other checkouts are
 * taking (they may roll back; only then is a short pool really short).
 * A blocking range read (... ORDER BY id LIMIT n FOR UPDATE) cannot do it:
 * when the range has fewer rows than the limit, InnoDB goes on to the next
 * record of the index, which belongs to another item or location, and
 * waits for its lock too - two slow paths then deadlock across keys
 * neither of them owns (found by the soak).  So the rows are read without
 * locking and then locked by primary key, which touches nothing else; a
 * row whose taker commits meanwhile is gone when the wait ends, and the
 * read is repeated while that happens (bounded: what is locked after the
 * last round is what this reserve has, and the ledger covers the rest).
 *
 * Every wait is for a row above every pool row already held, in primary
 * key order.  Fast-path readers take rows in that order too, with SKIP
 * LOCKED, and SKIP LOCKED does not keep InnoDB's deadlock detector from
 * counting a reader that is only looking at a row we hold: the soak saw
 * that "cycle" (reader rolled back as a deadlock victim) whenever a later
 * round waited for a row of an earlier key.  So a later round locks the
 * rows below the highest one held with SKIP LOCKED, and waits only above
 * it; a row passed over that way may belong to a checkout that rolls
 * back, so if one is still there after the last round the whole slow path
 * is retried (RSV__RETRY: rolled back, then run again after a backoff). */
static int take_waiting(rsv_ctx *ctx, rjob *j)
{
    size_t *got = calloc(j->nkeys, sizeof *got); /* rows locked, per key */
    if (!got)
        return ctx_fail(ctx, RSV_ENOMEM, "out of memory");
    size_t top_k = 0;   /* the highest pool row held: its key ... */
    uint64_t top_id = 0; /* ... and id (0: none held yet) */
    int rc = RSV_OK;
    for (int round = 0;; round++) {
        for (size_t k = 0; k < j->nkeys; k++)
            j->keys[k].nids = 0; /* each round reads afresh */
        if ((rc = take(ctx, j, 1)))
            break;
        size_t nread = 0;
        for (size_t k = 0; k < j->nkeys; k++)
            nread += j->keys[k].nids;
        if (nread == 0)
            break;
        /* Where the rows read pass the highest held: the walk's split. */
        id_walk split = {top_k, 0};
        if (top_id) {
            const rkey *key = &j->keys[top_k];
            while (split.i < key->nids && key->ids[split.i] <= top_id)
                split.i++;
        }
        memset(got, 0, j->nkeys * sizeof *got);
        size_t locked = 0, below = 0, below_locked = 0;
        id_walk w = {0, 0};
        if (top_id) {
            for (size_t k = 0; k < split.k; k++)
                below += j->keys[k].nids;
            below += split.i;
            if ((rc = lock_pairs(ctx, j, 1, &w, &split, got, &locked)))
                break;
            below_locked = locked;
        }
        if ((rc = lock_pairs(ctx, j, 0, &w, NULL, got, &locked)))
            break;
        for (size_t q = 0; q < j->nkeys; q++) {
            rkey *key = &j->keys[q];
            key->nids = got[q];
            if (key->nids > 1) /* (ids may be NULL when empty) */
                qsort(key->ids, key->nids, sizeof *key->ids, cmp_id);
            key->first_id = key->nids ? key->ids[0] : 0;
            key->last_id = key->nids ? key->ids[key->nids - 1] : 0;
            /* (never lowered: a row held stays held until the end) */
            if (key->nids &&
                (q > top_k || (q == top_k && key->last_id > top_id))) {
                top_k = q;
                top_id = key->last_id;
            }
        }
        if (locked == nread)
            break;
        if (round + 1 >= WAIT_ROUNDS) {
            if (below_locked < below)
                rc = ctx_fail(ctx, RSV__RETRY, "pool rows of this cart are "
                              "held by other checkouts");
            break;
        }
    }
    free(got);
    return rc;
}

/* Units key k can still give: pool rows read and not yet allocated, plus,
 * on the slow path, what the locked ledger has not issued. */
static int64_t key_cover(const rkey *k, int slow)
{
    int64_t c = (int64_t)(k->nids - k->used);
    if (slow)
        c += k->lv.on_hand - k->lv.issued - k->direct;
    return c;
}

static void key_take(rkey *k, int64_t n)
{
    int64_t from_pool = (int64_t)(k->nids - k->used);
    if (from_pool > n)
        from_pool = n;
    k->used += (size_t)from_pool;
    k->direct += n - from_pool;
    k->take += n;
}

/* The fast path may pass over a short location only when its ledger had
 * nothing left to refill it with (as last committed). */
static int fast_may_skip(const rkey *k)
{
    return k->have_hint && k->hint_avail <= 0;
}

/* The out-of-stock answer for line l. */
static int line_short(rsv_ctx *ctx, rsv_cart *c, size_t l)
{
    const rsv_line *ln = &c->lines[l];
    c->failed_line = l;
    return ctx_fail(ctx, RSV_EOUTOFSTOCK,
                    "line %zu (item %llu, %lld units) cannot be covered at "
                    "its %zu location(s)", l, (unsigned long long)ln->item,
                    (long long)ln->qty, ln->n_locs);
}

/* Decide where every line is held.  Returns RSV_OK, NEED_SLOW or NEED_WIDE
 * (fast path only), or RSV_EOUTOFSTOCK with the cart's failed_line set. */
static int allocate(rsv_ctx *ctx, rjob *j, int slow)
{
    rsv_cart *c = j->cart;
    for (size_t l = 0; l < c->n; l++) {
        rsv_line *ln = &c->lines[l];
        const size_t *lk = &j->line_keys[j->line_off[l]];
        int64_t remaining = ln->qty;
        if (!slow && !j->wide && ln->n_locs > 1 &&
            key_cover(&j->keys[lk[0]], 0) < ln->qty)
            return NEED_WIDE; /* (only the first locations were read) */
        if (!(ln->flags & RSV_LINE_SPLIT)) {
            size_t i;
            for (i = 0; i < ln->n_locs; i++) {
                rkey *k = &j->keys[lk[i]];
                if (key_cover(k, slow) >= ln->qty)
                    break;
                if (!slow && !fast_may_skip(k))
                    return NEED_SLOW;
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
                    return NEED_SLOW;
                if (t > 0) {
                    key_take(k, t);
                    ln->alloc[i] = t;
                    remaining -= t;
                }
            }
        }
        if (remaining > 0) {
            if (!slow)
                return NEED_SLOW;
            return line_short(ctx, c, l);
        }
    }
    return RSV_OK;
}

static int unknown_key(rsv_ctx *ctx, rjob *j, const rkey *k)
{
    for (size_t l = 0; l < j->cart->n; l++)
        for (size_t i = 0; i < j->cart->lines[l].n_locs; i++)
            if (&j->keys[j->line_keys[j->line_off[l] + i]] == k) {
                j->cart->failed_line = l;
                l = j->cart->n;
                break;
            }
    return ctx_fail(ctx, RSV_ENOITEM,
                    "no stock ledger row for shop %llu item %llu location "
                    "%llu: set its stock first (rsv_stock_set)",
                    (unsigned long long)j->shop, (unsigned long long)k->item,
                    (unsigned long long)k->loc);
}

/* ---------------- writing the holds ---------------- */

static int delete_used(rsv_ctx *ctx, rjob *j)
{
    id_walk w = {0, 0};
    uint32_t bucket = 0;
    size_t n;
    while ((n = bind_id_chunk(ctx, j, 0, 0, &w, NULL, &bucket)) > 0) {
        uint64_t affected = 0;
        int rc = sql_run(ctx, b_pool_delete, bucket, NULL, &affected);
        if (rc)
            return rc;
        if (affected != n)
            /* Cannot happen while we hold the row locks; refuse rather
             * than hold units that are not ours. */
            return ctx_fail(ctx, RSV_EDB,
                            "internal: deleted %llu of %zu pool rows",
                            (unsigned long long)affected, n);
    }
    return RSV_OK;
}

static int write_holds(rsv_ctx *ctx, rjob *j)
{
    size_t nholds = 0;
    for (size_t k = 0; k < j->nkeys; k++)
        nholds += j->keys[k].take > 0;
    uint32_t gen = j->prev_found ? j->prev_gen + 1 : 1;
    int64_t ttl_us = j->ttl_ms * 1000;

    int rc = delete_used(ctx, j);
    if (rc)
        return rc;
    if (j->prev_found && j->prev_status == ST_HELD &&
        (rc = holds_settle(ctx, j->shop, j->token, j->len, j->prev_gen,
                           ST_RELEASED)))
        return rc;

    args_reset(&ctx->args);
    arg_i64(&ctx->args, gen);
    arg_i64(&ctx->args, (int64_t)nholds);
    arg_i64(&ctx->args, ttl_us);
    arg_u64(&ctx->args, j->shop);
    arg_bin(&ctx->args, j->token, j->len);
    rc = sql_run(ctx, b_checkout_write, j->prev_found ? 1 : 0, NULL, NULL);
    if (rc) {
        /* Two reserves of one new token raced to create its row: retry,
         * the second attempt finds and locks it. */
        if (ctx->db_errno == ER_DUP_ENTRY)
            return RSV__RETRY;
        return rc;
    }

    uint32_t bucket = sql_bucket(nholds);
    args_reset(&ctx->args);
    size_t emitted = 0;
    const rkey *last = NULL;
    for (size_t k = 0; k < j->nkeys; k++) {
        if (j->keys[k].take <= 0)
            continue;
        last = &j->keys[k];
        arg_u64(&ctx->args, j->shop);
        arg_bin(&ctx->args, j->token, j->len);
        arg_u64(&ctx->args, last->item);
        arg_u64(&ctx->args, last->loc);
        arg_i64(&ctx->args, last->take);
        arg_i64(&ctx->args, gen);
        arg_i64(&ctx->args, ttl_us);
        emitted++;
    }
    for (; emitted < bucket; emitted++) {
        arg_u64(&ctx->args, j->shop);
        arg_bin(&ctx->args, j->token, j->len);
        arg_u64(&ctx->args, last->item);
        arg_u64(&ctx->args, last->loc);
        arg_i64(&ctx->args, last->take);
        arg_i64(&ctx->args, gen);
        arg_i64(&ctx->args, ttl_us);
    }
    return sql_run(ctx, b_holds_insert, bucket, NULL, NULL);
}

static int refuse_claimed(rsv_ctx *ctx, const rjob *j)
{
    if (j->prev_found && j->prev_status == ST_CLAIMED)
        return ctx_fail(ctx, RSV_ECLAIMED,
                        "the checkout was already claimed; use a new token "
                        "for a new checkout");
    return RSV_OK;
}

/* ---------------- where reads start (pool_cursor.c) ---------------- */

static void choose_starts(rsv_ctx *ctx, rjob *j)
{
    for (size_t i = 0; i < j->nkeys; i++) {
        rkey *k = &j->keys[i];
        k->start = j->rescan ? 0
                             : pool_cursor_start(ctx, j->shop, k->item, k->loc);
    }
}

/* After a fast-path read of key k: move its cursor. */
static void note_read(rsv_ctx *ctx, const rjob *j, const rkey *k)
{
    if (k->want > 0 && (k->have_hint || k->start > 0))
        pool_cursor_note(ctx, j->shop, k->item, k->loc,
                         k->have_hint ? k->hint_next : 0, k->hint_avail,
                         k->start, k->first_id, k->last_id);
}

static void note_reads(rsv_ctx *ctx, rjob *j)
{
    for (size_t i = 0; i < j->nkeys; i++)
        note_read(ctx, j, &j->keys[i]);
}

static int refill_due(rsv_ctx *ctx, rjob *j, rkey *k)
{
    return pool_refill_due(ctx, j->shop, k->item, k->loc, k->start,
                           k->hint_next, k->first_id,
                           (int64_t)k->nids < k->want);
}

/* ---------------- the two paths ---------------- */

static int fast_body(rsv_ctx *ctx, void *p)
{
    rjob *j = p;
    job_reset_pass(j);
    choose_starts(ctx, j);
    int rc = take(ctx, j, 0);
    if (rc)
        return rc;
    note_reads(ctx, j);
    /* Fewer rows than asked: the pool is low, or SKIP LOCKED passed over
     * rows other checkouts hold (see RSV_STAT_SHORT_READS). */
    for (size_t k = 0; k < j->nkeys; k++)
        stats_add(ctx, RSV_STAT_SHORT_READS,
                  (int64_t)j->keys[k].nids < j->keys[k].want);
    for (size_t k = 0; k < j->nkeys; k++)
        if (j->keys[k].start > 0 && (int64_t)j->keys[k].nids < j->keys[k].want)
            return NEED_RESCAN; /* rolled back by the frame */
    if ((rc = refuse_claimed(ctx, j)))
        return rc;
    for (size_t k = 0; k < j->nkeys; k++)
        if (!j->keys[k].have_hint)
            return unknown_key(ctx, j, &j->keys[k]);
    rc = allocate(ctx, j, 0);
    if (rc == NEED_SLOW || rc == NEED_WIDE)
        return rc; /* rolled back by the frame: nothing held */
    if (rc)
        return rc;
    return write_holds(ctx, j);
}

/* ---------------- one round trip: the schema's procedures ---------------- */

enum {
    PROC_DONE = 0, PROC_EXISTS = 1, PROC_SHORT = 2, PROC_NO_LEDGER = 3,
    PROC_KEY = 9 /* (cart) the row of a key before the last one read */
};
#define PROC_MAX_KEYS 32  /* keys in one cart CALL (its key list: 4096
                             bytes) */
#define PROC_KEY_TEXT 88  /* "idx,item,location,units,start;" at most */

int b_call_reserve(rsv_buf *s, uint32_t shape)
{
    (void)shape;
    buf_puts(s, "CALL " RSV_PROC_RESERVE "(?, ?, ?, ?, ?, ?, ?)");
    return 0;
}

int b_call_cart(rsv_buf *s, uint32_t shape)
{
    (void)shape;
    buf_puts(s, "CALL " RSV_PROC_CART "(?, ?, ?, ?, ?)");
    return 0;
}

/* How many keys this pass takes units at (0: the procedures cannot do
 * it).  The procedures do what fast_body does for a new checkout: same
 * statements, same lock order, same commit, and they hold at every key
 * exactly what they take there.  That is right when every line takes its
 * first location: in the first pass (see set_wants), or when no line
 * names more than one.  Everything else (re-reserves, the pass that reads
 * every location, big holds, many keys) sends the statements, which
 * handle every case. */
static size_t proc_keys_taken(const rsv_ctx *ctx, const rjob *j)
{
    size_t n = 0;
    int64_t units = 0;
    for (size_t k = 0; k < j->nkeys; k++) {
        const rkey *key = &j->keys[k];
        if (j->wide && key->want_all != key->want_first)
            return 0;
        if (key->want > 0) {
            n++;
            units += key->want;
        }
    }
    if (units > PROC_MAX_UNITS)
        return 0;
    if (n == 1)
        return ctx->has_proc ? 1 : 0;
    return n <= PROC_MAX_KEYS && ctx->has_cart_proc ? n : 0;
}

static int proc_fits(const rsv_ctx *ctx, const rjob *j)
{
    return proc_keys_taken(ctx, j) > 0;
}

/* Errors that mean a procedure cannot be called here (dropped after
 * rsv_open, no EXECUTE privilege, a different version under the name):
 * nothing ran, and the statements still work. */
static int proc_unusable(unsigned int err)
{
    return err == ER_SP_DOES_NOT_EXIST || err == ER_PROCACCESS_DENIED_ERROR ||
           err == ER_SP_WRONG_NO_OF_ARGS || err == ER_NO_SUCH_USER;
}

/* The one key with units to take. */
static rkey *proc_only_key(rjob *j)
{
    for (size_t k = 0; k < j->nkeys; k++)
        if (j->keys[k].want > 0)
            return &j->keys[k];
    return NULL;
}

/* The cart procedure's key list: the keys with units to take, in key
 * order (the order their pool rows are locked in). */
static size_t proc_key_list(const rjob *j, char *out, size_t cap)
{
    size_t len = 0;
    for (size_t k = 0; k < j->nkeys; k++) {
        const rkey *key = &j->keys[k];
        if (key->want <= 0)
            continue;
        len += (size_t)snprintf(out + len, cap - len, "%zu,%llu,%llu,%lld,%llu;",
                                k, (unsigned long long)key->item,
                                (unsigned long long)key->loc,
                                (long long)key->want,
                                (unsigned long long)key->start);
    }
    return len;
}

/* Send the CALL: the one-key procedure, or the cart's.  The answer rows
 * name their key in column 1 (the cart's) or not at all (one key). */
static int proc_call(rsv_ctx *ctx, rjob *j, size_t nkeys)
{
    args_reset(&ctx->args);
    arg_u64(&ctx->args, j->shop);
    arg_bin(&ctx->args, j->token, j->len);
    if (nkeys == 1) {
        const rkey *k = proc_only_key(j);
        arg_u64(&ctx->args, k->item);
        arg_u64(&ctx->args, k->loc);
        arg_i64(&ctx->args, k->want);
        arg_u64(&ctx->args, k->start);
        arg_i64(&ctx->args, j->ttl_ms * 1000);
        return sql_run(ctx, b_call_reserve, 0, "iiiiii", NULL);
    }
    char keys[PROC_MAX_KEYS * PROC_KEY_TEXT];
    size_t len = proc_key_list(j, keys, sizeof keys);
    arg_bin(&ctx->args, keys, len);
    arg_i64(&ctx->args, (int64_t)nkeys);
    arg_i64(&ctx->args, j->ttl_ms * 1000);
    return sql_run(ctx, b_call_cart, 0, "iiiiiii", NULL);
}

/* What the procedure answered for one key (row `row`, from column `col`:
 * units taken, first and last pool id, ledger hints), as the statement
 * path's read would have left it. */
static void proc_key_row(rsv_ctx *ctx, rjob *j, rkey *k, size_t row,
                         size_t col)
{
    rsv_res *r = &ctx->res;
    k->nids = (size_t)RES_I(r, row, col);
    k->first_id = (uint64_t)RES_I(r, row, col + 1);
    k->last_id = (uint64_t)RES_I(r, row, col + 2);
    /* next_unit_id 0: a read from the cursor that succeeded does not read
     * the ledger row (the procedure saves that statement) */
    k->hint_next = (uint64_t)RES_I(r, row, col + 3);
    k->have_hint = k->hint_next != 0;
    k->hint_avail = RES_I(r, row, col + 4);
    note_read(ctx, j, k);
}

/* Sort the answer rows into the keys; *status: the last row's. */
static int proc_answer(rsv_ctx *ctx, rjob *j, size_t nkeys, int64_t *status)
{
    rsv_res *r = &ctx->res;
    if (r->rows < 1 || r->rows > nkeys)
        return ctx_fail(ctx, RSV_EDB, "internal: a reserve procedure "
                        "answered %zu rows for %zu keys", r->rows, nkeys);
    *status = RES_I(r, r->rows - 1, 0);
    if (*status == PROC_EXISTS)
        return RSV_OK;
    for (size_t i = 0; i < r->rows; i++) {
        rkey *k = proc_only_key(j);
        if (nkeys > 1) {
            int64_t idx = RES_I(r, i, 1);
            if ((i + 1 < r->rows && RES_I(r, i, 0) != PROC_KEY) || idx < 0 ||
                (size_t)idx >= j->nkeys || j->keys[idx].want <= 0)
                return ctx_fail(ctx, RSV_EDB, "internal: %s answered kind "
                                "%lld for key %lld", RSV_PROC_CART,
                                (long long)RES_I(r, i, 0), (long long)idx);
            k = &j->keys[idx];
        }
        proc_key_row(ctx, j, k, i, nkeys > 1 ? 2 : 1);
    }
    return RSV_OK;
}

/* After a procedure rolled back because a key came up short: what the
 * statement path decides after its read (fast_body), from what the
 * procedure read.  A read that did not start at the bottom looks again
 * from there, still in one round trip; otherwise allocate() says whether
 * a line's other locations (NEED_WIDE) or the slow path (NEED_SLOW) come
 * next.  The cart procedure reads every key even after a short one, so
 * this sees what the statements' one read would have: in particular every
 * line that may have sold out, for the answer without the ledger lock. */
static int proc_short(rsv_ctx *ctx, rjob *j)
{
    for (size_t k = 0; k < j->nkeys; k++)
        if (j->keys[k].start > 0 && (int64_t)j->keys[k].nids < j->keys[k].want)
            return NEED_RESCAN;
    int rc = allocate(ctx, j, 0);
    return rc == RSV_OK ? NEED_STATEMENTS : rc;
}

static int proc_body(rsv_ctx *ctx, void *p)
{
    rjob *j = p;
    job_reset_pass(j);
    size_t nkeys = proc_keys_taken(ctx, j);
    if (nkeys == 0)
        return NEED_STATEMENTS; /* (the pass that reads every location) */
    choose_starts(ctx, j);
    int rc = proc_call(ctx, j, nkeys);
    if (rc) {
        if (proc_unusable(ctx->db_errno)) {
            if (nkeys == 1)
                ctx->has_proc = 0;
            else
                ctx->has_cart_proc = 0;
            return NEED_STATEMENTS;
        }
        return rc;
    }
    int64_t status = 0;
    if ((rc = proc_answer(ctx, j, nkeys, &status)))
        return rc;
    if (status == PROC_EXISTS || status == PROC_NO_LEDGER)
        return NEED_STATEMENTS; /* rolled back: the statements decide */
    if (status != PROC_DONE && status != PROC_SHORT)
        return ctx_fail(ctx, RSV_EDB, "internal: a reserve procedure "
                        "answered status %lld", (long long)status);
    stats_add(ctx, RSV_STAT_SHORT_READS, status == PROC_SHORT);
    if (status == PROC_SHORT)
        return proc_short(ctx, j); /* rolled back */
    if (ctx->res.rows != nkeys)
        return ctx_fail(ctx, RSV_EDB, "internal: %s answered %zu rows for "
                        "%zu keys", RSV_PROC_CART, ctx->res.rows, nkeys);
    for (size_t i = 0; i < j->nkeys; i++) {
        rkey *key = &j->keys[i];
        key->used = key->nids;
        key->take = key->want;
    }
    for (size_t l = 0; l < j->cart->n; l++)
        j->cart->lines[l].alloc[0] = j->cart->lines[l].qty;
    stats_add(ctx, RSV_STAT_ONE_TRIP, 1);
    return RSV_OK;
}

/* Whether every pool the fast path found short has been refilled since
 * (the locked ledger row's next_unit_id moved past the one the fast read
 * saw).  When a hot pool runs dry, every buyer of that moment queues here
 * for the ledger row; the first refills the pool, and the others, instead
 * of each holding the ledger row through a whole slow path in turn (the
 * convoy that made the slow path's p50 over a second at 128 buyers), let
 * go of it at once and take the fast path again. */
static int refilled_since(const rjob *j)
{
    if (j->back_to_fast >= MAX_BACK_TO_FAST)
        return 0;
    int any = 0;
    for (size_t k = 0; k < j->nkeys; k++) {
        const rkey *key = &j->keys[k];
        if (!key->fast_next)
            continue;
        if (key->lv.next_id <= key->fast_next)
            return 0;
        any = 1;
    }
    return any;
}

/* Remember, for the slow path, what the fast path saw of the pools that
 * came up short. */
static void note_short_reads(rjob *j)
{
    for (size_t k = 0; k < j->nkeys; k++) {
        rkey *key = &j->keys[k];
        key->fast_next = key->have_hint && (int64_t)key->nids < key->want
                             ? key->hint_next : 0;
        key->fast_avail = key->fast_next ? key->hint_avail : 0;
    }
}

/* How the slow path locks the ledger rows.  When a hot pool runs dry, a
 * refill is usually already running, holding the ledger row, and every
 * buyer of that moment comes here.  Waiting FOR UPDATE, they were granted
 * the row one after the other, each only to find the pool refilled and let
 * go: a convoy of a hundred lock hand-offs (seconds at 128 buyers on two
 * cores).  Waiting in share mode, they are all granted the row together
 * when the refill commits.  Worth it only when a refill can come: every
 * pool the fast path found short had units left on its ledger row.  A
 * shared wait that finds nothing refilled costs a second start, locking
 * exclusively (NEED_EXCL); shared holders never upgrade (two would
 * deadlock). */
static int ledger_mode(const rjob *j)
{
    if (j->ledger_excl || j->back_to_fast >= MAX_BACK_TO_FAST)
        return LEDGER_WAIT;
    int any = 0;
    for (size_t k = 0; k < j->nkeys; k++) {
        const rkey *key = &j->keys[k];
        if (!key->fast_next)
            continue;
        if (key->fast_avail <= 0)
            return LEDGER_WAIT;
        any = 1;
    }
    return any ? LEDGER_SHARE : LEDGER_WAIT;
}

/* ---------------- sold out, without the ledger row lock ---------------- */

#define OWN_BIT 0x80000000u /* b_sold_out: a re-reserve's own holds */

static int b_sold_out(rsv_buf *s, uint32_t shape)
{
    uint32_t n = shape & ~OWN_BIT;
    /* One statement: one read view for every ledger row and the
     * subqueries, so a line is judged as of one moment even when its
     * locations are many.  Uncommitted deletes of pool rows and holds
     * still show, so units a transaction in flight may give back count as
     * there.  Rows: (item, location, on_hand - issued, units may come
     * back, the checkout exists).  Units come back from pool rows, expired
     * holds and releases not folded.  The OWN_BIT variant, for a
     * re-reserve, also counts the checkout's own holds there (the slow
     * path releases them first) and answers its status, not whether it
     * exists: one subquery more, planned on every execution, so new
     * checkouts do without. */
    buf_puts(s,
        "SELECT CAST(l.inventory_item_id AS SIGNED), "
        "CAST(l.inventory_group_id AS SIGNED), l.on_hand - l.issued, "
        "EXISTS (SELECT 1 FROM reservation_units u" BY_KEY " WHERE "
        "u.shop_id = l.shop_id AND u.inventory_item_id = l.inventory_item_id "
        "AND u.inventory_group_id = l.inventory_group_id) OR EXISTS (SELECT "
        "1 FROM reserved_quantities h" HOLDS_BY_KEY " WHERE h.shop_id = "
        "l.shop_id AND h.inventory_item_id = l.inventory_item_id AND "
        "h.inventory_group_id = l.inventory_group_id AND h.expires_at <= "
        "NOW(6)) OR EXISTS (SELECT 1 FROM reservation_settlements x" BY_KEY
        " WHERE x.shop_id = l.shop_id AND x.inventory_item_id = "
        "l.inventory_item_id AND x.inventory_group_id = l.inventory_group_id "
        "AND x.kind = 3)");
    if (shape & OWN_BIT)
        buf_puts(s, " OR EXISTS (SELECT 1 FROM reserved_quantities o FORCE "
                    "INDEX (PRIMARY) WHERE o.shop_id = l.shop_id AND "
                    "o.checkout_token = ? AND o.inventory_item_id = "
                    "l.inventory_item_id AND o.inventory_group_id = "
                    "l.inventory_group_id), COALESCE((SELECT c.status FROM "
                    "reservation_checkouts c WHERE c.shop_id = l.shop_id AND "
                    "c.checkout_token = ?), 0)");
    else
        buf_puts(s, ", EXISTS (SELECT 1 FROM reservation_checkouts c WHERE "
                    "c.shop_id = l.shop_id AND c.checkout_token = ?)");
    buf_puts(s, " FROM inventory_levels l WHERE l.shop_id = ? AND ");
    ledger_key_list(s, n); /* (as in the take statement: nothing locked) */
    return 0;
}

/* The read asked about line l (about all its locations). */
static int line_asked(const rjob *j, size_t l)
{
    return line_key(j, l, 0)->so_ask;
}

/* Line l cannot be covered as of the read: every location has its ledger
 * row and nothing that could come back, and what its ledger has not issued
 * falls short of the line (at each location, or at all of them together
 * for a split line).  The slow path could find nothing more. */
static int line_sold_out(const rjob *j, size_t l)
{
    const rsv_line *ln = &j->cart->lines[l];
    int64_t sum = 0;
    for (size_t i = 0; i < ln->n_locs; i++) {
        const rkey *k = line_key(j, l, i);
        if (!k->so_found || k->so_live || k->so_avail >= ln->qty)
            return 0;
        sum += k->so_avail > 0 ? k->so_avail : 0; /* each < qty: no overflow */
    }
    return !(ln->flags & RSV_LINE_SPLIT) || sum < ln->qty;
}

static void mark_line_sold_out(rsv_ctx *ctx, const rjob *j, size_t l, int yes)
{
    for (size_t i = 0; i < j->cart->lines[l].n_locs; i++) {
        const rkey *k = line_key(j, l, i);
        pool_cursor_sold_out(ctx, j->shop, k->item, k->loc, yes);
    }
}

/* The read, about the keys marked so_ask (those of the lines in
 * question; the others cannot make a line sold out); j->prev_found: the
 * OWN_BIT variant, for a re-reserve. */
static int sold_out_body(rsv_ctx *ctx, void *p)
{
    rjob *j = p;
    uint32_t n = 0;
    args_reset(&ctx->args);
    arg_bin(&ctx->args, j->token, j->len);
    if (j->prev_found) /* (its own holds, then its status) */
        arg_bin(&ctx->args, j->token, j->len);
    arg_u64(&ctx->args, j->shop);
    for (size_t k = 0; k < j->nkeys; k++) {
        j->keys[k].so_found = 0;
        if (!j->keys[k].so_ask)
            continue;
        arg_u64(&ctx->args, j->keys[k].item);
        arg_u64(&ctx->args, j->keys[k].loc);
        n++;
    }
    int rc = sql_run(ctx, b_sold_out, n | (j->prev_found ? OWN_BIT : 0),
                     "iiiii", NULL);
    if (rc)
        return rc;
    const rsv_res *r = &ctx->res;
    int undecided = 0; /* a checkout the read may not answer for */
    size_t hk = 0; /* ledger rows come back in key order */
    for (size_t i = 0; i < r->rows; i++) {
        uint64_t item = (uint64_t)RES_I(r, i, 0);
        uint64_t loc = (uint64_t)RES_I(r, i, 1);
        while (hk < j->nkeys &&
               (!j->keys[hk].so_ask || j->keys[hk].item != item ||
                j->keys[hk].loc != loc))
            hk++;
        if (hk == j->nkeys)
            break; /* (not in key order: no row found is the safe side) */
        j->keys[hk].so_found = 1;
        j->keys[hk].so_avail = RES_I(r, i, 2);
        j->keys[hk].so_live = RES_I(r, i, 3) != 0;
        /* A re-reserve before the fast path said so (j->prev_found 0),
         * or a claimed checkout (its answer is RSV_ECLAIMED): the paths
         * with locks decide. */
        undecided |= j->prev_found ? RES_I(r, i, 4) == ST_CLAIMED
                                   : RES_I(r, i, 4) != 0;
    }
    if (undecided)
        return RSV_OK; /* (the pools' marks stay as they were) */
    for (size_t l = 0; l < j->cart->n; l++) {
        if (!line_asked(j, l))
            continue;
        int sold_out = line_sold_out(j, l);
        mark_line_sold_out(ctx, j, l, sold_out);
        if (sold_out)
            return line_short(ctx, j->cart, l);
    }
    return RSV_OK;
}

/* Ask the read about the lines for which suspect(j, l) says so; RSV_OK if
 * none was sold out (or none was asked about). */
static int sold_out_ask(rsv_ctx *ctx, rjob *j,
                        int (*suspect)(rsv_ctx *, const rjob *, size_t))
{
    int any = 0;
    for (size_t k = 0; k < j->nkeys; k++)
        j->keys[k].so_ask = 0;
    for (size_t l = 0; l < j->cart->n; l++) {
        if (!suspect(ctx, j, l))
            continue;
        any = 1;
        for (size_t i = 0; i < j->cart->lines[l].n_locs; i++)
            line_key(j, l, i)->so_ask = 1;
    }
    return any ? txn_run(ctx, 0, sold_out_body, j) : RSV_OK;
}

/* A line some location of which came up short with its ledger unable to
 * cover the line. */
static int came_up_short(rsv_ctx *ctx, const rjob *j, size_t l)
{
    (void)ctx;
    const rsv_line *ln = &j->cart->lines[l];
    for (size_t i = 0; i < ln->n_locs; i++) {
        const rkey *k = line_key(j, l, i);
        if (k->fast_next && k->fast_avail < ln->qty)
            return 1;
    }
    return 0;
}

/* When an item has sold out, every buyer still asking for it came to the
 * slow path, which locks the ledger rows of the whole cart to fold expired
 * holds and releases and to wait for units in flight: the sold-out answers
 * queued on the ledger row one after the other, each for a whole slow
 * path, just when most buyers are asking, and a cart held the rows of its
 * other items meanwhile.  A cart one of whose lines came up short at a
 * location whose ledger could not cover it first asks one consistent read
 * whether the slow path could find anything for that line; if not, the
 * answer is out of stock, as of that read, without a lock. */
static int sold_out_unlocked(rsv_ctx *ctx, rjob *j)
{
    return sold_out_ask(ctx, j, came_up_short);
}

/* And once this context has found a line's pools sold out, the next cart
 * naming them asks the same read first, before the fast path (whose CALL
 * or statements would insert the checkout row only to roll it back): the
 * read alone decides, so pools restocked since only cost that read. */
static int found_sold_out(rsv_ctx *ctx, const rjob *j, size_t l)
{
    const rsv_line *ln = &j->cart->lines[l];
    for (size_t i = 0; i < ln->n_locs; i++) {
        const rkey *k = line_key(j, l, i);
        if (!pool_cursor_was_sold_out(ctx, j->shop, k->item, k->loc))
            return 0;
    }
    return 1;
}

static int sold_out_first(rsv_ctx *ctx, rjob *j)
{
    return sold_out_ask(ctx, j, found_sold_out);
}

static int slow_body(rsv_ctx *ctx, void *p)
{
    rjob *j = p;
    job_reset_pass(j);
    /* 1. the checkout row */
    args_reset(&ctx->args);
    arg_u64(&ctx->args, j->shop);
    arg_bin(&ctx->args, j->token, j->len);
    int rc = sql_run(ctx, b_lock_checkout_row, 0, "iii", NULL);
    if (rc)
        return rc;
    if (ctx->res.rows) {
        j->prev_found = 1;
        j->prev_status = (int)RES_I(&ctx->res, 0, 0);
        j->prev_gen = (uint32_t)RES_I(&ctx->res, 0, 1);
    }
    if ((rc = refuse_claimed(ctx, j)))
        return rc;

    /* 2. ledger rows, ascending key order */
    rsv_level *lv = malloc(j->nkeys * sizeof *lv);
    if (!lv)
        return ctx_fail(ctx, RSV_ENOMEM, "out of memory");
    size_t found = 0;
    int mode = ledger_mode(j);
    rc = ledger_lock(ctx, j->shop, j->pairs, j->nkeys, mode, lv, &found);
    if (rc) {
        free(lv);
        return rc;
    }
    for (size_t k = 0, f = 0; k < j->nkeys; k++) {
        if (f < found && lv[f].item == j->keys[k].item &&
            lv[f].loc == j->keys[k].loc)
            j->keys[k].lv = lv[f++];
        else {
            free(lv);
            return unknown_key(ctx, j, &j->keys[k]);
        }
    }
    free(lv);
    if (refilled_since(j))
        return NEED_FAST;
    if (mode == LEDGER_SHARE) {
        j->ledger_excl = 1;
        return NEED_EXCL;
    }
    /* 3. pool rows, waiting for rows in-flight checkouts hold: they may
     * roll back, and only then is a short pool really short.  This wait
     * comes before the fold below: the fold locks expired holds, and a
     * fast-path reserve holding the pool rows we wait for may itself be
     * waiting for one of those (its own old cart's hold). */
    if ((rc = take_waiting(ctx, j)))
        return rc;
    /* A changed cart may reuse the units its old cart holds: settle the
     * old holds first, so the fold below (which does not skip our own
     * locks) returns them to the ledger. */
    if (j->prev_found && j->prev_status == ST_HELD &&
        (rc = holds_settle(ctx, j->shop, j->token, j->len, j->prev_gen,
                           ST_RELEASED)))
        return rc;
    for (size_t k = 0; k < j->nkeys; k++)
        if ((rc = ledger_fold(ctx, j->shop, &j->keys[k].lv, NULL)))
            return rc;
    if ((rc = allocate(ctx, j, 1)))
        return rc;
    /* Issue what the pool lacked straight from the ledger, and top the
     * pool up so the next buyers take the fast path again. */
    for (size_t k = 0; k < j->nkeys; k++) {
        rkey *key = &j->keys[k];
        int64_t rows = 0;
        int64_t left = key->lv.on_hand - key->lv.issued - key->direct;
        if (left > 0 && (int64_t)key->nids < key->want) {
            int64_t count = 0;
            if ((rc = ledger_pool_count(ctx, j->shop, &key->lv, &count)))
                return rc;
            rows = level_cap(ctx, &key->lv) - (count - (int64_t)key->used);
            if (rows > left)
                rows = left;
            if (rows < 0)
                rows = 0;
        }
        if ((rows || key->direct) &&
            (rc = ledger_issue(ctx, j->shop, &key->lv, rows, key->direct)))
            return rc;
        j->refill_added += rows;
    }
    return write_holds(ctx, j);
}

/* After a fast-path commit: top up pools that are running low, without
 * waiting for a refiller already at work. */
static void refill_ahead(rsv_ctx *ctx, rjob *j)
{
    if (ctx->opts.flags & RSV_OPT_NO_PROACTIVE_REFILL)
        return;
    for (size_t k = 0; k < j->nkeys; k++) {
        rkey *key = &j->keys[k];
        /* only pools this reserve read (not a line's other locations);
         * without a hint, the cursor's slot knows whether the ledger had
         * units left when it was last read */
        if (key->want <= 0)
            continue;
        if (key->have_hint ? key->hint_avail <= 0
                           : !pool_cursor_may_refill(ctx, j->shop, key->item,
                                                     key->loc))
            continue;
        if (!refill_due(ctx, j, key))
            continue;
        int64_t added = 0;
        /* Best effort: the reserve already committed; a failed refill only
         * means the next short reserve refills instead. */
        char msg[sizeof ctx->msg];
        memcpy(msg, ctx->msg, sizeof msg);
        stats_add(ctx, RSV_STAT_INLINE_REFILLS, 1);
        (void)ledger_refill(ctx, j->shop, key->item, key->loc, 1, &added);

        memcpy(ctx->msg, msg, sizeof msg);
        j->refill_added += added;
    }
}

/* The fast path, read again from the bottom of the pool if a read from
 * the context's cursor came up short. */
static int fast_run(rsv_ctx *ctx, rjob *j, int flags, rsv_txn_body body)
{
    int rc = txn_run(ctx, flags, body, j);
    /* each at most once: read from the bottom, read every location */
    for (int again = 0; again < 2; again++) {
        if (rc == NEED_RESCAN && !j->rescan)
            j->rescan = 1;
        else if (rc == NEED_WIDE && !j->wide)
            j->wide = 1;
        else
            break;
        set_wants(j);
        rc = txn_run(ctx, flags, body, j);
    }
    return rc;
}

/* The fast path: in one round trip when the procedure can do it, else by
 * statements. */
static int fast_paths(rsv_ctx *ctx, rjob *j)
{
    int rc = NEED_STATEMENTS;
    if (proc_fits(ctx, j))
        rc = fast_run(ctx, j, TXN_SELF_COMMIT, proc_body);
    if (rc == NEED_STATEMENTS)
        rc = fast_run(ctx, j, 0, fast_body);
    return rc;
}

static int reserve_cart(rsv_ctx *ctx, uint64_t shop_id, const void *token,
                        size_t token_len, rsv_cart *cart, int64_t ttl_ms)
{
    if (!ctx)
        return RSV_EINVAL;
    if (op_begin(ctx, OP_RESERVE, 1, shop_id, token, token_len))
        return ctx->code;
    if (!cart)
        return ctx_fail(ctx, RSV_EINVAL, "cart is NULL");
    cart->failed_line = (size_t)-1;
    int rc = check_token(ctx, token, token_len);
    if (rc)
        return rc;
    if (cart->n == 0)
        return ctx_fail(ctx, RSV_EEMPTY, "the cart has no lines");
    if ((rc = check_ttl(ctx, &ttl_ms)))
        return rc;
    if (txn_caller_open(ctx))
        return ctx_fail(ctx, RSV_EINTXN,
                        "rsv_reserve runs its own transaction; the "
                        "connection is inside one (commit or roll back "
                        "first)");
    rjob j;
    memset(&j, 0, sizeof j);
    j.shop = shop_id;
    j.token = token;
    j.len = token_len;
    j.cart = cart;
    j.ttl_ms = ttl_ms;
    if ((rc = job_build(ctx, &j))) {
        job_free(&j);
        return rc;
    }
    int fast_ok = 0;
    if ((rc = sold_out_first(ctx, &j)) == RSV_OK) {
        rc = fast_paths(ctx, &j);
        fast_ok = rc == RSV_OK;
    }
    while (rc == NEED_SLOW) {
        note_short_reads(&j);
        if ((rc = sold_out_unlocked(ctx, &j)) != RSV_OK)
            break;
        j.wide = 1; /* the slow path considers every location */
        set_wants(&j);
        j.ledger_excl = 0;
        do
            rc = txn_run(ctx, 0, slow_body, &j);
        while (rc == NEED_EXCL);
        if (rc != NEED_FAST) {
            stats_add(ctx, RSV_STAT_SLOW_PATHS, 1);
            break;
        }
        j.back_to_fast++;
        stats_add(ctx, RSV_STAT_BACK_TO_FAST, 1);
        rc = fast_paths(ctx, &j);
        fast_ok = rc == RSV_OK;
    }
    if (fast_ok)
        refill_ahead(ctx, &j);
    if (rc != RSV_OK)
        job_reset_pass(&j); /* no allocation on failure (failed_line kept) */
    job_free(&j);
    return rc ? rc : ctx_ok(ctx);
}

RSV_EXTERN int rsv_reserve(rsv_ctx *ctx, uint64_t shop_id, const void *token,
                           size_t token_len, rsv_cart *cart, int64_t ttl_ms)
{
    return op_end(ctx, reserve_cart(ctx, shop_id, token, token_len, cart,
                                    ttl_ms));
}

RSV_EXTERN int rsv_reserve_one(rsv_ctx *ctx, uint64_t shop_id,
                               const void *token, size_t token_len,
                               uint64_t item_id, uint64_t location_id,
                               int64_t quantity, int64_t ttl_ms)
{
    if (!ctx)
        return RSV_EINVAL;
    rsv_cart cart;
    rsv_line line;
    int64_t alloc = 0;
    uint64_t loc = location_id;
    memset(&cart, 0, sizeof cart);
    memset(&line, 0, sizeof line);
    if (quantity < 1 || quantity > RSV_QUANTITY_MAX) {
        if (op_begin(ctx, OP_RESERVE, 1, shop_id, token, token_len))
            return op_end(ctx, ctx->code);
        return op_end(ctx, ctx_fail(ctx, RSV_EQUANTITY,
                                    "quantity must be 1..%d, not %lld",
                                    RSV_QUANTITY_MAX, (long long)quantity));
    }
    line.item = item_id;
    line.locs = &loc;
    line.n_locs = 1;
    line.qty = quantity;
    line.alloc = &alloc;
    cart.lines = &line;
    cart.n = cart.cap = 1;
    return rsv_reserve(ctx, shop_id, token, token_len, &cart, ttl_ms);
}
