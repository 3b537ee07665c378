/*
 * audit.c - checking the invariants on one consistent snapshot.
 *
 * Runs at REPEATABLE READ in a READ ONLY transaction started WITH
 * CONSISTENT SNAPSHOT, so every count comes from the same committed state
 * and the equalities hold exactly whatever else is running.  With
 * all_shops the statements scan every shop: an operator's tool, the one
 * place the library does not filter on shop_id.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* shape: 1 = all shops.
 * Every subquery names its index.  Left to choose, the optimizer went by
 * the statistics of a schema loaded empty: it read each ledger row's
 * holds through the primary key on shop_id alone (all the shop's holds
 * for every ledger row) and the settlements by a full scan, and an audit
 * of 10,000 items took 90 s instead of well under one. */
static int b_ledger_rows(strbuf *s, uint32_t all)
{
#define KEYMATCH(t)                                         \
    " WHERE " t ".shop_id = l.shop_id AND " t ".item_id = " \
    "l.item_id AND " t ".location_id = l.location_id"
    buf_puts(s,
        "SELECT CAST(l.shop_id AS SIGNED), CAST(l.item_id AS "
        "SIGNED), CAST(l.location_id AS SIGNED), l.on_hand, l.issued, "
        "COALESCE(l.pool_cap, 0), CAST(l.next_unit_id AS SIGNED), "
        "(SELECT CAST(COALESCE(SUM(u.units), 0) AS SIGNED) FROM rsv_pool u"
        BY_KEY KEYMATCH("u") "), (SELECT CAST(COALESCE(MAX(u.id), 0) AS SIGNED) FROM "
        "rsv_pool u" BY_KEY KEYMATCH("u") "), "
        "(SELECT CAST(COALESCE(SUM(h.quantity), 0) AS SIGNED) FROM "
        "rsv_holds h" HOLDS_BY_KEY KEYMATCH("h") "), "
        "(SELECT CAST(COALESCE(SUM(h.quantity), 0) AS SIGNED) FROM "
        "rsv_holds h" HOLDS_BY_KEY KEYMATCH("h")
        " AND h.expires_at > NOW(6)), "
        "(SELECT CAST(COALESCE(SUM(x.quantity), 0) AS SIGNED) FROM "
        "rsv_journal x" BY_KEY KEYMATCH("x") "), "
        "(SELECT CAST(COALESCE(SUM(x.quantity), 0) AS SIGNED) FROM "
        "rsv_journal x" BY_KEY KEYMATCH("x") " AND x.kind = " SQLV(ST_CLAIMED) ") "
        "FROM rsv_ledger l");
#undef KEYMATCH
    buf_puts(s, all ? "" : " WHERE l.shop_id = ?");
    return 0;
}

