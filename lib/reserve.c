/*
 * reserve.c - holding a cart: the fast path, the slow path, and the
 * statements both share to write the holds.
 *
 * Fast path (one transaction, a fixed number of statements whatever the
 * cart size; first reading each line's first location only, see
 * job_set_wants):
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
 * This file holds both paths, the statements they send and the loop that
 * runs the passes; which pass runs next is decided in reserve_next.c, the
 * job they work on (keys, wants, allocation) is reserve_job.c, the
 * one-round-trip form of the fast path reserve_proc.c, the sold-out answer
 * without the ledger lock sold_out.c.
 *
 * One round trip: a new checkout calls one of the schema's procedures
 * instead, RSV_PROC_RESERVE when it takes units at one (item,
 * location), RSV_PROC_CART at up to 32, which run the statements of
 * the fast path on the server and commit; if they cannot (the checkout
 * exists, a pool is short, no ledger row) they roll back and the
 * statements below take over.  Being on the server, they may also take a
 * key's units straight from its ledger row when no one holds it (SKIP
 * LOCKED), holding it for no round trip; the statements never do, since
 * they would hold it across theirs.
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
 *
 * Waited ledger take, before the slow path, when a new checkout's one key
 * came up short while its ledger row had the units: wait for that row in
 * share mode, give it back as soon as the refill in flight commits and
 * reserve again from the bottom of the pool; if still short, wait for the
 * row exclusively, take the units straight from it and top the pool up.
 * In one CALL each when the procedure can be called, else by the
 * statements here (the slow path's locks, without its waits for pool rows
 * and its folds).  Either way the row is held for one short transaction,
 * where the slow path holds it across a dozen round trips: a crowd that
 * finds a small pool empty at once goes on together after each refill and
 * queues for the row at the speed of a hot row, each of them refilling
 * the pool for the others, instead of running out of time
 * (docs/internals.md section 4).
 */
#include <stdlib.h>
#include <string.h>

#include <mysqld_error.h>

#include "reserve_job.h"

#define DELETE_CHUNK 1024

/* ---------------- statements ---------------- */

#define SLOW_BIT SHAPE_FLAG_A /* b_take: the slow path's variant */

static void pool_part(strbuf *s, uint32_t k, int slow, int first)
{
    buf_printf_u(s, first ? "(SELECT 2, " : " UNION ALL (SELECT 2, ", k,
                 ", CAST(id AS SIGNED), units, 0 FROM rsv_pool WHERE "
                 "shop_id = ? AND item_id = ? AND "
                 "location_id = ? AND id >= ? ORDER BY id LIMIT ?");
    buf_puts(s, slow ? ")" : " FOR UPDATE SKIP LOCKED)");
}

/* shape: number of keys, SLOW_BIT for the slow path's variant.  Columns:
 *   (0, status, generation, hold_count, 0)   the checkout row, locked
 *   (1, item, location, next_unit_id, on_hand - issued)   ledger, unlocked
 *   (2, key index, pool row id, units, 0)    pool rows, locked
 * The slow variant has only the pool parts, and does not lock: the rows it
 * reads are then locked by primary key (take_waiting). */
static int b_take(strbuf *s, uint32_t shape)
{
    uint32_t n = SHAPE_SIZE(shape);
    int slow = (shape & SLOW_BIT) != 0;
    if (!slow) {
        buf_puts(s, "(SELECT 0, status, CAST(generation AS SIGNED), "
                    "hold_count, 0 FROM rsv_checkouts WHERE "
                    "shop_id = ? AND checkout_token = ? FOR UPDATE)");
        buf_puts(s, " UNION ALL (SELECT 1, CAST(l.item_id AS "
                    "SIGNED), CAST(l.location_id AS SIGNED), "
                    "CAST(l.next_unit_id AS SIGNED), l.on_hand - l.issued "
                    "FROM ");
        /* (this part takes no lock: see job_ledger_keys) */
        buf_puts(s, "rsv_ledger l WHERE ");
        job_ledger_keys(s, n);
        buf_puts(s, " AND l.shop_id = ?)");
    }
    for (uint32_t k = 0; k < n; k++)
        pool_part(s, k, slow, slow && k == 0);
    return 0;
}

/* The slow path locks the checkout row on its own, before the ledger rows
 * (lock order 1 then 2), and only then waits for pool rows (3). */
static const char SQL_LOCK_CHECKOUT_ROW[] =
    "SELECT status, CAST(generation AS SIGNED), hold_count FROM "
    "rsv_checkouts WHERE shop_id = ? AND "
    "checkout_token = ? FOR UPDATE";

