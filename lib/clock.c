/*
 * clock.c - time and jitter: the monotonic clock every budget, backoff and
 * probe interval is measured on, and each context's random source for
 * jitter (so contexts started together do not retry or probe in step).
 */
#include <time.h>

#include "internal.h"

uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void ctx_rand_seed(rsv_ctx *ctx)
{
    ctx->rng = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)ctx ^
               0x9E3779B97F4A7C15ULL;
}

uint64_t ctx_rand(rsv_ctx *ctx)
{
    /* xorshift64*: jitter and read offsets, no need for quality */
    uint64_t x = ctx->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    ctx->rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}
