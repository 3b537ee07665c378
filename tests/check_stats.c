/*
 * check_stats.c - observability against the real server: counters per
 * operation kind and outcome, latency histograms and percentiles, reset,
 * the completion callback, the kill switch, and retries / lock-wait
 * timeouts / deadlocks provoked with a second connection.
 */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <reserve/stats.h>

#include "testutil.h"

#define TOK(s) (s), strlen(s)

static uint64_t stat_of(rsv_ctx *ctx, uint32_t stat, uint32_t op)
{
    uint64_t v = 0;
    ck_assert_int_eq(rsv_stats_get(ctx, stat, op, &v), RSV_OK);
    return v;
}

static uint64_t outcome_of(rsv_ctx *ctx, uint32_t op, int code)
{
    uint64_t v = 0;
    ck_assert_int_eq(rsv_stats_outcome(ctx, op, code, &v), RSV_OK);
    return v;
}

static int64_t session_questions(MYSQL *c)
{
    return tu_i64(c, "SELECT VARIABLE_VALUE FROM information_schema."
                     "SESSION_STATUS WHERE VARIABLE_NAME = 'Questions'");
}

START_TEST(counters_by_kind_and_outcome)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 3);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("a"), 1, 1, 2, 0));
    int rc = rsv_reserve_one(f.ctx, f.shop, TOK("b"), 1, 1, 5, 0);
    TU_RC(f.ctx, rc, RSV_EOUTOFSTOCK);
    rc = rsv_reserve_one(f.ctx, f.shop, TOK("b"), 1, 1, 0, 0);
    TU_RC(f.ctx, rc, RSV_EQUANTITY);
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("a")));
    rc = rsv_claim(f.ctx, f.shop, TOK("a"));
    TU_RC(f.ctx, rc, RSV_ECLAIMED);
    rc = rsv_release(f.ctx, f.shop, TOK("nope"));
    TU_RC(f.ctx, rc, RSV_ENOTFOUND);
    rc = rsv_claim(f.ctx, f.shop, NULL, 3);
    TU_RC(f.ctx, rc, RSV_EINVAL);
    int32_t st;
    TU_OK(f.ctx, rsv_checkout_status(f.ctx, f.shop, TOK("a"), &st, NULL, NULL));
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), 1);

    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_CALLS, RSV_OP_RESERVE), 3);
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_OK, RSV_OP_RESERVE), 1);
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_EXPECTED, RSV_OP_RESERVE), 1);
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_FAILED, RSV_OP_RESERVE), 1);
    ck_assert_uint_eq(outcome_of(f.ctx, RSV_OP_RESERVE, RSV_EOUTOFSTOCK), 1);
    ck_assert_uint_eq(outcome_of(f.ctx, RSV_OP_RESERVE, RSV_EQUANTITY), 1);
    ck_assert_uint_eq(outcome_of(f.ctx, RSV_OP_RESERVE, RSV_OK), 1);
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_CALLS, RSV_OP_CLAIM), 3);
    ck_assert_uint_eq(outcome_of(f.ctx, RSV_OP_CLAIM, RSV_ECLAIMED), 1);
    ck_assert_uint_eq(outcome_of(f.ctx, RSV_OP_CLAIM, RSV_EINVAL), 1);
    ck_assert_uint_eq(outcome_of(f.ctx, RSV_OP_RELEASE, RSV_ENOTFOUND), 1);
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_CALLS, RSV_OP_STATUS), 1);
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_CALLS, RSV_OP_STOCK), 2);
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_CALLS, RSV_OP_AUDIT), 0);
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_CALLS, RSV_OP_ALL), 10);
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_OK, RSV_OP_ALL), 5);
    ck_assert_uint_eq(outcome_of(f.ctx, RSV_OP_ALL, RSV_EOUTOFSTOCK), 1);
    /* the first reserve took its units straight from the free ledger row
     * in one round trip (the pool was empty); the out-of-stock one found
     * the pool short and was answered from one read without a lock */
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_ONE_TRIP, RSV_OP_RESERVE), 1);
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_LEDGER_TAKES, RSV_OP_RESERVE), 1);
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_SLOW_PATHS, RSV_OP_RESERVE), 0);
    ck_assert_uint_ge(stat_of(f.ctx, RSV_STAT_SHORT_READS, RSV_OP_RESERVE), 1);
    ck_assert_uint_ge(stat_of(f.ctx, RSV_STAT_INLINE_REFILLS, RSV_OP_RESERVE),
                      stat_of(f.ctx, RSV_STAT_SLOW_PATHS, RSV_OP_RESERVE));
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_RETRIES, RSV_OP_ALL), 0);
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_DEADLOCKS, RSV_OP_ALL), 0);
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_LOCK_WAIT_TIMEOUTS, RSV_OP_ALL),
                      0);
    /* a status read is exactly one statement; a bad token sends none */
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_STATEMENTS, RSV_OP_STATUS), 1);
    ck_assert_uint_gt(stat_of(f.ctx, RSV_STAT_STATEMENTS, RSV_OP_CLAIM), 0);
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_STATEMENTS, RSV_OP_AUDIT), 0);

    /* bad arguments */
    uint64_t v;
    ck_assert_int_eq(rsv_stats_get(NULL, RSV_STAT_CALLS, 0, &v), RSV_EINVAL);
    ck_assert_int_eq(rsv_stats_get(f.ctx, RSV_STAT_CALLS, 0, NULL), RSV_EINVAL);
    ck_assert_int_eq(rsv_stats_get(f.ctx, RSV_STAT_STMT_EVICTIONS + 1, 0, &v),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_stats_get(f.ctx, RSV_STAT_CALLS, RSV_OP_AUDIT + 1, &v),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_stats_outcome(f.ctx, 0, 1, &v), RSV_EINVAL);
    ck_assert_int_eq(rsv_stats_outcome(f.ctx, 0, RSV_ENOTPRIMARY - 1, &v),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_stats_outcome(f.ctx, 0, -9, &v), RSV_OK);
    ck_assert_uint_eq(v, 0);
    ck_assert_int_eq(rsv_stats_reset(NULL), RSV_EINVAL);
    tu_fix_close(&f);
}
END_TEST

