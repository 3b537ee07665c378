/*
 * key_stats.c - what a crowd does to a key: per (shop, item, location),
 * the reserves that came up short, waited for its ledger row, and the
 * pool rows their reads passed over (RSV_KEY_*, <reserve/stats.h>).
 *
 * Owns: the key table of ctx_stats (a fixed array: a context's memory
 * never grows with traffic), how keys are added and merged, and the
 * getters rsv_stats_key and rsv_stats_key_at.  The events are counted
 * where they happen (reserve.c, after each pass).
 *
 * Why a fixed table of the busiest keys and not every key: these events
 * come with a crowd, and a crowd is on few keys at a time; a table of
 * every key a context ever touched would grow with the catalogue.  A key
 * full of events keeps its slot; a new key takes the slot of the key
 * with the fewest.
 */
#include <string.h>

#include "internal.h"

static uint64_t total(const key_stat *k)
{
    uint64_t t = 0;
    for (int i = 0; i < RSV_KEY_STAT_COUNT; i++)
        t += k->n[i];
    return t;
}

static key_stat *find(const ctx_stats *s, uint64_t shop, uint64_t item,
                      uint64_t loc)
{
    for (uint32_t i = 0; i < s->nkeys; i++) {
        const key_stat *k = &s->keys[i];
        if (k->shop == shop && k->item == item && k->loc == loc)
            return (key_stat *)k;
    }
    return NULL;
}

/* A slot for a key not in the table: a free one, or the one with the
 * fewest events if it has fewer than `weight` (NULL: keep the table). */
static key_stat *make_room(ctx_stats *s, uint64_t weight)
{
    if (s->nkeys < RSV_KEY_STATS_MAX)
        return &s->keys[s->nkeys++];
    key_stat *least = &s->keys[0];
    for (uint32_t i = 1; i < s->nkeys; i++)
        if (total(&s->keys[i]) < total(least))
            least = &s->keys[i];
    return total(least) < weight ? least : NULL;
}

static key_stat *slot(ctx_stats *s, uint64_t shop, uint64_t item,
                      uint64_t loc, uint64_t weight)
{
    key_stat *k = find(s, shop, item, loc);
    if (k)
        return k;
    if (!(k = make_room(s, weight)))
        return NULL;
    memset(k, 0, sizeof *k);
    k->shop = shop;
    k->item = item;
    k->loc = loc;
    return k;
}

void key_stats_add(ctx_stats *s, uint64_t shop, uint64_t item, uint64_t loc,
                   int stat, uint64_t n)
{
    if (n == 0)
        return;
    /* (UINT64_MAX: an event always finds a slot, so a new crowd shows
     * at once even after the table filled up) */
    key_stat *k = slot(s, shop, item, loc, UINT64_MAX);
    if (k)
        k->n[stat] += n;
}

void key_stats_merge(ctx_stats *a, const ctx_stats *b)
{
    for (uint32_t i = 0; i < b->nkeys; i++) {
        const key_stat *from = &b->keys[i];
        key_stat *to = slot(a, from->shop, from->item, from->loc,
                            total(from));
        if (!to)
            continue;
        for (int c = 0; c < RSV_KEY_STAT_COUNT; c++)
            to->n[c] += from->n[c];
    }
}

RSV_EXTERN int rsv_stats_key(const rsv_ctx *ctx, uint64_t shop_id,
                             uint64_t item_id, uint64_t location_id,
                             uint32_t stat, uint64_t *out)
{
    if (!ctx || nb_busy(ctx) || !out || stat >= RSV_KEY_STAT_COUNT)
        return RSV_EINVAL;
    const key_stat *k = find(&ctx->stats, shop_id, item_id, location_id);
    *out = k ? k->n[stat] : 0;
    return RSV_OK;
}

RSV_EXTERN int rsv_stats_key_at(const rsv_ctx *ctx, uint32_t i,
                                uint64_t *shop_id, uint64_t *item_id,
                                uint64_t *location_id)
{
    if (!ctx || nb_busy(ctx) || !shop_id || !item_id || !location_id)
        return RSV_EINVAL;
    if (i >= ctx->stats.nkeys)
        return RSV_ERANGE;
    const key_stat *k = &ctx->stats.keys[i];
    *shop_id = k->shop;
    *item_id = k->item;
    *location_id = k->loc;
    return RSV_OK;
}
