/*
 * connections.c - rsv-admin connections: who holds the server's
 * connections and transactions, grouped by statement tag.
 *
 * Every statement of the library carries a comment "/" "* conn_tag:NAME
 * *" "/" (the prefix is rsv_options.conn_tag_prefix); an application that
 * tags its own statements the same way is named beside it.  A running
 * session is named by the statement it runs (the process list shows it);
 * a session between statements, idle inside a transaction it holds open,
 * only by the last tagged statement it sent, which the server keeps only
 * in performance_schema's statement history (MariaDB: performance_schema
 * and its events_statements_current/history consumers on; MySQL: on by
 * default).  Without it such sessions are "(unknown)".  Lock waits come
 * from InnoDB's own tables: information_schema.INNODB_LOCK_WAITS
 * (MariaDB), performance_schema.data_lock_waits (MySQL 8).  Reading other
 * accounts' sessions needs the PROCESS privilege.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"

enum { ST_RUNNING, ST_LOCK_WAIT, ST_IDLE_TRX, ST_IDLE, N_ST };
static const char *const state_names[N_ST] = {
    "running", "lock_wait", "idle_in_transaction", "idle"};
static const char *const state_words[N_ST] = {
    "running", "waiting for a lock", "idle in a transaction", "idle"};

#define TAG_MAX 64
#define UNTAGGED "(untagged)"
#define UNKNOWN "(unknown)"

typedef struct session {
    uint64_t id;
    char user[80], host[80], db[80];
    char tag[TAG_MAX];
    const char *tag_from; /* "statement", "history" or "none" */
    int state;
    double stmt_s;    /* the running statement's time so far */
    double trx_s;     /* age of its transaction; -1: none */
    double wait_s;    /* how long it has waited for a lock; -1: not */
    char trx_id[24];
    char info[256];   /* the running statement, cut */
} session;

typedef struct wait_edge {
    uint64_t waiting, blocking; /* session ids */
} wait_edge;

typedef struct snapshot {
    session *s;
    size_t n;
    wait_edge *w;
    size_t nw;
    int history;      /* performance_schema can name idle sessions */
    char history_why[160];
} snapshot;

/* The tag in a statement's text: NAME of the first comment that starts
 * with the prefix ("/" "*", blanks, prefix, NAME); 0 when there is none. */
static int find_tag(const char *text, const char *prefix, char *tag)
{
    size_t pl = strlen(prefix);
    for (const char *p = text ? strstr(text, "/*") : NULL; p;
         p = strstr(p + 2, "/*")) {
        const char *q = p + 2;
        while (*q == ' ' || *q == '\t' || *q == '\n')
            q++;
        if (strncmp(q, prefix, pl) != 0)
            continue;
        q += pl;
        size_t n = strspn(q, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrst"
                             "uvwxyz0123456789_:.-");
        if (n == 0 || n >= TAG_MAX)
            continue;
        memcpy(tag, q, n);
        tag[n] = '\0';
        return 1;
    }
    return 0;
}

static void copy_cut(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src ? src : "");
    for (char *p = dst; *p; p++)
        if (*p == '\n' || *p == '\r' || *p == '\t')
            *p = ' ';
}

static session *find_session(const snapshot *sn, uint64_t id)
{
    for (size_t i = 0; i < sn->n; i++)
        if (sn->s[i].id == id)
            return &sn->s[i];
    return NULL;
}

/* The tag of the waiting (which 0) or blocking (1) session of a lock
 * wait; a session that ended since is "(unknown)". */
static const char *edge_tag(const snapshot *sn, size_t i, int which)
{
    const session *s = find_session(sn, which ? sn->w[i].blocking
                                              : sn->w[i].waiting);
    return s ? s->tag : UNKNOWN;
}

/* Sessions and their transactions, but not this one and not the server's
 * own threads. */
