/*
 * check_metrics.c - statistics for operators against the real server:
 * snapshots that add up contexts used by different threads, and their
 * Prometheus text, read back by the Prometheus project's Python parser
 * (tests/metrics_parse.py, with Debian's python3-prometheus-client).
 * The parser is installed here when it is missing and the test runs as
 * root; without it the parser checks say so and are skipped, everything
 * else still runs.
 */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <reserve/stats.h>

#include "testutil.h"

#define TOK(s) (s), strlen(s)

/* The Python that has the parser, "" for none: decided in main(), before
 * the tests fork. */
static const char *parser_python = "";

static const char *const op_name[] = {
    NULL, "reserve", "claim", "release", "extend", "status",
    "replenish", "sweep", "stock", "audit",
};
#define N_OPS ((uint32_t)(sizeof op_name / sizeof op_name[0]))

/* The counters with a family of their own, written out here again so the
 * test does not take the library's word for its names. */
static const struct {
    uint32_t stat;
    const char *family;
} counters[] = {
    {RSV_STAT_RETRIES, "libreserve_retries_total"},
    {RSV_STAT_DEADLOCKS, "libreserve_deadlocks_total"},
    {RSV_STAT_LOCK_WAIT_TIMEOUTS, "libreserve_lock_wait_timeouts_total"},
    {RSV_STAT_INLINE_REFILLS, "libreserve_inline_refills_total"},
    {RSV_STAT_SLOW_PATHS, "libreserve_slow_paths_total"},
    {RSV_STAT_SHORT_READS, "libreserve_short_reads_total"},
    {RSV_STAT_STATEMENTS, "libreserve_statements_total"},
    {RSV_STAT_ONE_TRIP, "libreserve_one_trip_total"},
    {RSV_STAT_BACK_TO_FAST, "libreserve_back_to_fast_total"},
    {RSV_STAT_LEDGER_TAKES, "libreserve_ledger_takes_total"},
    {RSV_STAT_POOL_DRAINED, "libreserve_pool_drained_total"},
    {RSV_STAT_STMT_EVICTIONS, "libreserve_stmt_evictions_total"},
};
#define N_COUNTERS (sizeof counters / sizeof counters[0])

/* ---- the text, and a real parser's reading of it ---- */

/* The text of snap: the size query reports the size, and a buffer of
 * exactly that size takes the whole text. */
static char *prom_text(const rsv_stats_snapshot *snap, const char *labels)
{
    size_t need = 0, again = 0;
    ck_assert_int_eq(rsv_stats_prometheus(snap, labels, NULL, 0, &need),
                     RSV_ERANGE);
    ck_assert_uint_gt(need, 1);
    char *buf = malloc(need);
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(rsv_stats_prometheus(snap, labels, buf, need, &again),
                     RSV_OK);
    ck_assert_uint_eq(again, need);
    ck_assert_uint_eq(strlen(buf) + 1, need);
    return buf;
}

/* The directory of this file, where metrics_parse.py is (the tests run
 * from the top of the tree, and are compiled from there). */
static void tests_dir(char *out, size_t n)
{
    const char *slash = strrchr(__FILE__, '/');
    if (!slash)
        snprintf(out, n, ".");
    else
        snprintf(out, n, "%.*s", (int)(slash - __FILE__), __FILE__);
}

/* What the parser understood of text (see metrics_parse.py), starting
 * with a newline so every line can be searched as "\nname labels "; NULL
 * when there is no parser.  The parser's own checks (each family once,
 * histograms cumulative, +Inf equal to _count) must pass. */
static char *parse(const char *text)
{
    if (!*parser_python)
        return NULL;
    char path[] = "/tmp/rsv-metrics.XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
    char dir[256], cmd[512];
    tests_dir(dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "%s %s/metrics_parse.py %s", parser_python,
             dir, path);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t cap = 1 << 16, len = 1;
    char *dump = malloc(cap);
    ck_assert_ptr_nonnull(dump);
    dump[0] = '\n';
    size_t got;
    while ((got = fread(dump + len, 1, cap - len - 1, p)) > 0) {
        len += got;
        if (cap - len < 4096) {
            cap *= 2;
            dump = realloc(dump, cap);
            ck_assert_ptr_nonnull(dump);
        }
    }
    dump[len] = '\0';
    int st = pclose(p);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
        fprintf(stderr, "the text the parser refused:\n%s\n", text);
    unlink(path);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "the Prometheus parser refused the text (its message is "
                  "above)");
    return dump;
}

