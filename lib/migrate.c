/*
 * migrate.c - the migration handle (include/reserve/migrate.h): the
 * checkout's calls sent to the old store, to libreserve or to both by the
 * shop's stage, the queue of work done off the request path by the
 * handle's own thread on its own connection, and the outbox.  How that
 * work is done and two answers counted is migrate_apply.c's; the tables'
 * side is migrate_stage.c's.
 *
 * Why a handle of its own and not the context: the shadow side must
 * never slow or fail a checkout, so it needs a connection and a thread
 * the request path never waits for; and a context that never migrates
 * pays nothing for it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "migrate.h"

static void add_ms(struct timespec *ts, uint32_t ms)
{
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static void deadline_in(struct timespec *ts, uint32_t ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    add_ms(ts, ms);
}

static int ring_push(mig_ring *r, const mig_work *w)
{
    if (r->n >= r->max)
        return -1;
    r->v[(r->head + r->n) % r->max] = *w;
    r->n++;
    return 0;
}

static const mig_work *ring_head(const mig_ring *r)
{
    return &r->v[r->head];
}

static mig_work ring_pop(mig_ring *r)
{
    mig_work w = r->v[r->head];
    r->head = (r->head + 1) % r->max;
    r->n--;
    return w;
}

/* mu held.  Offered work that will not be done: the old or new store
 * missed a call, so the shop is marked for a compare. */
static void drop(rsv_migration *m, const mig_work *w)
{
    if (!w->undo)
        mig_count(m, w->shop, RSV_MIG_DROPPED, 1);
    mig_pending_add(m, w, 0);
    mig_mark_compare(m, w->shop);
    pthread_cond_broadcast(&m->idle_cv);
}

/* mu held.  Primary's work for the application (no old store's function
 * registered): rsv_migrate_mirror_next hands it out. */
static void to_outbox(rsv_migration *m, const mig_work *w)
{
    if (ring_push(&m->ob, w) == 0)
        pthread_cond_broadcast(&m->ob_cv);
    else
        drop(m, w);
}

/* mu held.  The other store's side of a call the deciding store
 * answered: for the handle's thread, or (primary without an old store's
 * function) for the application. */
static void enqueue(rsv_migration *m, const mig_work *w)
{
    if (!w->undo)
        mig_count(m, w->shop, RSV_MIG_OFFERED, 1);
    mig_pending_add(m, w, 1);
    if (w->stage != RSV_STAGE_SHADOW && !m->legacy)
        to_outbox(m, w);
    else if (ring_push(&m->q, w) == 0)
        pthread_cond_signal(&m->cv);
    else
        drop(m, w);
}


/* The counters and samples go to the tables every MIG_FLUSH_EVERY
 * refreshes: the stage read is the one statement of most intervals. */
#define MIG_FLUSH_EVERY 5

static void refresh(rsv_migration *m, unsigned *n)
{
    if (mig_stage_read(m) != RSV_OK) {
        pthread_mutex_lock(&m->mu);
        m->read_failed++;
        pthread_mutex_unlock(&m->mu);
    }
    if (++*n % MIG_FLUSH_EVERY == 0)
        mig_flush(m);
}

/* mu held.  The thread's next work, into m->batch: the queue's head and,
 * for shadow work, the items after it that may share its batch, waiting
 * up to MIG_LINGER_MS for more while the queue holds none; returns how
 * many.  Under load the queue is never empty, so batches grow with it
 * and the catch-up after a stall costs a commit per batch. */
static size_t take(rsv_migration *m)
{
    mig_work *b = m->batch;
    size_t n = 0;
    b[n++] = ring_pop(&m->q);
    m->busy = n;
    /* a batcher coalesces the calls of every handle that shares it */
    if (m->batcher || !mig_batch_joins(b, 0, &b[0]))
        return n;
    struct timespec until;
    deadline_in(&until, MIG_LINGER_MS);
    int e = 0;
    for (;;) {
        while (n < MIG_BATCH && m->q.n && !mig_batch_ends(&b[n - 1]) &&
               mig_batch_joins(b, n, ring_head(&m->q)))
            b[n++] = ring_pop(&m->q);
        m->busy = n;
        if (n == MIG_BATCH || m->q.n || mig_batch_ends(&b[n - 1]) ||
            m->quit || e == ETIMEDOUT)
            return n;
        e = pthread_cond_timedwait(&m->cv, &m->mu, &until);
    }
}

