/*
 * compare.c - rsv-admin migrate compare: libreserve's available units per
 * (shop, item, location) against the old store's, from a CSV file, a
 * query on the application's tables, or Redis counters found by a key
 * pattern (a small client of the Redis protocol of its own: the tool
 * needs no Redis library for one SCAN and an MGET a chunk).
 *
 * Live traffic keeps both stores moving, and the side that does not
 * decide follows through the handles' queues: a key that differs is
 * checked again --settle seconds later (by then the queues have passed
 * the change that was in flight), three times; only a key that differs
 * every time is drift.  Keys are compared in key order, in chunks, each
 * committed with its place and its differences (rsv_import_progress,
 * rsv_compare_drift), so an interrupted compare goes on where it stopped.
 * Every pass costs statements and commits by the chunk, never by the key:
 * a chunk's two sides are read in one statement each (Redis: one MGET,
 * just before libreserve's side, so that a long first pass does not
 * compare libreserve now with Redis minutes ago) and its results written
 * in one transaction of multi-row statements.
 * A chunk also covers the keys libreserve has in the source's shops
 * between the chunk's first and last key (after the last one: to the end
 * of its shop) that the source lacks: stock libreserve would sell once
 * primary that the old store does not know.
 *
 * Three classes of drift (keys_agree decides what is none):
 *   differ             both stores have the key, with other units
 *   not_in_libreserve  only the old store has it
 *   not_in_old_store   only libreserve has it, with units available
 */
#define _XOPEN_SOURCE 700
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "admin.h"

#define CHUNK 1000
#define ROUNDS 3

/* ---------------- a small Redis client ---------------- */

typedef struct redis {
    int fd;
    char buf[65536];
    size_t len, pos;
} redis;

typedef struct rreply {
    int type;            /* '+', '-', ':', '$', '*', or 0 for nil */
    long long num;
    char *str;           /* '+', '-', '$' (NUL-terminated) */
    size_t n;            /* '*': elements */
    struct rreply *el;
} rreply;

static void rfree(rreply *r)
{
    if (!r)
        return;
    free(r->str);
    for (size_t i = 0; i < r->n; i++)
        rfree(&r->el[i]);
    free(r->el);
    r->str = NULL;
    r->el = NULL;
    r->n = 0;
}

static int rfill(redis *c)
{
    if (c->pos < c->len)
        return 0;
    ssize_t k;
    do
        k = read(c->fd, c->buf, sizeof c->buf);
    while (k < 0 && errno == EINTR);
    if (k <= 0)
        return -1;
    c->len = (size_t)k;
    c->pos = 0;
    return 0;
}

static int rline(redis *c, char *out, size_t cap)
{
    size_t n = 0;
    for (;;) {
        if (rfill(c))
            return -1;
        char ch = c->buf[c->pos++];
        if (ch == '\r')
            continue;
        if (ch == '\n')
            break;
        if (n + 1 < cap)
            out[n++] = ch;
    }
    out[n] = 0;
    return 0;
}

static int rread(redis *c, rreply *r)
{
    char line[128];
    memset(r, 0, sizeof *r);
    if (rline(c, line, sizeof line))
        return -1;
    r->type = line[0];
    r->num = strtoll(line + 1, NULL, 10);
    if (r->type == '+' || r->type == '-') {
        r->str = strdup(line + 1);
        return r->str ? 0 : -1;
    }
    if (r->type == ':')
        return 0;
    if (r->type == '$') {
        if (r->num < 0) {
            r->type = 0;
            return 0;
        }
        r->str = malloc((size_t)r->num + 1);
        if (!r->str)
            return -1;
        for (long long i = 0; i < r->num + 2; i++) {
            if (rfill(c))
                return -1;
            char ch = c->buf[c->pos++];
            if (i < r->num)
                r->str[i] = ch;
        }
        r->str[r->num] = 0;
        return 0;
    }
    if (r->type == '*') {
        if (r->num < 0) {
            r->type = 0;
            return 0;
        }
        r->n = (size_t)r->num;
        r->el = calloc(r->n ? r->n : 1, sizeof *r->el);
        if (!r->el)
            return -1;
        for (size_t i = 0; i < r->n; i++)
            if (rread(c, &r->el[i]))
                return -1;
        return 0;
    }
    return -1;
}

