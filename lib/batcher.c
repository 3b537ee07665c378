/*
 * batcher.c - rsv_batcher: many threads' reserves, claims and releases
 * coalesced into batches on a few connections.
 *
 * Owns the shared queue of requests, the worker threads (one per context,
 * each context opened here with rsv_open_dsn and used by its worker
 * only), the choice of which queued requests go together into one batch
 * call, the one repeat of entries whose connection was lost, and the
 * copies of the contexts' statistics that other threads may read.  What
 * each entry answers is the batch functions' business (batch.c), so the
 * batcher never decides an outcome itself beyond the argument checks the
 * single calls make before they reach the server.
 *
 * A blocking call's request lives on its caller's stack: the caller
 * waits on the request's own condition (under the batcher's mutex) until
 * a worker has written its code, so a worker never touches a request
 * after it has answered it.  A non-blocking call's request is an
 * rsv_batcher_call on the heap, with its token copied (a cart is used in
 * place, as by rsv_reserve_start); once answered it
 * goes to the done list, and the completion pipe is readable while that
 * list is not empty.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

enum { KIND_RESERVE, KIND_CART, KIND_CLAIM, KIND_RELEASE };

typedef struct breq {
    struct breq *next; /* the queue, oldest first */
    int kind;
    uint64_t shop, item, loc;
    const void *token; /* the caller's, valid while it waits */
    size_t len;
    rsv_cart *cart;    /* KIND_CART: the caller's, used in place */
    int64_t qty, ttl_ms;
    int done, rc;      /* under the batcher's mutex */
    int nonblocking;   /* an rsv_batcher_call: answered to the done list */
    pthread_cond_t cv; /* a blocking caller waits on it for done */
} breq;

struct rsv_batcher_call {
    breq r;            /* first: a queued breq is its call */
    unsigned char token[RSV_TOKEN_MAX];
};

/* One worker: its context, and the arrays of the batch it is running. */
typedef struct bworker {
    rsv_batcher *b;
    rsv_ctx *ctx;
    pthread_t thread;
    int has_thread;
    size_t n;
    breq *take[RSV_BATCH_MAX];
    size_t map[RSV_BATCH_MAX]; /* array position -> index in take */
    uint64_t shop[RSV_BATCH_MAX], item[RSV_BATCH_MAX], loc[RSV_BATCH_MAX];
    const void *tok[RSV_BATCH_MAX];
    size_t len[RSV_BATCH_MAX];
    int64_t qty[RSV_BATCH_MAX];
    rsv_cart *cart[RSV_BATCH_MAX];
    int res[RSV_BATCH_MAX], out[RSV_BATCH_MAX];
    ctx_stats stats; /* the context's, after its last batch: stats_mu */
} bworker;

struct rsv_batcher {
    pthread_mutex_t mu;
    pthread_cond_t work; /* workers wait on it for requests */
    pthread_cond_t left; /* rsv_batcher_close waits on it for callers */
    /* under mu: */
    breq *head, **tail;
    int closing;
    size_t inside;       /* callers waiting for their answer */
    breq *done_head, **done_tail; /* answered non-blocking calls */
    int fd[2];           /* completion pipe: [0] readable while done_head */
    /* the copies of the statistics, read by any thread */
    pthread_mutex_t stats_mu;
    uint32_t n;
    bworker *w;
};

static int same_batch(const breq *a, const breq *b)
{
    return a->kind == b->kind &&
           ((a->kind != KIND_RESERVE && a->kind != KIND_CART) ||
            a->ttl_ms == b->ttl_ms);
}

/* Take the oldest request and every other queued one that can share its
 * batch call, oldest first, up to RSV_BATCH_MAX (mu held).  The rest
 * keep their order. */
static void take_batch(rsv_batcher *b, bworker *w)
{
    breq *first = b->head, **pp = &b->head;
    w->n = 0;
    while (*pp && w->n < RSV_BATCH_MAX) {
        breq *r = *pp;
        if (same_batch(first, r)) {
            *pp = r->next;
            r->next = NULL;
            w->take[w->n++] = r;
        } else {
            pp = &r->next;
        }
    }
    /* (stopping early leaves an unvisited last request, and its link) */
    if (!*pp)
        b->tail = pp;
}

