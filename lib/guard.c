/*
 * guard.c - a context's call in flight: the state the caller's thread and
 * the context's worker thread share (nonblock.c runs the worker), and the
 * questions every layer asks of it.  The first, nb_busy (a non-blocking
 * call is in flight and this thread is not its worker), is threads.c's:
 * rsv_errmsg asks it, and this file sets messages.
 *
 *  - nb_canceled: rsv_cancel asked the call to stop; txn_run asks before
 *    each attempt.
 *  - nb_sleep: the backoff pause between attempts, which a cancel cuts
 *    short.
 *
 * The answers are trivially "no" for a context that never used the
 * non-blocking interface (ctx->nb is NULL), so the blocking calls pay
 * nothing for them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

int nb_canceled(rsv_ctx *ctx)
{
    struct nb_state *nb = ctx->nb;
    if (!nb || !nb_is_worker(ctx))
        return 0;
    pthread_mutex_lock(&nb->mu);
    int cancel = nb->cancel, cut = nb->cut;
    pthread_mutex_unlock(&nb->mu);
    if (!cancel)
        return 0;
    return ctx_fail(ctx, RSV_ECANCELED,
                    cut ? "canceled (rsv_cancel) between two attempts: "
                          "nothing was applied; the connection was cut, "
                          "call rsv_reconnect before the next call"
                        : "canceled (rsv_cancel): nothing was applied");
}

void nb_sleep(rsv_ctx *ctx, uint64_t us)
{
    struct nb_state *nb = ctx->nb;
    struct timespec ts;
    if (!nb || !nb_is_worker(ctx)) {
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

int nb_ensure(rsv_ctx *ctx)
{
    if (ctx->nb)
        return RSV_OK;
    struct nb_state *nb = calloc(1, sizeof *nb);
    if (!nb)
        return ctx_fail(ctx, RSV_ENOMEM, "out of memory");
    int e = wakeup_open(nb->fd);
    if (e) {
        free(nb);
        return ctx_fail(ctx, RSV_ENOMEM,
                        "cannot create the completion descriptor: %s",
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

void nb_stop_locked(struct nb_state *nb)
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
        nb_stop_locked(nb);
        pthread_mutex_unlock(&nb->mu);
        pthread_join(nb->thread, NULL);
    }
    pthread_cond_destroy(&nb->cv);
    pthread_mutex_destroy(&nb->mu);
    wakeup_close(nb->fd);
    free(nb);
    ctx->nb = NULL;
}