/* The library's statement counter agrees with the server's. */
START_TEST(statements_match_the_server)
{
    tu_fix f;
    tu_fix_open(&f, RSV_OPT_NO_PROACTIVE_REFILL, 0);
    tu_fix_pooled(&f, 1, 1, 100);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("warm"), 1, 1, 1, 0));
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("warm")));
    /* statements are prepared by now: Questions counts executions only */
    uint64_t before = stat_of(f.ctx, RSV_STAT_STATEMENTS, RSV_OP_ALL);
    int64_t q0 = session_questions(f.conn);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("s1"), 1, 1, 1, 0));
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("s1")));
    int64_t q1 = session_questions(f.conn);
    uint64_t after = stat_of(f.ctx, RSV_STAT_STATEMENTS, RSV_OP_ALL);
    ck_assert_int_gt(q1 - q0 - 1, 0);
    ck_assert_uint_eq(after - before, (uint64_t)(q1 - q0 - 1));
    /* a fast-path reserve: README's "7 statements" */
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_SLOW_PATHS, RSV_OP_RESERVE), 0);
    tu_fix_close(&f);
}
END_TEST

START_TEST(histogram_percentile_reset)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    uint64_t h[RSV_STATS_BUCKETS + 8], p = 1;
    ck_assert_int_eq(rsv_stats_percentile(f.ctx, RSV_OP_RESERVE, 50, &p),
                     RSV_OK);
    ck_assert_uint_eq(p, 0); /* nothing counted yet */
    TU_OK(f.ctx, rsv_stock_set(f.ctx, f.shop, 1, 1, 50));
    char tok[32];
    for (int i = 0; i < 12; i++) {
        snprintf(tok, sizeof tok, "h%d", i);
        TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK(tok), 1, 1, 1, 0));
        TU_OK(f.ctx, rsv_release(f.ctx, f.shop, TOK(tok)));
    }
    for (uint32_t op = RSV_OP_ALL; op <= RSV_OP_AUDIT; op++) {
        for (size_t i = 0; i < sizeof h / sizeof h[0]; i++)
            h[i] = 777;
        ck_assert_int_eq(rsv_stats_histogram(f.ctx, op, h, sizeof h / sizeof h[0]),
                         RSV_OK);
        uint64_t sum = 0;
        for (size_t i = 0; i < RSV_STATS_BUCKETS; i++)
            sum += h[i];
        for (size_t i = RSV_STATS_BUCKETS; i < sizeof h / sizeof h[0]; i++)
            ck_assert_uint_eq(h[i], 0);
        ck_assert_uint_eq(sum, stat_of(f.ctx, RSV_STAT_CALLS, op));
    }
    uint64_t p0, p50, p99, p100, max, total;
    ck_assert_int_eq(rsv_stats_percentile(f.ctx, RSV_OP_RESERVE, 0, &p0),
                     RSV_OK);
    ck_assert_int_eq(rsv_stats_percentile(f.ctx, RSV_OP_RESERVE, 50, &p50), RSV_OK);
    ck_assert_int_eq(rsv_stats_percentile(f.ctx, RSV_OP_RESERVE, 99, &p99), RSV_OK);
    ck_assert_int_eq(rsv_stats_percentile(f.ctx, RSV_OP_RESERVE, 100, &p100), RSV_OK);
    max = stat_of(f.ctx, RSV_STAT_LATENCY_MAX_US, RSV_OP_RESERVE);
    total = stat_of(f.ctx, RSV_STAT_LATENCY_US, RSV_OP_RESERVE);
    fprintf(stderr, "reserve latency: p0 %llu p50 %llu p99 %llu max %llu us\n",
            (unsigned long long)p0, (unsigned long long)p50,
            (unsigned long long)p99, (unsigned long long)max);
    ck_assert_uint_gt(p50, 0); /* a reserve is a round trip: > 1 us */
    ck_assert_uint_le(p0, p50);
    ck_assert_uint_le(p50, p99);
    ck_assert_uint_le(p99, p100);
    ck_assert_uint_eq(p100, max);
    ck_assert_uint_ge(total, max);
    ck_assert_uint_le(total / 12, max);
    ck_assert_uint_ge(stat_of(f.ctx, RSV_STAT_LATENCY_MAX_US, RSV_OP_ALL), max);
    ck_assert_int_eq(rsv_stats_percentile(f.ctx, RSV_OP_RESERVE, -1, &p0),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_stats_percentile(f.ctx, RSV_OP_RESERVE, 100.5, &p0),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_stats_percentile(f.ctx, RSV_OP_RESERVE, 0.0 / 0.0,
                                          &p0),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_stats_percentile(f.ctx, RSV_OP_RESERVE, 50, NULL),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_stats_histogram(f.ctx, 99, h, 4), RSV_EINVAL);
    ck_assert_int_eq(rsv_stats_histogram(f.ctx, 0, NULL, 4), RSV_EINVAL);
    ck_assert_int_eq(rsv_stats_histogram(f.ctx, 0, NULL, 0), RSV_OK);

    TU_OK(f.ctx, rsv_stats_reset(f.ctx));
    for (uint32_t s = 0; s <= RSV_STAT_STMT_EVICTIONS; s++)
        for (uint32_t op = RSV_OP_ALL; op <= RSV_OP_AUDIT; op++)
            ck_assert_uint_eq(stat_of(f.ctx, s, op), 0);
    ck_assert_uint_eq(outcome_of(f.ctx, RSV_OP_ALL, RSV_OK), 0);
    ck_assert_int_eq(rsv_stats_histogram(f.ctx, RSV_OP_ALL, h,
                                         RSV_STATS_BUCKETS),
                     RSV_OK);
    for (size_t i = 0; i < RSV_STATS_BUCKETS; i++)
        ck_assert_uint_eq(h[i], 0);
    ck_assert_int_eq(rsv_stats_percentile(f.ctx, RSV_OP_ALL, 99, &p), RSV_OK);
    ck_assert_uint_eq(p, 0);
    /* counting goes on after a reset */
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("after"), 1, 1, 1, 0));
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_CALLS, RSV_OP_ALL), 1);
    TU_OK(f.ctx, rsv_release(f.ctx, f.shop, TOK("after")));
    tu_fix_close(&f);
}
END_TEST

