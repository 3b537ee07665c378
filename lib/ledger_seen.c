/*
 * ledger_seen.c - which ledger rows this context has seen exist.
 *
 * A cart may name, for a line, locations a reserve never reads (the first
 * covers the line).  The statement path's one read sees the ledger row of
 * every key and answers RSV_ENOITEM for a location that has none, however
 * the cart would have been held; the reserve procedures read only the
 * keys they take units at.  So that the answer does not depend on the
 * path, the cart procedure also checks the other locations of a cart, one
 * read each, except those this context has already seen exist.  The
 * library never deletes a ledger row, so a row seen once stays (unless
 * the application deletes ledger rows itself).
 *
 * 64-bit fingerprints of (shop, item, location) in sets of two, the one
 * seen last first: a key forgotten (two later keys of its set came in
 * between) only costs one more check.  (Direct-mapped, two keys of a
 * catalogue that share a slot would push each other out for good.)
 */
#include "internal.h"

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
    h ^= h >> 30;
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 27;
    h *= 0x94D049BB133111EBULL;
    return h ^ (h >> 31);
}

static uint64_t fingerprint(uint64_t shop, uint64_t item, uint64_t loc)
{
    uint64_t h = mix(mix(mix(0x5EED, shop), item), loc);
    return h ? h : 1; /* 0 marks an empty slot */
}

static size_t set_of(uint64_t f)
{
    return 2 * (size_t)((f >> 1) % (RSV_LEDGER_SEEN / 2));
}

void ledger_seen_note(rsv_ctx *ctx, uint64_t shop, uint64_t item,
                      uint64_t loc)
{
    uint64_t f = fingerprint(shop, item, loc);
    uint64_t *set = &ctx->ledger_seen[set_of(f)];
    if (set[0] != f) { /* (if it was second, the two swap) */
        set[1] = set[0];
        set[0] = f;
    }
}

int ledger_seen(const rsv_ctx *ctx, uint64_t shop, uint64_t item,
                uint64_t loc)
{
    uint64_t f = fingerprint(shop, item, loc);
    const uint64_t *set = &ctx->ledger_seen[set_of(f)];
    return set[0] == f || set[1] == f;
}
