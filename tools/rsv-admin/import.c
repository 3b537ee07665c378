/*
 * import.c - rsv-admin import: stock levels (shop, item, location, on
 * hand) loaded into libreserve from the store a shop sold through before,
 * from a CSV file or a query on the application's own tables in the same
 * database (docs/migration.md).
 *
 * The whole source is read and checked before anything is written: a bad
 * row (its line and the reason) refuses the import, nothing applied.
 * Then chunks, in the source's order: keys without a ledger row are
 * inserted in one statement, committed together with the chunk's place
 * in rsv_import_progress; keys whose stock differs go through
 * rsv_stock_set (the library's locks and checks: a pool above the new
 * level shrinks, a level below what is held is refused), before that
 * commit, so a run stopped anywhere (kill -9 too) does at most the last
 * chunk's changes again, which change nothing the second time.  A second
 * run of a finished import checks every row again and changes nothing.
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "admin.h"

#define IMPORT_ON_HAND_MAX ((int64_t)1 << 62)
#define BAD_ROWS_SHOWN 20

int levels_push(levels *ls, const level *l)
{
    if (ls->n == ls->cap) {
        size_t cap = ls->cap ? ls->cap * 2 : 4096;
        level *v = realloc(ls->v, cap * sizeof *v);
        if (!v)
            return -1;
        ls->v = v;
        ls->cap = cap;
    }
    ls->v[ls->n++] = *l;
    return 0;
}

void levels_bad_row(levels *ls, uint64_t line, const char *why,
                    const char *text)
{
    if (ls->bad++ < BAD_ROWS_SHOWN)
        fprintf(stderr, "%s: import: line %" PRIu64 ": %s%s%s\n", prog, line,
                why, text ? ": " : "", text ? text : "");
}

/* One row's four fields, checked; the row goes into ls, or is counted
 * bad with its reason. */
static void take_row(levels *ls, uint64_t line, char **f, int nf,
                     const char *text)
{
    static const char *names[] = {"shop_id", "item_id", "location_id"};
    level l = {0};
    l.line = line;
    char why[128];
    if (nf != 4) {
        snprintf(why, sizeof why, "%d fields, want 4 (shop_id, item_id, "
                 "location_id, on_hand)", nf);
        levels_bad_row(ls, line, why, text);
        return;
    }
    uint64_t *ids[] = {&l.shop, &l.item, &l.loc};
    for (int i = 0; i < 3; i++)
        if (!f[i] || parse_u64(f[i], ids[i])) {
            snprintf(why, sizeof why, "%s is not an unsigned integer",
                     names[i]);
            levels_bad_row(ls, line, why, text);
            return;
        }
    if (!f[3] || parse_i64(f[3], &l.on_hand)) {
        levels_bad_row(ls, line, "on_hand is not an integer", text);
        return;
    }
    if (l.on_hand < 0 || l.on_hand >= IMPORT_ON_HAND_MAX) {
        levels_bad_row(ls, line, "on_hand is negative or too large", text);
        return;
    }
    if (levels_push(ls, &l) != 0) {
        levels_bad_row(ls, line, "out of memory", NULL);
        return;
    }
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' ||
                 s[n - 1] == '\n'))
        s[--n] = 0;
    return s;
}

int levels_read_csv(const char *path, levels *ls)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "%s: import: cannot read %s\n", prog, path);
        return -1;
    }
    char buf[1024];
    uint64_t line = 0;
    while (fgets(buf, sizeof buf, f)) {
        line++;
        size_t n = strlen(buf);
        if (n == sizeof buf - 1 && buf[n - 1] != '\n') {
            levels_bad_row(ls, line, "line too long", NULL);
            int c;
            while ((c = fgetc(f)) != EOF && c != '\n')
                ;
            continue;
        }
        char text[1024];
        snprintf(text, sizeof text, "%s", trim(buf));
        char *p = trim(buf);
        if (!*p || *p == '#')
            continue;
        /* a header on the first line: its first field is not a number */
        if (line == 1 && (*p < '0' || *p > '9'))
            continue;
        char *fields[8];
        int nf = 0;
        for (char *tok = p;; ) {
            char *comma = strchr(tok, ',');
            if (comma)
                *comma = 0;
            if (nf < 8)
                fields[nf] = trim(tok);
            nf++;
            if (!comma)
                break;
            tok = comma + 1;
        }
        take_row(ls, line, fields, nf > 8 ? 8 : nf, text);
    }
    fclose(f);
    return 0;
}

