/*
 * check_badinput.c - every kind of bad input gets its own code and a clear
 * message, and leaves nothing behind in the database.
 */
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "testutil.h"

#define TOK(s) (s), strlen(s)

/* Rows of any libreserve table that belong to a shop. */
static int64_t shop_rows(MYSQL *c, uint64_t shop)
{
    char q[1024];
    snprintf(q, sizeof q,
             "SELECT (SELECT COALESCE(SUM(units), 0) FROM rsv_pool WHERE shop_id=%llu)"
             " + (SELECT COUNT(*) FROM rsv_holds WHERE shop_id=%llu)"
             " + (SELECT COUNT(*) FROM rsv_checkouts WHERE shop_id=%llu)"
             " + (SELECT COUNT(*) FROM rsv_journal WHERE shop_id=%llu)",
             (unsigned long long)shop, (unsigned long long)shop,
             (unsigned long long)shop, (unsigned long long)shop);
    return tu_i64(c, q);
}

START_TEST(null_pointers)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    rsv_cart *cart = NULL;
    uint64_t loc = 1;
    ck_assert_int_eq(rsv_open(NULL, f.conn, NULL), RSV_EINVAL);
    rsv_ctx *other = (rsv_ctx *)1;
    ck_assert_int_eq(rsv_open(&other, NULL, NULL), RSV_EINVAL);
    ck_assert_ptr_null(other);
    ck_assert_int_eq(rsv_cart_new(NULL), RSV_EINVAL);
    ck_assert_int_eq(rsv_cart_add(NULL, 1, &loc, 1, 1, 0), RSV_EINVAL);
    TU_OK(f.ctx, rsv_cart_new(&cart));
    ck_assert_int_eq(rsv_cart_add(cart, 1, NULL, 1, 1, 0), RSV_EINVAL);
    ck_assert_int_eq(rsv_cart_add(cart, 1, &loc, 0, 1, 0), RSV_EINVAL);
    ck_assert_int_eq(rsv_cart_add(cart, 1, &loc, 1, 1, 0x80), RSV_EINVAL);
    uint64_t twice[2] = {3, 3};
    ck_assert_int_eq(rsv_cart_add(cart, 1, twice, 2, 1, 0), RSV_EINVAL);
    ck_assert_int_eq(rsv_reserve(NULL, f.shop, TOK("t"), cart, 0), RSV_EINVAL);
    int rc = rsv_reserve(f.ctx, f.shop, TOK("t"), NULL, 0);
    TU_RC(f.ctx, rc, RSV_EINVAL);
    ck_assert(strstr(rsv_errmsg(f.ctx), "cart") != NULL);
    TU_OK(f.ctx, rsv_cart_add(cart, 1, &loc, 1, 1, 0));
    rc = rsv_reserve(f.ctx, f.shop, NULL, 3, cart, 0);
    TU_RC(f.ctx, rc, RSV_EINVAL);
    rc = rsv_claim(f.ctx, f.shop, NULL, 1);
    TU_RC(f.ctx, rc, RSV_EINVAL);
    ck_assert_int_eq(rsv_claim(NULL, f.shop, TOK("t")), RSV_EINVAL);
    ck_assert_int_eq(rsv_release(NULL, f.shop, TOK("t")), RSV_EINVAL);
    ck_assert_int_eq(rsv_stock_set(NULL, f.shop, 1, 1, 1), RSV_EINVAL);
    int64_t drained = 5;
    ck_assert_int_eq(rsv_pool_drain(NULL, f.shop, 1, 1, &drained), RSV_EINVAL);
    ck_assert_int_eq(drained, 0);
    rc = rsv_checkout_status(f.ctx, f.shop, TOK("t"), NULL, NULL, NULL);
    TU_RC(f.ctx, rc, RSV_EINVAL);
    ck_assert_int_eq(rsv_options_init(NULL, RSV_OPTIONS_VERSION), RSV_EINVAL);
    rsv_options o;
    ck_assert_int_eq(rsv_options_init(&o, 999), RSV_EINVAL);
    size_t n;
    ck_assert_int_eq(rsv_cart_allocation_count(cart, 5, &n), RSV_ERANGE);
    ck_assert_int_eq(rsv_cart_allocation_count(cart, 0, NULL), RSV_EINVAL);
    ck_assert_str_eq(rsv_errmsg(NULL), "no context (NULL)");
    rsv_close(NULL);
    rsv_cart_free(NULL);
    rsv_cart_free(cart);
    ck_assert_int_eq(shop_rows(f.conn, f.shop), 0);
    tu_fix_close(&f);
}
END_TEST

