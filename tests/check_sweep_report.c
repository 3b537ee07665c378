/*
 * check_sweep_report.c - rsv_sweep_report(): each count it gives is the
 * work the sweep did, checked against the tables before and after (holds
 * given back and their units, journal rows folded, idle pool rows drained,
 * checkout records purged), counts of what committed when it stops part
 * way, and the refusals of a result it cannot fill.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <reserve/stats.h>

#include "testutil.h"

#define TOK(s) (s), strlen(s)

static int64_t count_of(tu_fix *f, const char *table)
{
    char q[200];
    snprintf(q, sizeof q, "SELECT COUNT(*) FROM %s WHERE shop_id = %llu",
             table, (unsigned long long)f->shop);
    return tu_i64(f->conn, q);
}

/* Wait until every hold of the shop is past its deadline on the server's
 * clock (the holds were made with a 1 ms TTL). */
static void wait_expired(tu_fix *f)
{
    char q[200];
    snprintf(q, sizeof q, "SELECT COUNT(*) FROM rsv_holds WHERE shop_id = "
             "%llu AND expires_at > NOW(6)", (unsigned long long)f->shop);
    struct timespec pause = {0, 2000000};
    while (tu_i64(f->conn, q) > 0)
        nanosleep(&pause, NULL);
}

/* f opened on 5 units at (1, 1), of which a checkout `token` held qty
 * that have expired. */
static void open_with_expired(tu_fix *f, const char *token, int64_t qty)
{
    tu_fix_open(f, 0, 0);
    tu_fix_stock(f, 1, 1, 5);
    TU_OK(f->ctx, rsv_reserve_one(f->ctx, f->shop, token, strlen(token), 1,
                                  1, qty, 1));
    wait_expired(f);
}

static rsv_sweep_result fresh_result(void)
{
    rsv_sweep_result r;
    memset(&r, 0x5a, sizeof r); /* every field must be written */
    r.version = RSV_SWEEP_RESULT_VERSION;
    return r;
}

/* Expired holds, settled claims and releases, an idle pool and old
 * checkout records, all in one shop: one call reports each. */
START_TEST(report_counts_each_pass)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 50);
    tu_fix_stock(&f, 2, 1, 50);
    /* four checkouts to settle (reserved first: a reserve that refills a
     * pool folds what it finds), three holds that expire (2 + 3 units at
     * item 1, 4 at item 2), then the settlements journalled: three claims
     * and a release */
    const char *settle[] = {"pay-1", "pay-2", "pay-3", "drop-1"};
    for (int i = 0; i < 4; i++)
        TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, settle[i],
                                     strlen(settle[i]), 1 + i % 2, 1, 1, 0));
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("exp-a"), 1, 1, 2, 1));
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("exp-b"), 1, 1, 3, 1));
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("exp-c"), 2, 1, 4, 1));
    for (int i = 0; i < 4; i++) {
        if (i < 3)
            TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK(settle[i])));
        else
            TU_OK(f.ctx, rsv_release(f.ctx, f.shop, TOK(settle[i])));
    }
    wait_expired(&f);
    int64_t journal = count_of(&f, "rsv_journal");
    ck_assert_int_eq(journal, 4);
    /* an idle pool of 6 rows at item 3 */
    tu_fix_pooled(&f, 3, 1, 6);
    char q[300];
    snprintf(q, sizeof q, "UPDATE rsv_ledger SET updated_at = NOW(6) - "
             "INTERVAL 2 HOUR WHERE shop_id = %llu AND item_id = 3",
             (unsigned long long)f.shop);
    tu_exec(f.conn, q);
    /* two claimed checkouts past the retention */
    snprintf(q, sizeof q, "UPDATE rsv_checkouts SET updated_at = "
             "updated_at - INTERVAL 30 DAY WHERE shop_id = %llu AND "
             "checkout_token IN ('pay-1', 'pay-2')",
             (unsigned long long)f.shop);
    tu_exec(f.conn, q);
    int64_t checkouts = count_of(&f, "rsv_checkouts");

    rsv_sweep_result r = fresh_result();
    TU_OK(f.ctx, rsv_sweep_report(f.ctx, f.shop, 0, &r));
    ck_assert_uint_eq(r.version, RSV_SWEEP_RESULT_VERSION);
    ck_assert_int_eq(r.holds_released, 3);
    ck_assert_int_eq(r.units_released, 9);
    ck_assert_int_eq(r.journal_folded, journal);
    ck_assert_int_eq(count_of(&f, "rsv_journal"), 0);
    ck_assert_int_eq(r.pool_rows_drained, 6);
    ck_assert_int_eq(count_of(&f, "rsv_pool"), 0);
    ck_assert_int_eq(r.checkouts_purged, 2);
    ck_assert_int_eq(count_of(&f, "rsv_checkouts"), checkouts - 2);
    /* the units are back: 50 less the two claims at item 1 */
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), 0);
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), 48);

    /* nothing left: every count zero */
    r = fresh_result();
    TU_OK(f.ctx, rsv_sweep_report(f.ctx, f.shop, 0, &r));
    ck_assert_int_eq(r.holds_released + r.units_released + r.journal_folded +
                         r.pool_rows_drained + r.checkouts_purged, 0);
    tu_fix_close(&f);
}
END_TEST

