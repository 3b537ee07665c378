/*
 * check_connect.c - contexts that open their own connection from a
 * connection string (rsv_open_dsn), malformed strings and host lists,
 * unreachable servers, a read-only server (refused by the target, and its
 * writes answered RSV_ENOTPRIMARY), escaped credentials, and rsv_reconnect
 * after a lost connection for both kinds of context.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "loadlib.h"

#define TOK(s) (s), strlen(s)

/* The test server, as a dsn for user:password. */
static void dsn_for(char *out, size_t n, const char *user, const char *pw,
                    const char *extra)
{
    char sock[600], u[200], p[200];
    ll_dsn_escape(sock, sizeof sock, getenv("RSV_TEST_SOCKET"));
    ll_dsn_escape(u, sizeof u, user);
    ll_dsn_escape(p, sizeof p, pw ? pw : "");
    snprintf(out, n, "mariadb://%s%s%s@/%s?socket=%s%s", u, pw ? ":" : "",
             pw ? p : "", tu_db_name(), sock, extra ? extra : "");
}

static const char *test_user(void)
{
    const char *u = getenv("RSV_TEST_USER");
    return u ? u : "root";
}

static void lifecycle(rsv_ctx *ctx, uint64_t shop, const char *tok)
{
    TU_OK(ctx, rsv_stock_set(ctx, shop, 1, 1, 5));
    TU_OK(ctx, rsv_reserve_one(ctx, shop, tok, strlen(tok), 1, 1, 2, 0));
    TU_OK(ctx, rsv_claim(ctx, shop, tok, strlen(tok)));
    int64_t on_hand = 0;
    TU_OK(ctx, rsv_stock_get(ctx, shop, 1, 1, &on_hand, NULL, NULL, NULL));
    ck_assert_int_eq(on_hand, 3);
}

START_TEST(open_dsn_runs_a_checkout)
{
    char dsn[1024];
    dsn_for(dsn, sizeof dsn, test_user(), getenv("RSV_TEST_PASSWORD"),
            "&connect_timeout=5&read_timeout=30&write_timeout=30");
    rsv_ctx *ctx = NULL;
    TU_OK(ctx, rsv_open_dsn(&ctx, dsn, NULL));
    ck_assert(rsv_connection(ctx) != NULL);
    lifecycle(ctx, tu_shop(), "dsn-1");
    rsv_close(ctx); /* closes its connection too (valgrind: no leak) */
}
END_TEST

/* A password and user with every character a URL reserves. */
START_TEST(escaped_credentials)
{
    MYSQL *adm = tu_connect();
    char q[512];
    snprintf(q, sizeof q, "CREATE USER 'dsn u@:/'@'localhost' IDENTIFIED "
                          "BY 'p@ss:w/rd%%?&=#'");
    tu_exec(adm, "DROP USER IF EXISTS 'dsn u@:/'@'localhost'");
    tu_exec(adm, q);
    snprintf(q, sizeof q, "GRANT SELECT, INSERT, UPDATE, DELETE, EXECUTE ON "
                          "`%s`.* TO 'dsn u@:/'@'localhost'", tu_db_name());
    tu_exec(adm, q);
    char dsn[1024];
    dsn_for(dsn, sizeof dsn, "dsn u@:/", "p@ss:w/rd%?&=#", NULL);
    rsv_ctx *ctx = NULL;
    TU_OK(ctx, rsv_open_dsn(&ctx, dsn, NULL));
    lifecycle(ctx, tu_shop(), "dsn-2");
    rsv_close(ctx);
    dsn_for(dsn, sizeof dsn, "dsn u@:/", "wrong", NULL);
    int rc = rsv_open_dsn(&ctx, dsn, NULL);
    TU_RC(ctx, rc, RSV_ECONN);
    ck_assert(strstr(rsv_errmsg(ctx), "1045") != NULL); /* access denied */
    rsv_close(ctx);
    tu_exec(adm, "DROP USER 'dsn u@:/'@'localhost'");
    mysql_close(adm);
}
END_TEST