START_TEST(bad_quantities)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 10);
    int64_t before = shop_rows(f.conn, f.shop);
    rsv_cart *cart;
    uint64_t loc = 1;
    TU_OK(f.ctx, rsv_cart_new(&cart));
    const int64_t bad[] = {0, -1, INT64_MIN, RSV_QUANTITY_MAX + 1LL, INT64_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(rsv_cart_add(cart, 1, &loc, 1, bad[i], 0), RSV_EQUANTITY);
        int rc = rsv_reserve_one(f.ctx, f.shop, TOK("q"), 1, 1, bad[i], 0);
        TU_RC(f.ctx, rc, RSV_EQUANTITY);
        ck_assert(strstr(rsv_errmsg(f.ctx), "quantity") != NULL);
    }
    ck_assert_uint_eq(rsv_cart_lines(cart), 0);
    int rc = rsv_stock_set(f.ctx, f.shop, 1, 1, -5);
    TU_RC(f.ctx, rc, RSV_EQUANTITY);
    rc = rsv_stock_set(f.ctx, f.shop, 1, 1, INT64_MAX);
    TU_RC(f.ctx, rc, RSV_EQUANTITY);
    rc = rsv_stock_adjust(f.ctx, f.shop, 1, 1, INT64_MIN, NULL);
    TU_RC(f.ctx, rc, RSV_EQUANTITY);
    rc = rsv_stock_adjust(f.ctx, f.shop, 1, 1, -11, NULL);
    TU_RC(f.ctx, rc, RSV_ESTOCK);
    rc = rsv_reserve_one(f.ctx, f.shop, TOK("q"), 1, 1, 1, -5);
    TU_RC(f.ctx, rc, RSV_EQUANTITY);
    ck_assert(strstr(rsv_errmsg(f.ctx), "ttl") != NULL);
    rc = rsv_reserve_one(f.ctx, f.shop, TOK("q"), 1, 1, 1, INT64_MAX);
    TU_RC(f.ctx, rc, RSV_EQUANTITY);
    /* a cart whose lines add up past what one item can hold */
    for (int i = 0; i < 3; i++)
        TU_OK(f.ctx, rsv_cart_add(cart, 1, &loc, 1, RSV_QUANTITY_MAX, 0));
    rc = rsv_reserve(f.ctx, f.shop, TOK("q"), cart, 0);
    TU_RC(f.ctx, rc, RSV_EOUTOFSTOCK);
    ck_assert_int_eq(shop_rows(f.conn, f.shop), before);
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), 10);
    /* stock at the top of its range plus the largest delta: refused
     * before the sum is formed (it would overflow int64) */
    TU_OK(f.ctx, rsv_stock_set(f.ctx, f.shop, 2, 1, INT64_C(1) << 62));
    rc = rsv_stock_adjust(f.ctx, f.shop, 2, 1, INT64_C(1) << 62, NULL);
    TU_RC(f.ctx, rc, RSV_EQUANTITY);
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 2, 1), INT64_C(1) << 62);
    rsv_cart_free(cart);
    tu_fix_close(&f);
}
END_TEST

START_TEST(empty_cart_and_too_big)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    rsv_cart *cart;
    TU_OK(f.ctx, rsv_cart_new(&cart));
    int rc = rsv_reserve(f.ctx, f.shop, TOK("e"), cart, 0);
    TU_RC(f.ctx, rc, RSV_EEMPTY);
    uint64_t locs[RSV_LINE_MAX_LOCATIONS + 1];
    for (size_t i = 0; i <= RSV_LINE_MAX_LOCATIONS; i++)
        locs[i] = i + 1;
    ck_assert_int_eq(rsv_cart_add(cart, 1, locs, RSV_LINE_MAX_LOCATIONS + 1, 1, 0),
                     RSV_ETOOBIG);
    for (int i = 0; i < RSV_CART_MAX_LINES; i++)
        TU_OK(f.ctx, rsv_cart_add(cart, (uint64_t)i, locs, 1, 1, 0));
    ck_assert_int_eq(rsv_cart_add(cart, 9999, locs, 1, 1, 0), RSV_ETOOBIG);
    ck_assert_int_eq(shop_rows(f.conn, f.shop), 0);
    rsv_cart_free(cart);
    tu_fix_close(&f);
}
END_TEST