static const char SQL_SESSIONS[] =
    "/* conn_tag:admin */ SELECT p.ID, p.USER, p.HOST, COALESCE(p.DB, ''), "
    "p.COMMAND, COALESCE(p.TIME_MS, p.TIME * 1000) / 1000, p.INFO, "
    "t.trx_id, t.trx_state, TIMESTAMPDIFF(MICROSECOND, t.trx_started, "
    "NOW(6)) / 1e6, TIMESTAMPDIFF(MICROSECOND, t.trx_wait_started, NOW(6)) "
    "/ 1e6 FROM information_schema.PROCESSLIST p LEFT JOIN "
    "information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID "
    "WHERE p.ID <> CONNECTION_ID() AND p.COMMAND NOT IN ('Daemon', "
    "'Binlog Dump', 'Binlog Dump GTID', 'Slave_IO', 'Slave_SQL', "
    "'Slave_worker') AND p.USER NOT IN ('system user', 'event_scheduler') "
    "ORDER BY p.ID";

static const char SQL_WAITS_MARIADB[] =
    "/* conn_tag:admin */ SELECT DISTINCT r.trx_mysql_thread_id, "
    "b.trx_mysql_thread_id FROM information_schema.INNODB_LOCK_WAITS w "
    "JOIN information_schema.INNODB_TRX r ON r.trx_id = w.requesting_trx_id "
    "JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id";

static const char SQL_WAITS_MYSQL[] =
    "/* conn_tag:admin */ SELECT DISTINCT r.trx_mysql_thread_id, "
    "b.trx_mysql_thread_id FROM performance_schema.data_lock_waits w "
    "JOIN information_schema.INNODB_TRX r ON r.trx_id = "
    "w.REQUESTING_ENGINE_TRANSACTION_ID JOIN information_schema.INNODB_TRX "
    "b ON b.trx_id = w.BLOCKING_ENGINE_TRANSACTION_ID";

/* Whether the statement history can name idle sessions: the server's
 * performance_schema, and the two consumers that keep each thread's last
 * statements (MariaDB has them off by default). */
static void check_history(const cmd_env *e, snapshot *sn)
{
    MYSQL_RES *r = query_rows(e->conn, "/* conn_tag:admin */ SELECT "
                              "@@performance_schema, (SELECT COUNT(*) FROM "
                              "performance_schema.setup_consumers WHERE "
                              "NAME IN ('events_statements_current', "
                              "'events_statements_history') AND ENABLED = "
                              "'YES')");
    MYSQL_ROW row = r ? mysql_fetch_row(r) : NULL;
    if (!row) {
        snprintf(sn->history_why, sizeof sn->history_why,
                 "performance_schema cannot be read (%s)",
                 mysql_error(e->conn));
    } else if (!row[0] || strcmp(row[0], "1") != 0) {
        snprintf(sn->history_why, sizeof sn->history_why,
                 "performance_schema is off");
    } else if (!row[1] || strcmp(row[1], "2") != 0) {
        snprintf(sn->history_why, sizeof sn->history_why,
                 "performance_schema's events_statements_current and "
                 "events_statements_history consumers are not both on");
    } else {
        sn->history = 1;
    }
    if (r)
        mysql_free_result(r);
}

/* Name the sessions that run no tagged statement by the last tagged one
 * they sent. */
