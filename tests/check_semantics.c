/*
 * check_semantics.c - what a real checkout needs: carts in one round trip,
 * multiple locations, expiry and sweeping, idempotent claims, re-reserves,
 * claims inside the caller's transaction, stock changes, lock conflicts.
 */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <reserve/batch.h>
#include <reserve/stats.h>

#include "testutil.h"
#include "../lib/test_flags.h"

#define TOK(s) (s), strlen(s)

static int64_t status_var(MYSQL *c, const char *name)
{
    char q[128];
    snprintf(q, sizeof q, "SELECT VARIABLE_VALUE FROM information_schema."
             "SESSION_STATUS WHERE VARIABLE_NAME = '%s'", name);
    return tu_i64(c, q);
}

/* Statements the server ran for one reserve of an n-line cart (fast path:
 * pools are full). */
static int64_t statements_for(rsv_ctx *ctx, MYSQL *c, uint64_t shop, int lines,
                              int round)
{
    rsv_cart *cart;
    ck_assert_int_eq(rsv_cart_new(&cart), RSV_OK);
    for (int i = 0; i < lines; i++) {
        uint64_t loc = 1;
        ck_assert_int_eq(rsv_cart_add(cart, (uint64_t)(100 + i), &loc, 1, 1, 0),
                         RSV_OK);
    }
    char tok[64];
    snprintf(tok, sizeof tok, "stmts-%d-%d", lines, round);
    int64_t before = status_var(c, "Questions");
    TU_OK(ctx, rsv_reserve(ctx, shop, TOK(tok), cart, 0));
    int64_t after = status_var(c, "Questions");
    rsv_cart_free(cart);
    return after - before - 1; /* the status query itself */
}

/* Statements per reserve of 1, 5 and 50 lines; the counter of reserves
 * done in one round trip in *one_trip. */
static void count_statements(uint32_t flags, int64_t counts[3],
                             uint64_t *one_trip)
{
    tu_fix f;
    /* From the bottom: a read from a cursor that happens to sit past the
     * last row comes up short and reads again from the bottom (4 more
     * statements, about one run in 30 before this flag was set here). */
    tu_fix_open(&f, RSV_OPT_NO_PROACTIVE_REFILL | TEST_OPT_READ_FROM_BOTTOM |
                        flags, 0);
    for (int i = 0; i < 50; i++)
        tu_fix_pooled(&f, (uint64_t)(100 + i), 1, 100);
    int sizes[] = {1, 5, 50};
    for (int k = 0; k < 3; k++) {
        statements_for(f.ctx, f.conn, f.shop, sizes[k], 0); /* prepares */
        counts[k] = statements_for(f.ctx, f.conn, f.shop, sizes[k], 1);
    }
    fprintf(stderr, "statements per reserve%s: 1 line %lld, 5 lines %lld, "
            "50 lines %lld\n", flags ? " (statements only)" : "",
            (long long)counts[0], (long long)counts[1], (long long)counts[2]);
    ck_assert_int_eq(rsv_stats_get(f.ctx, RSV_STAT_ONE_TRIP, RSV_OP_RESERVE,
                                   one_trip), RSV_OK);
    tu_fix_close(&f);
}

START_TEST(statements_do_not_grow_with_lines)
{
    int64_t counts[3];
    uint64_t one_trip = 99;
    /* The statement path: the same statements whatever the cart size (7,
     * and one more for the pool rows taken in part, which keep the rest
     * of their units). */
    count_statements(TEST_OPT_STATEMENTS_ONLY, counts, &one_trip);
    ck_assert_int_eq(counts[0], counts[1]);
    ck_assert_int_eq(counts[1], counts[2]);
    ck_assert_int_le(counts[0], 8);
    ck_assert_uint_eq(one_trip, 0);
    /* With the schema's procedure: a cart of up to 32 keys is one CALL;
     * bigger carts send the statements, still the same number. */
    count_statements(0, counts, &one_trip);
    ck_assert_int_eq(counts[0], 1);
    ck_assert_int_eq(counts[1], 1);
    ck_assert_int_le(counts[2], 8);
    ck_assert_uint_eq(one_trip, 4); /* the 1- and 5-line reserves */
}
END_TEST

START_TEST(locations_in_order_of_preference)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 10, 2);
    tu_fix_stock(&f, 1, 20, 10);
    tu_fix_stock(&f, 1, 30, 10);
    rsv_cart *cart;
    TU_OK(f.ctx, rsv_cart_new(&cart));
    uint64_t locs[] = {10, 20, 30};
    /* 1 unit: the first location covers it */
    TU_OK(f.ctx, rsv_cart_add(cart, 1, locs, 3, 1, 0));
    TU_OK(f.ctx, rsv_reserve(f.ctx, f.shop, TOK("pref-1"), cart, 0));
    uint64_t where;
    int64_t q;
    size_t n;
    TU_OK(f.ctx, rsv_cart_allocation_count(cart, 0, &n));
    ck_assert_uint_eq(n, 1);
    TU_OK(f.ctx, rsv_cart_allocation(cart, 0, 0, &where, &q));
    ck_assert_uint_eq(where, 10);
    ck_assert_int_eq(q, 1);
    /* 5 units, no split: location 10 has 1 left, so 20 holds the line */
    rsv_cart_clear(cart);
    TU_OK(f.ctx, rsv_cart_add(cart, 1, locs, 3, 5, 0));
    TU_OK(f.ctx, rsv_reserve(f.ctx, f.shop, TOK("pref-2"), cart, 0));
    TU_OK(f.ctx, rsv_cart_allocation(cart, 0, 0, &where, &q));
    ck_assert_uint_eq(where, 20);
    ck_assert_int_eq(q, 5);
    ck_assert_int_eq(rsv_cart_allocation(cart, 0, 1, &where, &q), RSV_ERANGE);
    /* 8 units, split: 1 at 10, 5 at 20, 2 at 30 */
    rsv_cart_clear(cart);
    TU_OK(f.ctx, rsv_cart_add(cart, 1, locs, 3, 8, RSV_LINE_SPLIT));
    TU_OK(f.ctx, rsv_reserve(f.ctx, f.shop, TOK("pref-3"), cart, 0));
    TU_OK(f.ctx, rsv_cart_allocation_count(cart, 0, &n));
    ck_assert_uint_eq(n, 3);
    int64_t expect[3] = {1, 5, 2};
    for (size_t i = 0; i < 3; i++) {
        TU_OK(f.ctx, rsv_cart_allocation(cart, 0, i, &where, &q));
        ck_assert_uint_eq(where, locs[i]);
        ck_assert_int_eq(q, expect[i]);
    }
    /* 9 units without split: no single location has 9 -> out of stock,
     * and the whole cart is refused (line 0 would fit) */
    rsv_cart_clear(cart);
    TU_OK(f.ctx, rsv_cart_add(cart, 1, &locs[2], 1, 1, 0));
    TU_OK(f.ctx, rsv_cart_add(cart, 1, locs, 3, 9, 0));
    int rc = rsv_reserve(f.ctx, f.shop, TOK("pref-4"), cart, 0);
    TU_RC(f.ctx, rc, RSV_EOUTOFSTOCK);
    ck_assert_uint_eq(rsv_cart_failed_line(cart), 1);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 30), 2);
    /* the same item on two lines of one cart */
    rsv_cart_clear(cart);
    TU_OK(f.ctx, rsv_cart_add(cart, 1, &locs[2], 1, 3, 0));
    TU_OK(f.ctx, rsv_cart_add(cart, 1, &locs[2], 1, 4, 0));
    TU_OK(f.ctx, rsv_reserve(f.ctx, f.shop, TOK("pref-5"), cart, 0));
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 30), 9);
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("pref-5")));
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 30), 3);
    rsv_cart_free(cart);
    tu_fix_close(&f);
}
END_TEST

START_TEST(large_cart_all_or_nothing)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    rsv_cart *cart;
    TU_OK(f.ctx, rsv_cart_new(&cart));
    uint64_t loc = 1;
    for (int i = 0; i < 300; i++) {
        tu_fix_stock(&f, (uint64_t)i, 1, i == 299 ? 1 : 5);
        TU_OK(f.ctx, rsv_cart_add(cart, (uint64_t)i, &loc, 1, 2, 0));
    }
    int rc = rsv_reserve(f.ctx, f.shop, TOK("big"), cart, 0);
    TU_RC(f.ctx, rc, RSV_EOUTOFSTOCK);
    ck_assert_uint_eq(rsv_cart_failed_line(cart), 299);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 0, 1) +
                         tu_held(f.ctx, f.shop, 298, 1), 0);
    TU_OK(f.ctx, rsv_stock_set(f.ctx, f.shop, 299, 1, 2));
    TU_OK(f.ctx, rsv_reserve(f.ctx, f.shop, TOK("big"), cart, 0));
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 150, 1), 2);
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("big")));
    rsv_cart_free(cart);
    tu_fix_close(&f);
}
END_TEST

START_TEST(expired_hold_still_claimable_until_taken)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 1);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("slow-payer"), 1, 1, 1,
                                 50));
    usleep(150 * 1000);
    int32_t st;
    TU_OK(f.ctx, rsv_checkout_status(f.ctx, f.shop, TOK("slow-payer"), &st, NULL, NULL));
    ck_assert_int_eq(st, RSV_STATUS_EXPIRED);
    /* nobody took the unit: the claim still succeeds */
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("slow-payer")));
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), 0);
    tu_fix_close(&f);
}
END_TEST

START_TEST(expired_hold_given_to_another_buyer)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 1);
    tu_fix_stock(&f, 2, 1, 5);
    rsv_cart *cart;
    TU_OK(f.ctx, rsv_cart_new(&cart));
    uint64_t loc = 1;
    TU_OK(f.ctx, rsv_cart_add(cart, 1, &loc, 1, 1, 0));
    TU_OK(f.ctx, rsv_cart_add(cart, 2, &loc, 1, 2, 0));
    TU_OK(f.ctx, rsv_reserve(f.ctx, f.shop, TOK("gone"), cart, 50));
    int rc = rsv_reserve_one(f.ctx, f.shop, TOK("next"), 1, 1, 1, 0);
    TU_RC(f.ctx, rc, RSV_EOUTOFSTOCK); /* still held */
    usleep(150 * 1000);
    /* no sweeper ran: the refill gives the expired unit to the next buyer */
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("next"), 1, 1, 1, 0));
    rc = rsv_claim(f.ctx, f.shop, TOK("gone"));
    TU_RC(f.ctx, rc, RSV_EEXPIRED);
    /* the other line was released with it, nothing was taken */
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 2, 1), 0);
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 2, 1), 5);
    rc = rsv_claim(f.ctx, f.shop, TOK("gone"));
    TU_RC(f.ctx, rc, RSV_EEXPIRED);
    rc = rsv_extend(f.ctx, f.shop, TOK("gone"), 1000);
    TU_RC(f.ctx, rc, RSV_EEXPIRED);
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("next")));
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), 0);
    rsv_cart_free(cart);
    tu_fix_close(&f);
}
END_TEST

START_TEST(sweep_gives_back_expired_holds)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 10);
    tu_fix_stock(&f, 2, 1, 10);
    for (int i = 0; i < 6; i++) {
        char tok[16];
        snprintf(tok, sizeof tok, "s%d", i);
        TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK(tok), 1 + (uint64_t)(i % 2), 1,
                                     1, i < 4 ? 50 : 600000));
    }
    TU_OK(f.ctx, rsv_extend(f.ctx, f.shop, TOK("s0"), 600000));
    usleep(150 * 1000);
    int64_t released = -1;
    TU_OK(f.ctx, rsv_sweep(f.ctx, f.shop, 0, &released));
    ck_assert_int_eq(released, 3);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), 2);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 2, 1), 1);
    TU_OK(f.ctx, rsv_sweep(f.ctx, f.shop, 0, &released));
    ck_assert_int_eq(released, 0);
    int rc = rsv_claim(f.ctx, f.shop, TOK("s1"));
    TU_RC(f.ctx, rc, RSV_EEXPIRED);
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("s0")));
    tu_fix_close(&f);
}
END_TEST

/* max_holds is a bound, also inside one item and location: 10 expired
 * holds at one key and 5 at another, given back 3, then 4, then the
 * rest.  (The sweep used to finish the key it was folding: 10 at once.) */
START_TEST(sweep_gives_back_at_most_max_holds)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 20);
    tu_fix_stock(&f, 2, 1, 20);
    for (int i = 0; i < 15; i++) {
        char tok[16];
        snprintf(tok, sizeof tok, "m%d", i);
        TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK(tok), i < 10 ? 1 : 2,
                                     1, 1, 20));
    }
    usleep(60 * 1000);
    int64_t released = -1;
    TU_OK(f.ctx, rsv_sweep(f.ctx, f.shop, 3, &released));
    ck_assert_int_eq(released, 3);
    TU_OK(f.ctx, rsv_sweep(f.ctx, f.shop, 4, &released));
    ck_assert_int_eq(released, 4);
    TU_OK(f.ctx, rsv_sweep(f.ctx, f.shop, 0, &released));
    ck_assert_int_eq(released, 8);
    char q[128];
    snprintf(q, sizeof q, "SELECT COUNT(*) FROM rsv_holds WHERE "
             "shop_id = %llu", (unsigned long long)f.shop);
    ck_assert_int_eq(tu_i64(f.conn, q), 0);
    TU_OK(f.ctx, rsv_sweep(f.ctx, f.shop, 1, &released));
    ck_assert_int_eq(released, 0);
    tu_fix_close(&f);
}
END_TEST