/* The sample `name` with exactly these labels (sorted, as the parser
 * prints them; "-" for none); found is 0 if there is none. */
static double sample_of(const char *dump, const char *name,
                        const char *labels, int *found)
{
    char key[512];
    snprintf(key, sizeof key, "\n%s %s ", name, labels);
    const char *at = strstr(dump, key);
    *found = at != NULL;
    return at ? strtod(at + strlen(key), NULL) : 0;
}

static double sample(const char *dump, const char *name, const char *labels)
{
    int found;
    double v = sample_of(dump, name, labels, &found);
    ck_assert_msg(found, "no sample %s{%s} in:%s", name, labels, dump);
    return v;
}

static void expect_u64(const char *dump, const char *name,
                       const char *labels, uint64_t want)
{
    double v = sample(dump, name, labels);
    ck_assert_msg(v == (double)want, "%s{%s} is %.17g, want %llu", name,
                  labels, v, (unsigned long long)want);
}

static void expect_seconds(const char *dump, const char *name,
                           const char *labels, uint64_t us)
{
    double v = sample(dump, name, labels);
    double want = (double)us / 1e6;
    ck_assert_msg(v - want < 1e-7 && want - v < 1e-7,
                  "%s{%s} is %.9f s, want %.9f", name, labels, v, want);
}

/* ---- what the contexts say, added up ---- */

static uint64_t sum_stat(rsv_ctx **ctx, int n, uint32_t stat, uint32_t op)
{
    uint64_t total = 0, v;
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(rsv_stats_get(ctx[i], stat, op, &v), RSV_OK);
        if (stat == RSV_STAT_LATENCY_MAX_US)
            total = v > total ? v : total;
        else
            total += v;
    }
    return total;
}

static uint64_t sum_outcome(rsv_ctx **ctx, int n, uint32_t op, int code)
{
    uint64_t total = 0, v;
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(rsv_stats_outcome(ctx[i], op, code, &v), RSV_OK);
        total += v;
    }
    return total;
}

/* Every number of the parsed text against rsv_stats_get(),
 * rsv_stats_outcome() and rsv_stats_histogram() of the contexts. */
