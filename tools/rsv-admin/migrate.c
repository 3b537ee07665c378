/*
 * migrate.c - rsv-admin migrate: each shop's migration stage
 * (rsv_migration_stage), shown, set by shop list or by a percentage of
 * the shops, with the steps that are unsafe refused; and the counters and
 * mismatch samples the library's migration handles write
 * (rsv_migration_counts, rsv_migration_mismatch).  docs/migration.md is
 * the operator's guide.
 *
 * Every change locks the one row of rsv_migration_change (SELECT ... FOR
 * UPDATE) from reading the table's highest version to its COMMIT, writes
 * that row when it writes any stage, and gives each changed row the next
 * version: the handles read only rows above the highest version they saw,
 * so versions must become visible in order.  A row lock, not GET_LOCK:
 * Galera refuses named locks, and there row locks hold on one node only,
 * so two changes made at once on two nodes both write the row and the
 * later one fails certification (1213); it is run again from its first
 * read, checks included.  A command checks every step it was asked for
 * before it writes any: all or nothing.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mysqld_error.h>
#include <reserve/migrate.h>

#include "admin.h"

static const char *const stage_names[] = {"old", "shadow", "primary",
                                          "complete"};
#define N_STAGES 4
/* The library's default hold TTL: the shortest shadow a flip to primary
 * needs when the operator names no longer one. */
#define DEFAULT_MAX_TTL_S 600
#define LOCK_WAIT_S 10
#define MAX_SHOPS 10000

static int stage_of_name(const char *s)
{
    for (int i = 0; i < N_STAGES; i++)
        if (strcmp(s, stage_names[i]) == 0)
            return i;
    return -1;
}

static const char *stage_name(int st)
{
    return st >= 0 && st < N_STAGES ? stage_names[st] : "?";
}

/* A comma-separated list of shop ids into v (at most max); the count, or
 * -1 after reporting a usage error. */
static int parse_shops(const char *arg, uint64_t *v, int max, int n)
{
    char buf[64];
    for (const char *p = arg; *p;) {
        size_t w = strcspn(p, ",");
        if (w == 0 || w >= sizeof buf) {
            usage_fail("bad shop list", arg);
            return -1;
        }
        memcpy(buf, p, w);
        buf[w] = 0;
        if (n == max) {
            usage_fail("too many shops", arg);
            return -1;
        }
        if (parse_u64(buf, &v[n])) {
            usage_fail("bad shop id", buf);
            return -1;
        }
        n++;
        p += w;
        if (*p == ',')
            p++;
    }
    return n;
}

/* One row of rsv_migration_stage, as a command reads it before a change. */
typedef struct stage_row {
    uint64_t shop;
    int stage;            /* 0 for a shop without a row */
    int exists;
    int64_t shadow_s;     /* seconds since shadow_since (-1: NULL) */
    int64_t longest_s;    /* the longest hold alive in libreserve in the
                             shop (to primary only) */
    int to;               /* the stage asked for */
} stage_row;

static int one_value(const cmd_env *e, const char *q, uint64_t *out)
{
    MYSQL_RES *r = query_rows(e->conn, q);
    if (!r)
        return -1;
    MYSQL_ROW row = mysql_fetch_row(r);
    *out = row && row[0] ? strtoull(row[0], NULL, 10) : 0;
    mysql_free_result(r);
    return 0;
}

/* What a step of a change returns when it must be run again: the
 * transaction lost a conflict (a deadlock, or on Galera a certification
 * failure or a brute-force abort by a replicated write, all 1213). */
#define CHANGE_AGAIN (-1)
/* Tries of one change before giving up; each conflict means another
 * change committed, so a few suffice. */
#define CHANGE_TRIES 8

/* A failed statement of a change: CHANGE_AGAIN for a lost conflict
 * (nothing reported), else the exit status after reporting. */
static int change_fail(const cmd_env *e, const char *what)
{
    if (mysql_errno(e->conn) == ER_LOCK_DEADLOCK)
        return CHANGE_AGAIN;
    if (mysql_errno(e->conn) == ER_LOCK_WAIT_TIMEOUT) {
        fprintf(stderr, "%s: another migrate command is changing the "
                        "stages (rsv_migration_change stayed locked for %d "
                        "s); try again\n", prog, LOCK_WAIT_S);
        return EXIT_ERROR;
    }
    if (mysql_errno(e->conn) == ER_NO_SUCH_TABLE) {
        fprintf(stderr, "%s: %s: %s: load sql/schema.sql again (rsv-admin "
                        "schema upgrade) to add the migration tables\n",
                prog, what, mysql_error(e->conn));
        return EXIT_ERROR;
    }
    return db_fail(e->o, e->conn, what);
}