/* ---- the completion callback ---- */

struct call {
    uint32_t op;
    int code;
    uint64_t shop;
    int has_token;
    char token[RSV_TOKEN_MAX];
    size_t len;
    uint64_t us;
};

struct recorder {
    struct call calls[64];
    int n;
    rsv_ctx *ctx;     /* when set, the callback calls the library on it */
    int errcode_seen; /* rsv_errcode(ctx) inside the callback */
};

static void record(void *user, uint32_t op, int code, uint64_t shop,
                   const void *token, size_t len, uint64_t us)
{
    struct recorder *r = user;
    if (r->n >= 64)
        return;
    struct call *k = &r->calls[r->n++];
    k->op = op;
    k->code = code;
    k->shop = shop;
    k->has_token = token != NULL;
    k->len = len;
    if (token && len <= sizeof k->token)
        memcpy(k->token, token, len);
    k->us = us;
    if (r->ctx) {
        r->errcode_seen = rsv_errcode(r->ctx);
        /* a nested call: fails (no such item), must not recurse, and must
         * not change what the outer call reports */
        int64_t v;
        (void)rsv_stock_get(r->ctx, shop, 999, 999, &v, NULL, NULL, NULL);
    }
}

static void expect(const struct recorder *r, int i, uint32_t op, int code,
                   uint64_t shop, const void *token, size_t len)
{
    ck_assert_msg(i < r->n, "callback %d missing (%d calls)", i, r->n);
    const struct call *k = &r->calls[i];
    ck_assert_msg(k->op == op && k->code == code && k->shop == shop,
                  "callback %d: op %u code %d shop %llu, want op %u code %d "
                  "shop %llu", i, k->op, k->code,
                  (unsigned long long)k->shop, op, code,
                  (unsigned long long)shop);
    ck_assert_uint_eq(k->len, len);
    ck_assert_int_eq(k->has_token, token != NULL);
    if (token)
        ck_assert_int_eq(memcmp(k->token, token, len), 0);
}

