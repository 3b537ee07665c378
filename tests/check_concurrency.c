/*
 * check_concurrency.c - many threads, each on its own connection, racing
 * for the same units: exactly the stock is reserved, never more, "out of
 * stock" is only said when it is true, and the audit passes afterwards.
 */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define TOK(s) (s), strlen(s)

struct racer {
    uint64_t shop;
    int id;
    int64_t pool_cap;
    int64_t qty;
    int64_t got;      /* units reserved */
    int oos;          /* got RSV_EOUTOFSTOCK */
    int other;        /* any other failure code */
    char msg[256];
};

static void *race(void *p)
{
    struct racer *r = p;
    MYSQL *c = tu_connect();
    rsv_options o;
    rsv_options_init(&o, RSV_OPTIONS_VERSION);
    o.pool_cap = r->pool_cap;
    o.refill_low_water = r->pool_cap / 4;
    rsv_ctx *ctx = NULL;
    if (rsv_open(&ctx, c, &o) != RSV_OK) {
        r->other = -999;
        return NULL;
    }
    for (int n = 0;; n++) {
        char tok[64];
        snprintf(tok, sizeof tok, "racer-%d-%d", r->id, n);
        int rc = rsv_reserve_one(ctx, r->shop, TOK(tok), 1, 1, r->qty, 0);
        if (rc == RSV_OK) {
            r->got += r->qty;
            continue;
        }
        if (rc == RSV_EOUTOFSTOCK)
            r->oos = 1;
        else {
            r->other = rc;
            snprintf(r->msg, sizeof r->msg, "%s (errno %d)", rsv_errmsg(ctx), 0);
        }
        break;
    }
    rsv_close(ctx);
    mysql_close(c);
    return NULL;
}

static void run_race(int threads, int64_t stock, int64_t cap, int64_t qty)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, stock);
    struct racer r[64];
    pthread_t t[64];
    for (int i = 0; i < threads; i++) {
        memset(&r[i], 0, sizeof r[i]);
        r[i].shop = f.shop;
        r[i].id = i;
        r[i].pool_cap = cap;
        r[i].qty = qty;
        ck_assert_int_eq(pthread_create(&t[i], NULL, race, &r[i]), 0);
    }
    int64_t total = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        ck_assert_msg(r[i].other == 0, "racer %d: code %d: %s", i, r[i].other,
                      r[i].msg);
        ck_assert(r[i].oos);
        total += r[i].got;
    }
    /* never more than the stock; and since every racer was told "out of
     * stock", fewer than qty units may be left, never more */
    ck_assert_int_le(total, stock);
    ck_assert_int_gt(total, stock - qty);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), total);
    tu_fix_close(&f);
}

START_TEST(last_units_one_at_a_time)
{
    run_race(32, 200, 16, 1);
}
END_TEST

START_TEST(last_units_default_pool)
{
    run_race(24, 1500, 1000, 1);
}
END_TEST

START_TEST(last_units_in_threes)
{
    run_race(16, 100, 10, 3);
}
END_TEST

/* A competing transaction holds every pool row and then rolls back: the
 * reserve must wait for it rather than answer "out of stock". */
struct holder {
    uint64_t shop;
    int locked;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static void *hold_then_rollback(void *p)
{
    struct holder *h = p;
    MYSQL *c = tu_connect_in_txn();
    char q[256];
    snprintf(q, sizeof q, "SELECT id FROM rsv_pool WHERE shop_id=%llu "
             "FOR UPDATE", (unsigned long long)h->shop);
    tu_exec(c, q);
    pthread_mutex_lock(&h->mu);
    h->locked = 1;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
    usleep(400 * 1000);
    tu_exec(c, "ROLLBACK");
    mysql_close(c);
    return NULL;
}

START_TEST(in_flight_rows_are_not_out_of_stock)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    struct holder h = {f.shop, 0, PTHREAD_MUTEX_INITIALIZER,
                       PTHREAD_COND_INITIALIZER};
    tu_fix_pooled(&f, 1, 1, 3);
    pthread_t t;
    pthread_create(&t, NULL, hold_then_rollback, &h);
    pthread_mutex_lock(&h.mu);
    while (!h.locked)
        pthread_cond_wait(&h.cv, &h.mu);
    pthread_mutex_unlock(&h.mu);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, h.shop, TOK("patient"), 1, 1, 3, 0));
    clock_gettime(CLOCK_MONOTONIC, &b);
    double waited = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    ck_assert_msg(waited > 0.2, "reserve did not wait for the in-flight rows");
    pthread_join(t, NULL);
    /* and when the holder commits its deletion instead, it is out of stock */
    int rc = rsv_reserve_one(f.ctx, h.shop, TOK("late"), 1, 1, 1, 0);
    TU_RC(f.ctx, rc, RSV_EOUTOFSTOCK);
    tu_fix_close(&f);
}
END_TEST

int main(void)
{
    tu_db_create("concurrency");
    Suite *s = suite_create("concurrency");
    tu_add(s, "last_units_one_at_a_time", last_units_one_at_a_time);
    tu_add(s, "last_units_default_pool", last_units_default_pool);
    tu_add(s, "last_units_in_threes", last_units_in_threes);
    tu_add(s, "in_flight_rows_are_not_out_of_stock", in_flight_rows_are_not_out_of_stock);
    int rc = tu_run(s);
    tu_db_drop();
    return rc;
}
