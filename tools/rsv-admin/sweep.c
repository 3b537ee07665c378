/*
 * sweep.c - rsv-admin sweep: the sweeper, one shop or every shop, through
 * rsv_sweep_report, so that each run logs what it did (holds given back,
 * journal rows folded, idle pool rows drained, checkouts purged) and, with
 * --metrics-file, leaves the run's figures for Prometheus: when it ran,
 * when a run last swept every shop without a failure, and counters of the
 * work done, carried over from the file the previous run left.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin.h"

/* Every shop there is, in order, into *out (malloc'd; the caller frees):
 * the shops with a ledger row, and those with checkout records (a shop
 * whose ledger rows were deleted may still have records for the sweep to
 * purge).  DISTINCT over the leading column of each primary key is a
 * loose index scan: one index dive per shop, not a read of every row.  In
 * a short read-only transaction of its own, ended before the sweeps: with
 * autocommit off (an option file's init-command) a bare SELECT would
 * leave one open, and rsv_sweep would answer RSV_EINTXN. */
static int list_shops(const cmd_env *e, uint64_t **out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    static const char q[] =
        "/* conn_tag:admin */ (SELECT DISTINCT shop_id FROM "
        "rsv_ledger) UNION (SELECT DISTINCT shop_id FROM "
        "rsv_checkouts) ORDER BY shop_id";
    if (sql(e, "START TRANSACTION READ ONLY") || sql(e, q))
        goto fail;
    MYSQL_RES *r = mysql_store_result(e->conn);
    if (!r)
        goto fail;
    size_t n = (size_t)mysql_num_rows(r);
    uint64_t *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) {
        mysql_free_result(r);
        end_txn(e, 0);
        fprintf(stderr, "%s: out of memory\n", prog);
        return EXIT_ERROR;
    }
    MYSQL_ROW row;
    size_t i = 0;
    while ((row = mysql_fetch_row(r)) && i < n)
        if (row[0] && parse_u64(row[0], &v[i]) == 0)
            i++;
    mysql_free_result(r);
    end_txn(e, 1);
    *out = v;
    *n_out = i;
    return EXIT_OKAY;
fail:;
    int st = db_fail(e->o, e->conn, "reading the list of shops");
    end_txn(e, 0);
    return st;
}


/* What a run did, added up over its shops. */
typedef struct sweep_run {
    rsv_sweep_result sum;
    size_t swept, failed, not_reached;
    double started, ended; /* Unix time */
    int connected;
} sweep_run;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void add_result(rsv_sweep_result *sum, const rsv_sweep_result *r)
{
    sum->holds_released += r->holds_released;
    sum->units_released += r->units_released;
    sum->journal_folded += r->journal_folded;
    sum->pool_rows_drained += r->pool_rows_drained;
    sum->checkouts_purged += r->checkouts_purged;
}

static int did_something(const rsv_sweep_result *r)
{
    return r->holds_released || r->journal_folded || r->pool_rows_drained ||
           r->checkouts_purged;
}

/* "gave back N expired hold(s) (U units), folded ..." */
static void describe(const rsv_sweep_result *r)
{
    printf("gave back %" PRId64 " expired hold(s) (%" PRId64 " units), "
           "folded %" PRId64 " journal row(s), drained %" PRId64 " pool "
           "row(s), purged %" PRId64 " checkout(s)", r->holds_released,
           r->units_released, r->journal_folded, r->pool_rows_drained,
           r->checkouts_purged);
}

/* The members of a result (no braces); "released" is the holds given
 * back, the name the figure had before the others were reported. */
static void json_result(const rsv_sweep_result *r)
{
    printf("\"released\":%" PRId64 ",\"units_released\":%" PRId64
           ",\"journal_folded\":%" PRId64 ",\"pool_rows_drained\":%" PRId64
           ",\"checkouts_purged\":%" PRId64, r->holds_released,
           r->units_released, r->journal_folded, r->pool_rows_drained,
           r->checkouts_purged);
}

/* ---------------- the metrics file ---------------- */

/* The text of the file the previous run left (malloc'd), or NULL. */
static char *read_previous(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *t = malloc(cap);
    if (t)
        len = fread(t, 1, cap - 1, f);
    fclose(f);
    if (t)
        t[len] = '\0';
    return t;
}

/* The value of the first sample of `name` in the text whose labels hold
 * `label` (NULL: any), or 0 when there is none: a counter starts again
 * from there when the file was lost, which Prometheus reads as a reset. */
static double previous_value(const char *text, const char *name,
                             const char *label)
{
    size_t n = strlen(name);
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1
                                                                    : NULL) {
        if (strncmp(l, name, n) != 0 || (l[n] != '{' && l[n] != ' '))
            continue;
        const char *end = strchr(l, '\n');
        if (!end)
            end = l + strlen(l);
        const char *close = l[n] == '{' ? memchr(l, '}', (size_t)(end - l))
                                        : l + n;
        if (!close)
            continue;
        if (label) {
            size_t ll = strlen(label);
            int found = 0;
            for (const char *p = l + n; p + ll <= close && !found; p++)
                found = strncmp(p, label, ll) == 0;
            if (!found)
                continue;
        }
        return strtod(close + (l[n] == '{'), NULL);
    }
    return 0;
}