START_TEST(callback_sees_every_call)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    struct recorder *r = calloc(1, sizeof *r);
    ck_assert_int_eq(rsv_set_callback(NULL, record, r), RSV_EINVAL);
    TU_OK(f.ctx, rsv_set_callback(f.ctx, record, r));

    TU_OK(f.ctx, rsv_stock_set(f.ctx, f.shop, 1, 1, 4));
    TU_OK(f.ctx, rsv_stock_set(f.ctx, f.shop, 1, 2, 4));
    rsv_cart *cart;
    uint64_t locs[2] = {1, 2};
    ck_assert_int_eq(rsv_cart_new(&cart), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 1, locs, 2, 6, RSV_LINE_SPLIT), RSV_OK);
    TU_OK(f.ctx, rsv_reserve(f.ctx, f.shop, TOK("cb-1"), cart, 0));
    int rc = rsv_reserve_one(f.ctx, f.shop, TOK("cb-2"), 1, 1, 3, 0);
    TU_RC(f.ctx, rc, RSV_EOUTOFSTOCK);
    int32_t st;
    TU_OK(f.ctx, rsv_checkout_status(f.ctx, f.shop, TOK("cb-1"), &st, NULL,
                                     NULL));
    TU_OK(f.ctx, rsv_extend(f.ctx, f.shop, TOK("cb-1"), 60000));
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("cb-1")));
    rc = rsv_release(f.ctx, f.shop, TOK("cb-1"));
    TU_RC(f.ctx, rc, RSV_ECLAIMED);
    const char nul_tok[3] = {'x', '\0', 'y'};
    rc = rsv_claim(f.ctx, f.shop, nul_tok, 3);
    TU_RC(f.ctx, rc, RSV_ENOTFOUND);
    rc = rsv_release(f.ctx, f.shop, NULL, 5);
    TU_RC(f.ctx, rc, RSV_EINVAL);
    TU_OK(f.ctx, rsv_replenish(f.ctx, f.shop, 1, 1, NULL));
    TU_OK(f.ctx, rsv_sweep(f.ctx, f.shop, 0, NULL));
    TU_OK(f.ctx, rsv_stock_adjust(f.ctx, f.shop, 1, 2, 1, NULL));
    TU_OK(f.ctx, rsv_stock_get(f.ctx, f.shop, 1, 1, NULL, NULL, NULL, NULL));
    TU_OK(f.ctx, rsv_audit(f.ctx, f.shop, 0, NULL, NULL, NULL));

    int i = 0;
    expect(r, i++, RSV_OP_STOCK, RSV_OK, f.shop, NULL, 0);
    expect(r, i++, RSV_OP_STOCK, RSV_OK, f.shop, NULL, 0);
    expect(r, i++, RSV_OP_RESERVE, RSV_OK, f.shop, "cb-1", 4);
    expect(r, i++, RSV_OP_RESERVE, RSV_EOUTOFSTOCK, f.shop, "cb-2", 4);
    expect(r, i++, RSV_OP_STATUS, RSV_OK, f.shop, "cb-1", 4);
    expect(r, i++, RSV_OP_EXTEND, RSV_OK, f.shop, "cb-1", 4);
    expect(r, i++, RSV_OP_CLAIM, RSV_OK, f.shop, "cb-1", 4);
    expect(r, i++, RSV_OP_RELEASE, RSV_ECLAIMED, f.shop, "cb-1", 4);
    expect(r, i++, RSV_OP_CLAIM, RSV_ENOTFOUND, f.shop, nul_tok, 3);
    expect(r, i++, RSV_OP_RELEASE, RSV_EINVAL, f.shop, NULL, 0);
    expect(r, i++, RSV_OP_REPLENISH, RSV_OK, f.shop, NULL, 0);
    expect(r, i++, RSV_OP_SWEEP, RSV_OK, f.shop, NULL, 0);
    expect(r, i++, RSV_OP_STOCK, RSV_OK, f.shop, NULL, 0);
    expect(r, i++, RSV_OP_STOCK, RSV_OK, f.shop, NULL, 0);
    expect(r, i++, RSV_OP_AUDIT, RSV_OK, f.shop, NULL, 0);
    ck_assert_int_eq(r->n, i);
    /* latencies are the ones the histograms count */
    uint64_t sum = 0;
    for (int k = 0; k < r->n; k++)
        sum += r->calls[k].us;
    ck_assert_uint_eq(sum, stat_of(f.ctx, RSV_STAT_LATENCY_US, RSV_OP_ALL));

    /* calls on the same context from inside the callback: no recursion,
     * and the outer call's code and message survive */
    r->n = 0;
    r->ctx = f.ctx;
    TU_OK(f.ctx, rsv_stock_set(f.ctx, f.shop, 1, 1, 4));
    ck_assert_int_eq(r->n, 1);
    ck_assert_int_eq(r->errcode_seen, RSV_OK);
    ck_assert_int_eq(rsv_errcode(f.ctx), RSV_OK);
    ck_assert_str_eq(rsv_errmsg(f.ctx), "");
    rc = rsv_claim(f.ctx, f.shop, TOK("none"));
    TU_RC(f.ctx, rc, RSV_ENOTFOUND);
    ck_assert_int_eq(r->n, 2);
    ck_assert_int_eq(r->errcode_seen, RSV_ENOTFOUND);
    ck_assert_int_eq(rsv_errcode(f.ctx), RSV_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(rsv_errmsg(f.ctx), "checkout"));
    /* the nested calls were counted, as calls of their own */
    ck_assert_uint_ge(outcome_of(f.ctx, RSV_OP_STOCK, RSV_ENOITEM), 2);

    TU_OK(f.ctx, rsv_set_callback(f.ctx, NULL, NULL));
    r->n = 0;
    TU_OK(f.ctx, rsv_stock_set(f.ctx, f.shop, 1, 1, 4));
    ck_assert_int_eq(r->n, 0);
    rsv_cart_free(cart);
    free(r);
    tu_fix_close(&f);
}
END_TEST

/* ---- the kill switch ---- */

/* Everything the database holds for one shop, as one string. */
static void snapshot(MYSQL *c, uint64_t shop, char *out, size_t n)
{
    char q[1024];
    snprintf(q, sizeof q,
             "SELECT CONCAT_WS('|', "
             "(SELECT GROUP_CONCAT(CONCAT_WS(',', item_id, "
             "location_id, on_hand, issued, next_unit_id) ORDER BY "
             "item_id, location_id) FROM rsv_ledger "
             "WHERE shop_id = %1$llu), "
             "(SELECT COALESCE(SUM(units), 0) FROM rsv_pool WHERE shop_id = %1$llu), "
             "(SELECT GROUP_CONCAT(CONCAT_WS(',', checkout_token, status, "
             "generation, expires_at) ORDER BY checkout_token) FROM "
             "rsv_checkouts WHERE shop_id = %1$llu), "
             "(SELECT GROUP_CONCAT(CONCAT_WS(',', checkout_token, quantity, "
             "expires_at) ORDER BY checkout_token) FROM rsv_holds "
             "WHERE shop_id = %1$llu), "
             "(SELECT COUNT(*) FROM rsv_journal WHERE shop_id = "
             "%1$llu))", (unsigned long long)shop);
    ck_assert_msg(mysql_query(c, q) == 0, "%s", mysql_error(c));
    MYSQL_RES *res = mysql_store_result(c);
    MYSQL_ROW row = mysql_fetch_row(res);
    snprintf(out, n, "%s", row && row[0] ? row[0] : "");
    mysql_free_result(res);
}

