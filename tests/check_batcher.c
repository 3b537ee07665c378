/*
 * check_batcher.c - rsv_batcher: many threads on a few connections, each
 * caller answered as its single call would answer it, nothing oversold,
 * requests really coalesced, a lone caller served at once, claims and
 * releases, a lost connection repeated on a new one, close with callers
 * waiting, bad arguments and bad connection strings, and the non-blocking
 * form.
 */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <reserve/batch.h>
#include <reserve/stats.h>

#include "testutil.h"

#define TOK(s) (s), strlen(s)

static rsv_batcher *open_batcher(uint32_t connections, const rsv_options *o)
{
    char dsn[1024];
    tu_dsn(dsn, sizeof dsn);
    rsv_batcher *b = NULL;
    int rc = rsv_batcher_open(&b, dsn, o, connections);
    ck_assert_msg(rc == RSV_OK, "rsv_batcher_open: %s", rsv_code_name(rc));
    ck_assert(b != NULL);
    return b;
}

static uint64_t bstat(rsv_batcher *b, uint32_t stat, uint32_t op)
{
    uint64_t v = 0;
    ck_assert_int_eq(rsv_batcher_stats_get(b, stat, op, &v), RSV_OK);
    return v;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- many threads, one hot item ---- */

#define HOT_THREADS 32
#define HOT_EACH 8  /* the first wave: every one served */
#define HOT_MORE 2  /* the second: more than what is left */
#define HOT_STOCK 300

static struct {
    rsv_batcher *b;
    uint64_t shop;
    int wave, each;
    pthread_barrier_t go;
    int rc[HOT_THREADS][HOT_EACH];
} hot;

static void hot_token(char *out, size_t n, int wave, int t, int i)
{
    snprintf(out, n, "hot-%d-%d-%d", wave, t, i);
}

static void *hot_buyer(void *arg)
{
    int t = (int)(intptr_t)arg;
    pthread_barrier_wait(&hot.go);
    for (int i = 0; i < hot.each; i++) {
        char tok[32];
        hot_token(tok, sizeof tok, hot.wave, t, i);
        hot.rc[t][i] = rsv_batcher_reserve_one(hot.b, hot.shop, TOK(tok), 1,
                                               1, 1, 0);
    }
    return NULL;
}

/* One wave: every thread reserves hot.each units one by one; returns the
 * successes, checking each against the checkout's state. */
static int hot_wave(rsv_ctx *ctx, int wave, int each)
{
    hot.wave = wave;
    hot.each = each;
    pthread_barrier_init(&hot.go, NULL, HOT_THREADS);
    pthread_t th[HOT_THREADS];
    for (int t = 0; t < HOT_THREADS; t++)
        pthread_create(&th[t], NULL, hot_buyer, (void *)(intptr_t)t);
    for (int t = 0; t < HOT_THREADS; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&hot.go);
    int ok = 0;
    for (int t = 0; t < HOT_THREADS; t++)
        for (int i = 0; i < each; i++) {
            int rc = hot.rc[t][i];
            char tok[32];
            hot_token(tok, sizeof tok, wave, t, i);
            int32_t st = 0;
            int64_t units = 0;
            int src = rsv_checkout_status(ctx, hot.shop, TOK(tok), &st,
                                          &units, NULL);
            if (rc == RSV_OK) {
                ok++;
                TU_OK(ctx, src);
                ck_assert_int_eq(st, RSV_STATUS_HELD);
                ck_assert_int_eq(units, 1);
            } else {
                ck_assert_msg(rc == RSV_EOUTOFSTOCK, "%s: %s", tok,
                              rsv_code_name(rc));
                TU_RC(ctx, src, RSV_ENOTFOUND);
            }
        }
    return ok;
}

/* 32 threads through 4 connections on one item: 256 one-unit reserves in
 * far fewer statements than one each, then 64 more for the 44 units
 * left: every unit held once, every other caller told it is sold out,
 * every success a real hold. */
START_TEST(hot_item_many_threads)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    hot.shop = f.shop;
    tu_fix_stock(&f, 1, 1, HOT_STOCK);
    hot.b = open_batcher(4, NULL);
    int first = HOT_THREADS * HOT_EACH;
    ck_assert_int_eq(hot_wave(f.ctx, 1, HOT_EACH), first);
    uint64_t calls = bstat(hot.b, RSV_STAT_CALLS, RSV_OP_RESERVE);
    uint64_t stmts = bstat(hot.b, RSV_STAT_STATEMENTS, RSV_OP_RESERVE);
    ck_assert_int_eq(calls, first);
    ck_assert_int_eq(bstat(hot.b, RSV_STAT_OK, RSV_OP_RESERVE), first);
    /* coalesced: a batch of n entries is one statement where n single
     * calls make at least n.  Usually 0.4-0.6 per reserve here, but how
     * many callers queue behind a busy worker depends on the scheduler
     * (0.76 seen under the sanitizers on a loaded machine): the bound is
     * the one no run without coalescing can meet. */
    ck_assert_msg(stmts < calls, "%llu statements for %llu reserves",
                  (unsigned long long)stmts, (unsigned long long)calls);
    ck_assert_int_eq(hot_wave(f.ctx, 2, HOT_MORE), HOT_STOCK - first);
    ck_assert_int_eq(tu_held(f.ctx, hot.shop, 1, 1), HOT_STOCK);
    /* sold out also for a lone caller */
    TU_RC(f.ctx, rsv_batcher_reserve_one(hot.b, hot.shop, TOK("late"), 1, 1, 1,
                                         0),
          RSV_EOUTOFSTOCK);
    ck_assert_int_eq(bstat(hot.b, RSV_STAT_CALLS, RSV_OP_RESERVE),
                     first + HOT_THREADS * HOT_MORE + 1);
    ck_assert_int_eq(bstat(hot.b, RSV_STAT_OK, RSV_OP_RESERVE), HOT_STOCK);
    rsv_batcher_close(hot.b);
    tu_fix_close(&f);
}
END_TEST

