/*
 * check_migrate.c - the migration handle (reserve/migrate.h) against a
 * stand-in for an old store kept in this process (counters per item and
 * a table of holds, as the Redis design kept them): which store answers
 * at each stage, what reaches the other one, how the answers are
 * classified and counted, the sample of mismatches and the counters in
 * the tables, a full queue, the stage followed after a change (the time
 * is printed, not asserted), and a stage table that cannot be read; and
 * the same through the handover calls (the old store asked by the test,
 * primary's work drained from the outbox), which must count and answer
 * as the callback does; and the counters' names, as the text writes them.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "reserve/batch.h"
#include "reserve/migrate.h"
#include "reserve/stats.h"
#include "testutil.h"

/* ---- the old store ---- */
#define OLD_HOLDS 64
typedef struct old_store {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t stock;            /* one item */
    struct {
        char tok[32];
        int64_t qty;
        int state;            /* 1 held, 2 claimed, 3 released */
    } h[OLD_HOLDS];
    int n;
    int calls;
    int calls_off_thread;     /* made on a thread other than the test's */
    int allow_off;            /* calls off the test's thread that may
                                 go on (-1: all); the others wait */
    int fail_release;         /* releases fail (RSV_ECONN) */
    pthread_t main_thread;
} old_store;

static int old_find(old_store *o, const void *t, size_t len)
{
    for (int i = 0; i < o->n; i++)
        if (strlen(o->h[i].tok) == len && memcmp(o->h[i].tok, t, len) == 0)
            return i;
    return -1;
}

static int old_fn(void *user, uint32_t op, uint64_t shop, const void *token,
                  size_t len, uint64_t item, uint64_t loc, int64_t qty,
                  int64_t ttl_ms)
{
    (void)shop; (void)item; (void)loc; (void)ttl_ms;
    old_store *o = user;
    pthread_mutex_lock(&o->mu);
    int off = !pthread_equal(pthread_self(), o->main_thread);
    while (off && o->allow_off == 0)
        pthread_cond_wait(&o->cv, &o->mu);
    if (off && o->allow_off > 0)
        o->allow_off--;
    o->calls++;
    o->calls_off_thread += off;
    int rc = RSV_OK, i = old_find(o, token, len);
    if ((len >= 4 && memcmp(token, "fail", 4) == 0) ||
        (o->fail_release && op == RSV_OP_RELEASE))
        rc = RSV_ECONN; /* the old store failing */
    else if (op == RSV_OP_RESERVE) {
        if (o->stock < qty)
            rc = RSV_EOUTOFSTOCK;
        else if (i < 0 && o->n < OLD_HOLDS && len < 32) {
            o->stock -= qty;
            i = o->n++;
            memcpy(o->h[i].tok, token, len);
            o->h[i].tok[len] = 0;
            o->h[i].qty = qty;
            o->h[i].state = 1;
        }
    } else if (i < 0)
        rc = RSV_ENOTFOUND;
    else if (op == RSV_OP_CLAIM)
        rc = o->h[i].state == 1 ? (o->h[i].state = 2, RSV_OK)
             : o->h[i].state == 2 ? RSV_ECLAIMED : RSV_ERELEASED;
    else if (o->h[i].state == 2)
        rc = RSV_ECLAIMED;
    else if (o->h[i].state == 1) {
        o->h[i].state = 3;
        o->stock += o->h[i].qty;
    }
    pthread_mutex_unlock(&o->mu);
    return rc;
}

static void old_init(old_store *o, int64_t stock)
{
    memset(o, 0, sizeof *o);
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->cv, NULL);
    o->stock = stock;
    o->allow_off = -1;
    o->main_thread = pthread_self();
}

static int old_state(old_store *o, const char *tok)
{
    pthread_mutex_lock(&o->mu);
    int i = old_find(o, tok, strlen(tok));
    int st = i < 0 ? 0 : o->h[i].state;
    pthread_mutex_unlock(&o->mu);
    return st;
}

static void gate(old_store *o, int allow)
{
    pthread_mutex_lock(&o->mu);
    o->allow_off = allow;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
}

/* ---- helpers ---- */
static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static void set_stage(MYSQL *adm, uint64_t shop, int stage)
{
    char q[512];
    /* the rule of rsv-admin migrate: the row of rsv_migration_change
     * locked from reading the highest version to the commit */
    tu_exec(adm, "START TRANSACTION");
    ck_assert_int_eq(tu_i64(adm, "SELECT COUNT(*) FROM rsv_migration_change "
                                 "WHERE id = 1 FOR UPDATE"), 1);
    snprintf(q, sizeof q,
             "INSERT INTO rsv_migration_stage (shop_id, stage, version, "
             "changed_at, reason) SELECT %llu, %d, COALESCE(MAX(version), 0) "
             "+ 1, NOW(6), 'check_migrate' FROM rsv_migration_stage "
             "ON DUPLICATE KEY UPDATE stage = VALUES(stage), "
             "version = VALUES(version), changed_at = VALUES(changed_at)",
             (unsigned long long)shop, stage);
    tu_exec(adm, q);
    tu_exec(adm, "UPDATE rsv_migration_change SET changes = changes + 1, "
                 "changed_at = NOW(6) WHERE id = 1");
    tu_exec(adm, "COMMIT");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Wait until the handle follows the shop at `stage`: returns the seconds
 * it took (the test fails after 30 s). */
static double follow(rsv_migration *m, uint64_t shop, int stage)
{
    double t0 = now_s();
    int32_t st = -1;
    for (;;) {
        ck_assert_int_eq(rsv_migrate_stage(m, shop, &st), RSV_OK);
        if (st == stage)
            return now_s() - t0;
        ck_assert_msg(now_s() - t0 < 30, "stage %d never followed", stage);
        sleep_us(5000);
    }
}

static uint64_t stat_of(rsv_migration *m, uint64_t shop, uint32_t k)
{
    uint64_t n = 0;
    ck_assert_int_eq(rsv_migrate_stat(m, shop, 0, k, &n), RSV_OK);
    return n;
}

static int32_t status_of(rsv_ctx *ctx, uint64_t shop, const char *tok)
{
    int32_t st = 0;
    int64_t units = 0, exp = 0;
    int rc = rsv_checkout_status(ctx, shop, tok, strlen(tok), &st, &units,
                                 &exp);
    return rc == RSV_ENOTFOUND ? 0 : (TU_RC(ctx, rc, RSV_OK), st);
}

static rsv_migration *open_handle(tu_fix *f, old_store *o, uint32_t qmax)
{
    char dsn[512];
    tu_dsn(dsn, sizeof dsn);
    rsv_migration *m = NULL;
    TU_OK(f->ctx, rsv_migrate_open(&m, f->ctx, dsn, qmax));
    ck_assert_int_eq(rsv_migrate_set_refresh_ms(m, 100), RSV_OK);
    ck_assert_int_eq(rsv_migrate_set_legacy(m, old_fn, o), RSV_OK);
    return m;
}

/* The usual scene: a fixture whose item 1 at location 1 has lib_stock
 * units in libreserve and old_stock in the old store, and a handle over
 * its context (queue of qmax, 0: the default). */
static rsv_migration *open_scene(tu_fix *f, old_store *o, int64_t lib_stock,
                                 int64_t old_stock, uint32_t qmax)
{
    tu_fix_open(f, 0, 0);
    tu_fix_stock(f, 1, 1, lib_stock);
    old_init(o, old_stock);
    return open_handle(f, o, qmax);
}

/* Set the fixture's shop at `stage` and wait until the handle follows. */
static void move_to(rsv_migration *m, tu_fix *f, int stage)
{
    set_stage(tu_fix_admin(f), f->shop, stage);
    follow(m, f->shop, stage);
}

/* The fixture's shop gets marked for a compare within a few flushes. */
static void wait_marked(tu_fix *f)
{
    char q[512];
    snprintf(q, sizeof q, "SELECT needs_compare FROM rsv_migration_stage "
             "WHERE shop_id = %llu", (unsigned long long)f->shop);
    for (int i = 0; i < 300 && tu_i64(tu_fix_admin(f), q) == 0; i++)
        sleep_us(20000);
    ck_assert_int_eq(tu_i64(tu_fix_admin(f), q), 1);
}

#define TOK(s) (s), strlen(s)

/* A shop without a row: the old store alone, nothing queued. */
START_TEST(old_stage_reaches_only_the_old_store)
{
    tu_fix f;
    old_store o;
    rsv_migration *m = open_scene(&f, &o, 10, 5, 0);
    ck_assert_int_eq(rsv_migrate_reserve_one(m, f.shop, TOK("a"), 1, 1, 2, 0),
                     RSV_OK);
    ck_assert_int_eq(rsv_migrate_claim(m, f.shop, TOK("a")), RSV_OK);
    ck_assert_int_eq(rsv_migrate_reserve_one(m, f.shop, TOK("b"), 1, 1, 9, 0),
                     RSV_EOUTOFSTOCK);
    /* a token libreserve could not take is refused at every stage */
    char longtok[RSV_TOKEN_MAX + 1];
    memset(longtok, 'x', sizeof longtok);
    ck_assert_int_eq(rsv_migrate_claim(m, f.shop, longtok, sizeof longtok),
                     RSV_ETOKEN);
    ck_assert_int_eq(rsv_migrate_release(m, f.shop, "", 0), RSV_ETOKEN);
    ck_assert_int_eq(rsv_migrate_drain(m, 10000), RSV_OK);
    ck_assert_int_eq(o.calls, 3);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_OFFERED), 0);
    ck_assert_int_eq(status_of(f.ctx, f.shop, "a"), 0);
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), 10);
    /* no old store: refused, nothing sent */
    ck_assert_int_eq(rsv_migrate_set_legacy(m, NULL, NULL), RSV_OK);
    ck_assert_int_eq(rsv_migrate_claim(m, f.shop, TOK("a")), RSV_EINVAL);
    rsv_migrate_close(m);
    tu_fix_close(&f);
}
END_TEST