/* max_holds bounds the holds as rsv_sweep does, and the two calls count
 * the same holds. */
START_TEST(report_agrees_with_sweep)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 20);
    const char *tok[] = {"e1", "e2", "e3", "e4", "e5"};
    for (int i = 0; i < 5; i++)
        TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, tok[i], strlen(tok[i]),
                                     1, 1, 2, 1));
    wait_expired(&f);
    rsv_sweep_result r = fresh_result();
    TU_OK(f.ctx, rsv_sweep_report(f.ctx, f.shop, 2, &r));
    ck_assert_int_eq(r.holds_released, 2);
    ck_assert_int_eq(r.units_released, 4);
    ck_assert_int_eq(count_of(&f, "rsv_holds"), 3);
    int64_t released = -1;
    TU_OK(f.ctx, rsv_sweep(f.ctx, f.shop, 0, &released));
    ck_assert_int_eq(released, 3);
    ck_assert_int_eq(count_of(&f, "rsv_holds"), 0);
    tu_fix_close(&f);
}
END_TEST

/* A result it cannot fill is refused before anything is done, counted as
 * a sweep that failed; so are a NULL context and a negative max_holds. */
START_TEST(report_refuses_what_it_cannot_fill)
{
    tu_fix f;
    open_with_expired(&f, "x", 1);
    uint64_t failed0 = 0, failed1 = 0;
    TU_OK(f.ctx, rsv_stats_get(f.ctx, RSV_STAT_FAILED, RSV_OP_SWEEP,
                               &failed0));
    rsv_sweep_result r = fresh_result();
    r.version = RSV_SWEEP_RESULT_VERSION + 1;
    rsv_sweep_result before = r;
    TU_RC(f.ctx, rsv_sweep_report(f.ctx, f.shop, 0, &r), RSV_EINVAL);
    ck_assert(memcmp(&r, &before, sizeof r) == 0);
    ck_assert_ptr_nonnull(strstr(rsv_errmsg(f.ctx), "version"));
    r.version = 0;
    TU_RC(f.ctx, rsv_sweep_report(f.ctx, f.shop, 0, &r), RSV_EINVAL);
    TU_RC(f.ctx, rsv_sweep_report(f.ctx, f.shop, 0, NULL), RSV_EINVAL);
    r = fresh_result();
    TU_RC(f.ctx, rsv_sweep_report(f.ctx, f.shop, -1, &r), RSV_EINVAL);
    ck_assert_int_eq(r.holds_released, 0);
    ck_assert_int_eq(rsv_sweep_report(NULL, f.shop, 0, &r), RSV_EINVAL);
    TU_OK(f.ctx, rsv_stats_get(f.ctx, RSV_STAT_FAILED, RSV_OP_SWEEP,
                               &failed1));
    ck_assert_uint_eq(failed1 - failed0, 4);
    ck_assert_int_eq(count_of(&f, "rsv_holds"), 1); /* nothing was done */
    tu_fix_close(&f);
}
END_TEST