static void *worker(void *arg)
{
    rsv_migration *m = arg;
    struct timespec next;
    unsigned refreshes = 0;
    pthread_mutex_lock(&m->mu);
    deadline_in(&next, m->refresh_ms);
    for (;;) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        if (now.tv_sec > next.tv_sec ||
            (now.tv_sec == next.tv_sec && now.tv_nsec >= next.tv_nsec)) {
            pthread_mutex_unlock(&m->mu);
            refresh(m, &refreshes);
            pthread_mutex_lock(&m->mu);
            /* at a fixed rate (the interval is the bound promised), but
             * never two reads back to back after a slow one */
            struct timespec after;
            deadline_in(&after, 0);
            add_ms(&next, m->refresh_ms);
            if (next.tv_sec < after.tv_sec ||
                (next.tv_sec == after.tv_sec && next.tv_nsec < after.tv_nsec))
                deadline_in(&next, m->refresh_ms / 2);
            continue;
        }
        if (m->q.n == 0) {
            pthread_cond_broadcast(&m->idle_cv);
            if (m->quit)
                break;
            pthread_cond_timedwait(&m->cv, &m->mu, &next);
            continue;
        }
        if (ring_head(&m->q)->stage != RSV_STAGE_SHADOW && !m->legacy) {
            /* the old store's function was removed since it was queued */
            mig_work w = ring_pop(&m->q);
            to_outbox(m, &w);
            continue;
        }
        size_t n = take(m);
        rsv_batcher *bt = m->batcher;
        pthread_mutex_unlock(&m->mu);
        mig_apply(m, m->batch, n, bt);
        pthread_mutex_lock(&m->mu);
        m->busy = 0;
    }
    pthread_mutex_unlock(&m->mu);
    mig_flush(m);
    return NULL;
}

static int32_t stage_of(rsv_migration *m, uint64_t shop)
{
    pthread_mutex_lock(&m->mu);
    const mig_shop *s = mig_shop_find(&m->shops, shop);
    int32_t st = s ? s->stage : RSV_STAGE_OLD;
    pthread_mutex_unlock(&m->mu);
    return st;
}

/* The shop's stage, once the store it names has seen the work the other
 * store decided before (a flip with work still queued: a checkout
 * reserved in shadow and claimed just after the flip to primary must find
 * its hold in libreserve).  In steady state nothing is pending and this
 * does not wait; after a flip it waits at most the context's call budget
 * (1 s without one), then decides anyway.  With nowait it does not wait:
 * *unsettled tells whether it would have. */
static int32_t stage_settled(rsv_migration *m, uint64_t shop, int nowait,
                             int *unsettled)
{
    struct timespec until;
    int set = 0, e = 0;
    pthread_mutex_lock(&m->mu);
    for (;;) {
        const mig_shop *s = mig_shop_find(&m->shops, shop);
        int32_t st = s ? s->stage : RSV_STAGE_OLD;
        uint32_t pending = !s ? 0
                           : st >= RSV_STAGE_PRIMARY ? s->pending_shadow
                                                     : s->pending_mirror;
        if (!pending || e == ETIMEDOUT || nowait) {
            pthread_mutex_unlock(&m->mu);
            if (unsettled)
                *unsettled = pending != 0;
            return st;
        }
        if (!set) {
            int64_t ms = m->ctx->opts.call_timeout_ms;
            deadline_in(&until, (uint32_t)(ms > 0 ? ms : 1000));
            set = 1;
        }
        e = pthread_cond_timedwait(&m->idle_cv, &m->mu, &until);
    }
}