static void check_against(const char *dump, rsv_ctx **ctx, int n,
                          const char *instance)
{
    char lab[512];
    snprintf(lab, sizeof lab, "instance=\"%s\"", instance);
    expect_u64(dump, "libreserve_contexts", lab, (uint64_t)n);
    for (uint32_t op = 1; op < N_OPS; op++) {
        uint64_t calls = sum_stat(ctx, n, RSV_STAT_CALLS, op);
        char op_lab[64];
        snprintf(op_lab, sizeof op_lab, "op=\"%s\"", op_name[op]);
        if (calls == 0) {
            ck_assert_msg(!strstr(dump, op_lab), "%s without a call",
                          op_lab);
            continue;
        }
        /* calls by result */
        uint64_t seen = 0;
        for (int code = RSV_OK; code >= RSV_ENOTPRIMARY; code--) {
            const char *cname = rsv_code_name(code);
            if (!cname)
                continue;
            char result[32];
            size_t i = 0;
            for (const char *c = cname + 4; *c; c++)
                result[i++] = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
            result[i] = '\0';
            const char *cls = code == RSV_OK ? "ok"
                              : code >= RSV_EINDOUBT ? "expected"
                                                     : "failed";
            snprintf(lab, sizeof lab,
                     "class=\"%s\",instance=\"%s\",op=\"%s\",result=\"%s\"",
                     cls, instance, op_name[op], result);
            uint64_t want = sum_outcome(ctx, n, op, code);
            if (want == 0 && code != RSV_OK) {
                int found;
                sample_of(dump, "libreserve_calls_total", lab, &found);
                ck_assert_msg(!found, "a zero series %s", lab);
                continue;
            }
            expect_u64(dump, "libreserve_calls_total", lab, want);
            seen += want;
        }
        ck_assert_uint_eq(seen, calls);

        snprintf(lab, sizeof lab, "instance=\"%s\",op=\"%s\"", instance,
                 op_name[op]);
        for (size_t k = 0; k < N_COUNTERS; k++)
            expect_u64(dump, counters[k].family, lab,
                       sum_stat(ctx, n, counters[k].stat, op));

        /* the histogram: cumulative buckets, _count, _sum, and the max */
        uint64_t h[RSV_STATS_BUCKETS] = {0}, one[RSV_STATS_BUCKETS];
        for (int c = 0; c < n; c++) {
            ck_assert_int_eq(rsv_stats_histogram(ctx[c], op, one,
                                                 RSV_STATS_BUCKETS),
                             RSV_OK);
            for (int b = 0; b < RSV_STATS_BUCKETS; b++)
                h[b] += one[b];
        }
        uint64_t cum = 0;
        for (int b = 0; b < RSV_STATS_BUCKETS; b++) {
            cum += h[b];
            char le[32];
            if (b < RSV_STATS_BUCKETS - 1)
                snprintf(le, sizeof le, "%llu.%06llu",
                         (unsigned long long)((1ULL << b) / 1000000),
                         (unsigned long long)((1ULL << b) % 1000000));
            else
                snprintf(le, sizeof le, "+Inf");
            snprintf(lab, sizeof lab, "instance=\"%s\",le=\"%s\",op=\"%s\"",
                     instance, le, op_name[op]);
            expect_u64(dump, "libreserve_call_duration_seconds_bucket", lab,
                       cum);
        }
        ck_assert_uint_eq(cum, calls);
        snprintf(lab, sizeof lab, "instance=\"%s\",op=\"%s\"", instance,
                 op_name[op]);
        expect_u64(dump, "libreserve_call_duration_seconds_count", lab,
                   calls);
        expect_seconds(dump, "libreserve_call_duration_seconds_sum", lab,
                       sum_stat(ctx, n, RSV_STAT_LATENCY_US, op));
        expect_seconds(dump, "libreserve_call_duration_max_seconds", lab,
                       sum_stat(ctx, n, RSV_STAT_LATENCY_MAX_US, op));
    }
}

/* The sum of the histograms' _count lines, read straight from the text. */
static uint64_t counted_calls(const char *text)
{
    const char *key = "\nlibreserve_call_duration_seconds_count{";
    uint64_t n = 0;
    for (const char *p = strstr(text, key); p; p = strstr(p + 1, key)) {
        const char *v = strstr(p, "} ");
        ck_assert_ptr_nonnull(v);
        n += strtoull(v + 2, NULL, 10);
    }
    return n;
}

/* ---- two threads, two contexts, one exporter ---- */

#define HOT_ITEM 1
#define ROUNDS 40

struct worker {
    int id;
    uint64_t shop;
    rsv_ctx *ctx;
    rsv_stats_snapshot *mine;  /* under *m */
    pthread_mutex_t *m;
    int done;                  /* under *m */
    int bad;                   /* unexpected codes seen */
    char why[256];
};

static void note(struct worker *w, const char *what, int rc)
{
    if (!w->bad++)
        snprintf(w->why, sizeof w->why, "worker %d: %s returned %s: %s",
                 w->id, what, rsv_code_name(rc), rsv_errmsg(w->ctx));
}

/* The documented rule: the thread that owns the context copies it into
 * its own snapshot, under the lock the exporter reads snapshots with. */
static void publish(struct worker *w, int done)
{
    pthread_mutex_lock(w->m);
    rsv_stats_snapshot_clear(w->mine);
    int rc = rsv_stats_snapshot_add(w->mine, w->ctx);
    w->done = done;
    pthread_mutex_unlock(w->m);
    if (rc != RSV_OK)
        note(w, "rsv_stats_snapshot_add", rc);
}