/* Shadow: the buyer gets the old store's answer; libreserve makes the
 * same call off the request path, and the two are classified. */
START_TEST(shadow_mirrors_and_classifies)
{
    tu_fix f;
    old_store o;
    rsv_migration *m = open_scene(&f, &o, 10, 3, 0);
    /* a hold the old store made before shadowing began */
    ck_assert_int_eq(rsv_migrate_reserve_one(m, f.shop, TOK("before"), 1, 1,
                                             1, 0), RSV_OK);
    set_stage(tu_fix_admin(&f), f.shop, RSV_STAGE_SHADOW);
    printf("shadow followed after %.3f s (refresh 100 ms)\n",
           follow(m, f.shop, RSV_STAGE_SHADOW));

    ck_assert_int_eq(rsv_migrate_reserve_one(m, f.shop, TOK("s1"), 1, 1, 2, 0),
                     RSV_OK);
    /* the old store has 0 left, libreserve 8: old refused, new accepted,
     * and libreserve's hold given back */
    ck_assert_int_eq(rsv_migrate_reserve_one(m, f.shop, TOK("s2"), 1, 1, 1, 0),
                     RSV_EOUTOFSTOCK);
    ck_assert_int_eq(rsv_migrate_claim(m, f.shop, TOK("s1")), RSV_OK);
    ck_assert_int_eq(rsv_migrate_claim(m, f.shop, TOK("before")), RSV_OK);
    ck_assert_int_eq(rsv_migrate_claim(m, f.shop, TOK("s1")), RSV_ECLAIMED);
    ck_assert_int_eq(rsv_migrate_drain(m, 10000), RSV_OK);

    ck_assert_int_eq(status_of(f.ctx, f.shop, "s1"), RSV_STATUS_CLAIMED);
    ck_assert_int_eq(status_of(f.ctx, f.shop, "s2"), RSV_STATUS_RELEASED);

    /* a claim the old store refuses is not made on libreserve (it could
     * not be undone): libreserve's answer is read from the checkout */
    pthread_mutex_lock(&o.mu);
    o.stock += 1;
    pthread_mutex_unlock(&o.mu);
    ck_assert_int_eq(rsv_migrate_reserve_one(m, f.shop, TOK("s3"), 1, 1, 1, 0),
                     RSV_OK);
    pthread_mutex_lock(&o.mu);
    o.h[old_find(&o, "s3", 2)].state = 3; /* gone in the old store */
    pthread_mutex_unlock(&o.mu);
    ck_assert_int_eq(rsv_migrate_claim(m, f.shop, TOK("s3")), RSV_ERELEASED);
    ck_assert_int_eq(rsv_migrate_drain(m, 10000), RSV_OK);
    ck_assert_int_eq(status_of(f.ctx, f.shop, "s3"), RSV_STATUS_HELD);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_OLD_REFUSED_NEW_ACCEPTED), 2);
    ck_assert_int_eq(rsv_migrate_release(m, f.shop, TOK("s3")), RSV_OK);
    ck_assert_int_eq(rsv_migrate_drain(m, 10000), RSV_OK);
    ck_assert_int_eq(status_of(f.ctx, f.shop, "s3"), RSV_STATUS_RELEASED);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_BOTH_ACCEPTED), 4);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_BOTH_REFUSED), 1);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_OLD_REFUSED_NEW_ACCEPTED), 2);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_UNKNOWN), 1);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_OFFERED), 8);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_APPLIED), 8);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_DROPPED), 0);
    ck_assert_int_eq(o.calls_off_thread, 0);

    /* the samples and the counters reach the tables within an interval */
    char q[512];
    snprintf(q, sizeof q, "SELECT COUNT(*) FROM rsv_migration_counts WHERE "
             "shop_id = %llu AND class = 'both_accepted' AND n = 4",
             (unsigned long long)f.shop);
    for (int i = 0; i < 300 && tu_i64(tu_fix_admin(&f), q) == 0; i++)
        sleep_us(20000);
    ck_assert_int_eq(tu_i64(tu_fix_admin(&f), q), 1);
    snprintf(q, sizeof q, "SELECT COUNT(*) FROM rsv_migration_mismatch WHERE "
             "shop_id = %llu AND ((class = 'old_refused_new_accepted' AND "
             "checkout_token = 's2' AND old_code = %d AND new_code = 0 AND "
             "item_id = 1 AND quantity = 1) OR (class = 'unknown' AND "
             "checkout_token = 'before' AND new_code = %d))",
             (unsigned long long)f.shop, RSV_EOUTOFSTOCK, RSV_ENOTFOUND);
    for (int i = 0; i < 300 && tu_i64(tu_fix_admin(&f), q) < 2; i++)
        sleep_us(20000);
    ck_assert_int_eq(tu_i64(tu_fix_admin(&f), q), 2);

    char text[8192];
    size_t need = 0;
    ck_assert_int_eq(rsv_migrate_prometheus(m, text, sizeof text, &need),
                     RSV_OK);
    snprintf(q, sizeof q, "libreserve_migration_calls_total{shop=\"%llu\","
             "class=\"old_refused_new_accepted\"} 2\n",
             (unsigned long long)f.shop);
    ck_assert_msg(strstr(text, q), "%s", text);
    ck_assert_int_eq(rsv_migrate_prometheus(m, text, 10, &need), RSV_ERANGE);
    ck_assert_uint_gt(need, 10);
    rsv_migrate_close(m);
    tu_fix_close(&f);
}
END_TEST

