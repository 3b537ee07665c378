/*
 * check_lifecycle.c - every public function's success paths against the
 * real server: stock, reserve, claim, release, replenish, pool drain,
 * extend, status, sweep, audit.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <reserve/stats.h>

#include "testutil.h"
#include "../lib/test_flags.h"

#define TOK(s) (s), strlen(s)

START_TEST(stock_set_get_adjust)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 10);
    int64_t on_hand, held, pooled, avail;
    TU_OK(f.ctx, rsv_stock_get(f.ctx, f.shop, 1, 1, &on_hand, &held, &pooled, &avail));
    ck_assert_int_eq(on_hand, 10);
    ck_assert_int_eq(held, 0);
    ck_assert_int_eq(pooled, 0);
    ck_assert_int_eq(avail, 10);
    int64_t now = 0;
    TU_OK(f.ctx, rsv_stock_adjust(f.ctx, f.shop, 1, 1, 5, &now));
    ck_assert_int_eq(now, 15);
    TU_OK(f.ctx, rsv_stock_adjust(f.ctx, f.shop, 1, 1, -3, &now));
    ck_assert_int_eq(now, 12);
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), 12);
    tu_fix_close(&f);
}
END_TEST

START_TEST(reserve_claim_takes_stock_once)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 42, 7, 6);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("checkout-1"), 42, 7, 2,
                                 0));
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 42, 7), 2);
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 42, 7), 6);
    int32_t st = 0;
    int64_t units = 0, ms = 0;
    TU_OK(f.ctx, rsv_checkout_status(f.ctx, f.shop, TOK("checkout-1"), &st, &units, &ms));
    ck_assert_int_eq(st, RSV_STATUS_HELD);
    ck_assert_int_eq(units, 2);
    ck_assert(ms > 0 && ms <= 600000);

    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("checkout-1")));
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 42, 7), 4);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 42, 7), 0);
    /* a retried claim takes nothing */
    int rc = rsv_claim(f.ctx, f.shop, TOK("checkout-1"));
    TU_RC(f.ctx, rc, RSV_ECLAIMED);
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 42, 7), 4);
    ms = -1;
    TU_OK(f.ctx, rsv_checkout_status(f.ctx, f.shop, TOK("checkout-1"), &st, &units, &ms));
    ck_assert_int_eq(st, RSV_STATUS_CLAIMED);
    ck_assert_int_eq(units, 0);
    ck_assert_int_eq(ms, 0); /* settled: no lifetime left */
    /* the claim is folded into the ledger row by the next refill */
    TU_OK(f.ctx, rsv_replenish(f.ctx, f.shop, 42, 7, NULL));
    ck_assert_int_eq(tu_i64(f.conn, "SELECT COUNT(*) FROM rsv_journal"), 0);
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 42, 7), 4);
    tu_fix_close(&f);
}
END_TEST

START_TEST(release_gives_units_back)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 3);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("a"), 1, 1, 3, 0));
    int rc = rsv_reserve_one(f.ctx, f.shop, TOK("b"), 1, 1, 1, 0);
    TU_RC(f.ctx, rc, RSV_EOUTOFSTOCK);
    TU_OK(f.ctx, rsv_release(f.ctx, f.shop, TOK("a")));
    TU_OK(f.ctx, rsv_release(f.ctx, f.shop, TOK("a"))); /* idempotent */
    int32_t st = 0;
    int64_t ms = -1;
    TU_OK(f.ctx, rsv_checkout_status(f.ctx, f.shop, TOK("a"), &st, NULL, &ms));
    ck_assert_int_eq(st, RSV_STATUS_RELEASED);
    ck_assert_int_eq(ms, 0);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("b"), 1, 1, 3, 0));
    rc = rsv_claim(f.ctx, f.shop, TOK("a"));
    TU_RC(f.ctx, rc, RSV_ERELEASED);
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("b")));
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), 0);
    rc = rsv_release(f.ctx, f.shop, TOK("b"));
    TU_RC(f.ctx, rc, RSV_ECLAIMED);
    tu_fix_close(&f);
}
END_TEST

