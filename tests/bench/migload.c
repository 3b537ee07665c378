/*
 * migload.c - the load of the migration's benchmark
 * (tests/bench/migrate-bench.sh, make bench-migrate): buyers checking out
 * through migration handles against the old store of
 * examples/migrate_redis.c (Redis counters, the ledger in a MariaDB of its
 * own), each buyer a thread with its own context and handle.  It measures
 * what the buyer waits for (each call's time), follows the stage each
 * handle sees (for the propagation's timing), and after a drain prints
 * each handle's queue books summed.
 *
 * Usage: migload --dsn DSN --redis-port P --ledger-port P --ledger-db DB
 *                --shop N [--buyers 64] [--rate CHECKOUTS_PER_S (0: as
 *                fast as they can)] [--seconds S] [--items N]
 *                [--queue-max N] [--ttl-ms MS (5000)] [--state DIR --id ID]
 *                [--batcher CONNECTIONS]
 *                [--window FILE] [--dump FILE]
 *   --dsn         libreserve's server (the context and the handle's
 *                 shadow connection), rsv_open_dsn's format
 *   --state DIR   a thread beside each buyer writes DIR/stage.ID.N, one
 *                 line per stage its handle followed ("STAGE UNIX_MS");
 *                 DIR/ready.ID.N once the handle is open; the run also
 *                 ends when DIR/stop exists
 *   --window FILE read at the end: "FROM_MS TO_MS" (Unix time), the calls
 *                 started inside it are reported apart (a stall)
 *   --dump FILE   every call, one line each: "START_UNIX_MS US BUYER OP"
 *                 (OP: RSV_OP_*)
 *   --batcher N   one batcher of N connections on --dsn that every
 *                 buyer's handle sends its shadow calls through
 *                 (rsv_migrate_set_batcher)
 * Each checkout reserves one unit of an item drawn from 1..N at location
 * 1 and claims it, or releases it one time in five, as the example does.
 * Prints "migload: key=value ..." lines (max_waiting: the most work seen
 * waiting in all the queues at once, sampled every second; _one: in one
 * queue); exits 1 when a call failed or
 * the queue's books do not balance after the drain.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <reserve.h>
#include <reserve/batch.h>
#include <reserve/migrate.h>

#include "migrate_redis_store.h"

static const char *dsn, *ledger_db = "legacy", *state_dir, *window_file,
                  *dump_file;
static int redis_port, ledger_port, proc_id, nbuyers = 64;
static uint64_t shop, items = 10;
static double rate, seconds = 30;
static int64_t ttl_ms = 5000;
static uint32_t queue_max, batcher_conns;
static rsv_batcher *batcher;
static atomic_int stop_flag;

typedef struct sample {
    uint64_t start_ms;  /* Unix time the call started */
    uint32_t us;        /* its time */
    uint32_t op;        /* RSV_OP_* */
} sample;

typedef struct buyer {
    int n;
    pthread_t t;
    rsv_migration *m;
    pthread_mutex_t mu;   /* m's life, for the watcher and the sampling */
    int done;
    sample *s;
    size_t ns, cap;
    uint64_t checkouts, failed;
    uint64_t stat[RSV_MIG_STAT_COUNT];
    int drained, open_ok;
} buyer;

