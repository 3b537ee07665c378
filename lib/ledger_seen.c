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
 * Direct-mapped 64-bit fingerprints of (shop, item, location): a slot
 * holds the last key that hashed to it, so a forgotten key only costs one
 * more check.
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

void ledger_seen_note(rsv_ctx *ctx, uint64_t shop, uint64_t item,
                      uint64_t loc)
{
    uint64_t f = fingerprint(shop, item, loc);
    ctx->ledger_seen[f % RSV_LEDGER_SEEN] = f;
}

int ledger_seen(const rsv_ctx *ctx, uint64_t shop, uint64_t item,
                uint64_t loc)
{
    uint64_t f = fingerprint(shop, item, loc);
    return ctx->ledger_seen[f % RSV_LEDGER_SEEN] == f;
}
