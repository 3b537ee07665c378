/*
 * check_network.c - what a call does when its commit waits on
 * replication: a COMMIT that a semi-synchronous primary holds back for a
 * replica that never answers is cut off when the call's budget is spent
 * (RSV_EINDOUBT, not the server's answer many seconds later), and once
 * the primary has fallen back to asynchronous replication a context with
 * RSV_OPT_REPLICA_ACK answers RSV_EINDOUBT for what only the primary has
 * (a context without it acknowledges as before), until semi-synchronous
 * replication is switched off.
 *
 * Runs against a server of its own (tests/network/run.sh): binary log
 * on, semi-synchronous replication with AFTER_SYNC and a 5 s timeout,
 * switched on by the first test, and no replica.
 */
#include <stdio.h>
#include <string.h>

#include "loadlib.h"
#include "testutil.h"

#define TOK(s) (s), strlen(s)

static rsv_ctx *open_ctx(MYSQL **conn, int64_t budget_ms, uint32_t flags)
{
    *conn = tu_connect();
    rsv_options o;
    rsv_options_init(&o, RSV_OPTIONS_VERSION);
    o.call_timeout_ms = budget_ms;
    o.flags = flags;
    rsv_ctx *ctx = NULL;
    TU_OK(ctx, rsv_open(&ctx, *conn, &o));
    return ctx;
}

static int semi_sync_status_on(MYSQL *adm)
{
    return tu_i64(adm, "SELECT VARIABLE_VALUE = 'ON' FROM information_schema."
                       "GLOBAL_STATUS WHERE VARIABLE_NAME = "
                       "'RPL_SEMI_SYNC_MASTER_STATUS'") == 1;
}

/* Switched on with no replica attached, semi-synchronous replication
 * holds the next commit back until its timeout (5 s) and only then lets
 * it through, asynchronously.  The call's budget (1 s; a commit waits at
 * least a lock wait and a second: 2 s) ends the wait first: the answer
 * is in doubt, the connection closed, and repeating the call finds the
 * outcome (here: committed once the primary gave up waiting). */
START_TEST(stalled_commit_answers_in_doubt)
{
    MYSQL *adm = tu_connect();
    uint64_t shop = tu_shop();
    MYSQL *conn;
    rsv_ctx *ctx = open_ctx(&conn, 1000, 0);
    TU_OK(ctx, rsv_stock_set(ctx, shop, 1, 1, 10));
    tu_exec(adm, "SET GLOBAL rpl_semi_sync_master_enabled = ON");
    ck_assert(semi_sync_status_on(adm));
    int rc = rsv_reserve_one(ctx, shop, TOK("stall-1"), 1, 1, 2, 0);
    TU_RC(ctx, rc, RSV_EINDOUBT);
    ck_assert_msg(strstr(rsv_errmsg(ctx), "time budget") != NULL, "%s",
                  rsv_errmsg(ctx));
    /* the primary gives up waiting and falls back to asynchronous */
    for (int i = 0; i < 300 && semi_sync_status_on(adm); i++)
        ll_sleep_ms(100);
    ck_assert(!semi_sync_status_on(adm));
    TU_OK(ctx, rsv_reconnect(ctx));
    TU_OK(ctx, rsv_reserve_one(ctx, shop, TOK("stall-1"), 1, 1, 2, 0));
    ck_assert_int_eq(tu_held(ctx, shop, 1, 1), 2);
    rsv_close(ctx);
    mysql_close(conn);
    mysql_close(adm);
}
END_TEST

/* Fallen back (the test above): with the flag a reserve answers in doubt
 * although it committed on the primary, and again when repeated; without
 * it, the same primary acknowledges.  Semi-synchronous replication
 * switched off by the operator is not a fallback: then the repeat is
 * acknowledged, the same hold. */
START_TEST(replica_ack_refuses_to_acknowledge)
{
    MYSQL *adm = tu_connect();
    ck_assert(!semi_sync_status_on(adm));
    uint64_t shop = tu_shop();
    MYSQL *conn, *conn2;
    rsv_ctx *plain = open_ctx(&conn2, 5000, 0);
    TU_OK(plain, rsv_stock_set(plain, shop, 1, 1, 10));
    rsv_ctx *ctx = open_ctx(&conn, 5000, RSV_OPT_REPLICA_ACK);
    int rc = rsv_reserve_one(ctx, shop, TOK("ack-1"), 1, 1, 2, 0);
    TU_RC(ctx, rc, RSV_EINDOUBT);
    ck_assert_msg(strstr(rsv_errmsg(ctx), "acknowledgement") != NULL, "%s",
                  rsv_errmsg(ctx));
    int32_t st = 0;
    int64_t units = 0;
    TU_OK(plain, rsv_checkout_status(plain, shop, TOK("ack-1"), &st, &units,
                                     NULL));
    ck_assert_int_eq(st, RSV_STATUS_HELD); /* on the primary only */
    rc = rsv_reserve_one(ctx, shop, TOK("ack-1"), 1, 1, 2, 0);
    TU_RC(ctx, rc, RSV_EINDOUBT);
    TU_OK(plain, rsv_reserve_one(plain, shop, TOK("ack-2"), 1, 1, 1, 0));
    /* reads are not checked */
    TU_OK(ctx, rsv_checkout_status(ctx, shop, TOK("ack-2"), &st, NULL, NULL));

    tu_exec(adm, "SET GLOBAL rpl_semi_sync_master_enabled = OFF");
    TU_OK(ctx, rsv_reserve_one(ctx, shop, TOK("ack-1"), 1, 1, 2, 0));
    ck_assert_int_eq(tu_held(ctx, shop, 1, 1), 3);
    rsv_close(ctx);
    rsv_close(plain);
    mysql_close(conn);
    mysql_close(conn2);
    mysql_close(adm);
}
END_TEST

int main(void)
{
    tu_db_create("network");
    Suite *s = suite_create("network");
    /* in this order: the second needs the fallback the first causes */
    tu_add(s, "stalled_commit_answers_in_doubt",
           stalled_commit_answers_in_doubt);
    tu_add(s, "replica_ack_refuses_to_acknowledge",
           replica_ack_refuses_to_acknowledge);
    int rc = tu_run(s);
    tu_db_drop();
    return rc;
}