/* The transaction of a change with the row of rsv_migration_change
 * locked; 0, CHANGE_AGAIN, or an exit status. */
static int change_begin(const cmd_env *e)
{
    char q[128];
    snprintf(q, sizeof q, "SET SESSION innodb_lock_wait_timeout = %d",
             LOCK_WAIT_S);
    if (sql(e, q) != 0 ||
        sql(e, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED") != 0 ||
        sql(e, "START TRANSACTION READ WRITE") != 0)
        return change_fail(e, "starting a transaction");
    uint64_t one = 0;
    if (one_value(e, "SELECT COUNT(*) FROM rsv_migration_change WHERE id = "
                     "1 FOR UPDATE", &one) != 0)
        return change_fail(e, "locking the migration stages");
    if (one != 1) {
        fprintf(stderr, "%s: rsv_migration_change has no row: load "
                        "sql/schema.sql again (rsv-admin schema upgrade)\n",
                prog);
        return EXIT_ERROR;
    }
    return 0;
}

/* The write of rsv_migration_change that makes two changes made at once
 * on two Galera nodes conflict; only a change that writes a stage needs
 * it.  0, CHANGE_AGAIN, or an exit status. */
static int change_mark(const cmd_env *e)
{
    if (sql(e, "UPDATE rsv_migration_change SET changes = changes + 1, "
               "changed_at = NOW(6) WHERE id = 1") != 0)
        return change_fail(e, "writing a migration stage");
    return 0;
}

/* Run body (reads, checks, writes) in the transaction of a change and
 * commit, again from the start while it loses conflicts.  0, or an exit
 * status (reported; the transaction rolled back). */
static int change_run(const cmd_env *e, int (*body)(const cmd_env *, void *),
                      void *arg)
{
    /* On a Galera node, reads wait for the writes the cluster committed
     * before them, so a check (and a refusal) sees the stages as they are
     * and not as this node has applied them so far.  A server without
     * Galera has no such variable, or has it off. */
    uint64_t wsrep = 0;
    if (one_value(e, "SELECT @@global.wsrep_on", &wsrep) == 0 && wsrep &&
        sql(e, "SET SESSION wsrep_sync_wait = 1") != 0)
        return db_fail(e->o, e->conn, "waiting for the cluster's writes");
    for (int t = 1;; t++) {
        int st = change_begin(e);
        if (!st)
            st = body(e, arg);
        if (!st && sql(e, "COMMIT AND NO CHAIN NO RELEASE") != 0)
            st = change_fail(e, "committing the migration stages");
        if (st != CHANGE_AGAIN) {
            if (st)
                end_txn(e, 0);
            return st;
        }
        end_txn(e, 0);
        if (t == CHANGE_TRIES) {
            fprintf(stderr, "%s: the change lost %d conflicts with other "
                            "changes in a row; nothing changed, try "
                            "again\n", prog, t);
            return EXIT_ERROR;
        }
        /* the other change has committed or is about to: give it time */
        pause_s(0.02 * t);
    }
}

/* Read the current rows of the shops (locked). 0, CHANGE_AGAIN, or an
 * exit status. */
static int read_rows(const cmd_env *e, stage_row *rows, int n)
{
    char q[512];
    for (int i = 0; i < n; i++) {
        snprintf(q, sizeof q,
                 "SELECT stage, TIMESTAMPDIFF(SECOND, shadow_since, NOW(6)) "
                 "FROM rsv_migration_stage WHERE shop_id = %" PRIu64
                 " FOR UPDATE", rows[i].shop);
        MYSQL_RES *r = query_rows(e->conn, q);
        if (!r)
            return change_fail(e, "reading the migration stages");
        MYSQL_ROW row = mysql_fetch_row(r);
        rows[i].exists = row != NULL;
        rows[i].stage = row ? atoi(row[0]) : 0;
        rows[i].shadow_s = row && row[1] ? strtoll(row[1], NULL, 10) : -1;
        mysql_free_result(r);
        if (rows[i].to != RSV_STAGE_PRIMARY)
            continue;
        /* The longest hold alive in libreserve now: a plain read of the
         * shop's holds (only the live ones are there), no lock on them,
         * so buyers are not held up by it. */
        uint64_t longest = 0;
        snprintf(q, sizeof q,
                 "SELECT COALESCE(MAX(GREATEST(TIMESTAMPDIFF(SECOND, "
                 "created_at, expires_at), 0)), 0) FROM rsv_holds WHERE "
                 "shop_id = %" PRIu64, rows[i].shop);
        if (one_value(e, q, &longest) != 0)
            return change_fail(e, "reading the shop's holds");
        rows[i].longest_s = (int64_t)longest;
    }
    return 0;
}

/* Why the step from r->stage to r->to is unsafe, into why; 0 if it is
 * safe. */
static int refuse(const cmd_env *e, const stage_row *r, char *why,
                  size_t n)
{
    int from = r->stage, to = r->to;
    if (from == to)
        return 0;
    if (from == RSV_STAGE_COMPLETE) {
        snprintf(why, n, "shop %" PRIu64 " is complete: the old store is "
                 "no longer kept current, so no stage before complete is "
                 "safe", r->shop);
        return 1;
    }
    if (to > from + 1) {
        snprintf(why, n, "shop %" PRIu64 ": %s to %s skips %s; take one "
                 "step at a time (old, shadow, primary, complete)", r->shop,
                 stage_name(from), stage_name(to), stage_name(from + 1));
        return 1;
    }
    if (to == RSV_STAGE_PRIMARY && from == RSV_STAGE_SHADOW) {
        int64_t ttl = e->o->max_ttl_s >= 0 ? e->o->max_ttl_s
                                           : DEFAULT_MAX_TTL_S;
        if (r->longest_s > ttl)
            ttl = r->longest_s;
        if (r->shadow_s <= ttl) {
            snprintf(why, n, "shop %" PRIu64 " has been in shadow for %"
                     PRId64 " s, not longer than the longest hold's TTL (%"
                     PRId64 " s): a hold made before shadow began may still "
                     "be claimed, and libreserve does not have it.  Wait %"
                     PRId64 " s more (or give the old store's longest TTL "
                     "with --max-ttl)", r->shop, r->shadow_s, ttl,
                     ttl - r->shadow_s + 1);
            return 1;
        }
    }
    return 0;
}

/* Write the rows whose stage changes, each with the next version;
 * rollout: set rollout_seq to the version (migrate percent took it in).
 * 0, CHANGE_AGAIN, or an exit status. */
static int write_rows(const cmd_env *e, stage_row *rows, int n, int rollout,
                      int *changed)
{
    uint64_t v = 0;
    if (one_value(e, "SELECT COALESCE(MAX(version), 0) FROM "
                     "rsv_migration_stage", &v) != 0)
        return change_fail(e, "reading the migration version");
    const char *reason = e->o->reason ? e->o->reason : "";
    char esc[2 * 255 + 1];
    mysql_real_escape_string(e->conn, esc, reason, strlen(reason));
    *changed = 0;
    for (int i = 0; i < n; i++) {
        stage_row *r = &rows[i];
        if (r->stage == r->to)
            continue;
        v++;
        char q[1024], seq[32];
        if (rollout)
            snprintf(seq, sizeof seq, "%" PRIu64, v);
        else
            snprintf(seq, sizeof seq, "rollout_seq");
        const char *since = r->to == RSV_STAGE_OLD ? "NULL"
                            : r->stage == RSV_STAGE_OLD ? "NOW(6)"
                                                        : "shadow_since";
        snprintf(q, sizeof q,
                 "INSERT INTO rsv_migration_stage (shop_id, stage, version, "
                 "changed_at, reason, shadow_since, rollout_seq) VALUES (%"
                 PRIu64 ", %d, %" PRIu64 ", NOW(6), '%s', %s, %s) "
                 "ON DUPLICATE KEY UPDATE stage = VALUES(stage), "
                 "version = VALUES(version), changed_at = VALUES(changed_at), "
                 "reason = VALUES(reason), shadow_since = %s, "
                 "rollout_seq = %s",
                 r->shop, r->to, v, esc,
                 r->stage == RSV_STAGE_OLD && r->to != RSV_STAGE_OLD
                     ? "NOW(6)" : "NULL",
                 rollout ? seq : "NULL", since,
                 rollout ? seq : r->to == RSV_STAGE_OLD ? "NULL"
                                                        : "rollout_seq");
        if (sql(e, q) != 0)
            return change_fail(e, "writing a migration stage");
        (*changed)++;
    }
    return *changed ? change_mark(e) : 0;
}

static void print_changes(const cmd_env *e, const stage_row *rows, int n,
                          int changed)
{
    if (e->o->json) {
        printf("{\"changed\":%d,\"shops\":[", changed);
        for (int i = 0; i < n; i++)
            printf("%s{\"shop_id\":%" PRIu64 ",\"from\":\"%s\",\"to\":\"%s\"}",
                   i ? "," : "", rows[i].shop, stage_name(rows[i].stage),
                   stage_name(rows[i].to));
        printf("]}\n");
        return;
    }
    for (int i = 0; i < n; i++) {
        if (rows[i].stage == rows[i].to)
            printf("shop %" PRIu64 ": already %s\n", rows[i].shop,
                   stage_name(rows[i].to));
        else
            printf("shop %" PRIu64 ": %s -> %s\n", rows[i].shop,
                   stage_name(rows[i].stage), stage_name(rows[i].to));
    }
    printf("%d shop(s) changed; every handle follows within its refresh "
           "interval (1 s by default)\n", changed);
}

/* migrate set: the shops asked and the stage they go to. */
typedef struct set_change {
    stage_row *rows;
    int n, changed;
} set_change;

/* Read the rows, check every step, write them all or none. */
static int set_body(const cmd_env *e, void *arg)
{
    set_change *c = arg;
    int st = read_rows(e, c->rows, c->n);
    if (st)
        return st;
    char why[600];
    for (int i = 0; i < c->n; i++) {
        if (refuse(e, &c->rows[i], why, sizeof why)) {
            fprintf(stderr, "%s: refused: %s; nothing changed\n", prog, why);
            if (e->o->json) {
                printf("{\"refused\":");
                json_cstr(why);
                printf("}\n");
            }
            return EXIT_REFUSED;
        }
    }
    return write_rows(e, c->rows, c->n, 0, &c->changed);
}

static int migrate_set(const cmd_env *e)
{
    if (e->nargs != 3)
        return usage_fail("migrate set takes STAGE and SHOP[,SHOP...]",
                          NULL);
    int to = stage_of_name(e->args[1]);
    if (to < 0)
        return usage_fail("unknown stage (old, shadow, primary, complete)",
                          e->args[1]);
    uint64_t *ids_ = malloc(MAX_SHOPS * sizeof *ids_);
    stage_row *rows = calloc(MAX_SHOPS, sizeof *rows);
    int st;
    if (!ids_ || !rows) {
        fprintf(stderr, "%s: out of memory\n", prog);
        st = EXIT_ERROR;
        goto out;
    }
    int n = parse_shops(e->args[2], ids_, MAX_SHOPS, 0);
    if (n < 0) {
        st = EXIT_USAGE;
        goto out;
    }
    for (int i = 0; i < n; i++) {
        rows[i].shop = ids_[i];
        rows[i].to = to;
    }
    set_change c = {rows, n, 0};
    st = change_run(e, set_body, &c);
    if (!st)
        print_changes(e, rows, n, c.changed);
out:
    free(ids_);
    free(rows);
    return st;
}

static int cmp_rank(const void *a, const void *b)
{
    const stage_row *x = a, *y = b;
    /* the rank is kept in longest_s by migrate_percent */
    return x->longest_s < y->longest_s ? -1 : x->longest_s > y->longest_s;
}

/* migrate percent: what was asked, and what the last try found and
 * wrote (all: the shops that move, by rank, after the body). */
typedef struct percent_change {
    uint64_t p;
    stage_row *all;
    uint64_t *seq;
    size_t total, n, want, now_in;
    int changed;
} percent_change;

static int percent_body(const cmd_env *e, void *arg)
{
    percent_change *c = arg;
    free(c->all);
    free(c->seq);
    c->all = NULL;
    c->seq = NULL;
    c->n = 0;
    MYSQL_RES *r = query_rows(
        e->conn,
        "SELECT s.shop_id, COALESCE(m.stage, 0), m.rollout_seq, "
        "CRC32(CONCAT('rsv', s.shop_id)) AS rank_ FROM "
        "(SELECT shop_id FROM rsv_ledger UNION SELECT shop_id FROM "
        "rsv_migration_stage) s LEFT JOIN rsv_migration_stage m ON "
        "m.shop_id = s.shop_id ORDER BY rank_, s.shop_id");
    if (!r)
        return change_fail(e, "reading the shops");
    size_t total = mysql_num_rows(r), k = 0;
    stage_row *all = calloc(total ? total : 1, sizeof *all);
    uint64_t *seq = calloc(total ? total : 1, sizeof *seq);
    c->all = all;
    c->seq = seq;
    if (!all || !seq) {
        mysql_free_result(r);
        fprintf(stderr, "%s: out of memory\n", prog);
        return EXIT_ERROR;
    }
    MYSQL_ROW row;
    size_t in = 0;
    while ((row = mysql_fetch_row(r)) != NULL) {
        stage_row *x = &all[k];
        x->shop = strtoull(row[0], NULL, 10);
        x->stage = atoi(row[1]);
        x->to = x->stage;
        x->exists = 1;
        seq[k] = row[2] ? strtoull(row[2], NULL, 10) : 0;
        x->longest_s = (int64_t)k; /* its rank */
        in += x->stage > RSV_STAGE_OLD;
        k++;
    }
    mysql_free_result(r);
    size_t want = (size_t)((c->p * total + 99) / 100);
    size_t moved = 0;
    if (want > in) {
        for (size_t i = 0; i < total && in + moved < want; i++)
            if (all[i].stage == RSV_STAGE_OLD) {
                all[i].to = RSV_STAGE_SHADOW;
                moved++;
            }
    } else {
        /* the newest first: the highest rollout_seq */
        while (in - moved > want) {
            size_t best = total;
            for (size_t i = 0; i < total; i++)
                if (seq[i] && all[i].to == all[i].stage &&
                    (all[i].stage == RSV_STAGE_SHADOW ||
                     all[i].stage == RSV_STAGE_PRIMARY) &&
                    (best == total || seq[i] > seq[best]))
                    best = i;
            if (best == total)
                break;
            all[best].to = RSV_STAGE_OLD;
            moved++;
        }
    }
    /* only the shops that move: their ranks give the versions' order */
    size_t n = 0;
    for (size_t i = 0; i < total; i++)
        if (all[i].to != all[i].stage)
            all[n++] = all[i];
    qsort(all, n, sizeof *all, cmp_rank);
    c->total = total;
    c->n = n;
    c->want = want;
    c->now_in = want > in ? in + moved : in - moved;
    /* the rows' shadow_since and TTLs are not needed for these steps
     * (old <-> shadow, primary -> old are always safe) */
    return write_rows(e, all, (int)n, want > in, &c->changed);
}

/* P% of the shops (those with a ledger row or a stage row) at shadow or
 * beyond.  The order is fixed (a hash of the shop id), so raising the
 * percentage takes the next shops of the same list and keeps every shop
 * already in; lowering sends back the shops the percentage took in last
 * (shops set by list stay, and count as in). */
static int migrate_percent(const cmd_env *e)
{
    uint64_t p;
    if (e->nargs != 2 || parse_u64(e->args[1], &p) || p > 100)
        return usage_fail("migrate percent takes P, 0 to 100", NULL);
    percent_change c = {.p = p};
    int st = change_run(e, percent_body, &c);
    if (!st) {
        if (e->o->json)
            printf("{\"percent\":%" PRIu64 ",\"shops\":%zu,\"in\":%zu,"
                   "\"changed\":%d}\n", p, c.total, c.now_in, c.changed);
        else {
            for (size_t i = 0; i < c.n; i++)
                printf("shop %" PRIu64 ": %s -> %s\n", c.all[i].shop,
                       stage_name(c.all[i].stage), stage_name(c.all[i].to));
            printf("%zu of %zu shops at shadow or beyond (%" PRIu64 "%% "
                   "asked%s)\n", c.now_in, c.total, p,
                   c.now_in > c.want ? "; the rest were set by list or are "
                                       "complete: lower them with migrate "
                                       "set"
                                     : "");
        }
    }
    free(c.all);
    free(c.seq);
    return st;
}

/* The next "class=n" of the "class=n class=n" the show queries make:
 * 1 with the class and count (lengths in *cw, *vw) and *p moved past it,
 * 0 at the end. */
static int next_count(const char **p, const char **cls, size_t *cw,
                      const char **val, size_t *vw)
{
    if (!**p)
        return 0;
    *cls = *p;
    *cw = strcspn(*p, "=");
    *val = *p + *cw + ((*p)[*cw] == '=');
    *vw = strcspn(*val, " ");
    *p = *val + *vw + ((*val)[*vw] == ' ');
    return 1;
}

/* The count of class name in counts, as text; "0" when absent. */
static void count_of(const char *counts, const char *name, char *out,
                     size_t cap)
{
    const char *cls, *val;
    size_t cw, vw;
    snprintf(out, cap, "0");
    while (next_count(&counts, &cls, &cw, &val, &vw))
        if (cw == strlen(name) && strncmp(cls, name, cw) == 0)
            snprintf(out, cap, "%.*s", (int)vw, val);
}

/* migrate show --prometheus: the fleet's counts, per shop, under the
 * names of a handle's own text (the library's, rsv_migrate_class_name: a
 * dashboard reads this tool's text and the handles' alike): every class
 * the handle counts per shop (0 when none was added yet; a class a newer
 * library added is passed on as found), and the stage of every shop with
 * a stage row or counts (no row: old).  The handle's queue depth and
 * failed stage reads belong to its process and are not stored, so they
 * are only in its own text. */
static int show_prometheus(const cmd_env *e, const char *in)
{
    char q[8192];
    snprintf(q, sizeof q,
             "SELECT s.shop_id, COALESCE(m.stage, 0), "
             "COALESCE((SELECT GROUP_CONCAT(c.class, '=', c.n ORDER BY "
             "c.class SEPARATOR ' ') FROM rsv_migration_counts c WHERE "
             "c.shop_id = s.shop_id), '') FROM (SELECT shop_id FROM "
             "rsv_migration_stage UNION SELECT shop_id FROM "
             "rsv_migration_counts) s LEFT JOIN rsv_migration_stage m ON "
             "m.shop_id = s.shop_id%s%s ORDER BY s.shop_id",
             *in ? " WHERE s.shop_id IN " : "", in);
    MYSQL_RES *r = query_rows(e->conn, q);
    if (!r)
        return db_fail(e->o, e->conn, "reading the migration stages");
    prom_out po;
    if (prom_open(&po, NULL) != 0) {
        mysql_free_result(r);
        return EXIT_ERROR;
    }
    prom_family(po.f, "libreserve_migration_calls_total", "counter",
                "Calls the migration handles compared, by shop and class, "
                "as added to rsv_migration_counts.");
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(r)) != NULL) {
        char v[32];
        for (uint32_t k = 0; k < RSV_MIG_STAT_COUNT; k++) {
            if (k == RSV_MIG_STAGE_READ_FAILED)
                continue;
            const char *name = rsv_migrate_class_name(k);
            count_of(row[2], name, v, sizeof v);
            fprintf(po.f, "libreserve_migration_calls_total{shop=\"%s\","
                          "class=\"%s\"} %s\n", row[0], name, v);
        }
        const char *p = row[2], *cls, *val;
        size_t cw, vw;
        while (next_count(&p, &cls, &cw, &val, &vw)) {
            int known = 0;
            for (uint32_t k = 0; k < RSV_MIG_STAT_COUNT; k++) {
                const char *name = rsv_migrate_class_name(k);
                known |= strlen(name) == cw && strncmp(cls, name, cw) == 0;
            }
            if (!known)
                fprintf(po.f, "libreserve_migration_calls_total{shop=\"%s\","
                              "class=\"%.*s\"} %.*s\n", row[0], (int)cw,
                        cls, (int)vw, val);
        }
    }
    prom_family(po.f, "libreserve_migration_stage", "gauge",
                "Each shop's migration stage: 0 old, 1 shadow, 2 primary, "
                "3 complete.");
    mysql_data_seek(r, 0);
    while ((row = mysql_fetch_row(r)) != NULL)
        fprintf(po.f, "libreserve_migration_stage{shop=\"%s\"} %s\n", row[0],
                row[1]);
    mysql_free_result(r);
    return prom_close(&po, 1);
}