START_TEST(kill_switch)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    struct recorder *r = calloc(1, sizeof *r);
    tu_fix_stock(&f, 1, 1, 5);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("k"), 1, 1, 2, 0));
    TU_OK(f.ctx, rsv_set_callback(f.ctx, record, r));
    char before[2048], after[2048];
    snapshot(f.conn, f.shop, before, sizeof before);

    ck_assert_int_eq(rsv_set_enabled(NULL, 0), RSV_EINVAL);
    TU_OK(f.ctx, rsv_set_enabled(f.ctx, 0));
    uint64_t stmts = stat_of(f.ctx, RSV_STAT_STATEMENTS, RSV_OP_ALL);
    int64_t q0 = session_questions(f.conn);
    rsv_cart *cart;
    uint64_t loc = 1;
    ck_assert_int_eq(rsv_cart_new(&cart), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 1, &loc, 1, 1, 0), RSV_OK);
    int64_t out = 123;
    /* one at a time: the callback order is checked below */
    int rcs[12], k = 0;
    rcs[k++] = rsv_reserve(f.ctx, f.shop, TOK("k2"), cart, 0);
    rcs[k++] = rsv_reserve(f.ctx, f.shop, TOK("k2"), NULL, 0);
    rcs[k++] = rsv_reserve_one(f.ctx, f.shop, TOK("k2"), 1, 1, 1, 0);
    rcs[k++] = rsv_reserve_one(f.ctx, f.shop, TOK("k2"), 1, 1, 0, 0);
    rcs[k++] = rsv_claim(f.ctx, f.shop, TOK("k"));
    rcs[k++] = rsv_release(f.ctx, f.shop, TOK("k"));
    rcs[k++] = rsv_extend(f.ctx, f.shop, TOK("k"), 1000);
    rcs[k++] = rsv_replenish(f.ctx, f.shop, 1, 1, &out);
    ck_assert_int_eq(out, 0);
    out = 123;
    rcs[k++] = rsv_sweep(f.ctx, f.shop, 0, &out);
    ck_assert_int_eq(out, 0);
    out = 123;
    rcs[k++] = rsv_pool_drain(f.ctx, f.shop, 1, 1, &out);
    ck_assert_int_eq(out, 0);
    out = 123;
    rcs[k++] = rsv_stock_set(f.ctx, f.shop, 1, 1, 1);
    rcs[k++] = rsv_stock_adjust(f.ctx, f.shop, 1, 1, -1, &out);
    size_t nrc = (size_t)k;
    for (size_t i = 0; i < nrc; i++)
        ck_assert_msg(rcs[i] == RSV_EDISABLED, "call %zu: %d", i, rcs[i]);
    ck_assert_int_eq(out, 0);
    ck_assert_int_eq(rsv_errcode(f.ctx), RSV_EDISABLED);
    ck_assert_ptr_nonnull(strstr(rsv_errmsg(f.ctx), "rsv_set_enabled"));
    ck_assert_str_eq(rsv_code_name(RSV_EDISABLED), "RSV_EDISABLED");
    ck_assert_str_ne(rsv_strerror(RSV_EDISABLED), "unknown error code");
    /* nothing reached the server: the library's count and the server's */
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_STATEMENTS, RSV_OP_ALL), stmts);
    ck_assert_int_eq(session_questions(f.conn) - q0, 1);
    ck_assert_uint_eq(outcome_of(f.ctx, RSV_OP_ALL, RSV_EDISABLED), nrc);
    ck_assert_int_eq(r->n, (int)nrc);
    expect(r, 4, RSV_OP_CLAIM, RSV_EDISABLED, f.shop, "k", 1);

    /* reads keep working */
    int32_t st;
    int64_t units = 0, held = 0;
    TU_OK(f.ctx, rsv_checkout_status(f.ctx, f.shop, TOK("k"), &st, &units,
                                     NULL));
    ck_assert_int_eq(st, RSV_STATUS_HELD);
    ck_assert_int_eq(units, 2);
    TU_OK(f.ctx, rsv_stock_get(f.ctx, f.shop, 1, 1, NULL, &held, NULL, NULL));
    ck_assert_int_eq(held, 2);
    int64_t violations = -1;
    TU_OK(f.ctx, rsv_audit(f.ctx, f.shop, 0, NULL, NULL, &violations));
    ck_assert_int_eq(violations, 0);
    snapshot(f.conn, f.shop, after, sizeof after);
    ck_assert_str_eq(before, after);

    /* and back on */
    TU_OK(f.ctx, rsv_set_enabled(f.ctx, 7));
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("k")));
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), 3);
    /* the switch is per context */
    MYSQL *c2;
    rsv_ctx *other = tu_open(&c2);
    TU_OK(f.ctx, rsv_set_enabled(f.ctx, 0));
    TU_OK(other, rsv_stock_adjust(other, f.shop, 1, 1, 1, NULL));
    TU_OK(f.ctx, rsv_set_enabled(f.ctx, 1));
    rsv_close(other);
    mysql_close(c2);
    rsv_cart_free(cart);
    free(r);
    tu_fix_close(&f);
}
END_TEST

/* ---- lock conflicts ---- */

START_TEST(lock_wait_timeouts_and_retries)
{
    tu_fix f;
    tu_fix_open_impatient(&f, 1);
    tu_fix_stock(&f, 1, 1, 5);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("locked"), 1, 1, 1, 0));
    TU_OK(f.ctx, rsv_stats_reset(f.ctx));
    MYSQL *other = tu_fix_admin(&f);
    char q[256];
    tu_exec(other, "START TRANSACTION");
    snprintf(q, sizeof q, "SELECT * FROM rsv_checkouts WHERE "
             "shop_id = %llu FOR UPDATE", (unsigned long long)f.shop);
    tu_exec(other, q);
    int rc = rsv_claim(f.ctx, f.shop, TOK("locked"));
    TU_RC(f.ctx, rc, RSV_EBUSY);
    /* two attempts, both timed out */
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_LOCK_WAIT_TIMEOUTS, RSV_OP_CLAIM), 2);
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_RETRIES, RSV_OP_CLAIM), 1);
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_DEADLOCKS, RSV_OP_ALL), 0);
    ck_assert_uint_eq(outcome_of(f.ctx, RSV_OP_CLAIM, RSV_EBUSY), 1);
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_EXPECTED, RSV_OP_CLAIM), 1);
    ck_assert_uint_ge(stat_of(f.ctx, RSV_STAT_LATENCY_MAX_US, RSV_OP_CLAIM),
                      1900000);
    /* joined to the caller's transaction: no retry, the timeout counts */
    tu_exec(f.conn, "START TRANSACTION");
    rc = rsv_claim(f.ctx, f.shop, TOK("locked"));
    TU_RC(f.ctx, rc, RSV_EBUSY);
    tu_exec(f.conn, "ROLLBACK");
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_LOCK_WAIT_TIMEOUTS, RSV_OP_CLAIM), 3);
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_RETRIES, RSV_OP_CLAIM), 1);
    tu_exec(other, "ROLLBACK");
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("locked")));
    ck_assert_uint_eq(stat_of(f.ctx, RSV_STAT_RETRIES, RSV_OP_CLAIM), 1);
    tu_fix_close(&f);
}
END_TEST