static int tags_from_history(const cmd_env *e, snapshot *sn)
{
    const char *prefix = e->o->tag_prefix ? e->o->tag_prefix : "conn_tag:";
    char q[1024];
    snprintf(q, sizeof q, "/* conn_tag:admin */ SELECT t.PROCESSLIST_ID, "
             "s.SQL_TEXT FROM performance_schema.threads t JOIN (SELECT "
             "THREAD_ID, EVENT_ID, SQL_TEXT FROM "
             "performance_schema.events_statements_current UNION ALL SELECT "
             "THREAD_ID, EVENT_ID, SQL_TEXT FROM "
             "performance_schema.events_statements_history) s ON s.THREAD_ID "
             "= t.THREAD_ID WHERE t.PROCESSLIST_ID IS NOT NULL AND "
             "LOCATE('%s', s.SQL_TEXT) > 0 ORDER BY t.PROCESSLIST_ID, "
             "s.EVENT_ID DESC", prefix);
    MYSQL_RES *r = query_rows(e->conn, q);
    if (!r)
        return -1;
    MYSQL_ROW row;
    uint64_t last = 0;
    int any = 0;
    while ((row = mysql_fetch_row(r))) {
        uint64_t id;
        if (parse_u64(row[0], &id) || (any && id == last))
            continue; /* the newest tagged statement of each comes first */
        char tag[TAG_MAX];
        session *s = find_session(sn, id);
        if (!s || strcmp(s->tag_from, "statement") == 0 ||
            !find_tag(row[1], prefix, tag))
            continue;
        last = id;
        any = 1;
        snprintf(s->tag, sizeof s->tag, "%s", tag);
        s->tag_from = "history";
    }
    mysql_free_result(r);
    for (size_t i = 0; i < sn->n; i++)
        if (strcmp(sn->s[i].tag_from, "none") == 0)
            snprintf(sn->s[i].tag, sizeof sn->s[i].tag, UNTAGGED);
    return 0;
}

static int read_waits(const cmd_env *e, snapshot *sn)
{
    MYSQL_RES *r = query_rows(e->conn, SQL_WAITS_MARIADB);
    if (!r && mysql_errno(e->conn) == 1109) /* ER_UNKNOWN_TABLE */
        r = query_rows(e->conn, SQL_WAITS_MYSQL);
    if (!r)
        return -1;
    size_t cap = (size_t)mysql_num_rows(r);
    sn->w = calloc(cap ? cap : 1, sizeof *sn->w);
    MYSQL_ROW row;
    while (sn->w && (row = mysql_fetch_row(r)) && sn->nw < cap) {
        wait_edge *w = &sn->w[sn->nw];
        if (parse_u64(row[0], &w->waiting) == 0 &&
            parse_u64(row[1], &w->blocking) == 0)
            sn->nw++;
    }
    mysql_free_result(r);
    return sn->w ? 0 : -1;
}

static int read_snapshot(const cmd_env *e, snapshot *sn)
{
    const char *prefix = e->o->tag_prefix ? e->o->tag_prefix : "conn_tag:";
    memset(sn, 0, sizeof *sn);
    MYSQL_RES *r = query_rows(e->conn, SQL_SESSIONS);
    if (!r)
        return db_fail(e->o, e->conn, "connections: reading the sessions");
    size_t cap = (size_t)mysql_num_rows(r);
    sn->s = calloc(cap ? cap : 1, sizeof *sn->s);
    if (!sn->s) {
        mysql_free_result(r);
        fprintf(stderr, "%s: out of memory\n", prog);
        return EXIT_ERROR;
    }
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(r)) && sn->n < cap) {
        session *s = &sn->s[sn->n];
        if (parse_u64(row[0], &s->id))
            continue;
        copy_cut(s->user, sizeof s->user, row[1]);
        copy_cut(s->host, sizeof s->host, row[2]);
        copy_cut(s->db, sizeof s->db, row[3]);
        int running = row[4] && strcmp(row[4], "Sleep") != 0;
        s->stmt_s = running && row[5] ? strtod(row[5], NULL) : 0;
        copy_cut(s->info, sizeof s->info, running ? row[6] : NULL);
        snprintf(s->trx_id, sizeof s->trx_id, "%s", row[7] ? row[7] : "");
        s->trx_s = row[7] && row[9] ? strtod(row[9], NULL) : -1;
        s->wait_s = row[8] && strcmp(row[8], "LOCK WAIT") == 0 && row[10]
                        ? strtod(row[10], NULL) : -1;
        s->state = s->wait_s >= 0 ? ST_LOCK_WAIT
                   : running      ? ST_RUNNING
                   : row[7]       ? ST_IDLE_TRX
                                  : ST_IDLE;
        if (running && find_tag(row[6], prefix, s->tag)) {
            s->tag_from = "statement";
        } else {
            s->tag_from = "none";
            snprintf(s->tag, sizeof s->tag, "%s", running ? UNTAGGED
                                                          : UNKNOWN);
        }
        sn->n++;
    }
    mysql_free_result(r);
    check_history(e, sn);
    if (sn->history && tags_from_history(e, sn) != 0) {
        sn->history = 0;
        snprintf(sn->history_why, sizeof sn->history_why,
                 "the statement history cannot be read (%s)",
                 mysql_error(e->conn));
    }
    if (read_waits(e, sn) != 0)
        return db_fail(e->o, e->conn, "connections: reading the lock waits");
    return EXIT_OKAY;
}

