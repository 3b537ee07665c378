/*
 * stats.c - rsv-admin stats: the figures an operator graphs, read
 * without locks from one consistent snapshot.  Per item and location:
 * on hand, held, available, pooled, expired holds not given back, journal
 * backlog.  Per shop: what says whether the sweeper keeps up (how long
 * the oldest expired hold has waited to be given back, how old the
 * oldest journal row and the oldest settled checkout record are) and how
 * large its tables have grown (checkouts by state, pool rows, journal
 * rows).  Text, --json, or --prometheus (also into --metrics-file).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"

/* ---------------- per item and location ---------------- */

enum { SV_ON_HAND, SV_HELD, SV_AVAILABLE, SV_POOLED, SV_EXPIRED,
       SV_BACKLOG, SV_WAITING, N_SV };

/* One figure per (shop, item, location): its --json member, text column,
 * Prometheus metric and the metric's help text. */
static const struct stat_def {
    const char *json, *column, *metric, *help;
} stat_defs[N_SV] = {
    {"on_hand", "ON_HAND", "libreserve_on_hand_units",
     "Stock on hand as buyers see it: the ledger less the claims not yet "
     "folded into it."},
    {"held", "HELD", "libreserve_held_units",
     "Units held by active checkouts (deadline not passed)."},
    {"available", "AVAILABLE", "libreserve_available_units",
     "Units a new checkout can still reserve (on hand less held)."},
    {"pooled", "POOLED", "libreserve_pooled_units",
     "Pool depth: reservable units kept as rows of the pool."},
    {"expired", "EXPIRED", "libreserve_expired_units",
     "Units of holds whose deadline passed and that were not given back "
     "yet (a sweep or the next refill of the pool gives them back)."},
    {"journal_backlog", "BACKLOG", "libreserve_journal_backlog",
     "Claims and releases journalled and not yet folded into the ledger "
     "(rows of rsv_journal)."},
    {"ledger_waiters", "WAITING", "libreserve_ledger_waiters",
     "Transactions waiting now for the key's ledger row: buyers whose "
     "pool came up short queue there behind a refill in flight (a crowd "
     "on a pool too small for it)."},
};

typedef struct key_stats {
    uint64_t k[3]; /* shop, item, location */
    int64_t v[N_SV];
} key_stats;

/* Every figure of every key in one statement; the subqueries name their
 * indexes for the reason the view rsv_stock does (with the
 * statistics of freshly loaded tables the optimizer read every hold of the
 * shop once per ledger row). */
#define KEYMATCH(t)                                                      \
    " WHERE " t ".shop_id = l.shop_id AND " t ".item_id = "              \
    "l.item_id AND " t ".location_id = "                                 \
    "l.location_id"
#define HOLDS(cond)                                                      \
    "CAST(COALESCE((SELECT SUM(h.quantity) FROM rsv_holds h "            \
    "FORCE INDEX (rsv_holds_expiry)" KEYMATCH("h")                       \
    " AND h.expires_at " cond " NOW(6)), 0) AS SIGNED)"
static const char stats_sql[] =
    "/* conn_tag:admin */ SELECT l.shop_id, l.item_id, "
    "l.location_id, CAST(l.on_hand - COALESCE((SELECT "
    "SUM(x.quantity) FROM rsv_journal x FORCE INDEX (PRIMARY)"
    KEYMATCH("x") " AND x.kind = 2), 0) AS SIGNED), " HOLDS(">") ", "
    HOLDS("<=") ", CAST(COALESCE((SELECT SUM(u.units) FROM rsv_pool u "
    "FORCE INDEX (PRIMARY)" KEYMATCH("u") "), 0) AS SIGNED), (SELECT "
    "COUNT(*) FROM "
    "rsv_journal x FORCE INDEX (PRIMARY)" KEYMATCH("x") ") "
    "FROM rsv_ledger l";
#undef HOLDS
#undef KEYMATCH


/* Read the figures of one shop (all = 0) or every shop into *out
 * (malloc'd), inside the caller's snapshot. */