/* Send a command of argc arguments; 0 or -1. */
static int rsend(redis *c, int argc, const char *const *argv)
{
    size_t cap = 64;
    for (int i = 0; i < argc; i++)
        cap += strlen(argv[i]) + 32;
    char *b = malloc(cap);
    if (!b)
        return -1;
    size_t n = (size_t)snprintf(b, cap, "*%d\r\n", argc);
    for (int i = 0; i < argc; i++)
        n += (size_t)snprintf(b + n, cap - n, "$%zu\r\n%s\r\n",
                              strlen(argv[i]), argv[i]);
    size_t off = 0;
    while (off < n) {
        ssize_t k = write(c->fd, b + off, n - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            free(b);
            return -1;
        }
        off += (size_t)k;
    }
    free(b);
    return 0;
}

static int rconnect(redis *c, const char *hostport)
{
    char host[256];
    const char *colon = strrchr(hostport, ':');
    if (!colon || (size_t)(colon - hostport) >= sizeof host)
        return -1;
    memcpy(host, hostport, (size_t)(colon - hostport));
    host[colon - hostport] = 0;
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0)
        return -1;
    c->fd = -1;
    for (struct addrinfo *a = ai; a && c->fd < 0; a = a->ai_next) {
        c->fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (c->fd >= 0 && connect(c->fd, a->ai_addr, a->ai_addrlen) != 0) {
            close(c->fd);
            c->fd = -1;
        }
    }
    freeaddrinfo(ai);
    c->len = c->pos = 0;
    return c->fd >= 0 ? 0 : -1;
}

/* ---------------- the Redis key pattern ---------------- */

/* "stock:{shop}:{item}:{location}": SCAN's glob, and the three ids out
 * of a key (each placeholder takes the digits there). */
static void pattern_glob(const char *pat, char *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = pat; *p && n + 2 < cap; p++) {
        if (*p == '{') {
            const char *e = strchr(p, '}');
            if (e) {
                out[n++] = '*';
                p = e;
                continue;
            }
        }
        out[n++] = *p;
    }
    out[n] = 0;
}

static int pattern_parse(const char *pat, const char *key, uint64_t *shop,
                         uint64_t *item, uint64_t *loc)
{
    int seen = 0;
    const char *k = key;
    for (const char *p = pat; *p; p++) {
        if (*p == '{') {
            const char *e = strchr(p, '}');
            if (!e)
                return -1;
            size_t nl = (size_t)(e - p - 1);
            uint64_t *dst = nl == 4 && !strncmp(p + 1, "shop", 4) ? shop
                            : nl == 4 && !strncmp(p + 1, "item", 4) ? item
                            : nl == 8 && !strncmp(p + 1, "location", 8) ? loc
                                                                       : NULL;
            if (!dst || !isdigit((unsigned char)*k))
                return -1;
            char *end;
            errno = 0;
            *dst = strtoull(k, &end, 10);
            if (errno)
                return -1;
            k = end;
            seen |= dst == shop ? 1 : dst == item ? 2 : 4;
            p = e;
            continue;
        }
        if (*k++ != *p)
            return -1;
    }
    return *k || seen != 7 ? -1 : 0;
}

static void key_of(const char *pat, const level *l, char *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = pat; *p && n + 24 < cap; p++) {
        if (*p == '{') {
            const char *e = strchr(p, '}');
            uint64_t v = !strncmp(p, "{shop}", 6)   ? l->shop
                         : !strncmp(p, "{item}", 6) ? l->item
                                                    : l->loc;
            n += (size_t)snprintf(out + n, cap - n, "%" PRIu64, v);
            p = e;
            continue;
        }
        out[n++] = *p;
    }
    out[n] = 0;
}

/* The values of keys (MGET, one a chunk of keys); NULL = absent.  A
 * failure is said on stderr. */
static int redis_values(redis *c, const char *pat, const level *ls, size_t n,
                        int64_t *val, unsigned char *has)
{
    enum { BATCH = CHUNK };
    char (*keys)[160] = malloc(BATCH * sizeof *keys);
    const char **argv = malloc((BATCH + 1) * sizeof *argv);
    int rc = keys && argv ? 0 : -1;
    for (size_t i = 0; !rc && i < n; i += BATCH) {
        size_t m = n - i < BATCH ? n - i : BATCH;
        argv[0] = "MGET";
        for (size_t j = 0; j < m; j++) {
            key_of(pat, &ls[i + j], keys[j], sizeof keys[j]);
            argv[j + 1] = keys[j];
        }
        rreply r;
        if (rsend(c, (int)m + 1, argv) || rread(c, &r) || r.type != '*' ||
            r.n != m) {
            rc = -1;
            break;
        }
        for (size_t j = 0; j < m; j++) {
            has[i + j] = r.el[j].type == '$';
            val[i + j] = has[i + j] ? strtoll(r.el[j].str, NULL, 10) : 0;
        }
        rfree(&r);
    }
    free(keys);
    free(argv);
    if (rc != 0)
        fprintf(stderr, "%s: migrate compare: Redis MGET failed\n", prog);
    return rc;
}