/* ---- a lone caller ---- */

START_TEST(lone_caller_is_a_batch_of_one)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 5);
    rsv_batcher *b = open_batcher(2, NULL);
    TU_OK(f.ctx, rsv_batcher_reserve_one(b, f.shop, TOK("alone"), 1, 1, 2, 0));
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), 2);
    /* what the single call costs: one statement (the schema's procedure) */
    ck_assert_int_eq(bstat(b, RSV_STAT_CALLS, RSV_OP_RESERVE), 1);
    ck_assert_int_eq(bstat(b, RSV_STAT_STATEMENTS, RSV_OP_RESERVE), 1);
    ck_assert_int_eq(bstat(b, RSV_STAT_ONE_TRIP, RSV_OP_RESERVE), 1);
    TU_OK(f.ctx, rsv_batcher_claim(b, f.shop, TOK("alone")));
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), 3);
    /* the statistics also go to a snapshot, one context per connection */
    rsv_stats_snapshot *snap = NULL;
    ck_assert_int_eq(rsv_stats_snapshot_new(&snap), RSV_OK);
    ck_assert_int_eq(rsv_batcher_stats_snapshot_add(snap, b), RSV_OK);
    char text[65536];
    ck_assert_int_eq(rsv_stats_prometheus(snap, NULL, text, sizeof text,
                                          NULL),
                     RSV_OK);
    ck_assert(strstr(text, "libreserve_contexts 2\n") != NULL);
    ck_assert(strstr(text, "libreserve_calls_total{op=\"claim\",result=\"ok\","
                           "class=\"ok\"} 1\n") != NULL);
    rsv_stats_snapshot_free(snap);
    rsv_batcher_close(b);
    tu_fix_close(&f);
}
END_TEST

/* ---- claims and releases ---- */

#define SETTLE_THREADS 16

static struct {
    rsv_batcher *b;
    uint64_t shop;
    pthread_barrier_t go;
    int rc[SETTLE_THREADS][6];
} st;

/* Each thread: two checkouts; claims one and releases the other, then
 * repeats both, then tries the other way round. */
static void *settler(void *arg)
{
    int t = (int)(intptr_t)arg;
    char a[32], r[32];
    snprintf(a, sizeof a, "claim-%d", t);
    snprintf(r, sizeof r, "release-%d", t);
    pthread_barrier_wait(&st.go);
    int *rc = st.rc[t];
    rc[0] = rsv_batcher_claim(st.b, st.shop, TOK(a));
    rc[1] = rsv_batcher_release(st.b, st.shop, TOK(r));
    rc[2] = rsv_batcher_claim(st.b, st.shop, TOK(a));
    rc[3] = rsv_batcher_release(st.b, st.shop, TOK(r));
    rc[4] = rsv_batcher_release(st.b, st.shop, TOK(a));
    rc[5] = rsv_batcher_claim(st.b, st.shop, TOK(r));
    return NULL;
}