START_TEST(tokens_byte_exact)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 10);
    char longtok[RSV_TOKEN_MAX + 1];
    memset(longtok, 'x', sizeof longtok);
    int rc = rsv_reserve_one(f.ctx, f.shop, longtok, sizeof longtok, 1, 1, 1,
                             0);
    TU_RC(f.ctx, rc, RSV_ETOKEN);
    rc = rsv_reserve_one(f.ctx, f.shop, "", 0, 1, 1, 1, 0);
    TU_RC(f.ctx, rc, RSV_ETOKEN);
    rc = rsv_claim(f.ctx, f.shop, longtok, sizeof longtok);
    TU_RC(f.ctx, rc, RSV_ETOKEN);
    /* the longest token is fine */
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, longtok, RSV_TOKEN_MAX, 1, 1,
                                 1, 0));

    static const char nasty[] = "a'b\"c\\d\0e;--%_\xff";
    size_t nlen = sizeof nasty - 1;
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, nasty, nlen, 1, 1, 2, 0));
    char q[512];
    snprintf(q, sizeof q, "SELECT COUNT(*) FROM rsv_checkouts WHERE "
             "shop_id=%llu AND checkout_token = X'61276222635C6400653B2D2D255FFF'",
             (unsigned long long)f.shop);
    ck_assert_int_eq(tu_i64(f.conn, q), 1);
    /* a prefix (up to the NUL) and a case variant are other tokens */
    rc = rsv_claim(f.ctx, f.shop, nasty, 6);
    TU_RC(f.ctx, rc, RSV_ENOTFOUND);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("Token"), 1, 1, 1, 0));
    rc = rsv_claim(f.ctx, f.shop, TOK("token"));
    TU_RC(f.ctx, rc, RSV_ENOTFOUND);
    rc = rsv_claim(f.ctx, f.shop, TOK("token "));
    TU_RC(f.ctx, rc, RSV_ENOTFOUND);
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, nasty, nlen));
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), 8);
    tu_fix_close(&f);
}
END_TEST

START_TEST(unknown_item_or_location)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_pooled(&f, 1, 1, 10);
    int64_t before = shop_rows(f.conn, f.shop);
    rsv_cart *cart;
    TU_OK(f.ctx, rsv_cart_new(&cart));
    uint64_t l1 = 1, l2[2] = {1, 77};
    TU_OK(f.ctx, rsv_cart_add(cart, 1, &l1, 1, 1, 0));
    TU_OK(f.ctx, rsv_cart_add(cart, 555, &l1, 1, 1, 0)); /* unknown item */
    int rc = rsv_reserve(f.ctx, f.shop, TOK("u"), cart, 0);
    TU_RC(f.ctx, rc, RSV_ENOITEM);
    ck_assert_uint_eq(rsv_cart_failed_line(cart), 1);
    ck_assert(strstr(rsv_errmsg(f.ctx), "item 555") != NULL);
    rsv_cart_clear(cart);
    TU_OK(f.ctx, rsv_cart_add(cart, 1, l2, 2, 1, 0)); /* unknown location 77 */
    rc = rsv_reserve(f.ctx, f.shop, TOK("u"), cart, 0);
    TU_RC(f.ctx, rc, RSV_ENOITEM);
    ck_assert(strstr(rsv_errmsg(f.ctx), "location 77") != NULL);
    /* also when the first location covers the line (its pool is full),
     * whichever path (one round trip or statements) the reserve takes */
    for (int i = 0; i < 2; i++) {
        rc = rsv_reserve(f.ctx, f.shop, TOK("u"), cart, 0);
        TU_RC(f.ctx, rc, RSV_ENOITEM);
        ck_assert(strstr(rsv_errmsg(f.ctx), "location 77") != NULL);
        ck_assert_uint_eq(rsv_cart_failed_line(cart), 0);
    }
    rc = rsv_stock_adjust(f.ctx, f.shop, 1, 78, 1, NULL);
    TU_RC(f.ctx, rc, RSV_ENOITEM);
    rc = rsv_stock_get(f.ctx, f.shop, 1, 78, NULL, NULL, NULL, NULL);
    TU_RC(f.ctx, rc, RSV_ENOITEM);
    int64_t drained = 5;
    rc = rsv_pool_drain(f.ctx, f.shop, 1, 78, &drained);
    TU_RC(f.ctx, rc, RSV_ENOITEM);
    ck_assert(strstr(rsv_errmsg(f.ctx), "location 78") != NULL);
    ck_assert_int_eq(drained, 0);
    ck_assert_int_eq(shop_rows(f.conn, f.shop), before);
    rsv_cart_free(cart);
    tu_fix_close(&f);
}
END_TEST

