/*
 * migrate_redis_store.c - the old store of examples/migrate_redis.c
 * (Redis counters, the ledger in MariaDB): see migrate_redis_store.h.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <reserve.h>

#include "migrate_redis_store.h"

static long long reply_int(redisReply *x)
{
    return x && x->type == REDIS_REPLY_INTEGER ? x->integer : -1;
}

static int old_reserve(old_store *o, uint64_t shop, const char *tok,
                       size_t len, uint64_t item, uint64_t loc, int64_t qty)
{
    redisReply *x = redisCommand(o->r, "HGET hold:%" PRIu64 ":%b state",
                                 shop, tok, len);
    if (!x)
        return RSV_ECONN;
    int known = x->type == REDIS_REPLY_STRING;
    int claimed = known && strcmp(x->str, "claimed") == 0;
    freeReplyObject(x);
    if (claimed)
        return RSV_ECLAIMED;
    if (known)
        return RSV_OK; /* a repeated reserve */
    x = redisCommand(o->r, "DECRBY stock:%" PRIu64 ":%" PRIu64 ":%" PRIu64
                           " %lld", shop, item, loc, (long long)qty);
    long long left = reply_int(x);
    freeReplyObject(x);
    if (left < 0) {
        x = redisCommand(o->r, "INCRBY stock:%" PRIu64 ":%" PRIu64 ":%" PRIu64
                               " %lld", shop, item, loc, (long long)qty);
        freeReplyObject(x);
        return RSV_EOUTOFSTOCK;
    }
    x = redisCommand(o->r, "HSET hold:%" PRIu64 ":%b item %" PRIu64
                           " loc %" PRIu64 " qty %lld state held", shop, tok,
                     len, item, loc, (long long)qty);
    freeReplyObject(x);
    return RSV_OK;
}

static int old_settle(old_store *o, uint64_t shop, const char *tok,
                      size_t len, int claim)
{
    redisReply *x = redisCommand(o->r, "HMGET hold:%" PRIu64 ":%b state item "
                                       "loc qty", shop, tok, len);
    if (!x || x->type != REDIS_REPLY_ARRAY || x->elements != 4) {
        freeReplyObject(x);
        return RSV_ECONN;
    }
    if (x->element[0]->type != REDIS_REPLY_STRING) {
        freeReplyObject(x);
        return RSV_ENOTFOUND;
    }
    char state[16], item[24], loc[24], qty[24];
    snprintf(state, sizeof state, "%s", x->element[0]->str);
    snprintf(item, sizeof item, "%s", x->element[1]->str);
    snprintf(loc, sizeof loc, "%s", x->element[2]->str);
    snprintf(qty, sizeof qty, "%s", x->element[3]->str);
    freeReplyObject(x);
    if (strcmp(state, "claimed") == 0)
        return RSV_ECLAIMED;
    if (strcmp(state, "released") == 0)
        return claim ? RSV_ERELEASED : RSV_OK;
    x = redisCommand(o->r, "HSET hold:%" PRIu64 ":%b state %s", shop, tok, len,
                     claim ? "claimed" : "released");
    freeReplyObject(x);
    if (claim) {
        char q[256];
        snprintf(q, sizeof q, "INSERT INTO legacy_sold (shop_id, item_id, "
                 "location_id, sold) VALUES (%" PRIu64 ", %s, %s, %s) ON "
                 "DUPLICATE KEY UPDATE sold = sold + VALUES(sold)", shop, item,
                 loc, qty);
        if (mysql_query(o->ledger, q) != 0)
            return RSV_EDB;
    } else {
        x = redisCommand(o->r, "INCRBY stock:%" PRIu64 ":%s:%s %s", shop, item,
                         loc, qty);
        freeReplyObject(x);
    }
    return RSV_OK;
}

int old_store_fn(void *user, uint32_t op, uint64_t shop_id, const void *token,
                 size_t len, uint64_t item, uint64_t loc, int64_t qty,
                 int64_t ttl_ms)
{
    (void)ttl_ms; /* the buyers claim or release at once */
    old_store *o = user;
    pthread_mutex_lock(&o->mu);
    int rc = op == RSV_OP_RESERVE
                 ? old_reserve(o, shop_id, token, len, item, loc, qty)
                 : old_settle(o, shop_id, token, len, op == RSV_OP_CLAIM);
    pthread_mutex_unlock(&o->mu);
    return rc;
}
