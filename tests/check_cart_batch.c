/*
 * check_cart_batch.c - carts many at a time: rsv_reserve_cart_batch and
 * rsv_batcher_reserve.  Every entry answered as rsv_reserve would answer
 * it (codes, allocations, failed lines, units held), one statement for
 * the carts the procedures can decide, the whole batch refused where the
 * single call refuses, batches racing on few units never overselling, and
 * the batcher's carts, blocking and not.
 */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <reserve/batch.h>
#include <reserve/stats.h>

#include "testutil.h"
#include "../lib/test_flags.h"

#define TOK(s) (s), strlen(s)
#define MAXE 16

/* A list of carts, each with a token of its own. */
typedef struct tcarts {
    size_t n;
    uint64_t shop[MAXE];
    rsv_cart *cart[MAXE];
    const void *tok[MAXE];
    size_t len[MAXE];
    char buf[MAXE][32];
    int res[MAXE];
} tcarts;

/* Entry i: token tok (NULL: a NULL token), an empty cart. */
static rsv_cart *entry(tcarts *t, uint64_t shop, const char *tok)
{
    size_t i = t->n++;
    t->shop[i] = shop;
    if (tok) {
        snprintf(t->buf[i], sizeof t->buf[i], "%s", tok);
        t->tok[i] = t->buf[i];
        t->len[i] = strlen(tok);
    } else {
        t->tok[i] = NULL;
        t->len[i] = 1;
    }
    ck_assert_int_eq(rsv_cart_new(&t->cart[i]), RSV_OK);
    return t->cart[i];
}

static void line(rsv_cart *c, uint64_t item, uint64_t l1, uint64_t l2,
                 int64_t qty, uint32_t flags)
{
    uint64_t locs[2] = {l1, l2};
    ck_assert_int_eq(rsv_cart_add(c, item, locs, l2 ? 2 : 1, qty, flags),
                     RSV_OK);
}

static void tcarts_free(tcarts *t)
{
    for (size_t i = 0; i < t->n; i++)
        rsv_cart_free(t->cart[i]);
    t->n = 0;
}

static uint64_t stat(rsv_ctx *ctx, uint32_t s)
{
    uint64_t v = 0;
    ck_assert_int_eq(rsv_stats_get(ctx, s, RSV_OP_RESERVE, &v), RSV_OK);
    return v;
}

/* Items 1 and 2 at locations 1 and 2 (10 units each, free ledger rows),
 * item 3 at location 1 (4 units, pooled), item 4 at 1 (1 unit); a held
 * and a claimed checkout. */
static void fixture(rsv_ctx *ctx, uint64_t shop)
{
    for (uint64_t item = 1; item <= 2; item++)
        for (uint64_t loc = 1; loc <= 2; loc++)
            TU_OK(ctx, rsv_stock_set(ctx, shop, item, loc, 10));
    TU_OK(ctx, rsv_stock_set(ctx, shop, 3, 1, 4));
    TU_OK(ctx, rsv_replenish(ctx, shop, 3, 1, NULL));
    TU_OK(ctx, rsv_stock_set(ctx, shop, 4, 1, 1));
    TU_OK(ctx, rsv_reserve_one(ctx, shop, TOK("held"), 1, 1, 1, 0));
    TU_OK(ctx, rsv_reserve_one(ctx, shop, TOK("claimed"), 1, 1, 1, 0));
    TU_OK(ctx, rsv_claim(ctx, shop, TOK("claimed")));
}

/* The mixed list: new carts at free ledger rows and from a pool, the last
 * unit and one too many (its failed line), a line its first location
 * cannot cover, a split line, a re-reserve, a claimed checkout, an
 * unknown item, an empty cart, a NULL cart, a bad and a NULL token, a
 * token listed twice. */