START_TEST(schema_not_loaded)
{
    MYSQL *c = tu_connect_nodb();
    tu_exec(c, "CREATE DATABASE IF NOT EXISTS rsvtest_empty");
    tu_exec(c, "USE rsvtest_empty");
    rsv_ctx *ctx = NULL;
    int rc = rsv_open(&ctx, c, NULL);
    TU_RC(ctx, rc, RSV_ESCHEMA);
    ck_assert(strstr(rsv_errmsg(ctx), "rsv_ledger") != NULL);
    rsv_close(ctx);
    /* one table missing: the message names it */
    tu_exec(c, "CREATE TABLE rsv_ledger (x INT)");
    tu_exec(c, "CREATE TABLE rsv_pool (x INT)");
    tu_exec(c, "CREATE TABLE rsv_checkouts (x INT)");
    tu_exec(c, "CREATE TABLE rsv_journal (x INT)");
    rc = rsv_open(&ctx, c, NULL);
    TU_RC(ctx, rc, RSV_ESCHEMA);
    ck_assert(strstr(rsv_errmsg(ctx), "rsv_holds") != NULL);
    rsv_close(ctx);
    /* no database selected */
    mysql_close(c);
    c = tu_connect_nodb();
    rc = rsv_open(&ctx, c, NULL);
    TU_RC(ctx, rc, RSV_ESCHEMA);
    ck_assert(strstr(rsv_errmsg(ctx), "no database") != NULL);
    rsv_close(ctx);
    tu_exec(c, "DROP DATABASE rsvtest_empty");
    mysql_close(c);
}
END_TEST

START_TEST(table_dropped_after_open)
{
    MYSQL *c = tu_connect_nodb();
    tu_exec(c, "CREATE DATABASE IF NOT EXISTS rsvtest_dropped");
    tu_exec(c, "USE rsvtest_dropped");
    tu_load_schema(c);
    rsv_ctx *ctx = NULL;
    TU_OK(ctx, rsv_open(&ctx, c, NULL));
    TU_OK(ctx, rsv_stock_set(ctx, 1, 1, 1, 5));
    tu_exec(c, "DROP TABLE rsv_holds");
    int rc = rsv_reserve_one(ctx, 1, TOK("d"), 1, 1, 1, 0);
    TU_RC(ctx, rc, RSV_ESCHEMA);
    ck_assert(strstr(rsv_errmsg(ctx), "rsv_holds") != NULL);
    ck_assert_int_eq(tu_i64(c, "SELECT COUNT(*) FROM rsv_checkouts"), 0);
    ck_assert_int_eq(tu_i64(c, "SELECT @@in_transaction"), 0);
    rsv_close(ctx);
    tu_exec(c, "DROP DATABASE rsvtest_dropped");
    mysql_close(c);
}
END_TEST

