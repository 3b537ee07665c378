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
 * why).  The state both threads share, and the busy, cancel and backoff
 * questions the lower layers ask of it, are guard.c's.
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

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

static void *nb_main(void *arg)
{
    rsv_ctx *ctx = arg;
    struct nb_state *nb = ctx->nb;
    nb_become_worker(ctx);
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
        wakeup_set(nb->fd);
    }
    pthread_mutex_unlock(&nb->mu);
    mysql_thread_end();
    return NULL;
}

static int nb_start_thread(rsv_ctx *ctx)
{
    struct nb_state *nb = ctx->nb;
    if (nb->has_thread)
        return RSV_OK;
    int e = thread_start(&nb->thread, nb_main, ctx);
    if (e != 0)
        return ctx_fail(ctx, RSV_ENOMEM, "cannot start the worker thread: %s",
                        strerror(e));
    nb->has_thread = 1;
    return RSV_OK;
}
/* Whether the blocking call would answer at once, before any statement:
 * then the start runs it on the caller's thread and returns its code. */
static int answers_at_once(const rsv_ctx *ctx, const struct nb_job *j,
                           const void *token)
{
    if (ctx->disabled && j->kind != JOB_STATUS)
        return 1;
    static const int call[] = {[JOB_RESERVE] = CALL_RESERVE,
                               [JOB_RESERVE_ONE] = CALL_RESERVE_ONE,
                               [JOB_CLAIM] = CALL_CLAIM,
                               [JOB_RELEASE] = CALL_RELEASE,
                               [JOB_EXTEND] = CALL_EXTEND,
                               [JOB_STATUS] = CALL_STATUS};
    call_args a = {.kind = call[j->kind], .token = token,
                   .token_len = j->token_len, .quantity = j->quantity,
                   .cart = j->cart, .ttl_ms = j->ttl_ms,
                   .out = j->status_out};
    char msg[ARG_MSG_MAX];
    return call_check(&a, msg) != RSV_OK;
}

/* Hand j to the worker, or answer at once (see answers_at_once). */
static int nb_start(rsv_ctx *ctx, struct nb_job *j, const void *token)
{
    if (!ctx)
        return RSV_EINVAL;
    /* (on the worker, from the completion callback: it would wait for
     * itself) */
    if (nb_busy(ctx) || nb_is_worker(ctx))
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
    if (nb && nb_is_worker(ctx))
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
    wakeup_clear(nb->fd);
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
    if (nb && nb_is_worker(ctx))
        return RSV_EINVAL; /* from the completion callback */
    if (!nb || !nb->pending)
        return ctx_fail(ctx, RSV_EINVAL,
                        "rsv_cancel: no non-blocking call is in progress on "
                        "this context");
    pthread_mutex_lock(&nb->mu);
    if (nb->state == NB_QUEUED || nb->state == NB_RUNNING)
        nb_stop_locked(nb);
    pthread_mutex_unlock(&nb->mu);
    return RSV_OK;
}
