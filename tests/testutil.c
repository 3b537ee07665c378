/*
 * testutil.c - see testutil.h.  Connections, statements and the schema
 * go through loadlib.c, which the load programs share; this file adds
 * the Check side: ck_assert on failure, the suite database, the audit.
 */
#include "testutil.h"
#include "loadlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char db_name[64];

const char *tu_db_name(void) { return db_name; }

static MYSQL *raw_connect(const char *db)
{
    ll_server srv;
    if (ll_server_from_env(&srv) != 0) {
        fprintf(stderr, "RSV_TEST_SOCKET is not set: run the tests with "
                        "'make check' (tools/mariadb.sh run ...)\n");
        exit(2);
    }
    char err[512];
    MYSQL *c = ll_connect(NULL, &srv, db, err, sizeof err);
    if (!c)
        fprintf(stderr, "connect: %s\n", err);
    return c;
}

static void exec_or_die(MYSQL *c, const char *sql)
{
    if (ll_exec(c, sql) != 0) {
        fprintf(stderr, "%s: %s\n", sql, mysql_error(c));
        exit(2);
    }
}

void tu_db_create(const char *suite)
{
    snprintf(db_name, sizeof db_name, "rsvtest_%s_%d", suite, (int)getpid());
    MYSQL *c = raw_connect(NULL);
    if (!c)
        exit(2);
    char q[256];
    snprintf(q, sizeof q, "SELECT COUNT(*) FROM information_schema.schemata "
                          "WHERE schema_name = '%s'", db_name);
    exec_or_die(c, "SELECT 1");
    int64_t n = 0;
    if (ll_i64(c, q, 0, &n) == 0 && n != 0) {
        fprintf(stderr, "database %s already exists: refusing to run on "
                        "a dirty database\n", db_name);
        exit(2);
    }
    snprintf(q, sizeof q, "CREATE DATABASE %s", db_name);
    exec_or_die(c, q);
    snprintf(q, sizeof q, "USE %s", db_name);
    exec_or_die(c, q);
    tu_load_schema(c);
    mysql_close(c);
}

void tu_load_schema(MYSQL *c)
{
    char err[512];
    int rc = ll_load_schema(c, NULL, err, sizeof err);
    if (rc == -1) {
        fprintf(stderr, "cannot read sql/schema.sql (set RSV_SCHEMA)\n");
        exit(2);
    }
    if (rc != 0) {
        fprintf(stderr, "loading the schema: %s\n", err);
        exit(2);
    }
}

void tu_db_drop(void)
{
    if (getenv("RSV_TEST_KEEP_DB"))
        return;
    MYSQL *c = raw_connect(NULL);
    if (!c)
        return;
    char q[128];
    snprintf(q, sizeof q, "DROP DATABASE IF EXISTS %s", db_name);
    mysql_query(c, q);
    mysql_close(c);
}

void tu_dsn(char *out, size_t n)
{
    char sock[600], u[200], p[200];
    const char *user = getenv("RSV_TEST_USER");
    const char *pw = getenv("RSV_TEST_PASSWORD");
    ll_dsn_escape(sock, sizeof sock, getenv("RSV_TEST_SOCKET"));
    ll_dsn_escape(u, sizeof u, user ? user : "root");
    ll_dsn_escape(p, sizeof p, pw ? pw : "");
    snprintf(out, n, "mariadb://%s%s%s@/%s?socket=%s", u, pw ? ":" : "",
             pw ? p : "", tu_db_name(), sock);
}

MYSQL *tu_connect(void)
{
    MYSQL *c = raw_connect(db_name);
    ck_assert_msg(c != NULL, "cannot connect to the test server");
    return c;
}

MYSQL *tu_connect_nodb(void)
{
    MYSQL *c = raw_connect(NULL);
    ck_assert_msg(c != NULL, "cannot connect to the test server");
    return c;
}

rsv_ctx *tu_open(MYSQL **conn_out)
{
    MYSQL *c = tu_connect();
    rsv_ctx *ctx = NULL;
    int rc = rsv_open(&ctx, c, NULL);
    ck_assert_msg(rc == RSV_OK, "rsv_open: %d %s", rc, rsv_errmsg(ctx));
    if (conn_out)
        *conn_out = c;
    return ctx;
}

rsv_ctx *tu_open_with(MYSQL **conn_out, uint32_t flags, int64_t pool_cap)
{
    MYSQL *c = tu_connect();
    rsv_options o;
    rsv_options_init(&o, RSV_OPTIONS_VERSION);
    o.flags = flags;
    if (pool_cap > 0)
        o.pool_cap = pool_cap;
    rsv_ctx *ctx = NULL;
    int rc = rsv_open(&ctx, c, &o);
    ck_assert_msg(rc == RSV_OK, "rsv_open: %d %s", rc, rsv_errmsg(ctx));
    *conn_out = c;
    return ctx;
}