static int read_redis(const cmd_env *e, redis *c, levels *ls)
{
    char glob[256];
    pattern_glob(e->o->pattern, glob, sizeof glob);
    char cursor[32] = "0";
    uint64_t n = 0;
    do {
        const char *argv[] = {"SCAN", cursor, "MATCH", glob, "COUNT", "1000"};
        rreply r;
        if (rsend(c, 6, argv) || rread(c, &r) || r.type != '*' || r.n != 2 ||
            r.el[0].type != '$' || r.el[1].type != '*') {
            fprintf(stderr, "%s: migrate compare: Redis SCAN failed\n", prog);
            return EXIT_ERROR;
        }
        snprintf(cursor, sizeof cursor, "%s", r.el[0].str);
        for (size_t i = 0; i < r.el[1].n; i++) {
            level l = {0};
            l.line = ++n;
            if (pattern_parse(e->o->pattern, r.el[1].el[i].str, &l.shop,
                              &l.item, &l.loc) == 0 &&
                levels_push(ls, &l) != 0) {
                rfree(&r);
                return EXIT_ERROR;
            }
        }
        rfree(&r);
    } while (strcmp(cursor, "0") != 0);
    /* the values are read chunk by chunk, right before libreserve's */
    return 0;
}

/* ---------------- the comparison ---------------- */

static int cmp_level(const void *a, const void *b)
{
    const level *x = a, *y = b;
    if (x->shop != y->shop)
        return x->shop < y->shop ? -1 : 1;
    if (x->item != y->item)
        return x->item < y->item ? -1 : 1;
    return x->loc < y->loc ? -1 : x->loc > y->loc;
}

/* libreserve's available units of keys [0, n) into val/has. */
static int new_values(const cmd_env *e, const level *ls, size_t n,
                      int64_t *val, unsigned char *has)
{
    for (size_t from = 0; from < n; from += CHUNK) {
        size_t to = from + CHUNK < n ? from + CHUNK : n;
        size_t cap = 256 + (to - from) * 72, len;
        char *q = malloc(cap);
        if (!q)
            return -1;
        len = (size_t)snprintf(q, cap, "SELECT shop_id, item_id, location_id, "
                               "on_hand - held FROM rsv_stock WHERE (shop_id, "
                               "item_id, location_id) IN (");
        for (size_t i = from; i < to; i++)
            len += (size_t)snprintf(q + len, cap - len,
                                    "%s(%" PRIu64 ",%" PRIu64 ",%" PRIu64 ")",
                                    i > from ? "," : "", ls[i].shop,
                                    ls[i].item, ls[i].loc);
        snprintf(q + len, cap - len, ")");
        MYSQL_RES *r = query_rows(e->conn, q);
        free(q);
        if (!r)
            return -1;
        for (size_t i = from; i < to; i++)
            has[i] = 0;
        MYSQL_ROW row;
        while ((row = mysql_fetch_row(r)) != NULL) {
            level k = {strtoull(row[0], NULL, 10), strtoull(row[1], NULL, 10),
                       strtoull(row[2], NULL, 10), 0, 0};
            const level *hit = bsearch(&k, ls + from, to - from, sizeof *ls,
                                       cmp_level);
            if (hit) {
                has[hit - ls] = 1;
                val[hit - ls] = strtoll(row[3], NULL, 10);
            }
        }
        mysql_free_result(r);
    }
    return 0;
}

/* Do the two stores agree on a key?  A key the old store lacks agrees
 * with libreserve's only when libreserve has nothing available there
 * either (nothing to sell on either side); a key libreserve lacks is
 * drift whatever the old store has (libreserve refuses it outright). */
static int keys_agree(int has_old, int64_t old, int has_new, int64_t new_)
{
    if (has_old && has_new)
        return old == new_;
    if (has_old)
        return 0;
    return !has_new || new_ == 0;
}

/* The class of a drifted key, by which side has it (NULL: none). */
static const char *drift_class(const char *old, const char *new_)
{
    return !old ? "not_in_old_store" : !new_ ? "not_in_libreserve" : "differ";
}