START_TEST(replenish_fills_to_cap)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 5, 1, 2500);
    int64_t added = -1, pooled = -1;
    TU_OK(f.ctx, rsv_replenish(f.ctx, f.shop, 5, 1, &added));
    ck_assert_int_eq(added, 1000);
    TU_OK(f.ctx, rsv_replenish(f.ctx, f.shop, 5, 1, &added));
    ck_assert_int_eq(added, 0);
    TU_OK(f.ctx, rsv_stock_get(f.ctx, f.shop, 5, 1, NULL, NULL, &pooled, NULL));
    ck_assert_int_eq(pooled, 1000);
    /* small stock: the pool never exceeds the ledger */
    TU_OK(f.ctx, rsv_stock_set(f.ctx, f.shop, 6, 1, 7));
    TU_OK(f.ctx, rsv_replenish(f.ctx, f.shop, 6, 1, &added));
    ck_assert_int_eq(added, 7);
    /* a quantity above the pool cap is still served, from the ledger */
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("big"), 5, 1, 2400, 0));
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 5, 1), 2400);
    int rc = rsv_reserve_one(f.ctx, f.shop, TOK("big2"), 5, 1, 101, 0);
    TU_RC(f.ctx, rc, RSV_EOUTOFSTOCK);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("big2"), 5, 1, 100, 0));
    rc = rsv_replenish(f.ctx, f.shop, 99, 1, &added);
    TU_RC(f.ctx, rc, RSV_ENOITEM);
    tu_fix_close(&f);
}
END_TEST

/* A refill mints the pool's gap in one statement whose size grows with
 * it (1 to 4 digits of ids); at each size's edges it mints exactly the
 * gap, with ids that continue the pool's. */
START_TEST(replenish_mints_exactly_the_gap)
{
    static const int64_t caps[] = {1, 9, 10, 11, 99, 100, 101, 999, 1000,
                                   1001, 10000};
    uint64_t shop = tu_shop();
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        MYSQL *c;
        /* (statements: the procedure would take the unit straight from
         * the ledger row, which no one else holds, and leave no gap) */
        rsv_ctx *ctx = tu_open_with(&c, RSV_OPT_NO_PROACTIVE_REFILL |
                                            TEST_OPT_STATEMENTS_ONLY,
                                    caps[i]);
        uint64_t item = 700 + i;
        int64_t added = -1, pooled = -1;
        TU_OK(ctx, rsv_stock_set(ctx, shop, item, 1, 3 * caps[i]));
        TU_OK(ctx, rsv_replenish(ctx, shop, item, 1, &added));
        ck_assert_int_eq(added, caps[i]);
        /* take one from the bottom, then top up: a gap of one, then the
         * rest of a second fill */
        TU_OK(ctx, rsv_reserve_one(ctx, shop, TOK("one"), item, 1, 1, 0));
        TU_OK(ctx, rsv_replenish(ctx, shop, item, 1, &added));
        ck_assert_int_eq(added, 1);
        TU_OK(ctx, rsv_stock_get(ctx, shop, item, 1, NULL, NULL, &pooled,
                                 NULL));
        ck_assert_int_eq(pooled, caps[i]);
        /* rows of cap / 100 units (at least 1), ids following on: with
         * one unit a row the bottom row went, ids 2 .. cap + 1; else it
         * kept the rest, and the second fill is one row more */
        int64_t per = caps[i] / 100 > 1 ? caps[i] / 100 : 1;
        int64_t rows = (caps[i] + per - 1) / per;
        char q[200];
        snprintf(q, sizeof q, "SELECT MAX(id) - MIN(id) + 1 FROM "
                 "rsv_pool WHERE shop_id = %llu AND "
                 "item_id = %llu", (unsigned long long)shop,
                 (unsigned long long)item);
        ck_assert_int_eq(tu_i64(c, q), per == 1 ? caps[i] : rows + 1);
        snprintf(q, sizeof q, "SELECT COUNT(*) FROM rsv_pool WHERE "
                 "shop_id = %llu AND item_id = %llu AND units > %lld",
                 (unsigned long long)shop, (unsigned long long)item,
                 (long long)per);
        ck_assert_int_eq(tu_i64(c, q), 0);
        rsv_close(ctx);
        mysql_close(c);
    }
    tu_audit_clean();
}
END_TEST

START_TEST(pool_refills_inline)
{
    tu_fix f;
    tu_fix_open(&f, 0, 10);
    tu_fix_stock(&f, 1, 1, 95);
    char tok[32];
    for (int i = 0; i < 95; i++) {
        snprintf(tok, sizeof tok, "t%d", i);
        TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK(tok), 1, 1, 1, 0));
        int64_t pooled = -1;
        TU_OK(f.ctx, rsv_stock_get(f.ctx, f.shop, 1, 1, NULL, NULL, &pooled,
                                   NULL));
        ck_assert_int_le(pooled, 10);
    }
    int rc = rsv_reserve_one(f.ctx, f.shop, TOK("last"), 1, 1, 1, 0);
    TU_RC(f.ctx, rc, RSV_EOUTOFSTOCK);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), 95);
    tu_fix_close(&f);
}
END_TEST

static uint64_t drained_by(rsv_ctx *ctx, uint32_t op)
{
    uint64_t v = 0;
    ck_assert_int_eq(rsv_stats_get(ctx, RSV_STAT_POOL_DRAINED, op, &v),
                     RSV_OK);
    return v;
}

