/*
 * reserve/libevent.h - libreserve's non-blocking calls on a libevent
 * event_base.
 *
 * Header-only (it includes <reserve/async.h>): link with libevent
 * (pkg-config --cflags --libs reserve libevent).  One adapter per
 * context, attached once; then, for each call, hand the code its _start
 * function returned to rsv_event_wait() with a function to call when it
 * is done:
 *
 *   rsv_event *a;
 *   rsv_event_attach(&a, base, ctx);      (a struct event on rsv_async_fd)
 *   rsv_event_wait(a, rsv_claim_start(ctx, shop, token, len), claimed, req);
 *   ...
 *   static void claimed(rsv_ctx *ctx, int code, void *req)
 *   {   code is rsv_claim's; rsv_errmsg(ctx) explains it   }
 *   ...
 *   rsv_event_detach(a);                   (then rsv_close(ctx))
 *
 * done runs on the loop's thread: from the event's callback once the
 * call finished, or at once, inside rsv_event_wait, when the start
 * already returned a final code.  It may start the context's next call
 * and wait again, or detach.  Nothing here is exported by libreserve:
 * these are static functions for C programs.
 */
#ifndef RESERVE_LIBEVENT_H
#define RESERVE_LIBEVENT_H

#include <stdlib.h>

#include <event2/event.h>
#include <reserve/async.h>

typedef void (*rsv_event_done_fn)(rsv_ctx *ctx, int code, void *data);

typedef struct rsv_event {
    struct event *ev;     /* one-shot EV_READ on rsv_async_fd(ctx), added
                             while waiting: never pending while its
                             callback runs, so done may free it */
    rsv_ctx *ctx;
    rsv_event_done_fn done;
    void *data;
    int waiting;
} rsv_event;

static inline void rsv_event__ready(evutil_socket_t fd, short what,
                                    void *arg)
{
    rsv_event *a = (rsv_event *)arg;
    (void)fd;
    (void)what;
    if (!a->waiting)
        return;
    int code = rsv_cont(a->ctx);
    if (code == RSV_PENDING) {
        event_add(a->ev, NULL);
        return;
    }
    a->waiting = 0;
    a->done(a->ctx, code, a->data);
}

/* Attach ctx to base (once per context).  *out gets the adapter.
 * Returns 0; RSV_EINVAL (NULL argument), RSV_ENOMEM (also when libevent
 * cannot make the event), or rsv_async_fd()'s code. */
static inline int rsv_event_attach(rsv_event **out,
                                   struct event_base *base, rsv_ctx *ctx)
{
    if (!out)
        return RSV_EINVAL;
    *out = NULL;
    if (!base || !ctx)
        return RSV_EINVAL;
    int fd = rsv_async_fd(ctx);
    if (fd < 0)
        return fd;
    rsv_event *a = (rsv_event *)calloc(1, sizeof *a);
    if (!a)
        return RSV_ENOMEM;
    a->ev = event_new(base, fd, EV_READ, rsv_event__ready, a);
    if (!a->ev) {
        free(a);
        return RSV_ENOMEM;
    }
    a->ctx = ctx;
    *out = a;
    return 0;
}

/* Call done(ctx, code, data) when the call that returned `code` has
 * finished: at once if code is final, else once rsv_cont() gives its
 * result.  Returns 0; RSV_EINVAL (NULL a or done, or already waiting);
 * or -1 when event_add fails (done is then not called). */
static inline int rsv_event_wait(rsv_event *a, int code,
                                 rsv_event_done_fn done, void *data)
{
    if (!a || !done || a->waiting)
        return RSV_EINVAL;
    if (code != RSV_PENDING) {
        done(a->ctx, code, data);
        return 0;
    }
    a->done = done;
    a->data = data;
    a->waiting = 1;
    if (event_add(a->ev, NULL) != 0) {
        a->waiting = 0;
        return -1;
    }
    return 0;
}

/* Stop watching and free the adapter at once (also from done).  A call
 * still pending keeps running on the context; its done is not called
 * (rsv_cancel or rsv_close end it).  Detach before rsv_close(ctx), which
 * closes the descriptor.  NULL is a no-op. */
static inline void rsv_event_detach(rsv_event *a)
{
    if (!a)
        return;
    event_free(a->ev);
    free(a);
}

#endif /* RESERVE_LIBEVENT_H */