START_TEST(claims_and_releases)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    st.shop = f.shop;
    tu_fix_stock(&f, 1, 1, 100);
    st.b = open_batcher(3, NULL);
    for (int t = 0; t < SETTLE_THREADS; t++) {
        char a[32], r[32];
        snprintf(a, sizeof a, "claim-%d", t);
        snprintf(r, sizeof r, "release-%d", t);
        TU_OK(f.ctx, rsv_batcher_reserve_one(st.b, st.shop, TOK(a), 1, 1, 2,
                                             0));
        TU_OK(f.ctx, rsv_batcher_reserve_one(st.b, st.shop, TOK(r), 1, 1, 1,
                                             0));
    }
    pthread_barrier_init(&st.go, NULL, SETTLE_THREADS);
    pthread_t th[SETTLE_THREADS];
    for (int t = 0; t < SETTLE_THREADS; t++)
        pthread_create(&th[t], NULL, settler, (void *)(intptr_t)t);
    for (int t = 0; t < SETTLE_THREADS; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&st.go);
    /* what the single calls answer in that order */
    static const int want[6] = {RSV_OK, RSV_OK, RSV_ECLAIMED, RSV_OK,
                                RSV_ECLAIMED, RSV_ERELEASED};
    for (int t = 0; t < SETTLE_THREADS; t++)
        for (int k = 0; k < 6; k++)
            ck_assert_msg(st.rc[t][k] == want[k], "thread %d call %d: %s",
                          t, k, rsv_code_name(st.rc[t][k]));
    ck_assert_int_eq(tu_on_hand(f.ctx, st.shop, 1, 1),
                     100 - 2 * SETTLE_THREADS);
    ck_assert_int_eq(tu_held(f.ctx, st.shop, 1, 1), 0);
    TU_RC(f.ctx, rsv_batcher_claim(st.b, st.shop, TOK("nobody")),
          RSV_ENOTFOUND);
    TU_RC(f.ctx, rsv_batcher_release(st.b, st.shop, TOK("nobody")),
          RSV_ENOTFOUND);
    ck_assert_int_eq(bstat(st.b, RSV_STAT_CALLS, RSV_OP_CLAIM),
                     3 * SETTLE_THREADS + 1);
    ck_assert_int_eq(bstat(st.b, RSV_STAT_CALLS, RSV_OP_RELEASE),
                     3 * SETTLE_THREADS + 1);
    rsv_batcher_close(st.b);
    tu_fix_close(&f);
}
END_TEST

/* ---- a lost connection ---- */

/* Kill every session on the suite's database but the caller's and
 * keep's: the batcher's connections. */
static int kill_others(MYSQL *keep)
{
    MYSQL *adm = tu_connect();
    char q[512];
    snprintf(q, sizeof q,
             "SELECT id FROM information_schema.processlist WHERE db = '%s' "
             "AND id <> CONNECTION_ID() AND id <> %lu",
             tu_db_name(), mysql_thread_id(keep));
    ck_assert_int_eq(mysql_query(adm, q), 0);
    MYSQL_RES *res = mysql_store_result(adm);
    ck_assert(res != NULL);
    unsigned long ids[64];
    int n = 0;
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(res)) && n < 64)
        ids[n++] = strtoul(row[0], NULL, 10);
    mysql_free_result(res);
    for (int i = 0; i < n; i++) {
        snprintf(q, sizeof q, "KILL %lu", ids[i]);
        mysql_query(adm, q); /* (it may have gone already) */
    }
    mysql_close(adm);
    return n;
}

/* The server kills the batcher's sessions: the next batch loses its
 * connection, the worker reconnects and sends it again, and the caller
 * only sees the answer. */
