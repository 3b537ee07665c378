/*
 * fuzz_cart.c - libFuzzer target for the cart object and the cart side of
 * rsv_reserve().
 *
 * The input is a little program: each step is one byte choosing an
 * operation, followed by that operation's arguments.  Operations: add a
 * line (item ids, location lists with duplicates, 0 and UINT64_MAX, counts
 * from 0 to SIZE_MAX, quantities at and beyond every boundary, flags with
 * unknown bits), clear, the allocation getters with any index, the failed
 * line, free and re-create, the NULL-argument forms, and rsv_reserve() on a
 * context whose connection was never established (it validates the token,
 * the cart and the TTL and builds its lock plan before it needs the
 * server, then answers RSV_ECONN).
 *
 * A model of the cart (number of lines, distinct item/location pairs)
 * predicts every return code from the rules in include/reserve.h; any
 * difference aborts.  ASan/UBSan/LSan catch the memory errors.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

#define MAX_MODEL_LINES (RSV_CART_MAX_LINES + 8)
#define PAIR_CAP (RSV_CART_MAX_LINES * RSV_LINE_MAX_LOCATIONS)

static MYSQL *conn;
static rsv_ctx *ctx;

/* The model: lines added and accepted, their (item, location) pairs. */
static struct {
    size_t lines;
    uint64_t (*pairs)[2];
    size_t npairs;
} model;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    ctx = fz_unconnected_ctx(&conn);
    model.pairs = malloc(sizeof *model.pairs * PAIR_CAP);
    if (!model.pairs)
        abort();
    return 0;
}

static uint64_t pick_id(fz *f)
{
    /* A small alphabet makes duplicates likely; the ends of the range
     * and raw values are in it too. */
    uint8_t s = fz_u8(f);
    switch (s % 8) {
    case 0: return 0;
    case 1: return UINT64_MAX;
    case 2: return (uint64_t)INT64_MAX + 1;
    case 3: return fz_u64(f);
    default: return s % 5 + 1;
    }
}