struct claimer {
    rsv_ctx *ctx;
    uint64_t shop;
    int rc;
};

static void *claim_thread(void *p)
{
    struct claimer *cl = p;
    cl->rc = rsv_claim(cl->ctx, cl->shop, TOK("dl"));
    return NULL;
}

/* A second connection holds the checkout's hold row, the claim locks the
 * checkout row and waits for the hold row, then the second connection asks
 * for the checkout row: a deadlock.  The second connection has changed
 * many rows, so InnoDB rolls the claim back (the lighter transaction), and
 * the claim's retry succeeds once the second connection is gone. */
START_TEST(deadlock_is_counted_and_retried)
{
    MYSQL *c = tu_connect();
    rsv_options o;
    rsv_options_init(&o, RSV_OPTIONS_VERSION);
    o.lock_wait_timeout_s = 5; /* a missed deadlock fails fast */
    rsv_ctx *ctx = NULL;
    TU_OK(ctx, rsv_open(&ctx, c, &o));
    uint64_t shop = tu_shop(), other_shop = tu_shop();
    TU_OK(ctx, rsv_stock_set(ctx, shop, 1, 1, 5));
    TU_OK(ctx, rsv_reserve_one(ctx, shop, TOK("dl"), 1, 1, 1, 0));
    TU_OK(ctx, rsv_stats_reset(ctx));
    MYSQL *other = tu_connect_in_txn();
    char q[512];
    tu_exec(other, "SET SESSION innodb_lock_wait_timeout = 5");
    snprintf(q, sizeof q, "INSERT INTO rsv_ledger (shop_id, "
             "item_id, location_id, on_hand) SELECT %llu, "
             "seq, 1, 1 FROM seq_1_to_500", (unsigned long long)other_shop);
    tu_exec(other, q);
    snprintf(q, sizeof q, "SELECT * FROM rsv_holds WHERE shop_id = "
             "%llu FOR UPDATE", (unsigned long long)shop);
    tu_exec(other, q);
    struct claimer cl = {ctx, shop, 99};
    pthread_t t;
    pthread_create(&t, NULL, claim_thread, &cl);
    /* wait until the claim waits for the hold row: its statement stays
     * in Execute (innodb_trx does not list it before its first lock) */
    int waiting = 0;
    MYSQL *watch = tu_connect();
    snprintf(q, sizeof q, "SELECT COUNT(*) FROM information_schema.processlist "
             "WHERE id = %lu AND command = 'Execute'", mysql_thread_id(c));
    for (int i = 0; i < 200 && waiting < 3; i++) {
        waiting = tu_i64(watch, q) > 0 ? waiting + 1 : 0;
        usleep(20 * 1000);
    }
    if (waiting < 3) {
        tu_exec(other, "ROLLBACK");
        pthread_join(t, NULL);
    }
    ck_assert_msg(waiting, "the claim never waited for the hold row (%d %s)",
                  cl.rc, rsv_errmsg(ctx));
    snprintf(q, sizeof q, "SELECT * FROM rsv_checkouts WHERE shop_id = "
             "%llu FOR UPDATE", (unsigned long long)shop);
    int qrc = mysql_query(other, q);
    unsigned int err = mysql_errno(other);
    if (qrc == 0) {
        MYSQL_RES *res = mysql_store_result(other);
        if (res)
            mysql_free_result(res);
    }
    tu_exec(other, "ROLLBACK");
    pthread_join(t, NULL);
    ck_assert_msg(qrc == 0, "InnoDB chose the other transaction as the "
                  "deadlock victim (error %u)", err);
    TU_RC(ctx, cl.rc, RSV_OK);
    ck_assert_uint_eq(stat_of(ctx, RSV_STAT_DEADLOCKS, RSV_OP_CLAIM), 1);
    ck_assert_uint_eq(stat_of(ctx, RSV_STAT_RETRIES, RSV_OP_CLAIM), 1);
    ck_assert_uint_eq(stat_of(ctx, RSV_STAT_LOCK_WAIT_TIMEOUTS, RSV_OP_ALL), 0);
    ck_assert_uint_eq(outcome_of(ctx, RSV_OP_CLAIM, RSV_OK), 1);
    mysql_close(watch);
    mysql_close(other);
    rsv_close(ctx);
    mysql_close(c);
}
END_TEST

static int64_t global_status(MYSQL *c, const char *name)
{
    char q[160];
    snprintf(q, sizeof q, "SELECT VARIABLE_VALUE FROM information_schema."
                          "GLOBAL_STATUS WHERE VARIABLE_NAME = '%s'", name);
    return tu_i64(c, q);
}

/* One checkout's life and the maintenance calls: about every statement
 * kind a context prepares. */
static void mixed_workload(rsv_ctx *ctx, uint64_t shop, const char *tok)
{
    int64_t x = 0;
    int32_t st = 0;
    TU_OK(ctx, rsv_stock_set(ctx, shop, 1, 1, 100));
    TU_OK(ctx, rsv_replenish(ctx, shop, 1, 1, &x));
    TU_OK(ctx, rsv_reserve_one(ctx, shop, tok, strlen(tok), 1, 1, 2, 0));
    TU_OK(ctx, rsv_checkout_status(ctx, shop, tok, strlen(tok), &st, NULL,
                                   NULL));
    TU_OK(ctx, rsv_extend(ctx, shop, tok, strlen(tok), 0));
    TU_OK(ctx, rsv_claim(ctx, shop, tok, strlen(tok)));
    TU_OK(ctx, rsv_stock_get(ctx, shop, 1, 1, &x, NULL, NULL, NULL));
    TU_OK(ctx, rsv_stock_adjust(ctx, shop, 1, 1, 1, &x));
    TU_OK(ctx, rsv_sweep(ctx, shop, 0, &x));
    TU_OK(ctx, rsv_pool_drain(ctx, shop, 1, 1, &x));
}