START_TEST(lost_connection_is_repeated)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 10);
    rsv_batcher *b = open_batcher(1, NULL);
    TU_OK(f.ctx, rsv_batcher_reserve_one(b, f.shop, TOK("before"), 1, 1, 1, 0));
    ck_assert_int_eq(kill_others(f.conn), 1);
    sleep_ms(100);
    TU_OK(f.ctx, rsv_batcher_reserve_one(b, f.shop, TOK("after"), 1, 1, 2, 0));
    ck_assert_int_eq(kill_others(f.conn), 1);
    sleep_ms(100);
    TU_OK(f.ctx, rsv_batcher_claim(b, f.shop, TOK("after")));
    ck_assert_int_eq(kill_others(f.conn), 1);
    sleep_ms(100);
    TU_OK(f.ctx, rsv_batcher_release(b, f.shop, TOK("before")));
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), 8);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), 0);
    /* the lost tries were counted, as failures */
    ck_assert_uint_ge(bstat(b, RSV_STAT_FAILED, RSV_OP_ALL), 1);
    rsv_batcher_close(b);
    tu_fix_close(&f);
}
END_TEST

/* ---- close with callers waiting ---- */

#define CLOSE_QUEUED 16
#define CLOSE_LATE 4

static struct {
    rsv_batcher *b;
    uint64_t shop;
    int gate_rc, started;
    int rc[CLOSE_QUEUED], late_rc[CLOSE_LATE];
    pthread_mutex_t mu;
} cl;

static void *gate_claimer(void *arg)
{
    (void)arg;
    cl.gate_rc = rsv_batcher_claim(cl.b, cl.shop, TOK("gate"));
    return NULL;
}

static void *queued_buyer(void *arg)
{
    int t = (int)(intptr_t)arg;
    char tok[32];
    snprintf(tok, sizeof tok, "queued-%d", t);
    pthread_mutex_lock(&cl.mu);
    cl.started++;
    pthread_mutex_unlock(&cl.mu);
    cl.rc[t] = rsv_batcher_reserve_one(cl.b, cl.shop, TOK(tok), 1, 1, 1, 0);
    return NULL;
}

static void *late_buyer(void *arg)
{
    int t = (int)(intptr_t)arg;
    char tok[32];
    snprintf(tok, sizeof tok, "late-%d", t);
    cl.late_rc[t] = rsv_batcher_reserve_one(cl.b, cl.shop, TOK(tok), 1, 1, 1,
                                            0);
    return NULL;
}

static void *closer(void *arg)
{
    (void)arg;
    rsv_batcher_close(cl.b);
    return NULL;
}

static int started(void)
{
    pthread_mutex_lock(&cl.mu);
    int n = cl.started;
    pthread_mutex_unlock(&cl.mu);
    return n;
}

/* The only worker waits for a row lock another session holds, 16 callers
 * queue behind it, close begins, 4 more callers are turned away; then the
 * lock goes: the queued callers are served, close returns, nothing hangs
 * or leaks. */
START_TEST(close_with_callers_waiting)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    cl.shop = f.shop;
    cl.started = 0;
    pthread_mutex_init(&cl.mu, NULL);
    tu_fix_stock(&f, 1, 1, 100);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, cl.shop, TOK("gate"), 1, 1, 1, 0));
    rsv_options o;
    rsv_options_init(&o, RSV_OPTIONS_VERSION);
    o.call_timeout_ms = 0;
    o.lock_wait_timeout_s = 60;
    cl.b = open_batcher(1, &o);
    MYSQL *lock = tu_connect_in_txn();
    char q[256];
    snprintf(q, sizeof q, "SELECT status FROM rsv_checkouts WHERE shop_id = "
             "%llu AND checkout_token = 'gate' FOR UPDATE",
             (unsigned long long)cl.shop);
    ck_assert_int_eq(tu_i64(lock, q), 1);
    pthread_t gate, queued[CLOSE_QUEUED], late[CLOSE_LATE], cls;
    pthread_create(&gate, NULL, gate_claimer, NULL);
    /* until the worker waits for the lock (the server refreshes innodb_trx
     * only when it was not read for 0.1 s: polling faster reads it stale) */
    for (int i = 0; i < 200 &&
                    tu_i64(f.conn, "SELECT COUNT(*) FROM information_schema."
                              "innodb_trx WHERE trx_state = 'LOCK WAIT'") == 0;
         i++)
        sleep_ms(150);
    for (int t = 0; t < CLOSE_QUEUED; t++)
        pthread_create(&queued[t], NULL, queued_buyer, (void *)(intptr_t)t);
    while (started() < CLOSE_QUEUED)
        sleep_ms(10);
    sleep_ms(500); /* from started to queued */
    pthread_create(&cls, NULL, closer, NULL);
    sleep_ms(300); /* close has begun: it waits for the queue */
    for (int t = 0; t < CLOSE_LATE; t++)
        pthread_create(&late[t], NULL, late_buyer, (void *)(intptr_t)t);
    for (int t = 0; t < CLOSE_LATE; t++) {
        pthread_join(late[t], NULL);
        ck_assert_int_eq(cl.late_rc[t], RSV_EDISABLED);
    }
    tu_exec(lock, "ROLLBACK");
    pthread_join(gate, NULL);
    pthread_join(cls, NULL);
    for (int t = 0; t < CLOSE_QUEUED; t++) {
        pthread_join(queued[t], NULL);
        ck_assert_msg(cl.rc[t] == RSV_OK, "queued %d: %s", t,
                      rsv_code_name(cl.rc[t]));
    }
    ck_assert_int_eq(cl.gate_rc, RSV_OK);
    ck_assert_int_eq(tu_held(f.ctx, cl.shop, 1, 1), CLOSE_QUEUED);
    mysql_close(lock);
    pthread_mutex_destroy(&cl.mu);
    tu_fix_close(&f);
}
END_TEST

