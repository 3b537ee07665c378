/*
 * argcheck.c - the checks of a call's arguments made before anything is
 * sent: the same for the single, batch, batcher and non-blocking forms of
 * each operation.
 */
#include "internal.h"

int check_token(rsv_ctx *ctx, const void *token, size_t len)
{
    if (!token)
        return ctx_fail(ctx, RSV_EINVAL, "token is NULL");
    if (len == 0 || len > RSV_TOKEN_MAX)
        return ctx_fail(ctx, RSV_ETOKEN,
                        "checkout token must be 1..%d bytes, not %zu",
                        RSV_TOKEN_MAX, len);
    return RSV_OK;
}

int check_ttl(rsv_ctx *ctx, int64_t *ttl_ms)
{
    if (*ttl_ms == 0)
        *ttl_ms = ctx->opts.hold_ttl_ms;
    if (*ttl_ms < 0 || *ttl_ms > 30LL * 24 * 3600 * 1000)
        return ctx_fail(ctx, RSV_EQUANTITY,
                        "ttl_ms must be 1..%lld (30 days) or 0 for the "
                        "default, not %lld", 30LL * 24 * 3600 * 1000,
                        (long long)*ttl_ms);
    return RSV_OK;
}