START_TEST(reserve_again_replaces_the_cart)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 3);
    tu_fix_stock(&f, 2, 1, 3);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("cart"), 1, 1, 3, 0));
    /* the buyer changes the cart: never blocked by their own hold */
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("cart"), 1, 1, 2, 0));
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), 2);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("cart"), 2, 1, 3, 0));
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), 0);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 2, 1), 3);
    /* a cart change that cannot be served keeps the old cart */
    int rc = rsv_reserve_one(f.ctx, f.shop, TOK("cart"), 1, 1, 4, 0);
    TU_RC(f.ctx, rc, RSV_EOUTOFSTOCK);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 2, 1), 3);
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("cart")));
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), 3);
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 2, 1), 0);
    rc = rsv_reserve_one(f.ctx, f.shop, TOK("cart"), 1, 1, 1, 0);
    TU_RC(f.ctx, rc, RSV_ECLAIMED);
    /* after a release the token may reserve again */
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("cart2"), 1, 1, 1, 0));
    TU_OK(f.ctx, rsv_release(f.ctx, f.shop, TOK("cart2")));
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("cart2"), 1, 1, 3, 0));
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("cart2")));
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), 0);
    tu_fix_close(&f);
}
END_TEST

START_TEST(claim_inside_caller_transaction)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 5);
    tu_exec(f.conn,
            "CREATE TABLE IF NOT EXISTS app_orders (id INT PRIMARY KEY)");
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("o1"), 1, 1, 2, 0));
    /* rolled back with the order */
    tu_exec(f.conn, "START TRANSACTION");
    tu_exec(f.conn, "INSERT INTO app_orders VALUES (1)");
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("o1")));
    ck_assert_int_eq(tu_i64(f.conn, "SELECT @@in_transaction"), 1);
    tu_exec(f.conn, "ROLLBACK");
    ck_assert_int_eq(tu_i64(f.conn, "SELECT COUNT(*) FROM app_orders"), 0);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), 2);
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), 5);
    /* committed with the order */
    tu_exec(f.conn, "START TRANSACTION");
    tu_exec(f.conn, "INSERT INTO app_orders VALUES (1)");
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("o1")));
    tu_exec(f.conn, "COMMIT");
    ck_assert_int_eq(tu_i64(f.conn, "SELECT COUNT(*) FROM app_orders"), 1);
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), 3);
    tu_exec(f.conn, "DROP TABLE app_orders");
    tu_fix_close(&f);
}
END_TEST

START_TEST(stock_changes_keep_invariants)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_pooled(&f, 1, 1, 100);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("h"), 1, 1, 10, 0));
    int64_t pooled;
    TU_OK(f.ctx, rsv_stock_set(f.ctx, f.shop, 1, 1, 50));
    TU_OK(f.ctx, rsv_stock_get(f.ctx, f.shop, 1, 1, NULL, NULL, &pooled, NULL));
    ck_assert_int_le(pooled, 40);
    tu_audit_clean();
    int rc = rsv_stock_set(f.ctx, f.shop, 1, 1, 9);
    TU_RC(f.ctx, rc, RSV_ESTOCK);
    ck_assert(strstr(rsv_errmsg(f.ctx), "held") != NULL);
    TU_OK(f.ctx, rsv_stock_set(f.ctx, f.shop, 1, 1, 10));
    TU_OK(f.ctx, rsv_stock_get(f.ctx, f.shop, 1, 1, NULL, NULL, &pooled, NULL));
    ck_assert_int_eq(pooled, 0);
    rc = rsv_reserve_one(f.ctx, f.shop, TOK("h2"), 1, 1, 1, 0);
    TU_RC(f.ctx, rc, RSV_EOUTOFSTOCK);
    TU_OK(f.ctx, rsv_stock_adjust(f.ctx, f.shop, 1, 1, 7, NULL));
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("h2"), 1, 1, 7, 0));
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("h")));
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), 7);
    TU_OK(f.ctx, rsv_stock_adjust(f.ctx, f.shop, 1, 1, 0, NULL));
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), 7);
    tu_fix_close(&f);
}
END_TEST

START_TEST(lock_wait_timeout_reports_busy)
{
    tu_fix f;
    tu_fix_open_impatient(&f, 1);
    tu_fix_stock(&f, 1, 1, 5);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("locked"), 1, 1, 1, 0));
    MYSQL *other = tu_fix_admin(&f);
    char q[256];
    tu_exec(other, "START TRANSACTION");
    snprintf(q, sizeof q, "SELECT * FROM rsv_checkouts WHERE shop_id=%llu "
             "FOR UPDATE", (unsigned long long)f.shop);
    tu_exec(other, q);
    int rc = rsv_claim(f.ctx, f.shop, TOK("locked"));
    TU_RC(f.ctx, rc, RSV_EBUSY);
    ck_assert(strstr(rsv_errmsg(f.ctx), "1205") != NULL);
    ck_assert_int_eq(tu_i64(f.conn, "SELECT @@in_transaction"), 0);
    tu_exec(other, "ROLLBACK");
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("locked")));
    tu_fix_close(&f);
}
END_TEST


/* A locking read that fails after the server has started sending its
 * result (here: the slow path's blocking pool read hits the lock-wait
 * timeout) must leave the cached statement reusable.  Connector/C 3.3
 * leaves such a statement in a state where its next execute waits for rows
 * that never come; the library re-prepares it instead.  Before the fix the
 * second reserve hung forever with its transaction open (the soak's hang). */
START_TEST(statement_failed_mid_result_is_reusable)
{
    tu_fix f;
    tu_fix_open_impatient(&f, 0);
    /* Item 2: two units pooled, a third only in the ledger, so every
     * reserve of 3 takes the slow path. */
    for (uint64_t item = 1; item <= 2; item++)
        tu_fix_pooled(&f, item, 1, 2);
    tu_fix_stock(&f, 2, 1, 3);
    MYSQL *other = tu_fix_admin(&f);
    char q[256];
    tu_exec(other, "START TRANSACTION");
    snprintf(q, sizeof q, "SELECT id FROM rsv_pool WHERE shop_id=%llu "
             "AND item_id = 2 ORDER BY id LIMIT 1 FOR UPDATE",
             (unsigned long long)f.shop);
    tu_exec(other, q);
    /* The slow path's blocking read (one UNION ALL, item 1's part first)
     * has sent item 1's rows when item 2's part times out. */
    rsv_cart *cart;
    TU_OK(f.ctx, rsv_cart_new(&cart));
    uint64_t loc = 1;
    TU_OK(f.ctx, rsv_cart_add(cart, 1, &loc, 1, 1, 0));
    TU_OK(f.ctx, rsv_cart_add(cart, 2, &loc, 1, 3, 0));
    int rc = rsv_reserve(f.ctx, f.shop, TOK("mid"), cart, 0);
    TU_RC(f.ctx, rc, RSV_EBUSY);
    ck_assert_int_eq(tu_i64(f.conn, "SELECT @@in_transaction"), 0);
    tu_exec(other, "ROLLBACK");
    TU_OK(f.ctx, rsv_reserve(f.ctx, f.shop, TOK("mid"), cart, 0));
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 2, 1), 3);
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("mid")));
    rsv_cart_free(cart);
    tu_fix_close(&f);
}
END_TEST

/* The slow path waits for pool rows in-flight checkouts of the same item
 * hold, never for rows of another item.  A blocking range read of an empty
 * (or short) pool goes on to the next index record - the first pool row of
 * the next item - and waits for its lock: two slow paths then deadlocked
 * across items (the soak).  Here item 10's pool is empty and item 11's
 * first row, right after it in the index, is locked by a checkout in
 * flight: the reserve of item 10 must not wait for it. */
/* Item `item` at location 1 with `stock` units and a pool of at most
 * `cap` rows (the row's own pool_cap), filled. */
static void pooled_stock(rsv_ctx *ctx, MYSQL *c, uint64_t shop, uint64_t item,
                         int64_t stock, int cap)
{
    TU_OK(ctx, rsv_stock_set(ctx, shop, item, 1, stock));
    char q[256];
    snprintf(q, sizeof q, "UPDATE rsv_ledger SET pool_cap = %d WHERE "
             "shop_id = %llu AND item_id = %llu", cap,
             (unsigned long long)shop, (unsigned long long)item);
    tu_exec(c, q);
    TU_OK(ctx, rsv_replenish(ctx, shop, item, 1, NULL));
}

START_TEST(slow_path_never_waits_for_other_items)
{
    tu_fix f;
    tu_fix_open_impatient(&f, 0);
    /* item 10: 2 units pooled, 1 left in the ledger, and a reserve of all
     * 3, which neither the pool nor the ledger row alone covers */
    pooled_stock(f.ctx, f.conn, f.shop, 10, 3, 2);
    char q[256];
    tu_fix_pooled(&f, 11, 1, 2);
    /* as a library transaction would: READ COMMITTED, no gap locks */
    MYSQL *other = tu_connect_in_txn();
    snprintf(q, sizeof q, "SELECT id FROM rsv_pool WHERE shop_id=%llu "
             "AND item_id = 11 ORDER BY id LIMIT 1 FOR UPDATE",
             (unsigned long long)f.shop);
    tu_exec(other, q);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("other-item"), 10, 1, 3,
                                 0));
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 10, 1), 3);
    ck_assert_int_eq(tu_i64(f.conn, "SELECT @@in_transaction"), 0);
    uint64_t slow = 0;
    TU_OK(f.ctx, rsv_stats_get(f.ctx, RSV_STAT_SLOW_PATHS, RSV_OP_RESERVE,
                               &slow));
    ck_assert_uint_eq(slow, 1);
    tu_exec(other, "ROLLBACK");
    mysql_close(other);
    tu_fix_close(&f);
}
END_TEST

/* Pool row ids of one item at location 1, ascending. */
static size_t pool_ids(MYSQL *c, uint64_t shop, uint64_t item, uint64_t *ids,
                       size_t max)
{
    char q[256];
    snprintf(q, sizeof q, "SELECT id FROM rsv_pool WHERE shop_id = "
             "%llu AND item_id = %llu AND location_id = 1 "
             "ORDER BY id", (unsigned long long)shop, (unsigned long long)item);
    ck_assert_int_eq(mysql_query(c, q), 0);
    MYSQL_RES *r = mysql_store_result(c);
    ck_assert_ptr_nonnull(r);
    size_t n = 0;
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(r)) && n < max)
        ids[n++] = strtoull(row[0], NULL, 10);
    mysql_free_result(r);
    return n;
}

/* Waits (up to 20 s) until the connection with thread id `who` has been
 * running a statement matching the LIKE pattern `like` for at least
 * 200 ms (waiting for a lock), a statement after query id `after`.
 * Returns that statement's query id, 0 if none came.  (MariaDB's
 * INNODB_LOCK_WAITS does not show these waits; the process list does.) */
static int64_t await_wait(MYSQL *mon, unsigned long who, int64_t after,
                          const char *like)
{
    char q[512];
    snprintf(q, sizeof q, "SELECT COALESCE(MAX(QUERY_ID), 0) FROM "
             "information_schema.PROCESSLIST WHERE ID = %lu AND TIME_MS >= 200 "
             "AND QUERY_ID > %lld AND INFO LIKE '%s' AND INFO NOT LIKE "
             "'%%SKIP LOCKED%%'", who, (long long)after, like);
    for (int i = 0; i < 2000; i++) {
        int64_t id = tu_i64(mon, q);
        if (id > 0)
            return id;
        usleep(10000);
    }
    return 0;
}

/* The slow path's blocking lock of pool rows by primary key. */
#define POOL_WAIT "%rsv_pool u FORCE INDEX (PRIMARY)%FOR UPDATE"

/* What happens around the reserve in slow_path_waits_in_key_order. */
struct key_order_scene {
    MYSQL *taker, *holder, *probe, *mon;
    unsigned long reserver; /* the reserve's connection (thread id) */
    char probe_sql[256];
    int64_t waited_taker, waited_holder;
    int probe_rc; /* the probe's NOWAIT lock of the other item's row */
    char probe_err[256];
};

static void *key_order_timeline(void *p)
{
    struct key_order_scene *sc = p;
    /* the reserve waits for the row the taker took: let it vanish */
    sc->waited_taker = await_wait(sc->mon, sc->reserver, 0, POOL_WAIT);
    tu_exec(sc->taker, "COMMIT");
    /* the reserve then waits for the holder's row: what does it hold? */
    if (sc->waited_taker)
        sc->waited_holder = await_wait(sc->mon, sc->reserver,
                                       sc->waited_taker, POOL_WAIT);
    sc->probe_rc = mysql_query(sc->probe, sc->probe_sql);
    snprintf(sc->probe_err, sizeof sc->probe_err, "%s",
             mysql_error(sc->probe));
    if (sc->probe_rc == 0)
        mysql_free_result(mysql_store_result(sc->probe));
    tu_exec(sc->probe, "ROLLBACK");
    tu_exec(sc->holder, "ROLLBACK");
    return NULL;
}

