/*
 * migrate_redis_store.h - the old store of examples/migrate_redis.c, as
 * the source articles had it: holds as Redis counters (DECRBY/INCRBY),
 * the ledger of sold units in a MariaDB table written after Redis said
 * yes.  Shared by the example and the migration's benchmark
 * (tests/bench/migload.c), which must measure the same old store.
 *
 *   stock:SHOP:ITEM:LOC   units left (DECRBY on reserve; a result below
 *                         0 is given back with INCRBY and refused)
 *   hold:SHOP:TOKEN       a hash: item, loc, qty, state (held, claimed,
 *                         released)
 *   legacy_sold           a MariaDB table (shop_id, item_id, location_id,
 *                         sold): a claim adds the units there (two writes,
 *                         not atomic: the reason to migrate)
 */
#ifndef MIGRATE_REDIS_STORE_H
#define MIGRATE_REDIS_STORE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis.h>
#include <mysql.h>

/* One buyer's old store: called on the buyer's thread and on its
 * handle's (stage primary), hence the lock. */
typedef struct old_store {
    pthread_mutex_t mu;
    redisContext *r;
    MYSQL *ledger;
} old_store;

/* An rsv_legacy_fn (reserve/migrate.h); user is an old_store. */
int old_store_fn(void *user, uint32_t op, uint64_t shop_id, const void *token,
                 size_t len, uint64_t item, uint64_t loc, int64_t qty,
                 int64_t ttl_ms);

#endif /* MIGRATE_REDIS_STORE_H */