static int migrate_show(const cmd_env *e)
{
    char in[4096] = "", where[4200] = "";
    if (e->nargs > 2)
        return usage_fail("migrate show takes at most one SHOP[,SHOP...]",
                          NULL);
    if (e->nargs == 2) {
        uint64_t *ids_ = malloc(256 * sizeof *ids_);
        if (!ids_)
            return EXIT_ERROR;
        int n = parse_shops(e->args[1], ids_, 256, 0);
        if (n < 0) {
            free(ids_);
            return EXIT_USAGE;
        }
        size_t len = (size_t)snprintf(in, sizeof in, "(");
        for (int i = 0; i < n && len < sizeof in; i++)
            len += (size_t)snprintf(in + len, sizeof in - len,
                                    "%s%" PRIu64, i ? "," : "", ids_[i]);
        if (len < sizeof in)
            snprintf(in + len, sizeof in - len, ")");
        free(ids_);
        snprintf(where, sizeof where, " WHERE m.shop_id IN %s", in);
    }
    if (e->o->prometheus)
        return show_prometheus(e, in);
    char q[8192];
    snprintf(q, sizeof q,
             "SELECT m.shop_id, m.stage, m.version, m.changed_at, m.reason, "
             "COALESCE(m.shadow_since, ''), m.needs_compare, "
             "COALESCE((SELECT GROUP_CONCAT(c.class, '=', c.n ORDER BY "
             "c.class SEPARATOR ' ') FROM rsv_migration_counts c WHERE "
             "c.shop_id = m.shop_id), '') FROM rsv_migration_stage m%s "
             "ORDER BY m.shop_id", where);
    MYSQL_RES *r = query_rows(e->conn, q);
    if (!r)
        return db_fail(e->o, e->conn, "reading the migration stages");
    MYSQL_ROW row;
    int first = 1;
    if (e->o->json)
        printf("{\"shops\":[");
    else
        printf("%-20s %-9s %8s %-26s %-26s %s\n", "SHOP", "STAGE", "VERSION",
               "CHANGED", "SHADOW SINCE", "COMPARE REASON / COUNTS");
    while ((row = mysql_fetch_row(r)) != NULL) {
        int stage = atoi(row[1]);
        if (e->o->json) {
            printf("%s{\"shop_id\":%s,\"stage\":\"%s\",\"version\":%s,"
                   "\"changed_at\":", first ? "" : ",", row[0],
                   stage_name(stage), row[2]);
            json_cstr(row[3]);
            printf(",\"reason\":");
            json_cstr(row[4]);
            printf(",\"shadow_since\":");
            if (*row[5])
                json_cstr(row[5]);
            else
                printf("null");
            printf(",\"needs_compare\":%s,\"counts\":{",
                   atoi(row[6]) ? "true" : "false");
            const char *p = row[7], *cls, *val;
            size_t cw, vw;
            for (int f2 = 1; next_count(&p, &cls, &cw, &val, &vw); f2 = 0)
                printf("%s\"%.*s\":%.*s", f2 ? "" : ",", (int)cw, cls,
                       (int)vw, val);
            printf("}}");
        } else {
            printf("%-20s %-9s %8s %-26s %-26s %s %s\n", row[0],
                   stage_name(stage), row[2], row[3],
                   *row[5] ? row[5] : "-", atoi(row[6]) ? "yes" : "no",
                   row[4]);
            if (*row[7])
                printf("%20s %s\n", "", row[7]);
        }
        first = 0;
    }
    mysql_free_result(r);
    if (e->o->json)
        printf("]}\n");
    return EXIT_OKAY;
}

