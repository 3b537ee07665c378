/*
 * check_entrypoints.c - every entry point of an operation answers bad
 * input as its single call does.
 *
 * Each bad input (every row of docs/bad-input.md that a checkout call can
 * get, and more: zero, negative and extreme quantities, a TTL past the
 * limit, empty, over-long and NULL tokens, NUL bytes, NULL, empty and
 * over-long carts, a NULL output) goes to every form of its operation:
 * the single call, its non-blocking start, a batch entry (beside a good
 * entry, so the batch statement runs), the batcher and the batcher's
 * start.  Each must answer the code the argument check (lib/argcheck.c,
 * linked in alone) gives, or the single call's code where the server
 * answers; the single call and its non-blocking form the same message,
 * and a batch entry refused on its arguments that message too (seen by
 * the completion callback, after "batch entry N: ").  The batcher has no
 * per-call message: its code is compared.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <reserve/async.h>
#include <reserve/batch.h>

#include "testutil.h"
#include "../lib/internal.h"

enum { OP_ONE, OP_CART, OP_CLAIM, OP_RELEASE, OP_EXTEND, OP_STATUS };
static const int CALL_OF[] = {CALL_RESERVE_ONE, CALL_RESERVE, CALL_CLAIM,
                              CALL_RELEASE, CALL_EXTEND, CALL_STATUS};
static const char *const OP_NAME[] = {"reserve_one", "reserve", "claim",
                                      "release", "extend", "status"};
enum { CART_NONE, CART_NULL, CART_EMPTY, CART_OK, CART_BIG };

static const char NULS[] = "a\0b\0c";
static char LONG_TOKEN[RSV_TOKEN_MAX + 1]; /* NUL bytes, one too many */

typedef struct bad {
    const char *what;
    int op;
    const void *token; /* USE_OWN: a token of the case's own */
    size_t len;
    int64_t quantity;
    int cart;
    int64_t ttl_ms;
    int no_out;        /* status: status_out NULL */
    int server_code;   /* 0: the argument check answers; else the server's
                          (or the single call's own) code */
} bad;

#define USE_OWN ((const void *)1)

