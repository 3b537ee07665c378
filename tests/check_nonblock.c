/*
 * check_nonblock.c - the non-blocking interface against the real server:
 * a loop is never blocked while a call waits for a row lock, rsv_cancel
 * before and during a call, rsv_close with a call in flight, every other
 * function refused while a call is pending, and the libuv and libevent
 * adapters driving a reserve and a claim.  (The lifecycle, bad-input and
 * concurrency suites also run through the interface: check_*_nb.)
 */
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <uv.h>

#include <reserve/async.h>
#include <reserve/stats.h>

#include "testutil.h"
#include "../lib/test_flags.h"
#include "reserve/libevent.h"
#include "reserve/libuv.h"

#define TOK(s) (s), strlen(s)

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait up to ms for ctx's call; its code, or RSV_PENDING if still
 * running. */
static int wait_for(rsv_ctx *ctx, int rc, int ms)
{
    int64_t until = now_ms() + ms;
    while (rc == RSV_PENDING) {
        int64_t left = until - now_ms();
        if (left <= 0)
            return RSV_PENDING;
        struct pollfd p = {rsv_async_fd(ctx), POLLIN, 0};
        poll(&p, 1, (int)left);
        rc = rsv_cont(ctx);
    }
    return rc;
}

/* A second session holding the checkout row of token, as a checkout in
 * progress elsewhere would: every call on that checkout waits for it. */
static MYSQL *lock_checkout(uint64_t shop, const char *token)
{
    MYSQL *l = tu_connect_in_txn();
    char q[256];
    snprintf(q, sizeof q, "SELECT status FROM rsv_checkouts WHERE "
                          "shop_id = %llu AND checkout_token = '%s' FOR UPDATE",
             (unsigned long long)shop, token);
    ck_assert_int_eq(tu_i64(l, q), 1);
    return l;
}

static int32_t status_of(rsv_ctx *ctx, uint64_t shop, const char *token)
{
    int32_t st = 0;
    int rc = rsv_checkout_status(ctx, shop, TOK(token), &st, NULL, NULL);
    return rc == RSV_OK ? st : rc;
}

/* ---- (a) the loop keeps turning ---- */

enum { BUYERS = 3 };

struct buyer {
    rsv_ctx *ctx;
    MYSQL *conn;
    uint64_t shop;
    int n, step, busy;
    char token[32];
};

static int buyer_next(struct buyer *b)
{
    if (b->step == 0) {
        snprintf(b->token, sizeof b->token, "loop-%p-%d", (void *)b, b->n);
        b->step = 1;
        return rsv_reserve_one_start(b->ctx, b->shop, TOK(b->token), 1, 1, 1,
                                     0);
    }
    b->step = 0;
    b->n++;
    return rsv_claim_start(b->ctx, b->shop, TOK(b->token));
}

