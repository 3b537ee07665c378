/*
 * nonblock.c - the non-blocking interface: the rsv_*_start functions,
 * rsv_cont, rsv_async_fd, rsv_pending and rsv_cancel.
 *
 * Owns each context's worker thread (made on the first start), its
 * completion pipe (made on the first start or rsv_async_fd) and the
 * hand-over between the caller and the worker.  The worker runs exactly
 * the blocking function on the context, so retries, the time budget and
 * the in-doubt rules are those of the blocking call by construction; the
 * blocking code stays the only implementation (docs/nonblocking.md says
 * why).  While a call is pending only the worker touches the context and
 * its connection: op_begin (txn.c) and the few functions that take no
 * operation refuse other threads through nb_busy(), without writing to the
 * context.  txn_run asks nb_canceled() before each attempt and sleeps its
 * backoff in nb_sleep(), which a cancel cuts short.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

enum { NB_IDLE, NB_QUEUED, NB_RUNNING, NB_DONE };
enum { JOB_RESERVE, JOB_RESERVE_ONE, JOB_CLAIM, JOB_RELEASE, JOB_EXTEND,
       JOB_STATUS };

/* One call's arguments: the token copied, the cart and out-pointers the
 * caller's (untouched by the caller until completion). */
struct nb_job {
    int kind;
    uint64_t shop;
    unsigned char token[RSV_TOKEN_MAX];
    size_t token_len;
    rsv_cart *cart;
    uint64_t item, loc;
    int64_t quantity, ttl_ms;
    int32_t *status_out;
    int64_t *units_out, *expires_out;
};

struct nb_state {
    pthread_mutex_t mu;
    pthread_cond_t cv;  /* the worker waits on it for a job, and in its
                           backoff pauses for a cancel */
    pthread_t thread;
    int has_thread;
    int fd[2];          /* completion pipe: [0] is rsv_async_fd, readable
                           once the call finished; [1] the worker's */
    int pending;        /* from a start that said RSV_PENDING until
                           rsv_cont gives the result; read and written by
                           the caller's thread only */
    /* under mu: */
    int state;          /* NB_* */
    int cancel;         /* rsv_cancel asked the call to stop */
    int cut;            /* and shut its connection's socket down */
    int quit;           /* rsv_close: the worker ends */
    int sock;           /* while NB_RUNNING, a duplicate of the
                           connection's socket (or -1), for rsv_cancel: a
                           descriptor of our own cannot be closed and
                           reused under us by Connector/C */
    int result;         /* the call's code, once NB_DONE */
    struct nb_job job;
};

/* The context whose worker runs on this thread: its calls pass. */
static _Thread_local const rsv_ctx *nb_worker_of;

#define IN_PROGRESS "a non-blocking call is in progress on this context: " \
                    "wait for its descriptor (rsv_async_fd) and call rsv_cont"

int nb_busy(const rsv_ctx *ctx)
{
    /* (the worker asks first: it never reads the caller's flag) */
    return nb_worker_of != ctx && ctx->nb && ctx->nb->pending;
}

const char *nb_busy_msg(void) { return IN_PROGRESS; }

static int nb_op(int kind)
{
    switch (kind) {
    case JOB_CLAIM:
        return RSV_OP_CLAIM;
    case JOB_RELEASE:
        return RSV_OP_RELEASE;
    case JOB_EXTEND:
        return RSV_OP_EXTEND;
    case JOB_STATUS:
        return RSV_OP_STATUS;
    default:
        return RSV_OP_RESERVE;
    }
}

static int nb_cancel_fail(rsv_ctx *ctx, int cut)
{
    return ctx_fail(ctx, RSV_ECANCELED,
                    cut ? "canceled (rsv_cancel) between two attempts: "
                          "nothing was applied; the connection was cut, "
                          "call rsv_reconnect before the next call"
                        : "canceled (rsv_cancel): nothing was applied");
}

int nb_canceled(rsv_ctx *ctx)
{
    struct nb_state *nb = ctx->nb;
    if (!nb || nb_worker_of != ctx)
        return 0;
    pthread_mutex_lock(&nb->mu);
    int cancel = nb->cancel, cut = nb->cut;
    pthread_mutex_unlock(&nb->mu);
    return cancel ? nb_cancel_fail(ctx, cut) : 0;
}