static const bad CASES[] = {
    {"quantity 0", OP_ONE, USE_OWN, 0, 0, 0, 0, 0, 0},
    {"quantity -1", OP_ONE, USE_OWN, 0, -1, 0, 0, 0, 0},
    {"quantity above the maximum", OP_ONE, USE_OWN, 0, RSV_QUANTITY_MAX + 1LL,
     0, 0, 0, 0},
    {"quantity INT64_MIN", OP_ONE, USE_OWN, 0, INT64_MIN, 0, 0, 0, 0},
    {"quantity INT64_MAX", OP_ONE, USE_OWN, 0, INT64_MAX, 0, 0, 0, 0},
    {"NULL token", OP_ONE, NULL, 3, 1, 0, 0, 0, 0},
    {"empty token", OP_ONE, "x", 0, 1, 0, 0, 0, 0},
    {"token of 129 bytes with NULs", OP_ONE, LONG_TOKEN, RSV_TOKEN_MAX + 1, 1,
     0, 0, 0, 0},
    {"TTL -1", OP_ONE, USE_OWN, 0, 1, 0, -1, 0, 0},
    {"TTL past 30 days", OP_ONE, USE_OWN, 0, 1, 0, RSV_TTL_MAX_MS + 1, 0, 0},
    {"TTL INT64_MIN", OP_ONE, USE_OWN, 0, 1, 0, INT64_MIN, 0, 0},
    {"quantity 0 and a NULL token", OP_ONE, NULL, 0, 0, 0, 0, 0, 0},
    {"unknown item", OP_ONE, USE_OWN, 0, 1, 0, 0, 0, RSV_ENOITEM},

    {"NULL cart", OP_CART, USE_OWN, 0, 0, CART_NULL, 0, 0, 0},
    {"NULL cart and NULL token", OP_CART, NULL, 0, 0, CART_NULL, 0, 0, 0},
    {"empty cart", OP_CART, USE_OWN, 0, 0, CART_EMPTY, 0, 0, 0},
    {"empty cart and empty token", OP_CART, "x", 0, 0, CART_EMPTY, 0, 0, 0},
    {"cart: NULL token", OP_CART, NULL, 1, 0, CART_OK, 0, 0, 0},
    {"cart: token of 129 bytes", OP_CART, LONG_TOKEN, RSV_TOKEN_MAX + 1, 0,
     CART_OK, 0, 0, 0},
    {"cart: TTL past 30 days", OP_CART, USE_OWN, 0, 0, CART_OK,
     RSV_TTL_MAX_MS + 1, 0, 0},
    {"cart: TTL -5", OP_CART, USE_OWN, 0, 0, CART_OK, -5, 0, 0},
    {"cart over its limit of pairs", OP_CART, USE_OWN, 0, 0, CART_BIG, 0, 0,
     RSV_ETOOBIG},

    {"claim: NULL token", OP_CLAIM, NULL, 4, 0, 0, 0, 0, 0},
    {"claim: empty token", OP_CLAIM, "x", 0, 0, 0, 0, 0, 0},
    {"claim: token of 129 bytes", OP_CLAIM, LONG_TOKEN, RSV_TOKEN_MAX + 1, 0,
     0, 0, 0, 0},
    {"claim: unknown token with NULs", OP_CLAIM, NULS, sizeof NULS, 0, 0, 0,
     0, RSV_ENOTFOUND},
    {"release: NULL token", OP_RELEASE, NULL, 4, 0, 0, 0, 0, 0},
    {"release: empty token", OP_RELEASE, "x", 0, 0, 0, 0, 0, 0},
    {"release: token of 129 bytes", OP_RELEASE, LONG_TOKEN, RSV_TOKEN_MAX + 1,
     0, 0, 0, 0, 0},
    {"release: unknown token with NULs", OP_RELEASE, NULS, sizeof NULS, 0, 0,
     0, 0, RSV_ENOTFOUND},
    {"extend: NULL token", OP_EXTEND, NULL, 4, 0, 0, 1000, 0, 0},
    {"extend: empty token", OP_EXTEND, "x", 0, 0, 0, 1000, 0, 0},
    {"extend: TTL -1", OP_EXTEND, USE_OWN, 0, 0, 0, -1, 0, 0},
    {"extend: TTL past 30 days", OP_EXTEND, USE_OWN, 0, 0, 0,
     RSV_TTL_MAX_MS + 1, 0, 0},
    {"status: NULL status_out", OP_STATUS, USE_OWN, 0, 0, 0, 0, 1, 0},
    {"status: NULL status_out and token", OP_STATUS, NULL, 0, 0, 0, 0, 1, 0},
    {"status: token of 129 bytes", OP_STATUS, LONG_TOKEN, RSV_TOKEN_MAX + 1,
     0, 0, 0, 0, 0},
};
enum { N_CASES = sizeof CASES / sizeof CASES[0] };

/* ---- what the completion callback saw of the bad entry ---- */
static struct {
    rsv_ctx *ctx;
    uint64_t shop;     /* the bad entry's shop; 0 = the whole batch's */
    int seen, code;
    char msg[512];
} cb;

static void on_call(void *user, uint32_t op, int code, uint64_t shop,
                    const void *token, size_t len, uint64_t us)
{
    (void)user, (void)op, (void)token, (void)len, (void)us;
    if (shop != cb.shop && shop != 0)
        return;
    cb.seen = 1;
    cb.code = code;
    snprintf(cb.msg, sizeof cb.msg, "%s", rsv_errmsg(cb.ctx));
}

/* ---- the arguments of one case ---- */
typedef struct built {
    char own[64];
    const void *token;
    size_t len;
    rsv_cart *cart;
    int32_t status;
    int32_t *out;
} built;