/* Primary: libreserve answers; the old store is kept current on the
 * handle's thread. */
START_TEST(primary_keeps_the_old_store_current)
{
    tu_fix f;
    old_store o;
    rsv_migration *m = open_scene(&f, &o, 2, 10, 0);
    move_to(m, &f, RSV_STAGE_SHADOW);
    move_to(m, &f, RSV_STAGE_PRIMARY);
    ck_assert_int_eq(rsv_migrate_reserve_one(m, f.shop, TOK("p1"), 1, 1, 2, 0),
                     RSV_OK);
    /* libreserve has nothing left, the old store has: libreserve's answer
     * is the buyer's, and the old store's hold is given back */
    ck_assert_int_eq(rsv_migrate_reserve_one(m, f.shop, TOK("p2"), 1, 1, 1, 0),
                     RSV_EOUTOFSTOCK);
    ck_assert_int_eq(rsv_migrate_drain(m, 10000), RSV_OK);
    ck_assert_int_eq(old_state(&o, "p1"), 1);
    ck_assert_int_eq(old_state(&o, "p2"), 3);
    ck_assert_int_eq(o.stock, 8);
    ck_assert_int_eq(o.calls_off_thread, 3);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_BOTH_ACCEPTED), 1);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_OLD_ACCEPTED_NEW_REFUSED), 1);

    /* back to shadow (the kill switch): the hold made while primary is in
     * both stores, so its claim is accepted by both */
    move_to(m, &f, RSV_STAGE_SHADOW);
    ck_assert_int_eq(rsv_migrate_claim(m, f.shop, TOK("p1")), RSV_OK);
    ck_assert_int_eq(rsv_migrate_drain(m, 10000), RSV_OK);
    ck_assert_int_eq(status_of(f.ctx, f.shop, "p1"), RSV_STATUS_CLAIMED);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_BOTH_ACCEPTED), 2);

    /* complete: libreserve alone */
    move_to(m, &f, RSV_STAGE_COMPLETE);
    int calls = o.calls;
    ck_assert_int_eq(rsv_migrate_release(m, f.shop, TOK("p2")), RSV_ENOTFOUND);
    ck_assert_int_eq(rsv_migrate_drain(m, 10000), RSV_OK);
    ck_assert_int_eq(o.calls, calls);
    rsv_migrate_close(m);
    tu_fix_close(&f);
}
END_TEST

static void *open_gate_later(void *arg)
{
    sleep_us(300000);
    gate(arg, -1);
    return NULL;
}

/* Back to shadow with mirroring work still queued: the old store decides
 * the next call only once it has seen what libreserve decided before (a
 * checkout reserved while primary and claimed just after the flip). */
START_TEST(flip_waits_for_the_queued_work)
{
    tu_fix f;
    old_store o;
    rsv_migration *m = open_scene(&f, &o, 10, 10, 0);
    MYSQL *adm = tu_fix_admin(&f);
    set_stage(adm, f.shop, RSV_STAGE_SHADOW);
    follow(m, f.shop, RSV_STAGE_SHADOW);
    set_stage(adm, f.shop, RSV_STAGE_PRIMARY);
    follow(m, f.shop, RSV_STAGE_PRIMARY);
    gate(&o, 0);
    ck_assert_int_eq(rsv_migrate_reserve_one(m, f.shop, TOK("f1"), 1, 1, 1, 0),
                     RSV_OK);
    ck_assert_int_eq(rsv_migrate_reserve_one(m, f.shop, TOK("f2"), 1, 1, 1, 0),
                     RSV_OK);
    set_stage(adm, f.shop, RSV_STAGE_SHADOW);
    /* the first mirror call ends; the thread, its refresh due by then,
     * reads the new stage before the second, which waits */
    sleep_us(300000);
    gate(&o, 1);
    follow(m, f.shop, RSV_STAGE_SHADOW);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, open_gate_later, &o), 0);
    ck_assert_int_eq(rsv_migrate_claim(m, f.shop, TOK("f2")), RSV_OK);
    pthread_join(t, NULL);
    ck_assert_int_eq(old_state(&o, "f2"), 2);
    ck_assert_int_eq(rsv_migrate_drain(m, 10000), RSV_OK);
    ck_assert_int_eq(status_of(f.ctx, f.shop, "f2"), RSV_STATUS_CLAIMED);
    rsv_migrate_close(m);
    tu_fix_close(&f);
}
END_TEST

/* A full queue drops the work, counts it and marks the shop for a
 * compare; the buyer's call is not held up. */
START_TEST(full_queue_drops_and_marks)
{
    tu_fix f;
    old_store o;
    rsv_migration *m = open_scene(&f, &o, 100, 100, 2);
    move_to(m, &f, RSV_STAGE_SHADOW);
    move_to(m, &f, RSV_STAGE_PRIMARY);
    gate(&o, 0);
    char tok[16];
    for (int i = 0; i < 6; i++) {
        snprintf(tok, sizeof tok, "q%d", i);
        ck_assert_int_eq(rsv_migrate_reserve_one(m, f.shop, TOK(tok), 1, 1, 1,
                                                 0), RSV_OK);
    }
    gate(&o, -1);
    ck_assert_int_eq(rsv_migrate_drain(m, 10000), RSV_OK);
    uint64_t offered = stat_of(m, f.shop, RSV_MIG_OFFERED);
    uint64_t applied = stat_of(m, f.shop, RSV_MIG_APPLIED);
    uint64_t dropped = stat_of(m, f.shop, RSV_MIG_DROPPED);
    printf("queue of 2: offered %llu, applied %llu, dropped %llu\n",
           (unsigned long long)offered, (unsigned long long)applied,
           (unsigned long long)dropped);
    ck_assert_int_eq(offered, 6);
    ck_assert_int_eq(offered, applied + dropped);
    ck_assert_uint_ge(dropped, 3); /* one in the thread's hands, two queued */
    wait_marked(&f);
    rsv_migrate_close(m);
    tu_fix_close(&f);
}
END_TEST

/* A stage table that cannot be read: the last stages are kept (a primary
 * shop stays primary), the failures counted; then followed again. */
START_TEST(unreadable_stage_keeps_the_last)
{
    tu_fix f;
    old_store o;
    rsv_migration *m = open_scene(&f, &o, 10, 10, 0);
    MYSQL *adm = tu_fix_admin(&f);
    set_stage(adm, f.shop, RSV_STAGE_SHADOW);
    follow(m, f.shop, RSV_STAGE_SHADOW);
    set_stage(adm, f.shop, RSV_STAGE_PRIMARY);
    follow(m, f.shop, RSV_STAGE_PRIMARY);
    uint64_t before = 0, after = 0;
    ck_assert_int_eq(rsv_migrate_stat(m, 0, 1, RSV_MIG_STAGE_READ_FAILED,
                                      &before), RSV_OK);
    tu_exec(adm, "RENAME TABLE rsv_migration_stage TO rsv_migration_stage_x");
    for (int i = 0; i < 1500 && after < before + 2; i++) {
        sleep_us(20000);
        rsv_migrate_stat(m, 0, 1, RSV_MIG_STAGE_READ_FAILED, &after);
    }
    tu_exec(adm, "RENAME TABLE rsv_migration_stage_x TO rsv_migration_stage");
    ck_assert_uint_ge(after, before + 2);
    int32_t st = -1;
    ck_assert_int_eq(rsv_migrate_stage(m, f.shop, &st), RSV_OK);
    ck_assert_int_eq(st, RSV_STAGE_PRIMARY);
    ck_assert_int_eq(rsv_migrate_reserve_one(m, f.shop, TOK("u1"), 1, 1, 1, 0),
                     RSV_OK);
    ck_assert_int_eq(status_of(f.ctx, f.shop, "u1"), RSV_STATUS_HELD);
    set_stage(adm, f.shop, RSV_STAGE_SHADOW);
    follow(m, f.shop, RSV_STAGE_SHADOW);
    rsv_migrate_close(m);
    tu_fix_close(&f);
}
END_TEST

