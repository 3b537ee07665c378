/*
 * fuzz_token.c - libFuzzer target for the checkout-token validation of
 * every entry point that takes a token (check_token() in lib/checkout.c,
 * reached through the public API).
 *
 * Decision: fuzz through the public functions, not the internal
 * check_token(): that also covers each function's argument order
 * (rsv_reserve_one checks the quantity first, rsv_checkout_status its
 * status_out first, rsv_reserve the cart first), and keeps the target
 * independent of lib/ internals.  The context's connection was never
 * established: a call whose arguments are all valid gets as far as its
 * first statement and answers RSV_ECONN, which is what the oracle expects.
 *
 * Input: byte 0 picks the function and argument variants, then the TTL
 * (a selector byte and its payload, fz_i64_interesting), one length-mode
 * byte, and the rest is the token (copied into a buffer of exactly its
 * length, so ASan sees any read past it).  Bytes 1-4 are also read as a
 * return code to check rsv_strerror() and rsv_code_name() on.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

static MYSQL *conn;
static rsv_ctx *ctx;
static rsv_cart *cart1;  /* one valid line */
static rsv_cart *empty;  /* no lines */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    ctx = fz_unconnected_ctx(&conn);
    uint64_t loc = 1;
    if (rsv_cart_new(&cart1) || rsv_cart_new(&empty) ||
        rsv_cart_add(cart1, 1, &loc, 1, 1, 0))
        abort();
    return 0;
}

static int ttl_ok(int64_t ttl)
{
    return ttl >= 0 && ttl <= 30LL * 24 * 3600 * 1000;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz f = {data, size};
    uint8_t sel = fz_u8(&f);
    fz code_f = f;
    int64_t ttl = fz_i64_interesting(&f, 0, 30LL * 24 * 3600 * 1000);
    uint8_t lenmode = fz_u8(&f);

    /* rsv_strerror / rsv_code_name on any int */
    int code = (int)fz_u32(&code_f);
    const char *name = rsv_code_name(code);
    check(rsv_strerror(code) != NULL, "strerror(%d) NULL", code);
    check((name != NULL) == ((code <= 0 && code >= RSV_ENOTPRIMARY &&
                              code != -9) || code == RSV_PENDING),
          "code_name(%d) = %s", code, name ? name : "NULL");

    size_t len = f.n;
    unsigned char *tok = malloc(len ? len : 1);
    if (!tok)
        abort();
    if (len)
        memcpy(tok, f.p, len);
    const void *tp = tok;
    /* Length modes: the real length; or a NULL token; or a declared
     * length above RSV_TOKEN_MAX on a 1-byte buffer (must be refused
     * before any read). */
    switch (lenmode % 8) {
    case 0: tp = NULL; break;
    case 1: len = RSV_TOKEN_MAX + 1 + lenmode; break;
    case 2: len = SIZE_MAX; break;
    default: break;
    }
    if (len > f.n && tp) {
        free(tok);
        tok = malloc(1);
        if (!tok)
            abort();
        tok[0] = 'x';
        tp = tok;
    }

    int tok_want = !tp ? RSV_EINVAL
                  : (len == 0 || len > RSV_TOKEN_MAX) ? RSV_ETOKEN : RSV_OK;
    int rc, want;
    int32_t st;
    int64_t units, exp;
    switch (sel % 8) {
    case 0:
        rc = rsv_claim(ctx, 7, tp, len);
        want = tok_want ? tok_want : RSV_ECONN;
        break;
    case 1:
        rc = rsv_release(ctx, 7, tp, len);
        want = tok_want ? tok_want : RSV_ECONN;
        break;
    case 2:
        rc = rsv_extend(ctx, 7, tp, len, ttl);
        want = tok_want ? tok_want : !ttl_ok(ttl) ? RSV_EQUANTITY : RSV_ECONN;
        break;
    case 3:
        rc = rsv_checkout_status(ctx, 7, tp, len, (sel & 0x80) ? NULL : &st,
                                 (sel & 0x40) ? NULL : &units,
                                 (sel & 0x20) ? NULL : &exp);
        want = (sel & 0x80) ? RSV_EINVAL : tok_want ? tok_want : RSV_ECONN;
        break;
    case 4: {
        int64_t q = (sel & 0x80) ? 0 : 1;
        rc = rsv_reserve_one(ctx, 7, tp, len, 1, 1, q, ttl);
        want = q == 0 ? RSV_EQUANTITY : tok_want ? tok_want
               : !ttl_ok(ttl) ? RSV_EQUANTITY : RSV_ECONN;
        break;
    }
    case 5:
        rc = rsv_reserve(ctx, 7, tp, len, cart1, ttl);
        want = tok_want ? tok_want : !ttl_ok(ttl) ? RSV_EQUANTITY : RSV_ECONN;
        break;
    case 6:
        rc = rsv_reserve(ctx, 7, tp, len, empty, ttl);
        want = tok_want ? tok_want : RSV_EEMPTY;
        break;
    default:
        rc = rsv_claim(NULL, 7, tp, len);
        check(rc == RSV_EINVAL, "NULL ctx: %d", rc);
        free(tok);
        return 0;
    }
    check_rc(ctx, rc, want);
    check_msg(ctx);
    check(rsv_errcode(ctx) == rc, "errcode %d, rc %d", rsv_errcode(ctx), rc);
    free(tok);
    return 0;
}
