/*
 * check_soak.c - the mixed-operation soak: many threads, each on its own
 * connection, run random carts (random line order, several locations,
 * split and unsplit lines) mixed with claims, releases, expiry, sweeps
 * (which drain pools idle for a second), replenishment, pool drains and
 * stock changes over a few items and locations.
 *
 * It must end with the server's deadlock counter unchanged (the lock order
 * holds), no call failing with anything but a documented business answer,
 * the audit clean, and every acknowledged result still true in the
 * database: a checkout last acknowledged as held is held with exactly the
 * acknowledged units (fewer only once it expired), claimed is claimed,
 * released is released (or expired).
 *
 * RSV_SOAK_THREADS / RSV_SOAK_OPS size it: make check runs a short soak,
 * `make soak` the 16 threads x 2,000 operations.
 */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <reserve/stats.h>

#include "testutil.h"

#define TOK(s) (s), strlen(s)
#define ITEMS 6
#define LOCS 3

enum { ACK_NONE, ACK_HELD, ACK_CLAIMED, ACK_RELEASED, ACK_EXPIRED };

struct ack {
    int state;
    int64_t units; /* acknowledged units held (ACK_HELD) */
};

struct soaker {
    uint64_t shop;
    int id, ops;
    int failures;
    int64_t counts[6]; /* reserve ok, out of stock, claim ok, expired, busy,
                          pool rows drained */
    struct ack *acks;  /* one per token */
    char msg[256];
};

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && atoi(v) > 0 ? atoi(v) : dflt;
}

static int64_t global_status(MYSQL *c, const char *name)
{
    char q[128];
    snprintf(q, sizeof q, "SELECT VARIABLE_VALUE FROM information_schema."
             "GLOBAL_STATUS WHERE VARIABLE_NAME = '%s'", name);
    return tu_i64(c, q);
}

static void token_of(char *buf, size_t n, int soaker, int t)
{
    snprintf(buf, n, "soak-%d-%d", soaker, t);
}

/* Prints the server's account of the last deadlock, so a failing run (in CI,
 * say) shows which statements waited on which locks. */
static void print_last_deadlock(MYSQL *c)
{
    if (mysql_query(c, "SHOW ENGINE INNODB STATUS") != 0)
        return;
    MYSQL_RES *r = mysql_store_result(c);
    MYSQL_ROW row = r ? mysql_fetch_row(r) : NULL;
    const char *text = row && row[2] ? row[2] : "";
    const char *from = strstr(text, "LATEST DETECTED DEADLOCK");
    const char *to = from ? strstr(from, "\nTRANSACTIONS\n") : NULL;
    if (from)
        fprintf(stderr, "%.*s\n", to ? (int)(to - from) : (int)strlen(from),
                from);
    if (r)
        mysql_free_result(r);
}

/* What the call's answer says about the checkout, given what was known. */
static void record(struct ack *a, int op, int rc, int64_t units)
{
    switch (op) {
    case 0: /* reserve: all or nothing; a failure leaves the old state */
        if (rc == RSV_OK) {
            a->state = ACK_HELD;
            a->units = units;
        } else if (rc == RSV_ECLAIMED) {
            a->state = ACK_CLAIMED;
        }
        break;
    case 1: /* claim */
        if (rc == RSV_OK || rc == RSV_ECLAIMED)
            a->state = ACK_CLAIMED;
        else if (rc == RSV_EEXPIRED)
            a->state = ACK_EXPIRED;
        else if (rc == RSV_ERELEASED)
            a->state = ACK_RELEASED;
        break;
    case 2: /* release: idempotent, also OK on an expired checkout */
        if (rc == RSV_OK && a->state != ACK_EXPIRED && a->state != ACK_NONE)
            a->state = ACK_RELEASED;
        else if (rc == RSV_ECLAIMED)
            a->state = ACK_CLAIMED;
        break;
    }
}

