/*
 * ledger.c - everything done under the ledger row lock: locking ledger
 * rows, folding settled and expired holds back into the ledger, minting
 * and deleting pool rows, and refilling a pool in its own transaction.
 *
 * The ledger row (rsv_ledger) is the replenishment lock: whoever
 * holds it is the only one minting pool rows or folding for that key, so
 * concurrent refillers never issue more than on_hand allows.  Holders of
 * the ledger lock never wait for pool, hold or settlement rows: they use
 * SKIP LOCKED and leave locked rows to the next fold (see the lock order in
 * internal.h).
 */
#include <stdlib.h>

#include "internal.h"

#define FOLD_BATCH TOKEN_BATCH
#define FOLD_MAX_BATCHES 8

int ledger_no_row(rsv_ctx *ctx, uint64_t shop, uint64_t item, uint64_t loc)
{
    return ctx_fail(ctx, RSV_ENOITEM,
                    "no stock ledger row for shop %llu item %llu location "
                    "%llu: set its stock first (rsv_stock_set)",
                    (unsigned long long)shop, (unsigned long long)item,
                    (unsigned long long)loc);
}

int64_t ledger_cap(const rsv_ctx *ctx, const ledger_row *lv)
{
    return lv->cap > 0 ? lv->cap : ctx->opts.pool_cap;
}

/* b_lock's shape: a bucket of keys, and how it locks */
#define LOCK_SKIP SHAPE_FLAG_A  /* FOR UPDATE SKIP LOCKED */
#define LOCK_SHARE SHAPE_FLAG_B /* LOCK IN SHARE MODE */

static int b_lock(strbuf *s, uint32_t shape)
{
    uint32_t n = SHAPE_SIZE(shape);
    /* Joined in the (ascending) order of the keys given: that is the
     * order the rows are locked in. */
    buf_puts(s, "SELECT CAST(l.item_id AS SIGNED), "
                "CAST(l.location_id AS SIGNED), l.on_hand, l.issued, "
                "CAST(l.next_unit_id AS SIGNED), COALESCE(l.pool_cap, 0) "
                "FROM ");
    sql_key_rows(s, 2, n);
    buf_puts(s, "rsv_ledger l FORCE INDEX (PRIMARY) ON l.shop_id = ? AND "
                "l.item_id = k.k0 AND l.location_id = k.k1 "
                "ORDER BY l.item_id, l.location_id ");
    buf_puts(s, shape & LOCK_SKIP    ? "FOR UPDATE SKIP LOCKED"
                : shape & LOCK_SHARE ? "LOCK IN SHARE MODE"
                                     : "FOR UPDATE");
    return 0;
}

int ledger_lock(rsv_ctx *ctx, uint64_t shop, const uint64_t *keys,
                size_t nkeys, int mode, ledger_row *rows, size_t *found)
{
    uint32_t bucket = sql_bucket(nkeys);
    args_reset(&ctx->args);
    for (uint32_t i = 0; i < bucket; i++) {
        size_t k = i < nkeys ? i : nkeys - 1; /* pad with the last key */
        arg_u64(&ctx->args, keys[2 * k]);
        arg_u64(&ctx->args, keys[2 * k + 1]);
    }
    arg_u64(&ctx->args, shop);
    uint32_t how = mode == LEDGER_SKIP    ? LOCK_SKIP
                   : mode == LEDGER_SHARE ? LOCK_SHARE
                                          : 0;
    int rc = sql_run(ctx, b_lock, bucket | how, "iiiiii", NULL);
    if (rc)
        return rc;
    sql_res *r = &ctx->res;
    size_t n = 0;
    for (size_t i = 0; i < r->rows && n < nkeys; i++) {
        uint64_t item = (uint64_t)RES_I(r, i, 0);
        uint64_t loc = (uint64_t)RES_I(r, i, 1);
        /* the padding repeats the last key: rows come sorted, skip it */
        if (n > 0 && rows[n - 1].item == item && rows[n - 1].loc == loc)
            continue;
        rows[n].item = item;
        rows[n].loc = loc;
        rows[n].on_hand = RES_I(r, i, 2);
        rows[n].issued = RES_I(r, i, 3);
        rows[n].next_id = (uint64_t)RES_I(r, i, 4);
        rows[n].cap = RES_I(r, i, 5);
        n++;
    }
    *found = n;
    return RSV_OK;
}