static uint64_t now_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void put_file(const char *name, int n, const char *text, int append)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s.%d.%d", state_dir, name, proc_id, n);
    FILE *f = fopen(p, append ? "a" : "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* The stage the buyer's handle follows, polled every millisecond from a
 * thread of its own (rsv_migrate_stage may be called from any thread),
 * so a buyer inside a call does not delay what it records. */
static void *watch(void *arg)
{
    buyer *b = arg;
    int32_t seen = -1;
    for (;;) {
        pthread_mutex_lock(&b->mu);
        int done = b->done;
        int32_t st = -1;
        if (!done && b->m)
            rsv_migrate_stage(b->m, shop, &st);
        pthread_mutex_unlock(&b->mu);
        if (done)
            return NULL;
        if (st != seen) {
            char line[64];
            snprintf(line, sizeof line, "%d %" PRIu64 "\n", (int)st,
                     now_ns(CLOCK_REALTIME) / 1000000u);
            put_file("stage", b->n, line, 1);
            seen = st;
        }
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
}

static void record(buyer *b, uint32_t op, uint64_t start_ms, uint64_t ns)
{
    if (b->ns == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        sample *v = realloc(b->s, cap * sizeof *v);
        if (!v)
            return;
        b->s = v;
        b->cap = cap;
    }
    b->s[b->ns++] = (sample){start_ms, (uint32_t)(ns / 1000u), op};
}

static void *buy(void *arg)
{
    buyer *b = arg;
    rsv_ctx *ctx = NULL;
    old_store o = {.r = NULL, .ledger = NULL};
    pthread_mutex_init(&o.mu, NULL);
    rsv_migration *m = NULL;
    int rc = rsv_open_dsn(&ctx, dsn, NULL);
    if (rc == RSV_OK)
        rc = rsv_migrate_open(&m, ctx, dsn, queue_max);
    pthread_mutex_lock(&b->mu);
    b->m = m;
    pthread_mutex_unlock(&b->mu);
    o.r = redisConnect("127.0.0.1", redis_port);
    o.ledger = mysql_init(NULL);
    if (rc != RSV_OK || !o.r || o.r->err || !o.ledger ||
        !mysql_real_connect(o.ledger, "127.0.0.1", "root", "", ledger_db,
                            (unsigned)ledger_port, NULL, 0)) {
        fprintf(stderr, "migload: buyer %d.%d cannot start: %s %s %s\n",
                proc_id, b->n, rsv_code_name(rc) ? rsv_code_name(rc) : "?",
                ctx ? rsv_errmsg(ctx) : "",
                o.ledger ? mysql_error(o.ledger) : "");
        atomic_store(&stop_flag, 1);
        b->failed++;
        goto out;
    }
    b->open_ok = 1;
    rsv_migrate_set_legacy(m, old_store_fn, &o);
    if (batcher)
        rsv_migrate_set_batcher(m, batcher);
    pthread_t watcher;
    int watching = state_dir != NULL;
    if (watching) {
        pthread_create(&watcher, NULL, watch, b);
        put_file("ready", b->n, "1\n", 0);
    }
    unsigned seed = (unsigned)(getpid() * 131 + b->n);
    /* the buyers' checkouts spread evenly over each one's period */
    double period = rate > 0 ? nbuyers / rate : 0;
    uint64_t next = now_ns(CLOCK_MONOTONIC) +
                    (uint64_t)(period * 1e9 * b->n / nbuyers);
    uint64_t nonce = now_ns(CLOCK_REALTIME) / 1000u;
    while (!atomic_load(&stop_flag)) {
        if (period > 0) {
            struct timespec ts = {(time_t)(next / 1000000000u),
                                  (long)(next % 1000000000u)};
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
            next += (uint64_t)(period * 1e9);
            if (atomic_load(&stop_flag))
                break;
        }
        char tok[64];
        int tl = snprintf(tok, sizeof tok, "%" PRIx64 "p%dt%dn%" PRIu64, nonce,
                          proc_id, b->n, b->checkouts);
        uint64_t item = 1 + (uint64_t)rand_r(&seed) % items;
        b->checkouts++;
        uint64_t t = now_ns(CLOCK_MONOTONIC);
        uint64_t w = now_ns(CLOCK_REALTIME) / 1000000u;
        rc = rsv_migrate_reserve_one(m, shop, tok, (size_t)tl, item, 1, 1,
                                     ttl_ms);
        record(b, RSV_OP_RESERVE, w, now_ns(CLOCK_MONOTONIC) - t);
        if (rc != RSV_OK) {
            b->failed++;
            continue;
        }
        int claim = rand_r(&seed) % 5 != 0;
        t = now_ns(CLOCK_MONOTONIC);
        w = now_ns(CLOCK_REALTIME) / 1000000u;
        rc = claim ? rsv_migrate_claim(m, shop, tok, (size_t)tl)
                   : rsv_migrate_release(m, shop, tok, (size_t)tl);
        record(b, claim ? RSV_OP_CLAIM : RSV_OP_RELEASE, w,
               now_ns(CLOCK_MONOTONIC) - t);
        if (rc != RSV_OK)
            b->failed++;
    }
    b->drained = rsv_migrate_drain(m, 300000) == RSV_OK;
    for (uint32_t k = 0; k < RSV_MIG_STAT_COUNT; k++)
        rsv_migrate_stat(m, shop, k == RSV_MIG_STAGE_READ_FAILED, k,
                         &b->stat[k]);
    if (watching) {
        pthread_mutex_lock(&b->mu);
        b->done = 1;
        pthread_mutex_unlock(&b->mu);
        pthread_join(watcher, NULL);
    }
out:
    pthread_mutex_lock(&b->mu);
    b->m = NULL;
    pthread_mutex_unlock(&b->mu);
    rsv_migrate_close(m);
    rsv_close(ctx);
    if (o.r)
        redisFree(o.r);
    if (o.ledger)
        mysql_close(o.ledger);
    return NULL;
}

static int cmp_us(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile of v[0..n) (sorted), nearest rank. */
static uint32_t quantile(const uint32_t *v, size_t n, double q)
{
    if (!n)
        return 0;
    size_t i = (size_t)ceil(q * (double)n);
    return v[i ? i - 1 : 0];
}

static void report(const char *label, uint32_t *v, size_t n, double secs)
{
    qsort(v, n, sizeof *v, cmp_us);
    printf("migload: %s calls=%zu calls_per_s=%.0f p50_us=%" PRIu32
           " p99_us=%" PRIu32 " p999_us=%" PRIu32 " max_us=%" PRIu32 "\n",
           label, n, secs > 0 ? (double)n / secs : 0.0, quantile(v, n, 0.5),
           quantile(v, n, 0.99), quantile(v, n, 0.999),
           n ? v[n - 1] : 0);
}

static const char *arg_of(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "migload: %s needs a value\n", argv[*i]);
        exit(2);
    }
    return argv[++*i];
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--dsn"))
            dsn = arg_of(argc, argv, &i);
        else if (!strcmp(a, "--redis-port"))
            redis_port = atoi(arg_of(argc, argv, &i));
        else if (!strcmp(a, "--ledger-port"))
            ledger_port = atoi(arg_of(argc, argv, &i));
        else if (!strcmp(a, "--ledger-db"))
            ledger_db = arg_of(argc, argv, &i);
        else if (!strcmp(a, "--shop"))
            shop = strtoull(arg_of(argc, argv, &i), NULL, 10);
        else if (!strcmp(a, "--buyers"))
            nbuyers = atoi(arg_of(argc, argv, &i));
        else if (!strcmp(a, "--rate"))
            rate = atof(arg_of(argc, argv, &i));
        else if (!strcmp(a, "--seconds"))
            seconds = atof(arg_of(argc, argv, &i));
        else if (!strcmp(a, "--items"))
            items = strtoull(arg_of(argc, argv, &i), NULL, 10);
        else if (!strcmp(a, "--ttl-ms"))
            ttl_ms = strtoll(arg_of(argc, argv, &i), NULL, 10);
        else if (!strcmp(a, "--batcher"))
            batcher_conns = (uint32_t)strtoul(arg_of(argc, argv, &i), NULL,
                                              10);
        else if (!strcmp(a, "--queue-max"))
            queue_max = (uint32_t)strtoul(arg_of(argc, argv, &i), NULL, 10);
        else if (!strcmp(a, "--state"))
            state_dir = arg_of(argc, argv, &i);
        else if (!strcmp(a, "--id"))
            proc_id = atoi(arg_of(argc, argv, &i));
        else if (!strcmp(a, "--window"))
            window_file = arg_of(argc, argv, &i);
        else if (!strcmp(a, "--dump"))
            dump_file = arg_of(argc, argv, &i);
        else {
            fprintf(stderr, "migload: unknown option %s (see the comment at "
                            "the top of tests/bench/migload.c)\n", a);
            return 2;
        }
    }
    if (!dsn || !redis_port || !ledger_port || !shop || nbuyers < 1 ||
        nbuyers > 1024 || !items) {
        fprintf(stderr, "migload: --dsn, --redis-port, --ledger-port and "
                        "--shop are needed\n");
        return 2;
    }
    if (batcher_conns) {
        int brc = rsv_batcher_open(&batcher, dsn, NULL, batcher_conns);
        if (brc != RSV_OK) {
            fprintf(stderr, "migload: no batcher: %s\n", rsv_strerror(brc));
            return 1;
        }
    }
    buyer *b = calloc((size_t)nbuyers, sizeof *b);
    if (!b)
        return 1;
    uint64_t t0 = now_ns(CLOCK_MONOTONIC);
    for (int i = 0; i < nbuyers; i++) {
        b[i].n = i;
        pthread_mutex_init(&b[i].mu, NULL);
        pthread_create(&b[i].t, NULL, buy, &b[i]);
    }
    char stop_path[4096] = "";
    if (state_dir)
        snprintf(stop_path, sizeof stop_path, "%s/stop", state_dir);
    uint64_t max_waiting = 0, max_waiting_one = 0, next_sample = t0;
    while (!atomic_load(&stop_flag)) {
        struct timespec pause = {0, 20000000};
        nanosleep(&pause, NULL);
        if (now_ns(CLOCK_MONOTONIC) >= next_sample) {
            /* the work waiting in the queues: how far the side that does
             * not decide lags behind */
            uint64_t sum = 0;
            for (int i = 0; i < nbuyers; i++) {
                uint64_t v[3] = {0, 0, 0};
                pthread_mutex_lock(&b[i].mu);
                if (b[i].m) {
                    rsv_migrate_stat(b[i].m, shop, 0, RSV_MIG_OFFERED, &v[0]);
                    rsv_migrate_stat(b[i].m, shop, 0, RSV_MIG_APPLIED, &v[1]);
                    rsv_migrate_stat(b[i].m, shop, 0, RSV_MIG_DROPPED, &v[2]);
                }
                pthread_mutex_unlock(&b[i].mu);
                uint64_t w = v[0] - v[1] - v[2];
                sum += w;
                if (w > max_waiting_one)
                    max_waiting_one = w;
            }
            if (sum > max_waiting)
                max_waiting = sum;
            next_sample += 1000000000u;
        }
        if ((seconds > 0 &&
             (double)(now_ns(CLOCK_MONOTONIC) - t0) / 1e9 >= seconds) ||
            (*stop_path && access(stop_path, F_OK) == 0))
            atomic_store(&stop_flag, 1);
    }
    double secs = (double)(now_ns(CLOCK_MONOTONIC) - t0) / 1e9;
    for (int i = 0; i < nbuyers; i++)
        pthread_join(b[i].t, NULL);

    uint64_t from = 0, to = 0;
    if (window_file) {
        FILE *f = fopen(window_file, "r");
        if (!f || fscanf(f, "%" SCNu64 " %" SCNu64, &from, &to) != 2)
            from = to = 0;
        if (f)
            fclose(f);
    }
    size_t n = 0, nw = 0;
    for (int i = 0; i < nbuyers; i++)
        n += b[i].ns;
    uint32_t *all = malloc((n ? n : 1) * sizeof *all);
    uint32_t *win = malloc((n ? n : 1) * sizeof *win);
    if (!all || !win)
        return 1;
    FILE *dump = dump_file ? fopen(dump_file, "w") : NULL;
    n = 0;
    uint64_t checkouts = 0, failed = 0, st[RSV_MIG_STAT_COUNT] = {0};
    int drained = 1, opened = 1;
    for (int i = 0; i < nbuyers; i++) {
        for (size_t k = 0; k < b[i].ns; k++) {
            all[n++] = b[i].s[k].us;
            if (dump)
                fprintf(dump, "%" PRIu64 " %" PRIu32 " %d %" PRIu32 "\n",
                        b[i].s[k].start_ms, b[i].s[k].us, i, b[i].s[k].op);
            if (to > from && b[i].s[k].start_ms >= from &&
                b[i].s[k].start_ms < to)
                win[nw++] = b[i].s[k].us;
        }
        checkouts += b[i].checkouts;
        failed += b[i].failed;
        drained &= b[i].drained;
        opened &= b[i].open_ok;
        for (int k = 0; k < RSV_MIG_STAT_COUNT; k++)
            st[k] += b[i].stat[k];
        free(b[i].s);
    }
    if (dump)
        fclose(dump);
    printf("migload: shop=%" PRIu64 " buyers=%d seconds=%.1f checkouts=%"
           PRIu64 " checkouts_per_s=%.0f failed=%" PRIu64 "\n", shop, nbuyers,
           secs, checkouts, (double)checkouts / secs, failed);
    report("all", all, n, secs);
    if (to > from)
        report("window", win, nw, (double)(to - from) / 1000.0);
    uint64_t off = st[RSV_MIG_OFFERED], app = st[RSV_MIG_APPLIED],
             drop = st[RSV_MIG_DROPPED];
    int balanced = drained && off == app + drop;
    printf("migload: queue offered=%" PRIu64 " applied=%" PRIu64 " dropped=%"
           PRIu64 " drained=%d books=%s max_waiting=%" PRIu64
           " max_waiting_one=%" PRIu64 "\n", off, app, drop, drained,
           balanced ? "balanced" : "UNBALANCED", max_waiting,
           max_waiting_one);
    printf("migload: classes both_accepted=%" PRIu64 " both_refused=%" PRIu64
           " old_refused_new_accepted=%" PRIu64 " old_accepted_new_refused=%"
           PRIu64 " new_failed=%" PRIu64 " unknown=%" PRIu64 " old_failed=%"
           PRIu64 " stage_read_failed=%" PRIu64 "\n",
           st[RSV_MIG_BOTH_ACCEPTED], st[RSV_MIG_BOTH_REFUSED],
           st[RSV_MIG_OLD_REFUSED_NEW_ACCEPTED],
           st[RSV_MIG_OLD_ACCEPTED_NEW_REFUSED], st[RSV_MIG_NEW_FAILED],
           st[RSV_MIG_UNKNOWN], st[RSV_MIG_OLD_FAILED],
           st[RSV_MIG_STAGE_READ_FAILED]);
    free(all);
    free(win);
    free(b);
    rsv_batcher_close(batcher); /* after every handle closed */
    return failed || !balanced || !opened ? 1 : 0;
}