/* One batch call over positions 0..n-1 of the arrays into res. */
static void call_batch(bworker *w, int kind, int64_t ttl_ms, size_t n)
{
    switch (kind) {
    case KIND_RESERVE:
        rsv_reserve_batch(w->ctx, n, w->shop, w->tok, w->len, w->item,
                          w->loc, w->qty, ttl_ms, w->res);
        break;
    case KIND_CART:
        rsv_reserve_cart_batch(w->ctx, n, w->shop, w->tok, w->len, w->cart,
                               ttl_ms, w->res);
        break;
    case KIND_CLAIM:
        rsv_claim_batch(w->ctx, n, w->shop, w->tok, w->len, w->res);
        break;
    default:
        rsv_release_batch(w->ctx, n, w->shop, w->tok, w->len, w->res);
        break;
    }
}

/* Run the taken requests as one batch; entries that lost the connection
 * go once more on a new one (each is idempotent by its token), and the
 * repeat's answer is theirs.  If no new connection can be made they keep
 * their first answer, and the next batch tries again. */
static void run_batch(bworker *w)
{
    const breq *first = w->take[0];
    size_t n = w->n;
    for (size_t i = 0; i < n; i++) {
        const breq *r = w->take[i];
        w->map[i] = i;
        w->shop[i] = r->shop;
        w->tok[i] = r->token;
        w->len[i] = r->len;
        w->item[i] = r->item;
        w->loc[i] = r->loc;
        w->qty[i] = r->qty;
        w->cart[i] = r->cart;
    }
    call_batch(w, first->kind, first->ttl_ms, n);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        w->out[i] = w->res[i];
        if (!rc_needs_reconnect(w->res[i]))
            continue;
        /* moved down in place (m <= i) */
        w->map[m] = w->map[i];
        w->shop[m] = w->shop[i];
        w->tok[m] = w->tok[i];
        w->len[m] = w->len[i];
        w->item[m] = w->item[i];
        w->loc[m] = w->loc[i];
        w->qty[m] = w->qty[i];
        w->cart[m] = w->cart[i];
        m++;
    }
    if (m == 0 || rsv_reconnect(w->ctx) != RSV_OK)
        return;
    call_batch(w, first->kind, first->ttl_ms, m);
    for (size_t k = 0; k < m; k++)
        w->out[w->map[k]] = w->res[k];
}

/* Give r its code (mu held): wake its caller, or put the call on the done
 * list and make the pipe readable if it was not. */
static void answer(rsv_batcher *b, breq *r, int rc)
{
    r->rc = rc;
    r->done = 1;
    if (!r->nonblocking) {
        pthread_cond_signal(&r->cv);
        return;
    }
    if (!b->done_head)
        wakeup_set(b->fd);
    *b->done_tail = r;
    b->done_tail = &r->next;
}

static void *worker_main(void *arg)
{
    bworker *w = arg;
    rsv_batcher *b = w->b;
    mysql_thread_init();
    pthread_mutex_lock(&b->mu);
    for (;;) {
        while (!b->head && !b->closing)
            pthread_cond_wait(&b->work, &b->mu);
        if (!b->head)
            break; /* closing, and every request answered */
        take_batch(b, w);
        if (b->head) /* another kind waits: a free worker may take it */
            pthread_cond_signal(&b->work);
        pthread_mutex_unlock(&b->mu);
        run_batch(w);
        pthread_mutex_lock(&b->stats_mu);
        w->stats = w->ctx->stats;
        pthread_mutex_unlock(&b->stats_mu);
        pthread_mutex_lock(&b->mu);
        for (size_t i = 0; i < w->n; i++)
            answer(b, w->take[i], w->out[i]);
    }
    pthread_mutex_unlock(&b->mu);
    mysql_thread_end();
    return NULL;
}