static rsv_cart *make_cart(int kind)
{
    if (kind == CART_NONE || kind == CART_NULL)
        return NULL;
    rsv_cart *c = NULL;
    ck_assert_int_eq(rsv_cart_new(&c), RSV_OK);
    uint64_t locs[2] = {1, 2};
    if (kind == CART_OK)
        ck_assert_int_eq(rsv_cart_add(c, 1, locs, 1, 1, 0), RSV_OK);
    if (kind == CART_BIG)
        for (int i = 0; i < RSV_CART_MAX_LINES; i++)
            ck_assert_int_eq(rsv_cart_add(c, (uint64_t)i + 1, locs, 2, 1, 0),
                             RSV_OK);
    return c;
}

/* A fresh token per form, so that no form sees another's checkout. */
static void build(built *b, const bad *c, int form)
{
    memset(b, 0, sizeof *b);
    snprintf(b->own, sizeof b->own, "ep-%d-%d", (int)(c - CASES), form);
    b->token = c->token == USE_OWN ? b->own : c->token;
    b->len = c->token == USE_OWN ? strlen(b->own) : c->len;
    b->cart = make_cart(c->cart);
    b->out = c->no_out ? NULL : &b->status;
}

static int nb_wait(rsv_ctx *ctx, int rc)
{
    while (rc == RSV_PENDING) {
        struct pollfd p = {rsv_async_fd(ctx), POLLIN, 0};
        ck_assert_int_eq(poll(&p, 1, 60000), 1);
        rc = rsv_cont(ctx);
    }
    return rc;
}

static int batcher_wait(rsv_batcher *bt, int rc, rsv_batcher_call *call)
{
    if (rc != RSV_PENDING) {
        ck_assert_ptr_null(call);
        return rc;
    }
    for (;;) {
        struct pollfd p = {rsv_batcher_fd(bt), POLLIN, 0};
        ck_assert_int_eq(poll(&p, 1, 60000), 1);
        rsv_batcher_call *done = NULL;
        int code = 0;
        if (rsv_batcher_next_done(bt, &done, &code) == RSV_OK) {
            ck_assert(done == call);
            rsv_batcher_call_free(done);
            return code;
        }
    }
}

static int single(rsv_ctx *ctx, uint64_t shop, const bad *c, built *b)
{
    switch (c->op) {
    case OP_ONE:
        return rsv_reserve_one(ctx, shop, b->token, b->len,
                               c->server_code ? 999 : 1, 1, c->quantity,
                               c->ttl_ms);
    case OP_CART:
        return rsv_reserve(ctx, shop, b->token, b->len, b->cart, c->ttl_ms);
    case OP_CLAIM:
        return rsv_claim(ctx, shop, b->token, b->len);
    case OP_RELEASE:
        return rsv_release(ctx, shop, b->token, b->len);
    case OP_EXTEND:
        return rsv_extend(ctx, shop, b->token, b->len, c->ttl_ms);
    default:
        return rsv_checkout_status(ctx, shop, b->token, b->len, b->out, NULL,
                                   NULL);
    }
}

static int nonblocking(rsv_ctx *ctx, uint64_t shop, const bad *c, built *b)
{
    int rc;
    switch (c->op) {
    case OP_ONE:
        rc = rsv_reserve_one_start(ctx, shop, b->token, b->len,
                                   c->server_code ? 999 : 1, 1, c->quantity,
                                   c->ttl_ms);
        break;
    case OP_CART:
        rc = rsv_reserve_start(ctx, shop, b->token, b->len, b->cart,
                               c->ttl_ms);
        break;
    case OP_CLAIM:
        rc = rsv_claim_start(ctx, shop, b->token, b->len);
        break;
    case OP_RELEASE:
        rc = rsv_release_start(ctx, shop, b->token, b->len);
        break;
    case OP_EXTEND:
        rc = rsv_extend_start(ctx, shop, b->token, b->len, c->ttl_ms);
        break;
    default:
        rc = rsv_checkout_status_start(ctx, shop, b->token, b->len, b->out,
                                       NULL, NULL);
        break;
    }
    /* a bad argument is answered at once, never RSV_PENDING */
    if (!c->server_code)
        ck_assert_int_ne(rc, RSV_PENDING);
    return nb_wait(ctx, rc);
}