/* Without the migration tables the handle is refused, naming the fix. */
START_TEST(no_tables_no_handle)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    MYSQL *adm = tu_fix_admin(&f);
    tu_exec(adm, "RENAME TABLE rsv_migration_stage TO rsv_migration_stage_y");
    char dsn[512];
    tu_dsn(dsn, sizeof dsn);
    rsv_migration *m = (rsv_migration *)1;
    int rc = rsv_migrate_open(&m, f.ctx, dsn, 0);
    tu_exec(adm, "RENAME TABLE rsv_migration_stage_y TO rsv_migration_stage");
    TU_RC(f.ctx, rc, RSV_ESCHEMA);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(rsv_errmsg(f.ctx), "schema.sql"), "%s",
                  rsv_errmsg(f.ctx));
    ck_assert_int_eq(rsv_migrate_open(&m, NULL, dsn, 0), RSV_EINVAL);
    ck_assert_int_eq(rsv_migrate_reserve_one(NULL, 1, TOK("x"), 1, 1, 1, 0),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_migrate_set_refresh_ms(NULL, 100), RSV_EINVAL);
    tu_fix_close(&f);
}
END_TEST

/* ---- the handover calls: the old store asked by the test itself ---- */

/* One call of the checkout through route + *_answered, the old store
 * asked here (on the test's thread) where the stage asks it. */
static int ho_call(rsv_migration *m, old_store *o, uint32_t op, uint64_t shop,
                   const char *tok, int64_t qty)
{
    int32_t st = -1;
    ck_assert_int_eq(rsv_migrate_route(m, shop, 0, &st), RSV_OK);
    int old = 0;
    if (st <= RSV_STAGE_SHADOW)
        old = old_fn(o, op, shop, TOK(tok), op == RSV_OP_RESERVE ? 1 : 0,
                     op == RSV_OP_RESERVE ? 1 : 0, qty, 0);
    if (op == RSV_OP_RESERVE)
        return rsv_migrate_reserve_one_answered(m, st, shop, TOK(tok), 1, 1,
                                                qty, 0, old);
    if (op == RSV_OP_CLAIM)
        return rsv_migrate_claim_answered(m, st, shop, TOK(tok), old);
    return rsv_migrate_release_answered(m, st, shop, TOK(tok), old);
}

/* Take one outbox item, make its call on the old store, report it.
 * Returns the item's op, 0 when the outbox gave nothing. */
static uint32_t pump_one(rsv_migration *m, old_store *o)
{
    uint64_t ticket = 0, shop = 0, item = 0, loc = 0;
    uint32_t op = 0;
    unsigned char tok[RSV_TOKEN_MAX];
    size_t len = 0;
    int64_t qty = 0, ttl = 0;
    int rc = rsv_migrate_mirror_next(m, 0, &ticket, &op, &shop, tok,
                                     sizeof tok, &len, &item, &loc, &qty,
                                     &ttl);
    if (rc == RSV_EBUSY)
        return 0;
    ck_assert_int_eq(rc, RSV_OK);
    int old = old_fn(o, op, shop, tok, len, item, loc, qty, ttl);
    ck_assert_int_eq(rsv_migrate_mirror_done(m, ticket, old), RSV_OK);
    return op;
}

/* Every offered work item done: the handle's thread's, and the outbox's
 * by this thread. */
static void settle(rsv_migration *m, old_store *o)
{
    for (int i = 0; i < 3000; i++) {
        while (pump_one(m, o))
            ;
        if (rsv_migrate_drain(m, 10) == RSV_OK)
            return;
    }
    ck_abort_msg("the work never settled");
}

/* What one scenario left behind, to compare the two paths. */
typedef struct outcome {
    int answers[16];
    uint64_t counts[RSV_MIG_OFFERED + 3];
    int64_t old_stock, lib_on_hand, lib_held;
    int old_states[6], lib_states[6];
} outcome;

/* The same scenario through the old store's function (handover 0) or
 * the handover calls (1): shadow with an oversell, a claim of a hold
 * made before shadowing, a repeat, an old store failing; primary with an
 * undersell (the old store's hold given back) and a mirrored claim; back
 * to shadow; complete. */
static void scenario(int handover, outcome *out)
{
    static const char *const toks[6] = {"before", "s1", "s2", "p1", "pbig",
                                        "fail1"};
    tu_fix f;
    old_store o;
    rsv_migration *m = open_scene(&f, &o, 10, 3, 0);
    if (handover)
        ck_assert_int_eq(rsv_migrate_set_legacy(m, NULL, NULL), RSV_OK);
    int n = 0;
#define CALL(op, tok, qty)                                                   \
    (out->answers[n++] =                                                     \
         handover ? ho_call(m, &o, op, f.shop, tok, qty)                     \
         : op == RSV_OP_RESERVE                                              \
             ? rsv_migrate_reserve_one(m, f.shop, TOK(tok), 1, 1, qty, 0)    \
         : op == RSV_OP_CLAIM ? rsv_migrate_claim(m, f.shop, TOK(tok))       \
                              : rsv_migrate_release(m, f.shop, TOK(tok)))
    memset(out, 0, sizeof *out);
    CALL(RSV_OP_RESERVE, "before", 1);
    move_to(m, &f, RSV_STAGE_SHADOW);
    CALL(RSV_OP_RESERVE, "s1", 2);
    CALL(RSV_OP_RESERVE, "s2", 1); /* the old store has none left */
    CALL(RSV_OP_CLAIM, "s1", 0);
    CALL(RSV_OP_CLAIM, "before", 0);
    CALL(RSV_OP_CLAIM, "s1", 0);
    CALL(RSV_OP_RESERVE, "fail1", 1);
    if (handover)
        settle(m, &o);
    else
        ck_assert_int_eq(rsv_migrate_drain(m, 10000), RSV_OK);
    move_to(m, &f, RSV_STAGE_PRIMARY);
    pthread_mutex_lock(&o.mu);
    o.stock += 20;
    pthread_mutex_unlock(&o.mu);
    CALL(RSV_OP_RESERVE, "p1", 1);
    CALL(RSV_OP_RESERVE, "pbig", 9); /* libreserve has 7 left */
    CALL(RSV_OP_CLAIM, "p1", 0);
    if (handover)
        settle(m, &o);
    else
        ck_assert_int_eq(rsv_migrate_drain(m, 10000), RSV_OK);
    move_to(m, &f, RSV_STAGE_SHADOW);
    CALL(RSV_OP_RELEASE, "p1", 0); /* claimed in both: refused */
    if (handover)
        settle(m, &o);
    else
        ck_assert_int_eq(rsv_migrate_drain(m, 10000), RSV_OK);
    move_to(m, &f, RSV_STAGE_COMPLETE);
    CALL(RSV_OP_RELEASE, "s2", 0);
#undef CALL
    for (uint32_t k = 0; k < RSV_MIG_STAGE_READ_FAILED; k++)
        out->counts[k] = stat_of(m, f.shop, k);
    out->old_stock = o.stock;
    out->lib_on_hand = tu_on_hand(f.ctx, f.shop, 1, 1);
    out->lib_held = tu_held(f.ctx, f.shop, 1, 1);
    for (int i = 0; i < 6; i++) {
        out->old_states[i] = old_state(&o, toks[i]);
        out->lib_states[i] = status_of(f.ctx, f.shop, toks[i]);
    }
    /* the function's calls at primary: on the handle's thread */
    ck_assert_int_eq(o.calls_off_thread, handover ? 0 : 4);
    rsv_migrate_close(m);
    tu_fix_close(&f);
}