/* What every call of the checkout checks first, at every stage, and the
 * work item that carries it. */
static int call_init(rsv_migration *m, mig_work *w, uint32_t op,
                     uint64_t shop, const void *token, size_t token_len,
                     uint64_t item, uint64_t loc, int64_t qty, int64_t ttl_ms)
{
    if (!m)
        return RSV_EINVAL;
    /* what the queue copies must fit; the deciding store checks the rest */
    if (!token || token_len == 0 || token_len > RSV_TOKEN_MAX)
        return RSV_ETOKEN;
    memset(w, 0, sizeof *w);
    w->op = op;
    w->shop = shop;
    w->item = item;
    w->loc = loc;
    w->qty = qty;
    w->ttl_ms = ttl_ms;
    memcpy(w->token, token, token_len);
    w->token_len = token_len;
    return RSV_OK;
}

/* A call at the stage it was routed to, given the old store's answer
 * where that stage asked the old store (old, shadow): the one path of the
 * calls with an old store's function and of the handover calls.  A flip
 * since the stage was read does not change it: the call acts at the stage
 * it was routed to, and the next call follows the flip. */
static int decide(rsv_migration *m, mig_work *w, int32_t st, int old_rc)
{
    int rc;
    w->stage = st;
    switch (st) {
    case RSV_STAGE_OLD:
        return old_rc;
    case RSV_STAGE_SHADOW:
        pthread_mutex_lock(&m->mu);
        if (mig_answered(old_rc)) {
            w->answer = old_rc;
            enqueue(m, w);
        } else
            mig_count(m, w->shop, RSV_MIG_OLD_FAILED, 1);
        pthread_mutex_unlock(&m->mu);
        return old_rc;
    case RSV_STAGE_PRIMARY:
        rc = mig_call_new(m->ctx, w, w->op);
        /* after a failure libreserve did nothing, or (RSV_EINDOUBT) the
         * application repeats the call and the repeat is mirrored; a
         * claim or release libreserve refused is not sent to the old
         * store, where it could not be undone */
        if (mig_answered(rc) && (w->op == RSV_OP_RESERVE || rc == RSV_OK)) {
            w->answer = rc;
            pthread_mutex_lock(&m->mu);
            enqueue(m, w);
            pthread_mutex_unlock(&m->mu);
        }
        return rc;
    default:
        return mig_call_new(m->ctx, w, w->op);
    }
}

static int dispatch(rsv_migration *m, uint32_t op, uint64_t shop,
                    const void *token, size_t token_len, uint64_t item,
                    uint64_t loc, int64_t qty, int64_t ttl_ms)
{
    mig_work w;
    int rc = call_init(m, &w, op, shop, token, token_len, item, loc, qty,
                       ttl_ms);
    if (rc != RSV_OK)
        return rc;
    int32_t st = stage_settled(m, shop, 0, NULL);
    int old_rc = st <= RSV_STAGE_SHADOW ? mig_call_old(m, &w, op) : RSV_OK;
    return decide(m, &w, st, old_rc);
}

static int handover(rsv_migration *m, int32_t stage, uint32_t op,
                    uint64_t shop, const void *token, size_t token_len,
                    uint64_t item, uint64_t loc, int64_t qty, int64_t ttl_ms,
                    int32_t old_answer)
{
    mig_work w;
    int rc = call_init(m, &w, op, shop, token, token_len, item, loc, qty,
                       ttl_ms);
    if (rc != RSV_OK)
        return rc;
    if (stage < RSV_STAGE_OLD || stage > RSV_STAGE_COMPLETE)
        return RSV_EINVAL;
    return decide(m, &w, stage, old_answer);
}

int rsv_migrate_reserve_one(rsv_migration *m, uint64_t shop_id,
                            const void *token, size_t token_len,
                            uint64_t item_id, uint64_t location_id,
                            int64_t quantity, int64_t ttl_ms)
{
    return dispatch(m, RSV_OP_RESERVE, shop_id, token, token_len, item_id,
                    location_id, quantity, ttl_ms);
}