/* The slow path waits for pool rows only above every pool row it holds
 * (primary-key order), like every reader of pools: InnoDB's deadlock
 * detector counts a SKIP LOCKED reader looking at a row we hold as
 * waiting for it, so a wait below a held row made "deadlocks" whose
 * victims were fast-path reserves (the soak, about one run in six).
 *
 * Item 20 has pool rows a0..a3 and one unit unissued; item 21 has b0, b1.
 * A checkout in flight (taker) has taken a0, another (holder) has a3
 * locked.  A cart of 3 x item 20 and 1 x item 21 goes slow, waits for a0,
 * which vanishes when the taker commits; it then needs a3, the holder's,
 * while it holds b0.  The old slow path waited for a3 holding b0; now it
 * must not hold b0 while it waits (a NOWAIT probe can lock b0), and it
 * still gets a1..a3 and b0 once the holder rolls back.  Each step waits
 * for the server to show the reserve waiting: no timing assumed. */
START_TEST(slow_path_waits_in_key_order)
{
    tu_fix f;
    tu_fix_open(&f, RSV_OPT_NO_PROACTIVE_REFILL, 4);
    tu_fix_pooled(&f, 20, 1, 5);
    tu_fix_pooled(&f, 21, 1, 2);
    uint64_t a[4], b[2];
    ck_assert_uint_eq(pool_ids(f.conn, f.shop, 20, a, 4), 4);
    ck_assert_uint_eq(pool_ids(f.conn, f.shop, 21, b, 2), 2);

    struct key_order_scene sc;
    memset(&sc, 0, sizeof sc);
    sc.taker = tu_connect_in_txn();
    sc.holder = tu_connect_in_txn();
    sc.probe = tu_connect_in_txn();
    sc.mon = tu_connect();
    sc.reserver = mysql_thread_id(f.conn);
    char q[512];
    /* The taker does what a fast-path reserve does, and waits to commit. */
    snprintf(q, sizeof q, "INSERT INTO rsv_checkouts (shop_id, "
             "checkout_token, status, generation, hold_count, expires_at, "
             "created_at, updated_at) VALUES (%llu, 'taker', 1, 1, 1, "
             "NOW(6) + INTERVAL 1 HOUR, NOW(6), NOW(6))",
             (unsigned long long)f.shop);
    tu_exec(sc.taker, q);
    snprintf(q, sizeof q, "DELETE FROM rsv_pool WHERE shop_id = %llu "
             "AND item_id = 20 AND location_id = 1 AND "
             "id = %llu", (unsigned long long)f.shop, (unsigned long long)a[0]);
    tu_exec(sc.taker, q);
    snprintf(q, sizeof q, "INSERT INTO rsv_holds (shop_id, "
             "checkout_token, item_id, location_id, "
             "quantity, generation, expires_at, created_at) VALUES (%llu, "
             "'taker', 20, 1, 1, 1, NOW(6) + INTERVAL 1 HOUR, NOW(6))",
             (unsigned long long)f.shop);
    tu_exec(sc.taker, q);
    snprintf(q, sizeof q, "SELECT id FROM rsv_pool WHERE shop_id = "
             "%llu AND item_id = 20 AND location_id = 1 AND "
             "id = %llu FOR UPDATE", (unsigned long long)f.shop,
             (unsigned long long)a[3]);
    tu_exec(sc.holder, q);
    snprintf(sc.probe_sql, sizeof sc.probe_sql, "SELECT id FROM "
             "rsv_pool WHERE shop_id = %llu AND item_id = "
             "21 AND location_id = 1 AND id = %llu FOR UPDATE NOWAIT",
             (unsigned long long)f.shop, (unsigned long long)b[0]);

    int64_t deadlocks = tu_i64(f.conn, "SELECT VARIABLE_VALUE FROM "
                                  "information_schema.GLOBAL_STATUS WHERE "
                                  "VARIABLE_NAME = 'Innodb_deadlocks'");
    rsv_cart *cart;
    ck_assert_int_eq(rsv_cart_new(&cart), RSV_OK);
    uint64_t loc = 1;
    ck_assert_int_eq(rsv_cart_add(cart, 20, &loc, 1, 3, 0), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 21, &loc, 1, 1, 0), RSV_OK);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, key_order_timeline, &sc), 0);
    TU_OK(f.ctx, rsv_reserve(f.ctx, f.shop, TOK("key-order"), cart, 0));
    pthread_join(t, NULL);
    ck_assert_msg(sc.waited_taker && sc.waited_holder,
                  "the reserve never waited for the taker (%lld) or the "
                  "holder (%lld)", (long long)sc.waited_taker,
                  (long long)sc.waited_holder);
    ck_assert_msg(sc.probe_rc == 0, "the slow path held item 21's row while "
                  "it waited for item 20's: %s", sc.probe_err);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 20, 1), 4); /* 3 + the taker's */
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 21, 1), 1);
    uint64_t slow = 0;
    TU_OK(f.ctx, rsv_stats_get(f.ctx, RSV_STAT_SLOW_PATHS, RSV_OP_RESERVE,
                               &slow));
    ck_assert_uint_eq(slow, 1);
    ck_assert_int_eq(tu_i64(f.conn, "SELECT VARIABLE_VALUE FROM "
                               "information_schema.GLOBAL_STATUS WHERE "
                               "VARIABLE_NAME = 'Innodb_deadlocks'"),
                     deadlocks);
    ck_assert_int_eq(tu_i64(f.conn, "SELECT @@in_transaction"), 0);
    rsv_cart_free(cart);
    mysql_close(sc.taker);
    mysql_close(sc.holder);
    mysql_close(sc.probe);
    mysql_close(sc.mon);
    tu_fix_close(&f);
}
END_TEST

static uint64_t op_stat(rsv_ctx *ctx, uint32_t stat, uint32_t op)
{
    uint64_t n = 0;
    TU_OK(ctx, rsv_stats_get(ctx, stat, op, &n));
    return n;
}

static uint64_t one_trips(rsv_ctx *ctx)
{
    return op_stat(ctx, RSV_STAT_ONE_TRIP, RSV_OP_RESERVE);
}

/* What happens around the reserve in slow_path_goes_back_when_refilled. */
struct refill_scene {
    MYSQL *refiller, *mon;
    int mint;                   /* the refiller adds rows (else only locks) */
    int cart;                   /* a cart of item 30 and item 31 (else
                                   item 30 alone) */
    const char *wait;           /* how the reserve waits for the ledger
                                   row (a LIKE pattern of the statement) */
    unsigned long reserver;
    int64_t waited;
};

/* A wait for a ledger row in share mode: the slow path's, or the waited
 * take's (by procedure or by statements). */
#define LEDGER_SHARE_WAIT "%rsv_ledger%LOCK IN SHARE MODE"

static void *refill_timeline(void *p)
{
    struct refill_scene *sc = p;
    /* the reserve waits for the ledger row: finish the refill */
    sc->waited = await_wait(sc->mon, sc->reserver, 0, sc->wait);
    tu_exec(sc->refiller, "COMMIT");
    return NULL;
}

/* A refill in flight on item 30 of `shop` (its pool empty, 20 units on
 * its ledger row): the refiller holds the ledger row and, if sc->mint,
 * has minted 10 rows.  Reserves 2 units (and with sc->cart 1 unit of
 * item 31, whose pool is full) while the refiller waits for the reserve
 * to wait for the ledger row as sc->wait says, then commits. */
static void refill_scene_run(struct refill_scene *sc, rsv_ctx *ctx,
                             MYSQL *c, uint64_t shop, const char *tok)
{
    TU_OK(ctx, rsv_stock_set(ctx, shop, 30, 1, 20)); /* pool left empty */
    if (sc->cart) {
        TU_OK(ctx, rsv_stock_set(ctx, shop, 31, 1, 20));
        TU_OK(ctx, rsv_replenish(ctx, shop, 31, 1, NULL));
    }
    sc->refiller = tu_connect_in_txn();
    sc->mon = tu_connect();
    sc->reserver = mysql_thread_id(c);
    char q[512];
    snprintf(q, sizeof q, "SELECT next_unit_id INTO @n FROM rsv_ledger "
             "WHERE shop_id = %llu AND item_id = 30 AND "
             "location_id = 1 FOR UPDATE", (unsigned long long)shop);
    tu_exec(sc->refiller, q);
    if (sc->mint) {
        snprintf(q, sizeof q, "INSERT INTO rsv_pool (shop_id, "
                 "item_id, location_id, id) SELECT %llu, 30, "
                 "1, @n + seq FROM seq_0_to_9", (unsigned long long)shop);
        tu_exec(sc->refiller, q);
        snprintf(q, sizeof q, "UPDATE rsv_ledger SET issued = issued + "
                 "10, next_unit_id = next_unit_id + 10 WHERE shop_id = %llu "
                 "AND item_id = 30 AND location_id = 1",
                 (unsigned long long)shop);
        tu_exec(sc->refiller, q);
    }
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, refill_timeline, sc), 0);
    if (sc->cart) {
        rsv_cart *cart;
        uint64_t loc = 1;
        ck_assert_int_eq(rsv_cart_new(&cart), RSV_OK);
        ck_assert_int_eq(rsv_cart_add(cart, 30, &loc, 1, 2, 0), RSV_OK);
        ck_assert_int_eq(rsv_cart_add(cart, 31, &loc, 1, 1, 0), RSV_OK);
        TU_OK(ctx, rsv_reserve(ctx, shop, TOK(tok), cart, 0));
        rsv_cart_free(cart);
    } else {
        TU_OK(ctx, rsv_reserve_one(ctx, shop, TOK(tok), 30, 1, 2, 0));
    }
    pthread_join(t, NULL);
    ck_assert_msg(sc->waited, "the reserve never waited for the ledger row");
    ck_assert_int_eq(tu_held(ctx, shop, 30, 1), 2);
    ck_assert_int_eq(tu_i64(c, "SELECT @@in_transaction"), 0);
    mysql_close(sc->refiller);
    mysql_close(sc->mon);
}

static uint64_t reserve_stat(rsv_ctx *ctx, uint32_t stat)
{
    return op_stat(ctx, stat, RSV_OP_RESERVE);
}

/* When a hot pool runs dry, the carts of that moment go to the slow path
 * and queue for the ledger row behind whoever refills the pool.  They
 * wait in share mode, so that the refill's commit lets them all in
 * together, and a slow path that then finds the pool refilled since its
 * fast path read it lets go of the ledger row at once and takes the fast
 * path again, not holding the row through a slow path of its own (the
 * convoy that made slow paths take seconds at 128 buyers).  (A new
 * checkout of one key takes the waited ledger take instead:
 * short_pool_waits_for_the_ledger_row.) */
START_TEST(slow_path_goes_back_when_refilled)
{
    tu_fix f;
    tu_fix_open(&f, RSV_OPT_NO_PROACTIVE_REFILL, 0);
    struct refill_scene sc;
    memset(&sc, 0, sizeof sc);
    sc.mint = 1;
    sc.cart = 1;
    sc.wait = LEDGER_SHARE_WAIT;
    refill_scene_run(&sc, f.ctx, f.conn, f.shop, "went-back");
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_SHORT_READS), 1);
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_SLOW_PATHS), 0);
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_BACK_TO_FAST), 1);
    if (one_trips(f.ctx) == 1) /* the second CALL (with the procedure) */
        /* CALL, SET TRANSACTION + START TRANSACTION, checkout row,
         * ledger row, ROLLBACK, CALL: the ledger row was held for one
         * statement */
        ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_STATEMENTS), 7);
    tu_fix_close(&f);
}
END_TEST

/* The same wait, but whoever held the ledger row added nothing: the slow
 * path must not stay on its shared lock (two such waiters asking for the
 * exclusive lock would deadlock); it starts again locking exclusively and
 * issues the units itself. */
START_TEST(slow_path_locks_exclusively_when_nothing_came)
{
    tu_fix f;
    tu_fix_open(&f, RSV_OPT_NO_PROACTIVE_REFILL, 0);
    struct refill_scene sc;
    memset(&sc, 0, sizeof sc);
    sc.cart = 1;
    sc.wait = LEDGER_SHARE_WAIT;
    refill_scene_run(&sc, f.ctx, f.conn, f.shop, "came-nothing");
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_SLOW_PATHS), 1);
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_BACK_TO_FAST), 0);
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_RETRIES), 0);
    int64_t on_hand = 0, held = 0, pooled = 0, avail = 0;
    TU_OK(f.ctx, rsv_stock_get(f.ctx, f.shop, 30, 1, &on_hand, &held, &pooled,
                               &avail));
    ck_assert_int_eq(on_hand, 20);
    ck_assert_int_eq(avail, 18);
    tu_fix_close(&f);
}
END_TEST

/* A new checkout of one key whose pool is empty while its ledger row has
 * the units, held by another transaction (a refill in flight): the
 * reserve waits for that row in share mode, in a transaction of its own
 * that gives the lock back at once, and reserves again from the bottom of
 * the pool (every buyer so waiting goes at once).  The procedure then
 * finds the row free and takes the units straight from it, topping the
 * pool up to its cap; the statements take from the rows the refill
 * minted, or, if it minted none, wait for the row again, exclusively, take
 * the units straight from it and top the pool up to its cap for the
 * buyers behind.  Never the slow path (which would hold the row across
 * its round trips: with hundreds of buyers on a small pool the last ones
 * ran out of time queueing for it) nor the fast path again. */