START_TEST(loop_never_blocked)
{
    uint64_t shop = tu_shop();
    MYSQL *c;
    rsv_ctx *waiter = tu_open(&c);
    TU_OK(waiter, rsv_stock_set(waiter, shop, 1, 1, 1000));
    TU_OK(waiter, rsv_reserve_one(waiter, shop, TOK("slow"), 1, 1, 1, 0));
    MYSQL *locker = lock_checkout(shop, "slow");

    struct buyer b[BUYERS];
    memset(b, 0, sizeof b);
    struct pollfd fds[BUYERS + 1];
    int rc[BUYERS + 1];
    for (int i = 0; i < BUYERS; i++) {
        b[i].ctx = tu_open(&b[i].conn);
        b[i].shop = shop;
        fds[i].fd = rsv_async_fd(b[i].ctx);
        fds[i].events = POLLIN;
    }
    fds[BUYERS].fd = rsv_async_fd(waiter);
    fds[BUYERS].events = POLLIN;
    int64_t started = now_ms();
    rc[BUYERS] = rsv_claim_start(waiter, shop, TOK("slow"));
    ck_assert_int_eq(rc[BUYERS], RSV_PENDING);

    /* A 10 ms tick, as a server's timers would be; the lock is let go
     * after 2.5 s, beyond the claim's first lock wait (2 s). */
    int64_t next_tick = now_ms(), last_tick = now_ms(), max_gap = 0;
    int64_t claim_ms = -1;
    int ticks = 0, others_meanwhile = 0, unlocked = 0;
    while (claim_ms < 0) {
        int64_t t = now_ms();
        ck_assert_msg(t - started < 15000, "the claim never finished");
        int timeout = next_tick > t ? (int)(next_tick - t) : 0;
        poll(fds, BUYERS + 1, timeout);
        t = now_ms();
        if (t >= next_tick) {
            if (t - last_tick > max_gap)
                max_gap = t - last_tick;
            last_tick = t;
            next_tick = t + 10;
            ticks++;
            /* each buyer starts at most one call a tick: a steady load,
             * not a benchmark */
            for (int i = 0; i < BUYERS; i++)
                if (!b[i].busy) {
                    b[i].busy = 1;
                    rc[i] = buyer_next(&b[i]);
                    ck_assert_int_eq(rc[i], RSV_PENDING);
                }
        }
        if (!unlocked && t - started >= 2500) {
            tu_exec(locker, "ROLLBACK");
            unlocked = 1;
        }
        for (int i = 0; i < BUYERS; i++) {
            if (!(fds[i].revents & POLLIN))
                continue;
            int r = rsv_cont(b[i].ctx);
            if (r == RSV_PENDING)
                continue;
            TU_RC(b[i].ctx, r, RSV_OK);
            others_meanwhile++;
            b[i].busy = 0;
        }
        if (fds[BUYERS].revents & POLLIN) {
            int r = rsv_cont(waiter);
            if (r != RSV_PENDING) {
                TU_RC(waiter, r, RSV_OK);
                claim_ms = now_ms() - started;
            }
        }
    }
    /* let the buyers' last calls finish */
    for (int i = 0; i < BUYERS; i++) {
        if (!b[i].busy)
            continue;
        int r = wait_for(b[i].ctx, RSV_PENDING, 10000);
        TU_RC(b[i].ctx, r, RSV_OK);
    }
    fprintf(stderr, "loop_never_blocked: claim waited %lld ms; %d ticks, "
                    "largest gap %lld ms; %d calls of other buyers done "
                    "meanwhile\n", (long long)claim_ms, ticks,
            (long long)max_gap, others_meanwhile);
    ck_assert_int_ge(claim_ms, 2000);
    ck_assert_int_lt(max_gap, 500);
    ck_assert_int_gt(ticks, 100);
    ck_assert_int_gt(others_meanwhile, 10);
    ck_assert_int_eq(status_of(waiter, shop, "slow"), RSV_STATUS_CLAIMED);
    for (int i = 0; i < BUYERS; i++) {
        rsv_close(b[i].ctx);
        mysql_close(b[i].conn);
    }
    mysql_close(locker);
    rsv_close(waiter);
    mysql_close(c);
}
END_TEST

/* ---- (b) rsv_cancel ---- */

/* A cancel right after the start usually finds the call not begun: it
 * then completes with RSV_ECANCELED, having sent nothing, and the
 * connection is as it was.  If the worker was faster, the call is cut:
 * nothing may be applied but an in-doubt procedure, settled here. */