static void *work(void *arg)
{
    struct worker *w = arg;
    char tok[32];
    for (int i = 0; i < ROUNDS; i++) {
        snprintf(tok, sizeof tok, "w%d-%d", w->id, i);
        int rc = rsv_reserve_one(w->ctx, w->shop, TOK(tok), HOT_ITEM, 1, 1,
                                 0);
        if (rc == RSV_OK) {
            /* half are paid for, half given back: units come and go */
            rc = i % 2 ? rsv_claim(w->ctx, w->shop, TOK(tok))
                       : rsv_release(w->ctx, w->shop, TOK(tok));
            if (rc != RSV_OK && rc != RSV_EBUSY)
                note(w, "claim/release", rc);
        } else if (rc != RSV_EOUTOFSTOCK && rc != RSV_EBUSY) {
            note(w, "rsv_reserve_one", rc);
        }
        if (i % 10 == 0) {
            int32_t st;
            rc = rsv_checkout_status(w->ctx, w->shop, TOK(tok), &st, NULL,
                                     NULL);
            if (rc != RSV_OK && rc != RSV_ENOTFOUND) /* out of stock */
                note(w, "rsv_checkout_status", rc);
            rc = rsv_release(w->ctx, w->shop, TOK("no-such-checkout"));
            if (rc != RSV_ENOTFOUND)
                note(w, "rsv_release", rc);
            rc = rsv_claim(w->ctx, w->shop, "", 0);
            if (rc != RSV_ETOKEN)
                note(w, "rsv_claim", rc);
        }
        publish(w, 0);
    }
    publish(w, 1);
    return NULL;
}

START_TEST(two_threads_aggregated_and_parsed)
{
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    MYSQL *conn[2];
    rsv_ctx *ctx[2];
    struct worker w[2];
    pthread_t t[2];
    uint64_t shop = tu_shop();
    for (int i = 0; i < 2; i++) {
        ctx[i] = tu_open(&conn[i]);
        memset(&w[i], 0, sizeof w[i]);
        w[i].id = i;
        w[i].shop = shop;
        w[i].ctx = ctx[i];
        w[i].m = &m;
        ck_assert_int_eq(rsv_stats_snapshot_new(&w[i].mine), RSV_OK);
    }
    /* fewer units than the claims want: some reserves run out */
    TU_OK(ctx[0], rsv_stock_set(ctx[0], shop, HOT_ITEM, 1, 30));
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, work, &w[i]), 0);

    /* the exporter: scrapes while the workers run; the totals it sees
     * never go down */
    rsv_stats_snapshot *total;
    ck_assert_int_eq(rsv_stats_snapshot_new(&total), RSV_OK);
    uint64_t last = 0;
    int scrapes = 0, done = 0;
    char *text = NULL;
    while (!done) {
        rsv_stats_snapshot_clear(total);
        pthread_mutex_lock(&m);
        for (int i = 0; i < 2; i++)
            ck_assert_int_eq(rsv_stats_snapshot_merge(total, w[i].mine),
                             RSV_OK);
        done = w[0].done && w[1].done;
        pthread_mutex_unlock(&m);
        free(text);
        text = prom_text(total, "instance=\"a\"");
        uint64_t calls = counted_calls(text);
        ck_assert_uint_ge(calls, last);
        last = calls;
        scrapes++;
        if (!done)
            usleep(5000);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        ck_assert_msg(!w[i].bad, "%s", w[i].why);
    }
    fprintf(stderr, "%d scrapes while the workers ran; %llu calls; the "
            "last text is %zu bytes\n", scrapes, (unsigned long long)last,
            strlen(text));

    /* the workload reached the server and ended in several codes */
    ck_assert_uint_eq(last, sum_stat(ctx, 2, RSV_STAT_CALLS, RSV_OP_ALL));
    ck_assert_uint_ge(last, 2 * ROUNDS);
    ck_assert_uint_gt(sum_stat(ctx, 2, RSV_STAT_STATEMENTS, RSV_OP_ALL), 0);
    ck_assert_uint_gt(sum_outcome(ctx, 2, RSV_OP_RESERVE, RSV_OK), 0);
    ck_assert_uint_gt(sum_outcome(ctx, 2, RSV_OP_RESERVE, RSV_EOUTOFSTOCK),
                      0);
    ck_assert_uint_eq(sum_outcome(ctx, 2, RSV_OP_CLAIM, RSV_ETOKEN), 8);

    /* the last scrape is the contexts now: the same text as a snapshot
     * made directly from both */
    rsv_stats_snapshot *direct;
    ck_assert_int_eq(rsv_stats_snapshot_new(&direct), RSV_OK);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(rsv_stats_snapshot_add(direct, ctx[i]), RSV_OK);
    char *again = prom_text(direct, "instance=\"a\"");
    ck_assert_str_eq(again, text);
    free(again);

    char *dump = parse(text);
    if (dump) {
        check_against(dump, ctx, 2, "a");
        free(dump);
        /* one context alone */
        rsv_stats_snapshot *one;
        ck_assert_int_eq(rsv_stats_snapshot_new(&one), RSV_OK);
        ck_assert_int_eq(rsv_stats_snapshot_add(one, ctx[1]), RSV_OK);
        char *t1 = prom_text(one, "instance=\"b\"");
        dump = parse(t1);
        check_against(dump, &ctx[1], 1, "b");
        free(dump);
        free(t1);
        rsv_stats_snapshot_free(one);
    } else {
        fprintf(stderr, "SKIP the parser checks: python3-prometheus-client "
                "is not installed (see the message above)\n");
    }

    /* a snapshot keeps its figures after the contexts are gone */
    for (int i = 0; i < 2; i++) {
        rsv_close(ctx[i]);
        mysql_close(conn[i]);
    }
    again = prom_text(direct, "instance=\"a\"");
    ck_assert_str_eq(again, text);
    free(again);
    free(text);
    rsv_stats_snapshot_free(direct);
    rsv_stats_snapshot_free(total);
    for (int i = 0; i < 2; i++)
        rsv_stats_snapshot_free(w[i].mine);
}
END_TEST