/* The handover calls answer and count exactly as the old store's
 * function does, stage by stage. */
START_TEST(handover_answers_and_counts_as_the_callback)
{
    outcome cb, ho;
    scenario(0, &cb);
    scenario(1, &ho);
    for (int i = 0; i < 16; i++)
        ck_assert_msg(cb.answers[i] == ho.answers[i], "call %d: %d vs %d", i,
                      cb.answers[i], ho.answers[i]);
    for (int k = 0; k < RSV_MIG_STAGE_READ_FAILED; k++)
        ck_assert_msg(cb.counts[k] == ho.counts[k], "%s: %llu vs %llu",
                      k == RSV_MIG_OFFERED ? "offered" : "a class",
                      (unsigned long long)cb.counts[k],
                      (unsigned long long)ho.counts[k]);
    ck_assert_int_eq(cb.old_stock, ho.old_stock);
    ck_assert_int_eq(cb.lib_on_hand, ho.lib_on_hand);
    ck_assert_int_eq(cb.lib_held, ho.lib_held);
    for (int i = 0; i < 6; i++) {
        ck_assert_int_eq(cb.old_states[i], ho.old_states[i]);
        ck_assert_int_eq(cb.lib_states[i], ho.lib_states[i]);
    }
    /* and the scenario is the one meant */
    ck_assert_int_eq(ho.answers[2], RSV_EOUTOFSTOCK);
    ck_assert_int_eq(ho.answers[5], RSV_ECLAIMED);
    ck_assert_int_eq(ho.answers[6], RSV_ECONN);
    ck_assert_int_eq(ho.answers[8], RSV_EOUTOFSTOCK);
    ck_assert_int_eq(ho.counts[RSV_MIG_OLD_REFUSED_NEW_ACCEPTED], 1);
    ck_assert_int_eq(ho.counts[RSV_MIG_OLD_ACCEPTED_NEW_REFUSED], 1);
    ck_assert_int_eq(ho.counts[RSV_MIG_UNKNOWN], 1);
    ck_assert_int_eq(ho.counts[RSV_MIG_OLD_FAILED], 1);
    ck_assert_int_eq(ho.counts[RSV_MIG_BOTH_ACCEPTED], 4);
    ck_assert_int_eq(ho.counts[RSV_MIG_BOTH_REFUSED], 2);
    ck_assert_int_eq(ho.counts[RSV_MIG_OFFERED], 9);
    ck_assert_int_eq(ho.counts[RSV_MIG_APPLIED], 9);
    ck_assert_int_eq(ho.counts[RSV_MIG_DROPPED], 0);
    /* the old store gave back the hold libreserve refused: 3 + 20 - 1
     * (before) - 2 (s1) - 1 (p1) */
    ck_assert_int_eq(ho.old_states[4], 3);
    ck_assert_int_eq(ho.old_stock, 19);
    ck_assert_int_eq(ho.lib_states[3], RSV_STATUS_CLAIMED);
}
END_TEST

/* Primary's work through the outbox: the old store's side handed out
 * one item at a time; the undersell's hold given back by a follow-up
 * release; the books balance with items handed out; a flip back waits
 * for them (RSV_ROUTE_NOWAIT says so); an item never done is dropped at
 * close and the shop marked for a compare. */
START_TEST(outbox_mirrors_primary)
{
    tu_fix f;
    old_store o;
    rsv_migration *m = open_scene(&f, &o, 2, 10, 0);
    ck_assert_int_eq(rsv_migrate_set_legacy(m, NULL, NULL), RSV_OK);
    move_to(m, &f, RSV_STAGE_SHADOW);
    move_to(m, &f, RSV_STAGE_PRIMARY);
    /* the ordinary calls work at primary without a function */
    ck_assert_int_eq(rsv_migrate_reserve_one(m, f.shop, TOK("o1"), 1, 1, 3, 0),
                     RSV_EOUTOFSTOCK);
    uint64_t ticket = 0, shop = 0, item = 0, loc = 0;
    uint32_t op = 0;
    unsigned char tok[RSV_TOKEN_MAX];
    size_t len = 0;
    int64_t qty = 0, ttl = 0;
    /* a buffer too small: the size needed, the item kept */
    ck_assert_int_eq(rsv_migrate_mirror_next(m, 0, &ticket, &op, &shop, tok, 1,
                                             &len, &item, &loc, &qty, &ttl),
                     RSV_ERANGE);
    ck_assert_uint_eq(len, 2);
    ck_assert_int_eq(rsv_migrate_mirror_next(m, 1000, &ticket, &op, &shop, tok,
                                             sizeof tok, &len, &item, &loc,
                                             &qty, &ttl), RSV_OK);
    ck_assert_uint_eq(op, RSV_OP_RESERVE);
    ck_assert_uint_eq(shop, f.shop);
    ck_assert_uint_eq(len, 2);
    ck_assert_int_eq(memcmp(tok, "o1", 2), 0);
    ck_assert_int_eq(qty, 3);
    ck_assert_int_eq(item, 1);
    /* handed out, not done: waiting */
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_OFFERED), 1);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_APPLIED), 0);
    ck_assert_int_eq(rsv_migrate_drain(m, 0), RSV_EBUSY);
    char text[8192];
    size_t need = 0;
    ck_assert_int_eq(rsv_migrate_prometheus(m, text, sizeof text, &need),
                     RSV_OK);
    ck_assert_msg(strstr(text, "libreserve_migration_queue_depth 1\n"), "%s",
                  text);
    /* a flip back waits for it */
    set_stage(tu_fix_admin(&f), f.shop, RSV_STAGE_SHADOW);
    follow(m, f.shop, RSV_STAGE_SHADOW);
    int32_t st = -1;
    ck_assert_int_eq(rsv_migrate_route(m, f.shop, RSV_ROUTE_NOWAIT, &st),
                     RSV_EBUSY);
    ck_assert_int_eq(st, RSV_STAGE_SHADOW);
    /* the old store accepts what libreserve refused ... */
    int old = old_fn(&o, op, shop, tok, len, item, loc, qty, ttl);
    ck_assert_int_eq(old, RSV_OK);
    ck_assert_int_eq(rsv_migrate_mirror_done(m, ticket, old), RSV_OK);
    ck_assert_int_eq(rsv_migrate_mirror_done(m, ticket, old), RSV_EINVAL);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_OLD_ACCEPTED_NEW_REFUSED), 1);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_APPLIED), 1);
    /* ... so its hold comes back as a release, not offered on its own */
    ck_assert_int_eq(rsv_migrate_route(m, f.shop, RSV_ROUTE_NOWAIT, &st),
                     RSV_EBUSY);
    ck_assert_int_eq(rsv_migrate_drain(m, 0), RSV_EBUSY);
    ck_assert_int_eq(old_state(&o, "o1"), 1);
    ck_assert_uint_eq(pump_one(m, &o), RSV_OP_RELEASE);
    ck_assert_int_eq(old_state(&o, "o1"), 3);
    ck_assert_int_eq(o.stock, 10);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_OFFERED), 1);
    ck_assert_int_eq(rsv_migrate_drain(m, 0), RSV_OK);
    ck_assert_int_eq(rsv_migrate_route(m, f.shop, RSV_ROUTE_NOWAIT, &st),
                     RSV_OK);
    ck_assert_int_eq(st, RSV_STAGE_SHADOW);
    ck_assert_int_eq(pump_one(m, &o), 0);

    /* primary again: an item never done is dropped at close */
    move_to(m, &f, RSV_STAGE_PRIMARY);
    ck_assert_int_eq(rsv_migrate_reserve_one(m, f.shop, TOK("o2"), 1, 1, 1, 0),
                     RSV_OK);
    ck_assert_int_eq(rsv_migrate_reserve_one(m, f.shop, TOK("o3"), 1, 1, 1, 0),
                     RSV_OK);
    ck_assert_int_eq(rsv_migrate_mirror_next(m, 1000, &ticket, &op, &shop, tok,
                                             sizeof tok, &len, &item, &loc,
                                             &qty, &ttl), RSV_OK);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_OFFERED), 3);
    rsv_migrate_close(m);
    char q[512];
    snprintf(q, sizeof q, "SELECT COALESCE(SUM(n), 0) FROM "
             "rsv_migration_counts WHERE shop_id = %llu AND class = "
             "'dropped'", (unsigned long long)f.shop);
    ck_assert_int_eq(tu_i64(tu_fix_admin(&f), q), 2);
    snprintf(q, sizeof q, "SELECT (SELECT COALESCE(SUM(n), 0) FROM "
             "rsv_migration_counts WHERE shop_id = %llu AND class = "
             "'offered') - (SELECT COALESCE(SUM(n), 0) FROM "
             "rsv_migration_counts WHERE shop_id = %llu AND class IN "
             "('applied', 'dropped'))", (unsigned long long)f.shop,
             (unsigned long long)f.shop);
    ck_assert_int_eq(tu_i64(tu_fix_admin(&f), q), 0);
    snprintf(q, sizeof q, "SELECT needs_compare FROM rsv_migration_stage "
             "WHERE shop_id = %llu", (unsigned long long)f.shop);
    ck_assert_int_eq(tu_i64(tu_fix_admin(&f), q), 1);
    tu_fix_close(&f);
}
END_TEST