static int cmp_pair(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

static size_t distinct_pairs(void)
{
    static uint64_t tmp[PAIR_CAP][2];
    memcpy(tmp, model.pairs, model.npairs * sizeof *tmp);
    qsort(tmp, model.npairs, sizeof *tmp, cmp_pair);
    size_t n = 0;
    for (size_t i = 0; i < model.npairs; i++)
        n += i == 0 || cmp_pair(tmp[i], tmp[i - 1]) != 0;
    return n;
}

static void op_add(fz *f, rsv_cart *cart)
{
    uint64_t item = pick_id(f);
    uint8_t nsel = fz_u8(f);
    size_t n;
    switch (nsel >> 5) {
    case 0: n = 0; break;
    case 1: n = RSV_LINE_MAX_LOCATIONS; break;
    case 2: n = RSV_LINE_MAX_LOCATIONS + 1; break;
    case 3: n = SIZE_MAX; break;
    case 4: n = (size_t)1 << 62; break;
    default: n = nsel % 20; break;
    }
    /* The array really has min(n, 17) elements: the library must reject a
     * longer count (RSV_ETOOBIG) before it reads, so ASan sees any read
     * past what a well-behaved caller could have passed. */
    size_t have = n < RSV_LINE_MAX_LOCATIONS + 1 ? n : RSV_LINE_MAX_LOCATIONS + 1;
    uint64_t *locs = malloc((have ? have : 1) * sizeof *locs);
    if (!locs)
        abort();
    int dup = 0;
    for (size_t i = 0; i < have; i++) {
        locs[i] = pick_id(f);
        for (size_t j = 0; j < i; j++)
            dup |= locs[i] == locs[j];
    }
    int64_t qty = fz_i64_interesting(f, 1, RSV_QUANTITY_MAX);
    uint32_t flags;
    uint8_t fs = fz_u8(f);
    switch (fs % 6) {
    case 0: flags = 0; break;
    case 1: flags = RSV_LINE_SPLIT; break;
    case 2: flags = 0x2; break;
    case 3: flags = 0x80000000u | RSV_LINE_SPLIT; break;
    default: flags = fz_u32(f); break;
    }
    int null_locs = (fs & 0x80) != 0 && (fs & 0x40) != 0;

    /* Every code the header allows for this call, given its arguments;
     * when several rules are broken any of their codes is right. */
    int einval = null_locs || n == 0 || (flags & ~RSV_LINE_SPLIT) ||
                 (n <= RSV_LINE_MAX_LOCATIONS && dup);
    int equantity = qty < 1 || qty > RSV_QUANTITY_MAX;
    int etoobig = n > RSV_LINE_MAX_LOCATIONS ||
                  model.lines >= RSV_CART_MAX_LINES;
    size_t before = rsv_cart_lines(cart);
    int rc = rsv_cart_add(cart, item, null_locs ? NULL : locs, n, qty, flags);
    if (einval || equantity || etoobig) {
        check((einval && rc == RSV_EINVAL) ||
                  (equantity && rc == RSV_EQUANTITY) ||
                  (etoobig && rc == RSV_ETOOBIG),
              "add n=%zu qty=%lld flags=0x%x dup=%d lines=%zu: got %d",
              n, (long long)qty, flags, dup, model.lines, rc);
        check(rsv_cart_lines(cart) == before, "failed add changed the cart");
    } else {
        check(rc == RSV_OK || rc == RSV_ENOMEM,
              "valid add n=%zu qty=%lld flags=0x%x: got %d", n,
              (long long)qty, flags, rc);
        if (rc == RSV_OK) {
            model.lines++;
            for (size_t i = 0; i < n; i++) {
                model.pairs[model.npairs][0] = item;
                model.pairs[model.npairs][1] = locs[i];
                model.npairs++;
            }
        }
    }
    check(rsv_cart_lines(cart) == model.lines, "lines %zu, model %zu",
          rsv_cart_lines(cart), model.lines);
    free(locs);
}

static void op_getters(fz *f, const rsv_cart *cart)
{
    size_t line;
    uint8_t s = fz_u8(f);
    switch (s % 4) {
    case 0: line = model.lines ? s % model.lines : 0; break;
    case 1: line = model.lines; break;
    case 2: line = SIZE_MAX; break;
    default: line = (size_t)fz_u64(f); break;
    }
    size_t idx = (s & 0x80) ? (size_t)fz_u64(f) : fz_u8(f) % 20;
    size_t count = 12345;
    uint64_t loc = 0;
    int64_t q = 0;
    int rc = rsv_cart_allocation_count(cart, line, &count);
    /* No successful reserve ever happens here: every line has no
     * allocation. */
    if (line < model.lines) {
        check(rc == RSV_OK && count == 0, "count(%zu) = %d, %zu", line, rc,
              count);
    } else {
        check(rc == RSV_ERANGE, "count(%zu) of %zu lines = %d", line,
              model.lines, rc);
    }
    rc = rsv_cart_allocation(cart, line, idx, &loc, &q);
    check(rc == RSV_ERANGE, "allocation(%zu, %zu) = %d", line, idx, rc);
    check(rsv_cart_allocation_count(cart, line, NULL) == RSV_EINVAL,
          "NULL count_out");
    check(rsv_cart_allocation(cart, line, idx, NULL, &q) == RSV_EINVAL,
          "NULL location_out");
    check(rsv_cart_allocation(cart, line, idx, &loc, NULL) == RSV_EINVAL,
          "NULL quantity_out");
    check(rsv_cart_failed_line(cart) == (size_t)-1, "failed line %zu",
          rsv_cart_failed_line(cart));
}

static void op_reserve(fz *f, rsv_cart *cart)
{
    uint8_t tl = fz_u8(f);
    size_t len = tl % 4 == 0 ? 0 : (tl % 4 == 1 ? RSV_TOKEN_MAX + 1 : tl % 40 + 1);
    char tok[RSV_TOKEN_MAX + 1];
    memset(tok, 'k', sizeof tok);
    int64_t ttl = fz_i64_interesting(f, 0, 30LL * 24 * 3600 * 1000);
    uint64_t shop = pick_id(f);
    int rc = rsv_reserve(ctx, shop, tok, len, cart, ttl);
    check_msg(ctx);
    check(rsv_errcode(ctx) == rc, "errcode %d, rc %d", rsv_errcode(ctx), rc);
    /* The order of the checks in rsv_reserve(): token, empty cart, TTL,
     * then the lock plan (at most 1000 distinct pairs), then the server. */
    int want;
    if (len == 0 || len > RSV_TOKEN_MAX)
        want = RSV_ETOKEN;
    else if (model.lines == 0)
        want = RSV_EEMPTY;
    else if (ttl < 0 || ttl > 30LL * 24 * 3600 * 1000)
        want = RSV_EQUANTITY;
    else if (distinct_pairs() > 1000)
        want = RSV_ETOOBIG;
    else
        want = RSV_ECONN;
    check_rc(ctx, rc, want);
    check(rsv_cart_failed_line(cart) == (size_t)-1, "failed line %zu",
          rsv_cart_failed_line(cart));
}

static void op_null_forms(void)
{
    uint64_t l = 1;
    size_t c;
    uint64_t loc;
    int64_t q;
    check(rsv_cart_new(NULL) == RSV_EINVAL, "cart_new(NULL)");
    check(rsv_cart_add(NULL, 1, &l, 1, 1, 0) == RSV_EINVAL, "add(NULL)");
    check(rsv_cart_lines(NULL) == 0, "lines(NULL)");
    check(rsv_cart_allocation_count(NULL, 0, &c) == RSV_EINVAL, "count(NULL)");
    check(rsv_cart_allocation(NULL, 0, 0, &loc, &q) == RSV_EINVAL,
          "allocation(NULL)");
    check(rsv_cart_failed_line(NULL) == (size_t)-1, "failed_line(NULL)");
    rsv_cart_clear(NULL);
    rsv_cart_free(NULL);
    check(rsv_reserve(ctx, 1, "t", 1, NULL, 0) == RSV_EINVAL, "reserve(NULL)");
    check(rsv_reserve(NULL, 1, "t", 1, NULL, 0) == RSV_EINVAL,
          "reserve(NULL ctx)");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz f = {data, size};
    rsv_cart *cart = NULL;
    check(rsv_cart_new(&cart) == RSV_OK && cart, "cart_new");
    model.lines = 0;
    model.npairs = 0;
    /* At most this many steps per input, so one input stays fast. */
    for (int step = 0; step < 2000 && f.n > 0; step++) {
        uint8_t op = fz_u8(&f);
        switch (op % 16) {
        case 0: case 1: case 2: case 3: case 4: case 5:
            op_add(&f, cart);
            break;
        case 6: {
            /* many valid lines at once, to reach the 1000-line and
             * 1000-pair limits */
            unsigned k = fz_u8(&f) + 1u;
            uint64_t base = fz_u64(&f);
            uint64_t locs[2] = {1, 2};
            for (unsigned i = 0; i < k; i++) {
                int full = model.lines >= RSV_CART_MAX_LINES;
                int rc = rsv_cart_add(cart, base + i, locs, 2, 1,
                                      RSV_LINE_SPLIT);
                check(rc == (full ? RSV_ETOOBIG : RSV_OK), "bulk add %d", rc);
                if (rc == RSV_OK) {
                    for (int j = 0; j < 2; j++) {
                        model.pairs[model.npairs][0] = base + i;
                        model.pairs[model.npairs][1] = locs[j];
                        model.npairs++;
                    }
                    model.lines++;
                }
            }
            break;
        }
        case 7:
            rsv_cart_clear(cart);
            model.lines = 0;
            model.npairs = 0;
            check(rsv_cart_lines(cart) == 0, "clear");
            break;
        case 8: case 9: case 10:
            op_getters(&f, cart);
            break;
        case 11: case 12:
            op_reserve(&f, cart);
            break;
        case 13:
            rsv_cart_free(cart);
            cart = NULL;
            check(rsv_cart_new(&cart) == RSV_OK && cart, "cart_new");
            model.lines = 0;
            model.npairs = 0;
            break;
        case 14:
            op_null_forms();
            break;
        default:
            check(rsv_cart_lines(cart) == model.lines, "lines");
            break;
        }
    }
    rsv_cart_free(cart);
    return 0;
}