static int migrate_mismatches(const cmd_env *e)
{
    uint64_t shop = 0;
    if (e->nargs > 2)
        return usage_fail("migrate mismatches takes at most one SHOP", NULL);
    if (e->nargs == 2 && parse_u64(e->args[1], &shop))
        return usage_fail("bad shop id", e->args[1]);
    char q[1024], where[64] = "";
    if (e->nargs == 2)
        snprintf(where, sizeof where, " WHERE shop_id = %" PRIu64, shop);
    snprintf(q, sizeof q,
             "SELECT shop_id, seen_at, class, op, stage, checkout_token, "
             "item_id, location_id, quantity, old_code, new_code FROM "
             "rsv_migration_mismatch%s ORDER BY seen_at DESC, shop_id, slot "
             "LIMIT 1000", where);
    MYSQL_RES *r = query_rows(e->conn, q);
    if (!r)
        return db_fail(e->o, e->conn, "reading the mismatches");
    static const char *ops[] = {"?", "reserve", "claim", "release"};
    MYSQL_ROW row;
    int n = 0;
    if (e->o->json)
        printf("{\"mismatches\":[");
    else
        printf("%-26s %-12s %-26s %-8s %-8s %-20s %s\n", "SEEN", "SHOP",
               "CLASS", "OP", "STAGE", "TOKEN", "ITEM LOC QTY  OLD -> NEW");
    while ((row = mysql_fetch_row(r)) != NULL) {
        unsigned long *len = mysql_fetch_lengths(r);
        int op = atoi(row[3]), oc = atoi(row[9]), nc = atoi(row[10]);
        const char *opn = op >= 1 && op <= 3 ? ops[op] : ops[0];
        if (e->o->json) {
            printf("%s{\"shop_id\":%s,\"seen_at\":\"%s\",\"class\":\"%s\","
                   "\"op\":\"%s\",\"stage\":\"%s\",\"token\":",
                   n ? "," : "", row[0], row[1], row[2], opn,
                   stage_name(atoi(row[4])));
            json_str(row[5], len[5]);
            printf(",\"item_id\":%s,\"location_id\":%s,\"quantity\":%s,"
                   "\"old\":\"%s\",\"new\":\"%s\"}", row[6], row[7], row[8],
                   code_name(oc), code_name(nc));
        } else {
            char tok[2 * 128 + 3];
            int printable = 1;
            for (unsigned long i = 0; i < len[5]; i++)
                if (row[5][i] < 0x21 || row[5][i] > 0x7e)
                    printable = 0;
            if (printable)
                snprintf(tok, sizeof tok, "%.*s", (int)len[5], row[5]);
            else {
                strcpy(tok, "0x");
                for (unsigned long i = 0; i < len[5] && i < 128; i++)
                    snprintf(tok + 2 + 2 * i, 3, "%02x",
                             (unsigned char)row[5][i]);
            }
            printf("%-26s %-12s %-26s %-8s %-8s %-20s %s %s %s  %s -> %s\n",
                   row[1], row[0], row[2], opn, stage_name(atoi(row[4])), tok,
                   row[6], row[7], row[8], code_name(oc), code_name(nc));
        }
        n++;
    }
    mysql_free_result(r);
    if (e->o->json)
        printf("]}\n");
    else
        printf("%d mismatch(es)\n", n);
    return EXIT_OKAY;
}