static int64_t pooled_of(rsv_ctx *ctx, uint64_t shop, uint64_t item,
                         uint64_t loc)
{
    int64_t pooled = -1;
    TU_OK(ctx, rsv_stock_get(ctx, shop, item, loc, NULL, NULL, &pooled,
                             NULL));
    return pooled;
}

static int64_t issued_of(MYSQL *c, uint64_t shop, uint64_t item)
{
    char q[200];
    snprintf(q, sizeof q, "SELECT issued FROM rsv_ledger WHERE "
             "shop_id = %llu AND item_id = %llu AND "
             "location_id = 1", (unsigned long long)shop,
             (unsigned long long)item);
    return tu_i64(c, q);
}

/* Another transaction, as a checkout in flight, holding the first row of
 * `what` ("<column> FROM <table>") at (item, location 1) of the shop. */
static MYSQL *other_locks(const char *what, uint64_t shop, uint64_t item)
{
    MYSQL *other = tu_connect_in_txn();
    char q[240];
    snprintf(q, sizeof q, "SELECT %s WHERE shop_id = %llu AND "
             "item_id = %llu AND location_id = 1 ORDER BY 1 "
             "LIMIT 1 FOR UPDATE", what, (unsigned long long)shop,
             (unsigned long long)item);
    tu_i64(other, q);
    return other;
}

/* A drained pool's units go back to the ledger row: the stock a buyer
 * can reserve does not change, holds stay, and the item sells on. */
START_TEST(pool_drain_gives_rows_back)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 100);
    int64_t added = 0, avail = -1, drained = -1;
    TU_OK(f.ctx, rsv_replenish(f.ctx, f.shop, 1, 1, &added));
    ck_assert_int_eq(added, 100);
    /* the ledger row has nothing left to issue: these come from the pool */
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("a"), 1, 1, 3, 0));
    ck_assert_int_eq(pooled_of(f.ctx, f.shop, 1, 1), 97);
    TU_OK(f.ctx, rsv_pool_drain(f.ctx, f.shop, 1, 1, &drained));
    ck_assert_int_eq(drained, 97);
    ck_assert_uint_eq(drained_by(f.ctx, RSV_OP_REPLENISH), 97);
    ck_assert_int_eq(pooled_of(f.ctx, f.shop, 1, 1), 0);
    ck_assert_int_eq(issued_of(f.conn, f.shop, 1), 3); /* the hold's */
    TU_OK(f.ctx, rsv_stock_get(f.ctx, f.shop, 1, 1, NULL, NULL, NULL, &avail));
    ck_assert_int_eq(avail, 97);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), 3);
    TU_OK(f.ctx, rsv_pool_drain(f.ctx, f.shop, 1, 1, &drained));
    ck_assert_int_eq(drained, 0);
    /* sells on, to the last unit, and the old hold is still claimable */
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("b"), 1, 1, 97, 0));
    int rc = rsv_reserve_one(f.ctx, f.shop, TOK("c"), 1, 1, 1, 0);
    TU_RC(f.ctx, rc, RSV_EOUTOFSTOCK);
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("a")));
    TU_OK(f.ctx, rsv_release(f.ctx, f.shop, TOK("b")));
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), 97);
    /* a drained item gets a pool again from the next refill */
    TU_OK(f.ctx, rsv_replenish(f.ctx, f.shop, 1, 1, &added));
    ck_assert_int_eq(added, 97);
    tu_fix_close(&f);
}
END_TEST

/* A pool row another transaction holds (as a reserve in flight does) is
 * passed over, without waiting, and its units stay counted as issued.
 * (30 units: three rows of 10 at the default cap.) */
START_TEST(pool_drain_leaves_rows_in_flight)
{
    tu_fix f;
    tu_fix_open_impatient(&f, 0);
    tu_fix_pooled(&f, 1, 1, 30);
    MYSQL *other = other_locks("id FROM rsv_pool", f.shop, 1);
    int64_t drained = -1;
    TU_OK(f.ctx, rsv_pool_drain(f.ctx, f.shop, 1, 1, &drained));
    ck_assert_int_eq(drained, 20);
    ck_assert_int_eq(pooled_of(f.ctx, f.shop, 1, 1), 10);
    ck_assert_int_eq(issued_of(f.conn, f.shop, 1), 10);
    tu_exec(other, "ROLLBACK");
    mysql_close(other);
    TU_OK(f.ctx, rsv_pool_drain(f.ctx, f.shop, 1, 1, &drained));
    ck_assert_int_eq(drained, 10);
    ck_assert_int_eq(issued_of(f.conn, f.shop, 1), 0);
    tu_fix_close(&f);
}
END_TEST