static void mixed(tcarts *t, uint64_t shop)
{
    memset(t, 0, sizeof *t);
    rsv_cart *c = entry(t, shop, "new-a");
    line(c, 1, 1, 0, 2, 0);
    line(c, 2, 1, 0, 1, 0);
    c = entry(t, shop, "new-b");
    line(c, 1, 2, 0, 1, 0);
    line(c, 3, 1, 0, 3, 0);
    c = entry(t, shop, "last");
    line(c, 4, 1, 0, 1, 0);
    line(c, 2, 2, 0, 1, 0);
    c = entry(t, shop, "too-late");
    line(c, 2, 2, 0, 1, 0);
    line(c, 4, 1, 0, 1, 0);
    c = entry(t, shop, "second-loc");
    line(c, 2, 1, 2, 8, 0);
    c = entry(t, shop, "split");
    line(c, 1, 1, 2, 12, RSV_LINE_SPLIT);
    c = entry(t, shop, "held");
    line(c, 2, 2, 0, 2, 0);
    c = entry(t, shop, "claimed");
    line(c, 1, 1, 0, 1, 0);
    c = entry(t, shop, "ghost");
    line(c, 1, 1, 0, 1, 0);
    line(c, 99, 1, 0, 1, 0);
    entry(t, shop, "empty");
    entry(t, shop, "null-cart");
    rsv_cart_free(t->cart[t->n - 1]);
    t->cart[t->n - 1] = NULL;
    c = entry(t, shop, "");
    line(c, 1, 1, 0, 1, 0);
    c = entry(t, shop, NULL);
    line(c, 1, 1, 0, 1, 0);
    c = entry(t, shop, "new-a");
    line(c, 2, 2, 0, 1, 0);
    c = entry(t, shop, "new-c");
    line(c, 1, 2, 0, 1, 0);
}

/* Every allocation of cart a equals cart b's. */
static void same_allocation(const rsv_cart *a, const rsv_cart *b, size_t i)
{
    ck_assert_uint_eq(rsv_cart_failed_line(a), rsv_cart_failed_line(b));
    for (size_t l = 0; l < rsv_cart_lines(a); l++) {
        size_t na = 0, nb = 0;
        ck_assert_int_eq(rsv_cart_allocation_count(a, l, &na), RSV_OK);
        ck_assert_int_eq(rsv_cart_allocation_count(b, l, &nb), RSV_OK);
        ck_assert_msg(na == nb, "entry %zu line %zu: %zu locations, single "
                      "%zu", i, l, na, nb);
        for (size_t k = 0; k < na; k++) {
            uint64_t la = 0, lb = 0;
            int64_t qa = 0, qb = 0;
            ck_assert_int_eq(rsv_cart_allocation(a, l, k, &la, &qa), RSV_OK);
            ck_assert_int_eq(rsv_cart_allocation(b, l, k, &lb, &qb), RSV_OK);
            ck_assert_uint_eq(la, lb);
            ck_assert_int_eq(qa, qb);
        }
    }
}

START_TEST(outcomes_match_single_calls)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    uint64_t bshop = f.shop, sshop = tu_shop();
    fixture(f.ctx, bshop);
    fixture(f.ctx, sshop);
    static tcarts b, s;
    mixed(&b, bshop);
    TU_OK(f.ctx, rsv_reserve_cart_batch(f.ctx, b.n, b.shop, b.tok, b.len,
                                        b.cart, 0, b.res));
    mixed(&s, sshop);
    for (size_t i = 0; i < s.n; i++)
        s.res[i] = rsv_reserve(f.ctx, sshop, s.tok[i], s.len[i], s.cart[i],
                               0);
    for (size_t i = 0; i < b.n; i++) {
        ck_assert_msg(b.res[i] == s.res[i], "entry %zu: batch %s, single %s",
                      i, rsv_code_name(b.res[i]), rsv_code_name(s.res[i]));
        if (b.cart[i])
            same_allocation(b.cart[i], s.cart[i], i);
    }
    static const int want[] = {
        RSV_OK, RSV_OK, RSV_OK, RSV_EOUTOFSTOCK, RSV_OK, RSV_OK, RSV_OK,
        RSV_ECLAIMED, RSV_ENOITEM, RSV_EEMPTY, RSV_EINVAL, RSV_ETOKEN,
        RSV_EINVAL, RSV_OK, RSV_OK};
    for (size_t i = 0; i < b.n; i++)
        ck_assert_msg(b.res[i] == want[i], "entry %zu: %s", i,
                      rsv_code_name(b.res[i]));
    ck_assert_uint_eq(rsv_cart_failed_line(b.cart[3]), 1);
    for (uint64_t item = 1; item <= 4; item++)
        for (uint64_t loc = 1; loc <= (item <= 2 ? 2 : 1); loc++)
            ck_assert_int_eq(tu_held(f.ctx, bshop, item, loc),
                             tu_held(f.ctx, sshop, item, loc));
    int32_t st = 0;
    int64_t units = 0;
    TU_OK(f.ctx, rsv_checkout_status(f.ctx, bshop, TOK("new-a"), &st, &units,
                                     NULL));
    ck_assert_int_eq(units, 1); /* the second entry re-reserved it */
    tcarts_free(&b);
    tcarts_free(&s);
    tu_fix_close(&f);
}
END_TEST