START_TEST(cancel_before_it_begins)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    MYSQL *c2;
    rsv_ctx *other = tu_open(&c2);
    tu_fix_stock(&f, 1, 1, 100);
    int before = 0;
    for (int i = 0; i < 20; i++) {
        char tok[32];
        snprintf(tok, sizeof tok, "pre-%d", i);
        int rc = rsv_reserve_one_start(f.ctx, f.shop, TOK(tok), 1, 1, 1, 0);
        ck_assert_int_eq(rc, RSV_PENDING);
        ck_assert_int_eq(rsv_cancel(f.ctx), RSV_OK);
        rc = wait_for(f.ctx, rc, 10000);
        if (rc == RSV_ECANCELED &&
            strstr(rsv_errmsg(f.ctx), "before it began")) {
            before++;
            ck_assert_int_eq(status_of(other, f.shop, tok), RSV_ENOTFOUND);
            continue; /* the connection was not cut */
        }
        ck_assert_msg(rc == RSV_ECANCELED || rc == RSV_ECONN ||
                          rc == RSV_EINDOUBT || rc == RSV_OK,
                      "%d %s", rc, rsv_errmsg(f.ctx));
        TU_OK(f.ctx, rsv_reconnect(f.ctx));
        rc = rsv_release(f.ctx, f.shop, TOK(tok));
        ck_assert_msg(rc == RSV_OK || rc == RSV_ENOTFOUND, "%d %s", rc,
                      rsv_errmsg(f.ctx));
    }
    fprintf(stderr, "cancel_before_it_begins: %d of 20 before\n", before);
    ck_assert_int_gt(before, 0);
    ck_assert_int_eq(tu_held(other, f.shop, 1, 1), 0);
    /* no call pending: nothing to cancel */
    ck_assert_int_eq(rsv_cancel(f.ctx), RSV_EINVAL);
    ck_assert_int_eq(rsv_cancel(NULL), RSV_EINVAL);
    rsv_close(other);
    mysql_close(c2);
    tu_fix_close(&f);
}
END_TEST

/* A claim waiting for a row lock is cut at once.  By statements (the
 * COMMIT not sent) nothing is applied: RSV_ECANCELED or RSV_ECONN; with
 * the procedure the CALL was sent and may still commit on the server:
 * RSV_EINDOUBT too, settled by repeating the claim.  Either way the claim
 * repeated after rsv_reconnect takes the units exactly once. */
START_TEST(cancel_a_waiting_claim)
{
    int by_statements = _i == 0;
    tu_fix f;
    tu_fix_open(&f, by_statements ? TEST_OPT_STATEMENTS_ONLY : 0, 0);
    MYSQL *c2;
    rsv_ctx *other = tu_open(&c2);
    tu_fix_stock(&f, 1, 1, 5);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("c1"), 1, 1, 2, 0));
    MYSQL *locker = lock_checkout(f.shop, "c1");
    int rc = rsv_claim_start(f.ctx, f.shop, TOK("c1"));
    ck_assert_int_eq(rc, RSV_PENDING);
    ck_assert_int_eq(wait_for(f.ctx, rc, 300), RSV_PENDING); /* waiting */
    int64_t t0 = now_ms();
    ck_assert_int_eq(rsv_cancel(f.ctx), RSV_OK);
    ck_assert_int_eq(rsv_cancel(f.ctx), RSV_OK); /* twice is fine */
    rc = wait_for(f.ctx, rc, 5000);
    int64_t took = now_ms() - t0;
    ck_assert_msg(took < 1000, "the cancel took %lld ms", (long long)took);
    if (by_statements)
        ck_assert_msg(rc == RSV_ECANCELED || rc == RSV_ECONN, "%d %s", rc,
                      rsv_errmsg(f.ctx));
    else
        ck_assert_msg(rc == RSV_ECANCELED || rc == RSV_ECONN ||
                          rc == RSV_EINDOUBT, "%d %s", rc, rsv_errmsg(f.ctx));
    /* the lock is still held: nothing can have been applied yet */
    ck_assert_int_eq(status_of(other, f.shop, "c1"), RSV_STATUS_HELD);
    ck_assert_int_eq(tu_on_hand(other, f.shop, 1, 1), 5);
    tu_exec(locker, "ROLLBACK");
    if (by_statements) {
        /* and the cut session never sends its COMMIT */
        struct timespec ts = {0, 300 * 1000000L};
        nanosleep(&ts, NULL);
        ck_assert_int_eq(status_of(other, f.shop, "c1"), RSV_STATUS_HELD);
        ck_assert_int_eq(tu_held(other, f.shop, 1, 1), 2);
    }
    TU_OK(f.ctx, rsv_reconnect(f.ctx));
    rc = rsv_claim(f.ctx, f.shop, TOK("c1"));
    ck_assert_msg(rc == RSV_OK || (!by_statements && rc == RSV_ECLAIMED),
                  "%d %s", rc, rsv_errmsg(f.ctx));
    ck_assert_int_eq(status_of(other, f.shop, "c1"), RSV_STATUS_CLAIMED);
    ck_assert_int_eq(tu_on_hand(other, f.shop, 1, 1), 3);
    mysql_close(locker);
    rsv_close(other);
    mysql_close(c2);
    tu_fix_close(&f);
}
END_TEST