/* The units of key (item, location 1) row by row, lowest id first, as
 * "u,u,...". */
static void pool_shape(MYSQL *c, uint64_t shop, uint64_t item, char *out,
                       size_t len)
{
    char q[240];
    snprintf(q, sizeof q, "SELECT units FROM rsv_pool WHERE shop_id = %llu "
             "AND item_id = %llu AND location_id = 1 ORDER BY id",
             (unsigned long long)shop, (unsigned long long)item);
    ck_assert_int_eq(mysql_query(c, q), 0);
    MYSQL_RES *r = mysql_store_result(c);
    MYSQL_ROW row;
    size_t o = 0;
    out[0] = '\0';
    while ((row = mysql_fetch_row(r)) && o < len)
        o += (size_t)snprintf(out + o, len - o, "%s%s", o ? "," : "", row[0]);
    mysql_free_result(r);
}

/* A pool row carries pool_cap / 100 units (the default cap: 10).  A
 * reserve takes units from the lowest rows, the one procedure and the
 * statements alike: rows it empties go, the row it takes part of keeps
 * the rest.  A stock shrink takes units from the top the same way. */
START_TEST(pool_rows_carry_several_units)
{
    tu_fix f;
    tu_fix_open(&f, RSV_OPT_NO_PROACTIVE_REFILL, 0);
    MYSQL *c2;
    rsv_ctx *stmts = tu_open_with(&c2, RSV_OPT_NO_PROACTIVE_REFILL |
                                           TEST_OPT_STATEMENTS_ONLY, 0);
    tu_fix_pooled(&f, 1, 1, 35);
    char shape[256];
    pool_shape(f.conn, f.shop, 1, shape, sizeof shape);
    ck_assert_str_eq(shape, "10,10,10,5");
    /* the procedure: 3 of the bottom row */
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("a"), 1, 1, 3, 0));
    pool_shape(f.conn, f.shop, 1, shape, sizeof shape);
    ck_assert_str_eq(shape, "7,10,10,5");
    /* the statements: the bottom row whole and 5 of the next */
    TU_OK(stmts, rsv_reserve_one(stmts, f.shop, TOK("b"), 1, 1, 12, 0));
    pool_shape(f.conn, f.shop, 1, shape, sizeof shape);
    ck_assert_str_eq(shape, "5,10,5");
    ck_assert_int_eq(pooled_of(f.ctx, f.shop, 1, 1), 20);
    ck_assert_int_eq(issued_of(f.conn, f.shop, 1), 35);
    /* a cart through the procedure (where in the pool: the context's
     * cursors decide) */
    rsv_cart *cart;
    ck_assert_int_eq(rsv_cart_new(&cart), RSV_OK);
    uint64_t l1[1] = {1};
    tu_fix_pooled(&f, 2, 1, 20);
    ck_assert_int_eq(rsv_cart_add(cart, 1, l1, 1, 6, 0), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 2, l1, 1, 11, 0), RSV_OK);
    TU_OK(f.ctx, rsv_reserve(f.ctx, f.shop, TOK("c"), cart, 0));
    ck_assert_int_eq(pooled_of(f.ctx, f.shop, 1, 1), 14);
    ck_assert_int_eq(pooled_of(f.ctx, f.shop, 2, 1), 9);
    /* shrinking below what is issued (35: 14 pooled, 21 held) takes pool
     * units from the top, rows whole and the last in part */
    TU_OK(f.ctx, rsv_stock_set(f.ctx, f.shop, 1, 1, 27));
    ck_assert_int_eq(pooled_of(f.ctx, f.shop, 1, 1), 6);
    ck_assert_int_eq(issued_of(f.conn, f.shop, 1), 27);
    /* every unit held is claimable, and the books balance */
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("a")));
    TU_OK(stmts, rsv_claim(stmts, f.shop, TOK("b")));
    TU_OK(f.ctx, rsv_release(f.ctx, f.shop, TOK("c")));
    int64_t v = -1;
    TU_OK(f.ctx, rsv_audit(f.ctx, f.shop, 0, NULL, NULL, &v));
    ck_assert_int_eq(v, 0);
    /* a row left without a unit is a violation the audit names */
    char q[200];
    snprintf(q, sizeof q, "UPDATE rsv_pool SET units = 0 WHERE shop_id = "
             "%llu AND item_id = 2", (unsigned long long)f.shop);
    tu_exec(tu_fix_admin(&f), q);
    TU_OK(f.ctx, rsv_audit(f.ctx, f.shop, 0, NULL, NULL, &v));
    ck_assert_int_ge(v, 1);
    snprintf(q, sizeof q, "UPDATE rsv_pool SET units = 9 WHERE shop_id = "
             "%llu AND item_id = 2", (unsigned long long)f.shop);
    (void)shape;
    tu_exec(tu_fix_admin(&f), q);
    rsv_cart_free(cart);
    rsv_close(stmts);
    mysql_close(c2);
    tu_fix_close(&f);
}
END_TEST

