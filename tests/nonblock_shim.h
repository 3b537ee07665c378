/*
 * nonblock_shim.h - with RSV_TEST_NONBLOCKING defined, the six calls of
 * the non-blocking interface (rsv_reserve, rsv_reserve_one, rsv_claim,
 * rsv_release, rsv_extend, rsv_checkout_status) go through their _start
 * function, a wait on rsv_async_fd() and rsv_cont(), so that a suite
 * written against the blocking calls tests the non-blocking ones too.
 * Included by testutil.h; the Makefile builds the lifecycle, bad-input and
 * concurrency suites a second time with it (check_*_nb).
 */
#ifndef RSV_NONBLOCK_SHIM_H
#define RSV_NONBLOCK_SHIM_H

#ifdef RSV_TEST_NONBLOCKING
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

#include "reserve.h"
#include "reserve/async.h"

/* Wait for the call started with code rc to finish; its final code.  A
 * call still pending after a minute is a hang: fail loudly. */
static inline int nbshim_wait(rsv_ctx *ctx, int rc)
{
    while (rc == RSV_PENDING) {
        if (rsv_errcode(ctx) != RSV_PENDING || !rsv_pending(ctx)) {
            fprintf(stderr, "nonblock_shim: pending, yet rsv_errcode says "
                            "%d and rsv_pending %d\n", rsv_errcode(ctx),
                    rsv_pending(ctx));
            abort();
        }
        struct pollfd p = {rsv_async_fd(ctx), POLLIN, 0};
        int n = poll(&p, 1, 60000);
        if (n == 0 || (n < 0 && errno != EINTR)) {
            fprintf(stderr, "nonblock_shim: no completion after 60 s\n");
            abort();
        }
        rc = rsv_cont(ctx);
    }
    return rc;
}

static inline int nbshim_reserve(rsv_ctx *ctx, uint64_t shop,
                                 const void *token, size_t len,
                                 rsv_cart *cart, int64_t ttl_ms)
{
    return nbshim_wait(ctx, rsv_reserve_start(ctx, shop, token, len, cart,
                                              ttl_ms));
}

static inline int nbshim_reserve_one(rsv_ctx *ctx, uint64_t shop,
                                     const void *token, size_t len,
                                     uint64_t item, uint64_t loc,
                                     int64_t qty, int64_t ttl_ms)
{
    return nbshim_wait(ctx, rsv_reserve_one_start(ctx, shop, token, len, item,
                                                  loc, qty, ttl_ms));
}

static inline int nbshim_claim(rsv_ctx *ctx, uint64_t shop,
                               const void *token, size_t len)
{
    return nbshim_wait(ctx, rsv_claim_start(ctx, shop, token, len));
}

static inline int nbshim_release(rsv_ctx *ctx, uint64_t shop,
                                 const void *token, size_t len)
{
    return nbshim_wait(ctx, rsv_release_start(ctx, shop, token, len));
}

static inline int nbshim_extend(rsv_ctx *ctx, uint64_t shop,
                                const void *token, size_t len,
                                int64_t ttl_ms)
{
    return nbshim_wait(ctx, rsv_extend_start(ctx, shop, token, len, ttl_ms));
}

static inline int nbshim_status(rsv_ctx *ctx, uint64_t shop,
                                const void *token, size_t len,
                                int32_t *status, int64_t *units,
                                int64_t *expires)
{
    return nbshim_wait(ctx, rsv_checkout_status_start(ctx, shop, token, len,
                                                      status, units,
                                                      expires));
}

#define rsv_reserve(...) nbshim_reserve(__VA_ARGS__)
#define rsv_reserve_one(...) nbshim_reserve_one(__VA_ARGS__)
#define rsv_claim(...) nbshim_claim(__VA_ARGS__)
#define rsv_release(...) nbshim_release(__VA_ARGS__)
#define rsv_extend(...) nbshim_extend(__VA_ARGS__)
#define rsv_checkout_status(...) nbshim_status(__VA_ARGS__)
#endif

#endif