/* ---- (c) rsv_close with a call in flight ---- */

START_TEST(close_with_a_call_in_flight)
{
    uint64_t shop = tu_shop();
    MYSQL *c0;
    rsv_ctx *setup = tu_open(&c0);
    TU_OK(setup, rsv_stock_set(setup, shop, 1, 1, 10));
    TU_OK(setup, rsv_reserve_one(setup, shop, TOK("w"), 1, 1, 1, 0));
    MYSQL *locker = lock_checkout(shop, "w");

    /* waiting for a lock */
    MYSQL *c;
    rsv_ctx *ctx = tu_open(&c);
    int rc = rsv_claim_start(ctx, shop, TOK("w"));
    ck_assert_int_eq(wait_for(ctx, rc, 200), RSV_PENDING);
    int64_t t0 = now_ms();
    rsv_close(ctx);
    ck_assert_int_lt(now_ms() - t0, 2000);
    mysql_close(c);

    /* just started */
    ctx = tu_open(&c);
    ck_assert_int_eq(rsv_reserve_one_start(ctx, shop, TOK("x"), 1, 1, 1, 0),
                     RSV_PENDING);
    rsv_close(ctx);
    mysql_close(c);

    /* finished, its result never collected */
    ctx = tu_open(&c);
    ck_assert_int_eq(rsv_checkout_status_start(ctx, shop, TOK("nope"),
                                               &(int32_t){0}, NULL, NULL),
                     RSV_PENDING);
    struct pollfd p = {rsv_async_fd(ctx), POLLIN, 0};
    ck_assert_int_eq(poll(&p, 1, 10000), 1);
    rsv_close(ctx);
    mysql_close(c);

    /* a context that owns its connection, on a dsn */
    char dsn[512];
    snprintf(dsn, sizeof dsn, "mariadb://%s@/%s?socket=%s",
             getenv("RSV_TEST_USER") ? getenv("RSV_TEST_USER") : "root",
             tu_db_name(), getenv("RSV_TEST_SOCKET"));
    if (!getenv("RSV_TEST_PASSWORD")) {
        ctx = NULL;
        TU_OK(ctx, rsv_open_dsn(&ctx, dsn, NULL));
        rc = rsv_claim_start(ctx, shop, TOK("w"));
        ck_assert_int_eq(wait_for(ctx, rc, 200), RSV_PENDING);
        rsv_close(ctx);
    }

    tu_exec(locker, "ROLLBACK");
    mysql_close(locker);
    /* the claims were cut inside their CALL: in doubt, and the server
     * may finish one once the lock is gone; never both, never twice */
    rc = rsv_release(setup, shop, TOK("w"));
    ck_assert_msg(rc == RSV_OK || rc == RSV_ECLAIMED, "%d %s", rc,
                  rsv_errmsg(setup));
    int64_t left = tu_on_hand(setup, shop, 1, 1);
    ck_assert_msg(left == (rc == RSV_OK ? 10 : 9), "%lld", (long long)left);
    rsv_close(setup);
    mysql_close(c0);
}
END_TEST

/* ---- (d) nothing else runs on a context while a call is pending ---- */