/* Queue r (mu held) and wake a worker. */
static void enqueue(rsv_batcher *b, breq *r)
{
    r->next = NULL;
    r->done = 0;
    *b->tail = r;
    b->tail = &r->next;
    pthread_cond_signal(&b->work);
}

/* Queue r and wait for its answer. */
static int submit(rsv_batcher *b, breq *r)
{
    pthread_mutex_lock(&b->mu);
    if (b->closing) {
        pthread_mutex_unlock(&b->mu);
        return RSV_EDISABLED;
    }
    pthread_cond_init(&r->cv, NULL);
    enqueue(b, r);
    b->inside++;
    while (!r->done)
        pthread_cond_wait(&r->cv, &b->mu);
    int rc = r->rc;
    if (--b->inside == 0 && b->closing)
        pthread_cond_broadcast(&b->left);
    pthread_mutex_unlock(&b->mu);
    pthread_cond_destroy(&r->cv);
    return rc;
}

/* The checks the single call makes before it reaches the server (the
 * same function); they answer on the calling thread. */
static int check_args(const breq *r)
{
    static const int call[] = {[KIND_RESERVE] = CALL_RESERVE_ONE,
                               [KIND_CART] = CALL_RESERVE,
                               [KIND_CLAIM] = CALL_CLAIM,
                               [KIND_RELEASE] = CALL_RELEASE};
    call_args a = {.kind = call[r->kind], .token = r->token,
                   .token_len = r->len, .quantity = r->qty,
                   .cart = r->cart, .ttl_ms = r->ttl_ms};
    char msg[ARG_MSG_MAX];
    return call_check(&a, msg);
}

static int batcher_call(rsv_batcher *b, breq *r)
{
    if (!b)
        return RSV_EINVAL;
    int rc = check_args(r);
    return rc ? rc : submit(b, r);
}

RSV_EXTERN int rsv_batcher_reserve_one(rsv_batcher *b, uint64_t shop_id,
                                       const void *token, size_t token_len,
                                       uint64_t item_id,
                                       uint64_t location_id,
                                       int64_t quantity, int64_t ttl_ms)
{
    breq r = {.kind = KIND_RESERVE, .shop = shop_id, .token = token,
              .len = token_len, .item = item_id, .loc = location_id,
              .qty = quantity, .ttl_ms = ttl_ms};
    return batcher_call(b, &r);
}

RSV_EXTERN int rsv_batcher_reserve(rsv_batcher *b, uint64_t shop_id,
                                   const void *token, size_t token_len,
                                   rsv_cart *cart, int64_t ttl_ms)
{
    breq r = {.kind = KIND_CART, .shop = shop_id, .token = token,
              .len = token_len, .cart = cart, .ttl_ms = ttl_ms};
    if (cart)
        cart->failed_line = (size_t)-1;
    return batcher_call(b, &r);
}

RSV_EXTERN int rsv_batcher_claim(rsv_batcher *b, uint64_t shop_id,
                                 const void *token, size_t token_len)
{
    breq r = {.kind = KIND_CLAIM, .shop = shop_id, .token = token,
              .len = token_len};
    return batcher_call(b, &r);
}

RSV_EXTERN int rsv_batcher_release(rsv_batcher *b, uint64_t shop_id,
                                   const void *token, size_t token_len)
{
    breq r = {.kind = KIND_RELEASE, .shop = shop_id, .token = token,
              .len = token_len};
    return batcher_call(b, &r);
}

/* Stop the workers once the queue is empty, wait for the callers to
 * leave, close the contexts and free everything; also the cleanup of a
 * half-opened batcher. */