/* ---- bad input ---- */

/* Each bad call answered as the single call answers it. */
START_TEST(bad_input_as_the_single_call)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 5);
    rsv_batcher *b = open_batcher(1, NULL);
    char big[RSV_TOKEN_MAX + 1];
    memset(big, 'x', sizeof big);
    static const struct {
        int null_token;
        size_t len;
        uint64_t item;
        int64_t qty, ttl;
    } cases[] = {
        {1, 3, 1, 1, 0},           /* NULL token */
        {0, 0, 1, 1, 0},           /* empty token */
        {0, RSV_TOKEN_MAX + 1, 1, 1, 0}, /* too long */
        {0, 3, 1, 0, 0},           /* no quantity */
        {0, 3, 1, RSV_QUANTITY_MAX + 1, 0},
        {0, 3, 1, 1, -1},          /* ttl */
        {0, 3, 1, 1, 31LL * 24 * 3600 * 1000},
        {1, 3, 1, 0, 0},           /* quantity before token */
        {0, 0, 1, 1, -1},          /* token before ttl */
        {0, 3, 99, 1, 0},          /* no such item */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const void *tok = cases[i].null_token ? NULL : big;
        int single = rsv_reserve_one(f.ctx, f.shop, tok, cases[i].len,
                                     cases[i].item, 1, cases[i].qty,
                                     cases[i].ttl);
        int batched = rsv_batcher_reserve_one(b, f.shop, tok, cases[i].len,
                                              cases[i].item, 1, cases[i].qty,
                                              cases[i].ttl);
        ck_assert_msg(single != RSV_OK && batched == single,
                      "case %zu: batcher %s, single %s", i,
                      rsv_code_name(batched), rsv_code_name(single));
        ck_assert_int_eq(rsv_batcher_claim(b, f.shop, tok, cases[i].len),
                         rsv_claim(f.ctx, f.shop, tok, cases[i].len));
        ck_assert_int_eq(rsv_batcher_release(b, f.shop, tok, cases[i].len),
                         rsv_release(f.ctx, f.shop, tok, cases[i].len));
    }
    ck_assert_int_eq(rsv_batcher_reserve_one(NULL, f.shop, TOK("x"), 1, 1, 1,
                                             0),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_batcher_claim(NULL, f.shop, TOK("x")), RSV_EINVAL);
    ck_assert_int_eq(rsv_batcher_release(NULL, f.shop, TOK("x")), RSV_EINVAL);
    uint64_t v;
    ck_assert_int_eq(rsv_batcher_stats_get(NULL, RSV_STAT_CALLS, 0, &v),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_batcher_stats_get(b, RSV_STAT_CALLS, 0, NULL),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_batcher_stats_get(b, 999, 0, &v), RSV_EINVAL);
    ck_assert_int_eq(rsv_batcher_stats_get(b, RSV_STAT_CALLS, 999, &v),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_batcher_stats_snapshot_add(NULL, b), RSV_EINVAL);
    rsv_stats_snapshot *snap = NULL;
    ck_assert_int_eq(rsv_stats_snapshot_new(&snap), RSV_OK);
    ck_assert_int_eq(rsv_batcher_stats_snapshot_add(snap, NULL), RSV_EINVAL);
    rsv_stats_snapshot_free(snap);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), 0);
    rsv_batcher_close(b);
    rsv_batcher_close(NULL);
    tu_fix_close(&f);
}
END_TEST