static int read_keys(const cmd_env *e, uint64_t shop, int all,
                     key_stats **out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    char q[sizeof stats_sql + 128];
    if (all)
        snprintf(q, sizeof q, "%s ORDER BY l.shop_id, l.item_id, "
                 "l.location_id", stats_sql);
    else
        snprintf(q, sizeof q, "%s WHERE l.shop_id = %" PRIu64 " ORDER BY "
                 "l.item_id, l.location_id", stats_sql, shop);
    MYSQL_RES *r = query_rows(e->conn, q);
    if (!r)
        return db_fail(e->o, e->conn, "stats");
    size_t n = (size_t)mysql_num_rows(r);
    key_stats *v = calloc(n ? n : 1, sizeof *v);
    if (!v) {
        mysql_free_result(r);
        fprintf(stderr, "%s: out of memory\n", prog);
        return EXIT_ERROR;
    }
    MYSQL_ROW row;
    size_t i = 0;
    int bad = 0;
    while ((row = mysql_fetch_row(r)) && i < n) {
        for (int c = 0; c < 3; c++)
            bad |= parse_u64(row[c], &v[i].k[c]);
        int64_t on_hand, held, expired, pooled, backlog;
        bad |= parse_i64(row[3], &on_hand) | parse_i64(row[4], &held) |
               parse_i64(row[5], &expired) | parse_i64(row[6], &pooled) |
               parse_i64(row[7], &backlog);
        v[i].v[SV_ON_HAND] = on_hand;
        v[i].v[SV_HELD] = held;
        v[i].v[SV_AVAILABLE] = on_hand - held;
        v[i].v[SV_POOLED] = pooled;
        v[i].v[SV_EXPIRED] = expired;
        v[i].v[SV_BACKLOG] = backlog;
        i++;
    }
    mysql_free_result(r);
    if (bad) {
        free(v);
        fprintf(stderr, "%s: stats: the server answered a value that is "
                        "not a number\n", prog);
        return EXIT_ERROR;
    }
    *out = v;
    *n_out = i;
    return EXIT_OKAY;
}

static int key_cmp(const void *a, const void *b)
{
    const uint64_t *x = a, *y = ((const key_stats *)b)->k;
    for (int c = 0; c < 3; c++)
        if (x[c] != y[c])
            return x[c] < y[c] ? -1 : 1;
    return 0;
}

/* Who waits for each key's ledger row now, from InnoDB's lock waits (live,
 * outside the snapshot: a wait has no past).  Reading other accounts'
 * waits needs the PROCESS privilege; without it the figure is unknown
 * (*known = 0), said once on stderr, and the rest of stats goes on. */
static void read_waiters(const cmd_env *e, key_stats *v, size_t n,
                         int *known)
{
    *known = 0;
    MYSQL_RES *r = query_rows(e->conn,
        "/* conn_tag:admin */ SELECT l.lock_data, COUNT(*) FROM "
        "information_schema.INNODB_LOCK_WAITS w JOIN "
        "information_schema.INNODB_LOCKS l ON l.lock_id = "
        "w.requested_lock_id WHERE l.lock_table = CONCAT('`', DATABASE(), "
        "'`.`rsv_ledger`') AND l.lock_index = 'PRIMARY' GROUP BY "
        "l.lock_data");
    if (!r) {
        fprintf(stderr, "%s: stats: the buyers waiting for ledger rows are "
                "not shown: %s (the PROCESS privilege reads them)\n", prog,
                mysql_error(e->conn));
        return;
    }
    *known = 1;
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(r))) {
        unsigned long long k[3];
        if (!row[0] || !row[1] ||
            sscanf(row[0], "%llu, %llu, %llu", &k[0], &k[1], &k[2]) != 3)
            continue;
        uint64_t key[3] = {k[0], k[1], k[2]};
        key_stats *hit = bsearch(key, v, n, sizeof *v, key_cmp);
        if (hit)
            hit->v[SV_WAITING] = strtoll(row[1], NULL, 10);
    }
    mysql_free_result(r);
}

/* Per metric one HELP and one TYPE line, then a sample per key.  Label
 * values are decimal ids, which need no escaping.  A figure not known
 * (the waiters without the PROCESS privilege) has no family. */