static void *close_later(void *arg)
{
    sleep_us(200000);
    rsv_migrate_close(arg);
    return NULL;
}

/* A stage read before a flip is the stage the call acts at; a thread
 * waiting in mirror_next is let go by close. */
START_TEST(handover_acts_at_the_routed_stage)
{
    tu_fix f;
    old_store o;
    rsv_migration *m = open_scene(&f, &o, 10, 10, 0);
    ck_assert_int_eq(rsv_migrate_set_legacy(m, NULL, NULL), RSV_OK);
    move_to(m, &f, RSV_STAGE_SHADOW);
    int32_t st = -1;
    ck_assert_int_eq(rsv_migrate_route(m, f.shop, 0, &st), RSV_OK);
    ck_assert_int_eq(st, RSV_STAGE_SHADOW);
    int old = old_fn(&o, RSV_OP_RESERVE, f.shop, TOK("r1"), 1, 1, 1, 0);
    move_to(m, &f, RSV_STAGE_PRIMARY);
    /* shadow's answer: the old store's, libreserve's side queued */
    ck_assert_int_eq(rsv_migrate_reserve_one_answered(m, st, f.shop, TOK("r1"),
                                                      1, 1, 1, 0, old),
                     RSV_OK);
    ck_assert_int_eq(rsv_migrate_drain(m, 10000), RSV_OK);
    ck_assert_int_eq(status_of(f.ctx, f.shop, "r1"), RSV_STATUS_HELD);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_BOTH_ACCEPTED), 1);
    /* at primary the old store's answer given is not read */
    ck_assert_int_eq(rsv_migrate_claim_answered(m, RSV_STAGE_PRIMARY, f.shop,
                                                TOK("r1"), RSV_EOUTOFSTOCK),
                     RSV_OK);
    ck_assert_int_eq(status_of(f.ctx, f.shop, "r1"), RSV_STATUS_CLAIMED);
    ck_assert_int_eq(pump_one(m, &o), RSV_OP_CLAIM);
    ck_assert_int_eq(old_state(&o, "r1"), 2);
    /* close lets a waiting mirror_next go */
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, close_later, m), 0);
    uint64_t ticket, shop, item, loc;
    uint32_t op;
    unsigned char tok[RSV_TOKEN_MAX];
    size_t len;
    int64_t qty, ttl;
    ck_assert_int_eq(rsv_migrate_mirror_next(m, 30000, &ticket, &op, &shop,
                                             tok, sizeof tok, &len, &item,
                                             &loc, &qty, &ttl),
                     RSV_ECANCELED);
    pthread_join(t, NULL);
    tu_fix_close(&f);
}
END_TEST

/* Bad input to the handover calls: refused, nothing sent anywhere. */
START_TEST(handover_bad_input)
{
    tu_fix f;
    old_store o;
    rsv_migration *m = open_scene(&f, &o, 10, 10, 0);
    ck_assert_int_eq(rsv_migrate_set_legacy(m, NULL, NULL), RSV_OK);
    move_to(m, &f, RSV_STAGE_SHADOW);
    int32_t st = -1;
    uint64_t ticket, shop, item, loc;
    uint32_t op;
    unsigned char tok[RSV_TOKEN_MAX];
    size_t len;
    int64_t qty, ttl;
    ck_assert_int_eq(rsv_migrate_route(NULL, f.shop, 0, &st), RSV_EINVAL);
    ck_assert_int_eq(rsv_migrate_route(m, f.shop, 0, NULL), RSV_EINVAL);
    ck_assert_int_eq(rsv_migrate_route(m, f.shop, 0x8, &st), RSV_EINVAL);
    ck_assert_int_eq(rsv_migrate_reserve_one_answered(NULL, 1, f.shop,
                                                      TOK("b1"), 1, 1, 1, 0,
                                                      RSV_OK), RSV_EINVAL);
    ck_assert_int_eq(rsv_migrate_claim_answered(NULL, 1, f.shop, TOK("b1"),
                                                RSV_OK), RSV_EINVAL);
    ck_assert_int_eq(rsv_migrate_release_answered(NULL, 1, f.shop, TOK("b1"),
                                                  RSV_OK), RSV_EINVAL);
    for (int32_t bad = -1; bad <= 4; bad += 5) {
        ck_assert_int_eq(rsv_migrate_reserve_one_answered(m, bad, f.shop,
                                                          TOK("b1"), 1, 1, 1,
                                                          0, RSV_OK),
                         RSV_EINVAL);
        ck_assert_int_eq(rsv_migrate_claim_answered(m, bad, f.shop, TOK("b1"),
                                                    RSV_OK), RSV_EINVAL);
        ck_assert_int_eq(rsv_migrate_release_answered(m, bad, f.shop,
                                                      TOK("b1"), RSV_OK),
                         RSV_EINVAL);
    }
    char longtok[RSV_TOKEN_MAX + 1];
    memset(longtok, 'x', sizeof longtok);
    for (int32_t s = RSV_STAGE_OLD; s <= RSV_STAGE_COMPLETE; s++) {
        ck_assert_int_eq(rsv_migrate_reserve_one_answered(m, s, f.shop, "", 0,
                                                          1, 1, 1, 0, RSV_OK),
                         RSV_ETOKEN);
        ck_assert_int_eq(rsv_migrate_claim_answered(m, s, f.shop, longtok,
                                                    sizeof longtok, RSV_OK),
                         RSV_ETOKEN);
        ck_assert_int_eq(rsv_migrate_release_answered(m, s, f.shop, NULL, 2,
                                                      RSV_OK), RSV_ETOKEN);
    }
    ck_assert_int_eq(rsv_migrate_mirror_next(NULL, 0, &ticket, &op, &shop, tok,
                                             sizeof tok, &len, &item, &loc,
                                             &qty, &ttl), RSV_EINVAL);
    ck_assert_int_eq(rsv_migrate_mirror_next(m, 0, &ticket, &op, &shop, NULL,
                                             sizeof tok, &len, &item, &loc,
                                             &qty, &ttl), RSV_EINVAL);
    ck_assert_int_eq(rsv_migrate_mirror_next(m, 0, &ticket, &op, &shop, tok,
                                             sizeof tok, &len, &item, &loc,
                                             &qty, &ttl), RSV_EBUSY);
    ck_assert_int_eq(rsv_migrate_mirror_done(NULL, 1, RSV_OK), RSV_EINVAL);
    ck_assert_int_eq(rsv_migrate_mirror_done(m, 0, RSV_OK), RSV_EINVAL);
    ck_assert_int_eq(rsv_migrate_mirror_done(m, 12345, RSV_OK), RSV_EINVAL);
    /* without a function the ordinary calls cannot ask the old store */
    ck_assert_int_eq(rsv_migrate_claim(m, f.shop, TOK("b1")), RSV_EINVAL);
    ck_assert_int_eq(rsv_migrate_drain(m, 10000), RSV_OK);
    ck_assert_int_eq(o.calls, 0);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_OFFERED), 0);
    char q[256];
    snprintf(q, sizeof q, "SELECT COUNT(*) FROM rsv_checkouts WHERE "
             "shop_id = %llu", (unsigned long long)f.shop);
    ck_assert_int_eq(tu_i64(tu_fix_admin(&f), q), 0);
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), 10);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), 0);
    rsv_migrate_close(m);
    tu_fix_close(&f);
}
END_TEST