/* Bad connection strings and counts: refused, *out NULL, nothing left
 * open (the leak checkers would say). */
START_TEST(open_refuses_bad_dsns)
{
    char dsn[1024];
    tu_dsn(dsn, sizeof dsn);
    rsv_batcher *b = (rsv_batcher *)1;
    ck_assert_int_eq(rsv_batcher_open(NULL, dsn, NULL, 1), RSV_EINVAL);
    ck_assert_int_eq(rsv_batcher_open(&b, NULL, NULL, 1), RSV_EINVAL);
    ck_assert(b == NULL);
    b = (rsv_batcher *)1;
    ck_assert_int_eq(rsv_batcher_open(&b, dsn, NULL, 0), RSV_EINVAL);
    ck_assert(b == NULL);
    ck_assert_int_eq(rsv_batcher_open(&b, dsn, NULL,
                                      RSV_BATCHER_MAX_CONNECTIONS + 1),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_batcher_open(&b, "postgres://h/db", NULL, 2),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_batcher_open(&b, "mariadb://h/db?nosuchkey=1",
                                      NULL, 2),
                     RSV_EINVAL);
    ck_assert(b == NULL);
    ck_assert_int_eq(rsv_batcher_open(&b, "mariadb://root@/db?socket="
                                          "%2Fnonexistent%2Fmysqld.sock"
                                          "&connect_timeout=2",
                                      NULL, 2),
                     RSV_ECONN);
    ck_assert(b == NULL);
    rsv_options o;
    rsv_options_init(&o, RSV_OPTIONS_VERSION);
    o.pool_cap = 0; /* a bad option */
    ck_assert_int_eq(rsv_batcher_open(&b, dsn, &o, 2), RSV_EINVAL);
    ck_assert(b == NULL);
    /* a database without the schema: the first context says so, and the
     * ones opened before it are closed again */
    char nodb[1100];
    const char *at = strstr(dsn, "@/"), *q = strchr(dsn, '?');
    ck_assert(at != NULL && q != NULL);
    snprintf(nodb, sizeof nodb, "%.*sinformation_schema%s",
             (int)(at + 2 - dsn), dsn, q);
    ck_assert_int_eq(rsv_batcher_open(&b, nodb, NULL, 3), RSV_ESCHEMA);
    ck_assert(b == NULL);
    /* all 64 */
    ck_assert_int_eq(rsv_batcher_open(&b, dsn, NULL,
                                      RSV_BATCHER_MAX_CONNECTIONS),
                     RSV_OK);
    rsv_batcher_close(b);
}
END_TEST

/* ---- the non-blocking form ---- */

/* Collect n completed calls through the descriptor, each matched to its
 * index in calls[] (set to NULL once collected) and its code in codes[]. */
static void collect(rsv_batcher *b, rsv_batcher_call **calls, int *codes,
                    int n)
{
    int fd = rsv_batcher_fd(b);
    ck_assert_int_ge(fd, 0);
    for (int got = 0; got < n;) {
        struct pollfd pfd = {fd, POLLIN, 0};
        ck_assert_int_eq(poll(&pfd, 1, 60000), 1);
        rsv_batcher_call *done;
        int code;
        while (rsv_batcher_next_done(b, &done, &code) == RSV_OK) {
            int i = 0;
            while (i < n && calls[i] != done)
                i++;
            ck_assert_msg(i < n, "a call that was not started");
            codes[i] = code;
            calls[i] = NULL;
            rsv_batcher_call_free(done);
            got++;
        }
    }
    /* all collected: nothing more to read */
    struct pollfd pfd = {fd, POLLIN, 0};
    ck_assert_int_eq(poll(&pfd, 1, 0), 0);
}

#define NB_CALLS 40
#define NB_STOCK 20