/* ---- the text itself: sizes, labels, the families ---- */

static int count_of(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what))
        n++;
    return n;
}

START_TEST(buffer_sizes_labels_and_families)
{
    rsv_stats_snapshot *snap = NULL;
    ck_assert_int_eq(rsv_stats_snapshot_new(NULL), RSV_EINVAL);
    ck_assert_int_eq(rsv_stats_snapshot_new(&snap), RSV_OK);

    /* an empty snapshot: every family once, no series but the count */
    char *text = prom_text(snap, NULL);
    ck_assert_int_eq(count_of(text, "# TYPE "), 16);
    ck_assert_int_eq(count_of(text, "# HELP "), 16);
    ck_assert_int_eq(count_of(text, "# TYPE libreserve_calls_total counter\n"),
                     1);
    ck_assert_int_eq(count_of(text, "# TYPE libreserve_call_duration_seconds "
                                    "histogram\n"), 1);
    ck_assert_ptr_nonnull(strstr(text, "\nlibreserve_contexts 0\n"));
    ck_assert_int_eq(count_of(text, "op=\""), 0);
    char *same = prom_text(snap, "");
    ck_assert_str_eq(same, text);
    free(same);
    char *dump = parse(text);
    if (dump) {
        expect_u64(dump, "libreserve_contexts", "-", 0);
        ck_assert_ptr_nonnull(strstr(dump, "\n# libreserve_calls counter\n"));
        ck_assert_ptr_nonnull(strstr(dump, "\n# libreserve_call_duration_"
                                           "seconds histogram\n"));
        free(dump);
    }
    free(text);

    /* a little traffic, then the context is closed */
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 1);
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("one"), 1, 1, 1, 0));
    int rc = rsv_reserve_one(f.ctx, f.shop, TOK("two"), 1, 1, 1, 0);
    TU_RC(f.ctx, rc, RSV_EOUTOFSTOCK);
    TU_OK(f.ctx, rsv_release(f.ctx, f.shop, TOK("one")));
    ck_assert_int_eq(rsv_stats_snapshot_add(NULL, f.ctx), RSV_EINVAL);
    ck_assert_int_eq(rsv_stats_snapshot_add(snap, NULL), RSV_EINVAL);
    ck_assert_int_eq(rsv_stats_snapshot_add(snap, f.ctx), RSV_OK);
    tu_fix_close(&f);

    /* the buffer: too small by one, one byte, exact, larger */
    size_t need = 0, got = 0;
    ck_assert_int_eq(rsv_stats_prometheus(snap, NULL, NULL, 0, &need),
                     RSV_ERANGE);
    ck_assert_int_eq(rsv_stats_prometheus(snap, NULL, NULL, 0, NULL),
                     RSV_ERANGE);
    char *buf = malloc(need + 100);
    memset(buf, 'x', need + 100);
    ck_assert_int_eq(rsv_stats_prometheus(snap, NULL, buf, need - 1, &got),
                     RSV_ERANGE);
    ck_assert_uint_eq(got, need);
    ck_assert_int_eq(buf[0], '\0'); /* never a cut text */
    buf[0] = 'x';
    got = 0;
    ck_assert_int_eq(rsv_stats_prometheus(snap, NULL, buf, 1, &got),
                     RSV_ERANGE);
    ck_assert_uint_eq(got, need);
    ck_assert_int_eq(buf[0], '\0');
    ck_assert_int_eq(rsv_stats_prometheus(snap, NULL, buf, need, NULL),
                     RSV_OK);
    ck_assert_uint_eq(strlen(buf), need - 1);
    ck_assert_int_eq(buf[need], 'x'); /* nothing written past it */
    ck_assert_int_eq(rsv_stats_prometheus(snap, NULL, buf, need + 100, &got),
                     RSV_OK);
    ck_assert_uint_eq(got, need);
    ck_assert_int_eq(rsv_stats_prometheus(NULL, NULL, buf, need, &got),
                     RSV_EINVAL);
    ck_assert_int_eq(rsv_stats_prometheus(snap, NULL, NULL, 5, &got),
                     RSV_EINVAL);
    ck_assert_ptr_nonnull(strstr(buf, "\nlibreserve_contexts 1\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\nlibreserve_calls_total{op=\"reserve"
                                      "\",result=\"eoutofstock\",class=\""
                                      "expected\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\nlibreserve_calls_total{op=\"release"
                                      "\",result=\"ok\",class=\"ok\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\nlibreserve_call_duration_seconds_"
                                      "bucket{op=\"reserve\",le=\"+Inf\"} "
                                      "2\n"));
    ck_assert_ptr_nonnull(strstr(buf, "le=\"0.000001\""));
    ck_assert_ptr_nonnull(strstr(buf, "le=\"1073.741824\""));
    ck_assert_int_eq(count_of(buf, "op=\"claim\""), 0);
    free(buf);

    /* labels: well formed ones are copied as given */
    static const char *const good[] = {
        "instance=\"a\"",
        "_x=\"1\",a1=\"\"",
        "instance=\"a\",note=\"q\\\"uo\\\\te\\nnl \xc3\xa9\"",
        "emoji=\"\xf0\x9f\x98\x80\"",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        text = prom_text(snap, good[i]);
        char want[256];
        snprintf(want, sizeof want, "\nlibreserve_contexts{%s} 1\n", good[i]);
        ck_assert_msg(strstr(text, want), "labels %s", good[i]);
        free(text);
    }
    /* and read back, escapes undone, by the parser */
    text = prom_text(snap, good[2]);
    dump = parse(text);
    if (dump) {
        expect_u64(dump, "libreserve_contexts",
                   "instance=\"a\",note=\"q\\\"uo\\\\te\\nnl \\u00e9\"", 1);
        expect_u64(dump, "libreserve_calls_total",
                   "class=\"expected\",instance=\"a\",note=\"q\\\"uo\\\\te"
                   "\\nnl \\u00e9\",op=\"reserve\",result=\"eoutofstock\"",
                   1);
        free(dump);
    }
    free(text);

    /* anything else is refused, and nothing is written */
    static const char *const bad[] = {
        "instance=a", "instance='a'", "instance", "=\"a\"", "1a=\"b\"",
        "in-stance=\"a\"", "instance =\"a\"", "instance=\"a\" ",
        " instance=\"a\"", "instance=\"a\",", ",instance=\"a\"",
        "a=\"1\",,b=\"2\"", "a=\"1\"b=\"2\"", "a=\"1\";b=\"2\"",
        "instance=\"a", "instance=\"a\\\"", "instance=\"bad\\q\"",
        "instance=\"raw\nnewline\"", "instance=\"\xff\"",
        "instance=\"\xc3\"", "instance=\"\xc0\xaf\"",
        "instance=\"\xed\xa0\x80\"", "instance=\"\xf4\x90\x80\x80\"",
        "a=\"1\",a=\"2\"", "a=\"1\",b=\"2\",a=\"3\"", "op=\"x\"",
        "result=\"x\"", "class=\"x\"", "le=\"1\"", "__name__=\"x\"",
        "a=\"1\",op=\"x\"",
    };
    char small[8];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        got = 12345;
        memcpy(small, "xxxxxxx", 8);
        ck_assert_msg(rsv_stats_prometheus(snap, bad[i], small, sizeof small,
                                           &got) == RSV_EINVAL,
                      "labels %s accepted", bad[i]);
        ck_assert_uint_eq(got, 12345);
        ck_assert_int_eq(small[0], 'x');
    }

    /* clear, merge, free */
    rsv_stats_snapshot *other;
    ck_assert_int_eq(rsv_stats_snapshot_new(&other), RSV_OK);
    ck_assert_int_eq(rsv_stats_snapshot_merge(other, snap), RSV_OK);
    ck_assert_int_eq(rsv_stats_snapshot_merge(other, snap), RSV_OK);
    ck_assert_int_eq(rsv_stats_snapshot_merge(NULL, snap), RSV_EINVAL);
    ck_assert_int_eq(rsv_stats_snapshot_merge(other, NULL), RSV_EINVAL);
    text = prom_text(other, NULL);
    ck_assert_ptr_nonnull(strstr(text, "\nlibreserve_contexts 2\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nlibreserve_call_duration_seconds_"
                                       "count{op=\"reserve\"} 4\n"));
    free(text);
    rsv_stats_snapshot_clear(other);
    rsv_stats_snapshot_clear(NULL);
    text = prom_text(other, NULL);
    ck_assert_ptr_nonnull(strstr(text, "\nlibreserve_contexts 0\n"));
    ck_assert_int_eq(count_of(text, "op=\""), 0);
    free(text);
    rsv_stats_snapshot_free(other);
    rsv_stats_snapshot_free(snap);
    rsv_stats_snapshot_free(NULL);
}
END_TEST