static void make_idle(MYSQL *c, uint64_t shop, uint64_t item, uint64_t loc)
{
    char q[240];
    snprintf(q, sizeof q, "UPDATE rsv_ledger SET updated_at = NOW(6) - "
             "INTERVAL 2 HOUR WHERE shop_id = %llu AND item_id = "
             "%llu AND location_id = %llu", (unsigned long long)shop,
             (unsigned long long)item, (unsigned long long)loc);
    tu_exec(c, q);
}

/* rsv_sweep drains the pools whose ledger row has not changed for
 * pool_idle_s (default an hour), and only those: not a pool in use, not
 * one whose ledger row someone holds (it does not wait), and none with
 * pool_idle_s 0.  More idle pools than one round of the scan, and the
 * key (0, 0), are all found. */
START_TEST(sweep_drains_idle_pools)
{
    tu_fix f;
    tu_fix_open_impatient(&f, 0);
    uint64_t items[3] = {1, 2, 3};
    for (int i = 0; i < 3; i++)
        tu_fix_pooled(&f, items[i], 1, 10);
    make_idle(f.conn, f.shop, 1, 1);
    make_idle(f.conn, f.shop, 3, 1);
    MYSQL *other = other_locks("on_hand FROM rsv_ledger", f.shop, 3);
    TU_OK(f.ctx, rsv_sweep(f.ctx, f.shop, 0, NULL));
    ck_assert_uint_eq(drained_by(f.ctx, RSV_OP_SWEEP), 10);
    ck_assert_int_eq(pooled_of(f.ctx, f.shop, 1, 1), 0);
    ck_assert_int_eq(pooled_of(f.ctx, f.shop, 2, 1), 10);
    ck_assert_int_eq(pooled_of(f.ctx, f.shop, 3, 1), 10);
    tu_exec(other, "ROLLBACK");
    mysql_close(other);
    TU_OK(f.ctx, rsv_sweep(f.ctx, f.shop, 0, NULL));
    ck_assert_uint_eq(drained_by(f.ctx, RSV_OP_SWEEP), 20);
    ck_assert_int_eq(pooled_of(f.ctx, f.shop, 3, 1), 0);
    ck_assert_int_eq(pooled_of(f.ctx, f.shop, 2, 1), 10);

    /* pool_idle_s = 0: never */
    MYSQL *c2 = tu_connect();
    rsv_options o;
    rsv_options_init(&o, RSV_OPTIONS_VERSION);
    o.pool_idle_s = 0;
    rsv_ctx *never = NULL;
    TU_OK(never, rsv_open(&never, c2, &o));
    make_idle(f.conn, f.shop, 2, 1);
    TU_OK(never, rsv_sweep(never, f.shop, 0, NULL));
    ck_assert_int_eq(pooled_of(f.ctx, f.shop, 2, 1), 10);
    ck_assert_uint_eq(drained_by(never, RSV_OP_SWEEP), 0);
    rsv_close(never);
    mysql_close(c2);

    /* 70 more idle pools, from the key (0, 0) on: two rounds of the scan */
    char q[240];
    uint64_t shop2 = tu_shop();
    for (uint64_t k = 0; k < 70; k++) {
        TU_OK(f.ctx, rsv_stock_set(f.ctx, shop2, k, k == 0 ? 0 : 1, 2));
        TU_OK(f.ctx, rsv_replenish(f.ctx, shop2, k, k == 0 ? 0 : 1, NULL));
    }
    snprintf(q, sizeof q, "UPDATE rsv_ledger SET updated_at = NOW(6) - "
             "INTERVAL 2 HOUR WHERE shop_id = %llu",
             (unsigned long long)shop2);
    tu_exec(f.conn, q);
    uint64_t before = drained_by(f.ctx, RSV_OP_SWEEP);
    TU_OK(f.ctx, rsv_sweep(f.ctx, shop2, 0, NULL));
    ck_assert_uint_eq(drained_by(f.ctx, RSV_OP_SWEEP) - before, 140);
    snprintf(q, sizeof q, "SELECT COALESCE(SUM(units), 0) FROM rsv_pool WHERE "
             "shop_id = %llu", (unsigned long long)shop2);
    ck_assert_int_eq(tu_i64(f.conn, q), 0);
    /* the item sells on: 2 units, none lost */
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, shop2, TOK("z"), 0, 0, 2, 0));
    int rc = rsv_reserve_one(f.ctx, shop2, TOK("y"), 0, 0, 1, 0);
    TU_RC(f.ctx, rc, RSV_EOUTOFSTOCK);
    tu_fix_close(&f);
}
END_TEST