/* "(shop_id, item_id, location_id) OP (k)" spelled out, for the index. */
static size_t key_cond(char *out, size_t cap, const level *k, const char *lt,
                       const char *le)
{
    return (size_t)snprintf(out, cap, "(shop_id %s %" PRIu64 " OR (shop_id = "
                            "%" PRIu64 " AND (item_id %s %" PRIu64 " OR "
                            "(item_id = %" PRIu64 " AND location_id %s %"
                            PRIu64 "))))", lt, k->shop, k->shop, lt, k->item,
                            k->item, le, k->loc);
}

static void key_text(const level *l, char *out, size_t cap)
{
    snprintf(out, cap, "%" PRIu64 ":%" PRIu64 ":%" PRIu64, l->shop, l->item,
             l->loc);
}

static void sql_i64_or_null(char *out, size_t cap, int has, int64_t v)
{
    if (has)
        snprintf(out, cap, "%" PRId64, v);
    else
        snprintf(out, cap, "NULL");
}

/* A statement built row by row: a chunk's rows of drift go to the server
 * in one statement, not one each (under live traffic, rechecks write tens
 * of thousands of rows). */
typedef struct sbuf {
    char *s;
    size_t n, cap;
    size_t rows;    /* rows added since sb_start */
    int failed;     /* out of memory: nothing to send */
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...)
{
    while (!b->failed) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->failed = 1;
            break;
        }
        if (b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            break;
        }
        size_t cap = b->cap ? b->cap : 16384;
        while (cap <= b->n + (size_t)k)
            cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s)
            b->failed = 1;
        else {
            b->s = s;
            b->cap = cap;
        }
    }
}

/* Begin the statement again with its head. */
static void sb_start(sbuf *b, const char *head)
{
    b->n = 0;
    b->rows = 0;
    if (b->cap)
        b->s[0] = 0;
    sb_add(b, "%s", head);
}

/* Send it; 0, or -1 with the error on the connection (or ENOMEM). */
static int sb_send(const cmd_env *e, const sbuf *b)
{
    if (b->failed) {
        fprintf(stderr, "%s: migrate compare: out of memory\n", prog);
        return -1;
    }
    return sql(e, b->s);
}

/* One row of rsv_compare_drift: a key and each side's units (absent:
 * NULL). */
static void drift_row(sbuf *b, const char *src_esc, const level *k,
                      int has_old, int64_t old, int has_new, int64_t new_)
{
    char ov[32], nv[32];
    sql_i64_or_null(ov, sizeof ov, has_old, old);
    sql_i64_or_null(nv, sizeof nv, has_new, new_);
    sb_add(b, "%s('%s', %" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %s, %s, "
           "NOW(6))", b->rows++ ? "," : "", src_esc, k->shop, k->item, k->loc,
           ov, nv);
}

/* Pass 1's read of libreserve for the chunk of keys [from, to), in one
 * statement: every key libreserve has in the source's shops after key
 * from - 1 (from 0: the first shop's start) up to key to - 1 (to n: the
 * end of its shop).  The chunk's keys get their units in val/has; the
 * others, with units available, are keys the source lacks, added to the
 * chunk's rows of drift.  One range of the primary key, where a list of
 * the chunk's keys and a second statement for the range would read each
 * key twice.  0, or -1 with the error on the connection. */
static int chunk_values(const cmd_env *e, const level *ls, size_t n,
                        size_t from, size_t to, int64_t *val,
                        unsigned char *has, const char *src_esc, sbuf *rows)
{
    size_t first = from ? from - 1 : from;
    /* the fixed text and two key conditions (six 20-digit ids) fit in
     * 1024; each shop of the list takes at most 21 */
    size_t cap = 1024 + (to - first) * 24, len;
    char *q = malloc(cap);
    if (!q)
        return -1;
    len = (size_t)snprintf(q, cap, "SELECT shop_id, item_id, location_id, "
                           "on_hand - held FROM rsv_stock WHERE shop_id IN (");
    for (size_t i = first; i < to; i++)
        if (i == first || ls[i].shop != ls[i - 1].shop)
            len += (size_t)snprintf(q + len, cap - len, "%s%" PRIu64,
                                    i > first ? "," : "", ls[i].shop);
    len += (size_t)snprintf(q + len, cap - len, ")");
    if (from) {
        len += (size_t)snprintf(q + len, cap - len, " AND ");
        len += key_cond(q + len, cap - len, &ls[from - 1], ">", ">");
    }
    if (to < n) {
        len += (size_t)snprintf(q + len, cap - len, " AND ");
        len += key_cond(q + len, cap - len, &ls[to - 1], "<", "<=");
    }
    MYSQL_RES *r = query_rows(e->conn, q);
    free(q);
    if (!r)
        return -1;
    for (size_t i = from; i < to; i++)
        has[i - from] = 0;
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(r)) != NULL) {
        level k = {strtoull(row[0], NULL, 10), strtoull(row[1], NULL, 10),
                   strtoull(row[2], NULL, 10), 0, 0};
        int64_t v = strtoll(row[3], NULL, 10);
        const level *hit = bsearch(&k, ls + from, to - from, sizeof *ls,
                                   cmp_level);
        if (hit) {
            has[hit - ls - from] = 1;
            val[hit - ls - from] = v;
        } else if (v != 0)
            drift_row(rows, src_esc, &k, 0, 0, 1, v);
    }
    mysql_free_result(r);
    return 0;
}