/* Padding rows repeat the last hold; ON DUPLICATE KEY UPDATE makes the
 * repeat a no-op (holds are one row per key by construction; quantity =
 * quantity rather than VALUES(), which MySQL deprecates). */
static int b_holds_insert(strbuf *s, uint32_t n)
{
    buf_puts(s, "INSERT INTO rsv_holds (shop_id, checkout_token, "
                "item_id, location_id, quantity, generation, "
                "expires_at, created_at) VALUES ");
    for (uint32_t i = 0; i < n; i++)
        buf_puts(s, i ? ",(?,?,?,?,?,?,NOW(6) + INTERVAL ? MICROSECOND,NOW(6))"
                      : "(?,?,?,?,?,?,NOW(6) + INTERVAL ? MICROSECOND,NOW(6))");
    buf_puts(s, " ON DUPLICATE KEY UPDATE quantity = quantity");
    return 0;
}

static int b_checkout_write(strbuf *s, uint32_t update)
{
    if (update)
        buf_puts(s, "UPDATE rsv_checkouts SET status = " SQLV(ST_HELD) ", "
                    "generation = ?, hold_count = ?, expires_at = NOW(6) + "
                    "INTERVAL ? MICROSECOND, updated_at = NOW(6) WHERE "
                    "shop_id = ? AND checkout_token = ?");
    else
        buf_puts(s, "INSERT INTO rsv_checkouts (generation, "
                    "hold_count, expires_at, shop_id, checkout_token, status, "
                    "created_at, updated_at) VALUES (?, ?, NOW(6) + INTERVAL ? "
                    "MICROSECOND, ?, ?, " SQLV(ST_HELD) ", NOW(6), NOW(6))");
    return 0;
}

static int key_push_row(rsv_ctx *ctx, rkey *k, uint64_t id, int64_t units)
{
    if (k->read.nrows == k->read.cap_rows) {
        size_t cap = k->read.cap_rows ? k->read.cap_rows * 2 : 8;
        prow *rows = realloc(k->read.rows, cap * sizeof *rows);
        if (!rows)
            return ctx_fail(ctx, RSV_ENOMEM, "out of memory");
        k->read.rows = rows;
        k->read.cap_rows = cap;
    }
    k->read.rows[k->read.nrows++] = (prow){id, units};
    k->read.units += units;
    return RSV_OK;
}

/* Of key k's rows read, how its allocation from the pool takes them:
 * the first *whole rows entirely (deleted), then *part units of the next
 * one (0: none; that row keeps the rest). */
static void rows_taken(const rkey *k, size_t *whole, int64_t *part)
{
    int64_t left = k->alloc.pool;
    size_t i = 0;
    while (i < k->read.nrows && left >= k->read.rows[i].units)
        left -= k->read.rows[i++].units;
    *whole = i;
    *part = i < k->read.nrows ? left : 0;
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
        arg_u64(&ctx->args, slow ? 0 : j->keys[k].plan.start);
        arg_i64(&ctx->args, j->keys[k].plan.want);
    }
    int rc = sql_run(ctx, b_take, n | (slow ? SLOW_BIT : 0), "iiiii", NULL);
    if (rc)
        return rc;
    sql_res *r = &ctx->res;
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
                ledger_seen_note(ctx, j->shop, item, loc);
                j->keys[hk].read.have_hint = 1;
                j->keys[hk].read.hint_next = (uint64_t)RES_I(r, i, 3);
                j->keys[hk].read.hint_avail = RES_I(r, i, 4);
            }
            break;
        }
        default: {
            size_t k = (size_t)RES_I(r, i, 1);
            if (k < j->nkeys &&
                (rc = key_push_row(ctx, &j->keys[k], (uint64_t)RES_I(r, i, 2),
                                   RES_I(r, i, 3))))
                return rc;
            break;
        }
        }
    }
    for (size_t k = 0; k < j->nkeys; k++)
        if (j->keys[k].read.nrows) {
            j->keys[k].read.first_id = j->keys[k].read.rows[0].id;
            j->keys[k].read.last_id = j->keys[k].read.rows[j->keys[k].read.nrows - 1].id;
        }
    return RSV_OK;
}

