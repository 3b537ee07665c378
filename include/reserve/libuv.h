/*
 * reserve/libuv.h - libreserve's non-blocking calls on a libuv loop.
 *
 * Header-only (it includes <reserve/async.h>): link with libuv
 * (pkg-config --cflags --libs reserve libuv).  One adapter per context,
 * attached once; then, for each call, hand the code its _start function
 * returned to rsv_uv_wait() with a function to call when it is done:
 *
 *   rsv_uv *a;
 *   rsv_uv_attach(&a, loop, ctx);             (a uv_poll_t on rsv_async_fd)
 *   rsv_uv_wait(a, rsv_claim_start(ctx, shop, token, len), claimed, req);
 *   ...
 *   static void claimed(rsv_ctx *ctx, int code, void *req)
 *   {   code is rsv_claim's; rsv_errmsg(ctx) explains it   }
 *   ...
 *   rsv_uv_detach(a);                          (then rsv_close(ctx))
 *
 * done runs on the loop's thread: from the poll callback once the call
 * finished, or at once, inside rsv_uv_wait, when the start already
 * returned a final code.  It may start the context's next call and wait
 * again.  Nothing here is exported by libreserve: these are static
 * functions for C programs; other languages wait on rsv_async_fd()
 * themselves.
 */
#ifndef RESERVE_LIBUV_H
#define RESERVE_LIBUV_H

#include <stdlib.h>

#include <reserve/async.h>
#include <uv.h>

typedef void (*rsv_uv_done_fn)(rsv_ctx *ctx, int code, void *data);

typedef struct rsv_uv {
    uv_poll_t poll;       /* on rsv_async_fd(ctx), active while waiting */
    rsv_ctx *ctx;
    rsv_uv_done_fn done;
    void *data;
    int waiting;
} rsv_uv;

static inline void rsv_uv__ready(uv_poll_t *handle, int status,
                                 int events)
{
    rsv_uv *a = (rsv_uv *)handle->data;
    (void)status; /* an error on a pipe: rsv_cont still tells */
    (void)events;
    if (!a->waiting)
        return;
    int code = rsv_cont(a->ctx);
    if (code == RSV_PENDING)
        return;
    uv_poll_stop(&a->poll);
    a->waiting = 0;
    /* last: done may wait again, or detach */
    a->done(a->ctx, code, a->data);
}

static inline void rsv_uv__closed(uv_handle_t *handle)
{
    free(handle->data);
}

/* Attach ctx to loop (once per context).  *out gets the adapter.
 * Returns 0; RSV_EINVAL (NULL argument), RSV_ENOMEM, or
 * rsv_async_fd()'s code; or a libuv error (negative, uv_strerror) when
 * the poll handle cannot be made. */
static inline int rsv_uv_attach(rsv_uv **out, uv_loop_t *loop,
                                rsv_ctx *ctx)
{
    if (!out)
        return RSV_EINVAL;
    *out = NULL;
    if (!loop || !ctx)
        return RSV_EINVAL;
    int fd = rsv_async_fd(ctx);
    if (fd < 0)
        return fd;
    rsv_uv *a = (rsv_uv *)calloc(1, sizeof *a);
    if (!a)
        return RSV_ENOMEM;
    int e = uv_poll_init(loop, &a->poll, fd);
    if (e != 0) {
        free(a);
        return e;
    }
    a->poll.data = a;
    a->ctx = ctx;
    *out = a;
    return 0;
}

/* Call done(ctx, code, data) when the call that returned `code` has
 * finished: at once if code is final, else once rsv_cont() gives its
 * result.  Returns 0; RSV_EINVAL (NULL a or done, or already waiting);
 * or a libuv error from uv_poll_start (done is then not called). */
static inline int rsv_uv_wait(rsv_uv *a, int code, rsv_uv_done_fn done,
                              void *data)
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
    int e = uv_poll_start(&a->poll, UV_READABLE, rsv_uv__ready);
    if (e != 0)
        a->waiting = 0;
    return e;
}

/* Stop watching and free the adapter (once the loop has closed its
 * handle: let it run once more).  A call still pending keeps running on
 * the context; its done is not called (rsv_cancel or rsv_close end it).
 * Detach before rsv_close(ctx), which closes the descriptor.  NULL is a
 * no-op. */
static inline void rsv_uv_detach(rsv_uv *a)
{
    if (!a)
        return;
    a->waiting = 0;
    uv_close((uv_handle_t *)&a->poll, rsv_uv__closed);
}

#endif /* RESERVE_LIBUV_H */
