/*
 * sold_out.c - "out of stock" without the ledger row lock: one consistent
 * read that tells whether the slow path could find anything for the lines
 * of a cart that came up short.
 */
#include "reserve_job.h"

#define OWN_BIT SHAPE_FLAG_A /* b_sold_out: a re-reserve's own holds */

static int b_sold_out(strbuf *s, uint32_t shape)
{
    uint32_t n = SHAPE_SIZE(shape);
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
        "SELECT CAST(l.item_id AS SIGNED), "
        "CAST(l.location_id AS SIGNED), l.on_hand - l.issued, "
        "EXISTS (SELECT 1 FROM rsv_pool u" BY_KEY " WHERE "
        "u.shop_id = l.shop_id AND u.item_id = l.item_id "
        "AND u.location_id = l.location_id) OR EXISTS (SELECT "
        "1 FROM rsv_holds h" HOLDS_BY_KEY " WHERE h.shop_id = "
        "l.shop_id AND h.item_id = l.item_id AND "
        "h.location_id = l.location_id AND h.expires_at <= "
        "NOW(6)) OR EXISTS (SELECT 1 FROM rsv_journal x" BY_KEY
        " WHERE x.shop_id = l.shop_id AND x.item_id = "
        "l.item_id AND x.location_id = l.location_id "
        "AND x.kind = " SQLV(ST_RELEASED) ")");
    if (shape & OWN_BIT)
        buf_puts(s, " OR EXISTS (SELECT 1 FROM rsv_holds o FORCE "
                    "INDEX (PRIMARY) WHERE o.shop_id = l.shop_id AND "
                    "o.checkout_token = ? AND o.item_id = "
                    "l.item_id AND o.location_id = "
                    "l.location_id), COALESCE((SELECT c.status FROM "
                    "rsv_checkouts c WHERE c.shop_id = l.shop_id AND "
                    "c.checkout_token = ?), 0)");
    else
        buf_puts(s, ", EXISTS (SELECT 1 FROM rsv_checkouts c WHERE "
                    "c.shop_id = l.shop_id AND c.checkout_token = ?)");
    buf_puts(s, " FROM rsv_ledger l WHERE l.shop_id = ? AND ");
    job_ledger_keys(s, n); /* (as in the take statement: nothing locked) */
    return 0;
}

/* The read asked about line l (about all its locations). */
static int line_asked(const rjob *j, size_t l)
{
    return job_line_key(j, l, 0)->so.ask;
}

/* Line l cannot be covered as of the read: every location has its ledger
 * row and nothing that could come back, and what its ledger has not issued
 * falls short of the line (at each location, or at all of them together
 * for a split line).  The slow path could find nothing more. */
static int line_sold_out(const rjob *j, size_t l)
{
    const cart_line *ln = &j->cart->lines[l];
    int64_t sum = 0;
    for (size_t i = 0; i < ln->n_locs; i++) {
        const rkey *k = job_line_key(j, l, i);
        if (!k->so.found || k->so.live || k->so.avail >= ln->qty)
            return 0;
        sum += k->so.avail > 0 ? k->so.avail : 0; /* each < qty: no overflow */
    }
    return !(ln->flags & RSV_LINE_SPLIT) || sum < ln->qty;
}

static void mark_line_sold_out(rsv_ctx *ctx, const rjob *j, size_t l, int yes)
{
    for (size_t i = 0; i < j->cart->lines[l].n_locs; i++) {
        const rkey *k = job_line_key(j, l, i);
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
        j->keys[k].so.found = 0;
        if (!j->keys[k].so.ask)
            continue;
        arg_u64(&ctx->args, j->keys[k].item);
        arg_u64(&ctx->args, j->keys[k].loc);
        n++;
    }
    int rc = sql_run(ctx, b_sold_out, n | (j->prev_found ? OWN_BIT : 0),
                     "iiiii", NULL);
    if (rc)
        return rc;
    const sql_res *r = &ctx->res;
    int undecided = 0; /* a checkout the read may not answer for */
    size_t hk = 0; /* ledger rows come back in key order */
    for (size_t i = 0; i < r->rows; i++) {
        uint64_t item = (uint64_t)RES_I(r, i, 0);
        uint64_t loc = (uint64_t)RES_I(r, i, 1);
        while (hk < j->nkeys &&
               (!j->keys[hk].so.ask || j->keys[hk].item != item ||
                j->keys[hk].loc != loc))
            hk++;
        if (hk == j->nkeys)
            break; /* (not in key order: no row found is the safe side) */
        j->keys[hk].so.found = 1;
        j->keys[hk].so.avail = RES_I(r, i, 2);
        j->keys[hk].so.live = RES_I(r, i, 3) != 0;
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
            return job_line_short(ctx, j->cart, l);
    }
    return RSV_OK;
}

/* A line some location of which came up short with its ledger unable to
 * cover the line.
 *
 * When an item has sold out, every buyer still asking for it came to the
 * slow path, which locks the ledger rows of the whole cart to fold expired
 * holds and releases and to wait for units in flight: the sold-out answers
 * queued on the ledger row one after the other, each for a whole slow
 * path, just when most buyers are asking, and a cart held the rows of its
 * other items meanwhile.  So such a line is first asked about in one
 * consistent read: if the slow path could find nothing for it, the answer
 * is out of stock, as of that read, without a lock. */
int sold_out_unsure(const rjob *j, size_t l)
{
    const cart_line *ln = &j->cart->lines[l];
    for (size_t i = 0; i < ln->n_locs; i++) {
        const rkey *k = job_line_key(j, l, i);
        if (k->slow.fast_next && k->slow.fast_avail < ln->qty)
            return 1;
    }
    return 0;
}

/* A line every location of which this context found sold out.  The next
 * cart naming them asks the same read first, before the fast path (whose
 * CALL or statements would insert the checkout row only to roll it back):
 * the read alone decides, so pools restocked since only cost that read. */
int sold_out_marked(rsv_ctx *ctx, const rjob *j, size_t l)
{
    const cart_line *ln = &j->cart->lines[l];
    for (size_t i = 0; i < ln->n_locs; i++) {
        const rkey *k = job_line_key(j, l, i);
        if (!pool_cursor_was_sold_out(ctx, j->shop, k->item, k->loc))
            return 0;
    }
    return 1;
}

/* Ask the read about the suspect lines (j->st.then_slow: those that came
 * up short, else those marked sold out); RSV_OK if none was sold out (or
 * none was asked about). */
int sold_out_read(rsv_ctx *ctx, rjob *j)
{
    int any = 0;
    for (size_t k = 0; k < j->nkeys; k++)
        j->keys[k].so.ask = 0;
    for (size_t l = 0; l < j->cart->n; l++) {
        if (j->st.then_slow ? !sold_out_unsure(j, l)
                            : !sold_out_marked(ctx, j, l))
            continue;
        any = 1;
        for (size_t i = 0; i < j->cart->lines[l].n_locs; i++)
            job_line_key(j, l, i)->so.ask = 1;
    }
    return any ? txn_run(ctx, TXN_ONE_READ | TXN_NO_DIRTY, sold_out_body, j)
               : RSV_OK;
}