/* The carts the procedures decide go in one statement; without the
 * procedures the same outcomes, one by one; a repeat answers the same.
 * (A pool read from the context's cursor may come up short and send an
 * entry alone, as it sends a single call back to the bottom of the pool;
 * so the one statement is counted on ledger rows, and the pooled item
 * gets a batch of its own.) */
START_TEST(one_statement_per_batch)
{
    tu_fix f;
    tu_fix_open(&f, RSV_OPT_NO_PROACTIVE_REFILL, 0);
    for (uint64_t item = 1; item <= 3; item++)
        tu_fix_stock(&f, item, 1, 100);
    tu_fix_pooled(&f, 4, 1, 100);
    /* the context sees every ledger row once */
    for (uint64_t item = 1; item <= 4; item++) {
        char tok[16];
        snprintf(tok, sizeof tok, "seen-%d", (int)item);
        TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK(tok), item, 1, 1, 0));
    }
    static tcarts b;
    memset(&b, 0, sizeof b);
    for (int i = 0; i < 8; i++) {
        char tok[16];
        snprintf(tok, sizeof tok, "s-%d", i);
        rsv_cart *c = entry(&b, f.shop, tok);
        line(c, 1 + (uint64_t)(i % 2), 1, 0, 1 + i % 3, 0);
        line(c, 3, 1, 0, 1, 0);
    }
    rsv_stats_reset(f.ctx);
    TU_OK(f.ctx, rsv_reserve_cart_batch(f.ctx, b.n, b.shop, b.tok, b.len,
                                        b.cart, 0, b.res));
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(b.res[i], RSV_OK);
    ck_assert_uint_eq(stat(f.ctx, RSV_STAT_STATEMENTS), 1);
    ck_assert_uint_eq(stat(f.ctx, RSV_STAT_ONE_TRIP), 8);
    ck_assert_uint_eq(stat(f.ctx, RSV_STAT_CALLS), 8);
    ck_assert_uint_eq(stat(f.ctx, RSV_STAT_OK), 8);
    ck_assert_uint_eq(stat(f.ctx, RSV_STAT_LEDGER_TAKES), 16);
    for (int i = 0; i < 8; i++) {
        uint64_t loc = 0;
        int64_t q = 0;
        TU_OK(f.ctx, rsv_cart_allocation(b.cart[i], 0, 0, &loc, &q));
        ck_assert_int_eq(q, 1 + i % 3);
    }
    /* the pooled item, its pool rows taken inside the one CALL */
    static tcarts p;
    memset(&p, 0, sizeof p);
    for (int i = 0; i < 4; i++) {
        char tok[16];
        snprintf(tok, sizeof tok, "p-%d", i);
        rsv_cart *c = entry(&p, f.shop, tok);
        line(c, 3, 1, 0, 1, 0);
        line(c, 4, 1, 0, 2, 0);
    }
    TU_OK(f.ctx, rsv_reserve_cart_batch(f.ctx, p.n, p.shop, p.tok, p.len,
                                        p.cart, 0, p.res));
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(p.res[i], RSV_OK);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 4, 1), 8 + 1);
    tcarts_free(&p);
    /* a repeat: every checkout exists, each answers as a re-reserve */
    TU_OK(f.ctx, rsv_reserve_cart_batch(f.ctx, b.n, b.shop, b.tok, b.len,
                                        b.cart, 0, b.res));
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(b.res[i], RSV_OK);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 3, 1), 8 + 4 + 1);
    /* without the procedures: the same outcomes, one by one */
    MYSQL *c2;
    rsv_ctx *sctx = tu_open_with(&c2, TEST_OPT_STATEMENTS_ONLY, 0);
    for (int i = 0; i < 8; i++)
        b.buf[i][0] = 't';
    TU_OK(sctx, rsv_reserve_cart_batch(sctx, b.n, b.shop, b.tok, b.len,
                                       b.cart, 0, b.res));
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(b.res[i], RSV_OK);
    ck_assert_uint_eq(stat(sctx, RSV_STAT_ONE_TRIP), 0);
    ck_assert_uint_eq(stat(sctx, RSV_STAT_CALLS), 8);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 3, 1), 16 + 4 + 1);
    rsv_close(sctx);
    mysql_close(c2);
    tcarts_free(&b);
    tu_fix_close(&f);
}
END_TEST