int ledger_lock_key(rsv_ctx *ctx, uint64_t shop, const uint64_t key[2],
                    int skip, ledger_row *lv, int *held)
{
    size_t found = 0;
    *held = 0;
    int rc = ledger_lock(ctx, shop, key, 1, skip ? LEDGER_SKIP : LEDGER_WAIT,
                         lv, &found);
    if (rc)
        return rc;
    if (found == 0 && !skip)
        return ledger_no_row(ctx, shop, key[0], key[1]);
    *held = found == 1;
    return RSV_OK;
}

/* ---- fold: expired holds and settlements back into the ledger ---- */

/* Expired holds are found with a plain (consistent) read of the expiry
 * index and only then locked, by primary key, with SKIP LOCKED.  A locking
 * read through the secondary index would keep its lock on the index entry
 * of every hold it skips (one its checkout is settling right now), and
 * that checkout's DELETE of its own hold would then wait for us: a
 * deadlock, or a stall until the lock-wait timeout. */
static const char SQL_REAP_CANDIDATES[] =
    "SELECT checkout_token FROM rsv_holds "
    "WHERE shop_id = ? AND item_id = ? AND "
    "location_id = ? AND expires_at <= NOW(6) "
    "ORDER BY expires_at LIMIT ?";

static void hold_keys_on(strbuf *s)
{
    buf_puts(s, "rsv_holds h FORCE INDEX (PRIMARY) ON h.shop_id = ? AND "
                "h.checkout_token = k.k0 AND h.item_id = ? AND "
                "h.location_id = ?");
}

/* Still expired (the checkout may have extended or settled it since the
 * read above). */
static int b_reap_lock(strbuf *s, uint32_t n)
{
    buf_puts(s, "SELECT h.checkout_token, h.quantity FROM ");
    sql_key_rows(s, 1, n);
    hold_keys_on(s);
    buf_puts(s, " WHERE h.expires_at <= NOW(6) FOR UPDATE SKIP LOCKED");
    return 0;
}

static int b_reap_delete(strbuf *s, uint32_t n)
{
    buf_puts(s, "DELETE h FROM ");
    sql_key_rows(s, 1, n);
    hold_keys_on(s);
    return 0;
}

static const char SQL_SETTLE_SELECT[] =
    "SELECT checkout_token, CAST(generation AS SIGNED), kind, "
    "quantity FROM rsv_journal WHERE shop_id = ? AND "
    "item_id = ? AND location_id = ? "
    "LIMIT ? FOR UPDATE SKIP LOCKED";

static int b_settle_delete(strbuf *s, uint32_t n)
{
    buf_puts(s, "DELETE x FROM ");
    sql_key_rows(s, 2, n);
    buf_puts(s, "rsv_journal x FORCE INDEX (PRIMARY) ON x.shop_id = ? AND "
                "x.item_id = ? AND x.location_id = ? AND "
                "x.checkout_token = k.k0 AND x.generation = k.k1");
    return 0;
}

static const char SQL_LEDGER_UPDATE[] =
    "UPDATE rsv_ledger SET on_hand = on_hand - ?, "
    "issued = issued - ? + ?, next_unit_id = next_unit_id + ?, "
    "updated_at = NOW(6) WHERE shop_id = ? AND "
    "item_id = ? AND location_id = ?";

static void key_args(rsv_ctx *ctx, uint64_t shop, const ledger_row *lv)
{
    arg_u64(&ctx->args, shop);
    arg_u64(&ctx->args, lv->item);
    arg_u64(&ctx->args, lv->loc);
}