START_TEST(short_pool_waits_for_the_ledger_row)
{
    const uint32_t flags[2] = {0, TEST_OPT_STATEMENTS_ONLY};
    for (int i = 0; i < 4; i++) {
        int minted = i / 2, stmts = flags[i % 2] != 0;
        tu_fix f;
        tu_fix_open(&f, RSV_OPT_NO_PROACTIVE_REFILL | flags[i % 2], 10);
        struct refill_scene sc;
        memset(&sc, 0, sizeof sc);
        sc.mint = minted;
        sc.wait = LEDGER_SHARE_WAIT;
        refill_scene_run(&sc, f.ctx, f.conn, f.shop, "waited");
        ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_SLOW_PATHS), 0);
        ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_BACK_TO_FAST), 0);
        /* from the row: the procedure always, the statements when nothing
         * was minted; the pool topped up by every take from the row (to
         * its cap: nothing to mint when the refill had filled it) */
        int from_row = !stmts || !minted;
        ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_LEDGER_TAKES),
                          from_row);
        ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_INLINE_REFILLS),
                          !minted);
        if (!stmts) /* the short CALL, and the one that waited */
            ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_STATEMENTS), 2);
        int64_t on_hand = 0, held = 0, pooled = 0, avail = 0;
        TU_OK(f.ctx, rsv_stock_get(f.ctx, f.shop, 30, 1, &on_hand, &held,
                                   &pooled, &avail));
        ck_assert_int_eq(on_hand, 20);
        ck_assert_int_eq(held, 2);
        ck_assert_int_eq(pooled, from_row ? 10 : 8);
        ck_assert_int_eq(avail, 18);
        int64_t violations = -1;
        TU_OK(f.ctx, rsv_audit(f.ctx, f.shop, 0, NULL, NULL, &violations));
        ck_assert_int_eq(violations, 0);
        tu_fix_close(&f);
    }
}
END_TEST

/* Lock the ledger rows of items a and b (all locations) in a transaction
 * of another connection, as a slow path or a restock in progress would. */
static MYSQL *lock_ledger_rows(uint64_t shop, uint64_t a, uint64_t b)
{
    MYSQL *locker = tu_connect_in_txn();
    char q[256];
    snprintf(q, sizeof q, "SELECT * FROM rsv_ledger WHERE shop_id = "
             "%llu AND item_id IN (%llu, %llu) FOR UPDATE",
             (unsigned long long)shop, (unsigned long long)a,
             (unsigned long long)b);
    tu_exec(locker, q);
    return locker;
}

/* When an item has sold out, the buyers still asking for it get their
 * answer from one consistent read instead of queueing for the ledger row
 * one by one: with the ledger row locked by someone else, the answer still
 * comes at once.  Units the slow path could still find are not sold out:
 * a release not folded into the ledger yet (an expired hold is the other
 * case: expired_hold_given_to_another_buyer), nor is a pool restocked
 * since this context last found it sold out. */
START_TEST(sold_out_answer_takes_no_ledger_lock)
{
    tu_fix f;
    tu_fix_open_impatient(&f, 0); /* 1 s lock waits, no retry */
    tu_fix_stock(&f, 40, 1, 2);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("first"), 40, 1, 2, 0));
    MYSQL *locker = lock_ledger_rows(f.shop, 40, 40);
    uint64_t slow0 = reserve_stat(f.ctx, RSV_STAT_SLOW_PATHS);
    int rc = rsv_reserve_one(f.ctx, f.shop, TOK("late"), 40, 1, 1, 0);
    TU_RC(f.ctx, rc, RSV_EOUTOFSTOCK);
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_SLOW_PATHS), slow0);
    /* the next buyer through this context asks the read first, without the
     * procedure's CALL: with autocommit on, the read alone (its own
     * transaction, one round trip) */
    uint64_t st0 = reserve_stat(f.ctx, RSV_STAT_STATEMENTS);
    uint64_t ot0 = one_trips(f.ctx);
    rc = rsv_reserve_one(f.ctx, f.shop, TOK("later"), 40, 1, 1, 0);
    TU_RC(f.ctx, rc, RSV_EOUTOFSTOCK);
    ck_assert_uint_eq(one_trips(f.ctx), ot0);
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_STATEMENTS) - st0, 1);
    /* with autocommit off, in a transaction of its own (SET TRANSACTION,
     * START TRANSACTION, the read, ROLLBACK), which it does not leave
     * open */
    ck_assert_int_eq(mysql_autocommit(f.conn, 0), 0);
    st0 = reserve_stat(f.ctx, RSV_STAT_STATEMENTS);
    rc = rsv_reserve_one(f.ctx, f.shop, TOK("later-2"), 40, 1, 1, 0);
    TU_RC(f.ctx, rc, RSV_EOUTOFSTOCK);
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_STATEMENTS) - st0, 4);
    ck_assert_int_eq(tu_i64(f.conn, "SELECT @@in_transaction"), 0);
    ck_assert_int_eq(mysql_autocommit(f.conn, 1), 0);
    tu_exec(locker, "ROLLBACK");
    mysql_close(locker);

    TU_OK(f.ctx, rsv_release(f.ctx, f.shop, TOK("first")));
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("after-release"), 40, 1,
                                 2, 0));
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_SLOW_PATHS), slow0 + 1);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 40, 1), 2);
    rc = rsv_reserve_one(f.ctx, f.shop, TOK("late"), 40, 1, 1, 0);
    TU_RC(f.ctx, rc, RSV_EOUTOFSTOCK);
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_SLOW_PATHS), slow0 + 1);
    /* restocked by someone else: the read says so, the reserve goes on */
    MYSQL *c2;
    rsv_ctx *other = tu_open(&c2);
    TU_OK(other, rsv_stock_adjust(other, f.shop, 40, 1, 1, NULL));
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("restocked"), 40, 1, 1, 0));
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 40, 1), 3);
    rsv_close(other);
    mysql_close(c2);
    ck_assert_int_eq(tu_i64(f.conn, "SELECT @@in_transaction"), 0);
    tu_fix_close(&f);
}
END_TEST

/* Reserve `cart` with the ledger rows of items a and b locked by another
 * connection: the answer must come anyway, out of stock naming line
 * `line`, without a slow path. */
static void sold_out_unlocked(rsv_ctx *ctx, uint64_t shop, const char *tok,
                              rsv_cart *cart, uint64_t a, uint64_t b,
                              size_t line)
{
    MYSQL *locker = lock_ledger_rows(shop, a, b);
    uint64_t slow0 = reserve_stat(ctx, RSV_STAT_SLOW_PATHS);
    int rc = rsv_reserve(ctx, shop, tok, strlen(tok), cart, 0);
    ck_assert_msg(rc == RSV_EOUTOFSTOCK, "%s: got %s, want RSV_EOUTOFSTOCK: "
                  "%s", tok, rsv_code_name(rc), rsv_errmsg(ctx));
    ck_assert_uint_eq(rsv_cart_failed_line(cart), line);
    ck_assert_uint_eq(reserve_stat(ctx, RSV_STAT_SLOW_PATHS), slow0);
    tu_exec(locker, "ROLLBACK");
    mysql_close(locker);
}

/* The same for a cart one of whose lines has sold out: the answer (out of
 * stock, naming that line) comes from one consistent read over the cart's
 * ledger rows, with every ledger row of the cart locked by someone else;
 * the slow path would have locked them all, and held the rows of the
 * cart's other items while it waited.  A line is sold out only if none of
 * its locations could cover it, or, split, all of them together could
 * not, and a re-reserve holds nothing there itself; otherwise the slow
 * path decides. */
START_TEST(cart_sold_out_answer_takes_no_ledger_lock)
{
    tu_fix f;
    tu_fix_open_impatient(&f, 0); /* 1 s lock waits, no retry */
    uint64_t l1[1] = {1}, l12[2] = {1, 2};
    tu_fix_stock(&f, 50, 1, 1);
    tu_fix_stock(&f, 51, 1, 5);
    tu_fix_stock(&f, 51, 2, 5);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("first"), 50, 1, 1, 0));
    rsv_cart *cart;
    ck_assert_int_eq(rsv_cart_new(&cart), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 51, l12, 2, 1, 0), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 50, l1, 1, 1, 0), RSV_OK);
    sold_out_unlocked(f.ctx, f.shop, "late", cart, 50, 51, 1);
    /* the next such cart through this context: the read alone, one
     * statement (autocommit is on) */
    uint64_t st0 = reserve_stat(f.ctx, RSV_STAT_STATEMENTS);
    sold_out_unlocked(f.ctx, f.shop, "later", cart, 50, 51, 1);
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_STATEMENTS) - st0, 1);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 51, 1) +
                         tu_held(f.ctx, f.shop, 51, 2), 0);

    /* A re-reserve: its old holds elsewhere change nothing (answered
     * without a lock, and the old cart stays held), but its own hold at
     * the sold-out item is units it may take again (the slow path). */
    TU_OK(f.ctx, rsv_stock_set(f.ctx, f.shop, 53, 1, 1));
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("other"), 53, 1, 1, 0));
    rsv_cart_clear(cart);
    ck_assert_int_eq(rsv_cart_add(cart, 51, l1, 1, 1, 0), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 53, l1, 1, 1, 0), RSV_OK);
    sold_out_unlocked(f.ctx, f.shop, "first", cart, 51, 53, 1);
    int32_t st = 0;
    int64_t units = 0;
    TU_OK(f.ctx, rsv_checkout_status(f.ctx, f.shop, TOK("first"), &st, &units,
                                     NULL));
    ck_assert_int_eq(st, RSV_STATUS_HELD);
    ck_assert_int_eq(units, 1);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 50, 1), 1);
    uint64_t slow0 = reserve_stat(f.ctx, RSV_STAT_SLOW_PATHS);
    rsv_cart_clear(cart);
    ck_assert_int_eq(rsv_cart_add(cart, 50, l1, 1, 1, 0), RSV_OK);
    TU_OK(f.ctx, rsv_reserve(f.ctx, f.shop, TOK("first"), cart, 0));
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 50, 1), 1);
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_SLOW_PATHS), slow0 + 1);
    /* a claimed checkout's answer stays RSV_ECLAIMED, sold out or not */
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("other")));
    rsv_cart_clear(cart);
    ck_assert_int_eq(rsv_cart_add(cart, 53, l1, 1, 1, 0), RSV_OK);
    TU_RC(f.ctx, rsv_reserve(f.ctx, f.shop, TOK("other"), cart, 0),
          RSV_ECLAIMED);

    /* item 52 has 1 unit at each of two locations, none pooled: 2 units
     * at one location is sold out, 2 units split is not */
    TU_OK(f.ctx, rsv_stock_set(f.ctx, f.shop, 52, 1, 1));
    TU_OK(f.ctx, rsv_stock_set(f.ctx, f.shop, 52, 2, 1));
    rsv_cart_clear(cart);
    ck_assert_int_eq(rsv_cart_add(cart, 51, l1, 1, 1, 0), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 52, l12, 2, 2, 0), RSV_OK);
    sold_out_unlocked(f.ctx, f.shop, "whole", cart, 51, 52, 1);
    rsv_cart_clear(cart);
    ck_assert_int_eq(rsv_cart_add(cart, 51, l1, 1, 1, 0), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 52, l12, 2, 2, RSV_LINE_SPLIT),
                     RSV_OK);
    TU_OK(f.ctx, rsv_reserve(f.ctx, f.shop, TOK("split"), cart, 0));
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 52, 1), 1);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 52, 2), 1);
    /* now both locations are held: split is sold out too */
    sold_out_unlocked(f.ctx, f.shop, "split-late", cart, 51, 52, 1);
    ck_assert_int_eq(tu_i64(f.conn, "SELECT @@in_transaction"), 0);
    rsv_cart_free(cart);
    tu_fix_close(&f);
}
END_TEST

/* Statements the server ran for one reserve of `cart` (no probes, no
 * refills: see the context's options), and where line `line` was held. */
static int64_t cart_statements(rsv_ctx *ctx, uint64_t shop, const char *tok,
                               rsv_cart *cart, size_t line, uint64_t *loc)
{
    uint64_t before = 0, after = 0;
    TU_OK(ctx, rsv_stats_get(ctx, RSV_STAT_STATEMENTS, RSV_OP_RESERVE,
                             &before));
    TU_OK(ctx, rsv_reserve(ctx, shop, TOK(tok), cart, 0));
    TU_OK(ctx, rsv_stats_get(ctx, RSV_STAT_STATEMENTS, RSV_OP_RESERVE,
                             &after));
    size_t n = 0;
    int64_t q = 0;
    TU_OK(ctx, rsv_cart_allocation_count(cart, line, &n));
    ck_assert_uint_eq(n, 1);
    TU_OK(ctx, rsv_cart_allocation(cart, line, 0, loc, &q));
    return (int64_t)(after - before);
}