static int callbacks;
static void count_callback(void *user, uint32_t op, int code, uint64_t shop,
                           const void *token, size_t len, uint64_t us)
{
    (void)user, (void)op, (void)code, (void)shop, (void)token, (void)len;
    (void)us;
    callbacks++;
}

START_TEST(refused_while_pending)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 10);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("p"), 1, 1, 1, 0));
    TU_OK(f.ctx, rsv_set_callback(f.ctx, count_callback, NULL));
    TU_OK(f.ctx, rsv_stats_reset(f.ctx));
    callbacks = 0;
    ck_assert_int_eq(rsv_pending(f.ctx), 0);
    int fd = rsv_async_fd(f.ctx);
    ck_assert_int_ge(fd, 0);
    MYSQL *locker = lock_checkout(f.shop, "p");
    int rc = rsv_claim_start(f.ctx, f.shop, TOK("p"));
    ck_assert_int_eq(rc, RSV_PENDING);
    ck_assert_int_eq(rsv_async_fd(f.ctx), fd);
    ck_assert_int_eq(rsv_pending(f.ctx), 1);
    ck_assert_int_eq(rsv_errcode(f.ctx), RSV_PENDING);
    ck_assert_int_eq(rsv_cont(f.ctx), RSV_PENDING);

    int64_t v;
    uint64_t u;
    int32_t st;
    rsv_cart *cart;
    TU_OK(NULL, rsv_cart_new(&cart));
    TU_OK(NULL, rsv_cart_add(cart, 1, (uint64_t[]){1}, 1, 1, 0));
    ck_assert_int_eq(rsv_claim(f.ctx, f.shop, TOK("p")), RSV_EINVAL);
    ck_assert_int_eq(rsv_release(f.ctx, f.shop, TOK("p")), RSV_EINVAL);
    ck_assert_int_eq(rsv_reserve(f.ctx, f.shop, TOK("q"), cart, 0), RSV_EINVAL);
    ck_assert_int_eq(rsv_reserve_one(f.ctx, f.shop, TOK("q"), 1, 1, 1, 0),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_reserve_one(f.ctx, f.shop, TOK("q"), 1, 1, 0, 0),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_extend(f.ctx, f.shop, TOK("p"), 0), RSV_EINVAL);
    ck_assert_int_eq(rsv_checkout_status(f.ctx, f.shop, TOK("p"), &st, NULL,
                                         NULL),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_stock_get(f.ctx, f.shop, 1, 1, &v, NULL, NULL, NULL),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_stock_set(f.ctx, f.shop, 1, 1, 9), RSV_EINVAL);
    ck_assert_int_eq(rsv_stock_adjust(f.ctx, f.shop, 1, 1, 1, NULL),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_replenish(f.ctx, f.shop, 1, 1, NULL), RSV_EINVAL);
    ck_assert_int_eq(rsv_pool_drain(f.ctx, f.shop, 1, 1, NULL), RSV_EINVAL);
    ck_assert_int_eq(rsv_sweep(f.ctx, f.shop, 0, NULL), RSV_EINVAL);
    ck_assert_int_eq(rsv_audit(f.ctx, f.shop, 0, NULL, NULL, NULL), RSV_EINVAL);
    ck_assert_int_eq(rsv_reconnect(f.ctx), RSV_EINVAL);
    ck_assert_int_eq(rsv_stats_get(f.ctx, RSV_STAT_CALLS, 0, &u), RSV_EINVAL);
    ck_assert_int_eq(rsv_stats_reset(f.ctx), RSV_EINVAL);
    ck_assert_int_eq(rsv_set_enabled(f.ctx, 0), RSV_EINVAL);
    ck_assert_int_eq(rsv_set_callback(f.ctx, NULL, NULL), RSV_EINVAL);
    ck_assert_int_eq(rsv_claim_start(f.ctx, f.shop, TOK("p")), RSV_EINVAL);
    ck_assert_int_eq(rsv_reserve_start(f.ctx, f.shop, TOK("q"), cart, 0),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_checkout_status_start(f.ctx, f.shop, TOK("p"), NULL,
                                               NULL, NULL), RSV_EINVAL);
    ck_assert_int_eq(rsv_errcode(f.ctx), RSV_PENDING);
    ck_assert_ptr_nonnull(strstr(rsv_errmsg(f.ctx), "in progress"));
    ck_assert_ptr_eq(rsv_connection(f.ctx), f.conn);

    tu_exec(locker, "ROLLBACK");
    rc = wait_for(f.ctx, rc, 10000);
    TU_RC(f.ctx, rc, RSV_OK);
    ck_assert_int_eq(rsv_pending(f.ctx), 0);
    ck_assert_int_eq(rsv_errcode(f.ctx), RSV_OK);
    /* collected once; the descriptor is no longer readable */
    ck_assert_int_eq(rsv_cont(f.ctx), RSV_EINVAL);
    struct pollfd p = {fd, POLLIN, 0};
    ck_assert_int_eq(poll(&p, 1, 0), 0);
    /* the worker's call was counted once and reported; none refused */
    TU_OK(f.ctx, rsv_stats_get(f.ctx, RSV_STAT_CALLS, RSV_OP_ALL, &u));
    ck_assert_uint_eq(u, 1);
    TU_OK(f.ctx, rsv_stats_get(f.ctx, RSV_STAT_OK, RSV_OP_CLAIM, &u));
    ck_assert_uint_eq(u, 1);
    ck_assert_int_eq(callbacks, 1);

    /* a start that answers at once leaves nothing pending */
    ck_assert_int_eq(rsv_claim_start(f.ctx, f.shop, NULL, 1), RSV_EINVAL);
    ck_assert_int_eq(rsv_claim_start(f.ctx, f.shop, "", 0), RSV_ETOKEN);
    ck_assert_int_eq(rsv_reserve_one_start(f.ctx, f.shop, TOK("q"), 1, 1, 0, 0),
                     RSV_EQUANTITY);
    ck_assert_int_eq(rsv_pending(f.ctx), 0);
    ck_assert_int_eq(rsv_claim_start(NULL, f.shop, TOK("p")), RSV_EINVAL);
    ck_assert_int_eq(rsv_cont(NULL), RSV_EINVAL);
    ck_assert_int_eq(rsv_async_fd(NULL), RSV_EINVAL);
    ck_assert_int_eq(rsv_pending(NULL), 0);
    /* the next call on the same context works, blocking or not */
    TU_OK(f.ctx, rsv_checkout_status(f.ctx, f.shop, TOK("p"), &st, NULL, NULL));
    ck_assert_int_eq(st, RSV_STATUS_CLAIMED);
    st = 0;
    v = -1;
    rc = rsv_checkout_status_start(f.ctx, f.shop, TOK("p"), &st, &v, NULL);
    TU_RC(f.ctx, wait_for(f.ctx, rc, 10000), RSV_OK);
    ck_assert_int_eq(st, RSV_STATUS_CLAIMED);
    ck_assert_int_eq(v, 0);
    ck_assert_str_eq(rsv_code_name(RSV_PENDING), "RSV_PENDING");
    ck_assert_str_eq(rsv_code_name(RSV_ECANCELED), "RSV_ECANCELED");
    ck_assert_str_ne(rsv_strerror(RSV_ECANCELED), "unknown error code");
    rsv_cart_free(cart);
    mysql_close(locker);
    tu_fix_close(&f);
}
END_TEST