static int b_orphans(strbuf *s, uint32_t all)
{
    static const char *tables[][2] = {
        {"rsv_pool", "1"},
        {"rsv_holds", "2"},
        {"rsv_journal", "3"},
    };
    for (int i = 0; i < 3; i++) {
        if (i)
            buf_puts(s, " UNION ALL ");
        buf_puts(s, "(SELECT CAST(t.shop_id AS SIGNED), "
                    "CAST(t.item_id AS SIGNED), "
                    "CAST(t.location_id AS SIGNED), ");
        buf_puts(s, tables[i][1]);
        buf_puts(s, ", COUNT(*) FROM ");
        buf_puts(s, tables[i][0]);
        buf_puts(s, " t WHERE ");
        buf_puts(s, all ? "1" : "t.shop_id = ?");
        buf_puts(s, " AND NOT EXISTS (SELECT 1 FROM rsv_ledger l WHERE "
                    "l.shop_id = t.shop_id AND l.item_id = "
                    "t.item_id AND l.location_id = "
                    "t.location_id) GROUP BY t.shop_id, "
                    "t.item_id, t.location_id)");
    }
    /* 4: held checkouts with more hold rows than they recorded; 5: hold
     * rows whose checkout is missing or not held. */
    buf_puts(s, " UNION ALL (SELECT CAST(c.shop_id AS SIGNED), 0, 0, 4, "
                "COUNT(*) FROM rsv_checkouts c JOIN "
                "rsv_holds h ON h.shop_id = c.shop_id AND "
                "h.checkout_token = c.checkout_token WHERE ");
    buf_puts(s, all ? "1" : "c.shop_id = ?");
    buf_puts(s, " GROUP BY c.shop_id, c.checkout_token, c.hold_count, "
                "c.status HAVING COUNT(*) > c.hold_count OR c.status <> " SQLV(ST_HELD) ")"
                " UNION ALL (SELECT CAST(h.shop_id AS SIGNED), "
                "CAST(h.item_id AS SIGNED), "
                "CAST(h.location_id AS SIGNED), 5, COUNT(*) FROM "
                "rsv_holds h WHERE ");
    buf_puts(s, all ? "1" : "h.shop_id = ?");
    buf_puts(s, " AND NOT EXISTS (SELECT 1 FROM rsv_checkouts c "
                "WHERE c.shop_id = h.shop_id AND c.checkout_token = "
                "h.checkout_token) GROUP BY h.shop_id, h.item_id, "
                "h.location_id)");
    /* 6: pool rows that carry no unit (a take deletes a row it empties) */
    buf_puts(s, " UNION ALL (SELECT CAST(u.shop_id AS SIGNED), "
                "CAST(u.item_id AS SIGNED), "
                "CAST(u.location_id AS SIGNED), 6, COUNT(*) FROM "
                "rsv_pool u WHERE ");
    buf_puts(s, all ? "1" : "u.shop_id = ?");
    buf_puts(s, " AND u.units < 1 GROUP BY u.shop_id, u.item_id, "
                "u.location_id)");
    return 0;
}

struct audit_state {
    rsv_audit_fn fn;
    void *arg;
    int64_t count;
};

static void report(struct audit_state *st, int64_t shop, int64_t item,
                   int64_t loc, const char *problem)
{
    st->count++;
    if (st->fn)
        st->fn(st->arg, (uint64_t)shop, (uint64_t)item, (uint64_t)loc,
               problem);
}

static void check_ledger_rows(rsv_ctx *ctx, struct audit_state *st)
{
    sql_res *r = &ctx->res;
    char m[256];
    for (size_t i = 0; i < r->rows; i++) {
        int64_t shop = RES_I(r, i, 0), item = RES_I(r, i, 1),
                loc = RES_I(r, i, 2);
        int64_t on_hand = RES_I(r, i, 3), issued = RES_I(r, i, 4);
        ledger_row lv = {0};
        lv.cap = RES_I(r, i, 5);
        int64_t next_id = RES_I(r, i, 6), pool = RES_I(r, i, 7);
        int64_t max_id = RES_I(r, i, 8), held = RES_I(r, i, 9);
        int64_t active = RES_I(r, i, 10), settling = RES_I(r, i, 11);
        int64_t claimed = RES_I(r, i, 12);
        if (on_hand < 0 || issued < 0) {
            snprintf(m, sizeof m, "negative stock: on_hand %lld issued %lld",
                     (long long)on_hand, (long long)issued);
            report(st, shop, item, loc, m);
        }
        if (issued != pool + held + settling) {
            snprintf(m, sizeof m,
                     "issued %lld != pool %lld + held %lld + settling %lld "
                     "(units %s)", (long long)issued, (long long)pool,
                     (long long)held, (long long)settling,
                     issued > pool + held + settling ? "lost" : "invented");
            report(st, shop, item, loc, m);
        }
        if (pool + active > on_hand - claimed) {
            snprintf(m, sizeof m,
                     "oversold: pool %lld + active holds %lld > stock on "
                     "hand %lld", (long long)pool, (long long)active,
                     (long long)(on_hand - claimed));
            report(st, shop, item, loc, m);
        }
        if (issued > on_hand) {
            snprintf(m, sizeof m, "issued %lld > on_hand %lld",
                     (long long)issued, (long long)on_hand);
            report(st, shop, item, loc, m);
        }
        /* A ledger row without a cap of its own may have been filled by
         * any context, each with its own pool_cap option (rsv-admin uses
         * the default): only the largest option bounds it. */
        int64_t cap = lv.cap > 0 ? lv.cap : POOL_CAP_MAX;
        if (pool > cap) {
            snprintf(m, sizeof m, "pool %lld units above its cap %lld",
                     (long long)pool, (long long)cap);
            report(st, shop, item, loc, m);
        }
        if (pool > 0 && max_id >= next_id) {
            snprintf(m, sizeof m, "pool row id %lld >= next_unit_id %lld",
                     (long long)max_id, (long long)next_id);
            report(st, shop, item, loc, m);
        }
    }
}

