/*
 * threads.c - what the library's own threads need from the application's
 * process: starting one without taking its signals, and the completion
 * descriptor an event loop waits on.
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