/* ---- (e) the adapters ---- */

struct flow {
    rsv_ctx *ctx;
    uint64_t shop;
    int reserved, claimed;
    void *adapter;
};

static void uv_claimed(rsv_ctx *ctx, int code, void *data)
{
    struct flow *f = data;
    f->claimed = code;
    (void)ctx;
    rsv_uv_detach(f->adapter); /* the loop then has nothing left */
}

static void uv_reserved(rsv_ctx *ctx, int code, void *data)
{
    struct flow *f = data;
    f->reserved = code;
    ck_assert_int_eq(rsv_uv_wait(f->adapter,
                                 rsv_claim_start(ctx, f->shop, TOK("uv")),
                                 uv_claimed, f), 0);
}

START_TEST(libuv_adapter)
{
    struct flow f = {0};
    MYSQL *c;
    f.ctx = tu_open(&c);
    f.shop = tu_shop();
    f.reserved = f.claimed = 99;
    TU_OK(f.ctx, rsv_stock_set(f.ctx, f.shop, 1, 1, 3));
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    rsv_uv *a;
    ck_assert_int_eq(rsv_uv_attach(&a, &loop, f.ctx), 0);
    f.adapter = a;
    ck_assert_int_eq(rsv_uv_wait(a, rsv_reserve_one_start(f.ctx, f.shop,
                                                          TOK("uv"), 1, 1, 2,
                                                          0),
                                 uv_reserved, &f), 0);
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    TU_RC(f.ctx, f.reserved, RSV_OK);
    TU_RC(f.ctx, f.claimed, RSV_OK);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), 1);
    rsv_close(f.ctx);
    mysql_close(c);
}
END_TEST

