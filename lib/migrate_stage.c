/*
 * migrate_stage.c - the migration handle's view of the migration tables:
 * the shops it knows (their stage and counters, in memory) and the
 * statements its own thread sends on its own connection: the stage read
 * (rows changed since the last read, one statement), the counters added
 * to rsv_migration_counts, the mismatch samples written to their ring,
 * and the shops marked for a compare; and the counters' names, which
 * those tables, rsv_migrate_prometheus() and rsv-admin all use
 * (rsv_migrate_class_name).
 *
 * These are plain text statements, not the context's prepared ones: each
 * runs at most once per refresh interval, and they touch no table the
 * library's own statements know.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "migrate.h"

#define MIG_TAG "/* conn_tag:migrate */ "

/* Stored in rsv_migration_counts and rsv_migration_mismatch, so a name
 * once released never changes: dashboards and alerts match on it. */
static const char *const class_names[RSV_MIG_STAT_COUNT] = {
    [RSV_MIG_BOTH_ACCEPTED] = "both_accepted",
    [RSV_MIG_BOTH_REFUSED] = "both_refused",
    [RSV_MIG_OLD_REFUSED_NEW_ACCEPTED] = "old_refused_new_accepted",
    [RSV_MIG_OLD_ACCEPTED_NEW_REFUSED] = "old_accepted_new_refused",
    [RSV_MIG_NEW_FAILED] = "new_failed",
    [RSV_MIG_UNKNOWN] = "unknown",
    [RSV_MIG_OLD_FAILED] = "old_failed",
    [RSV_MIG_OFFERED] = "offered",
    [RSV_MIG_APPLIED] = "applied",
    [RSV_MIG_DROPPED] = "dropped",
    [RSV_MIG_STAGE_READ_FAILED] = "stage_read_failed",
};

const char *rsv_migrate_class_name(uint32_t stat)
{
    return stat < RSV_MIG_STAT_COUNT ? class_names[stat] : NULL;
}

static size_t slot_of(uint64_t shop, size_t cap)
{
    uint64_t h = shop * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 17) & (cap - 1);
}

mig_shop *mig_shop_find(const mig_map *map, uint64_t shop)
{
    if (!map->cap)
        return NULL;
    for (size_t i = slot_of(shop, map->cap);; i = (i + 1) & (map->cap - 1)) {
        if (!map->v[i].used)
            return NULL;
        if (map->v[i].shop == shop)
            return &map->v[i];
    }
}

static int map_grow(mig_map *map)
{
    size_t cap = map->cap ? map->cap * 2 : 64;
    mig_shop *v = calloc(cap, sizeof *v);
    if (!v)
        return -1;
    for (size_t i = 0; i < map->cap; i++) {
        if (!map->v[i].used)
            continue;
        size_t j = slot_of(map->v[i].shop, cap);
        while (v[j].used)
            j = (j + 1) & (cap - 1);
        v[j] = map->v[i];
    }
    free(map->v);
    map->v = v;
    map->cap = cap;
    return 0;
}

mig_shop *mig_shop_get(mig_map *map, uint64_t shop)
{
    mig_shop *s = mig_shop_find(map, shop);
    if (s)
        return s;
    if ((map->n + 1) * 2 > map->cap && map_grow(map) != 0)
        return NULL;
    size_t i = slot_of(shop, map->cap);
    while (map->v[i].used)
        i = (i + 1) & (map->cap - 1);
    s = &map->v[i];
    memset(s, 0, sizeof *s);
    s->used = 1;
    s->shop = shop;
    map->n++;
    return s;
}

void mig_map_free(mig_map *map)
{
    free(map->v);
    memset(map, 0, sizeof *map);
}

/* A failed statement of ours: the code, the message in the handle's
 * context, and a reconnect when the connection is gone (the next
 * interval then starts on a new one). */
static int mig_db_fail(rsv_migration *m, const char *what)
{
    MYSQL *c = rsv_connection(m->wctx);
    unsigned int err = c ? mysql_errno(c) : 0;
    int rc = err == 1146 ? RSV_ESCHEMA
                         : ctx_db_fail(m->wctx, err, c ? mysql_error(c) : "",
                                       what);
    if (rc == RSV_ESCHEMA)
        ctx_fail(m->wctx, RSV_ESCHEMA,
                 "the migration tables are missing (%s): load sql/schema.sql "
                 "(rsv-admin schema upgrade)", c ? mysql_error(c) : "");
    if (is_conn_errno(err))
        (void)rsv_reconnect(m->wctx);
    return rc;
}

static int run(rsv_migration *m, const char *q, const char *what)
{
    MYSQL *c = rsv_connection(m->wctx);
    if (!c || mysql_query(c, q) != 0)
        return mig_db_fail(m, what);
    /* drain: the next statement must not find a result left over */
    MYSQL_RES *r = mysql_store_result(c);
    mysql_free_result(r);
    return RSV_OK;
}

int mig_stage_read(rsv_migration *m)
{
    char q[256];
    pthread_mutex_lock(&m->mu);
    uint64_t since = m->stage_version;
    pthread_mutex_unlock(&m->mu);
    snprintf(q, sizeof q,
             "SELECT " MIG_TAG "shop_id, stage, version FROM "
             "rsv_migration_stage WHERE version > %" PRIu64
             " ORDER BY version", since);
    MYSQL *c = rsv_connection(m->wctx);
    if (!c || mysql_query(c, q) != 0)
        return mig_db_fail(m, "reading the migration stages");
    MYSQL_RES *r = mysql_store_result(c);
    if (!r)
        return mig_db_fail(m, "reading the migration stages");
    int rc = RSV_OK;
    MYSQL_ROW row;
    pthread_mutex_lock(&m->mu);
    while ((row = mysql_fetch_row(r)) != NULL) {
        uint64_t shop = strtoull(row[0], NULL, 10);
        uint64_t version = strtoull(row[2], NULL, 10);
        mig_shop *s = mig_shop_get(&m->shops, shop);
        if (!s) {
            /* read again from here next time */
            rc = ctx_fail(m->wctx, RSV_ENOMEM, "out of memory");
            break;
        }
        s->stage = (int32_t)strtol(row[1], NULL, 10);
        if (version > m->stage_version)
            m->stage_version = version;
    }
    pthread_mutex_unlock(&m->mu);
    mysql_free_result(r);
    return rc;
}