START_TEST(refused_as_a_whole)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 20);
    static tcarts b;
    memset(&b, 0, sizeof b);
    line(entry(&b, f.shop, "w1"), 1, 1, 0, 1, 0);
    line(entry(&b, f.shop, "w2"), 1, 1, 0, 1, 0);
    int rc = rsv_reserve_cart_batch(f.ctx, b.n, b.shop, b.tok, b.len, NULL,
                                    0, b.res);
    TU_RC(f.ctx, rc, RSV_EINVAL);
    ck_assert_int_eq(b.res[1], RSV_EINVAL);
    rc = rsv_reserve_cart_batch(f.ctx, 0, b.shop, b.tok, b.len, b.cart, 0,
                                b.res);
    TU_RC(f.ctx, rc, RSV_EINVAL);
    rc = rsv_reserve_cart_batch(f.ctx, b.n, b.shop, b.tok, b.len, b.cart,
                                -1, b.res);
    TU_RC(f.ctx, rc, RSV_EQUANTITY);
    ck_assert_int_eq(rsv_reserve_cart_batch(NULL, b.n, b.shop, b.tok, b.len,
                                            b.cart, 0, b.res),
                     RSV_EINVAL);
    tu_exec(f.conn, "START TRANSACTION");
    rc = rsv_reserve_cart_batch(f.ctx, b.n, b.shop, b.tok, b.len, b.cart, 0,
                                b.res);
    TU_RC(f.ctx, rc, RSV_EINTXN);
    ck_assert_int_eq(b.res[1], RSV_EINTXN);
    tu_exec(f.conn, "ROLLBACK");
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), 0);
    TU_OK(f.ctx, rsv_reserve_cart_batch(f.ctx, b.n, b.shop, b.tok, b.len,
                                        b.cart, 0, b.res));
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), 2);
    tcarts_free(&b);
    tu_fix_close(&f);
}
END_TEST

/* Batches of carts from several threads on few units of three items,
 * with pools that refill: never more held than the stock, and exactly
 * what the successes add up to. */
#define RACE_THREADS 6
#define RACE_ROUNDS 8
#define RACE_STOCK 40
static uint64_t race_shop;
static int race_units[RACE_THREADS];

static void *race_buyer(void *arg)
{
    int t = (int)(intptr_t)arg;
    MYSQL *c;
    rsv_ctx *ctx = tu_open_with(&c, 0, 8);
    static __thread tcarts b;
    for (int r = 0; r < RACE_ROUNDS; r++) {
        memset(&b, 0, sizeof b);
        for (int i = 0; i < 6; i++) {
            char tok[32];
            snprintf(tok, sizeof tok, "r-%d-%d-%d", t, r, i);
            rsv_cart *cart = entry(&b, race_shop, tok);
            line(cart, 1 + (uint64_t)((t + i) % 3), 1, 0, 1, 0);
            line(cart, 1 + (uint64_t)((t + i + 1) % 3), 1, 0, 1 + i % 2, 0);
        }
        int rc = rsv_reserve_cart_batch(ctx, b.n, b.shop, b.tok, b.len,
                                        b.cart, 0, b.res);
        ck_assert_msg(rc == RSV_OK, "batch: %s", rsv_errmsg(ctx));
        for (size_t i = 0; i < b.n; i++) {
            ck_assert_msg(b.res[i] == RSV_OK || b.res[i] == RSV_EOUTOFSTOCK,
                          "entry %zu: %s", i, rsv_code_name(b.res[i]));
            if (b.res[i] == RSV_OK)
                race_units[t] += 1 + 1 + (int)(i % 2);
        }
        tcarts_free(&b);
    }
    rsv_close(ctx);
    mysql_close(c);
    return NULL;
}