static int cmp_row(const void *a, const void *b)
{
    uint64_t x = ((const prow *)a)->id, y = ((const prow *)b)->id;
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
 * the rows its allocation takes whole (rows to delete: rows_taken) or,
 * with read_all, every row read (rows to lock), each as item, location and
 * id, preceded by the key's
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
        size_t whole = key->read.nrows;
        int64_t part;
        if (!read_all)
            rows_taken(key, &whole, &part);
        if (w->i >= whole) {
            w->k++;
            w->i = 0;
            continue;
        }
        if (with_index)
            arg_u64(&ctx->args, w->k);
        arg_u64(&ctx->args, key->item);
        arg_u64(&ctx->args, key->loc);
        arg_u64(&ctx->args, key->read.rows[w->i++].id);
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

/* The rows read, locked by primary key: columns (key index, pool row id,
 * units) of the rows still there.  shape: size bucket, SKIP_BIT to pass over rows
 * other transactions hold instead of waiting for them. */
#define SKIP_BIT SHAPE_FLAG_A
static int b_pool_lock(strbuf *s, uint32_t shape)
{
    buf_puts(s, "SELECT CAST(k.k0 AS SIGNED), CAST(u.id AS SIGNED), u.units "
                "FROM ");
    sql_key_rows(s, 4, SHAPE_SIZE(shape));
    buf_puts(s, "rsv_pool u FORCE INDEX (PRIMARY) ON u.shop_id = ? "
                "AND u.item_id = k.k1 AND u.location_id = "
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
                         "iii", NULL);
        if (rc)
            return rc;
        for (size_t r = 0; r < ctx->res.rows; r++) {
            size_t key = (size_t)RES_I(&ctx->res, r, 0);
            if (key < j->nkeys && got[key] < j->keys[key].read.nrows) {
                j->keys[key].read.rows[got[key]++] =
                    (prow){(uint64_t)RES_I(&ctx->res, r, 1),
                           RES_I(&ctx->res, r, 2)};
                (*locked)++;
            }
        }
    }
    return RSV_OK;
}

/* The slow path's pool read, which waits for rows other checkouts are
 * taking (they may roll back; only then is a short pool really short).
 * The rows are read without locking and then locked by primary key (a
 * blocking range read runs on into another key's rows); a later round
 * waits only above the highest row held and skips the rows below it (the
 * deadlock detector counts SKIP LOCKED readers), so a row passed over and
 * still there after the last round retries the whole slow path.
 * docs/internals.md section 3 says why each of these rules exists. */