static void batcher_free(rsv_batcher *b)
{
    pthread_mutex_lock(&b->mu);
    b->closing = 1;
    pthread_cond_broadcast(&b->work);
    pthread_mutex_unlock(&b->mu);
    for (uint32_t i = 0; i < b->n; i++)
        if (b->w[i].has_thread)
            pthread_join(b->w[i].thread, NULL);
    pthread_mutex_lock(&b->mu);
    while (b->inside > 0)
        pthread_cond_wait(&b->left, &b->mu);
    pthread_mutex_unlock(&b->mu);
    for (uint32_t i = 0; i < b->n; i++)
        rsv_close(b->w[i].ctx);
    /* the answered calls nobody collected */
    while (b->done_head) {
        breq *r = b->done_head;
        b->done_head = r->next;
        free((rsv_batcher_call *)r);
    }
    wakeup_close(b->fd);
    pthread_cond_destroy(&b->left);
    pthread_cond_destroy(&b->work);
    pthread_mutex_destroy(&b->mu);
    pthread_mutex_destroy(&b->stats_mu);
    free(b->w);
    free(b);
}

RSV_EXTERN void rsv_batcher_close(rsv_batcher *b)
{
    if (b)
        batcher_free(b);
}

static int start_workers(rsv_batcher *b)
{
    for (uint32_t i = 0; i < b->n; i++) {
        if (thread_start(&b->w[i].thread, worker_main, &b->w[i]))
            return RSV_ENOMEM;
        b->w[i].has_thread = 1;
    }
    return RSV_OK;
}

RSV_EXTERN int rsv_batcher_open(rsv_batcher **out, const char *dsn,
                                const rsv_options *opts,
                                uint32_t connections)
{
    if (!out)
        return RSV_EINVAL;
    *out = NULL;
    if (!dsn || connections < 1 ||
        connections > RSV_BATCHER_MAX_CONNECTIONS)
        return RSV_EINVAL;
    rsv_batcher *b = calloc(1, sizeof *b);
    bworker *w = calloc(connections, sizeof *w);
    if (!b || !w) {
        free(b);
        free(w);
        return RSV_ENOMEM;
    }
    pthread_mutex_init(&b->mu, NULL);
    pthread_mutex_init(&b->stats_mu, NULL);
    pthread_cond_init(&b->work, NULL);
    pthread_cond_init(&b->left, NULL);
    b->tail = &b->head;
    b->done_tail = &b->done_head;
    b->w = w;
    b->n = connections;
    int rc = wakeup_open(b->fd) ? RSV_ENOMEM : RSV_OK;
    for (uint32_t i = 0; i < connections && rc == RSV_OK; i++) {
        w[i].b = b;
        rc = rsv_open_dsn(&w[i].ctx, dsn, opts);
        if (rc != RSV_OK) {
            rsv_close(w[i].ctx);
            w[i].ctx = NULL;
        }
    }
    if (rc == RSV_OK)
        rc = start_workers(b);
    if (rc != RSV_OK) {
        batcher_free(b);
        return rc;
    }
    *out = b;
    return RSV_OK;
}

/* ---- the non-blocking form ---- */

/* Copy the request into a new call and queue it; or its code at once. */
static int start_call(rsv_batcher *b, const breq *req, rsv_batcher_call **out)
{
    if (!out)
        return RSV_EINVAL;
    *out = NULL;
    if (!b)
        return RSV_EINVAL;
    int rc = check_args(req);
    if (rc)
        return rc;
    rsv_batcher_call *c = malloc(sizeof *c);
    if (!c)
        return RSV_ENOMEM;
    c->r = *req;
    memcpy(c->token, req->token, req->len);
    c->r.token = c->token;
    c->r.nonblocking = 1;
    pthread_mutex_lock(&b->mu);
    if (b->closing) {
        pthread_mutex_unlock(&b->mu);
        free(c);
        return RSV_EDISABLED;
    }
    enqueue(b, &c->r);
    pthread_mutex_unlock(&b->mu);
    *out = c;
    return RSV_PENDING;
}

RSV_EXTERN int rsv_batcher_reserve_one_start(rsv_batcher *b,
                                             uint64_t shop_id,
                                             const void *token,
                                             size_t token_len,
                                             uint64_t item_id,
                                             uint64_t location_id,
                                             int64_t quantity,
                                             int64_t ttl_ms,
                                             rsv_batcher_call **out)
{
    breq r = {.kind = KIND_RESERVE, .shop = shop_id, .token = token,
              .len = token_len, .item = item_id, .loc = location_id,
              .qty = quantity, .ttl_ms = ttl_ms};
    return start_call(b, &r, out);
}