START_TEST(racing_batches_never_oversell)
{
    tu_fix f;
    tu_fix_open(&f, 0, 8);
    race_shop = f.shop;
    for (uint64_t item = 1; item <= 3; item++)
        tu_fix_stock(&f, item, 1, RACE_STOCK);
    pthread_t th[RACE_THREADS];
    memset(race_units, 0, sizeof race_units);
    for (int t = 0; t < RACE_THREADS; t++)
        ck_assert_int_eq(pthread_create(&th[t], NULL, race_buyer,
                                        (void *)(intptr_t)t), 0);
    for (int t = 0; t < RACE_THREADS; t++)
        pthread_join(th[t], NULL);
    int64_t held = 0, total = 0;
    for (uint64_t item = 1; item <= 3; item++) {
        int64_t h = tu_held(f.ctx, f.shop, item, 1);
        ck_assert_int_le(h, RACE_STOCK);
        held += h;
    }
    for (int t = 0; t < RACE_THREADS; t++)
        total += race_units[t];
    ck_assert_int_eq(held, total);
    /* Nothing undersold: what the race left of each item (a cart needs
     * two items, so units of the last item can be left) is there for the
     * next buyer, to the unit, and not one more. */
    for (uint64_t item = 1; item <= 3; item++) {
        int64_t left = RACE_STOCK - tu_held(f.ctx, f.shop, item, 1);
        char tok[32];
        snprintf(tok, sizeof tok, "rest-%llu", (unsigned long long)item);
        if (left > 0)
            TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, tok, strlen(tok),
                                         item, 1, left, 0));
        snprintf(tok, sizeof tok, "more-%llu", (unsigned long long)item);
        TU_RC(f.ctx, rsv_reserve_one(f.ctx, f.shop, tok, strlen(tok), item,
                                     1, 1, 0),
              RSV_EOUTOFSTOCK);
    }
    tu_fix_close(&f);
}
END_TEST

/* ---- the batcher ---- */

static rsv_batcher *open_batcher(uint32_t connections)
{
    char dsn[1024];
    tu_dsn(dsn, sizeof dsn);
    rsv_batcher *b = NULL;
    int rc = rsv_batcher_open(&b, dsn, NULL, connections);
    ck_assert_msg(rc == RSV_OK, "rsv_batcher_open: %s", rsv_code_name(rc));
    return b;
}

#define BT_THREADS 16
#define BT_EACH 4
static struct {
    rsv_batcher *b;
    uint64_t shop;
    pthread_barrier_t go;
    int ok[BT_THREADS];
} bt;

static void *bt_buyer(void *arg)
{
    int t = (int)(intptr_t)arg;
    rsv_cart *c;
    ck_assert_int_eq(rsv_cart_new(&c), RSV_OK);
    pthread_barrier_wait(&bt.go);
    for (int i = 0; i < BT_EACH; i++) {
        char tok[32];
        snprintf(tok, sizeof tok, "bt-%d-%d", t, i);
        rsv_cart_clear(c);
        line(c, 1, 1, 0, 1, 0);
        line(c, 2 + (uint64_t)(t % 2), 1, 2, 1, 0);
        int rc = rsv_batcher_reserve(bt.b, bt.shop, TOK(tok), c, 0);
        ck_assert_msg(rc == RSV_OK || rc == RSV_EOUTOFSTOCK, "%s",
                      rsv_code_name(rc));
        if (rc == RSV_OK) {
            size_t n = 0;
            ck_assert_int_eq(rsv_cart_allocation_count(c, 1, &n), RSV_OK);
            ck_assert_uint_eq(n, 1);
            bt.ok[t]++;
        } else {
            ck_assert_uint_eq(rsv_cart_failed_line(c), 0);
        }
    }
    rsv_cart_free(c);
    return NULL;
}