/* The database label of the previous file's samples, when this run could
 * not ask the server. */
static void previous_database(const char *text, char *db, size_t len)
{
    const char *p = text ? strstr(text, "{database=\"") : NULL;
    if (!p)
        return;
    p += strlen("{database=\"");
    size_t n = strcspn(p, "\"\n");
    snprintf(db, len, "%.*s", (int)n, p);
}

static const struct counter_def {
    const char *name, *help;
    size_t offset; /* of the figure in rsv_sweep_result */
} counters[] = {
    {"libreserve_sweep_holds_released_total",
     "Expired holds the sweeper gave back.",
     offsetof(rsv_sweep_result, holds_released)},
    {"libreserve_sweep_units_released_total",
     "Units of expired holds the sweeper gave back.",
     offsetof(rsv_sweep_result, units_released)},
    {"libreserve_sweep_journal_folded_total",
     "Journal rows (settled claims and releases) the sweeper folded into "
     "the ledger.", offsetof(rsv_sweep_result, journal_folded)},
    {"libreserve_sweep_pool_rows_drained_total",
     "Rows of idle pools the sweeper gave back to their ledger rows.",
     offsetof(rsv_sweep_result, pool_rows_drained)},
    {"libreserve_sweep_checkouts_purged_total",
     "Checkout records the sweeper purged after the retention.",
     offsetof(rsv_sweep_result, checkouts_purged)},
};

/* Write the run's figures to path, carrying the counters and the time of
 * the last full success over from the file there. */
static int write_metrics(const char *path, const char *database,
                         const sweep_run *run)
{
    char *prev = read_previous(path);
    char db[256];
    snprintf(db, sizeof db, "%s", database ? database : "");
    if (!db[0])
        previous_database(prev, db, sizeof db);
    int ok = run->connected && run->failed == 0 && run->not_reached == 0;
    double last_ok = ok ? run->ended
                        : previous_value(prev, "libreserve_sweep_last_"
                                         "success_timestamp_seconds", NULL);
    prom_out p;
    int st = prom_open(&p, path);
    if (st) {
        free(prev);
        return st;
    }
    FILE *f = p.f;
#define SERIES(name)                                                      \
    do {                                                                  \
        fputs(name "{database=", f);                                      \
        prom_label_value(f, db);                                          \
    } while (0)
    prom_family(f, "libreserve_sweep_last_run_timestamp_seconds", "gauge",
                "When the last sweep run ended (Unix time), whatever its "
                "outcome.");
    SERIES("libreserve_sweep_last_run_timestamp_seconds");
    fprintf(f, "} %.3f\n", run->ended);
    prom_family(f, "libreserve_sweep_last_success_timestamp_seconds",
                "gauge", "When the last sweep run that swept every shop "
                "without a failure ended (Unix time; 0: none yet).");
    SERIES("libreserve_sweep_last_success_timestamp_seconds");
    fprintf(f, "} %.3f\n", last_ok);
    prom_family(f, "libreserve_sweep_last_run_duration_seconds", "gauge",
                "How long the last sweep run took.");
    SERIES("libreserve_sweep_last_run_duration_seconds");
    fprintf(f, "} %.3f\n", run->ended - run->started);
    prom_family(f, "libreserve_sweep_last_run_shops", "gauge",
                "Shops of the last sweep run: swept, failed, or not reached "
                "(the connection was lost).");
    static const char *const results[] = {"swept", "failed", "not_reached"};
    size_t counts[] = {run->swept, run->failed, run->not_reached};
    for (int i = 0; i < 3; i++) {
        SERIES("libreserve_sweep_last_run_shops");
        fprintf(f, ",result=\"%s\"} %zu\n", results[i], counts[i]);
    }
    prom_family(f, "libreserve_sweep_runs_total", "counter",
                "Sweep runs, by outcome: ok (every shop swept) or failed "
                "(a shop failed, or no connection).");
    for (int i = 0; i < 2; i++) {
        const char *res = i ? "failed" : "ok";
        char label[32];
        snprintf(label, sizeof label, "result=\"%s\"", res);
        double v = previous_value(prev, "libreserve_sweep_runs_total",
                                  label) + (ok == !i);
        SERIES("libreserve_sweep_runs_total");
        fprintf(f, ",%s} %.0f\n", label, v);
    }
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++) {
        int64_t add;
        memcpy(&add, (const char *)&run->sum + counters[i].offset,
               sizeof add);
        prom_family(f, counters[i].name, "counter", counters[i].help);
        fputs(counters[i].name, f);
        fputs("{database=", f);
        prom_label_value(f, db);
        fprintf(f, "} %.0f\n",
                previous_value(prev, counters[i].name, NULL) + (double)add);
    }
