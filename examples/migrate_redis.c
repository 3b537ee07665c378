/*
 * migrate_redis.c - a shop that sells through the design libreserve
 * replaces (holds as Redis counters, DECRBY/INCRBY, the ledger in
 * MariaDB) moving to libreserve under load, through the migration handle
 * (reserve/migrate.h): the buyers' checkout calls one handle, and
 * rsv-admin migrate moves the shop from stage to stage while they buy.
 *
 * The old store (migrate_redis_store.c), as the source articles had it:
 *   stock:SHOP:ITEM:LOC   units left (DECRBY on reserve; a result below
 *                         0 is given back with INCRBY and refused)
 *   hold:SHOP:TOKEN       a hash: item, loc, qty, state (held, claimed,
 *                         released)
 *   legacy_sold           a MariaDB table: a claim adds the units there
 *                         after Redis said yes (two writes, not atomic:
 *                         the reason to migrate)
 *
 * Usage: migrate_redis DSN REDIS_PORT SHOP CONTEXTS STATE_DIR ID
 *        migrate_redis check REDIS_PORT SHOP
 * Runs CONTEXTS buyers (a thread, a context and a handle each) until
 * STATE_DIR/stop exists; each buyer reserves one unit, then claims it (or
 * releases one in five).  Items 1..5 have stock to spare; items 7 and 8
 * are where the test planted drift between the stores.  A thread beside
 * each buyer writes STATE_DIR/stage.ID.N, one line per stage its handle
 * followed ("STAGE UNIX_MS"), so the test can measure how fast a change
 * arrives.
 * At the end each buyer checks its own checkouts in both stores and
 * prints one line of figures; the exit status is 1 if any check failed.
 */
#include <hiredis.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mysql.h>

#include <reserve.h>
#include <reserve/migrate.h>

#include "migrate_redis_store.h"

#define MAX_CKO 200000

static const char *dsn, *state_dir;
static int redis_port, proc_id;
static uint64_t shop;

/* One checkout as the buyer saw it. */
typedef struct cko {
    uint64_t item;
    int32_t st_res, st_settle; /* the stage before each call */
    int32_t st_settle_after;   /* and after the claim or release */
    int rc_res, rc_settle, claim;
} cko;

typedef struct buyer {
    int n;
    pthread_t t;
    int failed;
    rsv_migration *m; /* for the watcher, once open */
    int done;
    pthread_mutex_t mu;
} buyer;

static uint64_t unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int stopped(void)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/stop", state_dir);
    return access(p, F_OK) == 0;
}

static int stage_seen(const char *path, int32_t st)
{
    FILE *f = fopen(path, "a");
    if (!f)
        return -1;
    fprintf(f, "%d %" PRIu64 "\n", (int)st, unix_ms());
    fclose(f);
    return 0;
}

/* Writes the stage the buyer's handle follows each time it changes:
 * polled from a thread of its own (rsv_migrate_stage may be called from
 * any thread), so a buyer waiting inside a call does not delay it. */
static void *watch(void *arg)
{
    buyer *b = arg;
    char spath[4096];
    snprintf(spath, sizeof spath, "%s/stage.%d.%d", state_dir, proc_id, b->n);
    int32_t seen = -1;
    for (;;) {
        pthread_mutex_lock(&b->mu);
        int done = b->done;
        int32_t st = -1;
        if (!done)
            rsv_migrate_stage(b->m, shop, &st);
        pthread_mutex_unlock(&b->mu);
        if (done)
            return NULL;
        if (st != seen) {
            stage_seen(spath, st);
            seen = st;
        }
        struct timespec pause = {0, 5000000};
        nanosleep(&pause, NULL);
    }
}

static const char *rs(int rc) { return rsv_code_name(rc) ? rsv_code_name(rc) : "?"; }