START_TEST(caller_in_transaction)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 10);
    tu_exec(f.conn, "START TRANSACTION");
    int rc = rsv_reserve_one(f.ctx, f.shop, TOK("tx"), 1, 1, 1, 0);
    TU_RC(f.ctx, rc, RSV_EINTXN);
    rc = rsv_stock_set(f.ctx, f.shop, 1, 1, 3);
    TU_RC(f.ctx, rc, RSV_EINTXN);
    rc = rsv_replenish(f.ctx, f.shop, 1, 1, NULL);
    TU_RC(f.ctx, rc, RSV_EINTXN);
    rc = rsv_sweep(f.ctx, f.shop, 0, NULL);
    TU_RC(f.ctx, rc, RSV_EINTXN);
    rc = rsv_pool_drain(f.ctx, f.shop, 1, 1, NULL);
    TU_RC(f.ctx, rc, RSV_EINTXN);
    rc = rsv_audit(f.ctx, f.shop, 0, NULL, NULL, NULL);
    TU_RC(f.ctx, rc, RSV_EINTXN);
    tu_exec(f.conn, "ROLLBACK");
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), 10);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), 0);
    tu_fix_close(&f);
}
END_TEST

START_TEST(lost_connection)
{
    MYSQL *c;
    rsv_ctx *ctx = tu_open(&c);
    uint64_t shop = tu_shop();
    TU_OK(ctx, rsv_stock_set(ctx, shop, 1, 1, 10));
    MYSQL *killer = tu_connect();
    char q[64];
    snprintf(q, sizeof q, "KILL %lu", mysql_thread_id(c));
    tu_exec(killer, q);
    int rc = rsv_reserve_one(ctx, shop, TOK("lost"), 1, 1, 1, 0);
    TU_RC(ctx, rc, RSV_ECONN);
    ck_assert(strstr(rsv_errmsg(ctx), "MySQL error") != NULL);
    rc = rsv_claim(ctx, shop, TOK("lost"));
    TU_RC(ctx, rc, RSV_ECONN);
    ck_assert_int_eq(shop_rows(killer, shop), 0);
    rsv_ctx *k2 = NULL;
    TU_OK(k2, rsv_open(&k2, killer, NULL));
    ck_assert_int_eq(tu_held(k2, shop, 1, 1), 0);
    rsv_close(k2);
    rsv_close(ctx);
    mysql_close(c);
    /* The connection is lost while the application is inside its own
     * transaction and the application has seen the loss: the handle still
     * says "in a transaction" (the last status it read), but the session
     * is gone.  RSV_ECONN, not RSV_EINTXN. */
    c = tu_connect();
    ctx = NULL;
    TU_OK(ctx, rsv_open(&ctx, c, NULL));
    tu_exec(c, "START TRANSACTION");
    snprintf(q, sizeof q, "KILL %lu", mysql_thread_id(c));
    tu_exec(killer, q);
    ck_assert_int_ne(mysql_query(c, "SELECT 1"), 0);
    rc = rsv_reserve_one(ctx, shop, TOK("lost2"), 1, 1, 1, 0);
    TU_RC(ctx, rc, RSV_ECONN);
    rsv_close(ctx);
    mysql_close(c);
    /* a handle that never connected */
    MYSQL *never = mysql_init(NULL);
    rsv_ctx *n = NULL;
    rc = rsv_open(&n, never, NULL);
    TU_RC(n, rc, RSV_ECONN);
    rsv_close(n);
    mysql_close(never);
    mysql_close(killer);
}
END_TEST