static void print_keys_prometheus(FILE *f, const key_stats *v, size_t n,
                                  int waiters_known)
{
    for (int m = 0; m < N_SV; m++) {
        if (m == SV_WAITING && !waiters_known)
            continue;
        prom_family(f, stat_defs[m].metric, "gauge", stat_defs[m].help);
        for (size_t i = 0; i < n; i++)
            fprintf(f, "%s{shop_id=\"%" PRIu64 "\",item_id=\"%" PRIu64
                    "\",location_id=\"%" PRIu64 "\"} %" PRId64 "\n",
                    stat_defs[m].metric, v[i].k[0], v[i].k[1], v[i].k[2],
                    v[i].v[m]);
    }
}

/* ---------------- per shop ---------------- */

enum { CO_HELD, CO_CLAIMED, CO_RELEASED, CO_EXPIRED, N_CO };
static const char *const co_states[N_CO] = {"held", "claimed", "released",
                                            "expired"};

enum { SH_KEYS, SH_HELD, SH_EXPIRED, SH_EXPIRED_HOLDS, SH_SWEEP_LAG,
       SH_POOL_ROWS, SH_POOLS_DRY, SH_JOURNAL_ROWS, SH_JOURNAL_OLDEST,
       SH_SETTLED_OLDEST, N_SH };

/* One figure per shop: its --json member, text column, Prometheus metric
 * and help.  The ages are in seconds (milliseconds kept), 0 when there is
 * nothing of the kind. */
static const struct shop_def {
    const char *json, *column, *metric, *help;
} shop_defs[N_SH] = {
    {"keys", "KEYS", "libreserve_shop_keys",
     "Item/location keys of the shop (stock ledger rows)."},
    {"held", "HELD", "libreserve_shop_held_units",
     "Units held by the shop's active checkouts."},
    {"expired", "EXPIRED", "libreserve_shop_expired_units",
     "Units of the shop's expired holds not given back yet."},
    {"expired_holds", "EXP_HOLDS", "libreserve_shop_expired_holds",
     "Expired holds of the shop not given back yet."},
    {"sweep_lag_s", "SWEEP_LAG_S", "libreserve_shop_sweep_lag_seconds",
     "How long the shop's oldest expired hold has waited to be given "
     "back: stays under the sweeper's interval while one runs, grows when "
     "none reaches the shop (0: no expired hold)."},
    {"pool_rows", "POOL_ROWS", "libreserve_shop_pool_rows",
     "Rows of the shop's pools (reservable units kept as rows)."},
    {"pools_dry", "POOLS_DRY", "libreserve_shop_pools_dry",
     "Keys whose pool is empty while the ledger still has units to issue "
     "and buyers hold units: a contended item whose pool is not being "
     "refilled, so reserves take its ledger row lock instead."},
    {"journal_rows", "JOURNAL", "libreserve_shop_journal_rows",
     "Journal backlog: claims and releases not yet folded into the "
     "ledger."},
    {"journal_oldest_s", "JOURNAL_OLD_S",
     "libreserve_shop_journal_oldest_seconds",
     "Age of the shop's oldest journal row not folded yet (0: none)."},
    {"settled_oldest_s", "SETTLED_OLD_S",
     "libreserve_shop_settled_oldest_seconds",
     "Age of the shop's oldest claimed, released or expired checkout "
     "record: the sweeper purges them after the retention (7 days by "
     "default), so it stays near that while one runs (0: none)."},
};

typedef struct shop_stats {
    uint64_t shop;
    double v[N_SH];
    int64_t checkouts[N_CO];
} shop_stats;

typedef struct shop_list {
    shop_stats *v;
    size_t n, cap;
} shop_list;

/* The entry of `shop`, made if new; the list stays ordered by shop. */
static shop_stats *shop_slot(shop_list *l, uint64_t shop)
{
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (l->v[mid].shop < shop)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < l->n && l->v[lo].shop == shop)
        return &l->v[lo];
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        shop_stats *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return NULL;
        l->v = v;
        l->cap = cap;
    }
    memmove(&l->v[lo + 1], &l->v[lo], (l->n - lo) * sizeof *l->v);
    l->n++;
    memset(&l->v[lo], 0, sizeof *l->v);
    l->v[lo].shop = shop;
    return &l->v[lo];
}

/* Each statement answers (shop_id, [status,] figures...); `cols` names
 * the shop_def each figure goes to (-1: the checkouts count, -2: status,
 * read first).  Every table is read per shop with GROUP BY; the
 * checkouts by status from their index (shop_id, status, updated_at)
 * alone. */