/* A context keeps at most stmt_cache_max statements on the server; one
 * that finds the server's max_prepared_stmt_count reached closes its own
 * least recently used statements and goes on; one that has none to give
 * back answers RSV_EDB saying so, and works again once there is room. */
START_TEST(statement_cache_cap_and_a_full_server)
{
    MYSQL *adm = tu_connect();
    uint64_t shop = tu_shop();
    int64_t base = global_status(adm, "Prepared_stmt_count");
    rsv_options o;
    rsv_options_init(&o, RSV_OPTIONS_VERSION);
    o.stmt_cache_max = 4;
    MYSQL *c = tu_connect();
    rsv_ctx *ctx = NULL;
    TU_OK(ctx, rsv_open(&ctx, c, &o));
    mixed_workload(ctx, shop, "cap");
    int64_t held = global_status(adm, "Prepared_stmt_count") - base;
    ck_assert_msg(held >= 1 && held <= 4, "%lld statements held",
                  (long long)held);

    /* room for two more statements on the whole server */
    char q[160];
    snprintf(q, sizeof q, "SET GLOBAL max_prepared_stmt_count = %lld",
             (long long)(global_status(adm, "Prepared_stmt_count") + 2));
    tu_exec(adm, q);
    MYSQL *c2 = tu_connect();
    rsv_ctx *full = NULL;
    TU_OK(full, rsv_open(&full, c2, NULL));
    mixed_workload(full, shop, "full");
    ck_assert(stat_of(full, RSV_STAT_STMT_EVICTIONS, RSV_OP_ALL) > 0);

    /* no room at all, and nothing of its own to give back */
    snprintf(q, sizeof q, "SET GLOBAL max_prepared_stmt_count = %lld",
             (long long)global_status(adm, "Prepared_stmt_count"));
    tu_exec(adm, q);
    MYSQL *c3 = tu_connect();
    rsv_ctx *none = NULL;
    TU_OK(none, rsv_open(&none, c3, NULL));
    int64_t x = 0;
    int rc = rsv_stock_get(none, shop, 1, 1, &x, NULL, NULL, NULL);
    TU_RC(none, rc, RSV_EDB);
    ck_assert_msg(strstr(rsv_errmsg(none), "max_prepared_stmt_count"), "%s",
                  rsv_errmsg(none));
    ck_assert_int_eq(tu_i64(c3, "SELECT @@in_transaction"), 0);
    tu_exec(adm, "SET GLOBAL max_prepared_stmt_count = 200000");
    mixed_workload(none, shop, "none");
    rsv_close(none);
    rsv_close(full);
    rsv_close(ctx);
    mysql_close(c3);
    mysql_close(c2);
    mysql_close(c);
    mysql_close(adm);
}
END_TEST


static uint64_t key_stat_of(rsv_ctx *ctx, uint64_t shop, uint64_t item,
                            uint32_t stat)
{
    uint64_t v = 0;
    ck_assert_int_eq(rsv_stats_key(ctx, shop, item, 1, stat, &v), RSV_OK);
    return v;
}

/* What a crowd does to a key, counted for that key only.  Another
 * connection holds every row of item 1's pool: a reserve's read from the
 * bottom comes up short and it goes on to wait for the ledger row.  Then
 * it holds every row but the top one: a read from the context's cursor
 * passes the held rows (the cursor is placed at random after a read from
 * the bottom, so a few keys are tried until one starts below the top).
 * Item 2, bought alone, shows nothing. */