int levels_read_query(const cmd_env *e, const char *q, levels *ls)
{
    if (mysql_real_query(e->conn, q, strlen(q)) != 0)
        return db_fail(e->o, e->conn, "import --query");
    MYSQL_RES *r = mysql_store_result(e->conn);
    if (!r)
        return db_fail(e->o, e->conn, "import --query");
    unsigned nf = mysql_num_fields(r);
    MYSQL_ROW row;
    uint64_t n = 0;
    while ((row = mysql_fetch_row(r)) != NULL) {
        n++;
        char *f[4] = {0};
        for (unsigned i = 0; i < nf && i < 4; i++)
            f[i] = row[i];
        take_row(ls, n, f, (int)nf, NULL);
    }
    mysql_free_result(r);
    return 0;
}

/* The same key twice in the source: which one wins would depend on the
 * order of the chunks, so both are refused. */
static int cmp_key(const void *a, const void *b)
{
    const level *x = *(const level *const *)a, *y = *(const level *const *)b;
    if (x->shop != y->shop)
        return x->shop < y->shop ? -1 : 1;
    if (x->item != y->item)
        return x->item < y->item ? -1 : 1;
    if (x->loc != y->loc)
        return x->loc < y->loc ? -1 : 1;
    return x->line < y->line ? -1 : x->line > y->line;
}

void levels_check_duplicates(levels *ls)
{
    if (ls->n < 2)
        return;
    const level **p = malloc(ls->n * sizeof *p);
    if (!p)
        return;
    for (size_t i = 0; i < ls->n; i++)
        p[i] = &ls->v[i];
    qsort(p, ls->n, sizeof *p, cmp_key);
    for (size_t i = 1; i < ls->n; i++)
        if (p[i]->shop == p[i - 1]->shop && p[i]->item == p[i - 1]->item &&
            p[i]->loc == p[i - 1]->loc) {
            char why[96];
            snprintf(why, sizeof why, "the key is also on line %" PRIu64,
                     p[i - 1]->line);
            levels_bad_row(ls, p[i]->line, why, NULL);
        }
    free(p);
}