int rsv_migrate_claim(rsv_migration *m, uint64_t shop_id, const void *token,
                      size_t token_len)
{
    return dispatch(m, RSV_OP_CLAIM, shop_id, token, token_len, 0, 0, 0, 0);
}

int rsv_migrate_release(rsv_migration *m, uint64_t shop_id, const void *token,
                        size_t token_len)
{
    return dispatch(m, RSV_OP_RELEASE, shop_id, token, token_len, 0, 0, 0, 0);
}

int rsv_migrate_route(rsv_migration *m, uint64_t shop_id, uint32_t flags,
                      int32_t *stage)
{
    if (!m || !stage || (flags & ~(uint32_t)RSV_ROUTE_NOWAIT))
        return RSV_EINVAL;
    int unsettled = 0;
    *stage = stage_settled(m, shop_id, (flags & RSV_ROUTE_NOWAIT) != 0,
                           &unsettled);
    return (flags & RSV_ROUTE_NOWAIT) && unsettled ? RSV_EBUSY : RSV_OK;
}

int rsv_migrate_reserve_one_answered(rsv_migration *m, int32_t stage,
                                     uint64_t shop_id, const void *token,
                                     size_t token_len, uint64_t item_id,
                                     uint64_t location_id, int64_t quantity,
                                     int64_t ttl_ms, int32_t old_answer)
{
    return handover(m, stage, RSV_OP_RESERVE, shop_id, token, token_len,
                    item_id, location_id, quantity, ttl_ms, old_answer);
}

int rsv_migrate_claim_answered(rsv_migration *m, int32_t stage,
                               uint64_t shop_id, const void *token,
                               size_t token_len, int32_t old_answer)
{
    return handover(m, stage, RSV_OP_CLAIM, shop_id, token, token_len, 0, 0,
                    0, 0, old_answer);
}

int rsv_migrate_release_answered(rsv_migration *m, int32_t stage,
                                 uint64_t shop_id, const void *token,
                                 size_t token_len, int32_t old_answer)
{
    return handover(m, stage, RSV_OP_RELEASE, shop_id, token, token_len, 0, 0,
                    0, 0, old_answer);
}

static int outbox_ready(const rsv_migration *m)
{
    return m->ob.n > 0 && m->hand_n < m->q.max;
}

int rsv_migrate_mirror_next(rsv_migration *m, uint32_t timeout_ms,
                            uint64_t *ticket, uint32_t *op, uint64_t *shop_id,
                            void *token, size_t token_cap, size_t *token_len,
                            uint64_t *item_id, uint64_t *location_id,
                            int64_t *quantity, int64_t *ttl_ms)
{
    if (!m || !ticket || !op || !shop_id || !token || !token_len ||
        !item_id || !location_id || !quantity || !ttl_ms)
        return RSV_EINVAL;
    struct timespec until;
    deadline_in(&until, timeout_ms);
    int e = 0, rc;
    pthread_mutex_lock(&m->mu);
    m->ob_waiters++;
    /* a ticket not done holds a slot: at q.max of them nothing more is
     * handed out */
    while (!m->quit && !outbox_ready(m) && e != ETIMEDOUT)
        e = pthread_cond_timedwait(&m->ob_cv, &m->mu, &until);
    if (m->quit)
        rc = RSV_ECANCELED;
    else if (!outbox_ready(m))
        rc = RSV_EBUSY;
    else if (m->ob.v[m->ob.head].token_len > token_cap) {
        *token_len = m->ob.v[m->ob.head].token_len;
        rc = RSV_ERANGE;
    } else {
        mig_work w = ring_pop(&m->ob);
        size_t i = 0;
        while (m->hand[i].id)
            i++;
        m->hand[i].id = ++m->next_ticket;
        m->hand[i].w = w;
        m->hand_n++;
        int is_res = w.op == RSV_OP_RESERVE;
        *ticket = m->hand[i].id;
        *op = w.op;
        *shop_id = w.shop;
        memcpy(token, w.token, w.token_len);
        *token_len = w.token_len;
        *item_id = is_res ? w.item : 0;
        *location_id = is_res ? w.loc : 0;
        *quantity = is_res ? w.qty : 0;
        *ttl_ms = is_res ? w.ttl_ms : 0;
        rc = RSV_OK;
    }
    m->ob_waiters--;
    if (m->quit)
        pthread_cond_broadcast(&m->ob_cv); /* close waits for us */
    pthread_mutex_unlock(&m->mu);
    return rc;
}