/* ---------------- grouped by tag ---------------- */

typedef struct tag_group {
    char tag[TAG_MAX];
    size_t count[N_ST];
    double oldest_trx_s; /* -1: no transaction */
} tag_group;

static int by_tag(const void *a, const void *b)
{
    return strcmp(((const tag_group *)a)->tag, ((const tag_group *)b)->tag);
}

/* The groups, ordered by tag (malloc'd; NULL when out of memory). */
static tag_group *group(const snapshot *sn, size_t *n_out)
{
    tag_group *g = calloc(sn->n ? sn->n : 1, sizeof *g);
    size_t n = 0;
    for (size_t i = 0; g && i < sn->n; i++) {
        const session *s = &sn->s[i];
        size_t k = 0;
        while (k < n && strcmp(g[k].tag, s->tag) != 0)
            k++;
        if (k == n) {
            snprintf(g[n].tag, sizeof g[n].tag, "%s", s->tag);
            g[n++].oldest_trx_s = -1;
        }
        g[k].count[s->state]++;
        if (s->trx_s > g[k].oldest_trx_s)
            g[k].oldest_trx_s = s->trx_s;
    }
    if (g)
        qsort(g, n, sizeof *g, by_tag);
    *n_out = n;
    return g;
}

/* ---------------- output ---------------- */

/* Oldest transaction first. */
static int by_age(const void *a, const void *b)
{
    double x = (*(const session *const *)a)->trx_s;
    double y = (*(const session *const *)b)->trx_s;
    return (x < y) - (x > y);
}

static void print_text(const snapshot *sn, const tag_group *g, size_t ng)
{
    size_t c[N_ST] = {0};
    for (size_t i = 0; i < sn->n; i++)
        c[sn->s[i].state]++;
    printf("sessions: %zu (%zu running, %zu waiting for a lock, %zu idle in "
           "a transaction, %zu idle)\n", sn->n, c[ST_RUNNING],
           c[ST_LOCK_WAIT], c[ST_IDLE_TRX], c[ST_IDLE]);
    if (sn->history)
        printf("idle sessions are named by their last tagged statement "
               "(performance_schema)\n");
    else
        printf("idle sessions cannot be named: %s (see rsv-admin(1))\n",
               sn->history_why);
    printf("\n%-32s %8s %9s %11s %6s %13s\n", "TAG", "RUNNING", "LOCK_WAIT",
           "IDLE_IN_TRX", "IDLE", "OLDEST_TRX_S");
    for (size_t i = 0; i < ng; i++) {
        printf("%-32s %8zu %9zu %11zu %6zu ", g[i].tag, g[i].count[0],
               g[i].count[1], g[i].count[2], g[i].count[3]);
        if (g[i].oldest_trx_s >= 0)
            printf("%13.3f\n", g[i].oldest_trx_s);
        else
            printf("%13s\n", "-");
    }
    /* the transactions open longest: what holds connections */
    const session **open = calloc(sn->n ? sn->n : 1, sizeof *open);
    size_t n_open = 0;
    for (size_t i = 0; open && i < sn->n; i++)
        if (sn->s[i].trx_s >= 0)
            open[n_open++] = &sn->s[i];
    if (open)
        qsort(open, n_open, sizeof *open, by_age);
    if (n_open)
        printf("\noldest open transactions:\n");
    for (size_t i = 0; i < n_open && i < 10; i++) {
        const session *s = open[i];
        printf("  connection %" PRIu64 " (%s@%s, %s, %s): open %.3f s", s->id,
               s->user, s->host, s->tag, state_words[s->state], s->trx_s);
        if (s->info[0])
            printf(": %.120s", s->info);
        putchar('\n');
    }
    if (n_open > 10)
        printf("  ... and %zu more\n", n_open - 10);
    free(open);
    if (sn->nw)
        printf("\nlock waits:\n");
    for (size_t i = 0; i < sn->nw; i++) {
        const session *w = find_session(sn, sn->w[i].waiting);
        const session *b = find_session(sn, sn->w[i].blocking);
        printf("  connection %" PRIu64 " (%s) ", sn->w[i].waiting,
               w ? w->tag : UNKNOWN);
        if (w && w->wait_s >= 0)
            printf("has waited %.3f s ", w->wait_s);
        printf("for a lock held by connection %" PRIu64 " (%s", sn->w[i].blocking,
               b ? b->tag : UNKNOWN);
        if (b)
            printf(", %s, transaction open %.3f s", state_words[b->state],
                   b->trx_s);
        printf(")\n");
        if (w && w->info[0])
            printf("    waiting: %.160s\n", w->info);
    }
}