double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void pause_s(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

uint32_t crc32_of(const char *s)
{
    uint32_t c = 0xFFFFFFFFu;
    for (; *s; s++) {
        c ^= (unsigned char)*s;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
}

/* One chunk: rows [from, to).  Returns 0 or an exit status. */
static int apply_chunk(const cmd_env *e, const levels *ls, size_t from,
                       size_t to, const char *source_esc, uint64_t *n_new,
                       uint64_t *n_changed)
{
    size_t n = to - from;
    /* the chunk's keys that have a ledger row, and their stock now */
    size_t cap = 256 + n * 72;
    char *q = malloc(cap);
    unsigned char *exists = calloc(n, 1);
    int64_t *cur = calloc(n, sizeof *cur);
    int st = 0;
    if (!q || !exists || !cur) {
        fprintf(stderr, "%s: out of memory\n", prog);
        st = EXIT_ERROR;
        goto out;
    }
    size_t len = (size_t)snprintf(q, cap, "SELECT shop_id, item_id, "
                                  "location_id, on_hand FROM rsv_stock WHERE "
                                  "(shop_id, item_id, location_id) IN (");
    for (size_t i = from; i < to; i++)
        len += (size_t)snprintf(q + len, cap - len,
                                "%s(%" PRIu64 ",%" PRIu64 ",%" PRIu64 ")",
                                i > from ? "," : "", ls->v[i].shop,
                                ls->v[i].item, ls->v[i].loc);
    snprintf(q + len, cap - len, ")");
    MYSQL_RES *r = query_rows(e->conn, q);
    if (!r) {
        st = db_fail(e->o, e->conn, "reading the stock");
        goto out;
    }
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(r)) != NULL) {
        uint64_t s = strtoull(row[0], NULL, 10), it = strtoull(row[1], NULL, 10),
                 lo = strtoull(row[2], NULL, 10);
        /* few rows per chunk: a scan finds each */
        for (size_t i = from; i < to; i++)
            if (ls->v[i].shop == s && ls->v[i].item == it &&
                ls->v[i].loc == lo) {
                exists[i - from] = 1;
                cur[i - from] = strtoll(row[3], NULL, 10);
                break;
            }
    }
    mysql_free_result(r);
    /* levels that differ, through the library */
    uint64_t changed = 0, created = 0;
    for (size_t i = from; i < to; i++) {
        const level *l = &ls->v[i];
        if (!exists[i - from] || cur[i - from] == l->on_hand)
            continue;
        int rc = rsv_stock_set(e->ctx, l->shop, l->item, l->loc, l->on_hand);
        if (rc != RSV_OK) {
            char what[128];
            snprintf(what, sizeof what, "import: row %" PRIu64 " (shop %"
                     PRIu64 ", item %" PRIu64 ", location %" PRIu64 ")",
                     l->line, l->shop, l->item, l->loc);
            st = lib_fail(e->o, e->ctx, what, rc);
            goto out;
        }
        changed++;
    }
    /* new keys and the chunk's place, in one transaction */
    if (sql(e, "START TRANSACTION") != 0) {
        st = db_fail(e->o, e->conn, "import");
        goto out;
    }
    len = (size_t)snprintf(q, cap, "INSERT INTO rsv_ledger (shop_id, item_id, "
                           "location_id, on_hand) VALUES ");
    int any = 0;
    for (size_t i = from; i < to; i++) {
        if (exists[i - from])
            continue;
        len += (size_t)snprintf(q + len, cap - len,
                                "%s(%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%"
                                PRId64 ")", any ? "," : "", ls->v[i].shop,
                                ls->v[i].item, ls->v[i].loc,
                                ls->v[i].on_hand);
        any = 1;
    }
    /* a key another writer created meanwhile keeps its level: the next
     * run sets it */
    snprintf(q + len, cap - len, " ON DUPLICATE KEY UPDATE shop_id = shop_id");
    if (any) {
        if (sql(e, q) != 0) {
            st = db_fail(e->o, e->conn, "import: inserting ledger rows");
            end_txn(e, 0);
            goto out;
        }
        created = mysql_affected_rows(e->conn);
    }
    snprintf(q, cap, "UPDATE rsv_import_progress SET rows_done = %zu, "
             "rows_new = rows_new + %" PRIu64 ", rows_changed = rows_changed "
             "+ %" PRIu64 ", updated_at = NOW(6), finished_at = IF(%zu >= "
             "rows_total, NOW(6), NULL) WHERE source = '%s'", to, created,
             changed, to, source_esc);
    if (sql(e, q) != 0 ||
        sql(e, "COMMIT AND NO CHAIN NO RELEASE") != 0) {
        st = db_fail(e->o, e->conn, "import: committing a chunk");
        end_txn(e, 0);
        goto out;
    }
    *n_new += created;
    *n_changed += changed;
out:
    free(q);
    free(exists);
    free(cur);
    return st;
}