static int take_waiting(rsv_ctx *ctx, rjob *j)
{
    size_t *got = calloc(j->nkeys, sizeof *got); /* rows locked, per key */
    if (!got)
        return ctx_fail(ctx, RSV_ENOMEM, "out of memory");
    size_t top_k = 0;   /* the highest pool row held: its key ... */
    uint64_t top_id = 0; /* ... and id (0: none held yet) */
    int rc = RSV_OK;
    for (int round = 0;; round++) {
        for (size_t k = 0; k < j->nkeys; k++) {
            j->keys[k].read.nrows = 0; /* each round reads afresh */
            j->keys[k].read.units = 0;
        }
        if ((rc = take(ctx, j, 1)))
            break;
        size_t nread = 0;
        for (size_t k = 0; k < j->nkeys; k++)
            nread += j->keys[k].read.nrows;
        if (nread == 0)
            break;
        /* Where the rows read pass the highest held: the walk's split. */
        id_walk split = {top_k, 0};
        if (top_id) {
            const rkey *key = &j->keys[top_k];
            while (split.i < key->read.nrows && key->read.rows[split.i].id <= top_id)
                split.i++;
        }
        memset(got, 0, j->nkeys * sizeof *got);
        size_t locked = 0, below = 0, below_locked = 0;
        id_walk w = {0, 0};
        if (top_id) {
            for (size_t k = 0; k < split.k; k++)
                below += j->keys[k].read.nrows;
            below += split.i;
            if ((rc = lock_pairs(ctx, j, 1, &w, &split, got, &locked)))
                break;
            below_locked = locked;
        }
        if ((rc = lock_pairs(ctx, j, 0, &w, NULL, got, &locked)))
            break;
        for (size_t q = 0; q < j->nkeys; q++) {
            rkey *key = &j->keys[q];
            key->read.nrows = got[q];
            if (key->read.nrows > 1) /* (rows may be NULL when empty) */
                qsort(key->read.rows, key->read.nrows, sizeof *key->read.rows,
                      cmp_row);
            /* the units of the rows locked, as they are now */
            key->read.units = 0;
            for (size_t i = 0; i < key->read.nrows; i++)
                key->read.units += key->read.rows[i].units;
            key->read.first_id = key->read.nrows ? key->read.rows[0].id : 0;
            key->read.last_id = key->read.nrows ? key->read.rows[key->read.nrows - 1].id : 0;
            /* (never lowered: a row held stays held until the end) */
            if (key->read.nrows &&
                (q > top_k || (q == top_k && key->read.last_id > top_id))) {
                top_k = q;
                top_id = key->read.last_id;
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

/* Key k has no ledger row: RSV_ENOITEM, naming the first line that asks
 * for it (rsv_cart_failed_line). */
static int unknown_key(rsv_ctx *ctx, rjob *j, const rkey *k)
{
    for (size_t l = 0; l < j->cart->n; l++)
        for (size_t i = 0; i < j->cart->lines[l].n_locs; i++)
            if (&j->keys[j->line_keys[j->line_off[l] + i]] == k) {
                j->cart->failed_line = l;
                l = j->cart->n;
                break;
            }
    return ledger_no_row(ctx, j->shop, k->item, k->loc);
}

/* ---------------- writing the holds ---------------- */

/* The rows the keys' allocations take in part (at most one per key)
 * keep the rest of their units, in one statement for the whole cart:
 * (item, location, id, units taken) per row, padded with id 0, then the
 * shop.  The guard on units is the row lock's: we hold it, so it cannot
 * fail. */
static int b_pool_take_part(strbuf *s, uint32_t n)
{
    buf_puts(s, "UPDATE ");
    sql_key_rows(s, 4, n);
    buf_puts(s, "rsv_pool u FORCE INDEX (PRIMARY) ON u.shop_id = ? AND "
                "u.item_id = k.k0 AND u.location_id = k.k1 AND u.id = k.k2 "
                "SET u.units = u.units - k.k3 WHERE u.units > k.k3");
    return 0;
}

/* Take the units allocated from the pool: the rows taken whole are
 * deleted, the ones taken in part keep the rest. */
static int take_rows(rsv_ctx *ctx, rjob *j)
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
    args_reset(&ctx->args);
    size_t parts = 0;
    const rkey *last = NULL;
    uint64_t last_id = 0;
    for (size_t k = 0; k < j->nkeys; k++) {
        const rkey *key = &j->keys[k];
        size_t whole;
        int64_t part;
        rows_taken(key, &whole, &part);
        if (part == 0)
            continue;
        arg_u64(&ctx->args, key->item);
        arg_u64(&ctx->args, key->loc);
        arg_u64(&ctx->args, key->read.rows[whole].id);
        arg_i64(&ctx->args, part);
        last = key;
        last_id = key->read.rows[whole].id;
        parts++;
    }
    if (parts == 0)
        return RSV_OK;
    uint32_t padded = sql_bucket(parts);
    for (size_t p = parts; p < padded; p++) {
        arg_u64(&ctx->args, last->item);
        arg_u64(&ctx->args, last->loc);
        arg_u64(&ctx->args, 0); /* pool ids start at 1: matches nothing */
        arg_i64(&ctx->args, 0);
    }
    arg_u64(&ctx->args, j->shop);
    uint64_t affected = 0;
    int rc = sql_run(ctx, b_pool_take_part, padded, NULL, &affected);
    if (rc)
        return rc;
    if (affected != parts)
        return ctx_fail(ctx, RSV_EDB, "internal: %llu of %zu pool rows "
                        "taken in part kept the rest of their units (row "
                        "%llu ...)", (unsigned long long)affected, parts,
                        (unsigned long long)last_id);
    return RSV_OK;
}

/* One row of the holds' INSERT (b_holds_insert). */
static void hold_args(rsv_ctx *ctx, const rjob *j, const rkey *k, int64_t gen,
                      int64_t ttl_us)
{
    arg_u64(&ctx->args, j->shop);
    arg_bin(&ctx->args, j->token, j->len);
    arg_u64(&ctx->args, k->item);
    arg_u64(&ctx->args, k->loc);
    arg_i64(&ctx->args, k->alloc.take);
    arg_i64(&ctx->args, gen);
    arg_i64(&ctx->args, ttl_us);
}

static int write_holds(rsv_ctx *ctx, rjob *j)
{
    size_t nholds = 0;
    for (size_t k = 0; k < j->nkeys; k++)
        nholds += j->keys[k].alloc.take > 0;
    uint32_t gen = j->prev_found ? j->prev_gen + 1 : 1;
    int64_t ttl_us = j->ttl_ms * 1000;

    int rc = take_rows(ctx, j);
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

    /* padded to a power of two by repeating the last hold (the ON
     * DUPLICATE KEY UPDATE writes it again, unchanged) */
    uint32_t bucket = sql_bucket(nholds);
    args_reset(&ctx->args);
    const rkey *last = NULL;
    for (size_t k = 0; k < j->nkeys; k++) {
        if (j->keys[k].alloc.take > 0) {
            last = &j->keys[k];
            hold_args(ctx, j, last, gen, ttl_us);
        }
    }
    for (size_t emitted = nholds; emitted < bucket; emitted++)
        hold_args(ctx, j, last, gen, ttl_us);
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

struct pool_probe {
    uint64_t shop;
    ledger_row lv;
    int64_t count;
};

static int probe_body(rsv_ctx *ctx, void *p)
{
    struct pool_probe *pp = p;
    return ledger_pool_count(ctx, pp->shop, &pp->lv, &pp->count);
}

/* Whether to top key k's pool up after this reserve's commit.  A count
 * the cursor cache asks for is one plain read: alone with autocommit on,
 * else in a transaction of its own (a plain read would leave one open on
 * the application's connection). */
static int refill_due(rsv_ctx *ctx, rjob *j, rkey *k)
{
    int due = pool_refill_due(ctx, j->shop, k->item, k->loc, k->plan.start,
                              k->read.hint_next, k->read.first_id,
                              k->read.units, k->read.units < k->plan.want);
    if (due != REFILL_COUNT)
        return due == REFILL_YES;
    struct pool_probe pp;
    memset(&pp, 0, sizeof pp);
    pp.shop = j->shop;
    pp.lv.item = k->item;
    pp.lv.loc = k->loc;
    ctx_error said;
    ctx_error_save(ctx, &said);
    int rc = txn_run(ctx, TXN_ONE_READ, probe_body, &pp);
    ctx_error_restore(ctx, &said);
    return rc != RSV_OK || pp.count < ctx->opts.refill_low_water;
}

/* ---------------- the two paths ---------------- */

static int fast_body(rsv_ctx *ctx, void *p)
{
    rjob *j = p;
    job_reset_pass(j);
    job_choose_starts(ctx, j);
    int rc = take(ctx, j, 0);
    if (rc)
        return rc;
    job_note_reads(ctx, j);
    /* Fewer rows than asked: the pool is low, or SKIP LOCKED passed over
     * rows other checkouts hold (see RSV_STAT_SHORT_READS). */
    for (size_t k = 0; k < j->nkeys; k++)
        stats_add(ctx, RSV_STAT_SHORT_READS,
                  j->keys[k].read.units < j->keys[k].plan.want);
    for (size_t k = 0; k < j->nkeys; k++)
        if (j->keys[k].plan.start > 0 && j->keys[k].read.units < j->keys[k].plan.want)
            return pass_end(j, END_CURSOR_SHORT); /* rolled back */
    if ((rc = refuse_claimed(ctx, j)))
        return rc;
    for (size_t k = 0; k < j->nkeys; k++)
        if (!j->keys[k].read.have_hint)
            return unknown_key(ctx, j, &j->keys[k]);
    /* (a pass end is rolled back by the frame: nothing held) */
    if ((rc = job_allocate(ctx, j, 0)))
        return rc;
    return write_holds(ctx, j);
}

/* Lock the checkout row on its own (lock order 1), and note what it is. */
static int lock_checkout_row(rsv_ctx *ctx, rjob *j)
{
    args_reset(&ctx->args);
    arg_u64(&ctx->args, j->shop);
    arg_bin(&ctx->args, j->token, j->len);
    int rc = sql_fixed(ctx, SQL_LOCK_CHECKOUT_ROW, "iii", NULL);
    if (rc == RSV_OK && ctx->res.rows) {
        j->prev_found = 1;
        j->prev_status = (int)RES_I(&ctx->res, 0, 0);
        j->prev_gen = (uint32_t)RES_I(&ctx->res, 0, 1);
    }
    return rc;
}

static int slow_body(rsv_ctx *ctx, void *p)
{
    rjob *j = p;
    job_reset_pass(j);
    /* 1. the checkout row */
    int rc = lock_checkout_row(ctx, j);
    if (rc)
        return rc;
    if ((rc = refuse_claimed(ctx, j)))
        return rc;

    /* 2. ledger rows, ascending key order */
    ledger_row *lv = malloc(j->nkeys * sizeof *lv);
    if (!lv)
        return ctx_fail(ctx, RSV_ENOMEM, "out of memory");
    size_t found = 0;
    int mode = reserve_ledger_mode(j);
    rc = ledger_lock(ctx, j->shop, j->pairs, j->nkeys, mode, lv, &found);
    if (rc) {
        free(lv);
        return rc;
    }
    for (size_t k = 0, f = 0; k < j->nkeys; k++) {
        if (f < found && lv[f].item == j->keys[k].item &&
            lv[f].loc == j->keys[k].loc)
            j->keys[k].slow.lv = lv[f++];
        else {
            free(lv);
            return unknown_key(ctx, j, &j->keys[k]);
        }
    }
    free(lv);
    if (reserve_refilled_since(j))
        return pass_end(j, END_REFILLED);
    if (mode == LEDGER_SHARE)
        return pass_end(j, END_SHARED_IN_VAIN);
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
        if ((rc = ledger_fold(ctx, j->shop, &j->keys[k].slow.lv, INT64_MAX, NULL)))
            return rc;
    if ((rc = job_allocate(ctx, j, 1)))
        return rc;
    /* Issue what the pool lacked straight from the ledger, and top the
     * pool up so the next buyers take the fast path again. */
    for (size_t k = 0; k < j->nkeys; k++) {
        rkey *key = &j->keys[k];
        int64_t units = 0;
        int64_t left = key->slow.lv.on_hand - key->slow.lv.issued - key->alloc.direct;
        if (key->read.units < key->plan.want &&
            (rc = ledger_pool_room(ctx, j->shop, &key->slow.lv,
                                   key->alloc.pool, left, &units)))
            return rc;
        if ((units || key->alloc.direct) &&
            (rc = ledger_issue(ctx, j->shop, &key->slow.lv, units, key->alloc.direct)))
            return rc;
    }
    return write_holds(ctx, j);
}

/* The waited take in share mode by statements, first part: wait for the
 * key's ledger row in share mode in a transaction of its own, rolled back
 * at once (END_REFILLED: it wrote nothing), giving the lock back: a refill
 * in flight holds the row, and every buyer waiting so goes on together
 * when it commits.  Holding the shared lock through the reserve would
 * hold the next refill back behind every buyer's commit.  END_SHORT when
 * the key has no ledger row. */
static int ledger_wait_body(rsv_ctx *ctx, void *p)
{
    rjob *j = p;
    job_reset_pass(j);
    ledger_row lv;
    size_t found = 0;
    int rc = ledger_lock(ctx, j->shop, j->pairs, 1, LEDGER_SHARE, &lv,
                         &found);
    if (rc)
        return rc;
    return pass_end(j, found ? END_REFILLED : END_SHORT);
}

/* The waited take by statements (PASS_LEDGER without the procedure): what
 * RSV_PROC_RESERVE does with p_wait.  In share mode (the first waited
 * take, after ledger_wait_body) the fast path's statements, the pool read
 * from its bottom; exclusively, in the slow path's lock order (1 the
 * checkout row, 2 the ledger row waited for, 3 the top-up's new pool
 * rows, 4 the hold, 1 the new checkout row), the units straight from the
 * ledger row, and the pool topped up to its cap from what is left, as
 * RSV_PROC_TOP_UP mints, with no fold, as in the procedure.  Either way
 * all the units or none (END_SHORT, also when the checkout exists or the
 * key has no ledger row). */
static int ledger_take_body(rsv_ctx *ctx, void *p)
{
    rjob *j = p;
    job_reset_pass(j);
    rkey *k = &j->keys[0];
    int rc;
    if (j->st.ledger_tried == 1) {
        /* (the fast path's read locks the checkout row too) */
        k->plan.start = 0;
        if ((rc = take(ctx, j, 0)))
            return rc;
        if (j->prev_found)
            return pass_end(j, END_SHORT);
        job_note_reads(ctx, j);
        k->read.minted = -1; /* (no top-up: the refill after the commit) */
        if ((rc = job_allocate(ctx, j, 0)))
            return rc;
        return write_holds(ctx, j);
    }
    if ((rc = lock_checkout_row(ctx, j)))
        return rc;
    if (j->prev_found)
        return pass_end(j, END_SHORT);
    ledger_row lv;
    size_t found = 0;
    if ((rc = ledger_lock(ctx, j->shop, j->pairs, 1, LEDGER_WAIT, &lv,
                          &found)))
        return rc;
    if (!found)
        return pass_end(j, END_SHORT);
    int64_t left = lv.on_hand - lv.issued - k->plan.want;
    /* (the row as read, locked: the slow path's hint) */
    k->read.have_hint = 1;
    k->read.hint_next = lv.next_id;
    k->read.hint_avail = lv.on_hand - lv.issued;
    if (left < 0)
        return pass_end(j, END_SHORT);
    int64_t mint = 0;
    if ((rc = ledger_pool_room(ctx, j->shop, &lv, 0, left, &mint)))
        return rc;
    if (mint > PROC_TOP_UP_MAX)
        mint = PROC_TOP_UP_MAX;
    if ((rc = ledger_issue(ctx, j->shop, &lv, mint, k->plan.want)))
        return rc;
    k->read.ledger_took = k->plan.want;
    k->read.minted = mint;
    if ((rc = job_allocate(ctx, j, 0)))
        return rc;
    return write_holds(ctx, j);
}

/* After a waited take committed, by either copy: the counters, and the
 * pending top-up it did when it held the ledger row (minted -1: it did
 * not, as a reserve from the pool by statements never does). */
static void ledger_take_done(rsv_ctx *ctx, rjob *j)
{
    const rkey *k = &j->keys[0];
    stats_add(ctx, RSV_STAT_LEDGER_TAKES, k->read.ledger_took > 0);
    stats_add(ctx, RSV_STAT_INLINE_REFILLS, k->read.minted > 0);
    if (k->read.minted >= 0 &&
        pool_refill_pending(ctx, j->shop, k->item, k->loc))
        pool_refill_done(ctx, j->shop, k->item, k->loc, 0);
    ledger_seen_note(ctx, j->shop, k->item, k->loc);
}

/* After a fast-path commit: top up pools that are running low, without
 * waiting for a refiller already at work. */
void reserve_refill_ahead(rsv_ctx *ctx, rjob *j)
{
    if (ctx->opts.flags & RSV_OPT_NO_PROACTIVE_REFILL)
        return;
    for (size_t k = 0; k < j->nkeys; k++) {
        rkey *key = &j->keys[k];
        /* only pools this reserve read (not a line's other locations);
         * without a hint, the cursor's slot knows whether the ledger had
         * units left when it was last read */
        if (key->plan.want <= 0 || key->read.ledger_took > 0)
            continue; /* (a key served by its ledger row took no pool row) */
        if (key->read.have_hint ? key->read.hint_avail <= 0
                           : !pool_cursor_may_refill(ctx, j->shop, key->item,
                                                     key->loc))
            continue;
        if (!refill_due(ctx, j, key))
            continue;
        int64_t added = 0;
        int skipped = 0;
        /* Best effort: the reserve already committed; a failed refill only
         * means the next short reserve refills instead. */
        ctx_error said;
        ctx_error_save(ctx, &said);
        stats_add(ctx, RSV_STAT_INLINE_REFILLS, 1);
        (void)ledger_refill(ctx, j->shop, key->item, key->loc, 1, &added,
                            &skipped);
        /* found the row held: left to this context's next procedure */
        pool_refill_done(ctx, j->shop, key->item, key->loc, skipped);
        ctx_error_restore(ctx, &said);
    }
}

/* A pass that waits for the ledger rows of the job's keys (the slow path,
 * the waited take): counted per key before it runs (key_stats.c). */
static void note_refill_waits(rsv_ctx *ctx, const rjob *j)
{
    for (size_t k = 0; k < j->nkeys; k++)
        if (j->keys[k].plan.want > 0)
            key_stats_add(&ctx->stats, j->shop, j->keys[k].item,
                          j->keys[k].loc, RSV_KEY_REFILL_WAITS, 1);
}

static int run_pass(rsv_ctx *ctx, rjob *j, rpass pass)
{
    switch (pass) {
    case PASS_SOLD_OUT:
        return sold_out_read(ctx, j);
    case PASS_CALL:
        return txn_run(ctx, TXN_SELF_COMMIT, reserve_proc_body, j);
    case PASS_STATEMENTS:
        return txn_run(ctx, 0, fast_body, j);
    case PASS_SLOW: {
        note_refill_waits(ctx, j);
        int rc = txn_run(ctx, 0, slow_body, j);
        int again = rc == RSV__PASS_ENDED && (j->end == END_REFILLED ||
                                         j->end == END_SHARED_IN_VAIN);
        stats_add(ctx, RSV_STAT_SLOW_PATHS, !again);
        stats_add(ctx, RSV_STAT_BACK_TO_FAST,
                  rc == RSV__PASS_ENDED && j->end == END_REFILLED);
        return rc;
    }
    case PASS_REFILL:
        reserve_refill_ahead(ctx, j);
        return RSV_OK;
    case PASS_LEDGER: {
        note_refill_waits(ctx, j);
        int rc = pass_end(j, END_NO_PROC);
        if (proc_usable(ctx, PROC_RESERVE))
            rc = txn_run(ctx, TXN_SELF_COMMIT, reserve_proc_ledger_body, j);
        if (rc == RSV__PASS_ENDED && j->end == END_NO_PROC) {
            rc = RSV_OK;
            if (j->st.ledger_tried == 1) {
                rc = txn_run(ctx, 0, ledger_wait_body, j);
                if (rc == RSV__PASS_ENDED && j->end == END_REFILLED)
                    rc = RSV_OK; /* the wait is over: the take follows */
            }
            if (rc == RSV_OK)
                rc = txn_run(ctx, 0, ledger_take_body, j);
        }
        if (rc == RSV_OK)
            ledger_take_done(ctx, j);
        return rc;
    }
    default:
        return ctx_fail(ctx, RSV_EDB, "internal: reserve pass %d", pass);
    }
}

/* Remember, for the slow path, what the last fast read saw of the pools
 * that came up short (kept across passes: the slow path compares). */
static void note_short_reads(rjob *j)
{
    for (size_t k = 0; k < j->nkeys; k++) {
        rkey *key = &j->keys[k];
        key->slow.fast_next = key->read.have_hint && key->read.units < key->plan.want
                             ? key->read.hint_next : 0;
        key->slow.fast_avail = key->slow.fast_next ? key->read.hint_avail : 0;
    }
}

/* The facts reserve_next() decides on (docs/internals.md section 2.3),
 * gathered after each pass; batch.c asks them for a batch entry too. */
void reserve_facts(rsv_ctx *ctx, rjob *j, rend end, rfacts *f)
{
    if (end == END_SHORT)
        note_short_reads(j);
    f->proc_fits = reserve_proc_fits(ctx, j);
    f->ledger_fits = end == END_SHORT && reserve_ledger_fits(j);
    f->marked_sold_out = 0;
    f->short_unsure = 0;
    for (size_t l = 0; l < j->cart->n; l++) {
        f->marked_sold_out |= end == END_FINAL && sold_out_marked(ctx, j, l);
        f->short_unsure |= end == END_SHORT && sold_out_unsure(j, l);
    }
}

/* Run passes until reserve_next() says done (reserve_next.c decides). */
static int reserve_run(rsv_ctx *ctx, rjob *j)
{
    rpass pass = PASS_START;
    int rc = RSV_OK;
    for (;;) {
        rend end = rc == RSV__PASS_ENDED ? j->end : END_FINAL;
        rfacts f;
        reserve_facts(ctx, j, end, &f);
        rstate before = j->st;
        rpass next = reserve_next(&j->st, pass, rc, end, &f);
        if (next == PASS_DONE)
            break;
        if (j->st.wide != before.wide)
            job_set_wants(j);
        pass = next;
        rc = run_pass(ctx, j, pass);
    }
    if (rc == RSV__PASS_ENDED)
        return ctx_fail(ctx, RSV_EDB, "internal: reserve pass %d ended "
                        "with %d and nothing next", pass, j->end);
    return rc;
}

static int reserve_cart(rsv_ctx *ctx, uint64_t shop_id, const void *token,
                        size_t token_len, rsv_cart *cart, int64_t ttl_ms)
{
    if (!ctx)
        return RSV_EINVAL;
    int began = op_begin(ctx, RSV_OP_RESERVE, 1, shop_id, token, token_len);
    if (began)
        return began;
    if (cart)
        cart->failed_line = (size_t)-1;
    call_args a = {.kind = CALL_RESERVE, .token = token,
                   .token_len = token_len, .cart = cart, .ttl_ms = ttl_ms};
    int rc = check_call(ctx, &a);
    if (rc)
        return rc;
    ttl_ms = ttl_or_default(ctx, ttl_ms);
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
    rc = reserve_run(ctx, &j);
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
    cart_line line;
    int64_t alloc = 0;
    uint64_t loc = location_id;
    memset(&cart, 0, sizeof cart);
    memset(&line, 0, sizeof line);
    call_args a = {.kind = CALL_RESERVE_ONE, .token = token,
                   .token_len = token_len, .quantity = quantity,
                   .ttl_ms = ttl_ms};
    char msg[ARG_MSG_MAX];
    int bad = call_check(&a, msg);
    if (bad) {
        int began = op_begin(ctx, RSV_OP_RESERVE, 1, shop_id, token, token_len);
        if (began)
            return op_end(ctx, began);
        return op_end(ctx, ctx_fail(ctx, bad, "%s", msg));
    }
    cart_one_line(&cart, &line, item_id, &loc, quantity, &alloc);
    return rsv_reserve(ctx, shop_id, token, token_len, &cart, ttl_ms);
}