/* The handles' books for the shops with differences: the work they were
 * offered (offered) and the work done with (applied + dropped), as their
 * last flushes wrote them to rsv_migration_counts.  0 when read. */
static int books_of(MYSQL *c, const char *src_esc, uint64_t *offered,
                    uint64_t *done)
{
    char q[1024];
    snprintf(q, sizeof q, "SELECT COALESCE(SUM(IF(class = 'offered', n, 0)), "
             "0), COALESCE(SUM(IF(class IN ('applied', 'dropped'), n, 0)), 0) "
             "FROM rsv_migration_counts WHERE shop_id IN (SELECT DISTINCT "
             "shop_id FROM rsv_compare_drift WHERE source = '%s')", src_esc);
    MYSQL_RES *r = query_rows(c, q);
    if (!r)
        return -1;
    MYSQL_ROW row = mysql_fetch_row(r);
    int ok = row && row[0] && row[1];
    if (ok) {
        *offered = strtoull(row[0], NULL, 10);
        *done = strtoull(row[1], NULL, 10);
    }
    mysql_free_result(r);
    return ok ? 0 : -1;
}

/* Before a recheck: --settle seconds, then until the handles' books show
 * as much work done as had been offered when the settle ended, so that
 * the queues have passed the changes in flight when the keys were read
 * (however far they lag), for at most QUEUE_WAIT_MAX_S: a handle that
 * ended without its last flush leaves the books short for good.  The
 * books are flushed every fifth refresh interval (5 s by default), so a
 * change offered just before a read may still be missing from them; the
 * next round passes it. */
#define QUEUE_WAIT_MAX_S 60.0

static void wait_for_queues(MYSQL *c, const char *src_esc, double settle,
                            int round)
{
    pause_s(settle);
    uint64_t offered = 0, done = 0;
    if (books_of(c, src_esc, &offered, &done) != 0 || done >= offered)
        return;
    double t0 = mono_s();
    uint64_t target = offered;
    fprintf(stderr, "rsv-admin: recheck %d: waiting for the handles' queues "
            "(%" PRIu64 " calls behind)\n", round, target - done);
    while (done < target && mono_s() - t0 < QUEUE_WAIT_MAX_S) {
        pause_s(0.5);
        if (books_of(c, src_esc, &offered, &done) != 0)
            return;
    }
    if (done < target)
        fprintf(stderr, "rsv-admin: recheck %d: the queues' books still "
                "show %" PRIu64 " calls not done after %.0f s; checking "
                "anyway\n", round, target - done, QUEUE_WAIT_MAX_S);
}