/* A sweep that fails part way (the purge is refused) still reports what
 * committed before it. */
START_TEST(report_counts_work_before_a_failure)
{
    tu_fix f;
    open_with_expired(&f, "y", 2);
    /* The connection inside the caller's transaction: refused at once. */
    tu_exec(f.conn, "START TRANSACTION");
    rsv_sweep_result r = fresh_result();
    TU_RC(f.ctx, rsv_sweep_report(f.ctx, f.shop, 0, &r), RSV_EINTXN);
    ck_assert_int_eq(r.holds_released, 0);
    tu_exec(f.conn, "ROLLBACK");
    /* A user that may not DELETE from rsv_checkouts: the holds come back,
     * the purge fails. */
    MYSQL *adm = tu_fix_admin(&f);
    char q[400];
    /* an old claimed checkout to purge */
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("old"), 1, 1, 1, 0));
    TU_OK(f.ctx, rsv_claim(f.ctx, f.shop, TOK("old")));
    snprintf(q, sizeof q, "UPDATE rsv_checkouts SET updated_at = NOW(6) - "
             "INTERVAL 30 DAY WHERE shop_id = %llu AND checkout_token = "
             "'old'", (unsigned long long)f.shop);
    tu_exec(adm, q);
    tu_exec(adm, "DROP USER IF EXISTS 'rsv_sr_nodel'@'localhost'");
    tu_exec(adm, "CREATE USER 'rsv_sr_nodel'@'localhost'");
    snprintf(q, sizeof q, "GRANT SELECT, INSERT, UPDATE, EXECUTE ON `%s`.* "
             "TO 'rsv_sr_nodel'@'localhost'", tu_db_name());
    tu_exec(adm, q);
    snprintf(q, sizeof q, "GRANT DELETE ON `%s`.`rsv_holds` TO "
             "'rsv_sr_nodel'@'localhost'", tu_db_name());
    tu_exec(adm, q);
    snprintf(q, sizeof q, "GRANT DELETE ON `%s`.`rsv_journal` TO "
             "'rsv_sr_nodel'@'localhost'", tu_db_name());
    tu_exec(adm, q);
    MYSQL *c = mysql_init(NULL);
    ck_assert_ptr_nonnull(mysql_real_connect(
        c, NULL, "rsv_sr_nodel", NULL, tu_db_name(), 0,
        getenv("RSV_TEST_SOCKET"), 0));
    rsv_ctx *nodel = NULL;
    TU_OK(nodel, rsv_open(&nodel, c, NULL));
    r = fresh_result();
    int rc = rsv_sweep_report(nodel, f.shop, 0, &r);
    ck_assert_msg(rc == RSV_EDB, "got %s: %s", rsv_code_name(rc),
                  rsv_errmsg(nodel));
    ck_assert_int_eq(r.holds_released, 1);
    ck_assert_int_eq(r.units_released, 2);
    ck_assert_int_eq(r.journal_folded, 1);
    ck_assert_int_eq(r.checkouts_purged, 0);
    ck_assert_int_eq(count_of(&f, "rsv_holds"), 0);
    rsv_close(nodel);
    mysql_close(c);
    tu_exec(adm, "DROP USER 'rsv_sr_nodel'@'localhost'");
    tu_fix_close(&f);
}
END_TEST

int main(void)
{
    tu_db_create("sweep_report");
    Suite *s = suite_create("sweep_report");
    tu_add(s, "report_counts_each_pass", report_counts_each_pass);
    tu_add(s, "report_agrees_with_sweep", report_agrees_with_sweep);
    tu_add(s, "report_refuses_what_it_cannot_fill",
           report_refuses_what_it_cannot_fill);
    tu_add(s, "report_counts_work_before_a_failure",
           report_counts_work_before_a_failure);
    int rc = tu_run(s);
    tu_db_drop();
    return rc;
}