/* Where line `line` of the last reserve of `cart` was held (one place). */
static uint64_t held_at(rsv_cart *cart, size_t line, int64_t qty)
{
    size_t n = 0;
    uint64_t loc = 0;
    int64_t q = 0;
    ck_assert_int_eq(rsv_cart_allocation_count(cart, line, &n), RSV_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(rsv_cart_allocation(cart, line, 0, &loc, &q), RSV_OK);
    ck_assert_int_eq(q, qty);
    return loc;
}

/* cart = n lines of one unit, items first .. first + n - 1 at location 1,
 * each with one unit in stock and in its pool. */
static void one_unit_lines(rsv_ctx *ctx, uint64_t shop, rsv_cart *cart,
                           uint64_t first, int n)
{
    const uint64_t l1[1] = {1};
    rsv_cart_clear(cart);
    for (uint64_t item = first; item < first + (uint64_t)n; item++) {
        TU_OK(ctx, rsv_stock_set(ctx, shop, item, 1, 1));
        TU_OK(ctx, rsv_replenish(ctx, shop, item, 1, NULL));
        ck_assert_int_eq(rsv_cart_add(cart, item, l1, 1, 1, 0), RSV_OK);
    }
}

/* With the schema's procedure, a new cart whose lines can all take their
 * first location is one CALL: the procedure takes every key's units in
 * key order and holds exactly those (two lines at one key: one hold of
 * both).  When a first location comes up short the procedure rolls back
 * and the statements decide (here: the line's other location); so do
 * re-reserves and carts of more than 32 keys.  An unknown item leaves
 * nothing behind. */
START_TEST(cart_in_one_round_trip)
{
    tu_fix f;
    /* (from the bottom: a read from a cursor may come up short and read
     * again, a second CALL) */
    tu_fix_open(&f, RSV_OPT_NO_PROACTIVE_REFILL | TEST_OPT_READ_FROM_BOTTOM, 0);
    for (uint64_t item = 60; item <= 63; item++)
        for (uint64_t l = 1; l <= 2; l++)
            tu_fix_pooled(&f, item, l, 10);
    rsv_cart *cart;
    ck_assert_int_eq(rsv_cart_new(&cart), RSV_OK);
    uint64_t l1[1] = {1}, l2[1] = {2}, l12[2] = {1, 2}, l21[2] = {2, 1};
    ck_assert_int_eq(rsv_cart_add(cart, 60, l12, 2, 2, 0), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 61, l21, 2, 1, 0), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 62, l1, 1, 1, 0), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 60, l1, 1, 1, 0), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 63, l21, 2, 3, RSV_LINE_SPLIT),
                     RSV_OK);
    /* the lines' other locations hold nothing; until this context has
     * seen their ledger rows exist, the procedure checks them (the
     * statements answer RSV_ENOITEM for a location without one) */
    uint64_t st0 = reserve_stat(f.ctx, RSV_STAT_STATEMENTS);
    TU_OK(f.ctx, rsv_reserve(f.ctx, f.shop, TOK("seen"), cart, 0));
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_STATEMENTS) - st0, 1);
    ck_assert_uint_eq(one_trips(f.ctx), 1);
    TU_OK(f.ctx, rsv_release(f.ctx, f.shop, TOK("seen")));
    st0 = reserve_stat(f.ctx, RSV_STAT_STATEMENTS);
    TU_OK(f.ctx, rsv_reserve(f.ctx, f.shop, TOK("one-trip"), cart, 0));
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_STATEMENTS) - st0, 1);
    ck_assert_uint_eq(one_trips(f.ctx), 2);
    ck_assert_uint_eq(held_at(cart, 0, 2), 1);
    ck_assert_uint_eq(held_at(cart, 1, 1), 2);
    ck_assert_uint_eq(held_at(cart, 2, 1), 1);
    ck_assert_uint_eq(held_at(cart, 3, 1), 1);
    ck_assert_uint_eq(held_at(cart, 4, 3), 2);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 60, 1), 3);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 61, 2), 1);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 62, 1), 1);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 63, 2), 3);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 60, 2) +
                         tu_held(f.ctx, f.shop, 61, 1) +
                         tu_held(f.ctx, f.shop, 63, 1), 0);
    char q[160];
    snprintf(q, sizeof q, "SELECT COALESCE(SUM(units), 0) FROM rsv_pool WHERE "
             "shop_id = %llu", (unsigned long long)f.shop);
    ck_assert_int_eq(tu_i64(f.conn, q), 8 * 10 - 2 * 8);
    int32_t st = 0;
    int64_t units = 0;
    TU_OK(f.ctx, rsv_checkout_status(f.ctx, f.shop, TOK("one-trip"), &st,
                                     &units, NULL));
    ck_assert_int_eq(st, RSV_STATUS_HELD);
    ck_assert_int_eq(units, 8);
    snprintf(q, sizeof q, "SELECT hold_count FROM rsv_checkouts "
             "WHERE shop_id = %llu AND checkout_token = 'one-trip'",
             (unsigned long long)f.shop);
    ck_assert_int_eq(tu_i64(f.conn, q), 4);

    /* item 64 has nothing at its first location: the CALL rolls back, the
     * statements hold the line at the second */
    TU_OK(f.ctx, rsv_stock_set(f.ctx, f.shop, 64, 1, 0));
    TU_OK(f.ctx, rsv_stock_set(f.ctx, f.shop, 64, 2, 5));
    TU_OK(f.ctx, rsv_replenish(f.ctx, f.shop, 64, 2, NULL));
    rsv_cart_clear(cart);
    ck_assert_int_eq(rsv_cart_add(cart, 62, l2, 1, 1, 0), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 64, l12, 2, 2, 0), RSV_OK);
    TU_OK(f.ctx, rsv_reserve(f.ctx, f.shop, TOK("second-place"), cart, 0));
    ck_assert_uint_eq(one_trips(f.ctx), 2);
    ck_assert_uint_eq(held_at(cart, 0, 1), 2);
    ck_assert_uint_eq(held_at(cart, 1, 2), 2);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 64, 2), 2);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 62, 2), 1);

    /* a re-reserve replaces the cart (statements) */
    rsv_cart_clear(cart);
    ck_assert_int_eq(rsv_cart_add(cart, 62, l1, 1, 2, 0), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 61, l1, 1, 1, 0), RSV_OK);
    TU_OK(f.ctx, rsv_reserve(f.ctx, f.shop, TOK("one-trip"), cart, 0));
    ck_assert_uint_eq(one_trips(f.ctx), 2);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 60, 1), 0);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 63, 2), 0);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 62, 1), 2);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 61, 1), 1);

    /* an item without a ledger row: nothing left behind */
    rsv_cart_clear(cart);
    ck_assert_int_eq(rsv_cart_add(cart, 60, l1, 1, 1, 0), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 999, l1, 1, 1, 0), RSV_OK);
    TU_RC(f.ctx, rsv_reserve(f.ctx, f.shop, TOK("unknown"), cart, 0),
          RSV_ENOITEM);
    ck_assert_uint_eq(rsv_cart_failed_line(cart), 1);
    TU_RC(f.ctx, rsv_checkout_status(f.ctx, f.shop, TOK("unknown"), &st, &units,
                                     NULL), RSV_ENOTFOUND);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 60, 1), 0);

    /* 33 keys: the statements, in one read */
    one_unit_lines(f.ctx, f.shop, cart, 70, 33);
    TU_OK(f.ctx, rsv_reserve(f.ctx, f.shop, TOK("wide-cart"), cart, 0));
    ck_assert_uint_eq(one_trips(f.ctx), 2);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 102, 1), 1);
    /* 32 keys: one CALL */
    one_unit_lines(f.ctx, f.shop, cart, 110, 32);
    TU_OK(f.ctx, rsv_reserve(f.ctx, f.shop, TOK("cart-32"), cart, 0));
    ck_assert_uint_eq(one_trips(f.ctx), 3);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 141, 1), 1);
    rsv_cart_free(cart);
    tu_fix_close(&f);
}
END_TEST


/* One number of key (item, location 1): "pool" its pool rows, "issued"
 * its ledger's issued units. */
static int64_t key_count(MYSQL *c, const char *what, uint64_t shop,
                         uint64_t item)
{
    char q[256];
    if (strcmp(what, "pool") == 0)
        snprintf(q, sizeof q, "SELECT COALESCE(SUM(units), 0) FROM rsv_pool WHERE "
                 "shop_id = %llu AND item_id = %llu AND "
                 "location_id = 1", (unsigned long long)shop,
                 (unsigned long long)item);
    else
        snprintf(q, sizeof q, "SELECT issued FROM rsv_ledger WHERE "
                 "shop_id = %llu AND item_id = %llu AND "
                 "location_id = 1", (unsigned long long)shop,
                 (unsigned long long)item);
    return tu_i64(c, q);
}

/* The procedures take a key's units straight from its ledger row when no
 * other transaction holds the row and it has enough units not yet issued:
 * the pool is left as it is.  When another transaction holds the row they
 * take pool rows without waiting for it; when the row cannot cover the
 * key, pool rows too.  A cart mixes both in one CALL, and a cart that
 * comes up short gives back what it took from a ledger row. */
START_TEST(one_trip_takes_from_a_free_ledger_row)
{
    tu_fix f;
    /* no retries and 1 s lock waits: a reserve waiting for the held
     * ledger row would fail */
    tu_fix_open_impatient(&f, 0);
    /* item 80: 10 pooled, 40 more in the ledger; item 81: all 5 pooled */
    pooled_stock(f.ctx, f.conn, f.shop, 80, 50, 10);
    tu_fix_pooled(&f, 81, 1, 5);
    ck_assert_int_eq(key_count(f.conn, "pool", f.shop, 80), 10);
    ck_assert_int_eq(key_count(f.conn, "issued", f.shop, 80), 10);

    uint64_t st0 = reserve_stat(f.ctx, RSV_STAT_STATEMENTS);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("ledger"), 80, 1, 3, 0));
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_STATEMENTS) - st0, 1);
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_LEDGER_TAKES), 1);
    ck_assert_int_eq(key_count(f.conn, "pool", f.shop, 80), 10);
    ck_assert_int_eq(key_count(f.conn, "issued", f.shop, 80), 13);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 80, 1), 3);

    /* the ledger row held elsewhere (a refill, a stock change): pool rows,
     * at once.  The procedure first tries the row with an UPDATE whose
     * lock wait is 0, which InnoDB answers without a wait: the server
     * counts no row lock wait (a wait of any length would count one). */
    MYSQL *other = lock_ledger_rows(f.shop, 80, 80);
    int64_t waits0 = tu_i64(f.conn, "SELECT VARIABLE_VALUE FROM "
                            "information_schema.GLOBAL_STATUS WHERE "
                            "VARIABLE_NAME = 'INNODB_ROW_LOCK_WAITS'");
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("pool"), 80, 1, 2, 0));
    ck_assert_int_eq(tu_i64(f.conn, "SELECT VARIABLE_VALUE FROM "
                            "information_schema.GLOBAL_STATUS WHERE "
                            "VARIABLE_NAME = 'INNODB_ROW_LOCK_WAITS'"),
                     waits0);
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_LEDGER_TAKES), 1);
    ck_assert_uint_eq(one_trips(f.ctx), 2);
    ck_assert_int_eq(key_count(f.conn, "pool", f.shop, 80), 8);
    ck_assert_int_eq(key_count(f.conn, "issued", f.shop, 80), 13);

    /* a cart in one CALL, keys in item order: item 78's ledger row is
     * free (ledger), item 80's still held (pool), item 81's has nothing
     * beyond its pool (pool), and item 83's is free and covers the line
     * (ledger), although it comes after keys that took pool rows: the
     * procedure asks for every ledger row before it takes any pool row */
    TU_OK(f.ctx, rsv_stock_set(f.ctx, f.shop, 78, 1, 7));
    pooled_stock(f.ctx, f.conn, f.shop, 83, 20, 10);
    rsv_cart *cart;
    ck_assert_int_eq(rsv_cart_new(&cart), RSV_OK);
    uint64_t l1[1] = {1};
    ck_assert_int_eq(rsv_cart_add(cart, 78, l1, 1, 4, 0), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 80, l1, 1, 1, 0), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 81, l1, 1, 2, 0), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 83, l1, 1, 1, 0), RSV_OK);
    TU_OK(f.ctx, rsv_reserve(f.ctx, f.shop, TOK("cart"), cart, 0));
    ck_assert_uint_eq(one_trips(f.ctx), 3);
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_SLOW_PATHS), 0);
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_LEDGER_TAKES), 3);
    ck_assert_int_eq(key_count(f.conn, "pool", f.shop, 78), 0);
    ck_assert_int_eq(key_count(f.conn, "issued", f.shop, 78), 4);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 78, 1), 4);
    ck_assert_int_eq(key_count(f.conn, "pool", f.shop, 80), 7);
    ck_assert_int_eq(key_count(f.conn, "pool", f.shop, 81), 3);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 83, 1), 1);
    ck_assert_int_eq(key_count(f.conn, "pool", f.shop, 83), 10);
    ck_assert_int_eq(key_count(f.conn, "issued", f.shop, 83), 11);
    tu_exec(other, "ROLLBACK");

    /* a cart whose last key comes up short: item 78's units go back to
     * its ledger row, and the answer is out of stock */
    rsv_cart_clear(cart);
    ck_assert_int_eq(rsv_cart_add(cart, 78, l1, 1, 2, 0), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 81, l1, 1, 4, 0), RSV_OK);
    int rc = rsv_reserve(f.ctx, f.shop, TOK("short"), cart, 0);
    TU_RC(f.ctx, rc, RSV_EOUTOFSTOCK);
    ck_assert_uint_eq(rsv_cart_failed_line(cart), 1);
    ck_assert_int_eq(key_count(f.conn, "issued", f.shop, 78), 4);
    ck_assert_int_eq(key_count(f.conn, "pool", f.shop, 81), 3);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 78, 1), 4);
    ck_assert_int_eq(tu_i64(f.conn, "SELECT @@in_transaction"), 0);

    /* held from the ledger or the pool, a hold settles the same way */
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("ledger")));
    TU_OK(f.ctx, rsv_release(f.ctx, f.shop, TOK("pool")));
    TU_OK(f.ctx, rsv_release(f.ctx, f.shop, TOK("cart")));
    int64_t on_hand = -1, held = -1, pooled = -1;
    TU_OK(f.ctx, rsv_stock_get(f.ctx, f.shop, 80, 1, &on_hand, &held, &pooled,
                               NULL));
    ck_assert_int_eq(on_hand, 47);
    ck_assert_int_eq(held, 0);
    TU_OK(f.ctx, rsv_stock_get(f.ctx, f.shop, 78, 1, &on_hand, &held, NULL,
                               NULL));
    ck_assert_int_eq(on_hand, 7);
    ck_assert_int_eq(held, 0);
    tu_audit_clean();
    rsv_cart_free(cart);
    mysql_close(other);
    tu_fix_close(&f);
}
END_TEST