static const struct shop_query {
    const char *sql; /* %s: "WHERE shop_id = N", or (ledger_where) "WHERE
                        l.shop_id = N AND" */
    int cols[4];
    int ledger_where;
} shop_queries[] = {
    {"SELECT shop_id, COUNT(*) FROM rsv_ledger %s GROUP BY shop_id",
     {SH_KEYS, -3, -3, -3}},
    {"SELECT shop_id, COALESCE(SUM(IF(expires_at > NOW(6), quantity, 0)), "
     "0), COALESCE(SUM(IF(expires_at <= NOW(6), quantity, 0)), 0), "
     "COALESCE(SUM(expires_at <= NOW(6)), 0), COALESCE(TIMESTAMPDIFF("
     "MICROSECOND, MIN(IF(expires_at <= NOW(6), expires_at, NULL)), "
     "NOW(6)), 0) / 1e6 FROM rsv_holds %s GROUP BY shop_id",
     {SH_HELD, SH_EXPIRED, SH_EXPIRED_HOLDS, SH_SWEEP_LAG}},
    {"SELECT shop_id, COUNT(*) FROM rsv_pool %s GROUP BY shop_id",
     {SH_POOL_ROWS, -3, -3, -3}},
    /* next_unit_id > 1: the key has had a pool (only contended keys get
     * one); on_hand > issued: units not yet in the pool or holds */
    {"SELECT l.shop_id, COUNT(*) FROM rsv_ledger l %s l.next_unit_id > "
     "1 AND l.on_hand > l.issued AND NOT EXISTS (SELECT 1 FROM rsv_pool u "
     "WHERE u.shop_id = l.shop_id AND u.item_id = l.item_id AND "
     "u.location_id = l.location_id) AND EXISTS (SELECT 1 FROM rsv_holds h "
     "FORCE INDEX (rsv_holds_expiry) WHERE h.shop_id = l.shop_id AND "
     "h.item_id = l.item_id AND h.location_id = l.location_id AND "
     "h.expires_at > NOW(6)) GROUP BY l.shop_id", {SH_POOLS_DRY, -3, -3, -3},
     1},
    {"SELECT shop_id, COUNT(*), TIMESTAMPDIFF(MICROSECOND, MIN(settled_at),"
     " NOW(6)) / 1e6 FROM rsv_journal %s GROUP BY shop_id",
     {SH_JOURNAL_ROWS, SH_JOURNAL_OLDEST, -3, -3}},
    {"SELECT shop_id, status, COUNT(*), TIMESTAMPDIFF(MICROSECOND, "
     "MIN(updated_at), NOW(6)) / 1e6 FROM rsv_checkouts %s GROUP BY "
     "shop_id, status", {-2, -1, SH_SETTLED_OLDEST, -3}},
};

static int read_shops(const cmd_env *e, uint64_t shop, int all,
                      shop_list *l)
{
    char where[64] = "";
    if (!all)
        snprintf(where, sizeof where, "WHERE shop_id = %" PRIu64, shop);
    char lwhere[80];
    snprintf(lwhere, sizeof lwhere, all ? "WHERE" : "WHERE l.shop_id = %"
             PRIu64 " AND", shop);
    for (size_t q = 0; q < sizeof shop_queries / sizeof shop_queries[0];
         q++) {
        char text[1000];
        snprintf(text, sizeof text, "/* conn_tag:admin */ ");
        size_t len = strlen(text);
        snprintf(text + len, sizeof text - len, shop_queries[q].sql,
                 shop_queries[q].ledger_where ? lwhere : where);
        MYSQL_RES *r = query_rows(e->conn, text);
        if (!r)
            return db_fail(e->o, e->conn, "stats");
        MYSQL_ROW row;
        int bad = 0;
        while ((row = mysql_fetch_row(r))) {
            uint64_t id;
            bad |= parse_u64(row[0], &id);
            shop_stats *s = bad ? NULL : shop_slot(l, id);
            if (!s) {
                bad = 1;
                break;
            }
            int status = 0;
            for (int c = 0; c < 4 && shop_queries[q].cols[c] != -3; c++) {
                const char *v = row[c + 1] ? row[c + 1] : "0";
                int to = shop_queries[q].cols[c];
                if (to == -2) {
                    status = atoi(v);
                } else if (to == -1) {
                    if (status >= 1 && status <= N_CO)
                        s->checkouts[status - 1] = strtoll(v, NULL, 10);
                } else if (to == SH_SETTLED_OLDEST) {
                    double age = strtod(v, NULL);
                    if (status != 1 && age > s->v[to])
                        s->v[to] = age; /* settled: any status but held */
                } else {
                    s->v[to] = strtod(v, NULL);
                }
            }
        }
        mysql_free_result(r);
        if (bad) {
            fprintf(stderr, "%s: stats: out of memory, or the server "
                            "answered a value that is not a number\n", prog);
            return EXIT_ERROR;
        }
    }
    return EXIT_OKAY;
}