MYSQL *tu_connect_in_txn(void)
{
    MYSQL *c = tu_connect();
    tu_exec(c, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED");
    tu_exec(c, "START TRANSACTION");
    return c;
}

rsv_ctx *tu_open_impatient(MYSQL **conn_out, int32_t max_retries)
{
    MYSQL *c = tu_connect();
    rsv_options o;
    rsv_options_init(&o, RSV_OPTIONS_VERSION);
    o.lock_wait_timeout_s = 1;
    o.max_retries = max_retries;
    rsv_ctx *ctx = NULL;
    int rc = rsv_open(&ctx, c, &o);
    ck_assert_msg(rc == RSV_OK, "rsv_open: %d %s", rc, rsv_errmsg(ctx));
    *conn_out = c;
    return ctx;
}

uint64_t tu_shop(void)
{
    static uint64_t n;
    return ((uint64_t)getpid() << 20) + (++n);
}

void tu_fix_open(tu_fix *f, uint32_t flags, int64_t pool_cap)
{
    memset(f, 0, sizeof *f);
    f->ctx = tu_open_with(&f->conn, flags, pool_cap);
    f->shop = tu_shop();
}

void tu_fix_open_impatient(tu_fix *f, int32_t max_retries)
{
    memset(f, 0, sizeof *f);
    f->ctx = tu_open_impatient(&f->conn, max_retries);
    f->shop = tu_shop();
}

void tu_fix_stock(tu_fix *f, uint64_t item, uint64_t loc, int64_t on_hand)
{
    int rc = rsv_stock_set(f->ctx, f->shop, item, loc, on_hand);
    ck_assert_msg(rc == RSV_OK, "stock of item %llu at %llu: %s: %s",
                  (unsigned long long)item, (unsigned long long)loc,
                  rsv_code_name(rc), rsv_errmsg(f->ctx));
}

void tu_fix_pooled(tu_fix *f, uint64_t item, uint64_t loc, int64_t on_hand)
{
    tu_fix_stock(f, item, loc, on_hand);
    int rc = rsv_replenish(f->ctx, f->shop, item, loc, NULL);
    ck_assert_msg(rc == RSV_OK, "pool of item %llu at %llu: %s: %s",
                  (unsigned long long)item, (unsigned long long)loc,
                  rsv_code_name(rc), rsv_errmsg(f->ctx));
}

MYSQL *tu_fix_admin(tu_fix *f)
{
    if (!f->adm)
        f->adm = tu_connect();
    return f->adm;
}

void tu_fix_close(tu_fix *f)
{
    rsv_close(f->ctx);
    if (f->adm)
        mysql_close(f->adm);
    mysql_close(f->conn);
    memset(f, 0, sizeof *f);
}

void tu_exec(MYSQL *c, const char *sql)
{
    ck_assert_msg(ll_exec(c, sql) == 0, "%s: %s", sql, mysql_error(c));
}

int64_t tu_i64(MYSQL *c, const char *sql)
{
    int64_t v;
    ck_assert_msg(ll_i64(c, sql, 0, &v) >= 0, "%s: %s", sql, mysql_error(c));
    return v;
}

static void print_violation(void *arg, uint64_t shop, uint64_t item,
                            uint64_t loc, const char *problem)
{
    (void)arg;
    fprintf(stderr, "AUDIT shop %llu item %llu location %llu: %s\n",
            (unsigned long long)shop, (unsigned long long)item,
            (unsigned long long)loc, problem);
}

void tu_audit_clean(void)
{
    MYSQL *c = tu_connect();
    rsv_ctx *ctx = NULL;
    ck_assert_int_eq(rsv_open(&ctx, c, NULL), RSV_OK);
    int64_t v = -1;
    int rc = rsv_audit(ctx, 0, 1, print_violation, NULL, &v);
    TU_RC(ctx, rc, RSV_OK);
    ck_assert_msg(v == 0, "audit found %lld violation(s)", (long long)v);
    rsv_close(ctx);
    mysql_close(c);
}

int64_t tu_on_hand(rsv_ctx *ctx, uint64_t shop, uint64_t item, uint64_t loc)
{
    int64_t v = -1;
    TU_OK(ctx, rsv_stock_get(ctx, shop, item, loc, &v, NULL, NULL, NULL));
    return v;
}

int64_t tu_held(rsv_ctx *ctx, uint64_t shop, uint64_t item, uint64_t loc)
{
    int64_t v = -1;
    TU_OK(ctx, rsv_stock_get(ctx, shop, item, loc, NULL, &v, NULL, NULL));
    return v;
}

static void audit_teardown(void) { tu_audit_clean(); }

void tu_add_timeout(Suite *s, const char *name, const TTest *t, double seconds)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, seconds);
    tcase_add_checked_fixture(tc, NULL, audit_teardown);
    tcase_add_test(tc, t);
    suite_add_tcase(s, tc);
}

void tu_add(Suite *s, const char *name, const TTest *t)
{
    tu_add_timeout(s, name, t, 120);
}

void tu_add_loop(Suite *s, const char *name, const TTest *t, int start,
                 int end)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, NULL, audit_teardown);
    tcase_add_loop_test(tc, t, start, end);
    suite_add_tcase(s, tc);
}

int tu_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