/* A top-up after a reserve does not wait for the ledger row; the reserve
 * procedures hold a hot item's row whenever they take units from it, and
 * a top-up that found it held left the pool to run dry.  Such a top-up is
 * left pending, and the context's next reserve procedure of that pool
 * that gets the row does it, in the same CALL. */
/* The pool gate of the reserve procedure: while another session holds
 * every gate of a key (and its ledger row, so that the reserve cannot
 * take from it), a reserve that must read the pool sleeps in GET_LOCK;
 * once they are given back it goes on and answers as ever, and its
 * session keeps no gate, after a reserve served and after one that came
 * up short alike. */
struct gate_call {
    tu_fix *f;
    int rc;
    volatile int done;
};

static void *gate_reserve(void *arg)
{
    struct gate_call *g = arg;
    g->rc = rsv_reserve_one(g->f->ctx, g->f->shop, TOK("gated"), 84, 1, 1, 0);
    g->done = 1;
    return NULL;
}

/* How many of key (shop, 84, 1)'s gates connection c holds (IS_USED_LOCK
 * names the holder's connection). */
static int64_t gates_held(MYSQL *c, unsigned long who, uint64_t shop)
{
    char q[512];
    snprintf(q, sizeof q, "SELECT (IS_USED_LOCK(CONCAT('rsv/', HEX(%llu), "
             "'/', HEX(84), '/1/0')) <=> %lu) + (IS_USED_LOCK(CONCAT('rsv/', "
             "HEX(%llu), '/', HEX(84), '/1/1')) <=> %lu) + (IS_USED_LOCK("
             "CONCAT('rsv/', HEX(%llu), '/', HEX(84), '/1/2')) <=> %lu) + "
             "(IS_USED_LOCK(CONCAT('rsv/', HEX(%llu), '/', HEX(84), '/1/3')) "
             "<=> %lu)", (unsigned long long)shop, who,
             (unsigned long long)shop, who, (unsigned long long)shop, who,
             (unsigned long long)shop, who);
    return tu_i64(c, q);
}

START_TEST(pool_gate_queues_a_crowd)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    pooled_stock(f.ctx, f.conn, f.shop, 84, 50, 10);
    MYSQL *other = lock_ledger_rows(f.shop, 84, 84);
    unsigned long other_id = mysql_thread_id(other);
    char q[256];
    for (int lane = 0; lane < 4; lane++) {
        snprintf(q, sizeof q, "SELECT GET_LOCK(CONCAT('rsv/', HEX(%llu), "
                 "'/', HEX(84), '/1/%d'), 0)", (unsigned long long)f.shop,
                 lane);
        ck_assert_int_eq(tu_i64(other, q), 1);
    }
    ck_assert_int_eq(gates_held(other, other_id, f.shop), 4);

    struct gate_call g = {&f, -100, 0};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, gate_reserve, &g), 0);
    MYSQL *mon = tu_connect();
    snprintf(q, sizeof q, "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
             "WHERE ID = %lu AND STATE = 'User lock' AND TIME_MS >= 100",
             mysql_thread_id(f.conn));
    int waited = 0;
    for (int i = 0; i < 1000 && !waited && !g.done; i++) {
        waited = tu_i64(mon, q) == 1;
        usleep(10000);
    }
    ck_assert_msg(waited && !g.done,
                  "the reserve did not wait at the pool's gate (done=%d)",
                  g.done);
    tu_exec(other, "DO RELEASE_ALL_LOCKS()");
    pthread_join(t, NULL);
    TU_RC(f.ctx, g.rc, RSV_OK);
    ck_assert_int_eq(key_count(f.conn, "pool", f.shop, 84), 9);
    ck_assert_int_eq(gates_held(mon, mysql_thread_id(f.conn), f.shop), 0);

    /* a reserve that comes up short at the pool gives its gate back too
     * (the ledger row still held: an impatient context gives up on it) */
    tu_fix f2;
    tu_fix_open_impatient(&f2, 0);
    int rc = rsv_reserve_one(f2.ctx, f.shop, TOK("short"), 84, 1, 30, 0);
    ck_assert_int_ne(rc, RSV_OK);
    ck_assert_int_eq(gates_held(mon, mysql_thread_id(f2.conn), f.shop), 0);
    tu_fix_close(&f2);
    tu_exec(other, "ROLLBACK");
    mysql_close(mon);
    mysql_close(other);
    tu_fix_close(&f);
}
END_TEST

START_TEST(held_top_up_is_tried_again)
{
    tu_fix f;
    /* from the bottom: each read tells by itself whether the pool is low
     * (no count, no timing) */
    tu_fix_open(&f, TEST_OPT_READ_FROM_BOTTOM, 100);
    tu_fix_pooled(&f, 90, 1, 500);
    ck_assert_int_eq(key_count(f.conn, "pool", f.shop, 90), 100);
    MYSQL *other = lock_ledger_rows(f.shop, 90, 90);
    /* the row held: both reserves take pool rows (the first, 76 units,
     * by statements, the second by the procedure); after the second the
     * pool is below its low-water mark (75), and the top-up finds the row
     * held */
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("a"), 90, 1, 76, 0));
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_INLINE_REFILLS), 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("b"), 90, 1, 5, 0));
    ck_assert_int_eq(key_count(f.conn, "pool", f.shop, 90), 19);
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_INLINE_REFILLS), 1);
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_LEDGER_TAKES), 0);
    /* a reserve whose procedure finds the row held again leaves it
     * pending, and does not try a transaction of its own (it would most
     * likely find it held); only the count's usual pace could (at least
     * 0.5 s after the last try, which a slow run may reach: valgrind) */
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("b2"), 90, 1, 5, 0));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 <
        400)
        ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_INLINE_REFILLS), 1);
    ck_assert_int_eq(key_count(f.conn, "pool", f.shop, 90), 14);
    tu_exec(other, "ROLLBACK");
    /* the row free: the procedure takes the unit from it and tops the
     * pool up, in its one CALL */
    uint64_t tries = reserve_stat(f.ctx, RSV_STAT_INLINE_REFILLS);
    uint64_t st0 = reserve_stat(f.ctx, RSV_STAT_STATEMENTS);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("c"), 90, 1, 1, 0));
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_STATEMENTS) - st0, 1);
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_LEDGER_TAKES), 1);
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_INLINE_REFILLS), tries + 1);
    ck_assert_int_eq(key_count(f.conn, "pool", f.shop, 90), 100);
    /* and only once */
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("d"), 90, 1, 1, 0));
    ck_assert_uint_eq(reserve_stat(f.ctx, RSV_STAT_INLINE_REFILLS), tries + 1);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 90, 1), 88);
    tu_audit_clean();
    mysql_close(other);
    tu_fix_close(&f);
}
END_TEST

/* Item and location ids are any 64-bit value: the extremes survive every
 * path that carries them (the procedures parse them from text, the
 * statements bind them, results come back through signed columns). */
START_TEST(extreme_ids_on_every_path)
{
    const uint64_t hi = UINT64_MAX, hi1 = UINT64_MAX - 1;
    uint32_t flags[2] = {0, TEST_OPT_STATEMENTS_ONLY};
    for (int i = 0; i < 2; i++) {
        tu_fix f;
        tu_fix_open(&f, flags[i], 0);
        uint64_t lhi[1] = {hi}, l0[1] = {0}, l0hi[2] = {0, hi};
        tu_fix_pooled(&f, hi, hi, 10);
        tu_fix_pooled(&f, hi, 0, 10);
        tu_fix_pooled(&f, hi1, hi, 10);
        tu_fix_pooled(&f, 0, 0, 10);
        TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("x-one"), hi, hi, 2,
                                     0));
        rsv_cart *cart;
        ck_assert_int_eq(rsv_cart_new(&cart), RSV_OK);
        ck_assert_int_eq(rsv_cart_add(cart, hi, l0hi, 2, 1, 0), RSV_OK);
        ck_assert_int_eq(rsv_cart_add(cart, hi1, lhi, 1, 3, 0), RSV_OK);
        ck_assert_int_eq(rsv_cart_add(cart, 0, l0, 1, 1, 0), RSV_OK);
        TU_OK(f.ctx, rsv_reserve(f.ctx, f.shop, TOK("x-cart"), cart, 0));
        TU_OK(f.ctx, rsv_reserve(f.ctx, f.shop, TOK("x-cart-2"), cart, 0));
        ck_assert_uint_eq(held_at(cart, 0, 1), 0);
        ck_assert_uint_eq(held_at(cart, 1, 3), hi);
        ck_assert_uint_eq(held_at(cart, 2, 1), 0);
        ck_assert_uint_eq(one_trips(f.ctx), i == 0 ? 3 : 0);
        ck_assert_int_eq(tu_held(f.ctx, f.shop, hi, hi), 2);
        ck_assert_int_eq(tu_held(f.ctx, f.shop, hi, 0), 2);
        ck_assert_int_eq(tu_held(f.ctx, f.shop, hi1, hi), 6);
        ck_assert_int_eq(tu_held(f.ctx, f.shop, 0, 0), 2);
        TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("x-cart")));
        TU_OK(f.ctx, rsv_release(f.ctx, f.shop, TOK("x-one")));
        TU_OK(f.ctx, rsv_sweep(f.ctx, f.shop, 0, NULL));
        int64_t on_hand = -1, held = -1;
        TU_OK(f.ctx, rsv_stock_get(f.ctx, f.shop, hi1, hi, &on_hand, &held,
                                   NULL, NULL));
        ck_assert_int_eq(on_hand, 7);
        ck_assert_int_eq(held, 3);
        rsv_cart_free(cart);
        tu_fix_close(&f);
    }
}
END_TEST

/* A line usually gets its units at the first location it names, so the
 * fast path first reads only each line's first location (5 pool reads for
 * a 5-line cart of 3 locations a line, not 15) and reads every location
 * only when a first location cannot cover its line.  The answer is the
 * same either way. */
START_TEST(cart_reads_first_locations_first)
{
    tu_fix f;
    tu_fix_open(&f, RSV_OPT_NO_PROACTIVE_REFILL | TEST_OPT_READ_FROM_BOTTOM |
                        TEST_OPT_STATEMENTS_ONLY, 0);
    tu_fix_stock(&f, 40, 1, 0); /* nothing at 1 */
    tu_fix_stock(&f, 40, 2, 5);
    tu_fix_stock(&f, 41, 1, 5);
    tu_fix_stock(&f, 41, 2, 5);
    for (uint64_t item = 40; item <= 41; item++)
        for (uint64_t l = 1; l <= 2; l++)
            TU_OK(f.ctx, rsv_replenish(f.ctx, f.shop, item, l, NULL));
    rsv_cart *cart;
    ck_assert_int_eq(rsv_cart_new(&cart), RSV_OK);
    uint64_t l12[2] = {1, 2}, l21[2] = {2, 1}, loc = 0;
    /* every first location covers its line: one pass */
    ck_assert_int_eq(rsv_cart_add(cart, 41, l12, 2, 2, 0), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 40, l21, 2, 2, 0), RSV_OK);
    int64_t one_pass = cart_statements(f.ctx, f.shop, "first-1", cart, 1, &loc);
    ck_assert_uint_eq(loc, 2);
    /* as for a cart of one location a line (each key's pool is one row of
     * 5 units, taken in part: an UPDATE where a DELETE would be) */
    ck_assert_int_eq(one_pass, 7);
    /* item 40 has nothing at its first location: read every location */
    rsv_cart_clear(cart);
    ck_assert_int_eq(rsv_cart_add(cart, 41, l12, 2, 1, 0), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 40, l12, 2, 1, 0), RSV_OK);
    int64_t two = cart_statements(f.ctx, f.shop, "first-2", cart, 1, &loc);
    ck_assert_uint_eq(loc, 2);
    /* the first pass (begin: 2, read, roll back) and the full one */
    ck_assert_int_eq(two, one_pass + 4);
    uint64_t slow = 9;
    TU_OK(f.ctx, rsv_stats_get(f.ctx, RSV_STAT_SLOW_PATHS, RSV_OP_RESERVE,
                               &slow));
    ck_assert_uint_eq(slow, 0);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 40, 2), 3);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 41, 1), 3);
    rsv_cart_free(cart);
    tu_fix_close(&f);
}
END_TEST

/* A context reads a pool from a cursor (where its last read ended, or a
 * random place after a read from the bottom).  A cursor read that comes up
 * short says nothing about the pool: the reserve must read again from the
 * bottom and succeed, not report out of stock or leave a transaction; so
 * must a cart, in one round trip. */