/* Counts print as integers, ages with their milliseconds. */
static int is_age(int m)
{
    return m == SH_SWEEP_LAG || m == SH_JOURNAL_OLDEST ||
           m == SH_SETTLED_OLDEST;
}

static void print_figure(FILE *f, int m, double v)
{
    if (is_age(m))
        fprintf(f, "%.3f", v);
    else
        fprintf(f, "%.0f", v);
}

static void print_shops_prometheus(FILE *f, const shop_list *l)
{
    for (int m = 0; m < N_SH; m++) {
        prom_family(f, shop_defs[m].metric, "gauge", shop_defs[m].help);
        for (size_t i = 0; i < l->n; i++) {
            fprintf(f, "%s{shop_id=\"%" PRIu64 "\"} ", shop_defs[m].metric,
                    l->v[i].shop);
            print_figure(f, m, l->v[i].v[m]);
            fputc('\n', f);
        }
    }
    prom_family(f, "libreserve_shop_checkouts", "gauge",
                "Checkout records of the shop by state (held, claimed, "
                "released, expired): the size of the checkouts table.");
    for (size_t i = 0; i < l->n; i++)
        for (int c = 0; c < N_CO; c++)
            fprintf(f, "libreserve_shop_checkouts{shop_id=\"%" PRIu64
                    "\",state=\"%s\"} %" PRId64 "\n", l->v[i].shop,
                    co_states[c], l->v[i].checkouts[c]);
}

static void print_shops_json(const shop_list *l)
{
    printf("\"shops\":[");
    for (size_t i = 0; i < l->n; i++) {
        printf("%s{\"shop_id\":%" PRIu64, i ? "," : "", l->v[i].shop);
        for (int m = 0; m < N_SH; m++) {
            printf(",\"%s\":", shop_defs[m].json);
            print_figure(stdout, m, l->v[i].v[m]);
        }
        printf(",\"checkouts\":{");
        for (int c = 0; c < N_CO; c++)
            printf("%s\"%s\":%" PRId64, c ? "," : "", co_states[c],
                   l->v[i].checkouts[c]);
        printf("}}");
    }
    putchar(']');
}

static void print_shops_text(const shop_list *l)
{
    if (!l->n)
        return;
    printf("%-20s", "SHOP");
    for (int m = 0; m < N_SH; m++)
        printf(" %*s", is_age(m) ? 13 : 10, shop_defs[m].column);
    printf(" %10s %10s %10s %10s\n", "CO_HELD", "CO_CLAIMED", "CO_RELEASD",
           "CO_EXPIRED");
    for (size_t i = 0; i < l->n; i++) {
        printf("%-20" PRIu64, l->v[i].shop);
        for (int m = 0; m < N_SH; m++) {
            if (is_age(m))
                printf(" %13.3f", l->v[i].v[m]);
            else
                printf(" %10.0f", l->v[i].v[m]);
        }
        for (int c = 0; c < N_CO; c++)
            printf(" %10" PRId64, l->v[i].checkouts[c]);
        putchar('\n');
    }
}

/* ---------------- the command ---------------- */

static void print_keys_json(const key_stats *v, size_t n,
                            int waiters_known)
{
    printf("\"keys\":[");
    for (size_t i = 0; i < n; i++) {
        printf("%s{", i ? "," : "");
        print_key_json(v[i].k, 3);
        for (int m = 0; m < N_SV; m++)
            if (m == SV_WAITING && !waiters_known)
                printf(",\"%s\":null", stat_defs[m].json);
            else
                printf(",\"%s\":%" PRId64, stat_defs[m].json, v[i].v[m]);
        putchar('}');
    }
    putchar(']');
}