static void *soak(void *p)
{
    struct soaker *s = p;
    MYSQL *c = tu_connect();
    rsv_options o;
    rsv_options_init(&o, RSV_OPTIONS_VERSION);
    o.pool_cap = 20; /* small pools: refills and the slow path run often */
    o.pool_idle_s = 1; /* sweeps drain pools a second after their last
                          refill or ledger take, while others reserve */
    rsv_ctx *ctx = NULL;
    if (rsv_open(&ctx, c, &o) != RSV_OK) {
        s->failures++;
        snprintf(s->msg, sizeof s->msg, "rsv_open failed");
        mysql_close(c);
        return NULL;
    }
    rsv_cart *cart;
    rsv_cart_new(&cart);
    unsigned seed = (unsigned)(s->id * 7919 + 1);
    for (int n = 0; n < s->ops; n++) {
        char tok[32];
        int t = n / 3; /* each token sees about three operations */
        token_of(tok, sizeof tok, s->id, t);
        int op = rand_r(&seed) % 10, rc, kind = -1;
        int64_t units = 0;
        uint64_t item = (uint64_t)(rand_r(&seed) % ITEMS);
        uint64_t loc = (uint64_t)(rand_r(&seed) % LOCS);
        if (op < 5) {
            rsv_cart_clear(cart);
            int lines = 1 + rand_r(&seed) % 4;
            for (int l = 0; l < lines; l++) {
                uint64_t locs[LOCS] = {0, 1, 2};
                for (int k = LOCS - 1; k > 0; k--) { /* preference order */
                    int j = rand_r(&seed) % (k + 1);
                    uint64_t x = locs[k]; locs[k] = locs[j]; locs[j] = x;
                }
                int64_t q = 1 + rand_r(&seed) % 3;
                rsv_cart_add(cart, (uint64_t)(rand_r(&seed) % ITEMS), locs,
                             1 + (size_t)(rand_r(&seed) % LOCS), q,
                             rand_r(&seed) % 2 ? RSV_LINE_SPLIT : 0);
                units += q;
            }
            /* 50..550 ms: many holds expire while the soak runs */
            rc = rsv_reserve(ctx, s->shop, TOK(tok), cart,
                             50 + rand_r(&seed) % 500);
            kind = 0;
            s->counts[0] += rc == RSV_OK;
            s->counts[1] += rc == RSV_EOUTOFSTOCK;
        } else if (op < 7) {
            rc = rsv_claim(ctx, s->shop, TOK(tok));
            kind = 1;
            s->counts[2] += rc == RSV_OK;
            s->counts[3] += rc == RSV_EEXPIRED;
        } else if (op < 8) {
            rc = rsv_release(ctx, s->shop, TOK(tok));
            kind = 2;
        } else if (op < 9) {
            int which = (int)(rand_r(&seed) % 3);
            rc = which == 0   ? rsv_sweep(ctx, s->shop, 0, NULL)
                 : which == 1 ? rsv_replenish(ctx, s->shop, item, loc, NULL)
                              : rsv_pool_drain(ctx, s->shop, item, loc, NULL);
        } else {
            rc = rsv_stock_adjust(ctx, s->shop, item, loc,
                                  (int64_t)(rand_r(&seed) % 7) - 2, NULL);
            if (rc == RSV_ESTOCK) /* shrinking below what is held */
                rc = RSV_OK;
        }
        s->counts[4] += rc == RSV_EBUSY;
        if (kind >= 0)
            record(&s->acks[t], kind, rc, units);
        /* Business answers are fine; anything else is a failure. */
        if (rc != RSV_OK && rc != RSV_EOUTOFSTOCK && rc != RSV_EEXPIRED &&
            rc != RSV_ECLAIMED && rc != RSV_ERELEASED && rc != RSV_ENOTFOUND) {
            if (s->failures++ < 3)
                fprintf(stderr, "soaker %d op %d: %s: %s\n", s->id, op,
                        rsv_code_name(rc), rsv_errmsg(ctx));
            snprintf(s->msg, sizeof s->msg, "%s: %s", rsv_code_name(rc),
                     rsv_errmsg(ctx));
        }
    }
    uint64_t drained = 0;
    rsv_stats_get(ctx, RSV_STAT_POOL_DRAINED, RSV_OP_ALL, &drained);
    s->counts[5] = (int64_t)drained;
    rsv_cart_free(cart);
    rsv_close(ctx);
    mysql_close(c);
    return NULL;
}