int rsv_migrate_mirror_done(rsv_migration *m, uint64_t ticket,
                            int32_t old_answer)
{
    if (!m || !ticket)
        return RSV_EINVAL;
    pthread_mutex_lock(&m->mu);
    mig_ticket *t = NULL;
    for (size_t i = 0; i < m->q.max && !t; i++)
        if (m->hand[i].id == ticket)
            t = &m->hand[i];
    if (!t) {
        pthread_mutex_unlock(&m->mu);
        return RSV_EINVAL;
    }
    mig_work w = t->w;
    t->id = 0;
    m->hand_n--;
    if (w.undo) {
        mig_pending_add(m, &w, 0);
        /* the old store kept a hold libreserve refused */
        if (old_answer != RSV_OK)
            mig_mark_compare(m, w.shop);
        pthread_cond_broadcast(&m->idle_cv);
    } else {
        if (mig_old_needs_undo(&w, old_answer)) {
            /* queued before the reserve is recorded: the shop's pending
             * work never reads 0 in between */
            mig_work u = w;
            u.op = RSV_OP_RELEASE;
            u.undo = 1;
            mig_pending_add(m, &u, 1);
            to_outbox(m, &u);
        }
        mig_record(m, &w, old_answer, w.answer);
    }
    pthread_cond_broadcast(&m->ob_cv); /* a slot in hand is free */
    pthread_mutex_unlock(&m->mu);
    return RSV_OK;
}

/* mu held.  At close: the outbox's work and the tickets not done will
 * not be done; returns how many. */
static size_t abandon(rsv_migration *m)
{
    size_t n = m->ob.n + m->hand_n;
    while (m->ob.n) {
        mig_work w = ring_pop(&m->ob);
        drop(m, &w);
    }
    for (size_t i = 0; i < m->q.max && m->hand_n; i++)
        if (m->hand[i].id) {
            drop(m, &m->hand[i].w);
            m->hand[i].id = 0;
            m->hand_n--;
        }
    return n;
}

int rsv_migrate_open(rsv_migration **out, rsv_ctx *ctx, const char *shadow_dsn,
                     uint32_t queue_max)
{
    if (!out)
        return RSV_EINVAL;
    *out = NULL;
    if (!ctx)
        return RSV_EINVAL;
    if (!shadow_dsn)
        return ctx_fail(ctx, RSV_EINVAL, "rsv_migrate_open: no shadow_dsn");
    rsv_migration *m = calloc(1, sizeof *m);
    if (!m)
        return ctx_fail(ctx, RSV_ENOMEM, "out of memory");
    m->ctx = ctx;
    m->refresh_ms = 1000;
    m->q.max = m->ob.max = queue_max ? queue_max : MIG_QUEUE_DEFAULT;
    m->q.v = calloc(m->q.max, sizeof *m->q.v);
    m->ob.v = calloc(m->ob.max, sizeof *m->ob.v);
    m->hand = calloc(m->q.max, sizeof *m->hand);
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    pthread_cond_init(&m->idle_cv, NULL);
    pthread_cond_init(&m->ob_cv, NULL);
    m->slot_base = (uint32_t)(ctx_rand(ctx) % MIG_SLOTS);
    int rc = m->q.v && m->ob.v && m->hand ? RSV_OK : RSV_ENOMEM;
    if (rc == RSV_OK) {
        /* the handle's thread works like the application's context, with
         * its options */
        rc = rsv_open_dsn(&m->wctx, shadow_dsn, &ctx->opts);
        if (rc != RSV_OK)
            ctx_fail(ctx, rc, "rsv_migrate_open: %s",
                     m->wctx ? rsv_errmsg(m->wctx) : rsv_strerror(rc));
    } else
        ctx_fail(ctx, rc, "out of memory");
    if (rc == RSV_OK && (rc = mig_stage_read(m)) != RSV_OK)
        ctx_fail(ctx, rc, "rsv_migrate_open: %s", rsv_errmsg(m->wctx));
    if (rc == RSV_OK) {
        int e = thread_start(&m->thread, worker, m);
        if (e)
            rc = ctx_fail(ctx, RSV_ENOMEM, "rsv_migrate_open: no thread: %s",
                          strerror(e));
        else
            m->has_thread = 1;
    }
    if (rc != RSV_OK) {
        rsv_migrate_close(m);
        return rc;
    }
    *out = m;
    return RSV_OK;
}