static void json_double(double v)
{
    if (v < 0)
        printf("null");
    else
        printf("%.3f", v);
}

static void print_json(const snapshot *sn, const tag_group *g, size_t ng)
{
    printf("{\"statement_history\":%s", sn->history ? "true" : "false");
    if (!sn->history) {
        printf(",\"statement_history_off\":");
        json_cstr(sn->history_why);
    }
    printf(",\"tags\":[");
    for (size_t i = 0; i < ng; i++) {
        printf("%s{\"tag\":", i ? "," : "");
        json_cstr(g[i].tag);
        for (int st = 0; st < N_ST; st++)
            printf(",\"%s\":%zu", state_names[st], g[i].count[st]);
        printf(",\"oldest_transaction_s\":");
        json_double(g[i].oldest_trx_s);
        putchar('}');
    }
    printf("],\"sessions\":[");
    for (size_t i = 0; i < sn->n; i++) {
        const session *s = &sn->s[i];
        printf("%s{\"id\":%" PRIu64 ",\"user\":", i ? "," : "", s->id);
        json_cstr(s->user);
        printf(",\"host\":");
        json_cstr(s->host);
        printf(",\"db\":");
        json_cstr(s->db);
        printf(",\"tag\":");
        json_cstr(s->tag);
        printf(",\"tag_from\":\"%s\",\"state\":\"%s\",\"statement_s\":",
               s->tag_from, state_names[s->state]);
        json_double(s->state == ST_IDLE || s->state == ST_IDLE_TRX
                        ? -1 : s->stmt_s);
        printf(",\"transaction_s\":");
        json_double(s->trx_s);
        printf(",\"lock_wait_s\":");
        json_double(s->wait_s);
        printf(",\"statement\":");
        if (s->info[0])
            json_cstr(s->info);
        else
            printf("null");
        putchar('}');
    }
    printf("],\"lock_waits\":[");
    for (size_t i = 0; i < sn->nw; i++) {
        const session *w = find_session(sn, sn->w[i].waiting);
        const session *b = find_session(sn, sn->w[i].blocking);
        printf("%s{\"waiting\":%" PRIu64 ",\"waiting_tag\":", i ? "," : "",
               sn->w[i].waiting);
        json_cstr(w ? w->tag : UNKNOWN);
        printf(",\"wait_s\":");
        json_double(w ? w->wait_s : -1);
        printf(",\"blocking\":%" PRIu64 ",\"blocking_tag\":",
               sn->w[i].blocking);
        json_cstr(b ? b->tag : UNKNOWN);
        printf(",\"blocking_state\":\"%s\"}",
               b ? state_names[b->state] : "gone");
    }
    printf("]}\n");
}