/* Apply a change to the locked ledger row: on_hand -= taken,
 * issued += issue - returned, next_unit_id += minted. */
int ledger_update(rsv_ctx *ctx, uint64_t shop, ledger_row *lv,
                        int64_t taken, int64_t returned, int64_t issue,
                        int64_t minted)
{
    args_reset(&ctx->args);
    arg_i64(&ctx->args, taken);
    arg_i64(&ctx->args, returned);
    arg_i64(&ctx->args, issue);
    arg_i64(&ctx->args, minted);
    key_args(ctx, shop, lv);
    int rc = sql_fixed(ctx, SQL_LEDGER_UPDATE, NULL, NULL);
    if (rc)
        return rc;
    lv->on_hand -= taken;
    lv->issued += issue - returned;
    lv->next_id += (uint64_t)minted;
    return RSV_OK;
}

/* Run a statement over the batch's keys: (token) for holds, (token,
 * generation) for settlements. */
static int fold_keys(rsv_ctx *ctx, uint64_t shop, const ledger_row *lv,
                     const token_list *fr, int with_gen, sql_builder build,
                     const char *spec)
{
    args_reset(&ctx->args);
    uint32_t bucket = args_tokens(&ctx->args, fr, with_gen);
    key_args(ctx, shop, lv);
    return sql_run(ctx, build, bucket, spec, NULL);
}

static int reap_batch(rsv_ctx *ctx, uint64_t shop, const ledger_row *lv,
                      int64_t limit, token_list *fr, int64_t *units,
                      int64_t *holds)
{
    args_reset(&ctx->args);
    key_args(ctx, shop, lv);
    arg_i64(&ctx->args, limit);
    *units = *holds = 0;
    int rc = sql_fixed(ctx, SQL_REAP_CANDIDATES, "b", NULL);
    if (rc)
        return rc;
    sql_res *r = &ctx->res;
    size_t seen = r->rows; /* a short read ends the fold, not a skip */
    tokens_read(fr, r, 0);
    if (fr->n == 0)
        return RSV_OK;
    if ((rc = fold_keys(ctx, shop, lv, fr, 0, b_reap_lock, "bi")))
        return rc;
    tokens_read(fr, r, 0);
    for (size_t i = 0; i < fr->n; i++)
        *units += RES_I(r, i, 1);
    *holds = (int64_t)fr->n;
    if (fr->n > 0)
        rc = fold_keys(ctx, shop, lv, fr, 0, b_reap_delete, NULL);
    fr->n = seen;
    return rc;
}

static int settle_batch(rsv_ctx *ctx, uint64_t shop, const ledger_row *lv,
                        token_list *fr, int64_t *claimed, int64_t *returned)
{
    args_reset(&ctx->args);
    key_args(ctx, shop, lv);
    arg_i64(&ctx->args, FOLD_BATCH);
    int rc = sql_fixed(ctx, SQL_SETTLE_SELECT, "biii", NULL);
    if (rc)
        return rc;
    sql_res *r = &ctx->res;
    tokens_read(fr, r, 0);
    *claimed = *returned = 0;
    for (size_t i = 0; i < fr->n; i++) {
        fr->gen[i] = RES_I(r, i, 1);
        int64_t q = RES_I(r, i, 3);
        *returned += q;
        if (RES_I(r, i, 2) == ST_CLAIMED)
            *claimed += q;
    }
    if (fr->n == 0)
        return RSV_OK;
    return fold_keys(ctx, shop, lv, fr, 1, b_settle_delete, NULL);
}