void nb_sleep(rsv_ctx *ctx, uint64_t us)
{
    struct nb_state *nb = ctx->nb;
    struct timespec ts;
    if (!nb || nb_worker_of != ctx) {
        ts.tv_sec = (time_t)(us / 1000000);
        ts.tv_nsec = (long)(us % 1000000) * 1000;
        nanosleep(&ts, NULL);
        return;
    }
    clock_gettime(CLOCK_MONOTONIC, &ts); /* the condition's clock */
    ts.tv_sec += (time_t)(us / 1000000);
    ts.tv_nsec += (long)(us % 1000000) * 1000;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&nb->mu);
    while (!nb->cancel &&
           pthread_cond_timedwait(&nb->cv, &nb->mu, &ts) != ETIMEDOUT)
        ;
    pthread_mutex_unlock(&nb->mu);
}

static int nb_run(rsv_ctx *ctx, struct nb_job *j)
{
    switch (j->kind) {
    case JOB_RESERVE:
        return rsv_reserve(ctx, j->shop, j->token, j->token_len, j->cart,
                           j->ttl_ms);
    case JOB_RESERVE_ONE:
        return rsv_reserve_one(ctx, j->shop, j->token, j->token_len, j->item,
                               j->loc, j->quantity, j->ttl_ms);
    case JOB_CLAIM:
        return rsv_claim(ctx, j->shop, j->token, j->token_len);
    case JOB_RELEASE:
        return rsv_release(ctx, j->shop, j->token, j->token_len);
    case JOB_EXTEND:
        return rsv_extend(ctx, j->shop, j->token, j->token_len, j->ttl_ms);
    default:
        return rsv_checkout_status(ctx, j->shop, j->token, j->token_len,
                                   j->status_out, j->units_out,
                                   j->expires_out);
    }
}

/* A call canceled before the worker began it: nothing was sent, and it is
 * counted and reported to the callback like any other call. */
static int nb_run_canceled(rsv_ctx *ctx, struct nb_job *j)
{
    op_begin(ctx, nb_op(j->kind), 0, j->shop, j->token, j->token_len);
    return op_end(ctx, ctx_fail(ctx, RSV_ECANCELED,
                                "canceled (rsv_cancel) before it began: "
                                "nothing was sent to the server"));
}

static void nb_signal_done(struct nb_state *nb)
{
    char b = 1;
    while (write(nb->fd[1], &b, 1) < 0 && errno == EINTR)
        ;
}

static void *nb_main(void *arg)
{
    rsv_ctx *ctx = arg;
    struct nb_state *nb = ctx->nb;
    nb_worker_of = ctx;
    mysql_thread_init();
    pthread_mutex_lock(&nb->mu);
    for (;;) {
        while (!nb->quit && nb->state != NB_QUEUED)
            pthread_cond_wait(&nb->cv, &nb->mu);
        if (nb->quit)
            break;
        nb->state = NB_RUNNING;
        int canceled = nb->cancel;
        nb->sock = -1;
        if (!canceled && ctx->conn) {
            my_socket s = mysql_get_socket(ctx->conn);
            if (s != MARIADB_INVALID_SOCKET)
                nb->sock = fcntl((int)s, F_DUPFD_CLOEXEC, 0);
        }
        pthread_mutex_unlock(&nb->mu);
        int rc = canceled ? nb_run_canceled(ctx, &nb->job)
                          : nb_run(ctx, &nb->job);
        pthread_mutex_lock(&nb->mu);
        if (nb->sock >= 0)
            close(nb->sock);
        nb->sock = -1;
        nb->result = rc;
        nb->state = NB_DONE;
        /* every write of the call (its out-pointers, the message) comes
         * before this byte: the caller reads them after rsv_cont, which
         * takes mu */
        nb_signal_done(nb);
    }
    pthread_mutex_unlock(&nb->mu);
    mysql_thread_end();
    return NULL;
}

static int set_flags(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    int fdfl = fcntl(fd, F_GETFD);
    return fl < 0 || fdfl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
                   fcntl(fd, F_SETFD, fdfl | FD_CLOEXEC) < 0
               ? -1
               : 0;
}

/* The state and the pipe, made once; the caller is not pending. */
static int nb_ensure(rsv_ctx *ctx)
{
    if (ctx->nb)
        return RSV_OK;
    struct nb_state *nb = calloc(1, sizeof *nb);
    if (!nb)
        return ctx_fail(ctx, RSV_ENOMEM, "out of memory");
    if (pipe(nb->fd) != 0) {
        int e = errno;
        free(nb);
        return ctx_fail(ctx, RSV_ENOMEM,
                        "cannot create the completion descriptor: %s",
                        strerror(e));
    }
    if (set_flags(nb->fd[0]) || set_flags(nb->fd[1])) {
        int e = errno;
        close(nb->fd[0]);
        close(nb->fd[1]);
        free(nb);
        return ctx_fail(ctx, RSV_ENOMEM,
                        "cannot set up the completion descriptor: %s",
                        strerror(e));
    }
    pthread_mutex_init(&nb->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&nb->cv, &ca);
    pthread_condattr_destroy(&ca);
    nb->sock = -1;
    ctx->nb = nb;
    return RSV_OK;
}

