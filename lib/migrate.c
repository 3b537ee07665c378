/*
 * migrate.c - the migration handle (include/reserve/migrate.h): the
 * checkout's calls sent to the old store, to libreserve or to both by the
 * shop's stage, the queue of work done off the request path by the
 * handle's own thread on its own connection, and how two answers are
 * classified and counted.  The tables' side is migrate_stage.c's.
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

static int refused(int rc)
{
    return rc == RSV_EOUTOFSTOCK || rc == RSV_ECLAIMED || rc == RSV_EEXPIRED ||
           rc == RSV_ERELEASED;
}

/* An answer the deciding store gave that means it did or did not do the
 * call, as opposed to a failure, after which nothing is known. */
static int answered(int rc)
{
    return rc == RSV_OK || refused(rc) || rc == RSV_ENOTFOUND;
}

static int classify(uint32_t op, int old_rc, int new_rc)
{
    if (!answered(old_rc))
        return RSV_MIG_OLD_FAILED;
    if (new_rc == RSV_ENOTFOUND && op != RSV_OP_RESERVE)
        return RSV_MIG_UNKNOWN;
    if (new_rc != RSV_OK && !refused(new_rc))
        return RSV_MIG_NEW_FAILED;
    int old_ok = old_rc == RSV_OK, new_ok = new_rc == RSV_OK;
    if (old_ok && new_ok)
        return RSV_MIG_BOTH_ACCEPTED;
    if (!old_ok && !new_ok)
        return RSV_MIG_BOTH_REFUSED;
    return new_ok ? RSV_MIG_OLD_REFUSED_NEW_ACCEPTED
                  : RSV_MIG_OLD_ACCEPTED_NEW_REFUSED;
}

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

/* mu held */
static void count(rsv_migration *m, uint64_t shop, int stat, uint64_t n)
{
    mig_shop *s = mig_shop_get(&m->shops, shop);
    if (s)
        s->count[stat] += n;
}

static int call_new(rsv_ctx *c, const mig_work *w, uint32_t op)
{
    int rc;
    if (op == RSV_OP_RESERVE)
        rc = rsv_reserve_one(c, w->shop, w->token, w->token_len, w->item,
                             w->loc, w->qty, w->ttl_ms);
    else if (op == RSV_OP_CLAIM)
        rc = rsv_claim(c, w->shop, w->token, w->token_len);
    else
        rc = rsv_release(c, w->shop, w->token, w->token_len);
    return rc;
}

static int call_old(rsv_migration *m, const mig_work *w, uint32_t op)
{
    rsv_legacy_fn fn;
    void *user;
    pthread_mutex_lock(&m->mu);
    fn = m->legacy;
    user = m->legacy_user;
    pthread_mutex_unlock(&m->mu);
    if (!fn)
        return RSV_EINVAL;
    int is_res = op == RSV_OP_RESERVE;
    return fn(user, op, w->shop, w->token, w->token_len, is_res ? w->item : 0,
              is_res ? w->loc : 0, is_res ? w->qty : 0,
              is_res ? w->ttl_ms : 0);
}

/* One work item on the handle's thread: the other store's side of a call
 * the deciding store answered. */