int ledger_fold(rsv_ctx *ctx, uint64_t shop, ledger_row *lv,
                int64_t max_reap, fold_counts *out)
{
    token_list *fr = malloc(sizeof *fr);
    if (!fr)
        return ctx_fail(ctx, RSV_ENOMEM, "out of memory folding");
    int64_t taken = 0, returned = 0, reaped = 0, reaped_units = 0;
    int64_t settled = 0;
    int rc = RSV_OK;
    for (int b = 0; b < FOLD_MAX_BATCHES && rc == RSV_OK && reaped < max_reap;
         b++) {
        int64_t u = 0, h = 0;
        int64_t limit = max_reap - reaped < FOLD_BATCH ? max_reap - reaped
                                                       : FOLD_BATCH;
        rc = reap_batch(ctx, shop, lv, limit, fr, &u, &h);
        reaped += h;
        reaped_units += u;
        returned += u;
        if (rc || (int64_t)fr->n < limit)
            break;
    }
    for (int b = 0; b < FOLD_MAX_BATCHES && rc == RSV_OK; b++) {
        int64_t c = 0, ret = 0;
        rc = settle_batch(ctx, shop, lv, fr, &c, &ret);
        taken += c;
        returned += ret;
        settled += (int64_t)fr->n;
        if (rc || fr->n < FOLD_BATCH)
            break;
    }
    free(fr);
    if (rc == RSV_OK && (taken || returned))
        rc = ledger_update(ctx, shop, lv, taken, returned, 0, 0);
    if (out)
        *out = (fold_counts){reaped, reaped_units, settled};
    return rc;
}

static const char SQL_POOL_COUNT[] =
    "SELECT COALESCE(SUM(units), 0) FROM rsv_pool WHERE shop_id = ? AND "
    "item_id = ? AND location_id = ?";

int ledger_pool_count(rsv_ctx *ctx, uint64_t shop, const ledger_row *lv,
                      int64_t *count)
{
    /* A consistent (non-locking) read: rows that in-flight reserves are
     * deleting still count, so the pool can only be under-filled, never
     * pushed past its cap. */
    args_reset(&ctx->args);
    key_args(ctx, shop, lv);
    int rc = sql_fixed(ctx, SQL_POOL_COUNT, "i", NULL);
    if (rc)
        return rc;
    *count = ctx->res.rows ? RES_I(&ctx->res, 0, 0) : 0;
    return RSV_OK;
}

int ledger_pool_room(rsv_ctx *ctx, uint64_t shop, const ledger_row *lv,
                     int64_t taken, int64_t left, int64_t *room)
{
    *room = 0;
    if (left <= 0)
        return RSV_OK;
    int64_t count = 0;
    int rc = ledger_pool_count(ctx, shop, lv, &count);
    if (rc)
        return rc;
    int64_t n = ledger_cap(ctx, lv) - (count - taken);
    *room = n < 0 ? 0 : n > left ? left : n;
    return RSV_OK;
}

int b_pool_delete(strbuf *s, uint32_t n)
{
    /* One row: an equality on the whole primary key is a single-row
     * lookup (no scan is possible), and much cheaper than the join. */
    if (n == 1) {
        buf_puts(s, "DELETE FROM rsv_pool WHERE item_id = ? "
                    "AND location_id = ? AND id = ? AND shop_id = ?");
        return 0;
    }
    buf_puts(s, "DELETE u FROM ");
    sql_key_rows(s, 3, n);
    buf_puts(s, "rsv_pool u FORCE INDEX (PRIMARY) ON u.shop_id = ? AND "
                "u.item_id = k.k0 AND u.location_id = k.k1 "
                "AND u.id = k.k2");
    return 0;
}

#define SHRINK_CHUNK 1024

/* Pool rows are taken from the top (the fast path reads from the bottom). */
static const char SQL_POOL_PICK[] =
    "SELECT CAST(id AS SIGNED), units FROM rsv_pool WHERE "
    "shop_id = ? AND item_id = ? AND "
    "location_id = ? ORDER BY id DESC LIMIT ? "
    "FOR UPDATE SKIP LOCKED";

/* The last row a shrink reaches keeps the units it does not take. */
static const char SQL_POOL_SHRINK_PART[] =
    "UPDATE rsv_pool SET units = units - ? WHERE shop_id = ? AND "
    "item_id = ? AND location_id = ? AND id = ? AND units > ?";