START_TEST(extend_and_status)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 5);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("x"), 1, 1, 1, 1000));
    int32_t st;
    int64_t ms = 0;
    TU_OK(f.ctx, rsv_checkout_status(f.ctx, f.shop, TOK("x"), &st, NULL, &ms));
    ck_assert_int_le(ms, 1000);
    TU_OK(f.ctx, rsv_extend(f.ctx, f.shop, TOK("x"), 3600000));
    TU_OK(f.ctx, rsv_checkout_status(f.ctx, f.shop, TOK("x"), &st, NULL, &ms));
    ck_assert_int_gt(ms, 3500000);
    int rc = rsv_checkout_status(f.ctx, f.shop, TOK("nope"), &st, NULL, NULL);
    TU_RC(f.ctx, rc, RSV_ENOTFOUND);
    rc = rsv_claim(f.ctx, f.shop, TOK("nope"));
    TU_RC(f.ctx, rc, RSV_ENOTFOUND);
    rc = rsv_release(f.ctx, f.shop, TOK("nope"));
    TU_RC(f.ctx, rc, RSV_ENOTFOUND);
    tu_fix_close(&f);
}
END_TEST

static int64_t session_reads(MYSQL *c)
{
    return tu_i64(c, "SELECT SUM(VARIABLE_VALUE) FROM "
                     "information_schema.SESSION_STATUS WHERE VARIABLE_NAME "
                     "IN ('HANDLER_READ_KEY', 'HANDLER_READ_NEXT', "
                     "'HANDLER_READ_RND_NEXT')");
}

/* The statistics of a schema loaded empty stay those of empty tables until
 * InnoDB recalculates them in the background.  With them the optimizer
 * read every hold of the shop (primary key on shop_id alone) and every
 * settlement (full scan) once per ledger row: an audit of 10,000 items
 * took 90 s.  The reads of the audit and of the stock view must grow with
 * the rows, not with ledger rows times holds. */
/* A connection to a new database `<suite db>_<suffix>` (name in db) with
 * the schema loaded and the statistics of its empty tables frozen, as a
 * fresh deployment has them until the background recalculation comes
 * round.  Drop it with drop_fresh_db(). */
static MYSQL *fresh_db(char *db, size_t n, const char *suffix)
{
    char q[256];
    snprintf(db, n, "%s_%s", tu_db_name(), suffix);
    MYSQL *c = tu_connect_nodb();
    snprintf(q, sizeof q, "CREATE DATABASE %s", db);
    tu_exec(c, q);
    ck_assert_int_eq(mysql_select_db(c, db), 0);
    tu_load_schema(c);
    static const char *const tables[] = {
        "rsv_holds", "rsv_journal", "rsv_pool",
        "rsv_checkouts"};
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        snprintf(q, sizeof q, "ALTER TABLE %s STATS_AUTO_RECALC = 0",
                 tables[i]);
        tu_exec(c, q);
        snprintf(q, sizeof q, "ANALYZE TABLE %s", tables[i]);
        tu_exec(c, q);
    }
    return c;
}

static void drop_fresh_db(MYSQL *c, const char *db)
{
    char q[160];
    snprintf(q, sizeof q, "DROP DATABASE %s", db);
    tu_exec(c, q);
    mysql_close(c);
}

START_TEST(audit_and_stock_view_read_each_key_once)
{
    enum { KEYS = 150 };
    char q[256], db[96];
    MYSQL *c = fresh_db(db, sizeof db, "fresh");
    rsv_ctx *ctx = NULL;
    ck_assert_int_eq(rsv_open(&ctx, c, NULL), RSV_OK);
    uint64_t shop = 7;
    for (uint64_t item = 1; item <= KEYS; item++) {
        char a[32], b[32];
        snprintf(a, sizeof a, "a%llu", (unsigned long long)item);
        snprintf(b, sizeof b, "b%llu", (unsigned long long)item);
        TU_OK(ctx, rsv_stock_set(ctx, shop, item, 1, 3));
        TU_OK(ctx, rsv_reserve_one(ctx, shop, TOK(a), item, 1, 1, 0));
        TU_OK(ctx, rsv_reserve_one(ctx, shop, TOK(b), item, 1, 1, 0));
        TU_OK(ctx, rsv_claim(ctx, shop, TOK(a)));
    }
    /* KEYS ledger rows, KEYS holds, KEYS settlements, 2 * KEYS checkouts:
     * a few reads per row and per key (about 40 per key, measured); the
     * plan that reads the shop's holds and settlements once per ledger row
     * reads over 2 * KEYS * KEYS (50,713 measured) */
    int64_t r0 = session_reads(c), v = -1;
    TU_OK(ctx, rsv_audit(ctx, shop, 0, NULL, NULL, &v));
    int64_t audit_reads = session_reads(c) - r0;
    ck_assert_int_eq(v, 0);
    ck_assert_msg(audit_reads < 100 * KEYS, "rsv_audit read %lld rows for "
                  "%d keys", (long long)audit_reads, KEYS);

    r0 = session_reads(c);
    snprintf(q, sizeof q, "SELECT SUM(held) + 0 * SUM(on_hand) FROM "
                          "rsv_stock WHERE shop_id = %llu",
             (unsigned long long)shop);
    ck_assert_int_eq(tu_i64(c, q), KEYS);
    int64_t view_reads = session_reads(c) - r0;
    ck_assert_msg(view_reads < 100 * KEYS, "rsv_stock read %lld rows "
                  "for %d keys", (long long)view_reads, KEYS);
    rsv_close(ctx);
    drop_fresh_db(c, db);
}
END_TEST