static void apply(rsv_migration *m, const mig_work *w)
{
    int old_rc, new_rc;
    if (w->stage == RSV_STAGE_SHADOW && w->op != RSV_OP_RESERVE &&
        w->answer != RSV_OK) {
        /* The old store refused a claim or release: doing it on
         * libreserve could not be undone, so its answer is read instead
         * (a checkout still held would have been accepted). */
        old_rc = w->answer;
        int32_t st = 0;
        new_rc = rsv_checkout_status(m->wctx, w->shop, w->token, w->token_len,
                                     &st, NULL, NULL);
        if (new_rc == RSV_OK)
            new_rc = st == RSV_STATUS_HELD ? RSV_OK
                     : st == RSV_STATUS_CLAIMED ? RSV_ECLAIMED
                     : st == RSV_STATUS_RELEASED ? RSV_ERELEASED
                                                 : RSV_EEXPIRED;
        if (new_rc == RSV_ECONN || new_rc == RSV_EINDOUBT)
            (void)rsv_reconnect(m->wctx);
    } else if (w->stage == RSV_STAGE_SHADOW) {
        old_rc = w->answer;
        new_rc = call_new(m->wctx, w, w->op);
        /* libreserve holds what the old store refused: give it back, or
         * its stock drifts from the old store's and every later call
         * compares wrong */
        if (w->op == RSV_OP_RESERVE && new_rc == RSV_OK && old_rc != RSV_OK)
            (void)rsv_release(m->wctx, w->shop, w->token, w->token_len);
        if (new_rc == RSV_ECONN || new_rc == RSV_EINDOUBT ||
            new_rc == RSV_ENOTPRIMARY)
            (void)rsv_reconnect(m->wctx);
    } else {
        new_rc = w->answer;
        old_rc = call_old(m, w, w->op);
        if (w->op == RSV_OP_RESERVE && old_rc == RSV_OK && new_rc != RSV_OK)
            (void)call_old(m, w, RSV_OP_RELEASE);
    }
    int cls = classify(w->op, old_rc, new_rc);
    pthread_mutex_lock(&m->mu);
    count(m, w->shop, cls, 1);
    count(m, w->shop, RSV_MIG_APPLIED, 1);
    mig_shop *sh = mig_shop_find(&m->shops, w->shop);
    if (sh && w->stage == RSV_STAGE_SHADOW && sh->pending_shadow)
        sh->pending_shadow--;
    else if (sh && w->stage != RSV_STAGE_SHADOW && sh->pending_mirror)
        sh->pending_mirror--;
    pthread_cond_broadcast(&m->idle_cv);
    /* the old store missed a change it must keep while primary */
    if (cls == RSV_MIG_OLD_FAILED && w->stage == RSV_STAGE_PRIMARY) {
        mig_shop *s = mig_shop_get(&m->shops, w->shop);
        if (s)
            s->mark_compare = 1;
    }
    if (cls != RSV_MIG_BOTH_ACCEPTED && cls != RSV_MIG_BOTH_REFUSED &&
        m->n_samples < MIG_SAMPLES) {
        mig_sample *x = &m->samples[m->n_samples++];
        x->shop = w->shop;
        x->w = *w;
        x->class_ = cls;
        x->old_code = old_rc;
        x->new_code = new_rc;
    }
    pthread_mutex_unlock(&m->mu);
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
        if (m->q_n == 0) {
            pthread_cond_broadcast(&m->idle_cv);
            if (m->quit)
                break;
            pthread_cond_timedwait(&m->cv, &m->mu, &next);
            continue;
        }
        mig_work w = m->q[m->q_head];
        m->q_head = (m->q_head + 1) % m->q_max;
        m->q_n--;
        m->busy = 1;
        pthread_mutex_unlock(&m->mu);
        apply(m, &w);
        pthread_mutex_lock(&m->mu);
        m->busy = 0;
    }
    pthread_mutex_unlock(&m->mu);
    mig_flush(m);
    return NULL;
}