/* The operator compared the shops' stock in both stores and mended it:
 * clear their needs_compare mark (it is not a stage: no version). */
static int migrate_compared(const cmd_env *e)
{
    if (e->nargs != 2)
        return usage_fail("migrate compared takes SHOP[,SHOP...]", NULL);
    uint64_t ids_[256];
    int n = parse_shops(e->args[1], ids_, 256, 0);
    if (n < 0)
        return EXIT_USAGE;
    char q[128];
    int cleared = 0;
    for (int i = 0; i < n; i++) {
        snprintf(q, sizeof q, "UPDATE rsv_migration_stage SET needs_compare "
                 "= 0 WHERE shop_id = %" PRIu64 " AND needs_compare = 1",
                 ids_[i]);
        if (sql(e, q) != 0)
            return db_fail(e->o, e->conn, "clearing a compare mark");
        cleared += (int)mysql_affected_rows(e->conn);
    }
    if (e->o->json)
        printf("{\"cleared\":%d}\n", cleared);
    else
        printf("%d shop(s) no longer marked for a compare\n", cleared);
    return EXIT_OKAY;
}

int cmd_migrate(const cmd_env *e)
{
    const char *sub = e->nargs > 0 ? e->args[0] : "";
    if (e->o->prometheus && strcmp(sub, "show") != 0)
        return usage_fail("--prometheus only applies to migrate show", NULL);
    if (e->o->prometheus && e->o->json)
        return usage_fail("give --json or --prometheus, not both", NULL);
    if ((e->o->reason || e->o->max_ttl_s >= 0) &&
        !one_of(sub, "set percent"))
        return usage_fail("--reason and --max-ttl only apply to migrate set "
                          "and migrate percent", NULL);
    if (strcmp(sub, "compare") != 0 &&
        (e->o->csv || e->o->query || e->o->redis || e->o->pattern ||
         e->o->settle_s >= 0 || e->o->rate))
        return usage_fail("--csv, --query, --redis, --pattern, --settle and "
                          "--rate only apply to migrate compare", NULL);
    if (strcmp(sub, "show") == 0)
        return migrate_show(e);
    if (strcmp(sub, "set") == 0)
        return migrate_set(e);
    if (strcmp(sub, "percent") == 0)
        return migrate_percent(e);
    if (strcmp(sub, "mismatches") == 0)
        return migrate_mismatches(e);
    if (strcmp(sub, "compared") == 0)
        return migrate_compared(e);
    if (strcmp(sub, "compare") == 0) {
        if (e->nargs != 1)
            return usage_fail("migrate compare takes options only", NULL);
        return cmd_migrate_compare(e);
    }
    return usage_fail("migrate takes show, set, percent, mismatches, "
                      "compare or compared",
                      e->nargs ? sub : NULL);
}