/* Entry 0 the bad one (in bad_shop), entry 1 a good one in good_shop;
 * -1 for the operations without a batch form. */
static int batched(rsv_ctx *ctx, uint64_t bad_shop, uint64_t good_shop,
                   const bad *c, built *b, int form)
{
    char good_tok[64];
    snprintf(good_tok, sizeof good_tok, "ep-good-%d-%d", (int)(c - CASES),
             form);
    uint64_t shops[2] = {bad_shop, good_shop};
    const void *toks[2] = {b->token, good_tok};
    size_t lens[2] = {b->len, strlen(good_tok)};
    int res[2] = {99, 99};
    switch (c->op) {
    case OP_ONE: {
        uint64_t items[2] = {c->server_code ? 999 : 1, 1}, locs[2] = {1, 1};
        int64_t qty[2] = {c->quantity, 1};
        rsv_reserve_batch(ctx, 2, shops, toks, lens, items, locs, qty,
                          c->ttl_ms, res);
        break;
    }
    case OP_CART: {
        rsv_cart *good = make_cart(CART_OK);
        rsv_cart *carts[2] = {b->cart, good};
        rsv_reserve_cart_batch(ctx, 2, shops, toks, lens, carts, c->ttl_ms,
                               res);
        rsv_cart_free(good);
        break;
    }
    case OP_CLAIM:
        rsv_claim_batch(ctx, 2, shops, toks, lens, res);
        break;
    case OP_RELEASE:
        rsv_release_batch(ctx, 2, shops, toks, lens, res);
        break;
    default:
        return -1;
    }
    return res[0];
}

static int batcher(rsv_batcher *bt, uint64_t shop, const bad *c, built *b,
                   int start)
{
    rsv_batcher_call *call = NULL;
    uint64_t item = c->server_code ? 999 : 1;
    int rc;
    switch (c->op) {
    case OP_ONE:
        if (!start)
            return rsv_batcher_reserve_one(bt, shop, b->token, b->len, item,
                                           1, c->quantity, c->ttl_ms);
        rc = rsv_batcher_reserve_one_start(bt, shop, b->token, b->len, item,
                                           1, c->quantity, c->ttl_ms, &call);
        break;
    case OP_CART:
        if (!start)
            return rsv_batcher_reserve(bt, shop, b->token, b->len, b->cart,
                                       c->ttl_ms);
        rc = rsv_batcher_reserve_start(bt, shop, b->token, b->len, b->cart,
                                       c->ttl_ms, &call);
        break;
    case OP_CLAIM:
        if (!start)
            return rsv_batcher_claim(bt, shop, b->token, b->len);
        rc = rsv_batcher_claim_start(bt, shop, b->token, b->len, &call);
        break;
    case OP_RELEASE:
        if (!start)
            return rsv_batcher_release(bt, shop, b->token, b->len);
        rc = rsv_batcher_release_start(bt, shop, b->token, b->len, &call);
        break;
    default:
        return -1;
    }
    if (!c->server_code)
        ck_assert_int_ne(rc, RSV_PENDING);
    return batcher_wait(bt, rc, call);
}