static void *buy(void *arg)
{
    buyer *b = arg;
    rsv_ctx *ctx = NULL;
    rsv_migration *m = NULL;
    old_store o;
    pthread_mutex_init(&o.mu, NULL);
    o.r = redisConnect("127.0.0.1", redis_port);
    o.ledger = NULL;
    cko *ck = calloc(MAX_CKO, sizeof *ck);
    int rc = rsv_open_dsn(&ctx, dsn, NULL);
    if (rc == RSV_OK)
        rc = rsv_migrate_open(&m, ctx, dsn, 0);
    /* the old store's ledger writes go on a connection of their own */
    rsv_ctx *lctx = NULL;
    if (rc == RSV_OK && (rc = rsv_open_dsn(&lctx, dsn, NULL)) == RSV_OK)
        o.ledger = rsv_connection(lctx);
    if (rc != RSV_OK || !o.r || o.r->err || !ck) {
        fprintf(stderr, "buyer %d.%d: cannot start: %s %s\n", proc_id, b->n,
                rs(rc), ctx ? rsv_errmsg(ctx) : "");
        b->failed = 1;
        return NULL;
    }
    rsv_migrate_set_legacy(m, old_store_fn, &o);
    b->m = m;
    pthread_t watcher;
    pthread_create(&watcher, NULL, watch, b);
    unsigned seed = (unsigned)(proc_id * 1000 + b->n);
    int n = 0;
    while (!stopped() && n < MAX_CKO) {
        int32_t st;
        rsv_migrate_stage(m, shop, &st);
        static const uint64_t items[] = {1, 2, 3, 4, 5, 1, 2, 3, 7, 8};
        cko *c = &ck[n];
        char tok[64];
        int tl = snprintf(tok, sizeof tok, "p%dt%dn%d", proc_id, b->n, n);
        c->item = items[rand_r(&seed) % 10];
        c->st_res = st;
        c->rc_res = rsv_migrate_reserve_one(m, shop, tok, (size_t)tl, c->item,
                                            1, 1, 1000);
        if (c->rc_res == RSV_OK) {
            rsv_migrate_stage(m, shop, &c->st_settle);
            c->claim = rand_r(&seed) % 5 != 0;
            c->rc_settle = c->claim ? rsv_migrate_claim(m, shop, tok, (size_t)tl)
                                    : rsv_migrate_release(m, shop, tok,
                                                          (size_t)tl);
            rsv_migrate_stage(m, shop, &c->st_settle_after);
        }
        n++;
        struct timespec pause = {0, 2000000};
        nanosleep(&pause, NULL);
    }
    rsv_migrate_drain(m, 60000);
    pthread_mutex_lock(&b->mu);
    b->done = 1;
    pthread_mutex_unlock(&b->mu);
    pthread_join(watcher, NULL);

    /* Every acknowledged checkout, in the stores that should have it. */
    int bad = 0, res_ok = 0, settled = 0, in_both = 0;
    for (int i = 0; i < n; i++) {
        cko *c = &ck[i];
        if (c->rc_res != RSV_OK)
            continue;
        res_ok++;
        if (c->item >= 7) /* planted drift: either store may refuse */
            continue;
        char tok[64];
        int tl = snprintf(tok, sizeof tok, "p%dt%dn%d", proc_id, b->n, i);
        if (c->rc_settle != RSV_OK) {
            fprintf(stderr, "buyer %d.%d: %s: reserved (stage %d), then %s "
                    "answered %s (stage %d)\n", proc_id, b->n, tok,
                    (int)c->st_res, c->claim ? "claim" : "release",
                    rs(c->rc_settle), (int)c->st_settle);
            bad++;
            continue;
        }
        settled++;
        int want = c->claim ? RSV_STATUS_CLAIMED : RSV_STATUS_RELEASED;
        int in_new = 0, in_old = 0;
        if (c->st_res >= RSV_STAGE_SHADOW) {
            int32_t s = 0;
            int r2 = rsv_checkout_status(ctx, shop, tok, (size_t)tl, &s, NULL,
                                         NULL);
            in_new = r2 == RSV_OK && s == want;
            if (!in_new) {
                fprintf(stderr, "buyer %d.%d: %s (stages %d, %d) is %s/%d in "
                        "libreserve, not %d\n", proc_id, b->n, tok,
                        (int)c->st_res, (int)c->st_settle, rs(r2), (int)s,
                        want);
                bad++;
            }
        }
        /* made while the old store was kept current (a stage read on
         * both sides of the call: it did not change in between) */
        if (c->st_settle <= RSV_STAGE_PRIMARY &&
            c->st_settle == c->st_settle_after) {
            redisReply *x = redisCommand(o.r, "HGET hold:%" PRIu64 ":%b state",
                                         shop, tok, (size_t)tl);
            in_old = x && x->type == REDIS_REPLY_STRING &&
                     strcmp(x->str, c->claim ? "claimed" : "released") == 0;
            if (!in_old) {
                fprintf(stderr, "buyer %d.%d: %s (stages %d, %d) is %s in "
                        "Redis\n", proc_id, b->n, tok, (int)c->st_res,
                        (int)c->st_settle,
                        x && x->type == REDIS_REPLY_STRING ? x->str : "absent");
                bad++;
            }
            freeReplyObject(x);
        }
        in_both += in_new && in_old;
    }
    uint64_t v[RSV_MIG_STAT_COUNT];
    for (uint32_t k = 0; k < RSV_MIG_STAT_COUNT; k++)
        rsv_migrate_stat(m, shop, k == RSV_MIG_STAGE_READ_FAILED, k, &v[k]);
    printf("buyer %d.%d: checkouts %d reserved %d settled %d in_both %d "
           "bad %d | both_accepted %" PRIu64 " both_refused %" PRIu64
           " old_refused_new_accepted %" PRIu64 " old_accepted_new_refused %"
           PRIu64 " new_failed %" PRIu64 " unknown %" PRIu64 " old_failed %"
           PRIu64 " offered %" PRIu64 " applied %" PRIu64 " dropped %" PRIu64
           " stage_read_failed %" PRIu64 "\n", proc_id, b->n, n, res_ok,
           settled, in_both, bad, v[0], v[1], v[2], v[3], v[4], v[5], v[6],
           v[7], v[8], v[9], v[10]);
    b->failed = bad > 0;
    rsv_migrate_close(m);
    rsv_close(ctx);
    rsv_close(lctx);
    redisFree(o.r);
    free(ck);
    return NULL;
}