START_TEST(malformed_dsns_are_refused)
{
    static const struct {
        const char *dsn, *says;
    } cases[] = {
        {"postgres://u@h/db", "mariadb://"},
        {"mariadb://u@h:99999/db", "malformed"},
        {"mariadb://u@h:x/db", "malformed"},
        {"mariadb://u%G1@h/db", "malformed"},
        {"mariadb://u@h/db%2", "malformed"},
        {"mariadb://u@h", "no database"},
        {"mariadb://u@h/", "no database"},
        {"mariadb://u@h/db?nope=1", "nope"},
        {"mariadb://u@h/db?ssl=2", "ssl"},
        {"mariadb://u@h/db?read_timeout=x", "read_timeout"},
        {"mariadb://u@h/db?socket", "without a value"},
        {"mariadb://u@h1,,h2/db", "malformed host ''"},
        {"mariadb://u@h1:3306,h2:x/db", "malformed host 'h2:x'"},
        {"mariadb://u@h1:0,h2/db", "malformed host 'h1:0'"},
        {"mariadb://u@h1,/db", "malformed host ''"},
        {"mariadb://u@h1,h2/db?socket=%2Fs", "socket"},
        {"mariadb://u@h/db?target=primary", "target"},
        {"", "mariadb://"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rsv_ctx *ctx = NULL;
        int rc = rsv_open_dsn(&ctx, cases[i].dsn, NULL);
        ck_assert_msg(rc == RSV_EINVAL, "%s: got %s", cases[i].dsn,
                      rsv_code_name(rc));
        ck_assert_msg(ctx && strstr(rsv_errmsg(ctx), cases[i].says), "%s: %s",
                      cases[i].dsn, ctx ? rsv_errmsg(ctx) : "(no context)");
        rsv_close(ctx);
    }
    rsv_ctx *ctx = (rsv_ctx *)1;
    ck_assert_int_eq(rsv_open_dsn(&ctx, NULL, NULL), RSV_EINVAL);
    ck_assert(ctx == NULL);
    ck_assert_int_eq(rsv_open_dsn(NULL, "mariadb://h/db", NULL), RSV_EINVAL);
    ck_assert_int_eq(rsv_reconnect(NULL), RSV_EINVAL);
    /* no server there */
    int rc = rsv_open_dsn(&ctx, "mariadb://root@/db?socket=%2Fnonexistent"
                                "%2Fmysqld.sock&connect_timeout=2", NULL);
    TU_RC(ctx, rc, RSV_ECONN);
    ck_assert(strstr(rsv_errmsg(ctx), "cannot connect") != NULL);
    rsv_close(ctx);
}
END_TEST

/* Hosts that do not answer: the message names each. */
START_TEST(unreachable_hosts_are_named)
{
    rsv_ctx *ctx = NULL;
    int rc = rsv_open_dsn(&ctx, "mariadb://root@127.0.0.1:16998,"
                                "127.0.0.1:16999/db?connect_timeout=2",
                          NULL);
    TU_RC(ctx, rc, RSV_ECONN);
    ck_assert_msg(strstr(rsv_errmsg(ctx), "127.0.0.1:16998: cannot connect") &&
                      strstr(rsv_errmsg(ctx), "127.0.0.1:16999: cannot "
                                                "connect"),
                  "%s", rsv_errmsg(ctx));
    rsv_close(ctx);
}
END_TEST

/* A read-only server (a replica): the dsn's target refuses it, naming
 * it; target=any takes it; a context on it while it turned read-only
 * gets RSV_ENOTPRIMARY for a write, with nothing applied, and
 * rsv_reconnect finds it again once it is writable.  (root may write to a
 * read-only server: the write goes through an account without that
 * right.) */
START_TEST(read_only_server)
{
    MYSQL *adm = tu_connect();
    char q[512], dsn[1024];
    tu_exec(adm, "DROP USER IF EXISTS 'rsv_ro'@'localhost'");
    tu_exec(adm, "CREATE USER 'rsv_ro'@'localhost' IDENTIFIED BY 'ro'");
    snprintf(q, sizeof q, "GRANT SELECT, INSERT, UPDATE, DELETE, EXECUTE ON "
                          "`%s`.* TO 'rsv_ro'@'localhost'", tu_db_name());
    tu_exec(adm, q);
    uint64_t shop = tu_shop();
    dsn_for(dsn, sizeof dsn, "rsv_ro", "ro", NULL);
    rsv_ctx *ctx = NULL;
    TU_OK(ctx, rsv_open_dsn(&ctx, dsn, NULL));
    TU_OK(ctx, rsv_stock_set(ctx, shop, 1, 1, 5));

    /* every answer is taken before read_only is switched off again, and
     * checked after: a failed check must not leave the server read-only
     * for the suites that follow */
    tu_exec(adm, "SET GLOBAL read_only = ON");
    int rc_write = rsv_reserve_one(ctx, shop, TOK("ro-1"), 1, 1, 1, 0);
    int rc_reconnect = rsv_reconnect(ctx);
    char msg[600];
    snprintf(msg, sizeof msg, "%s", rsv_errmsg(ctx));
    rsv_ctx *other = NULL;
    int rc_open = rsv_open_dsn(&other, dsn, NULL);
    rsv_close(other);
    other = NULL;
    char any[1100];
    snprintf(any, sizeof any, "%s&target=any", dsn);
    int rc_any = rsv_open_dsn(&other, any, NULL), rc_status = -1;
    int32_t st = 0;
    if (rc_any == RSV_OK)
        rc_status = rsv_checkout_status(other, shop, TOK("ro-1"), &st, NULL,
                                        NULL);
    rsv_close(other);
    tu_exec(adm, "SET GLOBAL read_only = OFF");
    ck_assert_int_eq(rc_write, RSV_ENOTPRIMARY);
    ck_assert_int_eq(rc_reconnect, RSV_ENOTPRIMARY);
    ck_assert_msg(strstr(msg, getenv("RSV_TEST_SOCKET")) &&
                      strstr(msg, "read-only"), "%s", msg);
    ck_assert_int_eq(rc_open, RSV_ENOTPRIMARY);
    ck_assert_int_eq(rc_any, RSV_OK);
    ck_assert_int_eq(rc_status, RSV_ENOTFOUND); /* nothing was applied */

    TU_OK(ctx, rsv_reconnect(ctx));
    TU_OK(ctx, rsv_reserve_one(ctx, shop, TOK("ro-1"), 1, 1, 1, 0));
    rsv_close(ctx);
    tu_exec(adm, "DROP USER 'rsv_ro'@'localhost'");
    mysql_close(adm);
}
END_TEST

static void kill_session(MYSQL *conn)
{
    MYSQL *adm = tu_connect();
    char q[64];
    snprintf(q, sizeof q, "KILL %lu", mysql_thread_id(conn));
    tu_exec(adm, q);
    mysql_close(adm);
}

/* After the server killed the session: RSV_ECONN, rsv_reconnect, and the
 * same context works again, for a context with its own connection and
 * for one on the application's. */
START_TEST(reconnect_after_a_lost_connection)
{
    int own = _i;
    uint64_t shop = tu_shop();
    rsv_ctx *ctx = NULL;
    MYSQL *app = NULL;
    if (own) {
        char dsn[1024];
        dsn_for(dsn, sizeof dsn, test_user(), getenv("RSV_TEST_PASSWORD"),
                NULL);
        TU_OK(ctx, rsv_open_dsn(&ctx, dsn, NULL));
    } else {
        ctx = tu_open(&app);
    }
    TU_OK(ctx, rsv_stock_set(ctx, shop, 1, 1, 5));
    kill_session(rsv_connection(ctx));
    int64_t x = 0;
    int rc = rsv_stock_get(ctx, shop, 1, 1, &x, NULL, NULL, NULL);
    TU_RC(ctx, rc, RSV_ECONN);
    TU_OK(ctx, rsv_reconnect(ctx));
    if (!own)
        ck_assert(rsv_connection(ctx) == app);
    lifecycle(ctx, shop, "again");
    rsv_close(ctx);
    if (app)
        mysql_close(app);
}
END_TEST

int main(void)
{
    tu_db_create("connect");
    Suite *s = suite_create("connect");
    tu_add(s, "open_dsn_runs_a_checkout", open_dsn_runs_a_checkout);
    tu_add(s, "escaped_credentials", escaped_credentials);
    tu_add(s, "malformed_dsns_are_refused", malformed_dsns_are_refused);
    tu_add(s, "unreachable_hosts_are_named", unreachable_hosts_are_named);
    tu_add(s, "read_only_server", read_only_server);
    tu_add_loop(s, "reconnect_after_a_lost_connection",
                reconnect_after_a_lost_connection, 0, 2);
    int rc = tu_run(s);
    tu_db_drop();
    return rc;
}