static void enqueue(rsv_migration *m, uint32_t op, int32_t stage, int answer,
                    uint64_t shop, const void *token, size_t token_len,
                    uint64_t item, uint64_t loc, int64_t qty, int64_t ttl_ms)
{
    pthread_mutex_lock(&m->mu);
    count(m, shop, RSV_MIG_OFFERED, 1);
    if (m->q_n >= m->q_max) {
        mig_shop *s = mig_shop_get(&m->shops, shop);
        if (s) {
            s->count[RSV_MIG_DROPPED]++;
            s->mark_compare = 1;
        }
    } else {
        mig_work *w = &m->q[(m->q_head + m->q_n) % m->q_max];
        w->op = op;
        w->stage = stage;
        w->answer = answer;
        w->shop = shop;
        memcpy(w->token, token, token_len);
        w->token_len = token_len;
        w->item = item;
        w->loc = loc;
        w->qty = qty;
        w->ttl_ms = ttl_ms;
        m->q_n++;
        mig_shop *s = mig_shop_find(&m->shops, shop);
        if (s && stage == RSV_STAGE_SHADOW)
            s->pending_shadow++;
        else if (s)
            s->pending_mirror++;
        pthread_cond_signal(&m->cv);
    }
    pthread_mutex_unlock(&m->mu);
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
 * (1 s without one), then decides anyway. */
static int32_t stage_settled(rsv_migration *m, uint64_t shop)
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
        if (!pending || e == ETIMEDOUT) {
            pthread_mutex_unlock(&m->mu);
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

static int dispatch(rsv_migration *m, uint32_t op, uint64_t shop,
                    const void *token, size_t token_len, uint64_t item,
                    uint64_t loc, int64_t qty, int64_t ttl_ms)
{
    if (!m)
        return RSV_EINVAL;
    /* what the queue copies must fit; the deciding store checks the rest */
    if (!token || token_len == 0 || token_len > RSV_TOKEN_MAX)
        return RSV_ETOKEN;
    mig_work w = {op, 0, 0, shop, item, loc, qty, ttl_ms, {0}, token_len};
    memcpy(w.token, token, token_len);
    int32_t st = stage_settled(m, shop);
    int rc;
    switch (st) {
    case RSV_STAGE_OLD:
        return call_old(m, &w, op);
    case RSV_STAGE_SHADOW:
        rc = call_old(m, &w, op);
        if (answered(rc))
            enqueue(m, op, st, rc, shop, token, token_len, item, loc, qty,
                    ttl_ms);
        else {
            pthread_mutex_lock(&m->mu);
            count(m, shop, RSV_MIG_OLD_FAILED, 1);
            pthread_mutex_unlock(&m->mu);
        }
        return rc;
    case RSV_STAGE_PRIMARY:
        rc = call_new(m->ctx, &w, op);
        /* after a failure libreserve did nothing, or (RSV_EINDOUBT) the
         * application repeats the call and the repeat is mirrored; a
         * claim or release libreserve refused is not sent to the old
         * store, where it could not be undone */
        if (answered(rc) && (op == RSV_OP_RESERVE || rc == RSV_OK))
            enqueue(m, op, st, rc, shop, token, token_len, item, loc, qty,
                    ttl_ms);
        return rc;
    default:
        return call_new(m->ctx, &w, op);
    }
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
    m->q_max = queue_max ? queue_max : MIG_QUEUE_DEFAULT;
    m->q = calloc(m->q_max, sizeof *m->q);
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    pthread_cond_init(&m->idle_cv, NULL);
    m->slot_base = (uint32_t)(ctx_rand(ctx) % MIG_SLOTS);
    int rc = m->q ? RSV_OK : RSV_ENOMEM;
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
        pthread_mutex_unlock(&m->mu);
        pthread_join(m->thread, NULL);
    }
    rsv_close(m->wctx);
    pthread_cond_destroy(&m->idle_cv);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    mig_map_free(&m->shops);
    free(m->q);
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

int rsv_migrate_drain(rsv_migration *m, uint32_t timeout_ms)
{
    if (!m)
        return RSV_EINVAL;
    struct timespec until;
    deadline_in(&until, timeout_ms);
    pthread_mutex_lock(&m->mu);
    int e = 0;
    while ((m->q_n > 0 || m->busy) && e != ETIMEDOUT)
        e = pthread_cond_timedwait(&m->idle_cv, &m->mu, &until);
    int rc = m->q_n > 0 || m->busy ? RSV_EBUSY : RSV_OK;
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
                        s->shop, mig_class_name(k), s->count[k]);
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
    out_add(&o, "# HELP libreserve_migration_queue_depth Work waiting for the "
                "handle's thread.\n"
                "# TYPE libreserve_migration_queue_depth gauge\n"
                "libreserve_migration_queue_depth %zu\n"
                "# HELP libreserve_migration_stage_read_failures_total Reads "
                "of the stage table that failed (the last stages kept).\n"
                "# TYPE libreserve_migration_stage_read_failures_total "
                "counter\n"
                "libreserve_migration_stage_read_failures_total %" PRIu64 "\n",
            m->q_n, m->read_failed);
    pthread_mutex_unlock(&m->mu);
    if (needed)
        *needed = o.len;
    if (o.len + 1 > cap)
        return RSV_ERANGE;
    return RSV_OK;
}
