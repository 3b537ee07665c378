/*
 * stats_export.c - statistics for operators: snapshots that add the
 * statistics of several contexts up, and their Prometheus text.
 *
 * Owns: struct rsv_stats_snapshot, rsv_stats_snapshot_*() and
 * rsv_stats_prometheus().  A snapshot is a copy of the same arrays a
 * context counts in (ctx_stats, stats.c), so a snapshot and a context
 * answer the same questions the same way: counters go through
 * stats_value(), like rsv_stats_get().  Nothing here locks: a snapshot
 * belongs to one thread at a time, and the application's own mutex is
 * what makes sharing one safe (see reserve.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct rsv_stats_snapshot {
    ctx_stats s;
    uint64_t contexts; /* contexts added, directly or through merges */
};

/* Add b into a: sums, but the slowest call is a maximum. */
void stats_merge(ctx_stats *a, const ctx_stats *b)
{
    for (int o = 0; o < OP__COUNT; o++) {
        for (int c = 0; c < STATS_CODES; c++)
            a->outcome[o][c] += b->outcome[o][c];
        for (int k = 0; k < STATS_COUNTERS; k++) {
            if (k == RSV_STAT_LATENCY_MAX_US) {
                if (b->counter[o][k] > a->counter[o][k])
                    a->counter[o][k] = b->counter[o][k];
            } else {
                a->counter[o][k] += b->counter[o][k];
            }
        }
        for (int h = 0; h < RSV_STATS_BUCKETS; h++)
            a->hist[o][h] += b->hist[o][h];
    }
    key_stats_merge(a, b);
}

RSV_EXTERN int rsv_stats_snapshot_new(rsv_stats_snapshot **out)
{
    if (!out)
        return RSV_EINVAL;
    *out = calloc(1, sizeof **out);
    return *out ? RSV_OK : RSV_ENOMEM;
}

RSV_EXTERN void rsv_stats_snapshot_free(rsv_stats_snapshot *snap)
{
    free(snap);
}

RSV_EXTERN void rsv_stats_snapshot_clear(rsv_stats_snapshot *snap)
{
    if (snap)
        memset(snap, 0, sizeof *snap);
}

RSV_EXTERN int rsv_stats_snapshot_add(rsv_stats_snapshot *snap,
                                      const rsv_ctx *ctx)
{
    if (!snap || !ctx || nb_busy(ctx))
        return RSV_EINVAL;
    stats_merge(&snap->s, &ctx->stats);
    snap->contexts++;
    return RSV_OK;
}

void stats_snapshot_add_copy(rsv_stats_snapshot *snap, const ctx_stats *s)
{
    stats_merge(&snap->s, s);
    snap->contexts++;
}

RSV_EXTERN int rsv_stats_snapshot_merge(rsv_stats_snapshot *dst,
                                        const rsv_stats_snapshot *src)
{
    if (!dst || !src)
        return RSV_EINVAL;
    stats_merge(&dst->s, &src->s);
    dst->contexts += src->contexts;
    return RSV_OK;
}

/* ---- the extra labels ---- */

/* Length of the UTF-8 sequence at p (1..4), or 0 if it is not valid
 * UTF-8 (overlong forms, surrogates and code points above U+10FFFF
 * included): Prometheus reads the text as UTF-8 and refuses anything
 * else, so a bad byte here would make the whole scrape fail. */
