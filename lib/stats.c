/*
 * stats.c - per-context statistics.
 *
 * Owns: the counters, outcomes and latency histograms kept in
 * rsv_ctx.stats (fixed arrays: a context's memory never grows with
 * traffic) and their public getters.  The hooks that feed them live where
 * the events happen: op_begin/op_end in op.c, the retry loop in txn.c,
 * statement execution in sql.c, short reads and refills in reserve.c.  Snapshots and their Prometheus text are in
 * stats_export.c.
 */
#include <string.h>

#include "internal.h"


static int code_slot(int rc)
{
    return rc <= 0 && rc >= RSV__LAST_CODE ? -rc : STATS_CODES - 1;
}

static int bucket_of(uint64_t us)
{
    int b = 0;
    while (us && b < RSV_STATS_BUCKETS - 1) {
        us >>= 1;
        b++;
    }
    return b;
}

void stats_add(rsv_ctx *ctx, int stat, uint64_t n)
{
    ctx->stats.counter[ctx->op][stat] += n;
}

void stats_call(rsv_ctx *ctx, int op, int rc, uint64_t us)
{
    ctx_stats *s = &ctx->stats;
    s->outcome[op][code_slot(rc)]++;
    s->hist[op][bucket_of(us)]++;
    s->counter[op][RSV_STAT_LATENCY_US] += us;
    if (us > s->counter[op][RSV_STAT_LATENCY_MAX_US])
        s->counter[op][RSV_STAT_LATENCY_MAX_US] = us;
}

static int valid_op(uint32_t op) { return op < OP__COUNT; }

/* Slots [from, to) to add up for a public kind. */
static void op_range(uint32_t op, int *from, int *to)
{
    *from = op == RSV_OP_ALL ? 0 : (int)op;
    *to = op == RSV_OP_ALL ? OP__COUNT : (int)op + 1;
}

static uint64_t calls_of(const ctx_stats *s, int op, int first, int last)
{
    uint64_t n = 0;
    for (int c = first; c <= last; c++)
        n += s->outcome[op][c];
    return n;
}

uint64_t stats_value(const ctx_stats *s, uint32_t stat, uint32_t op)
{
    int from, to;
    op_range(op, &from, &to);
    uint64_t v = 0;
    for (int o = from; o < to; o++) {
        switch (stat) {
        case RSV_STAT_CALLS:
            v += calls_of(s, o, 0, STATS_CODES - 1);
            break;
        case RSV_STAT_OK:
            v += s->outcome[o][0];
            break;
        case RSV_STAT_EXPECTED:
            v += calls_of(s, o, -RSV_EOUTOFSTOCK, -RSV_EINDOUBT);
            break;
        case RSV_STAT_FAILED:
            v += calls_of(s, o, -RSV_EINDOUBT + 1, STATS_CODES - 1);
            break;
        case RSV_STAT_INLINE_REFILLS:
            /* the top-ups after commit are counted here, the slow-path
             * runs under their own counter; the public figure is both */
            v += s->counter[o][RSV_STAT_INLINE_REFILLS] +
                 s->counter[o][RSV_STAT_SLOW_PATHS];
            break;
        case RSV_STAT_LATENCY_MAX_US:
            if (s->counter[o][stat] > v)
                v = s->counter[o][stat];
            break;
        default:
            v += s->counter[o][stat];
            break;
        }
    }
    return v;
}

RSV_EXTERN int rsv_stats_get(const rsv_ctx *ctx, uint32_t stat, uint32_t op,
                             uint64_t *out)
{
    if (!ctx || nb_busy(ctx) || !out || !valid_op(op) ||
        stat >= STATS_COUNTERS)
        return RSV_EINVAL;
    *out = stats_value(&ctx->stats, stat, op);
    return RSV_OK;
}

RSV_EXTERN int rsv_stats_outcome(const rsv_ctx *ctx, uint32_t op, int code,
                                 uint64_t *out)
{
    if (!ctx || nb_busy(ctx) || !out || !valid_op(op) || code > 0 ||
        code < RSV__LAST_CODE)
        return RSV_EINVAL;
    int from, to;
    op_range(op, &from, &to);
    uint64_t v = 0;
    for (int o = from; o < to; o++)
        v += ctx->stats.outcome[o][-code];
    *out = v;
    return RSV_OK;
}

static void histogram(const rsv_ctx *ctx, uint32_t op,
                      uint64_t h[RSV_STATS_BUCKETS])
{
    int from, to;
    op_range(op, &from, &to);
    memset(h, 0, RSV_STATS_BUCKETS * sizeof *h);
    for (int o = from; o < to; o++)
        for (int b = 0; b < RSV_STATS_BUCKETS; b++)
            h[b] += ctx->stats.hist[o][b];
}

RSV_EXTERN int rsv_stats_histogram(const rsv_ctx *ctx, uint32_t op,
                                   uint64_t *buckets, size_t n)
{
    if (!ctx || nb_busy(ctx) || (!buckets && n > 0) || !valid_op(op))
        return RSV_EINVAL;
    uint64_t h[RSV_STATS_BUCKETS];
    histogram(ctx, op, h);
    for (size_t i = 0; i < n; i++)
        buckets[i] = i < RSV_STATS_BUCKETS ? h[i] : 0;
    return RSV_OK;
}

RSV_EXTERN int rsv_stats_percentile(const rsv_ctx *ctx, uint32_t op,
                                    double p, uint64_t *us_out)
{
    if (!ctx || nb_busy(ctx) || !us_out || !valid_op(op) ||
        !(p >= 0 && p <= 100))
        return RSV_EINVAL;
    uint64_t h[RSV_STATS_BUCKETS], total = 0, max = 0;
    histogram(ctx, op, h);
    for (int b = 0; b < RSV_STATS_BUCKETS; b++)
        total += h[b];
    *us_out = 0;
    if (total == 0)
        return RSV_OK;
    rsv_stats_get(ctx, RSV_STAT_LATENCY_MAX_US, op, &max);
    /* The rank of the call we want, 1-based (p = 0: the fastest call);
     * rounded up by hand so the library needs no libm. */
    double want = p / 100.0 * (double)total;
    double rank = (double)(uint64_t)want;
    if (rank < want)
        rank += 1;
    if (rank < 1)
        rank = 1;
    uint64_t seen = 0;
    for (int b = 0; b < RSV_STATS_BUCKETS; b++) {
        if (h[b] == 0 || (double)(seen + h[b]) < rank) {
            seen += h[b];
            continue;
        }
        double lo = b == 0 ? 0 : (double)(1ULL << (b - 1));
        double hi = b == 0 ? 1 : (double)(1ULL << b);
        double est = b == RSV_STATS_BUCKETS - 1
                         ? lo /* open-ended: its lower bound */
                         : lo + (hi - lo) * (rank - (double)seen) /
                                    (double)h[b];
        uint64_t us = (uint64_t)est;
        *us_out = us > max ? max : us;
        return RSV_OK;
    }
    *us_out = max;
    return RSV_OK;
}

RSV_EXTERN int rsv_stats_reset(rsv_ctx *ctx)
{
    if (!ctx || nb_busy(ctx))
        return RSV_EINVAL;
    memset(&ctx->stats, 0, sizeof ctx->stats);
    return RSV_OK;
}