/* Primary: the old store accepted a reserve libreserve refused and then
 * failed to give that hold back: its stock drifts, so the shop is marked
 * for a compare. */
START_TEST(failed_undo_marks_for_compare)
{
    tu_fix f;
    old_store o;
    rsv_migration *m = open_scene(&f, &o, 0, 10, 0);
    move_to(m, &f, RSV_STAGE_SHADOW);
    move_to(m, &f, RSV_STAGE_PRIMARY);
    o.fail_release = 1;
    ck_assert_int_eq(rsv_migrate_reserve_one(m, f.shop, TOK("u1"), 1, 1, 1, 0),
                     RSV_EOUTOFSTOCK);
    ck_assert_int_eq(rsv_migrate_drain(m, 10000), RSV_OK);
    ck_assert_int_eq(old_state(&o, "u1"), 1);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_OLD_ACCEPTED_NEW_REFUSED), 1);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_DROPPED), 0);
    wait_marked(&f);
    rsv_migrate_close(m);
    tu_fix_close(&f);
}
END_TEST

/* Shadow through a batcher two handles share: their calls are its
 * entries, each answered, given back and counted as on the handle's own
 * connection; without it the handle's own connection again. */
START_TEST(shadow_through_a_batcher)
{
    tu_fix f;
    old_store o;
    rsv_migration *m = open_scene(&f, &o, 10, 3, 0);
    rsv_migration *m2 = open_handle(&f, &o, 0);
    char dsn[512];
    tu_dsn(dsn, sizeof dsn);
    rsv_batcher *b = NULL;
    ck_assert_int_eq(rsv_batcher_open(&b, dsn, NULL, 1), RSV_OK);
    move_to(m, &f, RSV_STAGE_SHADOW);
    follow(m2, f.shop, RSV_STAGE_SHADOW);
    ck_assert_int_eq(rsv_migrate_set_batcher(m, b), RSV_OK);
    ck_assert_int_eq(rsv_migrate_set_batcher(m2, b), RSV_OK);
    ck_assert_int_eq(rsv_migrate_set_batcher(NULL, b), RSV_EINVAL);

    ck_assert_int_eq(rsv_migrate_reserve_one(m, f.shop, TOK("x1"), 1, 1, 1, 0),
                     RSV_OK);
    ck_assert_int_eq(rsv_migrate_reserve_one(m2, f.shop, TOK("x2"), 1, 1, 1,
                                             0), RSV_OK);
    /* the old store has 1 left: refused there, held and given back here */
    ck_assert_int_eq(rsv_migrate_reserve_one(m2, f.shop, TOK("x3"), 1, 1, 2,
                                             0), RSV_EOUTOFSTOCK);
    ck_assert_int_eq(rsv_migrate_claim(m, f.shop, TOK("x1")), RSV_OK);
    ck_assert_int_eq(rsv_migrate_release(m2, f.shop, TOK("x2")), RSV_OK);
    ck_assert_int_eq(rsv_migrate_drain(m, 10000), RSV_OK);
    ck_assert_int_eq(rsv_migrate_drain(m2, 10000), RSV_OK);
    uint64_t n = 0;
    ck_assert_int_eq(rsv_batcher_stats_get(b, RSV_STAT_CALLS, RSV_OP_RESERVE,
                                           &n), RSV_OK);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(rsv_batcher_stats_get(b, RSV_STAT_CALLS, RSV_OP_RELEASE,
                                           &n), RSV_OK);
    ck_assert_int_eq(n, 2); /* x2, and x3 given back */
    ck_assert_int_eq(status_of(f.ctx, f.shop, "x1"), RSV_STATUS_CLAIMED);
    ck_assert_int_eq(status_of(f.ctx, f.shop, "x2"), RSV_STATUS_RELEASED);
    ck_assert_int_eq(status_of(f.ctx, f.shop, "x3"), RSV_STATUS_RELEASED);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_BOTH_ACCEPTED) +
                     stat_of(m2, f.shop, RSV_MIG_BOTH_ACCEPTED), 4);
    ck_assert_int_eq(stat_of(m2, f.shop, RSV_MIG_OLD_REFUSED_NEW_ACCEPTED), 1);

    /* back to the handle's own connection: the batcher sees nothing */
    ck_assert_int_eq(rsv_migrate_set_batcher(m, NULL), RSV_OK);
    ck_assert_int_eq(rsv_migrate_reserve_one(m, f.shop, TOK("x4"), 1, 1, 1, 0),
                     RSV_OK);
    ck_assert_int_eq(rsv_migrate_drain(m, 10000), RSV_OK);
    ck_assert_int_eq(status_of(f.ctx, f.shop, "x4"), RSV_STATUS_HELD);
    ck_assert_int_eq(rsv_batcher_stats_get(b, RSV_STAT_CALLS, RSV_OP_RESERVE,
                                           &n), RSV_OK);
    ck_assert_int_eq(n, 3);
    rsv_migrate_close(m2);
    rsv_migrate_close(m);
    rsv_batcher_close(b);
    tu_fix_close(&f);
}
END_TEST

static int64_t questions(MYSQL *c)
{
    return tu_i64(c, "SELECT VARIABLE_VALUE FROM information_schema."
                     "GLOBAL_STATUS WHERE VARIABLE_NAME = 'QUESTIONS'");
}

/* Shadow work that piles up while libreserve's side is held up is done in
 * batches (a statement and a commit for many of the buyers' calls), and
 * every call is still answered and counted as on its own: a reserve the
 * old store refused ends its batch and is given back before the next. */