START_TEST(cursor_read_short_rescans_from_bottom)
{
    tu_fix f;
    tu_fix_open(&f, 0, 10);
    for (int round = 0; round < 20; round++) {
        uint64_t item = (uint64_t)(100 + round);
        TU_OK(f.ctx, rsv_stock_set(f.ctx, f.shop, item, 1, 10));
        TU_OK(f.ctx, rsv_replenish(f.ctx, f.shop, item, 1, NULL));
        char t1[32], t2[32];
        snprintf(t1, sizeof t1, "cur-a-%d", round);
        snprintf(t2, sizeof t2, "cur-b-%d", round);
        /* from the bottom: places the cursor somewhere in ids 1..10 */
        TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK(t1), item, 1, 1, 0));
        /* 9 more: only a cursor at the very start could cover them */
        TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK(t2), item, 1, 9, 0));
        ck_assert_int_eq(tu_i64(f.conn, "SELECT @@in_transaction"), 0);
        ck_assert_int_eq(tu_held(f.ctx, f.shop, item, 1), 10);
        int rc = rsv_reserve_one(f.ctx, f.shop, TOK("cur-none"), item, 1, 1, 0);
        TU_RC(f.ctx, rc, RSV_EOUTOFSTOCK);
    }
    /* The same for carts, whose procedure reads every key: item a as
     * above, item b with units to spare. */
    rsv_cart *cart;
    ck_assert_int_eq(rsv_cart_new(&cart), RSV_OK);
    uint64_t l1[1] = {1};
    uint64_t one0 = one_trips(f.ctx);
    for (int round = 0; round < 20; round++) {
        uint64_t a = (uint64_t)(200 + round), b = (uint64_t)(300 + round);
        TU_OK(f.ctx, rsv_stock_set(f.ctx, f.shop, a, 1, 10));
        TU_OK(f.ctx, rsv_replenish(f.ctx, f.shop, a, 1, NULL));
        TU_OK(f.ctx, rsv_stock_set(f.ctx, f.shop, b, 1, 10));
        TU_OK(f.ctx, rsv_replenish(f.ctx, f.shop, b, 1, NULL));
        int64_t qa[3] = {1, 9, 1};
        for (int i = 0; i < 3; i++) {
            char t[32];
            snprintf(t, sizeof t, "cart-%d-%d", round, i);
            rsv_cart_clear(cart);
            ck_assert_int_eq(rsv_cart_add(cart, a, l1, 1, qa[i], 0), RSV_OK);
            ck_assert_int_eq(rsv_cart_add(cart, b, l1, 1, 1, 0), RSV_OK);
            int rc = rsv_reserve(f.ctx, f.shop, TOK(t), cart, 0);
            TU_RC(f.ctx, rc, i < 2 ? RSV_OK : RSV_EOUTOFSTOCK);
            ck_assert_int_eq(tu_i64(f.conn, "SELECT @@in_transaction"), 0);
        }
        ck_assert_uint_eq(rsv_cart_failed_line(cart), 0);
        ck_assert_int_eq(tu_held(f.ctx, f.shop, a, 1), 10);
        ck_assert_int_eq(tu_held(f.ctx, f.shop, b, 1), 2);
    }
    /* each round's two carts in one round trip, rescans included */
    ck_assert_uint_eq(one_trips(f.ctx) - one0, 40);
    rsv_cart_free(cart);
    uint64_t slow = 0;
    TU_OK(f.ctx, rsv_stats_get(f.ctx, RSV_STAT_SLOW_PATHS, RSV_OP_RESERVE,
                               &slow));
    /* neither the rescans nor the 40 out-of-stock answers took the slow
     * path (sold out: one consistent read says so) */
    ck_assert_uint_eq(slow, 0);
    tu_fix_close(&f);
}
END_TEST

/* The reserve procedure is optional: a schema without it, or one dropped
 * under an open context, means statements, with the same results. */
START_TEST(reserve_without_the_procedure)
{
    MYSQL *c = tu_connect();
    MYSQL *adm = tu_connect();
    rsv_ctx *a = NULL, *b = NULL;
    TU_OK(a, rsv_open(&a, c, NULL));
    uint64_t shop = tu_shop();
    uint64_t l1[1] = {1};
    for (uint64_t item = 7; item <= 8; item++) {
        TU_OK(a, rsv_stock_set(a, shop, item, 1, 10));
        TU_OK(a, rsv_replenish(a, shop, item, 1, NULL));
    }
    rsv_cart *cart;
    ck_assert_int_eq(rsv_cart_new(&cart), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 7, l1, 1, 1, 0), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 8, l1, 1, 1, 0), RSV_OK);
    TU_OK(a, rsv_reserve_one(a, shop, TOK("np-1"), 7, 1, 1, 0));
    TU_OK(a, rsv_reserve(a, shop, TOK("np-cart-1"), cart, 0));
    ck_assert_uint_eq(one_trips(a), 2);

    tu_exec(adm, "DROP PROCEDURE rsv_reserve_key_v3");
    tu_exec(adm, "DROP PROCEDURE rsv_fast_cart_v5");
    /* the CALLs fail with "does not exist": nothing ran, statements next */
    TU_OK(a, rsv_reserve_one(a, shop, TOK("np-2"), 7, 1, 2, 0));
    TU_OK(a, rsv_reserve(a, shop, TOK("np-cart-2"), cart, 0));
    ck_assert_uint_eq(one_trips(a), 2);
    ck_assert_int_eq(tu_held(a, shop, 7, 1), 5);
    ck_assert_int_eq(tu_held(a, shop, 8, 1), 2);
    TU_OK(a, rsv_reserve_one(a, shop, TOK("np-3"), 7, 1, 1, 0));
    TU_OK(a, rsv_reserve(a, shop, TOK("np-cart-3"), cart, 0));
    ck_assert_uint_eq(one_trips(a), 2);

    /* opened without them: never tries */
    TU_OK(b, rsv_open(&b, c, NULL));
    TU_OK(b, rsv_reserve_one(b, shop, TOK("np-4"), 7, 1, 1, 0));
    ck_assert_uint_eq(one_trips(b), 0);
    int rc = rsv_reserve_one(b, shop, TOK("np-5"), 7, 1, 4, 0);
    TU_RC(b, rc, RSV_EOUTOFSTOCK);
    ck_assert_int_eq(tu_held(b, shop, 7, 1), 8);
    rsv_close(b);

    /* loading the schema again brings them back for new contexts */
    tu_load_schema(adm);
    b = NULL;
    TU_OK(b, rsv_open(&b, c, NULL));
    TU_OK(b, rsv_reserve_one(b, shop, TOK("np-6"), 7, 1, 1, 0));
    TU_OK(b, rsv_reserve(b, shop, TOK("np-cart-6"), cart, 0));
    ck_assert_uint_eq(one_trips(b), 2);
    ck_assert_int_eq(tu_held(b, shop, 7, 1), 10);
    ck_assert_int_eq(tu_held(b, shop, 8, 1), 4);
    int64_t v = -1;
    TU_OK(b, rsv_audit(b, shop, 0, NULL, NULL, &v));
    ck_assert_int_eq(v, 0);
    rsv_cart_free(cart);
    rsv_close(b);
    rsv_close(a);
    mysql_close(adm);
    mysql_close(c);
}
END_TEST

/* The reserve procedure calls a procedure of its own to take several
 * units of a pool (rsv_pool_take_units_v1, which the cart procedure calls
 * too).  Dropped under an open context, a reserve of two pool units fails
 * at that inner CALL, nothing written, and the statements hold the units
 * once.  The context then holds one key with the cart procedure (a ledger
 * take needs no pool read); a context opened without it uses neither. */
START_TEST(reserve_without_the_take_units_procedure)
{
    MYSQL *c = tu_connect();
    MYSQL *adm = tu_connect();
    rsv_ctx *a = NULL, *b = NULL;
    TU_OK(a, rsv_open(&a, c, NULL));
    uint64_t shop = tu_shop();
    TU_OK(a, rsv_stock_set(a, shop, 7, 1, 10)); /* all of it in its pool */
    TU_OK(a, rsv_replenish(a, shop, 7, 1, NULL));
    TU_OK(a, rsv_stock_set(a, shop, 8, 1, 10)); /* none: ledger takes */
    TU_OK(a, rsv_reserve_one(a, shop, TOK("pt-1"), 7, 1, 1, 0));
    TU_OK(a, rsv_reserve_one(a, shop, TOK("pt-2"), 8, 1, 1, 0));
    ck_assert_uint_eq(one_trips(a), 2);

    tu_exec(adm, "DROP PROCEDURE rsv_pool_take_units_v1");
    TU_OK(a, rsv_reserve_one(a, shop, TOK("pt-3"), 7, 1, 2, 0));
    ck_assert_uint_eq(one_trips(a), 2); /* the CALL failed, statements held */
    ck_assert_int_eq(tu_held(a, shop, 7, 1), 3);
    /* and it stopped calling it: one key goes to the cart procedure */
    TU_OK(a, rsv_reserve_one(a, shop, TOK("pt-4"), 8, 1, 1, 0));
    ck_assert_uint_eq(one_trips(a), 3);
    ck_assert_int_eq(tu_held(a, shop, 8, 1), 2);
    char q[128];
    snprintf(q, sizeof q,
             "SELECT COUNT(*) FROM rsv_checkouts WHERE shop_id = %llu",
             (unsigned long long)shop);
    ck_assert_int_eq(tu_i64(adm, q), 4);

    TU_OK(b, rsv_open(&b, c, NULL));
    TU_OK(b, rsv_reserve_one(b, shop, TOK("pt-5"), 8, 1, 1, 0));
    ck_assert_uint_eq(one_trips(b), 0); /* both need what is missing */
    ck_assert_int_eq(tu_held(b, shop, 8, 1), 3);
    int64_t v = -1;
    TU_OK(b, rsv_audit(b, shop, 0, NULL, NULL, &v));
    ck_assert_int_eq(v, 0);
    rsv_close(b);
    tu_load_schema(adm);
    rsv_close(a);
    mysql_close(adm);
    mysql_close(c);
}
END_TEST

/* The read behind a sold-out answer goes alone at the session's
 * isolation, and tells whether that can see uncommitted rows: a session
 * that reads them (READ UNCOMMITTED, set before or after the context was
 * opened) has the read done again in a READ COMMITTED transaction of its
 * own (one statement alone, then SET TRANSACTION, START TRANSACTION, the
 * read and COMMIT). */
START_TEST(sold_out_read_keeps_its_frame_for_dirty_reads)
{
    uint64_t shop = tu_shop();
    for (int dirty = 0; dirty <= 2; dirty++) {
        MYSQL *c = tu_connect();
        if (dirty == 1)
            tu_exec(c, "SET SESSION TRANSACTION ISOLATION LEVEL READ "
                       "UNCOMMITTED");
        rsv_ctx *ctx = NULL;
        TU_OK(ctx, rsv_open(&ctx, c, NULL));
        if (dirty == 2)
            tu_exec(c, "SET SESSION TRANSACTION ISOLATION LEVEL READ "
                       "UNCOMMITTED");
        TU_OK(ctx, rsv_stock_set(ctx, shop, 29, 1, 0));
        int rc = rsv_reserve_one(ctx, shop, TOK("so-1"), 29, 1, 1, 0);
        TU_RC(ctx, rc, RSV_EOUTOFSTOCK);
        uint64_t st0 = reserve_stat(ctx, RSV_STAT_STATEMENTS);
        rc = rsv_reserve_one(ctx, shop, TOK("so-2"), 29, 1, 1, 0);
        TU_RC(ctx, rc, RSV_EOUTOFSTOCK);
        ck_assert_uint_eq(reserve_stat(ctx, RSV_STAT_STATEMENTS) - st0,
                          dirty ? 5 : 1);
        ck_assert_int_eq(tu_i64(c, "SELECT @@in_transaction"), 0);
        rsv_close(ctx);
        mysql_close(c);
    }
}
END_TEST

/* Claims and releases are one statement each with the schema's procedure
 * (rsv_settle_v2), with every answer the statements give; inside the
 * caller's transaction they join it by statements (the procedure would
 * commit it); without the procedure, statements. */