static void check_orphans(rsv_ctx *ctx, struct audit_state *st)
{
    static const char *what[] = {
        "", "pool rows without a ledger row", "holds without a ledger row",
        "settlements without a ledger row",
        ("a checkout with more holds than it recorded, or holds of a "
         "settled checkout"),
        "holds without a checkout row",
        "pool rows without a unit"};
    sql_res *r = &ctx->res;
    char m[256];
    for (size_t i = 0; i < r->rows; i++) {
        int64_t k = RES_I(r, i, 3);
        snprintf(m, sizeof m, "%lld %s", (long long)RES_I(r, i, 4),
                 k >= 1 && k <= 6 ? what[k] : "?");
        report(st, RES_I(r, i, 0), RES_I(r, i, 1), RES_I(r, i, 2), m);
    }
}

static int audit_run(rsv_ctx *ctx, uint64_t shop_id, int all_shops,
                     rsv_audit_fn fn, void *arg, int64_t *violations_out)
{
    if (violations_out)
        *violations_out = 0;
    if (!ctx)
        return RSV_EINVAL;
    int began = op_begin(ctx, RSV_OP_AUDIT, 0, shop_id, NULL, 0);
    if (began)
        return began;
    /* No time budget: the audit reads every row of the shop, which takes
     * seconds on a large one, and holds no row lock and commits nothing,
     * so nobody waits for it and no replication stall can hold it up.
     * Cut by the budget it could never finish on a large shop; the
     * connection's own read timeout still bounds it. */
    ctx->deadline_us = 0;
    if (txn_caller_open(ctx))
        return ctx_fail(ctx, RSV_EINTXN,
                        "rsv_audit runs its own snapshot transaction; the "
                        "connection is inside one");
    struct audit_state st = {fn, arg, 0};
    uint32_t all = all_shops ? 1 : 0;
    int rc = sql_text(ctx, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
    if (rc == RSV_OK)
        rc = sql_text(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT, "
                           "READ ONLY");
    if (rc == RSV_OK) {
        args_reset(&ctx->args);
        if (!all)
            arg_u64(&ctx->args, shop_id);
        rc = sql_run(ctx, b_ledger_rows, all, "iiiiiiiiiiiii", NULL);
        if (rc == RSV_OK)
            check_ledger_rows(ctx, &st);
    }
    if (rc == RSV_OK) {
        args_reset(&ctx->args);
        for (int i = 0; i < 6 && !all; i++)
            arg_u64(&ctx->args, shop_id);
        rc = sql_run(ctx, b_orphans, all, "iiiii", NULL);
        if (rc == RSV_OK)
            check_orphans(ctx, &st);
    }
    int crc = sql_text(ctx, rc == RSV_OK ? SQL_COMMIT : SQL_ROLLBACK);
    /* A COMMIT that failed on a live connection leaves the snapshot open,
     * and the caller's next call would find itself inside it. */
    if (rc == RSV_OK && crc != RSV_OK && crc != RSV_ECONN)
        (void)sql_text(ctx, SQL_ROLLBACK);
    if (rc == RSV_OK)
        rc = crc;
    if (rc)
        return rc == RSV__RETRY ? ctx_fail(ctx, RSV_EBUSY, "%s", ctx->msg)
                                : rc;
    if (violations_out)
        *violations_out = st.count;
    return ctx_ok(ctx);
}

RSV_EXTERN int rsv_audit(rsv_ctx *ctx, uint64_t shop_id, int all_shops,
                         rsv_audit_fn fn, void *arg, int64_t *violations_out)
{
    return op_end(ctx, audit_run(ctx, shop_id, all_shops, fn, arg,
                                 violations_out));
}