int ledger_pool_shrink(rsv_ctx *ctx, uint64_t shop, const ledger_row *lv,
                       int64_t want, int64_t *done)
{
    *done = 0;
    while (*done < want) {
        /* rows carry at least one unit each: as many rows as units left
         * to take is always enough */
        int64_t n = want - *done < SHRINK_CHUNK ? want - *done : SHRINK_CHUNK;
        args_reset(&ctx->args);
        arg_u64(&ctx->args, shop);
        arg_u64(&ctx->args, lv->item);
        arg_u64(&ctx->args, lv->loc);
        arg_i64(&ctx->args, n);
        int rc = sql_fixed(ctx, SQL_POOL_PICK, "ii", NULL);
        if (rc)
            return rc;
        size_t got = ctx->res.rows;
        if (got == 0)
            return RSV_OK;
        /* whole rows while they fit in what is left, then part of one */
        uint64_t ids[SHRINK_CHUNK];
        size_t whole = 0;
        int64_t left = want - *done, part = 0;
        uint64_t part_id = 0;
        for (size_t i = 0; i < got && left > 0; i++) {
            int64_t u = RES_I(&ctx->res, i, 1);
            if (u <= left) {
                ids[whole++] = (uint64_t)RES_I(&ctx->res, i, 0);
                left -= u;
            } else {
                part = left;
                part_id = (uint64_t)RES_I(&ctx->res, i, 0);
                left = 0;
            }
        }
        if (whole > 0) {
            uint32_t bucket = sql_bucket(whole);
            args_reset(&ctx->args);
            for (uint32_t i = 0; i < bucket; i++) {
                arg_u64(&ctx->args, lv->item);
                arg_u64(&ctx->args, lv->loc);
                arg_u64(&ctx->args, i < whole ? ids[i] : 0); /* 0 pads */
            }
            arg_u64(&ctx->args, shop);
            if ((rc = sql_run(ctx, b_pool_delete, bucket, NULL, NULL)))
                return rc;
        }
        if (part > 0) {
            args_reset(&ctx->args);
            arg_i64(&ctx->args, part);
            key_args(ctx, shop, lv);
            arg_u64(&ctx->args, part_id);
            arg_i64(&ctx->args, part);
            if ((rc = sql_fixed(ctx, SQL_POOL_SHRINK_PART, NULL, NULL)))
                return rc;
        }
        *done = want - left;
        if ((int64_t)got < n || part > 0)
            return RSV_OK; /* the rest is locked by in-flight reserves */
    }
    return RSV_OK;
}

/* Units in each row a mint makes (the last row takes the rest): about a
 * hundred rows for a full pool, so that many buyers at once take
 * different rows, and one row for a reserve of several units
 * (sql/schema.sql, rsv_pool; RSV_PROC_TOP_UP mints the same way). */
static int64_t units_per_row(const rsv_ctx *ctx, const ledger_row *lv)
{
    int64_t per = ledger_cap(ctx, lv) / 100;
    return per < 1 ? 1 : per;
}

/* Up to 10^digits consecutive ids from one statement: a digits cross join
 * is portable (no sequence engine, no recursion limit).  The join makes
 * all 10^digits numbers before the WHERE keeps n of them, so a refill uses
 * as few digits as it needs (750 rows: 1.7 ms with three, 2.6 ms with
 * four, on an idle server). */
static int b_mint(strbuf *s, uint32_t digits)
{
    static const char *table =
        "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL "
        "SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 "
        "UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)";
    static const char *const name[4] = {"a", "b", "c", "e"};
    static const char *const weight[4] = {"", "10 * ", "100 * ", "1000 * "};
    buf_puts(s, "INSERT INTO rsv_pool (shop_id, item_id, "
                "location_id, id, units) SELECT ?, ?, ?, ? + n, "
                "LEAST(?, ? - n * ?) FROM (SELECT ");
    for (uint32_t i = 0; i < digits; i++) {
        buf_puts(s, i ? " + " : "");
        buf_puts(s, weight[i]);
        buf_puts(s, name[i]);
        buf_puts(s, ".d");
    }
    buf_puts(s, " AS n FROM ");
    for (uint32_t i = 0; i < digits; i++) {
        buf_puts(s, i ? " CROSS JOIN " : "");
        buf_puts(s, table);
        buf_puts(s, " ");
        buf_puts(s, name[i]);
    }
    buf_puts(s, ") seq WHERE n < ?");
    return 0;
}

