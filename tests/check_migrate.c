/*
 * check_migrate.c - the migration handle (reserve/migrate.h) against a
 * stand-in for an old store kept in this process (counters per item and
 * a table of holds, as the Redis design kept them): which store answers
 * at each stage, what reaches the other one, how the answers are
 * classified and counted, the sample of mismatches and the counters in
 * the tables, a full queue, the stage followed after a change (the time
 * is printed, not asserted), and a stage table that cannot be read.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "reserve/migrate.h"
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
    if (op == RSV_OP_RESERVE) {
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
    char q[512];
    snprintf(q, sizeof q, "SELECT needs_compare FROM rsv_migration_stage "
             "WHERE shop_id = %llu", (unsigned long long)f.shop);
    for (int i = 0; i < 300 && tu_i64(tu_fix_admin(&f), q) == 0; i++)
        sleep_us(20000);
    ck_assert_int_eq(tu_i64(tu_fix_admin(&f), q), 1);
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
    int rc = tu_run(s);
    tu_db_drop();
    return rc;
}