/* rsv_sweep's scans read per key, not per hold or checkout: the due keys
 * come from loose index scans (the holds' expiry index, the settlements'
 * key), and the purge reads one range per status that ends at the
 * retention.  Before, every sweep read every hold of the shop and every
 * checkout (over 2 * KEYS * HOLDS rows here), however few were due.  The
 * loose scan is the optimizer's choice once the statistics are current
 * (InnoDB's background recalculation; ANALYZE here): with the empty
 * tables' statistics of a freshly loaded schema it reads the shop's
 * entries of the expiry index instead.  The purge's ranges do not depend
 * on statistics. */
START_TEST(sweep_reads_each_key_not_each_hold)
{
    enum { KEYS = 4, HOLDS = 150 };
    char db[96];
    MYSQL *c = fresh_db(db, sizeof db, "sweep");
    rsv_ctx *ctx = NULL;
    ck_assert_int_eq(rsv_open(&ctx, c, NULL), RSV_OK);
    uint64_t shop = 9;
    for (uint64_t item = 1; item <= KEYS; item++) {
        TU_OK(ctx, rsv_stock_set(ctx, shop, item, 1, 2 * HOLDS));
        for (int j = 0; j < HOLDS; j++) {
            char t[32];
            snprintf(t, sizeof t, "h%llu-%d", (unsigned long long)item, j);
            TU_OK(ctx, rsv_reserve_one(ctx, shop, TOK(t), item, 1, 1, 0));
        }
    }
    tu_exec(c, "ANALYZE TABLE rsv_holds");
    int64_t released = -1, r0 = session_reads(c);
    TU_OK(ctx, rsv_sweep(ctx, shop, 0, &released));
    int64_t reads = session_reads(c) - r0;
    ck_assert_int_eq(released, 0);
    ck_assert_msg(reads < 100, "rsv_sweep read %lld rows for %d keys and %d "
                  "holds, none due", (long long)reads, KEYS, KEYS * HOLDS);
    /* and it still finds what is due: one expired hold, one settlement */
    TU_OK(ctx, rsv_reserve_one(ctx, shop, TOK("short"), 2, 1, 1, 1));
    TU_OK(ctx, rsv_claim(ctx, shop, TOK("h3-0")));
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
    TU_OK(ctx, rsv_sweep(ctx, shop, 0, &released));
    ck_assert_int_eq(released, 1);
    ck_assert_int_eq(tu_i64(c, "SELECT COUNT(*) FROM rsv_journal"),
                     0);
    ck_assert_int_eq(tu_on_hand(ctx, shop, 3, 1), 2 * HOLDS - 1);
    rsv_close(ctx);
    drop_fresh_db(c, db);
}
END_TEST

/* The purge of old checkouts keeps the lock order: checkout row first.
 * A re-reserve of a checkout the purge is about to delete holds the
 * checkout row and then moves the row's entry in the (shop_id, status,
 * updated_at) index; a purge that deleted through that index held the
 * entry and waited for the row: a deadlock.  Now the purge reads its
 * candidates without locks and deletes by primary key, rechecking them. */
struct sweep_run {
    rsv_ctx *ctx;
    uint64_t shop;
    int rc;
};

static void *sweep_thread(void *p)
{
    struct sweep_run *r = p;
    r->rc = rsv_sweep(r->ctx, r->shop, 0, NULL);
    return NULL;
}