START_TEST(batcher_carts)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    bt.shop = f.shop;
    tu_fix_stock(&f, 1, 1, 50); /* fewer than the 64 asked for */
    for (uint64_t item = 2; item <= 3; item++)
        for (uint64_t loc = 1; loc <= 2; loc++)
            tu_fix_stock(&f, item, loc, 100);
    bt.b = open_batcher(3);
    memset(bt.ok, 0, sizeof bt.ok);
    pthread_barrier_init(&bt.go, NULL, BT_THREADS);
    pthread_t th[BT_THREADS];
    for (int t = 0; t < BT_THREADS; t++)
        ck_assert_int_eq(pthread_create(&th[t], NULL, bt_buyer,
                                        (void *)(intptr_t)t), 0);
    for (int t = 0; t < BT_THREADS; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&bt.go);
    int ok = 0;
    for (int t = 0; t < BT_THREADS; t++)
        ok += bt.ok[t];
    ck_assert_int_eq(ok, 50);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), 50);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 2, 1) +
                         tu_held(f.ctx, f.shop, 3, 1) +
                         tu_held(f.ctx, f.shop, 2, 2) +
                         tu_held(f.ctx, f.shop, 3, 2), 50);
    uint64_t calls = 0;
    ck_assert_int_eq(rsv_batcher_stats_get(bt.b, RSV_STAT_CALLS,
                                           RSV_OP_RESERVE, &calls), RSV_OK);
    ck_assert_uint_eq(calls, BT_THREADS * BT_EACH);

    /* the arguments the single call refuses, at once */
    rsv_cart *c, *empty;
    ck_assert_int_eq(rsv_cart_new(&c), RSV_OK);
    ck_assert_int_eq(rsv_cart_new(&empty), RSV_OK);
    line(c, 2, 1, 0, 1, 0);
    ck_assert_int_eq(rsv_batcher_reserve(bt.b, f.shop, TOK("x"), NULL, 0),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_batcher_reserve(bt.b, f.shop, TOK("x"), empty, 0),
                     RSV_EEMPTY);
    ck_assert_int_eq(rsv_batcher_reserve(bt.b, f.shop, "", 0, c, 0),
                     RSV_ETOKEN);
    ck_assert_int_eq(rsv_batcher_reserve(bt.b, f.shop, TOK("x"), c, -5),
                     RSV_EQUANTITY);
    ck_assert_int_eq(rsv_batcher_reserve(NULL, f.shop, TOK("x"), c, 0),
                     RSV_EINVAL);

    /* the non-blocking form: the cart used in place */
    rsv_batcher_call *call = NULL, *done = NULL;
    ck_assert_int_eq(rsv_batcher_reserve_start(bt.b, f.shop, TOK("nb"), c, 0,
                                               &call),
                     RSV_PENDING);
    ck_assert_int_eq(rsv_batcher_reserve_start(bt.b, f.shop, TOK("nb2"),
                                               empty, 0, &done),
                     RSV_EEMPTY);
    ck_assert(done == NULL);
    struct pollfd pfd = {rsv_batcher_fd(bt.b), POLLIN, 0};
    int code = -1;
    while (rsv_batcher_next_done(bt.b, &done, &code) == RSV_PENDING)
        ck_assert_int_eq(poll(&pfd, 1, 10000), 1);
    ck_assert(done == call);
    ck_assert_int_eq(code, RSV_OK);
    uint64_t loc = 0;
    int64_t q = 0;
    ck_assert_int_eq(rsv_cart_allocation(c, 0, 0, &loc, &q), RSV_OK);
    ck_assert_uint_eq(loc, 1);
    ck_assert_int_eq(q, 1);
    rsv_batcher_call_free(done);
    rsv_cart_free(c);
    rsv_cart_free(empty);
    rsv_batcher_close(bt.b);
    tu_fix_close(&f);
}
END_TEST

int main(void)
{
    tu_db_create("cart_batch");
    Suite *s = suite_create("cart_batch");
    tu_add(s, "outcomes_match_single_calls", outcomes_match_single_calls);
    tu_add(s, "one_statement_per_batch", one_statement_per_batch);
    tu_add(s, "refused_as_a_whole", refused_as_a_whole);
    tu_add_timeout(s, "racing_batches_never_oversell",
                   racing_batches_never_oversell, 120);
    tu_add_timeout(s, "batcher_carts", batcher_carts, 120);
    int rc = tu_run(s);
    tu_db_drop();
    return rc;
}