void rsv_migrate_close(rsv_migration *m)
{
    if (!m)
        return;
    if (m->has_thread) {
        pthread_mutex_lock(&m->mu);
        m->quit = 1;
        pthread_cond_signal(&m->cv);
        /* a thread waiting in rsv_migrate_mirror_next leaves before the
         * handle is freed */
        pthread_cond_broadcast(&m->ob_cv);
        while (m->ob_waiters)
            pthread_cond_wait(&m->ob_cv, &m->mu);
        pthread_mutex_unlock(&m->mu);
        pthread_join(m->thread, NULL);
        /* the application's mirror work not done by now never will be:
         * dropped, counted, the shops marked for a compare */
        pthread_mutex_lock(&m->mu);
        size_t n = abandon(m);
        pthread_mutex_unlock(&m->mu);
        if (n)
            mig_flush(m);
    }
    rsv_close(m->wctx);
    pthread_cond_destroy(&m->ob_cv);
    pthread_cond_destroy(&m->idle_cv);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    mig_map_free(&m->shops);
    free(m->q.v);
    free(m->ob.v);
    free(m->hand);
    free(m);
}

int rsv_migrate_set_legacy(rsv_migration *m, rsv_legacy_fn fn, void *user)
{
    if (!m)
        return RSV_EINVAL;
    pthread_mutex_lock(&m->mu);
    m->legacy = fn;
    m->legacy_user = user;
    pthread_mutex_unlock(&m->mu);
    return RSV_OK;
}

int rsv_migrate_set_batcher(rsv_migration *m, rsv_batcher *b)
{
    if (!m)
        return RSV_EINVAL;
    pthread_mutex_lock(&m->mu);
    m->batcher = b;
    pthread_mutex_unlock(&m->mu);
    return RSV_OK;
}

int rsv_migrate_set_refresh_ms(rsv_migration *m, uint32_t ms)
{
    if (!m || ms < 50 || ms > 60000)
        return RSV_EINVAL;
    pthread_mutex_lock(&m->mu);
    m->refresh_ms = ms;
    pthread_cond_signal(&m->cv);
    pthread_mutex_unlock(&m->mu);
    return RSV_OK;
}

int rsv_migrate_stage(rsv_migration *m, uint64_t shop_id, int32_t *stage)
{
    if (!m || !stage)
        return RSV_EINVAL;
    *stage = stage_of(m, shop_id);
    return RSV_OK;
}

