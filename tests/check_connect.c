/*
 * check_connect.c - contexts that open their own connection from a
 * connection string (rsv_open_dsn), malformed strings, unreachable
 * servers, escaped credentials, and rsv_reconnect after a lost connection
 * for both kinds of context.
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
    tu_add_loop(s, "reconnect_after_a_lost_connection",
                reconnect_after_a_lost_connection, 0, 2);
    int rc = tu_run(s);
    tu_db_drop();
    return rc;
}
