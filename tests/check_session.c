/*
 * check_session.c - every public function that takes a context, on
 * sessions in whatever state an application may leave them: autocommit on
 * and off, each of the four isolation levels, completion_type CHAIN and
 * RELEASE, a READ ONLY session, unusual sql_modes and lock waits.  After
 * each call the session is as it was (no transaction left open, no
 * variable changed, no user variable added or changed) and the effect is committed, seen from a second
 * connection; inside a caller's transaction only the functions the header
 * names join it.  Also the time budget of one call.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <reserve/batch.h>
#include <reserve/stats.h>

#include "testutil.h"
#include "../lib/test_flags.h"

#define TOK(s) (s), strlen(s)

static const char *const ISOLATION[] = {
    "READ UNCOMMITTED", "READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE",
};

/* What else the application left in its session, one per run. */
static const char *const EXTRA[] = {
    NULL,
    "SET SESSION completion_type = 'CHAIN'",
    "SET SESSION completion_type = 'RELEASE'",
    "SET SESSION TRANSACTION READ ONLY",
    "SET SESSION sql_mode = 'ANSI,TRADITIONAL,NO_BACKSLASH_ESCAPES'",
    "SET SESSION sql_mode = 'ORACLE'",
    "SET SESSION innodb_lock_wait_timeout = 1",
};
enum { N_EXTRA = sizeof EXTRA / sizeof EXTRA[0] };
enum { N_RUNS = 2 * 4 * N_EXTRA };

/* The session's user variables, names and values, as one string: the
 * library must neither add one nor change the application's. */
#define USER_VARS                                                           \
    "(SELECT COALESCE(GROUP_CONCAT(CONCAT(VARIABLE_NAME, '=', "             \
    "COALESCE(VARIABLE_VALUE, 'NULL')) ORDER BY VARIABLE_NAME), '') "       \
    "FROM information_schema.USER_VARIABLES)"

static void one_string(MYSQL *c, const char *q, char *out, size_t n)
{
    ck_assert_msg(mysql_query(c, q) == 0, "%s", mysql_error(c));
    MYSQL_RES *r = mysql_store_result(c);
    ck_assert(r != NULL);
    MYSQL_ROW row = mysql_fetch_row(r);
    snprintf(out, n, "%s", row && row[0] ? row[0] : "?");
    mysql_free_result(r);
}

/* The session variables the library must leave alone, and its user
 * variables, as one string. */
static void session_vars(MYSQL *c, char *out, size_t n)
{
    one_string(c,
               "SELECT CONCAT_WS('|', @@autocommit, @@tx_isolation, "
               "@@sql_mode, @@innodb_lock_wait_timeout, @@tx_read_only, "
               "@@completion_type, " USER_VARS ")",
               out, n);
}

static void user_vars(MYSQL *c, char *out, size_t n)
{
    one_string(c, "SELECT " USER_VARS, out, n);
}

static int in_transaction(MYSQL *c)
{
    return (int)tu_i64(c, "SELECT @@in_transaction");
}

/* A fact about the committed state, read from the other connection. */
static int64_t seen(MYSQL *w, const char *fmt, uint64_t shop)
{
    char q[512];
    snprintf(q, sizeof q, fmt, (unsigned long long)shop);
    return tu_i64(w, q);
}

#define STATUS_OF(tok)                                                      \
    "SELECT COALESCE(MAX(status), 0) FROM rsv_checkouts WHERE "             \
    "shop_id = %llu AND checkout_token = '" tok "'"
#define ON_HAND                                                             \
    "SELECT on_hand FROM rsv_ledger WHERE shop_id = %llu AND "              \
    "item_id = 1 AND location_id = 1"
#define POOLED                                                              \
    "SELECT COALESCE(SUM(units), 0) FROM rsv_pool WHERE shop_id = %llu "    \
    "AND item_id = 1"

struct run {
    MYSQL *c, *w;
    rsv_ctx *ctx;
    char vars[512];
    const char *what;
};