static void hex(char *out, const unsigned char *p, size_t n)
{
    static const char d[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[p[i] >> 4];
        out[2 * i + 1] = d[p[i] & 15];
    }
    out[2 * n] = 0;
}

typedef struct delta {
    uint64_t shop;
    int stat;
    uint64_t n;
} delta;

void mig_flush(rsv_migration *m)
{
    /* Take what is to be written under the lock, write it without. */
    delta *d = NULL;
    size_t nd = 0, cap = 0;
    uint64_t *marks = NULL;
    size_t nmarks = 0;
    mig_sample samples[MIG_SAMPLES];
    size_t ns;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->shops.cap; i++) {
        mig_shop *s = &m->shops.v[i];
        if (!s->used)
            continue;
        for (int k = 0; k < RSV_MIG_STAT_COUNT; k++) {
            if (s->count[k] == s->flushed[k])
                continue;
            if (nd == cap) {
                size_t nc = cap ? cap * 2 : 64;
                delta *nd_ = realloc(d, nc * sizeof *d);
                if (!nd_)
                    break;
                d = nd_;
                cap = nc;
            }
            if (nd < cap) {
                d[nd++] = (delta){s->shop, k, s->count[k] - s->flushed[k]};
                s->flushed[k] = s->count[k];
            }
        }
        if (s->mark_compare) {
            uint64_t *nm = realloc(marks, (nmarks + 1) * sizeof *marks);
            if (nm) {
                marks = nm;
                marks[nmarks++] = s->shop;
                s->mark_compare = 0;
            }
        }
    }
    ns = m->n_samples;
    memcpy(samples, m->samples, ns * sizeof samples[0]);
    m->n_samples = 0;
    pthread_mutex_unlock(&m->mu);

    char q[1024];
    /* every count in one statement: one commit per interval */
    strbuf b = {0};
    for (size_t i = 0; i < nd; i++) {
        snprintf(q, sizeof q, "%s(%" PRIu64 ", '%s', %" PRIu64 ", NOW(6))",
                 i ? ", " : "INSERT " MIG_TAG "INTO rsv_migration_counts "
                            "(shop_id, class, n, updated_at) VALUES ",
                 d[i].shop, rsv_migrate_class_name((uint32_t)d[i].stat),
                 d[i].n);
        buf_puts(&b, q);
    }
    buf_puts(&b, " ON DUPLICATE KEY UPDATE n = n + VALUES(n), "
                 "updated_at = VALUES(updated_at)");
    if (nd && (b.oom || run(m, b.p, "counting migration calls") != RSV_OK)) {
        /* counted again next time */
        pthread_mutex_lock(&m->mu);
        for (size_t j = 0; j < nd; j++) {
            mig_shop *s = mig_shop_find(&m->shops, d[j].shop);
            if (s)
                s->flushed[d[j].stat] -= d[j].n;
        }
        pthread_mutex_unlock(&m->mu);
    }
    buf_free(&b);
    for (size_t i = 0; i < nmarks; i++) {
        snprintf(q, sizeof q,
                 "UPDATE " MIG_TAG "rsv_migration_stage SET needs_compare = 1 "
                 "WHERE shop_id = %" PRIu64, marks[i]);
        if (run(m, q, "marking a shop for a compare") != RSV_OK) {
            pthread_mutex_lock(&m->mu);
            for (size_t j = i; j < nmarks; j++) {
                mig_shop *s = mig_shop_get(&m->shops, marks[j]);
                if (s)
                    s->mark_compare = 1;
            }
            pthread_mutex_unlock(&m->mu);
            break;
        }
    }
    for (size_t i = 0; i < ns; i++) {
        const mig_sample *x = &samples[i];
        char tok[2 * RSV_TOKEN_MAX + 1];
        hex(tok, x->w.token, x->w.token_len);
        pthread_mutex_lock(&m->mu);
        mig_shop *s = mig_shop_get(&m->shops, x->shop);
        uint32_t slot = (m->slot_base + (s ? s->next_slot++ : 0)) % MIG_SLOTS;
        pthread_mutex_unlock(&m->mu);
        snprintf(q, sizeof q,
                 "REPLACE " MIG_TAG "INTO rsv_migration_mismatch (shop_id, "
                 "slot, seen_at, class, op, stage, checkout_token, item_id, "
                 "location_id, quantity, old_code, new_code) VALUES (%" PRIu64
                 ", %u, NOW(6), '%s', %u, %d, X'%s', %" PRIu64 ", %" PRIu64
                 ", %" PRId64 ", %d, %d)",
                 x->shop, slot, rsv_migrate_class_name((uint32_t)x->class_),
                 x->w.op, (int)x->w.stage, tok, x->w.item, x->w.loc, x->w.qty,
                 x->old_code, x->new_code);
        if (run(m, q, "sampling a mismatch") != RSV_OK)
            break; /* a sample: lost, the counters have it */
    }
    free(d);
    free(marks);
}