START_TEST(claim_and_release_in_one_call)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    MYSQL *adm = tu_fix_admin(&f); /* (replaces the procedure) */
    tu_fix_stock(&f, 27, 1, 10);
    const char *toks[] = {"c-a", "c-b", "c-c", "c-d", "c-e"};
    for (size_t i = 0; i < 5; i++)
        TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, toks[i], strlen(toks[i]),
                                     27, 1, 1, 0));
    uint64_t cl = op_stat(f.ctx, RSV_STAT_STATEMENTS, RSV_OP_CLAIM);
    uint64_t re = op_stat(f.ctx, RSV_STAT_STATEMENTS, RSV_OP_RELEASE);

    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("c-a")));
    int rc = rsv_claim(f.ctx, f.shop, TOK("c-a"));
    TU_RC(f.ctx, rc, RSV_ECLAIMED);
    rc = rsv_release(f.ctx, f.shop, TOK("c-a"));
    TU_RC(f.ctx, rc, RSV_ECLAIMED);
    TU_OK(f.ctx, rsv_release(f.ctx, f.shop, TOK("c-b")));
    TU_OK(f.ctx, rsv_release(f.ctx, f.shop, TOK("c-b"))); /* (idempotent) */
    rc = rsv_claim(f.ctx, f.shop, TOK("c-b"));
    TU_RC(f.ctx, rc, RSV_ERELEASED);
    rc = rsv_claim(f.ctx, f.shop, TOK("c-nobody"));
    TU_RC(f.ctx, rc, RSV_ENOTFOUND);
    rc = rsv_release(f.ctx, f.shop, TOK("c-nobody"));
    TU_RC(f.ctx, rc, RSV_ENOTFOUND);
    ck_assert_uint_eq(op_stat(f.ctx, RSV_STAT_STATEMENTS, RSV_OP_CLAIM) - cl,
                      4);
    ck_assert_uint_eq(op_stat(f.ctx, RSV_STAT_STATEMENTS, RSV_OP_RELEASE) - re,
                      4);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 27, 1), 3);

    /* inside the caller's transaction: joined, so its rollback undoes it */
    tu_exec(f.conn, "START TRANSACTION");
    cl = op_stat(f.ctx, RSV_STAT_STATEMENTS, RSV_OP_CLAIM);
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("c-c")));
    ck_assert_uint_gt(op_stat(f.ctx, RSV_STAT_STATEMENTS, RSV_OP_CLAIM) - cl,
                      1);
    ck_assert_int_eq(tu_i64(f.conn, "SELECT @@in_transaction"), 1);
    tu_exec(f.conn, "ROLLBACK");
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 27, 1), 3);
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("c-c")));

    /* the procedure gone: statements, the same answers */
    tu_exec(adm, "DROP PROCEDURE rsv_settle_v2");
    cl = op_stat(f.ctx, RSV_STAT_STATEMENTS, RSV_OP_CLAIM);
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("c-d")));
    rc = rsv_claim(f.ctx, f.shop, TOK("c-d"));
    TU_RC(f.ctx, rc, RSV_ECLAIMED);
    TU_OK(f.ctx, rsv_release(f.ctx, f.shop, TOK("c-e")));
    ck_assert_uint_gt(op_stat(f.ctx, RSV_STAT_STATEMENTS, RSV_OP_CLAIM) - cl,
                      2);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 27, 1), 0);
    tu_load_schema(adm);
    TU_OK(f.ctx, rsv_sweep(f.ctx, f.shop, 0, NULL));
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 27, 1), 7);
    tu_audit_clean();
    tu_fix_close(&f);
}
END_TEST

/* A cart procedure whose answer the library cannot read (a schema from
 * elsewhere under the name, a broken edit): the reserve fails with
 * RSV_EDB and says what it got, rather than guessing which units it
 * holds.  (This stand-in commits nothing, so nothing is held.) */
START_TEST(unreadable_cart_answer_is_an_error)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    MYSQL *adm = tu_fix_admin(&f); /* (replaces the procedure) */
    uint64_t l1[1] = {1};
    for (uint64_t item = 17; item <= 18; item++)
        tu_fix_stock(&f, item, 1, 10);
    rsv_cart *cart;
    ck_assert_int_eq(rsv_cart_new(&cart), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 17, l1, 1, 1, 0), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 18, l1, 1, 2, 0), RSV_OK);

    static const char *answers[] = {
        "'0,1,0,0'",                      /* cut short */
        "'7,0,0,0,5,9,1,0;'",             /* a key the cart does not have */
        "'0,0,0,0,5,9,1,0;1,0,0,0,x,9,2,0;'", /* not a number */
        "'0,0,0,0,5,9,1,0;'",             /* committed, one key missing */
    };
    for (size_t i = 0; i < sizeof answers / sizeof answers[0]; i++) {
        char sql[512];
        tu_exec(adm, "DROP PROCEDURE rsv_fast_cart_v5");
        snprintf(sql, sizeof sql,
                 "CREATE PROCEDURE rsv_fast_cart_v5(p_shop BIGINT UNSIGNED, "
                 "p_token VARBINARY(128), p_keys VARBINARY(4096), "
                 "p_nkeys INT, p_ttl_us BIGINT, p_own INT, OUT o_status "
                 "INT, OUT o_answer VARCHAR(4096)) SELECT 0, %s",
                 answers[i]);
        tu_exec(adm, sql);
        char tok[32];
        snprintf(tok, sizeof tok, "bad-answer-%zu", i);
        int rc = rsv_reserve(f.ctx, f.shop, tok, strlen(tok), cart, 0);
        TU_RC(f.ctx, rc, RSV_EDB);
        ck_assert_msg(strstr(rsv_errmsg(f.ctx), "rsv_fast_cart_v5 answered") !=
                          NULL, "message: %s", rsv_errmsg(f.ctx));
        ck_assert_int_eq(tu_held(f.ctx, f.shop, 17, 1), 0);
        ck_assert_int_eq(tu_held(f.ctx, f.shop, 18, 1), 0);
    }

    /* the real one again: the same context reserves in one CALL */
    tu_load_schema(adm);
    uint64_t before = one_trips(f.ctx);
    TU_OK(f.ctx, rsv_reserve(f.ctx, f.shop, TOK("good-answer"), cart, 0));
    ck_assert_uint_eq(one_trips(f.ctx) - before, 1);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 17, 1), 1);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 18, 1), 2);
    tu_audit_clean();
    rsv_cart_free(cart);
    tu_fix_close(&f);
}
END_TEST

/* The pool row id at offset `nth` of an item's pool (0: the lowest). */
static int64_t nth_pool_id(MYSQL *c, uint64_t shop, uint64_t item, int nth)
{
    char q[256];
    snprintf(q, sizeof q, "SELECT id FROM rsv_pool WHERE shop_id = %llu AND "
             "item_id = %llu AND location_id = 1 ORDER BY id LIMIT 1 "
             "OFFSET %d", (unsigned long long)shop,
             (unsigned long long)item, nth);
    return tu_i64(c, q);
}

static int64_t pool_rows_below(MYSQL *c, uint64_t shop, uint64_t item,
                               int64_t id)
{
    char q[256];
    snprintf(q, sizeof q, "SELECT COALESCE(SUM(units), 0) FROM rsv_pool WHERE shop_id = "
             "%llu AND item_id = %llu AND location_id = 1 AND id <= %lld",
             (unsigned long long)shop, (unsigned long long)item,
             (long long)id);
    return tu_i64(c, q);
}

/* The procedures take a key's units with one read and one DELETE.  The
 * DELETE must never reach a row another transaction holds (it would wait
 * for it): here another buyer holds the third unit of each pool, so the
 * units taken from the bottom have a gap, on the one-key path, in a cart
 * and in a batch.  A wait would end in RSV_EBUSY (1 s lock waits). */
START_TEST(units_taken_around_a_held_row)
{
    tu_fix f;
    tu_fix_open(&f, TEST_OPT_READ_FROM_BOTTOM, 0);
    rsv_ctx *ctx = f.ctx;
    MYSQL *c = f.conn;
    uint64_t shop = f.shop;
    tu_exec(c, "SET SESSION innodb_lock_wait_timeout = 1");
    int64_t held[3];
    MYSQL *other = tu_connect_in_txn();
    for (int i = 0; i < 3; i++) {
        /* all 10 units pooled: none left on the ledger row to take */
        pooled_stock(ctx, c, shop, 90 + (uint64_t)i, 10, 10);
        held[i] = nth_pool_id(c, shop, 90 + (uint64_t)i, 2);
        char q[256];
        snprintf(q, sizeof q, "SELECT id FROM rsv_pool WHERE shop_id = %llu "
                 "AND item_id = %d AND location_id = 1 AND id = %lld FOR "
                 "UPDATE", (unsigned long long)shop, 90 + i,
                 (long long)held[i]);
        tu_exec(other, q);
    }

    TU_OK(ctx, rsv_reserve_one(ctx, shop, TOK("gap-one"), 90, 1, 4, 0));
    ck_assert_uint_eq(one_trips(ctx), 1);
    ck_assert_int_eq(key_count(c, "pool", shop, 90), 6);
    ck_assert_int_eq(pool_rows_below(c, shop, 90, held[0]), 1);

    rsv_cart *cart;
    ck_assert_int_eq(rsv_cart_new(&cart), RSV_OK);
    uint64_t l1[1] = {1};
    ck_assert_int_eq(rsv_cart_add(cart, 90, l1, 1, 2, 0), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 91, l1, 1, 3, 0), RSV_OK);
    TU_OK(ctx, rsv_reserve(ctx, shop, TOK("gap-cart"), cart, 0));
    ck_assert_uint_eq(one_trips(ctx), 2);
    ck_assert_int_eq(key_count(c, "pool", shop, 90), 4);
    ck_assert_int_eq(key_count(c, "pool", shop, 91), 7);
    ck_assert_int_eq(pool_rows_below(c, shop, 91, held[1]), 1);

    uint64_t shops[2] = {shop, shop}, items[2] = {92, 92}, locs[2] = {1, 1};
    int64_t qty[2] = {3, 2};
    const void *toks[2] = {"gap-b1", "gap-b2"};
    size_t lens[2] = {6, 6};
    int results[2] = {-1, -1};
    TU_OK(ctx, rsv_reserve_batch(ctx, 2, shops, toks, lens, items, locs, qty,
                                 0, results));
    ck_assert_int_eq(results[0], RSV_OK);
    ck_assert_int_eq(results[1], RSV_OK);
    ck_assert_int_eq(key_count(c, "pool", shop, 92), 5);
    ck_assert_int_eq(pool_rows_below(c, shop, 92, held[2]), 1);
    tu_exec(other, "ROLLBACK");
    mysql_close(other);

    ck_assert_int_eq(tu_held(ctx, shop, 90, 1), 6);
    ck_assert_int_eq(tu_held(ctx, shop, 91, 1), 3);
    ck_assert_int_eq(tu_held(ctx, shop, 92, 1), 5);
    TU_OK(ctx, rsv_claim(ctx, shop, TOK("gap-one")));
    TU_OK(ctx, rsv_release(ctx, shop, TOK("gap-cart")));
    rsv_cart_free(cart);
    tu_fix_close(&f);
}
END_TEST

int main(void)
{
    tu_db_create("semantics");
    Suite *s = suite_create("semantics");
    tu_add(s, "statements_do_not_grow_with_lines", statements_do_not_grow_with_lines);
    tu_add(s, "locations_in_order_of_preference", locations_in_order_of_preference);
    tu_add(s, "large_cart_all_or_nothing", large_cart_all_or_nothing);
    tu_add(s, "expired_hold_still_claimable_until_taken", expired_hold_still_claimable_until_taken);
    tu_add(s, "expired_hold_given_to_another_buyer", expired_hold_given_to_another_buyer);
    tu_add(s, "sweep_gives_back_expired_holds", sweep_gives_back_expired_holds);
    tu_add(s, "sweep_gives_back_at_most_max_holds",
           sweep_gives_back_at_most_max_holds);
    tu_add(s, "reserve_again_replaces_the_cart", reserve_again_replaces_the_cart);
    tu_add(s, "claim_inside_caller_transaction", claim_inside_caller_transaction);
    tu_add(s, "stock_changes_keep_invariants", stock_changes_keep_invariants);
    tu_add(s, "lock_wait_timeout_reports_busy", lock_wait_timeout_reports_busy);
    tu_add(s, "reserve_without_the_procedure", reserve_without_the_procedure);
    tu_add(s, "reserve_without_the_take_units_procedure",
           reserve_without_the_take_units_procedure);
    tu_add(s, "unreadable_cart_answer_is_an_error",
           unreadable_cart_answer_is_an_error);
    tu_add(s, "claim_and_release_in_one_call", claim_and_release_in_one_call);
    tu_add(s, "sold_out_read_keeps_its_frame_for_dirty_reads",
           sold_out_read_keeps_its_frame_for_dirty_reads);
    tu_add(s, "slow_path_never_waits_for_other_items",
           slow_path_never_waits_for_other_items);
    tu_add(s, "slow_path_waits_in_key_order", slow_path_waits_in_key_order);
    tu_add(s, "cart_in_one_round_trip", cart_in_one_round_trip);
    tu_add(s, "one_trip_takes_from_a_free_ledger_row",
           one_trip_takes_from_a_free_ledger_row);
    tu_add(s, "held_top_up_is_tried_again", held_top_up_is_tried_again);
    tu_add(s, "pool_gate_queues_a_crowd", pool_gate_queues_a_crowd);
    tu_add(s, "extreme_ids_on_every_path", extreme_ids_on_every_path);
    tu_add(s, "cart_reads_first_locations_first",
           cart_reads_first_locations_first);
    tu_add(s, "sold_out_answer_takes_no_ledger_lock",
           sold_out_answer_takes_no_ledger_lock);
    tu_add(s, "cart_sold_out_answer_takes_no_ledger_lock",
           cart_sold_out_answer_takes_no_ledger_lock);
    tu_add(s, "slow_path_locks_exclusively_when_nothing_came",
           slow_path_locks_exclusively_when_nothing_came);
    tu_add(s, "slow_path_goes_back_when_refilled",
           slow_path_goes_back_when_refilled);
    tu_add(s, "short_pool_waits_for_the_ledger_row",
           short_pool_waits_for_the_ledger_row);
    tu_add(s, "cursor_read_short_rescans_from_bottom",
           cursor_read_short_rescans_from_bottom);
    tu_add_timeout(s, "units_taken_around_a_held_row",
                   units_taken_around_a_held_row, 30);
    tu_add_timeout(s, "statement_failed_mid_result_is_reusable",
                   statement_failed_mid_result_is_reusable, 15);
    int rc = tu_run(s);
    tu_db_drop();
    return rc;
}
