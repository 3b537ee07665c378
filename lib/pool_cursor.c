/*
 * pool_cursor.c - where a context's reads of a pool start, and when a
 * reserve tops the pool up.
 *
 * Every buyer of a hot item reads the same pool.  Read from its bottom,
 * each read walks past the rows concurrent checkouts have locked and past
 * the rows taken recently but not yet purged, and that walk, repeated by
 * every reserve, cost server CPU that grew with the number of buyers.  So each
 * context keeps a cursor per pool: it reads upward from where its last
 * read ended, and its first read of a pool (from the bottom) places the
 * cursor at a random id of the live range.  Concurrent contexts then read
 * far apart and find a free row within a few entries.  A read from a
 * cursor that comes up short says nothing about the pool (the cursor may
 * just have reached the top): the reserve reads again from the bottom
 * (END_CURSOR_SHORT) before it may take the slow path, and that read places the
 * cursor afresh.
 *
 * When to top the pool up is decided apart from reading it: once a
 * context has taken an eighth of the low-water mark from a pool since it
 * last looked, a reserve counts the pool's rows and refills only below the
 * low-water mark (refill attempts by every buyer at once found the ledger
 * row locked by one refiller and only cost).  Counted by units, not by
 * time: every context counting once a second made the counts grow with
 * the crowd (at 512 buyers a third of the reserves sent one); by units,
 * all the contexts together count a pool about once per eighth of the
 * low-water mark it drains, however many share it.  A
 * top-up that found the ledger row held is left pending, for this
 * context's next reserve procedure to do on the server if it gets the row
 * (docs/internals.md, "Refills", says why and what the alternatives cost).
 *
 * The cursors live in the context (RSV_POOL_SEEN pools, direct-mapped): a
 * pool that falls out of the cache is read from the bottom again.
 */
#include <string.h>

#include "internal.h"

#define PROBE_GAP_US 1000000

/* Units a context takes from a pool by cursor reads between two counts of
 * it: an eighth of the low-water mark (at least one). */
static int64_t probe_share(const rsv_ctx *ctx)
{
    int64_t share = ctx->opts.refill_low_water / 8;
    return share > 1 ? share : 1;
}

static pool_seen *seen_slot(rsv_ctx *ctx, uint64_t shop, uint64_t item,
                                uint64_t loc)
{
    uint64_t h = (shop * 0x9E3779B97F4A7C15ULL) ^
                 (item * 0xC2B2AE3D27D4EB4FULL) ^
                 (loc * 0x165667B19E3779F9ULL);
    return &ctx->seen[(h >> 32) % RSV_POOL_SEEN];
}

static pool_seen *seen_find(rsv_ctx *ctx, uint64_t shop, uint64_t item,
                                uint64_t loc)
{
    pool_seen *s = seen_slot(ctx, shop, item, loc);
    return s->hi && s->shop == shop && s->item == item && s->loc == loc
               ? s : NULL;
}

uint64_t pool_cursor_start(rsv_ctx *ctx, uint64_t shop, uint64_t item,
                           uint64_t loc)
{
    if (ctx->opts.flags & TEST_OPT_READ_FROM_BOTTOM)
        return 0;
    pool_seen *s = seen_find(ctx, shop, item, loc);
    return s ? s->cursor : 0;
}

void pool_cursor_note(rsv_ctx *ctx, uint64_t shop, uint64_t item,
                      uint64_t loc, uint64_t next_id, int64_t avail,
                      uint64_t start, uint64_t first_id, uint64_t last_id)
{
    pool_seen *s = seen_slot(ctx, shop, item, loc);
    if (!seen_find(ctx, shop, item, loc)) {
        if (next_id == 0)
            return; /* (evicted since; the next read starts at the bottom) */
        memset(s, 0, sizeof *s);
        s->shop = shop;
        s->item = item;
        s->loc = loc;
        /* contexts started together must not count in step (the pool
         * would drain between their waves): each starts at a random point
         * of its share */
        s->taken_since_probe =
            (int64_t)(ctx_rand(ctx) % (uint64_t)probe_share(ctx));
    }
    if (next_id) { /* a read from the cursor may not read the ledger */
        s->hi = next_id;
        s->avail = avail;
    }
    s->sold_out = 0;
    if (first_id == 0)
        s->cursor = 0;
    else if (start == 0)
        s->cursor = s->hi > first_id
                        ? first_id + ctx_rand(ctx) % (s->hi - first_id) : 0;
    else
        s->cursor = last_id + 1;
}

void pool_cursor_sold_out(rsv_ctx *ctx, uint64_t shop, uint64_t item,
                          uint64_t loc, int yes)
{
    pool_seen *s = seen_find(ctx, shop, item, loc);
    if (s)
        s->sold_out = yes;
}

int pool_cursor_was_sold_out(rsv_ctx *ctx, uint64_t shop, uint64_t item,
                             uint64_t loc)
{
    pool_seen *s = seen_find(ctx, shop, item, loc);
    return s && s->sold_out;
}

int pool_cursor_may_refill(rsv_ctx *ctx, uint64_t shop, uint64_t item,
                           uint64_t loc)
{
    pool_seen *s = seen_find(ctx, shop, item, loc);
    return !s || s->avail > 0;
}

int pool_refill_due(rsv_ctx *ctx, uint64_t shop, uint64_t item, uint64_t loc,
                    uint64_t start, uint64_t next_id, uint64_t first_id,
                    int64_t taken, int was_short)
{
    if (was_short)
        return REFILL_YES;
    /* A read from the bottom tells by itself: the ids above the lowest
     * free row, times the units a row is minted with (an overestimate of
     * the units left: rows taken in part carry fewer).  Only reads from a
     * cursor need the count, and only pools this context reads often
     * (still in its cache): a cart over many items must not count each. */
    int64_t per = ctx->opts.pool_cap / 100 > 1 ? ctx->opts.pool_cap / 100 : 1;
    int64_t span = (int64_t)(next_id - first_id) * per;
    pool_seen *s = seen_find(ctx, shop, item, loc);
    if (!s) /* (evicted by another key of this cart since the read) */
        return start == 0 && span < ctx->opts.refill_low_water ? REFILL_YES
                                                               : REFILL_NO;
    uint64_t now = now_us();
    if (start == 0) {
        /* at most one attempt per pool and PROBE_GAP_US from here too: a
         * pool the ledger can only trickle into looks low on every read */
        if (span >= ctx->opts.refill_low_water || now < s->refill_after_us)
            return REFILL_NO;
        s->refill_after_us = now + PROBE_GAP_US / 2 +
                             ctx_rand(ctx) % PROBE_GAP_US;
        return REFILL_YES;
    }
    if (ctx->opts.refill_low_water <= 0)
        return REFILL_NO;
    s->taken_since_probe += taken;
    if (s->taken_since_probe < probe_share(ctx))
        return REFILL_NO;
    s->taken_since_probe = 0;
    return REFILL_COUNT;
}

int pool_refill_pending(rsv_ctx *ctx, uint64_t shop, uint64_t item,
                        uint64_t loc)
{
    pool_seen *s = seen_find(ctx, shop, item, loc);
    return s && s->refill_pending;
}

void pool_refill_done(rsv_ctx *ctx, uint64_t shop, uint64_t item, uint64_t loc,
                      int skipped)
{
    pool_seen *s = seen_find(ctx, shop, item, loc);
    if (s)
        s->refill_pending = skipped;
}