START_TEST(shadow_work_in_batches)
{
    tu_fix f;
    old_store o;
    rsv_migration *m = open_scene(&f, &o, 30, 15, 0);
    MYSQL *adm = tu_fix_admin(&f);
    move_to(m, &f, RSV_STAGE_SHADOW);
    char tok[16];
    /* the thread's first call waits for the table; the rest queue */
    tu_exec(adm, "LOCK TABLES rsv_checkouts WRITE");
    ck_assert_int_eq(rsv_migrate_reserve_one(m, f.shop, TOK("b0"), 1, 1, 1, 0),
                     RSV_OK);
    sleep_us(100000);
    for (int i = 1; i <= 10; i++) {
        snprintf(tok, sizeof tok, "b%d", i);
        ck_assert_int_eq(rsv_migrate_reserve_one(m, f.shop, TOK(tok), 1, 1, 1,
                                                 0), RSV_OK);
    }
    for (int i = 0; i <= 10; i++) {
        snprintf(tok, sizeof tok, "b%d", i);
        ck_assert_int_eq(rsv_migrate_claim(m, f.shop, TOK(tok)), RSV_OK);
    }
    int64_t q0 = questions(f.conn);
    tu_exec(adm, "UNLOCK TABLES");
    ck_assert_int_eq(rsv_migrate_drain(m, 10000), RSV_OK);
    int64_t sent = questions(f.conn) - q0;
    /* one by one: a CALL or more for each of the 21 queued; in batches:
     * one for the reserves and one for the claims after them (the claims
     * of checkouts reserved in the same batch among them), besides the
     * test's own reads and the thread's stage reads */
    printf("21 queued shadow calls: %lld statements from every session\n",
           (long long)sent);
    ck_assert_msg(sent < 12, "21 queued shadow calls took %lld statements",
                  (long long)sent);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_BOTH_ACCEPTED), 22);

    /* the old store has 4 left, libreserve 19: the fifth and later reserves
     * are refused by the old store alone */
    tu_exec(adm, "LOCK TABLES rsv_checkouts WRITE");
    ck_assert_int_eq(rsv_migrate_claim(m, f.shop, TOK("b0")), RSV_ECLAIMED);
    sleep_us(100000);
    for (int i = 11; i <= 18; i++) {
        snprintf(tok, sizeof tok, "b%d", i);
        ck_assert_int_eq(rsv_migrate_reserve_one(m, f.shop, TOK(tok), 1, 1, 1,
                                                 0),
                         i <= 14 ? RSV_OK : RSV_EOUTOFSTOCK);
    }
    for (int i = 11; i <= 18; i++) {
        snprintf(tok, sizeof tok, "b%d", i);
        ck_assert_int_eq(rsv_migrate_claim(m, f.shop, TOK(tok)),
                         i <= 14 ? RSV_OK : RSV_ENOTFOUND);
    }
    tu_exec(adm, "UNLOCK TABLES");
    ck_assert_int_eq(rsv_migrate_drain(m, 10000), RSV_OK);
    for (int i = 0; i <= 18; i++) {
        snprintf(tok, sizeof tok, "b%d", i);
        ck_assert_int_eq(status_of(f.ctx, f.shop, tok),
                         i <= 14 ? RSV_STATUS_CLAIMED : RSV_STATUS_RELEASED);
    }
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), 15);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), 0);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_BOTH_ACCEPTED), 30);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_OLD_REFUSED_NEW_ACCEPTED), 4);
    /* the refused claims are read, not made; the one of b0 sees it claimed */
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_BOTH_REFUSED), 5);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_OFFERED), 39);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_APPLIED), 39);
    ck_assert_int_eq(stat_of(m, f.shop, RSV_MIG_DROPPED), 0);
    rsv_migrate_close(m);
    tu_fix_close(&f);
}
END_TEST

/* The counters' names: one per RSV_MIG_*, distinct, lower_case; NULL past
 * the last; and the very texts of the class label a handle writes (every
 * counter but the handle-wide stage_read_failed, in RSV_MIG_* order), so
 * that rsv-admin, which prints the library's names, matches it. */
START_TEST(class_names_are_the_prometheus_labels)
{
    for (uint32_t k = 0; k < RSV_MIG_STAT_COUNT; k++) {
        const char *n = rsv_migrate_class_name(k);
        ck_assert_msg(n && *n, "counter %u has no name", k);
        ck_assert_msg(strspn(n, "abcdefghijklmnopqrstuvwxyz_") == strlen(n),
                      "counter %u: \"%s\" is not lower_case", k, n);
        for (uint32_t j = 0; j < k; j++)
            ck_assert_msg(strcmp(n, rsv_migrate_class_name(j)) != 0,
                          "counters %u and %u are both \"%s\"", j, k, n);
    }
    ck_assert_str_eq(rsv_migrate_class_name(RSV_MIG_OLD_REFUSED_NEW_ACCEPTED),
                     "old_refused_new_accepted");
    ck_assert_ptr_null(rsv_migrate_class_name(RSV_MIG_STAT_COUNT));
    ck_assert_ptr_null(rsv_migrate_class_name(UINT32_MAX));

    tu_fix f;
    old_store o;
    rsv_migration *m = open_scene(&f, &o, 10, 10, 0);
    move_to(m, &f, RSV_STAGE_SHADOW);
    ck_assert_int_eq(rsv_migrate_reserve_one(m, f.shop, TOK("n1"), 1, 1, 1, 0),
                     RSV_OK);
    ck_assert_int_eq(rsv_migrate_drain(m, 10000), RSV_OK);
    /* the handle follows every shop with a stage row, the suite's others
     * too: as long as the text needs */
    size_t need = 0;
    char *text = NULL;
    int rc = rsv_migrate_prometheus(m, NULL, 0, &need);
    while (rc == RSV_ERANGE) {
        free(text);
        text = malloc(need + 1024);
        ck_assert_ptr_nonnull(text);
        rc = rsv_migrate_prometheus(m, text, need + 1024, &need);
    }
    ck_assert_int_eq(rc, RSV_OK);
    char prefix[128];
    snprintf(prefix, sizeof prefix,
             "libreserve_migration_calls_total{shop=\"%llu\",class=\"",
             (unsigned long long)f.shop);
    uint32_t k = 0;
    for (const char *p = strstr(text, prefix); p; p = strstr(p, prefix)) {
        p += strlen(prefix);
        size_t len = strcspn(p, "\"");
        if (k == RSV_MIG_STAGE_READ_FAILED)
            k++;
        ck_assert_msg(k < RSV_MIG_STAT_COUNT, "an extra class: %.*s",
                      (int)len, p);
        const char *want = rsv_migrate_class_name(k);
        ck_assert_msg(strlen(want) == len && strncmp(p, want, len) == 0,
                      "class %u: the text says \"%.*s\", the name is \"%s\"",
                      k, (int)len, p, want);
        k++;
    }
    if (k == RSV_MIG_STAGE_READ_FAILED)
        k++;
    ck_assert_msg(k == RSV_MIG_STAT_COUNT, "%u classes in the text:\n%s", k,
                  text);
    free(text);
    rsv_migrate_close(m);
    tu_fix_close(&f);
}
END_TEST

int main(void)
{
    tu_db_create("migrate");
    Suite *s = suite_create("migrate");
    tu_add(s, "old_stage_reaches_only_the_old_store",
           old_stage_reaches_only_the_old_store);
    tu_add(s, "shadow_mirrors_and_classifies", shadow_mirrors_and_classifies);
    tu_add(s, "primary_keeps_the_old_store_current",
           primary_keeps_the_old_store_current);
    tu_add(s, "flip_waits_for_the_queued_work",
           flip_waits_for_the_queued_work);
    tu_add(s, "full_queue_drops_and_marks", full_queue_drops_and_marks);
    tu_add(s, "unreadable_stage_keeps_the_last",
           unreadable_stage_keeps_the_last);
    tu_add(s, "no_tables_no_handle", no_tables_no_handle);
    tu_add(s, "handover_answers_and_counts_as_the_callback",
           handover_answers_and_counts_as_the_callback);
    tu_add(s, "outbox_mirrors_primary", outbox_mirrors_primary);
    tu_add(s, "handover_acts_at_the_routed_stage",
           handover_acts_at_the_routed_stage);
    tu_add(s, "handover_bad_input", handover_bad_input);
    tu_add(s, "shadow_work_in_batches", shadow_work_in_batches);
    tu_add(s, "failed_undo_marks_for_compare", failed_undo_marks_for_compare);
    tu_add(s, "shadow_through_a_batcher", shadow_through_a_batcher);
    tu_add(s, "class_names_are_the_prometheus_labels",
           class_names_are_the_prometheus_labels);
    int rc = tu_run(s);
    tu_db_drop();
    return rc;
}