int cmd_import(const cmd_env *e)
{
    const opts *o = e->o;
    if (e->nargs != 0)
        return usage_fail("import takes no arguments: --csv FILE or --query "
                          "SQL", NULL);
    if (!o->csv == !o->query)
        return usage_fail("import needs --csv FILE or --query SQL (one of "
                          "them)", NULL);
    size_t chunk = o->chunk ? (size_t)o->chunk : 1000;
    levels ls = {0};
    char source[300], fingerprint[64];
    if (o->csv) {
        struct stat sb;
        if (stat(o->csv, &sb) != 0) {
            fprintf(stderr, "%s: import: cannot read %s\n", prog, o->csv);
            return EXIT_USAGE;
        }
        char *abs = realpath(o->csv, NULL);
        snprintf(source, sizeof source, "csv:%.250s", abs ? abs : o->csv);
        free(abs);
        snprintf(fingerprint, sizeof fingerprint, "%lld:%lld",
                 (long long)sb.st_size, (long long)sb.st_mtime);
        if (levels_read_csv(o->csv, &ls) != 0)
            return EXIT_USAGE;
    } else {
        snprintf(source, sizeof source, "query:%08x", crc32_of(o->query));
        int st = levels_read_query(e, o->query, &ls);
        if (st)
            return st;
        snprintf(fingerprint, sizeof fingerprint, "rows:%zu", ls.n);
    }
    levels_check_duplicates(&ls);
    if (ls.bad) {
        fprintf(stderr, "%s: import: %" PRIu64 " bad row(s)%s; nothing "
                        "imported\n", prog, ls.bad,
                ls.bad > BAD_ROWS_SHOWN ? " (the first shown)" : "");
        if (o->json)
            printf("{\"error\":\"bad rows\",\"bad_rows\":%" PRIu64 "}\n",
                   ls.bad);
        free(ls.v);
        return EXIT_USAGE;
    }
    char source_esc[2 * sizeof source + 1], fp_esc[2 * sizeof fingerprint + 1];
    mysql_real_escape_string(e->conn, source_esc, source, strlen(source));
    mysql_real_escape_string(e->conn, fp_esc, fingerprint, strlen(fingerprint));

    /* where a run of the same source stopped */
    char q[1024];
    snprintf(q, sizeof q, "SELECT rows_done, fingerprint = '%s', finished_at "
             "IS NOT NULL FROM rsv_import_progress WHERE source = '%s'",
             fp_esc, source_esc);
    MYSQL_RES *r = query_rows(e->conn, q);
    if (!r) {
        free(ls.v);
        return db_fail(o, e->conn, "reading the import's progress");
    }
    MYSQL_ROW row = mysql_fetch_row(r);
    size_t start = 0;
    int known = row != NULL;
    if (row && atoi(row[1]) && !atoi(row[2]))
        start = (size_t)strtoull(row[0], NULL, 10);
    mysql_free_result(r);
    if (start > ls.n)
        start = 0;
    char q2[1024];
    if (!(known && start)) {
        snprintf(q2, sizeof q2, "REPLACE INTO rsv_import_progress (source, "
                 "fingerprint, rows_total, rows_done, rows_new, rows_changed, "
                 "started_at, updated_at) VALUES ('%s', '%s', %zu, 0, 0, 0, "
                 "NOW(6), NOW(6))", source_esc, fp_esc, ls.n);
        if (sql(e, q2) != 0) {
            free(ls.v);
            return db_fail(o, e->conn, "starting the import");
        }
    }
    if (start)
        fprintf(stderr, "import: resuming %s at row %zu of %zu\n", source,
                start, ls.n);

    double t0 = mono_s(), last = t0;
    uint64_t n_new = 0, n_changed = 0;
    int st = 0;
    for (size_t i = start; i < ls.n; i += chunk) {
        size_t to = i + chunk < ls.n ? i + chunk : ls.n;
        if ((st = apply_chunk(e, &ls, i, to, source_esc, &n_new, &n_changed)))
            break;
        double now = mono_s(), el = now - t0;
        double done = (double)(to - start);
        if (o->rate > 0) {
            pause_s(done / (double)o->rate - el);
            now = mono_s();
            el = now - t0;
        }
        if (now - last >= 1.0 || to == ls.n) {
            double speed = el > 0 ? done / el : 0;
            fprintf(stderr, "import: %zu/%zu rows (%.0f%%), %.0f rows/s, ETA "
                    "%.0f s\n", to, ls.n, 100.0 * (double)to / (double)ls.n,
                    speed, speed > 0 ? (double)(ls.n - to) / speed : 0.0);
            last = now;
        }
    }
    double el = mono_s() - t0;
    if (!st) {
        if (ls.n == 0) {
            snprintf(q, sizeof q, "UPDATE rsv_import_progress SET finished_at "
                     "= NOW(6) WHERE source = '%s'", source_esc);
            (void)sql(e, q);
        }
        if (o->json)
            printf("{\"source\":\"%s\",\"rows\":%zu,\"resumed_at\":%zu,"
                   "\"new\":%" PRIu64 ",\"changed\":%" PRIu64
                   ",\"unchanged\":%" PRIu64 ",\"seconds\":%.3f}\n",
                   source, ls.n, start, n_new, n_changed,
                   (uint64_t)(ls.n - start) - n_new - n_changed, el);
        else
            printf("imported %zu rows%s: %" PRIu64 " new, %" PRIu64
                   " changed, %" PRIu64 " unchanged, in %.1f s\n",
                   ls.n - start, start ? " (resumed)" : "", n_new, n_changed,
                   (uint64_t)(ls.n - start) - n_new - n_changed, el);
    }
    free(ls.v);
    return st;
}