static size_t utf8_len(const unsigned char *p)
{
    unsigned c = p[0];
    if (c < 0x80)
        return 1;
    size_t n;
    unsigned min, cp;
    if ((c & 0xE0) == 0xC0) {
        n = 2, min = 0x80, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
        n = 3, min = 0x800, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
        n = 4, min = 0x10000, cp = c & 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) /* also stops at a NUL */
            return 0;
        cp = cp << 6 | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

static int name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int name_char(char c)
{
    return name_start(c) || (c >= '0' && c <= '9');
}

/* The names the library writes itself: an extra label with one of them
 * would give a series the same label twice, which Prometheus refuses. */
static int reserved_name(const char *name, size_t n)
{
    static const char *const ours[] = {"op",      "result",  "class",
                                       "le",      "shop_id", "item_id",
                                       "location_id"};
    if (n >= 2 && name[0] == '_' && name[1] == '_')
        return 1; /* reserved for Prometheus itself */
    for (size_t i = 0; i < sizeof ours / sizeof ours[0]; i++)
        if (strlen(ours[i]) == n && memcmp(ours[i], name, n) == 0)
            return 1;
    return 0;
}

/* Parse one name="value" pair at p.  Returns the end of the pair (after
 * the closing quote) and the name's extent, or NULL if it is malformed. */
static const char *label_pair(const char *p, const char **name,
                              size_t *name_len)
{
    if (!name_start(*p))
        return NULL;
    *name = p;
    while (name_char(*p))
        p++;
    *name_len = (size_t)(p - *name);
    if (p[0] != '=' || p[1] != '"')
        return NULL;
    p += 2;
    for (;;) {
        if (*p == '"')
            return p + 1;
        if (*p == '\\') {
            if (p[1] != '\\' && p[1] != '"' && p[1] != 'n')
                return NULL;
            p += 2;
            continue;
        }
        if (*p == '\0' || *p == '\n') /* unterminated; must be \n */
            return NULL;
        size_t n = utf8_len((const unsigned char *)p);
        if (n == 0)
            return NULL;
        p += n;
    }
}

/* The labels argument is well formed: pairs separated by single commas,
 * no name reserved or given twice. */
static int valid_labels(const char *labels)
{
    const char *p = labels;
    while (*p) {
        const char *name;
        size_t n;
        const char *end = label_pair(p, &name, &n);
        if (!end || reserved_name(name, n))
            return 0;
        /* the pairs before this one are known good: look for the name */
        for (const char *q = labels; q < p;) {
            const char *other;
            size_t m;
            q = label_pair(q, &other, &m);
            if (m == n && memcmp(other, name, n) == 0)
                return 0;
            q++; /* the comma */
        }
        p = end;
        if (*p == ',' && p[1] != '\0')
            p++;
        else if (*p != '\0')
            return 0; /* anything else after a pair, or a trailing comma */
    }
    return 1;
}

/* ---- the text ---- */

/* Writes like snprintf into buf while it fits, and counts every byte
 * either way, so one pass gives both the text and the size it needs. */
typedef struct out {
    char *buf;
    size_t len;  /* size of buf */
    size_t used; /* bytes of text so far (may exceed len) */
} out;

static void put(out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void put(out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    /* past the end, vsnprintf only counts */
    char *at = o->used < o->len ? o->buf + o->used : NULL;
    size_t room = o->used < o->len ? o->len - o->used : 0;
    int n = vsnprintf(at, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->used += (size_t)n;
}

/* Microseconds as seconds with six exact decimals.  Integer arithmetic:
 * printf's %f would follow the process's LC_NUMERIC and could write a
 * decimal comma, which no Prometheus parser reads. */
static void put_seconds(out *o, uint64_t us)
{
    put(o, "%llu.%06llu", (unsigned long long)(us / 1000000),
        (unsigned long long)(us % 1000000));
}

/* Label values for RSV_OP_RESERVE .. RSV_OP_AUDIT, as in the conn_tag of
 * their statements. */
static const char *const op_names[OP__COUNT] = {
    NULL, "reserve", "claim", "release", "extend", "status",
    "replenish", "sweep", "stock", "audit",
};

/* Opens a series' labels: the caller's, then the op. */
static void put_series(out *o, const char *name, const char *labels, int op)
{
    put(o, "%s{%s%sop=\"%s\"", name, labels, *labels ? "," : "",
        op_names[op]);
}

static void put_family(out *o, const char *name, const char *type,
                       const char *help)
{
    put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static uint64_t calls_of_op(const ctx_stats *s, int op)
{
    return stats_value(s, RSV_STAT_CALLS, (uint32_t)op);
}

/* The counters with a family of their own: every RSV_STAT_* but the
 * calls (libreserve_calls_total) and the latencies (the histogram). */
static const struct {
    uint32_t stat;
    const char *name, *help;
} counter_families[] = {
    {RSV_STAT_RETRIES, "libreserve_retries_total",
     "Transaction attempts beyond the first, after a deadlock or lock-wait "
     "timeout."},
    {RSV_STAT_DEADLOCKS, "libreserve_deadlocks_total",
     "Deadlocks the server reported to the library (error 1213)."},
    {RSV_STAT_LOCK_WAIT_TIMEOUTS, "libreserve_lock_wait_timeouts_total",
     "Lock-wait timeouts the server reported to the library (error 1205)."},
    {RSV_STAT_INLINE_REFILLS, "libreserve_inline_refills_total",
     "Pool refills a reserve did itself, slow paths included."},
    {RSV_STAT_SLOW_PATHS, "libreserve_slow_paths_total",
     "Reserve slow paths: ledger rows locked, pool refilled from them."},
    {RSV_STAT_SHORT_READS, "libreserve_short_reads_total",
     "Fast-path pool reads that returned fewer rows than asked."},
    {RSV_STAT_STATEMENTS, "libreserve_statements_total",
     "Statements executed on the server, transaction control included."},
    {RSV_STAT_ONE_TRIP, "libreserve_one_trip_total",
     "Reserves done in one round trip by the schema's procedures."},
    {RSV_STAT_BACK_TO_FAST, "libreserve_back_to_fast_total",
     "Slow paths that found the pools refilled and went back to the fast "
     "path."},
    {RSV_STAT_LEDGER_TAKES, "libreserve_ledger_takes_total",
     "Keys served straight from the ledger row instead of the pool."},
    {RSV_STAT_POOL_DRAINED, "libreserve_pool_drained_total",
     "Pool rows given back to their ledger row."},
    {RSV_STAT_STMT_EVICTIONS, "libreserve_stmt_evictions_total",
     "Prepared statements closed because the server held "
     "max_prepared_stmt_count."},
};
/* A new counter needs a family above (or a reason to have none). */
_Static_assert(sizeof counter_families / sizeof counter_families[0] ==
                   STATS_COUNTERS - 6,
               "every RSV_STAT_* but calls, ok, expected, failed and the "
               "two latencies has a family");

static const char *class_of(int code)
{
    if (code == RSV_OK)
        return "ok";
    return code < 0 && code >= RSV_EINDOUBT ? "expected" : "failed";
}

static void put_calls(out *o, const ctx_stats *s, const char *labels)
{
    const char *name = "libreserve_calls_total";
    put_family(o, name, "counter",
               "Calls returned, by operation and return code.");
    for (int op = 1; op < OP__COUNT; op++) {
        if (!calls_of_op(s, op))
            continue;
        uint64_t other = 0;
        for (int slot = 0; slot < STATS_CODES; slot++) {
            uint64_t n = s->outcome[op][slot];
            /* the last slot holds codes outside the known range */
            const char *code_name =
                slot < STATS_CODES - 1 ? rsv_code_name(-slot) : NULL;
            if (!code_name) {
                other += n;
                continue;
            }
            if (n == 0 && slot != 0)
                continue;
            /* "RSV_EOUTOFSTOCK" -> "eoutofstock" */
            char result[32];
            size_t i = 0;
            for (const char *c = code_name + 4; *c && i < sizeof result - 1;
                 c++)
                result[i++] = *c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c;
            result[i] = '\0';
            put_series(o, name, labels, op);
            put(o, ",result=\"%s\",class=\"%s\"} %llu\n", result,
                class_of(-slot), (unsigned long long)n);
        }
        if (other) {
            put_series(o, name, labels, op);
            put(o, ",result=\"other\",class=\"failed\"} %llu\n",
                (unsigned long long)other);
        }
    }
}

static void put_histogram(out *o, const ctx_stats *s, const char *labels)
{
    const char *name = "libreserve_call_duration_seconds";
    put_family(o, name, "histogram",
               "Latency of the calls, from entry to return.");
    for (int op = 1; op < OP__COUNT; op++) {
        uint64_t calls = calls_of_op(s, op);
        if (!calls)
            continue;
        uint64_t cum = 0;
        for (int b = 0; b < RSV_STATS_BUCKETS; b++) {
            cum += s->hist[op][b];
            put_series(o, "libreserve_call_duration_seconds_bucket", labels,
                       op);
            /* Bucket b holds [2^(b-1), 2^b) whole microseconds, so every
             * call counted up to it took less than 2^b: the le bound. */
            if (b < RSV_STATS_BUCKETS - 1) {
                put(o, ",le=\"");
                put_seconds(o, (uint64_t)1 << b);
                put(o, "\"} %llu\n", (unsigned long long)cum);
            } else {
                put(o, ",le=\"+Inf\"} %llu\n", (unsigned long long)cum);
            }
        }
        put_series(o, "libreserve_call_duration_seconds_sum", labels, op);
        put(o, "} ");
        put_seconds(o, s->counter[op][RSV_STAT_LATENCY_US]);
        put(o, "\n");
        put_series(o, "libreserve_call_duration_seconds_count", labels, op);
        put(o, "} %llu\n", (unsigned long long)calls);
    }
}

/* The crowd's counters of each key kept (key_stats.c), labelled as
 * rsv-admin labels its figures of the same keys, so that one query can
 * put a key's pool depth beside what its buyers went through. */
static void put_keys(out *o, const ctx_stats *s, const char *labels)
{
    static const struct {
        const char *name, *help;
    } fam[RSV_KEY_STAT_COUNT] = {
        {"libreserve_key_short_total",
         "Reserves that came up short at the key: its pool had fewer units "
         "free than asked."},
        {"libreserve_key_refill_waits_total",
         "Reserves that waited for the key's ledger row: a refill in flight, "
         "or a take from the row."},
        {"libreserve_key_passed_rows_total",
         "Pool ids reads of the key passed over before the row they took: "
         "rows other buyers held or had taken."},
    };
    if (s->nkeys == 0)
        return;
    for (int f = 0; f < RSV_KEY_STAT_COUNT; f++) {
        put_family(o, fam[f].name, "counter", fam[f].help);
        for (uint32_t i = 0; i < s->nkeys; i++) {
            const key_stat *k = &s->keys[i];
            put(o, "%s{%s%sshop_id=\"%llu\",item_id=\"%llu\","
                "location_id=\"%llu\"} %llu\n", fam[f].name, labels,
                *labels ? "," : "", (unsigned long long)k->shop,
                (unsigned long long)k->item, (unsigned long long)k->loc,
                (unsigned long long)k->n[f]);
        }
    }
}

RSV_EXTERN int rsv_stats_prometheus(const rsv_stats_snapshot *snap,
                                    const char *labels, char *buf,
                                    size_t len, size_t *needed_out)
{
    if (!snap || (!buf && len > 0))
        return RSV_EINVAL;
    if (!labels)
        labels = "";
    if (!valid_labels(labels))
        return RSV_EINVAL;
    const ctx_stats *s = &snap->s;
    out o = {buf, len, 0};

    put_family(&o, "libreserve_contexts", "gauge",
               "Contexts whose statistics are added up here.");
    put(&o, "libreserve_contexts%s%s%s %llu\n", *labels ? "{" : "", labels,
        *labels ? "}" : "", (unsigned long long)snap->contexts);
    put_calls(&o, s, labels);
    for (size_t f = 0;
         f < sizeof counter_families / sizeof counter_families[0]; f++) {
        put_family(&o, counter_families[f].name, "counter",
                   counter_families[f].help);
        for (int op = 1; op < OP__COUNT; op++) {
            if (!calls_of_op(s, op))
                continue;
            put_series(&o, counter_families[f].name, labels, op);
            put(&o, "} %llu\n",
                (unsigned long long)stats_value(s, counter_families[f].stat,
                                                (uint32_t)op));
        }
    }
    put_histogram(&o, s, labels);
    put_family(&o, "libreserve_call_duration_max_seconds", "gauge",
               "Latency of the slowest call.");
    for (int op = 1; op < OP__COUNT; op++) {
        if (!calls_of_op(s, op))
            continue;
        put_series(&o, "libreserve_call_duration_max_seconds", labels, op);
        put(&o, "} ");
        put_seconds(&o, s->counter[op][RSV_STAT_LATENCY_MAX_US]);
        put(&o, "\n");
    }
    put_keys(&o, s, labels);

    if (needed_out)
        *needed_out = o.used + 1;
    if (o.used + 1 > len) {
        /* never hand out a cut text: a scraper would read it as metrics
         * that vanished */
        if (len > 0)
            buf[0] = '\0';
        return RSV_ERANGE;
    }
    return RSV_OK;
}