/* After each call: as the session was, nothing open. */
static void after(struct run *r, const char *call)
{
    char now[512];
    ck_assert_msg(in_transaction(r->c) == 0,
                  "%s (%s): left a transaction open", call, r->what);
    session_vars(r->c, now, sizeof now);
    ck_assert_msg(strcmp(now, r->vars) == 0,
                  "%s (%s): session variables changed: %s -> %s", call,
                  r->what, r->vars, now);
}

#define CALL_OK(r, expr)                                                    \
    do {                                                                    \
        int rc_ = (expr);                                                   \
        ck_assert_msg(rc_ == RSV_OK, "%s (%s): %s: %s", #expr, (r)->what,   \
                      rsv_code_name(rc_), rsv_errmsg((r)->ctx));            \
        after((r), #expr);                                                  \
    } while (0)

static int64_t on_hand_get(struct run *r, uint64_t shop)
{
    int64_t on_hand = -1;
    CALL_OK(r, rsv_stock_get(r->ctx, shop, 1, 1, &on_hand, NULL, NULL, NULL));
    return on_hand;
}

/* Every function that takes a context, one after the other, on one
 * session state; each effect is checked from another connection, and
 * once more after the application's connection is closed without a
 * COMMIT (a claim that only joined a transaction would be lost there). */
START_TEST(every_call_on_every_session)
{
    int ac = _i % 2, iso = (_i / 2) % 4, extra = _i / 8;
    char what[200];
    snprintf(what, sizeof what, "autocommit=%d, %s%s%s", ac, ISOLATION[iso],
             EXTRA[extra] ? ", " : "", EXTRA[extra] ? EXTRA[extra] : "");
    uint64_t shop = tu_shop();
    struct run r = {tu_connect(), tu_connect(), NULL, "", what};
    /* half the runs set the session up before rsv_open, half after */
    int before = (_i / 2) % 2;
    char q[200];
    snprintf(q, sizeof q, "SET SESSION TRANSACTION ISOLATION LEVEL %s",
             ISOLATION[iso]);
    if (!before)
        TU_OK(r.ctx, rsv_open(&r.ctx, r.c, NULL));
    tu_exec(r.c, ac ? "SET autocommit = 1" : "SET autocommit = 0");
    tu_exec(r.c, q);
    if (EXTRA[extra])
        tu_exec(r.c, EXTRA[extra]);
    tu_exec(r.c, "SET @app_own = 'the application''s'");
    if (before)
        TU_OK(r.ctx, rsv_open(&r.ctx, r.c, NULL));
    session_vars(r.c, r.vars, sizeof r.vars);
    after(&r, "rsv_open");

    CALL_OK(&r, rsv_stock_set(r.ctx, shop, 1, 1, 10));
    ck_assert_int_eq(seen(r.w, ON_HAND, shop), 10);
    CALL_OK(&r, rsv_stock_set(r.ctx, shop, 2, 1, 10));
    int64_t now = 0;
    CALL_OK(&r, rsv_stock_adjust(r.ctx, shop, 1, 1, 5, &now));
    ck_assert_int_eq(now, 15);
    ck_assert_int_eq(seen(r.w, ON_HAND, shop), 15);
    ck_assert_int_eq(on_hand_get(&r, shop), 15);
    int64_t added = 0;
    CALL_OK(&r, rsv_replenish(r.ctx, shop, 1, 1, &added));
    ck_assert_int_eq(seen(r.w, POOLED, shop), added);

    CALL_OK(&r, rsv_reserve_one(r.ctx, shop, TOK("a"), 1, 1, 2, 0));
    ck_assert_int_eq(seen(r.w, STATUS_OF("a"), shop), RSV_STATUS_HELD);
    rsv_cart *cart = NULL;
    ck_assert_int_eq(rsv_cart_new(&cart), RSV_OK);
    uint64_t loc = 1;
    ck_assert_int_eq(rsv_cart_add(cart, 1, &loc, 1, 1, 0), RSV_OK);
    ck_assert_int_eq(rsv_cart_add(cart, 2, &loc, 1, 1, 0), RSV_OK);
    CALL_OK(&r, rsv_reserve(r.ctx, shop, TOK("b"), cart, 0));
    ck_assert_int_eq(seen(r.w, STATUS_OF("b"), shop), RSV_STATUS_HELD);
    /* a re-reserve (the statement path) */
    CALL_OK(&r, rsv_reserve(r.ctx, shop, TOK("b"), cart, 0));
    rsv_cart_free(cart);

    int32_t st = 0;
    int64_t units = 0;
    CALL_OK(&r, rsv_checkout_status(r.ctx, shop, TOK("a"), &st, &units,
                                    NULL));
    ck_assert_int_eq(st, RSV_STATUS_HELD);
    ck_assert_int_eq(units, 2);
    CALL_OK(&r, rsv_extend(r.ctx, shop, TOK("a"), 3600000));
    ck_assert(seen(r.w, "SELECT TIMESTAMPDIFF(SECOND, NOW(6), expires_at) "
                        "FROM rsv_checkouts WHERE shop_id = %llu "
                        "AND checkout_token = 'a'", shop) > 3000);
    /* the read that used to open a transaction, then the claim */
    CALL_OK(&r, rsv_checkout_status(r.ctx, shop, TOK("a"), &st, NULL, NULL));
    CALL_OK(&r, rsv_claim(r.ctx, shop, TOK("a")));
    ck_assert_int_eq(seen(r.w, STATUS_OF("a"), shop), RSV_STATUS_CLAIMED);
    ck_assert_int_eq(on_hand_get(&r, shop), 13);
    CALL_OK(&r, rsv_release(r.ctx, shop, TOK("b")));
    ck_assert_int_eq(seen(r.w, STATUS_OF("b"), shop), RSV_STATUS_RELEASED);

    /* the batch procedures: two entries each */
    {
        uint64_t shops[2] = {shop, shop}, items[2] = {1, 2}, locs[2] = {1, 1};
        const void *toks[2] = {"c", "d"};
        size_t lens[2] = {1, 1};
        int64_t qty[2] = {1, 1};
        int res[2] = {-1, -1};
        CALL_OK(&r, rsv_reserve_batch(r.ctx, 2, shops, toks, lens, items,
                                      locs, qty, 0, res));
        ck_assert_int_eq(res[0], RSV_OK);
        ck_assert_int_eq(res[1], RSV_OK);
        CALL_OK(&r, rsv_release_batch(r.ctx, 2, shops, toks, lens, res));
        ck_assert_int_eq(res[0], RSV_OK);
        ck_assert_int_eq(res[1], RSV_OK);
    }

    int64_t released = -1, drained = -1, violations = -1;
    CALL_OK(&r, rsv_sweep(r.ctx, shop, 0, &released));
    CALL_OK(&r, rsv_pool_drain(r.ctx, shop, 1, 1, &drained));
    ck_assert_int_eq(seen(r.w, POOLED, shop), 0);
    CALL_OK(&r, rsv_audit(r.ctx, shop, 0, NULL, NULL, &violations));
    ck_assert_int_eq(violations, 0);
    /* the calls that send nothing */
    uint64_t v = 0;
    CALL_OK(&r, rsv_stats_get(r.ctx, RSV_STAT_STATEMENTS, RSV_OP_CLAIM, &v));
    CALL_OK(&r, rsv_set_enabled(r.ctx, 1));
    ck_assert(rsv_connection(r.ctx) == r.c);

    rsv_close(r.ctx);
    mysql_close(r.c); /* no COMMIT: whatever was only joined is lost here */
    ck_assert_int_eq(seen(r.w, STATUS_OF("a"), shop), RSV_STATUS_CLAIMED);
    ck_assert_int_eq(seen(r.w, STATUS_OF("b"), shop), RSV_STATUS_RELEASED);
    ck_assert_int_eq(seen(r.w, ON_HAND, shop) -
                         seen(r.w, "SELECT COALESCE(SUM(quantity), 0) FROM "
                                   "rsv_journal WHERE shop_id = "
                                   "%llu AND item_id = 1 AND "
                                   "kind = 2", shop),
                     13);
    mysql_close(r.w);
}
END_TEST

/* Inside the caller's transaction (opened explicitly, or with autocommit
 * off by any statement that read a table): claim, release and extend join
 * it and commit or roll back with it; the two reads read inside it; every
 * other function refuses with RSV_EINTXN and leaves it as it was. */
START_TEST(caller_transaction_joined_only_where_documented)
{
    int ac = _i;
    uint64_t shop = tu_shop();
    MYSQL *c = tu_connect(), *w = tu_connect();
    rsv_ctx *ctx = NULL;
    TU_OK(ctx, rsv_open(&ctx, c, NULL));
    TU_OK(ctx, rsv_stock_set(ctx, shop, 1, 1, 10));
    TU_OK(ctx, rsv_reserve_one(ctx, shop, TOK("a"), 1, 1, 2, 0));
    TU_OK(ctx, rsv_reserve_one(ctx, shop, TOK("b"), 1, 1, 1, 0));
    char vars0[512], vars1[512];
    user_vars(c, vars0, sizeof vars0);

    for (int round = 0; round < 2; round++) {
        if (ac) {
            tu_exec(c, "SET autocommit = 1");
            tu_exec(c, "START TRANSACTION");
        } else {
            tu_exec(c, "SET autocommit = 0");
            (void)tu_i64(c, "SELECT COUNT(*) FROM rsv_checkouts");
        }
        ck_assert_int_eq(in_transaction(c), 1);
        int64_t x = 0;
        TU_RC(ctx, rsv_reserve_one(ctx, shop, TOK("c"), 1, 1, 1, 0),
              RSV_EINTXN);
        TU_RC(ctx, rsv_replenish(ctx, shop, 1, 1, &x), RSV_EINTXN);
        TU_RC(ctx, rsv_pool_drain(ctx, shop, 1, 1, &x), RSV_EINTXN);
        TU_RC(ctx, rsv_sweep(ctx, shop, 0, &x), RSV_EINTXN);
        TU_RC(ctx, rsv_stock_set(ctx, shop, 1, 1, 11), RSV_EINTXN);
        TU_RC(ctx, rsv_stock_adjust(ctx, shop, 1, 1, 1, &x), RSV_EINTXN);
        TU_RC(ctx, rsv_audit(ctx, shop, 0, NULL, NULL, &x), RSV_EINTXN);
        ck_assert_int_eq(in_transaction(c), 1);
        int32_t st = 0;
        TU_OK(ctx, rsv_checkout_status(ctx, shop, TOK("a"), &st, NULL, NULL));
        TU_OK(ctx, rsv_stock_get(ctx, shop, 1, 1, &x, NULL, NULL, NULL));
        TU_OK(ctx, rsv_extend(ctx, shop, TOK("b"), 3600000));
        TU_OK(ctx, rsv_claim(ctx, shop, TOK("a")));
        ck_assert_int_eq(in_transaction(c), 1);
        /* joined: not committed until the caller says so */
        ck_assert_int_eq(seen(w, STATUS_OF("a"), shop), RSV_STATUS_HELD);
        TU_OK(ctx, rsv_checkout_status(ctx, shop, TOK("a"), &st, NULL, NULL));
        ck_assert_int_eq(st, RSV_STATUS_CLAIMED); /* (its own change) */
        user_vars(c, vars1, sizeof vars1);
        ck_assert_msg(strcmp(vars0, vars1) == 0,
                      "joined calls left user variables: %s -> %s", vars0,
                      vars1);
        if (round == 0) {
            tu_exec(c, "ROLLBACK");
            ck_assert_int_eq(seen(w, STATUS_OF("a"), shop), RSV_STATUS_HELD);
        } else {
            tu_exec(c, "COMMIT");
            ck_assert_int_eq(seen(w, STATUS_OF("a"), shop),
                             RSV_STATUS_CLAIMED);
        }
        ck_assert_int_eq(in_transaction(c), 0);
    }
    tu_exec(c, "SET autocommit = 1");
    TU_OK(ctx, rsv_release(ctx, shop, TOK("b")));
    rsv_close(ctx);
    mysql_close(c);
    mysql_close(w);
}
END_TEST

/* A fresh connection with autocommit off: nothing is open, so the sweep
 * and a reserve run their own transactions (they used to find the
 * session "inside a transaction" a read of their own had opened). */
START_TEST(autocommit_off_runs_own_transactions)
{
    uint64_t shop = tu_shop();
    MYSQL *c = tu_connect();
    tu_exec(c, "SET autocommit = 0");
    tu_exec(c, "COMMIT");
    rsv_ctx *ctx = NULL;
    TU_OK(ctx, rsv_open(&ctx, c, NULL));
    TU_OK(ctx, rsv_stock_set(ctx, shop, 1, 1, 3));
    int64_t x = 0;
    TU_OK(ctx, rsv_stock_get(ctx, shop, 1, 1, &x, NULL, NULL, NULL));
    TU_OK(ctx, rsv_sweep(ctx, shop, 0, &x));
    TU_OK(ctx, rsv_reserve_one(ctx, shop, TOK("a"), 1, 1, 1, 0));
    int32_t st = 0;
    TU_OK(ctx, rsv_checkout_status(ctx, shop, TOK("a"), &st, NULL, NULL));
    TU_OK(ctx, rsv_reserve_one(ctx, shop, TOK("b"), 1, 1, 1, 0));
    TU_OK(ctx, rsv_sweep(ctx, shop, 0, &x));
    ck_assert_int_eq(in_transaction(c), 0);
    rsv_close(ctx);
    mysql_close(c);
}
END_TEST

/* The reads promise the latest committed state: a session at READ
 * UNCOMMITTED (set after rsv_open) must not see another connection's
 * uncommitted claim or stock change. */
START_TEST(reads_never_show_uncommitted_changes)
{
    uint64_t shop = tu_shop();
    MYSQL *c = tu_connect();
    rsv_ctx *ctx = NULL, *octx = NULL;
    TU_OK(ctx, rsv_open(&ctx, c, NULL));
    MYSQL *o = tu_connect();
    TU_OK(octx, rsv_open(&octx, o, NULL));
    TU_OK(ctx, rsv_stock_set(ctx, shop, 1, 1, 10));
    TU_OK(ctx, rsv_reserve_one(ctx, shop, TOK("a"), 1, 1, 2, 0));
    tu_exec(c, "SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED");

    tu_exec(o, "START TRANSACTION");
    TU_OK(octx, rsv_claim(octx, shop, TOK("a"))); /* joined, uncommitted */
    tu_exec(o, "UPDATE rsv_ledger SET on_hand = on_hand + 1000 WHERE "
               "item_id = 1");
    int32_t st = 0;
    int64_t on_hand = 0;
    TU_OK(ctx, rsv_checkout_status(ctx, shop, TOK("a"), &st, NULL, NULL));
    ck_assert_int_eq(st, RSV_STATUS_HELD);
    TU_OK(ctx, rsv_stock_get(ctx, shop, 1, 1, &on_hand, NULL, NULL, NULL));
    ck_assert_int_eq(on_hand, 10);
    tu_exec(o, "ROLLBACK");
    ck_assert_int_eq(in_transaction(c), 0);
    rsv_close(octx);
    rsv_close(ctx);
    mysql_close(o);
    mysql_close(c);
}
END_TEST

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A claim stuck behind another session's lock on its checkout row answers
 * RSV_EBUSY once the call's budget is spent, having applied nothing,
 * instead of after (max_retries + 1) lock waits (the test server waits
 * 20 s for a row lock: nine of them were three minutes).  Through the
 * procedure and through statements. */
START_TEST(call_time_is_bounded_by_its_budget)
{
    int statements = _i;
    uint64_t shop = tu_shop();
    MYSQL *c = tu_connect();
    rsv_options o;
    rsv_options_init(&o, RSV_OPTIONS_VERSION);
    o.call_timeout_ms = 2000;
    o.flags = statements ? TEST_OPT_STATEMENTS_ONLY : 0;
    rsv_ctx *ctx = NULL;
    TU_OK(ctx, rsv_open(&ctx, c, &o));
    TU_OK(ctx, rsv_stock_set(ctx, shop, 1, 1, 5));
    TU_OK(ctx, rsv_reserve_one(ctx, shop, TOK("a"), 1, 1, 2, 0));

    MYSQL *locker = tu_connect_in_txn();
    char q[200];
    snprintf(q, sizeof q, "SELECT status FROM rsv_checkouts WHERE "
                          "shop_id = %llu AND checkout_token = 'a' FOR "
                          "UPDATE", (unsigned long long)shop);
    (void)tu_i64(locker, q);
    double t0 = now_s();
    int rc = rsv_claim(ctx, shop, TOK("a"));
    double took = now_s() - t0;
    TU_RC(ctx, rc, RSV_EBUSY);
    ck_assert_msg(strstr(rsv_errmsg(ctx), "call_timeout_ms") != NULL, "%s",
                  rsv_errmsg(ctx));
    /* the budget, plus at most one statement's lock wait (1 s here), with
     * room for a slow machine */
    ck_assert_msg(took >= 1.9 && took < 6.0, "took %.2f s", took);
    ck_assert_int_eq(in_transaction(c), 0);
    tu_exec(locker, "ROLLBACK");
    /* nothing was applied: the checkout is held and can still be claimed */
    int32_t st = 0;
    TU_OK(ctx, rsv_checkout_status(ctx, shop, TOK("a"), &st, NULL, NULL));
    ck_assert_int_eq(st, RSV_STATUS_HELD);
    TU_OK(ctx, rsv_claim(ctx, shop, TOK("a")));
    rsv_close(ctx);
    mysql_close(locker);
    mysql_close(c);
}
END_TEST

static void *unlock_later(void *arg)
{
    sleep(3);
    tu_exec((MYSQL *)arg, "UNLOCK TABLES");
    return NULL;
}

/* An audit longer than the call's budget runs to its end: it holds no
 * row lock and commits nothing, and on a large shop its reads take
 * seconds (cut by the budget, an audit of such a shop answered
 * RSV_ECONN).  Here another session's table lock keeps its read waiting
 * 3 s, where the budget of 100 ms and a lock wait of 1 s would have cut a
 * statement of any other call at 2.1 s. */
START_TEST(audit_is_not_cut_by_the_budget)
{
    uint64_t shop = tu_shop();
    MYSQL *c = tu_connect();
    rsv_options o;
    rsv_options_init(&o, RSV_OPTIONS_VERSION);
    o.call_timeout_ms = 100;
    o.lock_wait_timeout_s = 1;
    rsv_ctx *ctx = NULL;
    TU_OK(ctx, rsv_open(&ctx, c, &o));
    TU_OK(ctx, rsv_stock_set(ctx, shop, 1, 1, 5));
    TU_OK(ctx, rsv_reserve_one(ctx, shop, TOK("a"), 1, 1, 2, 0));

    MYSQL *locker = tu_connect();
    tu_exec(locker, "LOCK TABLES rsv_ledger WRITE");
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, unlock_later, locker), 0);
    double t0 = now_s();
    int64_t v = -1;
    int rc = rsv_audit(ctx, shop, 0, NULL, NULL, &v);
    double took = now_s() - t0;
    pthread_join(t, NULL);
    TU_OK(ctx, rc);
    ck_assert_int_eq(v, 0);
    /* else the lock did not hold the audit up and this tests nothing */
    ck_assert_msg(took >= 2.5, "took %.2f s", took);
    ck_assert_int_eq(in_transaction(c), 0);
    /* the budget still bounds the other calls */
    TU_OK(ctx, rsv_claim(ctx, shop, TOK("a")));
    rsv_close(ctx);
    mysql_close(locker);
    mysql_close(c);
}
END_TEST

int main(void)
{
    tu_db_create("session");
    Suite *s = suite_create("session");
    tu_add_loop(s, "every_call_on_every_session", every_call_on_every_session,
                0, N_RUNS);
    tu_add_loop(s, "caller_transaction_joined_only_where_documented",
                caller_transaction_joined_only_where_documented, 0, 2);
    tu_add(s, "autocommit_off_runs_own_transactions",
           autocommit_off_runs_own_transactions);
    tu_add(s, "reads_never_show_uncommitted_changes",
           reads_never_show_uncommitted_changes);
    tu_add_loop(s, "call_time_is_bounded_by_its_budget",
                call_time_is_bounded_by_its_budget, 0, 2);
    tu_add(s, "audit_is_not_cut_by_the_budget", audit_is_not_cut_by_the_budget);
    int rc = tu_run(s);
    tu_db_drop();
    return rc;
}
