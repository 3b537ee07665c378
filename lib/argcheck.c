/*
 * argcheck.c - the checks of a call's arguments made before anything is
 * sent, one per kind of call, in the order the single call makes them.
 *
 * The single, batch, batcher and non-blocking forms of an operation all
 * ask call_check, so each answers a bad argument with the same code and
 * message (tests/check_entrypoints.c feeds every entry point the same bad
 * inputs).  Pure: it reads only its arguments and calls nothing of the
 * library, so the test links this file alone.
 */
#include <stdio.h>

#include "internal.h"

static int say(char *msg, int code, const char *text)
{
    snprintf(msg, ARG_MSG_MAX, "%s", text);
    return code;
}

int token_check(const void *token, size_t len, char *msg)
{
    if (!token)
        return say(msg, RSV_EINVAL, "token is NULL");
    if (len == 0 || len > RSV_TOKEN_MAX) {
        snprintf(msg, ARG_MSG_MAX,
                 "checkout token must be 1..%d bytes, not %zu",
                 RSV_TOKEN_MAX, len);
        return RSV_ETOKEN;
    }
    return RSV_OK;
}

int ttl_check(int64_t ttl_ms, char *msg)
{
    if (ttl_ms < 0 || ttl_ms > RSV_TTL_MAX_MS) {
        snprintf(msg, ARG_MSG_MAX,
                 "ttl_ms must be 1..%lld (30 days) or 0 for the default, "
                 "not %lld", RSV_TTL_MAX_MS, (long long)ttl_ms);
        return RSV_EQUANTITY;
    }
    return RSV_OK;
}

int call_check(const call_args *a, char *msg)
{
    int rc;
    msg[0] = '\0';
    switch (a->kind) {
    case CALL_RESERVE_ONE:
        if (a->quantity < 1 || a->quantity > RSV_QUANTITY_MAX) {
            snprintf(msg, ARG_MSG_MAX, "quantity must be 1..%d, not %lld",
                     RSV_QUANTITY_MAX, (long long)a->quantity);
            return RSV_EQUANTITY;
        }
        if ((rc = token_check(a->token, a->token_len, msg)))
            return rc;
        return ttl_check(a->ttl_ms, msg);
    case CALL_RESERVE:
        if (!a->cart)
            return say(msg, RSV_EINVAL, "cart is NULL");
        if ((rc = token_check(a->token, a->token_len, msg)))
            return rc;
        if (a->cart->n == 0)
            return say(msg, RSV_EEMPTY, "the cart has no lines");
        return ttl_check(a->ttl_ms, msg);
    case CALL_EXTEND:
        if ((rc = token_check(a->token, a->token_len, msg)))
            return rc;
        return ttl_check(a->ttl_ms, msg);
    case CALL_STATUS:
        if (!a->out)
            return say(msg, RSV_EINVAL, "status_out is NULL");
        return token_check(a->token, a->token_len, msg);
    default: /* CALL_CLAIM, CALL_RELEASE */
        return token_check(a->token, a->token_len, msg);
    }
}

void cart_one_line(rsv_cart *cart, cart_line *line, uint64_t item,
                   uint64_t *loc, int64_t quantity, int64_t *alloc)
{
    line->item = item;
    line->locs = loc;
    line->n_locs = 1;
    line->qty = quantity;
    line->alloc = alloc;
    cart->lines = line;
    cart->n = cart->cap = 1;
    cart->failed_line = (size_t)-1;
}