int rsv_migrate_stat(rsv_migration *m, uint64_t shop_id, int32_t all_shops,
                     uint32_t stat, uint64_t *out)
{
    if (!m || !out || stat >= RSV_MIG_STAT_COUNT)
        return RSV_EINVAL;
    uint64_t n = 0;
    pthread_mutex_lock(&m->mu);
    if (stat == RSV_MIG_STAGE_READ_FAILED)
        n = all_shops ? m->read_failed : 0;
    else if (all_shops) {
        for (size_t i = 0; i < m->shops.cap; i++)
            if (m->shops.v[i].used)
                n += m->shops.v[i].count[stat];
    } else {
        const mig_shop *s = mig_shop_find(&m->shops, shop_id);
        n = s ? s->count[stat] : 0;
    }
    pthread_mutex_unlock(&m->mu);
    *out = n;
    return RSV_OK;
}

/* mu held.  Work offered and not done: queued, being done by the
 * handle's thread, in the outbox or handed out. */
static size_t work_left(const rsv_migration *m)
{
    return m->q.n + m->busy + m->ob.n + m->hand_n;
}

int rsv_migrate_drain(rsv_migration *m, uint32_t timeout_ms)
{
    if (!m)
        return RSV_EINVAL;
    struct timespec until;
    deadline_in(&until, timeout_ms);
    pthread_mutex_lock(&m->mu);
    int e = 0;
    while (work_left(m) && e != ETIMEDOUT)
        e = pthread_cond_timedwait(&m->idle_cv, &m->mu, &until);
    int rc = work_left(m) ? RSV_EBUSY : RSV_OK;
    pthread_mutex_unlock(&m->mu);
    return rc;
}

/* Appends like snprintf, counting what did not fit. */
typedef struct outbuf {
    char *p;
    size_t cap, len;
} outbuf;

static void out_add(outbuf *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void out_add(outbuf *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->len < o->cap ? o->cap - o->len : 0;
    int n = vsnprintf(room ? o->p + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n;
}

int rsv_migrate_prometheus(rsv_migration *m, char *buf, size_t cap,
                           size_t *needed)
{
    if (!m || (!buf && cap))
        return RSV_EINVAL;
    outbuf o = {buf, cap, 0};
    pthread_mutex_lock(&m->mu);
    out_add(&o, "# HELP libreserve_migration_calls_total Calls of the "
                "migration handle by shop and class (docs/migration.md).\n"
                "# TYPE libreserve_migration_calls_total counter\n");
    for (size_t i = 0; i < m->shops.cap; i++) {
        const mig_shop *s = &m->shops.v[i];
        if (!s->used)
            continue;
        for (int k = 0; k < RSV_MIG_STAT_COUNT; k++)
            if (k != RSV_MIG_STAGE_READ_FAILED)
                out_add(&o, "libreserve_migration_calls_total{shop=\"%" PRIu64
                            "\",class=\"%s\"} %" PRIu64 "\n",
                        s->shop, rsv_migrate_class_name((uint32_t)k),
                        s->count[k]);
    }
    out_add(&o, "# HELP libreserve_migration_stage The stage each shop is "
                "followed at: 0 old, 1 shadow, 2 primary, 3 complete.\n"
                "# TYPE libreserve_migration_stage gauge\n");
    for (size_t i = 0; i < m->shops.cap; i++) {
        const mig_shop *s = &m->shops.v[i];
        if (s->used)
            out_add(&o, "libreserve_migration_stage{shop=\"%" PRIu64 "\"} %d\n",
                    s->shop, (int)s->stage);
    }
    out_add(&o, "# HELP libreserve_migration_queue_depth Work offered and not "
                "yet done (queued, in the outbox or handed out).\n"
                "# TYPE libreserve_migration_queue_depth gauge\n"
                "libreserve_migration_queue_depth %zu\n"
                "# HELP libreserve_migration_stage_read_failures_total Reads "
                "of the stage table that failed (the last stages kept).\n"
                "# TYPE libreserve_migration_stage_read_failures_total "
                "counter\n"
                "libreserve_migration_stage_read_failures_total %" PRIu64 "\n",
            m->q.n + m->ob.n + m->hand_n, m->read_failed);
    pthread_mutex_unlock(&m->mu);
    if (needed)
        *needed = o.len;
    if (o.len + 1 > cap)
        return RSV_ERANGE;
    return RSV_OK;
}