int cmd_migrate_compare(const cmd_env *e)
{
    const opts *o = e->o;
    int nsrc = !!o->csv + !!o->query + !!o->redis;
    if (nsrc != 1)
        return usage_fail("migrate compare needs one of --csv FILE, --query "
                          "SQL, --redis HOST:PORT --pattern PATTERN", NULL);
    if (!!o->redis != !!o->pattern)
        return usage_fail("--redis and --pattern go together", NULL);
    if (o->pattern) {
        uint64_t a, b, c;
        if (pattern_parse(o->pattern, "", &a, &b, &c) == 0 ||
            !strstr(o->pattern, "{shop}") || !strstr(o->pattern, "{item}") ||
            !strstr(o->pattern, "{location}"))
            return usage_fail("--pattern needs {shop}, {item} and "
                              "{location}", o->pattern);
    }
    double settle = o->settle_s >= 0 ? (double)o->settle_s : 2.0;
    levels ls = {0};
    redis rc_ = {.fd = -1};
    sbuf w = {0}, del = {0};
    char source[300];
    int st = 0;
    if (o->csv) {
        char *abs = realpath(o->csv, NULL);
        snprintf(source, sizeof source, "compare:csv:%.240s",
                 abs ? abs : o->csv);
        free(abs);
        if (levels_read_csv(o->csv, &ls) != 0)
            return EXIT_USAGE;
    } else if (o->query) {
        snprintf(source, sizeof source, "compare:query:%08x",
                 crc32_of(o->query));
        if ((st = levels_read_query(e, o->query, &ls)))
            return st;
    } else {
        snprintf(source, sizeof source, "compare:redis:%.100s/%.120s",
                 o->redis, o->pattern);
        if (rconnect(&rc_, o->redis) != 0) {
            fprintf(stderr, "%s: migrate compare: cannot connect to Redis at "
                            "%s\n", prog, o->redis);
            return EXIT_ERROR;
        }
        if ((st = read_redis(e, &rc_, &ls)))
            goto out;
    }
    levels_check_duplicates(&ls);
    if (ls.bad) {
        fprintf(stderr, "%s: migrate compare: %" PRIu64 " bad row(s); "
                        "nothing compared\n", prog, ls.bad);
        st = EXIT_USAGE;
        goto out;
    }
    qsort(ls.v, ls.n, sizeof *ls.v, cmp_level);

    char src_esc[2 * sizeof source + 1], q[2048];
    mysql_real_escape_string(e->conn, src_esc, source, strlen(source));
    /* where an interrupted compare of the same source stopped */
    snprintf(q, sizeof q, "SELECT last_key, finished_at IS NULL FROM "
             "rsv_import_progress WHERE source = '%s'", src_esc);
    MYSQL_RES *r = query_rows(e->conn, q);
    if (!r) {
        st = db_fail(o, e->conn, "reading the compare's progress");
        goto out;
    }
    MYSQL_ROW row = mysql_fetch_row(r);
    level after = {0};
    int resume = row && row[0] && atoi(row[1]) &&
                 sscanf(row[0], "%" SCNu64 ":%" SCNu64 ":%" SCNu64,
                        &after.shop, &after.item, &after.loc) == 3;
    mysql_free_result(r);
    size_t start = 0;
    if (resume) {
        while (start < ls.n && cmp_level(&ls.v[start], &after) <= 0)
            start++;
        fprintf(stderr, "migrate compare: resuming after key %" PRIu64 ":%"
                PRIu64 ":%" PRIu64 " (%zu of %zu keys done)\n", after.shop,
                after.item, after.loc, start, ls.n);
    } else {
        snprintf(q, sizeof q, "REPLACE INTO rsv_import_progress (source, "
                 "fingerprint, rows_total, rows_done, rows_new, rows_changed, "
                 "started_at, updated_at) VALUES ('%s', 'keys:%zu', %zu, 0, 0, "
                 "0, NOW(6), NOW(6))", src_esc, ls.n, ls.n);
        char q2[1024];
        snprintf(q2, sizeof q2, "DELETE FROM rsv_compare_drift WHERE source = "
                 "'%s'", src_esc);
        if (sql(e, q) != 0 || sql(e, q2) != 0) {
            st = db_fail(o, e->conn, "starting the compare");
            goto out;
        }
    }

    /* pass 1: every key, in chunks committed with their differences: per
     * chunk the old store's values (Redis: one MGET, right before
     * libreserve's, so that only what is in flight differs), libreserve's
     * with the keys only libreserve has (one SELECT), and one transaction
     * of one multi-row REPLACE and the progress */
    int64_t ov[CHUNK], nv[CHUNK];
    unsigned char oh[CHUNK], nh[CHUNK];
    double t0 = mono_s(), last = t0;
    for (size_t from = start; from < ls.n; from += CHUNK) {
        size_t to = from + CHUNK < ls.n ? from + CHUNK : ls.n, m = to - from;
        if (o->redis) {
            if (redis_values(&rc_, o->pattern, ls.v + from, m, ov, oh) != 0) {
                st = EXIT_ERROR;
                break;
            }
        } else
            for (size_t j = 0; j < m; j++) {
                oh[j] = 1;
                ov[j] = ls.v[from + j].on_hand;
            }
        sb_start(&w, "REPLACE INTO rsv_compare_drift VALUES ");
        if (chunk_values(e, ls.v, ls.n, from, to, nv, nh, src_esc, &w) != 0) {
            st = db_fail(o, e->conn, "reading libreserve's stock");
            break;
        }
        for (size_t j = 0; j < m; j++)
            if (!keys_agree(oh[j], ov[j], nh[j], nv[j]))
                drift_row(&w, src_esc, &ls.v[from + j], oh[j], ov[j], nh[j],
                          nv[j]);
        char lk[64];
        key_text(&ls.v[to - 1], lk, sizeof lk);
        snprintf(q, sizeof q, "UPDATE rsv_import_progress SET rows_done = %zu, "
                 "rows_changed = rows_changed + %zu, last_key = '%s', "
                 "updated_at = NOW(6) WHERE source = '%s'", to, w.rows, lk,
                 src_esc);
        if (sql(e, "START TRANSACTION") != 0 ||
            (w.rows && sb_send(e, &w) != 0) || sql(e, q) != 0 ||
            sql(e, "COMMIT AND NO CHAIN NO RELEASE") != 0) {
            st = db_fail(o, e->conn, "recording the differences");
            end_txn(e, 0);
            break;
        }
        double now = mono_s();
        if (o->rate > 0) {
            pause_s((double)(to - start) / (double)o->rate - (now - t0));
            now = mono_s();
        }
        if (now - last >= 1.0) {
            double speed = (double)(to - start) / (now - t0);
            fprintf(stderr, "migrate compare: %zu/%zu keys, %.0f keys/s, ETA "
                    "%.0f s\n", to, ls.n, speed,
                    speed > 0 ? (double)(ls.n - to) / speed : 0.0);
            last = now;
        }
    }
    if (st)
        goto out;

    /* the differences, checked again once the queues have passed them:
     * chunk by chunk, both stores read as in pass 1 and the results
     * written in one transaction of at most two statements (a multi-row
     * DELETE of the keys that agree now, a multi-row upsert of the rest),
     * so that a round costs statements and commits by the chunk, not by
     * the key */
    levels d = {0};
    char dq[1024];
    snprintf(dq, sizeof dq, "SELECT shop_id, item_id, location_id FROM "
             "rsv_compare_drift WHERE source = '%s' ORDER BY shop_id, "
             "item_id, location_id", src_esc);
    snprintf(q, sizeof q, "DELETE FROM rsv_compare_drift WHERE source = '%s' "
             "AND (shop_id, item_id, location_id) IN (", src_esc);
    int rounds = 0;
    for (int round = 0; round < ROUNDS && !st; round++) {
        d.n = 0;
        r = query_rows(e->conn, dq);
        if (!r) {
            st = db_fail(o, e->conn, "reading the differences");
            break;
        }
        while ((row = mysql_fetch_row(r)) != NULL) {
            level l = {strtoull(row[0], NULL, 10), strtoull(row[1], NULL, 10),
                       strtoull(row[2], NULL, 10), 0, 0};
            levels_push(&d, &l);
        }
        mysql_free_result(r);
        if (d.n == 0)
            break;
        rounds++;
        wait_for_queues(e->conn, src_esc, settle, rounds);
        double r0 = mono_s();
        /* the file or the query now, once a round */
        levels now = {0};
        if (o->query)
            st = levels_read_query(e, o->query, &now) != 0 ? EXIT_ERROR : 0;
        else if (o->csv)
            st = levels_read_csv(o->csv, &now) != 0 ? EXIT_ERROR : 0;
        if (!st)
            qsort(now.v, now.n, sizeof *now.v, cmp_level);
        size_t still = 0;
        for (size_t from = 0; !st && from < d.n; from += CHUNK) {
            size_t m = d.n - from < CHUNK ? d.n - from : CHUNK;
            const level *k = d.v + from;
            if (o->redis) {
                if (redis_values(&rc_, o->pattern, k, m, ov, oh) != 0) {
                    st = EXIT_ERROR;
                    break;
                }
            } else
                for (size_t j = 0; j < m; j++) {
                    const level *hit = bsearch(&k[j], now.v, now.n,
                                               sizeof *now.v, cmp_level);
                    oh[j] = hit != NULL;
                    ov[j] = hit ? hit->on_hand : 0;
                }
            if (new_values(e, k, m, nv, nh) != 0) {
                st = db_fail(o, e->conn, "reading libreserve's stock");
                break;
            }
            sb_start(&w, "INSERT INTO rsv_compare_drift VALUES ");
            sb_start(&del, q);
            for (size_t j = 0; j < m; j++) {
                if (!keys_agree(oh[j], ov[j], nh[j], nv[j]))
                    drift_row(&w, src_esc, &k[j], oh[j], ov[j], nh[j], nv[j]);
                else
                    sb_add(&del, "%s(%" PRIu64 ",%" PRIu64 ",%" PRIu64 ")",
                           del.rows++ ? "," : "", k[j].shop, k[j].item,
                           k[j].loc);
            }
            sb_add(&w, " ON DUPLICATE KEY UPDATE old_available = "
                   "VALUES(old_available), new_available = "
                   "VALUES(new_available)");
            sb_add(&del, ")");
            still += w.rows;
            if (sql(e, "START TRANSACTION") != 0 ||
                (del.rows && sb_send(e, &del) != 0) ||
                (w.rows && sb_send(e, &w) != 0) ||
                sql(e, "COMMIT AND NO CHAIN NO RELEASE") != 0) {
                st = db_fail(o, e->conn, "recording the differences");
                end_txn(e, 0);
            }
        }
        free(now.v);
        if (!st)
            fprintf(stderr, "migrate compare: check again %d of %d: %zu "
                    "keys, %zu still differ, %.1f s\n", round + 1, ROUNDS,
                    d.n, still, mono_s() - r0);
    }
    free(d.v);
    if (st)
        goto out;

    /* the result */
    snprintf(q, sizeof q, "UPDATE rsv_import_progress SET finished_at = "
             "NOW(6), updated_at = NOW(6) WHERE source = '%s'", src_esc);
    if (sql(e, q) != 0) {
        st = db_fail(o, e->conn, "finishing the compare");
        goto out;
    }
    snprintf(q, sizeof q, "SELECT shop_id, item_id, location_id, "
             "old_available, new_available FROM rsv_compare_drift WHERE source "
             "= '%s' ORDER BY shop_id, item_id, location_id", src_esc);
    r = query_rows(e->conn, q);
    if (!r) {
        st = db_fail(o, e->conn, "reading the differences");
        goto out;
    }
    uint64_t ndrift = mysql_num_rows(r), nclass[3] = {0, 0, 0};
    static const char *const classes[3] = {"differ", "not_in_libreserve",
                                           "not_in_old_store"};
    while ((row = mysql_fetch_row(r)) != NULL) {
        const char *c = drift_class(row[3], row[4]);
        for (int k = 0; k < 3; k++)
            nclass[k] += strcmp(c, classes[k]) == 0;
    }
    mysql_data_seek(r, 0);
    if (o->json) {
        printf("{\"source\":\"%s\",\"keys\":%zu,\"resumed_after\":%zu,"
               "\"rechecks\":%d,\"classes\":{", source + 8, ls.n, start,
               rounds);
        for (int k = 0; k < 3; k++)
            printf("%s\"%s\":%" PRIu64, k ? "," : "", classes[k], nclass[k]);
        printf("},\"drift\":[");
    } else
        printf("compared %zu keys (%s)%s; %" PRIu64 " drifted%s: %" PRIu64
               " differ, %" PRIu64 " not in libreserve, %" PRIu64 " not in "
               "the old store\n", ls.n, source + 8, resume ? ", resumed" : "",
               ndrift, rounds ? " after checking the differences again" : "",
               nclass[0], nclass[1], nclass[2]);
    int first = 1;
    while ((row = mysql_fetch_row(r)) != NULL) {
        if (o->json)
            printf("%s{\"shop_id\":%s,\"item_id\":%s,\"location_id\":%s,"
                   "\"class\":\"%s\",\"old\":%s,\"new\":%s}",
                   first ? "" : ",", row[0], row[1], row[2],
                   drift_class(row[3], row[4]), row[3] ? row[3] : "null",
                   row[4] ? row[4] : "null");
        else
            printf("drift: shop %s item %s location %s: old store %s, "
                   "libreserve %s\n", row[0], row[1], row[2],
                   row[3] ? row[3] : "(no such key)",
                   row[4] ? row[4] : "(no ledger row)");
        first = 0;
    }
    mysql_free_result(r);
    if (o->json)
        printf("]}\n");
    /* shops compared clean no longer need a compare */
    for (size_t i = 0; i < ls.n; i++) {
        if (i > 0 && ls.v[i].shop == ls.v[i - 1].shop)
            continue;
        snprintf(q, sizeof q, "UPDATE rsv_migration_stage SET needs_compare "
                 "= 0 WHERE shop_id = %" PRIu64 " AND NOT EXISTS (SELECT 1 "
                 "FROM rsv_compare_drift WHERE source = '%s' AND shop_id = %"
                 PRIu64 ")", ls.v[i].shop, src_esc, ls.v[i].shop);
        (void)sql(e, q);
    }
    st = ndrift ? EXIT_FOUND : EXIT_OKAY;
out:
    if (rc_.fd >= 0)
        close(rc_.fd);
    free(w.s);
    free(del.s);
    free(ls.v);
    return st;
}