int ledger_issue(rsv_ctx *ctx, uint64_t shop, ledger_row *lv, int64_t units,
                 int64_t direct)
{
    if (units < 0 || units > POOL_CAP_MAX || direct < 0 ||
        lv->issued + units + direct > lv->on_hand)
        return ctx_fail(ctx, RSV_EDB,
                        "internal: issuing %lld pool units + %lld units "
                        "exceeds the ledger", (long long)units,
                        (long long)direct);
    int64_t per = units_per_row(ctx, lv), rows = (units + per - 1) / per;
    if (rows > 0) {
        args_reset(&ctx->args);
        key_args(ctx, shop, lv);
        arg_u64(&ctx->args, lv->next_id);
        arg_i64(&ctx->args, per);
        arg_i64(&ctx->args, units);
        arg_i64(&ctx->args, per);
        arg_i64(&ctx->args, rows);
        uint32_t digits = rows <= 10 ? 1 : rows <= 100 ? 2
                          : rows <= 1000 ? 3 : 4;
        int rc = sql_run(ctx, b_mint, digits, NULL, NULL);
        if (rc)
            return rc;
    }
    if (units == 0 && direct == 0)
        return RSV_OK;
    return ledger_update(ctx, shop, lv, 0, 0, units + direct, rows);
}

/* Rows the pool may take now: up to its cap, within what the ledger has
 * not issued yet. */
static int top_up(rsv_ctx *ctx, uint64_t shop, ledger_row *lv, int64_t *added)
{
    int64_t n = 0;
    *added = 0;
    int rc = ledger_pool_room(ctx, shop, lv, 0, lv->on_hand - lv->issued, &n);
    if (rc || n == 0)
        return rc;
    rc = ledger_issue(ctx, shop, lv, n, 0);
    if (rc == RSV_OK)
        *added = n;
    return rc;
}

struct refill_arg {
    uint64_t shop, key[2];
    int skip;
    int64_t added;
    int skipped;
};

static int refill_body(rsv_ctx *ctx, void *p)
{
    struct refill_arg *a = p;
    ledger_row lv;
    int held;
    a->added = 0;
    int rc = ledger_lock_key(ctx, a->shop, a->key, a->skip, &lv, &held);
    a->skipped = rc == RSV_OK && !held; /* someone else holds it (or no row) */
    if (rc || !held)
        return rc;
    if ((rc = ledger_fold(ctx, a->shop, &lv, INT64_MAX, NULL)))
        return rc;
    return top_up(ctx, a->shop, &lv, &a->added);
}

int ledger_refill(rsv_ctx *ctx, uint64_t shop, uint64_t item, uint64_t loc,
                  int skip, int64_t *added, int *skipped)
{
    struct refill_arg a = {shop, {item, loc}, skip, 0, 0};
    int rc = txn_run(ctx, 0, refill_body, &a);
    if (added)
        *added = rc == RSV_OK ? a.added : 0;
    if (skipped)
        *skipped = rc == RSV_OK && a.skipped;
    return rc;
}

RSV_EXTERN int rsv_replenish(rsv_ctx *ctx, uint64_t shop_id, uint64_t item_id,
                             uint64_t location_id, int64_t *added_out)
{
    if (added_out)
        *added_out = 0;
    if (!ctx)
        return RSV_EINVAL;
    int began = op_begin(ctx, RSV_OP_REPLENISH, 1, shop_id, NULL, 0);
    if (began)
        return op_end(ctx, began);
    int rc = ledger_refill(ctx, shop_id, item_id, location_id, 0, added_out,
                           NULL);
    return op_end(ctx, rc ? rc : ctx_ok(ctx));
}