START_TEST(purge_keeps_the_lock_order)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    MYSQL *c2;
    rsv_ctx *sweeper = tu_open(&c2);
    tu_fix_stock(&f, 5, 1, 1000);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("old-1"), 5, 1, 1, 0));
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("old-1")));
    char q[320];
    snprintf(q, sizeof q, "UPDATE rsv_checkouts SET updated_at = "
             "updated_at - INTERVAL 30 DAY WHERE shop_id = %llu",
             (unsigned long long)f.shop);
    tu_exec(f.conn, q);
    /* recent checkouts, so that the old one is found through the index
     * (on a table this small the server would read every row instead) */
    for (int i = 0; i < 300; i++) {
        char tok[32];
        snprintf(tok, sizeof tok, "new-%d", i);
        TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK(tok), 5, 1, 1, 0));
    }
    tu_exec(f.conn, "ANALYZE TABLE rsv_checkouts");

    /* a re-reserve in flight: the checkout row first */
    MYSQL *other = tu_connect_in_txn();
    snprintf(q, sizeof q, "SELECT status FROM rsv_checkouts WHERE "
             "shop_id = %llu AND checkout_token = 'old-1' FOR UPDATE",
             (unsigned long long)f.shop);
    ck_assert_int_eq(tu_i64(other, q), 2);
    struct sweep_run r = {sweeper, f.shop, -1};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, sweep_thread, &r), 0);
    struct timespec ts = {0, 400 * 1000 * 1000}; /* the sweep now waits */
    nanosleep(&ts, NULL);
    /* then its entry in the status index */
    snprintf(q, sizeof q, "UPDATE rsv_checkouts SET status = 1, "
             "updated_at = NOW(6) WHERE shop_id = %llu AND checkout_token = "
             "'old-1'", (unsigned long long)f.shop);
    if (mysql_query(other, q) != 0)
        ck_abort_msg("the re-reserve's update failed: %s", mysql_error(other));
    ck_assert_int_eq(mysql_query(other, "COMMIT"), 0);
    pthread_join(t, NULL);
    TU_RC(sweeper, r.rc, RSV_OK);
    uint64_t deadlocks = 9;
    TU_OK(sweeper, rsv_stats_get(sweeper, RSV_STAT_DEADLOCKS, RSV_OP_SWEEP,
                                 &deadlocks));
    ck_assert_uint_eq(deadlocks, 0);
    /* rechecked on the locked row: re-reserved, so not purged */
    snprintf(q, sizeof q, "SELECT status FROM rsv_checkouts WHERE "
             "shop_id = %llu AND checkout_token = 'old-1'",
             (unsigned long long)f.shop);
    ck_assert_int_eq(tu_i64(f.conn, q), 1);

    /* and a checkout that stays old is purged */
    snprintf(q, sizeof q, "UPDATE rsv_checkouts SET status = 2, "
             "updated_at = updated_at - INTERVAL 30 DAY WHERE shop_id = %llu "
             "AND checkout_token = 'old-1'", (unsigned long long)f.shop);
    tu_exec(f.conn, q);
    TU_OK(sweeper, rsv_sweep(sweeper, f.shop, 0, NULL));
    snprintf(q, sizeof q, "SELECT COUNT(*) FROM rsv_checkouts WHERE "
             "shop_id = %llu", (unsigned long long)f.shop);
    ck_assert_int_eq(tu_i64(f.conn, q), 300);
    mysql_close(other);
    rsv_close(sweeper);
    mysql_close(c2);
    tu_fix_close(&f);
}
END_TEST

int main(void)
{
    tu_db_create("lifecycle");
    Suite *s = suite_create("lifecycle");
    tu_add(s, "stock_set_get_adjust", stock_set_get_adjust);
    tu_add(s, "reserve_claim_takes_stock_once", reserve_claim_takes_stock_once);
    tu_add(s, "release_gives_units_back", release_gives_units_back);
    tu_add(s, "replenish_fills_to_cap", replenish_fills_to_cap);
    tu_add(s, "replenish_mints_exactly_the_gap",
           replenish_mints_exactly_the_gap);
    tu_add(s, "pool_refills_inline", pool_refills_inline);
    tu_add(s, "pool_drain_gives_rows_back", pool_drain_gives_rows_back);
    tu_add(s, "pool_drain_leaves_rows_in_flight",
           pool_drain_leaves_rows_in_flight);
    tu_add(s, "pool_rows_carry_several_units", pool_rows_carry_several_units);
    tu_add(s, "sweep_drains_idle_pools", sweep_drains_idle_pools);
    tu_add(s, "extend_and_status", extend_and_status);
    tu_add(s, "sweep_reads_each_key_not_each_hold",
           sweep_reads_each_key_not_each_hold);
    tu_add(s, "purge_keeps_the_lock_order", purge_keeps_the_lock_order);
    tu_add(s, "audit_and_stock_view_read_each_key_once",
           audit_and_stock_view_read_each_key_once);
    int rc = tu_run(s);
    tu_db_drop();
    return rc;
}