static void print_keys_text(const key_stats *v, size_t n, int waiters_known)
{
    if (n) {
        printf("%-20s %-20s %-20s", "SHOP", "ITEM", "LOCATION");
        for (int m = 0; m < N_SV; m++)
            printf(" %10s", stat_defs[m].column);
        putchar('\n');
    }
    for (size_t i = 0; i < n; i++) {
        printf("%-20" PRIu64 " %-20" PRIu64 " %-20" PRIu64, v[i].k[0],
               v[i].k[1], v[i].k[2]);
        for (int m = 0; m < N_SV; m++)
            if (m == SV_WAITING && !waiters_known)
                printf(" %10s", "-");
            else
                printf(" %10" PRId64, v[i].v[m]);
        putchar('\n');
    }
}

int cmd_stats(const cmd_env *e)
{
    const opts *o = e->o;
    uint64_t shop;
    int st = shop_or_all(e, "stats", &shop);
    if (st)
        return st;
    key_stats *v = NULL;
    size_t n = 0;
    shop_list shops = {0};
    /* Plain reads, no locks, on one consistent snapshot: a READ ONLY
     * transaction at REPEATABLE READ started WITH CONSISTENT SNAPSHOT,
     * as rsv_audit reads, so no figure mixes two moments. */
    if (sql(e, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ") ||
        sql(e, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"))
        st = db_fail(o, e->conn, "stats");
    if (!st && !o->by_shop)
        st = read_keys(e, shop, o->all, &v, &n);
    if (!st)
        st = read_shops(e, shop, o->all, &shops);
    end_txn(e, st == EXIT_OKAY);
    int waiters_known = 0;
    if (!st && !o->by_shop)
        read_waiters(e, v, n, &waiters_known);
    if (st) {
        free(v);
        free(shops.v);
        return st;
    }
    int64_t tot[N_SV] = {0};
    size_t key_shops = 0;
    for (size_t i = 0; i < n; i++) {
        for (int m = 0; m < N_SV; m++)
            tot[m] += v[i].v[m];
        if (i == 0 || v[i].k[0] != v[i - 1].k[0])
            key_shops++; /* the rows come ordered by shop */
    }
    if (o->prometheus || o->metrics_file) {
        prom_out p;
        if ((st = prom_open(&p, o->metrics_file)) == EXIT_OKAY) {
            if (!o->by_shop)
                print_keys_prometheus(p.f, v, n, waiters_known);
            print_shops_prometheus(p.f, &shops);
            st = prom_close(&p, 1);
        }
    } else if (o->json) {
        if (o->all)
            printf("{\"scope\":\"all\",");
        else
            printf("{\"scope\":\"shop\",\"shop_id\":%" PRIu64 ",", shop);
        if (!o->by_shop) {
            print_keys_json(v, n, waiters_known);
            putchar(',');
        }
        print_shops_json(&shops);
        printf(",\"totals\":{\"shops\":%zu", o->by_shop ? shops.n
                                                       : key_shops);
        if (!o->by_shop) {
            printf(",\"keys\":%zu", n);
            for (int m = 0; m < N_SV; m++)
                if (m != SV_WAITING || waiters_known)
                    printf(",\"%s\":%" PRId64, stat_defs[m].json, tot[m]);
        }
        printf("}}\n");
    } else {
        if (!o->by_shop) {
            print_keys_text(v, n, waiters_known);
            printf("total: %zu shop(s), %zu item/location key(s)",
                   key_shops, n);
            for (int m = 0; m < N_SV; m++)
                if (m != SV_WAITING || waiters_known)
                    printf(", %s %" PRId64, stat_defs[m].json, tot[m]);
            printf("\n\n");
        }
        print_shops_text(&shops);
    }
    int empty = shops.n == 0;
    free(v);
    free(shops.v);
    if (st == EXIT_OKAY && empty && !o->all) {
        fprintf(stderr, "%s: shop %" PRIu64 " has no stock ledger rows, "
                "holds, pools, journal or checkout records\n", prog, shop);
        return EXIT_FOUND;
    }
    return st;
}