static void print_prometheus(FILE *f, const snapshot *sn,
                             const tag_group *g, size_t ng)
{
    prom_family(f, "libreserve_connections", "gauge",
                "Server sessions by statement tag and state: running, "
                "lock_wait, idle_in_transaction, idle.");
    for (size_t i = 0; i < ng; i++)
        for (int st = 0; st < N_ST; st++) {
            fputs("libreserve_connections{tag=", f);
            prom_label_value(f, g[i].tag);
            fprintf(f, ",state=\"%s\"} %zu\n", state_names[st],
                    g[i].count[st]);
        }
    prom_family(f, "libreserve_connections_oldest_transaction_seconds",
                "gauge", "Age of the oldest open transaction among the "
                "sessions of a tag.");
    for (size_t i = 0; i < ng; i++) {
        if (g[i].oldest_trx_s < 0)
            continue;
        fputs("libreserve_connections_oldest_transaction_seconds{tag=", f);
        prom_label_value(f, g[i].tag);
        fprintf(f, "} %.3f\n", g[i].oldest_trx_s);
    }
    /* one series per (waiting, blocking) pair of tags, in each family */
    static const char *const fam[2][2] = {
        {"libreserve_lock_waits",
         "Sessions waiting for a row lock, by the tag of the waiting "
         "session and of the session holding the lock."},
        {"libreserve_lock_wait_oldest_seconds",
         "The longest of those waits so far, by the same tags."},
    };
    for (int k = 0; k < 2; k++) {
        prom_family(f, fam[k][0], "gauge", fam[k][1]);
        for (size_t i = 0; i < sn->nw; i++) {
            const char *wt = edge_tag(sn, i, 0), *bt = edge_tag(sn, i, 1);
            size_t count = 0, first = i;
            double oldest = 0;
            for (size_t j = 0; j < sn->nw; j++) {
                if (strcmp(edge_tag(sn, j, 0), wt) != 0 ||
                    strcmp(edge_tag(sn, j, 1), bt) != 0)
                    continue;
                if (j < first)
                    first = j;
                count++;
                const session *w = find_session(sn, sn->w[j].waiting);
                if (w && w->wait_s > oldest)
                    oldest = w->wait_s;
            }
            if (first < i)
                continue; /* the pair was written at its first edge */
            fprintf(f, "%s{waiting_tag=", fam[k][0]);
            prom_label_value(f, wt);
            fputs(",blocking_tag=", f);
            prom_label_value(f, bt);
            if (k == 0)
                fprintf(f, "} %zu\n", count);
            else
                fprintf(f, "} %.3f\n", oldest);
        }
    }
    prom_family(f, "libreserve_connections_statement_history", "gauge",
                "1 when performance_schema's statement history names idle "
                "sessions, 0 when they show as (unknown).");
    fprintf(f, "libreserve_connections_statement_history %d\n",
            sn->history);
}

int cmd_connections(const cmd_env *e)
{
    const opts *o = e->o;
    if (e->nargs != 0)
        return usage_fail("connections takes no argument", NULL);
    snapshot sn;
    int st = read_snapshot(e, &sn);
    size_t ng = 0;
    tag_group *g = st ? NULL : group(&sn, &ng);
    if (!st && !g) {
        fprintf(stderr, "%s: out of memory\n", prog);
        st = EXIT_ERROR;
    }
    if (!st) {
        if (o->prometheus || o->metrics_file) {
            prom_out p;
            if ((st = prom_open(&p, o->metrics_file)) == EXIT_OKAY) {
                print_prometheus(p.f, &sn, g, ng);
                st = prom_close(&p, 1);
            }
        } else if (o->json) {
            print_json(&sn, g, ng);
        } else {
            print_text(&sn, g, ng);
        }
    }
    free(g);
    free(sn.s);
    free(sn.w);
    return st;
}