static void ev_claimed(rsv_ctx *ctx, int code, void *data)
{
    struct flow *f = data;
    f->claimed = code;
    (void)ctx;
}

static void ev_reserved(rsv_ctx *ctx, int code, void *data)
{
    struct flow *f = data;
    f->reserved = code;
    ck_assert_int_eq(rsv_event_wait(f->adapter,
                                    rsv_claim_start(ctx, f->shop, TOK("ev")),
                                    ev_claimed, f), 0);
}

START_TEST(libevent_adapter)
{
    struct flow f = {0};
    MYSQL *c;
    f.ctx = tu_open(&c);
    f.shop = tu_shop();
    f.reserved = f.claimed = 99;
    TU_OK(f.ctx, rsv_stock_set(f.ctx, f.shop, 1, 1, 3));
    struct event_base *base = event_base_new();
    ck_assert_ptr_nonnull(base);
    rsv_event *a;
    ck_assert_int_eq(rsv_event_attach(&a, base, f.ctx), 0);
    f.adapter = a;
    ck_assert_int_eq(rsv_event_wait(a, rsv_reserve_one_start(f.ctx, f.shop,
                                                             TOK("ev"), 1, 1,
                                                             2, 0),
                                    ev_reserved, &f), 0);
    ck_assert_int_eq(event_base_dispatch(base), 1); /* no events left */
    TU_RC(f.ctx, f.reserved, RSV_OK);
    TU_RC(f.ctx, f.claimed, RSV_OK);
    /* a start that answers at once calls done from the wait itself */
    f.claimed = 99;
    ck_assert_int_eq(rsv_event_wait(a, rsv_claim_start(f.ctx, f.shop, "", 0),
                                    ev_claimed, &f), 0);
    ck_assert_int_eq(f.claimed, RSV_ETOKEN);
    rsv_event_detach(a);
    event_base_free(base);
    ck_assert_int_eq(tu_on_hand(f.ctx, f.shop, 1, 1), 1);
    rsv_close(f.ctx);
    mysql_close(c);
}
END_TEST

int main(void)
{
    tu_db_create("nonblock");
    Suite *s = suite_create("nonblock");
    tu_add_timeout(s, "loop_never_blocked", loop_never_blocked, 60);
    tu_add_timeout(s, "cancel_before_it_begins", cancel_before_it_begins, 60);
    tu_add_loop(s, "cancel_a_waiting_claim", cancel_a_waiting_claim, 0, 2);
    tu_add_timeout(s, "close_with_a_call_in_flight",
                   close_with_a_call_in_flight, 60);
    tu_add_timeout(s, "refused_while_pending", refused_while_pending, 60);
    tu_add_timeout(s, "libuv_adapter", libuv_adapter, 60);
    tu_add_timeout(s, "libevent_adapter", libevent_adapter, 60);
    int rc = tu_run(s);
    tu_db_drop();
    return rc;
}