static int nb_start_thread(rsv_ctx *ctx)
{
    struct nb_state *nb = ctx->nb;
    if (nb->has_thread)
        return RSV_OK;
    /* Signals stay the application's threads' business: the worker
     * starts with every signal blocked. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&nb->thread, NULL, nb_main, ctx);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0)
        return ctx_fail(ctx, RSV_ENOMEM, "cannot start the worker thread: %s",
                        strerror(e));
    nb->has_thread = 1;
    return RSV_OK;
}
/* Stop the call in flight (nb->mu held): no attempt starts after this,
 * the backoff wait ends, and a statement in flight ends at once (the
 * server sees the session go and rolls back what was not committed). */
static void stop_locked(struct nb_state *nb)
{
    nb->cancel = 1;
    if (nb->state == NB_RUNNING && nb->sock >= 0 && !nb->cut) {
        shutdown(nb->sock, SHUT_RDWR);
        nb->cut = 1;
    }
    pthread_cond_broadcast(&nb->cv);
}


void nb_free(rsv_ctx *ctx)
{
    struct nb_state *nb = ctx->nb;
    if (!nb)
        return;
    if (nb->has_thread) {
        pthread_mutex_lock(&nb->mu);
        nb->quit = 1;
        stop_locked(nb);
        pthread_mutex_unlock(&nb->mu);
        pthread_join(nb->thread, NULL);
    }
    pthread_cond_destroy(&nb->cv);
    pthread_mutex_destroy(&nb->mu);
    close(nb->fd[0]);
    close(nb->fd[1]);
    free(nb);
    ctx->nb = NULL;
}

/* Whether the blocking call would answer at once, before any statement:
 * then the start runs it on the caller's thread and returns its code. */
static int answers_at_once(const rsv_ctx *ctx, const struct nb_job *j,
                           const void *token)
{
    if (!token || j->token_len == 0 || j->token_len > RSV_TOKEN_MAX)
        return 1;
    if (ctx->disabled && j->kind != JOB_STATUS)
        return 1;
    int64_t max_ttl = 30LL * 24 * 3600 * 1000;
    switch (j->kind) {
    case JOB_RESERVE:
        return !j->cart || j->cart->n == 0 || j->ttl_ms < 0 ||
               j->ttl_ms > max_ttl;
    case JOB_RESERVE_ONE:
        return j->quantity < 1 || j->quantity > RSV_QUANTITY_MAX ||
               j->ttl_ms < 0 || j->ttl_ms > max_ttl;
    case JOB_EXTEND:
        return j->ttl_ms < 0 || j->ttl_ms > max_ttl;
    case JOB_STATUS:
        return !j->status_out;
    default:
        return 0;
    }
}

/* Hand j to the worker, or answer at once (see answers_at_once). */
static int nb_start(rsv_ctx *ctx, struct nb_job *j, const void *token)
{
    if (!ctx)
        return RSV_EINVAL;
    /* (on the worker, from the completion callback: it would wait for
     * itself) */
    if (nb_busy(ctx) || nb_worker_of == ctx)
        return RSV_EINVAL;
    if (answers_at_once(ctx, j, token)) {
        const void *t = token;
        switch (j->kind) {
        case JOB_RESERVE:
            return rsv_reserve(ctx, j->shop, t, j->token_len, j->cart,
                               j->ttl_ms);
        case JOB_RESERVE_ONE:
            return rsv_reserve_one(ctx, j->shop, t, j->token_len, j->item,
                                   j->loc, j->quantity, j->ttl_ms);
        case JOB_CLAIM:
            return rsv_claim(ctx, j->shop, t, j->token_len);
        case JOB_RELEASE:
            return rsv_release(ctx, j->shop, t, j->token_len);
        case JOB_EXTEND:
            return rsv_extend(ctx, j->shop, t, j->token_len, j->ttl_ms);
        default:
            return rsv_checkout_status(ctx, j->shop, t, j->token_len,
                                       j->status_out, j->units_out,
                                       j->expires_out);
        }
    }
    int rc = nb_ensure(ctx);
    if (rc == RSV_OK)
        rc = nb_start_thread(ctx);
    if (rc)
        return rc;
    struct nb_state *nb = ctx->nb;
    memcpy(j->token, token, j->token_len);
    ctx->code = RSV_PENDING;
    ctx->msg[0] = '\0';
    pthread_mutex_lock(&nb->mu);
    nb->job = *j;
    nb->cancel = 0;
    nb->cut = 0;
    nb->state = NB_QUEUED;
    nb->pending = 1;
    pthread_cond_broadcast(&nb->cv);
    pthread_mutex_unlock(&nb->mu);
    return RSV_PENDING;
}

RSV_EXTERN int rsv_reserve_start(rsv_ctx *ctx, uint64_t shop_id,
                                 const void *token, size_t token_len,
                                 rsv_cart *cart, int64_t ttl_ms)
{
    struct nb_job j = {.kind = JOB_RESERVE, .shop = shop_id,
                       .token_len = token_len, .cart = cart,
                       .ttl_ms = ttl_ms};
    return nb_start(ctx, &j, token);
}

RSV_EXTERN int rsv_reserve_one_start(rsv_ctx *ctx, uint64_t shop_id,
                                     const void *token, size_t token_len,
                                     uint64_t item_id, uint64_t location_id,
                                     int64_t quantity, int64_t ttl_ms)
{
    struct nb_job j = {.kind = JOB_RESERVE_ONE, .shop = shop_id,
                       .token_len = token_len, .item = item_id,
                       .loc = location_id, .quantity = quantity,
                       .ttl_ms = ttl_ms};
    return nb_start(ctx, &j, token);
}

RSV_EXTERN int rsv_claim_start(rsv_ctx *ctx, uint64_t shop_id,
                               const void *token, size_t token_len)
{
    struct nb_job j = {.kind = JOB_CLAIM, .shop = shop_id,
                       .token_len = token_len};
    return nb_start(ctx, &j, token);
}

RSV_EXTERN int rsv_release_start(rsv_ctx *ctx, uint64_t shop_id,
                                 const void *token, size_t token_len)
{
    struct nb_job j = {.kind = JOB_RELEASE, .shop = shop_id,
                       .token_len = token_len};
    return nb_start(ctx, &j, token);
}

RSV_EXTERN int rsv_extend_start(rsv_ctx *ctx, uint64_t shop_id,
                                const void *token, size_t token_len,
                                int64_t ttl_ms)
{
    struct nb_job j = {.kind = JOB_EXTEND, .shop = shop_id,
                       .token_len = token_len, .ttl_ms = ttl_ms};
    return nb_start(ctx, &j, token);
}

RSV_EXTERN int rsv_checkout_status_start(rsv_ctx *ctx, uint64_t shop_id,
                                         const void *token, size_t token_len,
                                         int32_t *status_out,
                                         int64_t *units_out,
                                         int64_t *expires_in_ms_out)
{
    struct nb_job j = {.kind = JOB_STATUS, .shop = shop_id,
                       .token_len = token_len, .status_out = status_out,
                       .units_out = units_out,
                       .expires_out = expires_in_ms_out};
    return nb_start(ctx, &j, token);
}

RSV_EXTERN int rsv_cont(rsv_ctx *ctx)
{
    if (!ctx)
        return RSV_EINVAL;
    struct nb_state *nb = ctx->nb;
    if (nb && nb_worker_of == ctx)
        return RSV_EINVAL; /* from the completion callback: not done yet */
    if (!nb || !nb->pending)
        return ctx_fail(ctx, RSV_EINVAL,
                        "rsv_cont: no non-blocking call was started on this "
                        "context (or its result was already returned)");
    pthread_mutex_lock(&nb->mu);
    if (nb->state != NB_DONE) {
        pthread_mutex_unlock(&nb->mu);
        return RSV_PENDING;
    }
    char b;
    while (read(nb->fd[0], &b, 1) < 0 && errno == EINTR)
        ;
    nb->state = NB_IDLE;
    nb->pending = 0;
    int rc = nb->result;
    pthread_mutex_unlock(&nb->mu);
    return rc;
}

RSV_EXTERN int rsv_async_fd(rsv_ctx *ctx)
{
    if (!ctx)
        return RSV_EINVAL;
    if (ctx->nb)
        return ctx->nb->fd[0];
    int rc = nb_ensure(ctx);
    return rc ? rc : ctx->nb->fd[0];
}

RSV_EXTERN int rsv_pending(const rsv_ctx *ctx)
{
    return ctx && nb_busy(ctx);
}

RSV_EXTERN int rsv_cancel(rsv_ctx *ctx)
{
    if (!ctx)
        return RSV_EINVAL;
    struct nb_state *nb = ctx->nb;
    if (nb && nb_worker_of == ctx)
        return RSV_EINVAL; /* from the completion callback */
    if (!nb || !nb->pending)
        return ctx_fail(ctx, RSV_EINVAL,
                        "rsv_cancel: no non-blocking call is in progress on "
                        "this context");
    pthread_mutex_lock(&nb->mu);
    if (nb->state == NB_QUEUED || nb->state == NB_RUNNING)
        stop_locked(nb);
    pthread_mutex_unlock(&nb->mu);
    return RSV_OK;
}