/* The Python whose prometheus_client imports: the one first on PATH,
 * or Debian's own, where the Debian package installs it (a PATH may put
 * another Python first, e.g. a virtualenv's). */
static const char *python_with_parser(void)
{
    static const char *const pythons[] = {"python3", "/usr/bin/python3"};
    for (size_t i = 0; i < sizeof pythons / sizeof pythons[0]; i++) {
        char probe[256];
        snprintf(probe, sizeof probe,
                 "%s -c 'import prometheus_client.parser' >/dev/null 2>&1",
                 pythons[i]);
        if (system(probe) == 0)
            return pythons[i];
    }
    return "";
}

/* The parser comes from Debian's python3-prometheus-client: install it
 * if it is missing and we may (root, apt-get), else say why the parser
 * checks are skipped. */
static const char *find_parser(void)
{
    const char *py = python_with_parser();
    if (*py)
        return py;
    /* (the suites run from the top of the tree) */
    if (system("tools/deps.sh packages python3-prometheus-client "
               ">/tmp/rsv-metrics-apt.log 2>&1") != 0)
        fprintf(stderr, "check_metrics: tools/deps.sh packages "
                "python3-prometheus-client failed\n");
    py = python_with_parser();
    if (!*py)
        fprintf(stderr, "check_metrics: python3-prometheus-client could "
                "not be installed (see /tmp/rsv-metrics-apt.log): the "
                "checks with the Prometheus parser are skipped\n");
    return py;
}

int main(void)
{
    parser_python = find_parser();
    if (*parser_python)
        fprintf(stderr, "check_metrics: the Prometheus parser of %s\n",
                parser_python);
    tu_db_create("metrics");
    Suite *s = suite_create("metrics");
    tu_add(s, "two_threads_aggregated_and_parsed",
           two_threads_aggregated_and_parsed);
    tu_add(s, "buffer_sizes_labels_and_families",
           buffer_sizes_labels_and_families);
    int rc = tu_run(s);
    tu_db_drop();
    return rc;
}