START_TEST(nonblocking_calls)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, NB_STOCK);
    rsv_batcher *b = open_batcher(2, NULL);
    rsv_batcher_call *calls[NB_CALLS], *none = (rsv_batcher_call *)1;
    int codes[NB_CALLS];
    char toks[NB_CALLS][16];
    int code = 0;
    ck_assert_int_eq(rsv_batcher_next_done(b, &none, &code), RSV_PENDING);
    ck_assert(none == NULL);
    for (int i = 0; i < NB_CALLS; i++) {
        char tok[16];
        snprintf(tok, sizeof tok, "nb-%d", i);
        snprintf(toks[i], sizeof toks[i], "%s", tok);
        /* the token is copied: this one is gone when the call runs */
        ck_assert_int_eq(rsv_batcher_reserve_one_start(b, f.shop, TOK(tok), 1,
                                                       1, 1, 0, &calls[i]),
                         RSV_PENDING);
        ck_assert(calls[i] != NULL);
    }
    collect(b, calls, codes, NB_CALLS);
    int ok = 0;
    for (int i = 0; i < NB_CALLS; i++) {
        ck_assert_msg(codes[i] == RSV_OK || codes[i] == RSV_EOUTOFSTOCK,
                      "call %d: %s", i, rsv_code_name(codes[i]));
        ok += codes[i] == RSV_OK;
    }
    ck_assert_int_eq(ok, NB_STOCK);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), NB_STOCK);
    /* claim half of the held ones, release the others */
    int n = 0, want[NB_CALLS];
    for (int i = 0; i < NB_CALLS; i++) {
        int rc = codes[i] != RSV_OK ? RSV_OK
                 : n % 2 ? rsv_batcher_claim_start(b, f.shop, TOK(toks[i]),
                                                   &calls[n])
                         : rsv_batcher_release_start(b, f.shop, TOK(toks[i]),
                                                     &calls[n]);
        if (codes[i] != RSV_OK)
            continue;
        ck_assert_int_eq(rc, RSV_PENDING);
        want[n++] = RSV_OK;
    }
    collect(b, calls, codes, n);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(codes[i], want[i]);
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), NB_STOCK - NB_STOCK / 2);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), 0);
    /* answered at once, as the single calls */
    rsv_batcher_call *c1 = (rsv_batcher_call *)1;
    ck_assert_int_eq(rsv_batcher_claim_start(b, f.shop, "", 0, &c1),
                     RSV_ETOKEN);
    ck_assert(c1 == NULL);
    ck_assert_int_eq(rsv_batcher_release_start(b, f.shop, NULL, 1, &c1),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_batcher_reserve_one_start(b, f.shop, TOK("q"), 1, 1,
                                                   0, 0, &c1),
                     RSV_EQUANTITY);
    ck_assert_int_eq(rsv_batcher_reserve_one_start(b, f.shop, TOK("q"), 1, 1,
                                                   1, 0, NULL),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_batcher_claim_start(NULL, f.shop, TOK("q"), &c1),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_batcher_fd(NULL), RSV_EINVAL);
    ck_assert_int_eq(rsv_batcher_next_done(NULL, &c1, &code), RSV_EINVAL);
    ck_assert_int_eq(rsv_batcher_next_done(b, NULL, &code), RSV_EINVAL);
    ck_assert_int_eq(rsv_batcher_next_done(b, &c1, NULL), RSV_EINVAL);
    rsv_batcher_call_free(NULL);
    /* started and never collected: close runs them and frees them */
    for (int i = 0; i < 10; i++) {
        char tok[16];
        snprintf(tok, sizeof tok, "left-%d", i);
        ck_assert_int_eq(rsv_batcher_release_start(b, f.shop, TOK(tok),
                                                   &calls[i]),
                         RSV_PENDING);
    }
    rsv_batcher_close(b);
    tu_fix_close(&f);
}
END_TEST

int main(void)
{
    tu_db_create("batcher");
    Suite *s = suite_create("batcher");
    tu_add_timeout(s, "hot_item_many_threads", hot_item_many_threads, 300);
    tu_add(s, "lone_caller_is_a_batch_of_one", lone_caller_is_a_batch_of_one);
    tu_add_timeout(s, "claims_and_releases", claims_and_releases, 300);
    tu_add_timeout(s, "lost_connection_is_repeated",
                   lost_connection_is_repeated, 120);
    tu_add_timeout(s, "close_with_callers_waiting",
                   close_with_callers_waiting, 120);
    tu_add(s, "bad_input_as_the_single_call", bad_input_as_the_single_call);
    tu_add_timeout(s, "nonblocking_calls", nonblocking_calls, 120);
    tu_add_timeout(s, "open_refuses_bad_dsns", open_refuses_bad_dsns, 300);
    int rc = tu_run(s);
    tu_db_drop();
    return rc;
}