START_TEST(key_counters_show_a_crowd)
{
    tu_fix f;
    tu_fix_open(&f, 0, 50); /* (rows of one unit) */
    tu_fix_pooled(&f, 1, 1, 5);
    tu_fix_pooled(&f, 2, 1, 5);
    MYSQL *other = tu_fix_admin(&f);
    char q[256];
    tu_exec(other, "START TRANSACTION");
    snprintf(q, sizeof q, "SELECT COUNT(*) FROM (SELECT id FROM rsv_pool "
             "WHERE shop_id = %llu AND item_id = 1 FOR UPDATE) AS x",
             (unsigned long long)f.shop);
    ck_assert_int_eq(tu_i64(other, q), 5);
    int rc = rsv_reserve_one(f.ctx, f.shop, TOK("k1"), 1, 1, 1, 0);
    ck_assert_msg(rc == RSV_OK || rc == RSV_EBUSY, "%s", rsv_code_name(rc));
    ck_assert_uint_eq(key_stat_of(f.ctx, f.shop, 1, RSV_KEY_SHORT), 1);
    ck_assert_uint_ge(key_stat_of(f.ctx, f.shop, 1, RSV_KEY_REFILL_WAITS), 1);
    ck_assert_uint_eq(key_stat_of(f.ctx, f.shop, 1, RSV_KEY_PASSED_ROWS), 0);
    tu_exec(other, "ROLLBACK");

    /* (READ COMMITTED: the range read must not lock the top row that
     * ends it, as REPEATABLE READ would) */
    tu_exec(other, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED");
    uint64_t passed = 0, item = 10;
    for (; item < 20 && passed == 0; item++) {
        tu_fix_pooled(&f, item, 1, 20);
        char tok[32];
        snprintf(tok, sizeof tok, "p%llu", (unsigned long long)item);
        TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, tok, strlen(tok), item,
                                     1, 1, 0));
        tu_exec(other, "START TRANSACTION");
        snprintf(q, sizeof q, "SELECT COUNT(*) FROM (SELECT id FROM "
                 "rsv_pool WHERE shop_id = %llu AND item_id = %llu AND id < "
                 "(SELECT MAX(id) FROM rsv_pool WHERE shop_id = %llu AND "
                 "item_id = %llu) FOR UPDATE) AS x", (unsigned long long)f.shop,
                 (unsigned long long)item, (unsigned long long)f.shop,
                 (unsigned long long)item);
        ck_assert_int_eq(tu_i64(other, q), 18);
        snprintf(tok, sizeof tok, "q%llu", (unsigned long long)item);
        TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, tok, strlen(tok), item,
                                     1, 1, 0));
        tu_exec(other, "ROLLBACK");
        passed = key_stat_of(f.ctx, f.shop, item, RSV_KEY_PASSED_ROWS);
        /* (at most from the lowest id to the top one) */
        ck_assert_uint_le(passed, 19);
        ck_assert_uint_eq(key_stat_of(f.ctx, f.shop, item, RSV_KEY_SHORT), 0);
    }
    ck_assert_msg(passed > 0, "no read passed a held pool row");
    item--;

    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("k2"), 2, 1, 1, 0));
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("k3"), 2, 1, 1, 0));
    for (uint32_t st = 0; st < RSV_KEY_STAT_COUNT; st++)
        ck_assert_uint_eq(key_stat_of(f.ctx, f.shop, 2, st), 0);

    /* the keys kept, and their Prometheus series */
    uint64_t ks, ki, kl;
    int seen1 = 0, seen_item = 0;
    uint32_t n = 0;
    while (rsv_stats_key_at(f.ctx, n, &ks, &ki, &kl) == RSV_OK) {
        ck_assert_uint_eq(ks, f.shop);
        ck_assert_uint_ne(ki, 2);
        seen1 += ki == 1;
        seen_item += ki == item;
        n++;
    }
    ck_assert_int_eq(seen1, 1);
    ck_assert_int_eq(seen_item, 1);
    ck_assert_int_eq(rsv_stats_key_at(f.ctx, n, &ks, &ki, &kl), RSV_ERANGE);
    rsv_stats_snapshot *snap = NULL;
    TU_OK(f.ctx, rsv_stats_snapshot_new(&snap));
    TU_OK(f.ctx, rsv_stats_snapshot_add(snap, f.ctx));
    TU_OK(f.ctx, rsv_stats_snapshot_add(snap, f.ctx)); /* (adds up) */
    static char text[65536];
    TU_OK(f.ctx, rsv_stats_prometheus(snap, "instance=\"a\"", text,
                                      sizeof text, NULL));
    snprintf(q, sizeof q, "\nlibreserve_key_short_total{instance=\"a\","
             "shop_id=\"%llu\",item_id=\"1\",location_id=\"1\"} 2\n",
             (unsigned long long)f.shop);
    ck_assert_msg(strstr(text, q), "no %s in\n%s", q, text);
    snprintf(q, sizeof q, "\nlibreserve_key_passed_rows_total{instance=\"a\","
             "shop_id=\"%llu\",item_id=\"%llu\",location_id=\"1\"} %llu\n",
             (unsigned long long)f.shop, (unsigned long long)item,
             (unsigned long long)(2 * passed));
    ck_assert_msg(strstr(text, q), "no %s in\n%s", q, text);
    /* the key's labels are the library's own */
    ck_assert_int_eq(rsv_stats_prometheus(snap, "shop_id=\"1\"", text,
                                          sizeof text, NULL), RSV_EINVAL);
    rsv_stats_snapshot_free(snap);

    uint64_t v;
    ck_assert_int_eq(rsv_stats_key(NULL, 1, 1, 1, RSV_KEY_SHORT, &v),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_stats_key(f.ctx, 1, 1, 1, RSV_KEY_STAT_COUNT, &v),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_stats_key(f.ctx, 1, 1, 1, RSV_KEY_SHORT, NULL),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_stats_key_at(f.ctx, 0, NULL, &ki, &kl), RSV_EINVAL);
    TU_OK(f.ctx, rsv_stats_reset(f.ctx));
    ck_assert_int_eq(rsv_stats_key_at(f.ctx, 0, &ks, &ki, &kl), RSV_ERANGE);
    tu_fix_close(&f);
}
END_TEST

int main(void)
{
    tu_db_create("stats");
    Suite *s = suite_create("stats");
    tu_add(s, "counters_by_kind_and_outcome", counters_by_kind_and_outcome);
    tu_add(s, "statements_match_the_server", statements_match_the_server);
    tu_add(s, "histogram_percentile_reset", histogram_percentile_reset);
    tu_add(s, "callback_sees_every_call", callback_sees_every_call);
    tu_add(s, "kill_switch", kill_switch);
    tu_add(s, "lock_wait_timeouts_and_retries", lock_wait_timeouts_and_retries);
    tu_add(s, "deadlock_is_counted_and_retried", deadlock_is_counted_and_retried);
    tu_add(s, "key_counters_show_a_crowd", key_counters_show_a_crowd);
    tu_add(s, "statement_cache_cap_and_a_full_server",
           statement_cache_cap_and_a_full_server);
    int rc = tu_run(s);
    /* (the test lowers the server's limit; a failed one leaves it low;
     * no ck_assert out here, outside a test) */
    MYSQL *adm = mysql_init(NULL);
    if (mysql_real_connect(adm, NULL, getenv("RSV_TEST_USER") ?
                                          getenv("RSV_TEST_USER") : "root",
                           getenv("RSV_TEST_PASSWORD"), NULL, 0,
                           getenv("RSV_TEST_SOCKET"), 0))
        (void)mysql_query(adm, "SET GLOBAL max_prepared_stmt_count = "
                               "200000");
    mysql_close(adm);
    tu_db_drop();
    return rc;
}