#undef SERIES
    free(prev);
    return prom_close(&p, 1);
}

void sweep_connect_failed(const opts *o)
{
    if (!o->metrics_file)
        return;
    sweep_run run;
    memset(&run, 0, sizeof run);
    run.sum.version = RSV_SWEEP_RESULT_VERSION;
    run.started = run.ended = now_s();
    (void)write_metrics(o->metrics_file, o->database, &run);
}

/* ---------------- the command ---------------- */

static int sweep_shops(const cmd_env *e, const uint64_t *shops, size_t n,
                       int64_t max, sweep_run *run)
{
    int json = e->o->json, all = e->o->all;
    if (json && all)
        printf("{\"scope\":\"all\",\"shops\":[");
    size_t printed = 0;
    for (size_t i = 0; i < n; i++) {
        rsv_sweep_result r = {RSV_SWEEP_RESULT_VERSION};
        int rc = rsv_sweep_report(e->ctx, shops[i], max, &r);
        /* A failed sweep keeps what it did before the failure, and says
         * how much. */
        add_result(&run->sum, &r);
        if (rc == RSV_OK)
            run->swept++;
        else
            run->failed++;
        if (!all && rc != RSV_OK)
            return lib_fail(e->o, e->ctx, "rsv_sweep_report", rc);
        if (json) {
            printf("%s{\"shop_id\":%" PRIu64 ",", printed++ ? "," : "",
                   shops[i]);
            json_result(&r);
            if (rc != RSV_OK) {
                printf(",\"error\":");
                json_error_obj(rc, lib_msg(e->ctx, rc));
            }
            printf(all ? "}" : "}\n");
        } else if (!all || rc != RSV_OK || did_something(&r)) {
            /* every shop sweeps in a run: only those that did something
             * or failed make the log */
            printf("shop %" PRIu64 ": ", shops[i]);
            if (rc != RSV_OK)
                printf("failed (%s) after it ", code_name(rc));
            describe(&r);
            putchar('\n');
        }
        if (rc != RSV_OK)
            fprintf(stderr, "%s: rsv_sweep_report of shop %" PRIu64
                    ": %s: %s\n", prog, shops[i], code_name(rc),
                    lib_msg(e->ctx, rc));
        /* The library never reconnects: without a connection every
         * further shop would fail the same way.  One busy or failing shop
         * does not keep the others from being swept. */
        if (rc == RSV_ECONN || rc == RSV_EINDOUBT) {
            run->not_reached = n - i - 1;
            break;
        }
    }
    run->ended = now_s();
    if (!all)
        return EXIT_OKAY;
    long ms = (long)((run->ended - run->started) * 1000 + 0.5);
    if (json) {
        printf("],\"shops_swept\":%zu,\"shops_failed\":%zu,"
               "\"shops_not_reached\":%zu,", run->swept, run->failed,
               run->not_reached);
        json_result(&run->sum);
        printf(",\"elapsed_ms\":%ld}\n", ms);
    } else {
        printf("every shop: ");
        describe(&run->sum);
        printf(" in %zu shop(s)", run->swept);
        if (run->failed)
            printf(", %zu failed", run->failed);
        if (run->not_reached)
            printf(", %zu not reached (connection lost)", run->not_reached);
        printf(", %ld ms\n", ms);
    }
    return run->failed || run->not_reached ? EXIT_ERROR : EXIT_OKAY;
}

int cmd_sweep(const cmd_env *e)
{
    uint64_t shop;
    int st = shop_or_all(e, "sweep", &shop);
    if (st)
        return st;
    int64_t max = e->o->have_max ? e->o->max : 0;
    sweep_run run;
    memset(&run, 0, sizeof run);
    run.sum.version = RSV_SWEEP_RESULT_VERSION;
    run.started = now_s();
    run.connected = 1;
    uint64_t *shops = NULL;
    size_t n = 1;
    if (e->o->all)
        st = list_shops(e, &shops, &n);
    if (st == EXIT_OKAY)
        st = sweep_shops(e, e->o->all ? shops : &shop, n, max, &run);
    else
        run.failed = 1; /* could not even list them */
    free(shops);
    if (!run.ended)
        run.ended = now_s();
    if (e->o->metrics_file) {
        char db[256] = "";
        MYSQL_RES *r = query_rows(e->conn, "/* conn_tag:admin */ SELECT "
                                           "DATABASE()");
        MYSQL_ROW row = r ? mysql_fetch_row(r) : NULL;
        if (row && row[0])
            snprintf(db, sizeof db, "%s", row[0]);
        if (r)
            mysql_free_result(r);
        int mst = write_metrics(e->o->metrics_file, db[0] ? db : NULL, &run);
        if (st == EXIT_OKAY)
            st = mst;
    }
    return st;
}