/* migrate_redis check REDIS_PORT SHOP: the old store's own books, after
 * the run: for each stock key, initial:KEY (written by the test) = units
 * left + units of the holds held or claimed, and nothing below 0 (it
 * never sold a unit twice). */
static int check_old_store(int port, uint64_t shop_id)
{
    redisContext *r = redisConnect("127.0.0.1", port);
    if (!r || r->err)
        return 1;
    /* units per item out of the counter, from the holds */
    enum { ITEMS = 16 };
    long long taken[ITEMS] = {0};
    unsigned long long cursor = 0;
    int bad = 0;
    long long holds = 0;
    do {
        redisReply *x = redisCommand(r, "SCAN %llu MATCH hold:%" PRIu64
                                        ":* COUNT 1000", cursor, shop_id);
        if (!x || x->type != REDIS_REPLY_ARRAY || x->elements != 2)
            return 1;
        cursor = strtoull(x->element[0]->str, NULL, 10);
        redisReply *keys = x->element[1];
        for (size_t i = 0; i < keys->elements; i++) {
            redisReply *h = redisCommand(r, "HMGET %s item qty state",
                                         keys->element[i]->str);
            if (h && h->type == REDIS_REPLY_ARRAY && h->elements == 3 &&
                h->element[0]->type == REDIS_REPLY_STRING) {
                long item = atol(h->element[0]->str);
                if (item >= 0 && item < ITEMS &&
                    strcmp(h->element[2]->str, "released") != 0)
                    taken[item] += atoll(h->element[1]->str);
                holds++;
            }
            freeReplyObject(h);
        }
        freeReplyObject(x);
    } while (cursor != 0);
    for (int item = 0; item < ITEMS; item++) {
        redisReply *a = redisCommand(r, "GET initial:%" PRIu64 ":%d:1",
                                     shop_id, item);
        redisReply *b = redisCommand(r, "GET stock:%" PRIu64 ":%d:1", shop_id,
                                     item);
        if (a && a->type == REDIS_REPLY_STRING && b &&
            b->type == REDIS_REPLY_STRING) {
            long long init = atoll(a->str), left = atoll(b->str);
            int ok = left >= 0 && init == left + taken[item];
            printf("old store: item %d: initial %lld, left %lld, held or "
                   "claimed %lld%s\n", item, init, left, taken[item],
                   ok ? "" : "  <- WRONG");
            bad |= !ok;
        }
        freeReplyObject(a);
        freeReplyObject(b);
    }
    printf("old store: %lld holds\n", holds);
    redisFree(r);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "check") == 0)
        return check_old_store(atoi(argv[2]), strtoull(argv[3], NULL, 10));
    if (argc != 7) {
        fprintf(stderr, "usage: %s DSN REDIS_PORT SHOP CONTEXTS STATE_DIR "
                        "ID\n", argv[0]);
        return 2;
    }
    dsn = argv[1];
    redis_port = atoi(argv[2]);
    shop = strtoull(argv[3], NULL, 10);
    int nb = atoi(argv[4]);
    state_dir = argv[5];
    proc_id = atoi(argv[6]);
    if (nb < 1 || nb > 64)
        return 2;
    buyer *b = calloc((size_t)nb, sizeof *b);
    for (int i = 0; i < nb; i++) {
        b[i].n = i;
        pthread_mutex_init(&b[i].mu, NULL);
        pthread_create(&b[i].t, NULL, buy, &b[i]);
    }
    int failed = 0;
    for (int i = 0; i < nb; i++) {
        pthread_join(b[i].t, NULL);
        failed |= b[i].failed;
    }
    free(b);
    return failed;
}