START_TEST(bad_options)
{
    MYSQL *c = tu_connect();
    rsv_options o;
    rsv_ctx *ctx = NULL;
    struct { int field; int64_t v; } cases[] = {
        {0, 0}, {0, 10001}, {1, -2}, {1, 5000}, {2, 0}, {3, -1}, {4, 0}, {5, -1},
        {6, -1}, {6, 30LL * 24 * 3600 + 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rsv_options_init(&o, RSV_OPTIONS_VERSION);
        switch (cases[i].field) {
        case 0: o.pool_cap = cases[i].v; break;
        case 1: o.refill_low_water = cases[i].v; break;
        case 2: o.hold_ttl_ms = cases[i].v; break;
        case 3: o.max_retries = (int32_t)cases[i].v; break;
        case 4: o.retry_base_us = (int32_t)cases[i].v; break;
        case 5: o.lock_wait_timeout_s = (int32_t)cases[i].v; break;
        default: o.pool_idle_s = cases[i].v; break;
        }
        int rc = rsv_open(&ctx, c, &o);
        TU_RC(ctx, rc, RSV_EINVAL);
        ck_assert(strlen(rsv_errmsg(ctx)) > 10);
        rsv_close(ctx);
    }
    rsv_options_init(&o, RSV_OPTIONS_VERSION);
    o.conn_tag_prefix = "evil*/ DROP";
    int rc = rsv_open(&ctx, c, &o);
    TU_RC(ctx, rc, RSV_EINVAL);
    rsv_close(ctx);
    o.conn_tag_prefix = "app.checkout:";
    TU_OK(ctx, rsv_open(&ctx, c, &o));
    rsv_close(ctx);
    /* auto-reconnect could replay a statement outside its transaction */
    my_bool on = 1;
    mysql_optionsv(c, MYSQL_OPT_RECONNECT, &on);
    rc = rsv_open(&ctx, c, NULL);
    TU_RC(ctx, rc, RSV_ECONFIG);
    rsv_close(ctx);
    /* ... also when it is switched on after rsv_open: refused, untouched */
    my_bool off = 0;
    mysql_optionsv(c, MYSQL_OPT_RECONNECT, &off);
    TU_OK(ctx, rsv_open(&ctx, c, NULL));
    uint64_t shop = tu_shop();
    TU_OK(ctx, rsv_stock_set(ctx, shop, 1, 1, 3));
    mysql_optionsv(c, MYSQL_OPT_RECONNECT, &on);
    rc = rsv_reserve_one(ctx, shop, "late", 4, 1, 1, 1, 0);
    TU_RC(ctx, rc, RSV_ECONFIG);
    ck_assert(strstr(rsv_errmsg(ctx), "MYSQL_OPT_RECONNECT") != NULL);
    mysql_optionsv(c, MYSQL_OPT_RECONNECT, &off);
    char q[160];
    snprintf(q, sizeof q, "SELECT COUNT(*) FROM rsv_checkouts WHERE "
             "shop_id = %llu", (unsigned long long)shop);
    ck_assert_int_eq(tu_i64(c, q), 0);
    TU_OK(ctx, rsv_reserve_one(ctx, shop, "late", 4, 1, 1, 1, 0));
    ck_assert_int_eq(tu_i64(c, q), 1);
    rsv_close(ctx);
    mysql_close(c);
}
END_TEST

START_TEST(codes_have_names_and_texts)
{
    for (int code = 0; code >= -23; code--) {
        if (code == -9)
            continue;
        ck_assert_msg(rsv_code_name(code) != NULL, "code %d has no name", code);
        ck_assert_str_ne(rsv_strerror(code), "unknown error code");
    }
    ck_assert_ptr_null(rsv_code_name(12345));
    ck_assert_str_eq(rsv_strerror(12345), "unknown error code");
    ck_assert_str_eq(rsv_version(), RSV_VERSION);
    ck_assert_int_eq(rsv_version_number(), RSV_VERSION_NUMBER);
    ck_assert_uint_eq(rsv_options_size(), sizeof(rsv_options));
}
END_TEST

int main(void)
{
    tu_db_create("badinput");
    Suite *s = suite_create("badinput");
    tu_add(s, "null_pointers", null_pointers);
    tu_add(s, "bad_quantities", bad_quantities);
    tu_add(s, "empty_cart_and_too_big", empty_cart_and_too_big);
    tu_add(s, "tokens_byte_exact", tokens_byte_exact);
    tu_add(s, "unknown_item_or_location", unknown_item_or_location);
    tu_add(s, "schema_not_loaded", schema_not_loaded);
    tu_add(s, "table_dropped_after_open", table_dropped_after_open);
    tu_add(s, "caller_in_transaction", caller_in_transaction);
    tu_add(s, "lost_connection", lost_connection);
    tu_add(s, "bad_options", bad_options);
    tu_add(s, "codes_have_names_and_texts", codes_have_names_and_texts);
    int rc = tu_run(s);
    tu_db_drop();
    return rc;
}