/* Every acknowledged result must still be true. */
static void check_acks(MYSQL *c, const struct soaker *s, int ntok)
{
    for (int t = 0; t < ntok; t++) {
        const struct ack *a = &s->acks[t];
        if (a->state == ACK_NONE)
            continue;
        char tok[32], q[512];
        token_of(tok, sizeof tok, s->id, t);
        snprintf(q, sizeof q, "SELECT status FROM rsv_checkouts "
                 "WHERE shop_id = %llu AND checkout_token = '%s'",
                 (unsigned long long)s->shop, tok);
        int64_t status = tu_i64(c, q);
        snprintf(q, sizeof q, "SELECT COALESCE(SUM(quantity), 0) FROM "
                 "rsv_holds WHERE shop_id = %llu AND "
                 "checkout_token = '%s'", (unsigned long long)s->shop, tok);
        int64_t held = tu_i64(c, q);
        snprintf(q, sizeof q, "SELECT COUNT(*) FROM rsv_checkouts "
                 "WHERE shop_id = %llu AND checkout_token = '%s' AND "
                 "expires_at > NOW(6)", (unsigned long long)s->shop, tok);
        int live = tu_i64(c, q) > 0;
        switch (a->state) {
        case ACK_HELD:
            ck_assert_msg(status == 1, "%s: acknowledged held, status %lld",
                          tok, (long long)status);
            ck_assert_msg(live ? held == a->units : held <= a->units,
                          "%s: acknowledged %lld units held, %lld in the "
                          "database", tok, (long long)a->units,
                          (long long)held);
            break;
        case ACK_CLAIMED:
            ck_assert_msg(status == 2 && held == 0,
                          "%s: acknowledged claimed, status %lld, %lld held",
                          tok, (long long)status, (long long)held);
            break;
        case ACK_RELEASED:
            ck_assert_msg((status == 3 || status == 4) && held == 0,
                          "%s: acknowledged released, status %lld, %lld held",
                          tok, (long long)status, (long long)held);
            break;
        case ACK_EXPIRED:
            ck_assert_msg((status == 3 || status == 4) && held == 0,
                          "%s: acknowledged expired, status %lld, %lld held",
                          tok, (long long)status, (long long)held);
            break;
        }
    }
}

START_TEST(soak_mixed_operations)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    for (uint64_t i = 0; i < ITEMS; i++)
        for (uint64_t l = 0; l < LOCS; l++)
            tu_fix_stock(&f, i, l, 40);
    int nthreads = env_int("RSV_SOAK_THREADS", 12);
    int ops = env_int("RSV_SOAK_OPS", 300);
    int ntok = ops / 3 + 1;
    int64_t deadlocks = global_status(f.conn, "Innodb_deadlocks");
    struct soaker *s = calloc((size_t)nthreads, sizeof *s);
    pthread_t *t = calloc((size_t)nthreads, sizeof *t);
    ck_assert(s && t);
    for (int i = 0; i < nthreads; i++) {
        s[i].shop = f.shop;
        s[i].id = i;
        s[i].ops = ops;
        s[i].acks = calloc((size_t)ntok, sizeof *s[i].acks);
        ck_assert(s[i].acks);
        pthread_create(&t[i], NULL, soak, &s[i]);
    }
    int64_t total[6] = {0};
    for (int i = 0; i < nthreads; i++) {
        pthread_join(t[i], NULL);
        for (int k = 0; k < 6; k++)
            total[k] += s[i].counts[k];
    }
    int64_t after = global_status(f.conn, "Innodb_deadlocks");
    printf("soak: %d threads x %d ops: %lld reserved, %lld out of stock, "
           "%lld claimed, %lld claims expired, %lld busy, %lld pool rows "
           "drained, %lld deadlocks\n",
           nthreads, ops, (long long)total[0], (long long)total[1],
           (long long)total[2], (long long)total[3], (long long)total[4],
           (long long)total[5], (long long)(after - deadlocks));
    for (int i = 0; i < nthreads; i++)
        ck_assert_msg(s[i].failures == 0, "soaker %d: %d failures, last %s", i,
                      s[i].failures, s[i].msg);
    if (after != deadlocks)
        print_last_deadlock(f.conn);
    ck_assert_msg(after == deadlocks, "%lld deadlocks during the soak",
                  (long long)(after - deadlocks));
    /* Both outcomes were exercised, or the soak proves little. */
    ck_assert(total[0] > 0 && total[2] > 0);
    for (int i = 0; i < nthreads; i++) {
        check_acks(f.conn, &s[i], ntok);
        free(s[i].acks);
    }
    free(s);
    free(t);
    tu_fix_close(&f);
}
END_TEST

int main(void)
{
    tu_db_create("soak");
    Suite *s = suite_create("soak");
    tu_add_timeout(s, "soak_mixed_operations", soak_mixed_operations, 1800);
    int rc = tu_run(s);
    tu_db_drop();
    return rc;
}