RSV_EXTERN int rsv_batcher_reserve_start(rsv_batcher *b, uint64_t shop_id,
                                         const void *token, size_t token_len,
                                         rsv_cart *cart, int64_t ttl_ms,
                                         rsv_batcher_call **out)
{
    breq r = {.kind = KIND_CART, .shop = shop_id, .token = token,
              .len = token_len, .cart = cart, .ttl_ms = ttl_ms};
    if (cart)
        cart->failed_line = (size_t)-1;
    return start_call(b, &r, out);
}

RSV_EXTERN int rsv_batcher_claim_start(rsv_batcher *b, uint64_t shop_id,
                                       const void *token, size_t token_len,
                                       rsv_batcher_call **out)
{
    breq r = {.kind = KIND_CLAIM, .shop = shop_id, .token = token,
              .len = token_len};
    return start_call(b, &r, out);
}

RSV_EXTERN int rsv_batcher_release_start(rsv_batcher *b, uint64_t shop_id,
                                         const void *token, size_t token_len,
                                         rsv_batcher_call **out)
{
    breq r = {.kind = KIND_RELEASE, .shop = shop_id, .token = token,
              .len = token_len};
    return start_call(b, &r, out);
}

RSV_EXTERN int rsv_batcher_fd(const rsv_batcher *b)
{
    return b ? b->fd[0] : RSV_EINVAL;
}

RSV_EXTERN int rsv_batcher_next_done(rsv_batcher *b, rsv_batcher_call **done,
                                     int *code)
{
    if (done)
        *done = NULL;
    if (!b || !done || !code)
        return RSV_EINVAL;
    pthread_mutex_lock(&b->mu);
    breq *r = b->done_head;
    if (!r) {
        pthread_mutex_unlock(&b->mu);
        return RSV_PENDING;
    }
    b->done_head = r->next;
    if (!b->done_head) {
        b->done_tail = &b->done_head;
        wakeup_clear(b->fd);
    }
    pthread_mutex_unlock(&b->mu);
    r->next = NULL;
    *done = (rsv_batcher_call *)r;
    *code = r->rc;
    return RSV_OK;
}

RSV_EXTERN void rsv_batcher_call_free(rsv_batcher_call *call)
{
    free(call);
}

/* ---- statistics ---- */

/* The workers' copies added up (stats_mu is taken: b is const to the
 * caller, not to the lock). */
static void stats_sum(const rsv_batcher *b, ctx_stats *sum)
{
    pthread_mutex_t *mu = (pthread_mutex_t *)&b->stats_mu;
    memset(sum, 0, sizeof *sum);
    pthread_mutex_lock(mu);
    for (uint32_t i = 0; i < b->n; i++)
        stats_merge(sum, &b->w[i].stats);
    pthread_mutex_unlock(mu);
}

RSV_EXTERN int rsv_batcher_stats_get(const rsv_batcher *b, uint32_t stat,
                                     uint32_t op, uint64_t *out)
{
    if (!b || !out || stat >= STATS_COUNTERS || op >= OP__COUNT)
        return RSV_EINVAL;
    ctx_stats sum;
    stats_sum(b, &sum);
    *out = stats_value(&sum, stat, op);
    return RSV_OK;
}

RSV_EXTERN int rsv_batcher_stats_snapshot_add(rsv_stats_snapshot *snap,
                                              const rsv_batcher *b)
{
    if (!snap || !b)
        return RSV_EINVAL;
    pthread_mutex_t *mu = (pthread_mutex_t *)&b->stats_mu;
    pthread_mutex_lock(mu);
    for (uint32_t i = 0; i < b->n; i++)
        stats_snapshot_add_copy(snap, &b->w[i].stats);
    pthread_mutex_unlock(mu);
    return RSV_OK;
}
