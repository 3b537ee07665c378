/*
 * threads.c - what the library's own threads need from the application's
 * process: starting one without taking its signals, the completion
 * descriptor an event loop waits on, and which thread is a context's
 * worker (nb_busy: while a non-blocking call is in flight only the worker
 * touches the context and its connection; op_begin and the few functions
 * that take no operation refuse other threads, without writing to it).
 *
 * The descriptor is the read end of a pipe holding at most one byte:
 * readable exactly while an answer waits (level-triggered), so a loop
 * that polls it never misses an answer and never spins.  The non-blocking
 * interface (nonblock.c) and the batcher (batcher.c) both complete this
 * way.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "internal.h"

int thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
    /* Signals stay the application's threads' business: ours start with
     * every signal blocked. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return e;
}

int wakeup_open(int fd[2])
{
    if (pipe(fd) != 0) {
        int e = errno;
        fd[0] = fd[1] = -1;
        return e;
    }
    for (int i = 0; i < 2; i++) {
        int fl = fcntl(fd[i], F_GETFL), fdfl = fcntl(fd[i], F_GETFD);
        if (fl < 0 || fdfl < 0 || fcntl(fd[i], F_SETFL, fl | O_NONBLOCK) < 0 ||
            fcntl(fd[i], F_SETFD, fdfl | FD_CLOEXEC) < 0) {
            int e = errno;
            wakeup_close(fd);
            return e;
        }
    }
    return 0;
}

void wakeup_set(const int fd[2])
{
    char b = 1;
    while (write(fd[1], &b, 1) < 0 && errno == EINTR)
        ;
}

void wakeup_clear(const int fd[2])
{
    char b;
    while (read(fd[0], &b, 1) < 0 && errno == EINTR)
        ;
}

void wakeup_close(int fd[2])
{
    for (int i = 0; i < 2; i++)
        if (fd[i] >= 0)
            close(fd[i]);
    fd[0] = fd[1] = -1;
}

/* The context whose worker runs on this thread: its calls pass. */
static _Thread_local const rsv_ctx *nb_worker_of;

#define IN_PROGRESS "a non-blocking call is in progress on this context: " \
                    "wait for its descriptor (rsv_async_fd) and call rsv_cont"

void nb_become_worker(const rsv_ctx *ctx) { nb_worker_of = ctx; }

int nb_is_worker(const rsv_ctx *ctx) { return nb_worker_of == ctx; }

int nb_busy(const rsv_ctx *ctx)
{
    /* (the worker asks first: it never reads the caller's flag) */
    return nb_worker_of != ctx && ctx->nb && ctx->nb->pending;
}

const char *nb_busy_msg(void) { return IN_PROGRESS; }