START_TEST(every_entry_point_answers_alike)
{
    const bad *c = &CASES[_i];
    memset(LONG_TOKEN, 0, sizeof LONG_TOKEN);
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 1000);
    uint64_t bad_shop = tu_shop();
    char dsn[1024];
    tu_dsn(dsn, sizeof dsn);
    rsv_batcher *bt = NULL;
    ck_assert_int_eq(rsv_batcher_open(&bt, dsn, NULL, 1), RSV_OK);

    /* what the check says, where it decides */
    built b;
    build(&b, c, 0);
    call_args a = {.kind = CALL_OF[c->op], .token = b.token,
                   .token_len = b.len, .quantity = c->quantity,
                   .cart = (const struct rsv_cart *)b.cart,
                   .ttl_ms = c->ttl_ms, .out = b.out};
    char want_msg[ARG_MSG_MAX];
    int want = call_check(&a, want_msg);
    if (c->server_code) {
        ck_assert_msg(want == RSV_OK, "%s: the check refuses it: %s", c->what,
                      want_msg);
        want = c->server_code;
    } else {
        ck_assert_msg(want != RSV_OK, "%s: the check passes it", c->what);
    }

    int rc = single(f.ctx, bad_shop, c, &b);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", rsv_errmsg(f.ctx));
    ck_assert_msg(rc == want, "%s: %s: single call %s, check %s", c->what,
                  OP_NAME[c->op], rsv_code_name(rc), rsv_code_name(want));
    if (!c->server_code)
        ck_assert_msg(strcmp(msg, want_msg) == 0,
                      "%s: single call says \"%s\", the check \"%s\"",
                      c->what, msg, want_msg);
    rsv_cart_free(b.cart);

    build(&b, c, 1);
    rc = nonblocking(f.ctx, bad_shop, c, &b);
    ck_assert_msg(rc == want, "%s: non-blocking %s, single %s", c->what,
                  rsv_code_name(rc), rsv_code_name(want));
    ck_assert_msg(strcmp(rsv_errmsg(f.ctx), msg) == 0,
                  "%s: non-blocking says \"%s\", single \"%s\"", c->what,
                  rsv_errmsg(f.ctx), msg);
    rsv_cart_free(b.cart);

    build(&b, c, 2);
    cb.ctx = f.ctx;
    cb.shop = bad_shop;
    cb.seen = 0;
    TU_OK(f.ctx, rsv_set_callback(f.ctx, on_call, NULL));
    rc = batched(f.ctx, bad_shop, f.shop, c, &b, 2);
    TU_OK(f.ctx, rsv_set_callback(f.ctx, NULL, NULL));
    if (rc != -1) {
        ck_assert_msg(rc == want, "%s: batch entry %s, single %s", c->what,
                      rsv_code_name(rc), rsv_code_name(want));
        ck_assert_msg(cb.seen && cb.code == want, "%s: the callback saw %s",
                      c->what, cb.seen ? rsv_code_name(cb.code) : "nothing");
        if (!c->server_code) {
            const char *m = cb.msg, *prefix = "batch entry 0: ";
            if (strncmp(m, prefix, strlen(prefix)) == 0)
                m += strlen(prefix);
            ck_assert_msg(strcmp(m, msg) == 0,
                          "%s: batch entry says \"%s\", single \"%s\"",
                          c->what, cb.msg, msg);
        }
    }
    rsv_cart_free(b.cart);

    for (int start = 0; start < 2; start++) {
        build(&b, c, 3 + start);
        rc = batcher(bt, bad_shop, c, &b, start);
        if (rc != -1)
            ck_assert_msg(rc == want, "%s: batcher%s %s, single %s", c->what,
                          start ? " start" : "", rsv_code_name(rc),
                          rsv_code_name(want));
        rsv_cart_free(b.cart);
    }

    rsv_batcher_close(bt);
    tu_fix_close(&f);
}
END_TEST

int main(void)
{
    tu_db_create("entrypoints");
    Suite *s = suite_create("entrypoints");
    tu_add_loop(s, "every_entry_point_answers_alike",
                every_entry_point_answers_alike, 0, N_CASES);
    int rc = tu_run(s);
    tu_db_drop();
    return rc;
}
