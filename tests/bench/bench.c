/*
 * bench.c - libreserve against the strongest simple alternatives, side by
 * side, on one throwaway MariaDB (tests/bench/run-bench.sh starts it, in
 * one of the configurations of docs/performance.md).
 *
 * Designs (same client threads, one connection each, READ COMMITTED):
 *   libreserve  the public API: rsv_reserve_one / rsv_reserve / rsv_claim
 *   hotrow-1rt  the hot-row counter in ONE round trip: a CALL of a
 *               procedure this program creates in its own database, which
 *               inserts the hold, then UPDATE ledger SET available =
 *               available - q WHERE ... AND available >= q (ROW_COUNT()
 *               says whether there was stock), and commits.  Its claim:
 *               a CALL that deletes the hold, then adds the units to the
 *               ledger row's claimed, and commits.  Carts: one CALL whose
 *               procedure walks the lines.
 *   floor-1rt   one autocommit INSERT of the hold (one round trip, no
 *               shared row).  Its claim: one autocommit DELETE.
 *   hotrow      the same hot row as statements: UPDATE the ledger row;
 *               INSERT the hold; COMMIT (3 round trips).  Its claim:
 *               UPDATE the ledger row; DELETE the hold; COMMIT.
 *   floor       INSERT the hold; COMMIT (2 round trips).  Its claim:
 *               DELETE the hold; COMMIT.
 * The statement forms use prepared statements with autocommit off, so
 * every transaction starts with its first statement and ends with an
 * explicit COMMIT (no START TRANSACTION round trip).  Every design writes
 * the same hold row (tables created LIKE rsv_holds) into tables
 * of its own, and the hot rows have a ledger table each, so the tables
 * at the end can be checked against every success the clients counted.
 * libreserve-batch  the same buyers sharing connections, as a checkout
 *               server that serves many buyers at once would: one
 *               connection per BATCH_BUYERS clients (8 connections for
 *               64), each of whose threads collects one request of each
 *               of its buyers and sends them as one rsv_reserve_batch;
 *               every entry's latency is its batch's.  Its claims: one
 *               rsv_claim_batch per connection, one claim of each of
 *               its buyers; in the cart workloads one
 *               rsv_reserve_cart_batch.
 * libreserve-batcher  the same buyers, one thread each as in libreserve,
 *               calling one shared rsv_batcher with one connection per
 *               BATCH_BUYERS clients (8 for 64): the library coalesces
 *               whatever the buyers ask at the same time into batches.
 *               Each buyer's latency is its own call's, queueing
 *               included.  Its claims: rsv_batcher_claim; its carts:
 *               rsv_batcher_reserve.
 *
 * Workloads: flash1 (one item), flash1q2 and flash1q5 (one item, 2 and 5
 * units per reserve), spread10k (10,000 items), cart5x3 (5-line carts,
 * each line at 3 locations), claim1 (claims of holds on one item, made
 * before the measurement: by rsv_reserve_one for the library designs, by
 * bulk INSERT for the others), soldout1 (buyers asking for an item that
 * has sold out: the answer, out of stock, is the operation; the floors
 * have no such answer and sit out), soldcart5 (the same answer for
 * 5-line carts one line of which names the sold-out item; the hot rows
 * meet that line first, as items are locked in order, which is the form
 * most favourable to them), hotcart5 (5-line carts one line of which is
 * the flash-sale item, at its one location: a hot item bought together
 * with others), stampede (--stampede: hundreds of buyers, one thread and
 * connection each, released at once on ONE item with stock for all of
 * them, each making a few reserves one after the other; libreserve's
 * pool cap is small, so the pool is refilled many times over while they
 * run.  Measured on a server started just before it (server=fresh:
 * tests/bench/run-bench.sh gives the command that starts one, in
 * RSV_BENCH_RESTART) and again right after on that server (server=warm),
 * each time on an item of its own; every call's latency counts, failed
 * ones too, and the lines add the maximum and the count of every answer
 * code; libreserve and hotrow-1rt by default).
 * Network: rtt_us=0 is the server's Unix socket; any other RTT goes
 * through tests/bench/proxy (127.0.0.1, delays each chunk by rtt/2).
 *
 * Each (workload, clients, RTT) is measured in rounds: every design once
 * per round, the order rotated from round to round, so a drift of the
 * machine's load falls on every design alike.
 *
 * Output (stdout): '#' header and comment lines, a '# round' line per
 * measurement, then per design one line of medians over the rounds:
 *   bench design=D workload=W clients=N rtt_us=R binlog=0|1 ops_per_s=X
 *     p50_us=.. p99_us=.. p999_us=.. rounds=.. ops_per_s_range=MIN-MAX
 *     p99_us_range=MIN-MAX
 * (semisync=1 after binlog= when the server waits for a semi-synchronous
 * replica), then ratio lines, the speed targets, and the check of every
 * design's tables.  Progress goes to stderr.  Nothing here asserts a
 * timing; the run fails only if a design's tables disagree with the
 * successes its clients counted, or something could not run.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <mysql.h>
#include <mysqld_error.h>
#include <errmsg.h>

#include "reserve.h"
#include "reserve/batch.h"
#include "reserve/stats.h"
#include "../loadlib.h"
#include "../../lib/test_flags.h"

extern char **environ;

/* ------------------------------------------------------------------ */
/* constants                                                          */
/* ------------------------------------------------------------------ */

#define SHOP 1
#define FLASH_ITEM 1
#define CLAIM_ITEM 2
#define SOLDOUT_ITEM 3
#define FLASHQ2_ITEM 4     /* the hot items of flash1q2 and flash1q5: one */
#define FLASHQ5_ITEM 5     /* each, so every workload starts from a full pool */
#define SPREAD_BASE 100000 /* items SPREAD_BASE+1 .. +10000, location 1 */
#define SPREAD_N 10000
#define CART_BASE 200000   /* items CART_BASE+1 .. +CART_N, locations 1..3 */
#define CART_N 100
#define CART_LINES 5
#define CART_LOCS 3
#define STMT_BASE 300000   /* statements-per-reserve items, locations 1..3 */
#define STMT_MAX_LINES 50
#define COLD_BASE 400000   /* first-touch probe items */
#define STAMPEDE_BASE 500000 /* stampede items: one per measurement */
#define STAMPEDE_RELEASE_US 200000 /* from the barrier to the release */
#define STAMPEDE_MAX_US 600000000ULL /* a bound on one stampede */
#define STAMPEDE_DUMP_US 1000000 /* --stampede-profile: when to save SHOW
                                  * ENGINE INNODB STATUS */
#define BIG_STOCK 10000000LL
/* No hold expires during a run: a full run with every configuration lasts
 * hours, and an expired hold may be given back, which the check of the
 * tables at the end would count as missing. */
#define HOLD_TTL_MS 86400000LL
#define MAXROUNDS 15

enum { D_LIB, D_HOT1, D_FLOOR1, D_HOT, D_FLOOR, D_BATCH, D_BATCHER, D_N };
static const char *design_name[D_N] = {"libreserve", "hotrow-1rt", "floor-1rt",
                                       "hotrow", "floor", "libreserve-batch",
                                       "libreserve-batcher"};
/* First byte of the checkout tokens of each design's reserves (tokens are
 * byte-exact, so 'h' and 'H' differ); claims use 'c' then the design's
 * byte (the library designs share rsv_holds), the probes 's' and 'k', so
 * a prefix picks a design's reserves or claim holds out of its tables. */
static const char design_tag[D_N] = {'l', 'H', 'F', 'h', 'f', 'b', 'B'};
/* Round trips of one single-line reserve, for the labels. */
static const char *design_trips[D_N] = {"1 CALL", "1 CALL", "1 INSERT",
                                        "3: UPDATE, INSERT, COMMIT",
                                        "2: INSERT, COMMIT",
                                        "1 CALL per batch of up to 8 buyers",
                                        "1 CALL per batch of what the buyers "
                                        "queued on 8 connections"};
/* Buyers per connection of libreserve-batch and libreserve-batcher. */
#define BATCH_BUYERS 8
static int is_hot(int d) { return d == D_HOT || d == D_HOT1; }
static int is_floor(int d) { return d == D_FLOOR || d == D_FLOOR1; }
static int is_1rt(int d) { return d == D_HOT1 || d == D_FLOOR1; }
/* The designs that call the library. */
static int is_lib(int d)
{
    return d == D_LIB || d == D_BATCH || d == D_BATCHER;
}

/* The stampede is one workload measured in two server states, kept apart
 * as two: W_STAMPEDE on a warm server, W_STAMPEDE_FRESH on one started
 * just before (both named "stampede"; cfg_key_for tells them apart). */
enum { W_FLASH, W_FLASHQ2, W_FLASHQ5, W_SPREAD, W_CART, W_CLAIM, W_SOLDOUT,
       W_SOLDCART, W_HOTCART, W_STAMPEDE, W_STAMPEDE_FRESH, W_N };
static const char *wl_name[W_N] = {"flash1", "flash1q2", "flash1q5",
                                   "spread10k", "cart5x3", "claim1",
                                   "soldout1", "soldcart5", "hotcart5",
                                   "stampede", "stampede"};
/* Units per reserve line. */
static const int wl_qty[W_N] = {1, 2, 5, 1, 1, 1, 1, 1, 1, 1, 1};

static int wl_is_stampede(int wl)
{
    return wl == W_STAMPEDE || wl == W_STAMPEDE_FRESH;
}


static int wl_is_cart(int wl)
{
    return wl == W_CART || wl == W_HOTCART || wl == W_SOLDCART;
}

static int wl_is_soldout(int wl) { return wl == W_SOLDOUT || wl == W_SOLDCART; }

/* A design with nothing to measure in a workload: the floors have no
 * sold-out answer; the stampede needs a stock guard and one thread per
 * buyer. */
static int sits_out(int wl, int d)
{
    if (wl_is_stampede(wl)) /* (the designs with a stock guard and a
                             * buyer per thread) */
        return d != D_LIB && d != D_HOT1 && d != D_HOT && d != D_BATCHER;
    return wl_is_soldout(wl) && is_floor(d);
}

/* The item of a one-line reserve workload. */
static uint64_t wl_item(int wl)
{
    return wl == W_FLASHQ2 ? FLASHQ2_ITEM
         : wl == W_FLASHQ5 ? FLASHQ5_ITEM
         : wl_is_soldout(wl) ? SOLDOUT_ITEM
         : wl == W_CLAIM ? CLAIM_ITEM
                         : FLASH_ITEM;
}

/* ------------------------------------------------------------------ */
/* configuration                                                      */
/* ------------------------------------------------------------------ */

#define MAXLIST 16
typedef struct intlist {
    int v[MAXLIST];
    int n;
} intlist;

static struct {
    const char *sock, *user, *pass;
    const char *proxy_path;
    const char *schema_path;
    const char *outdir;
    int quick;
    int warmup_ms, duration_ms;
    int rounds;
    intlist rtts;
    intlist clients[W_N];
    int workloads[W_N];
    int designs[D_N];
    int stmts, cold, profile;
    long spread_stock;
    int warm_spread; /* rsv_replenish every spread item before the run */
    long claim_holds[D_N];
    int setup_threads;
    uint32_t lib_flags;      /* rsv_options.flags of libreserve's contexts */
    /* the stampede: reserves per buyer, libreserve's pool_cap, the command
     * that replaces the server by a freshly started one (NULL: no fresh
     * measurements), a profiled run of each measurement */
    int stampede_reserves;
    int stampede_cap;
    const char *restart_cmd;
    int stampede_profile;
    int proxy_port;          /* first port to try for the proxies; 0: any */
    int processes;           /* --processes: each client a process of its
                                own, not a thread (the crowd) */
    /* the server's configuration, read at start: every line says it */
    int binlog, semisync;
} cfg;

/* The server configuration's part of every output line. */
static const char *cfg_key(void)
{
    static char buf[64];
    snprintf(buf, sizeof buf, "binlog=%d%s%s", cfg.binlog,
             cfg.semisync ? " semisync=1" : "",
             cfg.processes ? " clients_as=processes" : "");
    return buf;
}

/* The same for a measurement of workload wl: the stampede also says in
 * which state the server was. */
static const char *cfg_key_for(int wl)
{
    static char buf[96];
    snprintf(buf, sizeof buf, "%s%s", cfg_key(),
             wl == W_STAMPEDE         ? " server=warm"
             : wl == W_STAMPEDE_FRESH ? " server=fresh"
                                      : "");
    return buf;
}

/* Every libreserve context of the run (--statements-only sets a flag);
 * pool_cap 0 keeps the default. */
static void lib_options(rsv_options *o, int64_t pool_cap)
{
    rsv_options_init(o, RSV_OPTIONS_VERSION);
    o->flags = cfg.lib_flags;
    if (pool_cap > 0)
        o->pool_cap = pool_cap;
}

static int lib_open_cap(rsv_ctx **ctx, MYSQL *c, int64_t pool_cap)
{
    rsv_options o;
    lib_options(&o, pool_cap);
    return rsv_open(ctx, c, &o);
}

static int lib_open(rsv_ctx **ctx, MYSQL *c)
{
    return lib_open_cap(ctx, c, 0);
}

static char dbname[64];

/* ------------------------------------------------------------------ */
/* small utilities                                                    */
/* ------------------------------------------------------------------ */

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void sleep_us(uint64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void sleep_until(uint64_t t)
{
    uint64_t n = now_us();
    if (t > n)
        sleep_us(t - n);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void progress(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

static void *xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz ? sz : 1);
    if (!p)
        die("out of memory");
    return p;
}

static int parse_list(const char *s, intlist *l)
{
    l->n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || l->n == MAXLIST)
            return -1;
        l->v[l->n++] = (int)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return l->n > 0 ? 0 : -1;
}

/* ------------------------------------------------------------------ */
/* SQL helpers (text protocol, setup and monitoring only)             */
/* ------------------------------------------------------------------ */

static int proxy_port[MAXLIST]; /* per cfg.rtts index; 0 = Unix socket */

static MYSQL *connect_rtt(int rtt_idx, const char *db)
{
    ll_server srv = {.user = cfg.user, .password = cfg.pass,
                     .connect_timeout_s = 60,
                     .flags = CLIENT_MULTI_STATEMENTS};
    if (rtt_idx < 0 || proxy_port[rtt_idx] == 0) {
        srv.socket = cfg.sock;
    } else {
        srv.host = "127.0.0.1";
        srv.port = (unsigned int)proxy_port[rtt_idx];
    }
    char err[512];
    MYSQL *c = ll_connect(NULL, &srv, db, err, sizeof err);
    if (!c)
        fprintf(stderr, "bench: connect: %s\n", err);
    return c;
}

static MYSQL *connect_local(void)
{
    MYSQL *c = connect_rtt(-1, dbname[0] ? dbname : NULL);
    if (!c)
        die("cannot connect to the server socket %s", cfg.sock);
    return c;
}

static void q_exec(MYSQL *c, const char *sql)
{
    if (ll_exec(c, sql) != 0)
        die("%.200s: %s", sql, mysql_error(c));
}

static void q_execf(MYSQL *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void q_execf(MYSQL *c, const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    q_exec(c, buf);
}

/* First column of the first row as a string (static buffer per call site
 * is the caller's). */
static int q_str(MYSQL *c, const char *sql, char *out, size_t outlen)
{
    out[0] = '\0';
    if (mysql_query(c, sql) != 0)
        return -1;
    MYSQL_RES *r = mysql_store_result(c);
    if (!r)
        return -1;
    MYSQL_ROW row = mysql_fetch_row(r);
    int found = row != NULL;
    if (row && row[0])
        snprintf(out, outlen, "%s", row[0]);
    mysql_free_result(r);
    while (mysql_next_result(c) == 0) {
        MYSQL_RES *x = mysql_store_result(c);
        if (x)
            mysql_free_result(x);
    }
    return found ? 0 : -1;
}

static long long q_i64(MYSQL *c, const char *sql)
{
    int64_t v;
    return ll_i64(c, sql, 0, &v) == 0 ? (long long)v : -1;
}

/* ---- status counters ---- */

static const char *status_names[] = {
    "Questions", "Com_commit", "Com_rollback", "Com_stmt_execute",
    "Com_stmt_prepare", "Com_select", "Com_insert", "Com_update",
    "Com_delete", "Com_begin", "Com_set_option",
    "Handler_read_key", "Handler_read_next", "Handler_read_rnd_next",
    "Handler_write", "Handler_delete", "Handler_update",
    "Innodb_row_lock_waits", "Innodb_row_lock_time", "Innodb_deadlocks",
    "Innodb_data_fsyncs", "Rows_read", "Innodb_history_list_length",
    "Binlog_commits", "Binlog_group_commits",
    "Rpl_semi_sync_master_yes_tx", "Rpl_semi_sync_master_no_tx",
    "Rpl_semi_sync_master_tx_wait_time", "Rpl_semi_sync_master_tx_waits",
    "Rpl_semi_sync_master_clients",
};
#define NSTATUS (sizeof status_names / sizeof status_names[0])

typedef struct status_snap {
    long long v[NSTATUS];
} status_snap;

static void status_read(MYSQL *c, int session, status_snap *s)
{
    for (size_t i = 0; i < NSTATUS; i++)
        s->v[i] = -1;
    if (mysql_query(c, session ? "SHOW SESSION STATUS" : "SHOW GLOBAL STATUS") != 0)
        die("SHOW STATUS: %s", mysql_error(c));
    MYSQL_RES *r = mysql_store_result(c);
    MYSQL_ROW row;
    while (r && (row = mysql_fetch_row(r)))
        for (size_t i = 0; i < NSTATUS; i++)
            if (row[0] && row[1] && strcasecmp(row[0], status_names[i]) == 0)
                s->v[i] = strtoll(row[1], NULL, 10);
    if (r)
        mysql_free_result(r);
}

static long long status_delta(const status_snap *a, const status_snap *b,
                              const char *name)
{
    for (size_t i = 0; i < NSTATUS; i++)
        if (strcmp(status_names[i], name) == 0)
            return (a->v[i] < 0 || b->v[i] < 0) ? -1 : b->v[i] - a->v[i];
    return -1;
}

static long long status_get(const status_snap *s, const char *name)
{
    for (size_t i = 0; i < NSTATUS; i++)
        if (strcmp(status_names[i], name) == 0)
            return s->v[i];
    return -1;
}

/* ---- CPU time of the server, this process, the proxy and the machine ---- */

static pid_t server_pid;

/* utime + stime of a process, in clock ticks; -1 if unknown. */
static long long proc_ticks(pid_t pid)
{
    char path[64], buf[1024];
    if (pid <= 0)
        return -1;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    unsigned long ut = 0, st = 0;
    /* fields 3..15: state ppid pgrp session tty tpgid flags minflt cminflt
     * majflt cmajflt utime stime */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
               &ut, &st) != 2)
        return -1;
    return (long long)(ut + st);
}

/* Busy ticks of the whole machine (all cores, everything running). */
static long long machine_busy_ticks(void)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return -1;
    unsigned long long v[10] = {0};
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
                   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (n < 5)
        return -1;
    unsigned long long total = 0;
    for (int i = 0; i < 8; i++)
        total += v[i];
    return (long long)(total - v[3] - v[4]); /* minus idle and iowait */
}

typedef struct cpu_snap {
    long long server, self, proxy, machine;
} cpu_snap;

static pid_t cpu_proxy_pid;

static void cpu_read(cpu_snap *c)
{
    c->server = proc_ticks(server_pid);
    c->self = proc_ticks(getpid());
    c->proxy = proc_ticks(cpu_proxy_pid);
    c->machine = machine_busy_ticks();
}

static double cpu_cores(long long a, long long b, double secs)
{
    if (a < 0 || b < 0 || secs <= 0)
        return -1;
    return (double)(b - a) / (double)sysconf(_SC_CLK_TCK) / secs;
}

/* Wait (at most max_ms) until InnoDB purge has caught up, so every
 * measurement starts from a similar backlog of delete-marked rows. */
static long long history_len(MYSQL *c)
{
    char b[64];
    if (mysql_query(c, "SHOW GLOBAL STATUS LIKE 'Innodb_history_list_length'"))
        return -1;
    MYSQL_RES *r = mysql_store_result(c);
    MYSQL_ROW row = r ? mysql_fetch_row(r) : NULL;
    snprintf(b, sizeof b, "%s", row && row[1] ? row[1] : "-1");
    if (r)
        mysql_free_result(r);
    return strtoll(b, NULL, 10);
}

static void wait_purge(MYSQL *c, int max_ms)
{
    uint64_t end = now_us() + (uint64_t)max_ms * 1000u;
    while (now_us() < end) {
        long long h = history_len(c);
        if (h < 0 || h < 1000)
            return;
        sleep_us(100000);
    }
}

/* With the binary log on, every measurement appends tens of megabytes to
 * it; a full run would fill the disk.  Before each (workload, clients,
 * RTT) the log is rotated and the old files removed, so every design's
 * rounds write into a small log.  A file a replica still reads is kept
 * (PURGE refuses it; that is fine). */
static void binlog_trim(MYSQL *c)
{
    char cur[256];
    if (!cfg.binlog || mysql_query(c, "FLUSH BINARY LOGS") != 0)
        return;
    if (mysql_query(c, "SHOW MASTER STATUS") != 0)
        return;
    MYSQL_RES *r = mysql_store_result(c);
    MYSQL_ROW row = r ? mysql_fetch_row(r) : NULL;
    snprintf(cur, sizeof cur, "%s", row && row[0] ? row[0] : "");
    if (r)
        mysql_free_result(r);
    if (!cur[0] || strchr(cur, '\'') || strchr(cur, '\\'))
        return;
    char sql[320];
    snprintf(sql, sizeof sql, "PURGE BINARY LOGS TO '%s'", cur);
    if (mysql_query(c, sql) != 0)
        progress("binary log not purged: %s", mysql_error(c));
}

/* ------------------------------------------------------------------ */
/* the delay proxy (a child process)                                  */
/* ------------------------------------------------------------------ */

typedef struct proxy_proc {
    pid_t pid;
    int stdin_w; /* closing it stops the proxy, even if we crash */
} proxy_proc;

static proxy_proc proxies[MAXLIST];

static void cloexec(int fd) { fcntl(fd, F_SETFD, FD_CLOEXEC); }

static void proxy_stop(proxy_proc *p)
{
    if (p->pid <= 0)
        return;
    kill(p->pid, SIGTERM);
    close(p->stdin_w);
    int st;
    waitpid(p->pid, &st, 0);
    p->pid = 0;
}

/* A proxy on port `port` (0: any free one); returns its port, or 0 when
 * it could not listen there. */
static int proxy_try(int rtt_us, int port, proxy_proc *p)
{
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0)
        die("pipe: %s", strerror(errno));
    cloexec(in[0]);
    cloexec(in[1]);
    cloexec(out[0]);
    cloexec(out[1]);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    char rtt[32], portarg[32];
    snprintf(rtt, sizeof rtt, "%d", rtt_us);
    snprintf(portarg, sizeof portarg, "%d", port);
    char *argv[] = {(char *)cfg.proxy_path, "--unix", (char *)cfg.sock,
                    "--rtt-us", rtt, "--port", portarg, NULL};
    int rc = posix_spawn(&p->pid, cfg.proxy_path, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    if (rc != 0)
        die("cannot start the proxy %s: %s", cfg.proxy_path, strerror(rc));
    p->stdin_w = in[1];
    FILE *f = fdopen(out[0], "r");
    char line[64];
    int got = f && fgets(line, sizeof line, f);
    if (f)
        fclose(f);
    if (!got) { /* it could not listen (stderr says why) */
        proxy_stop(p);
        return 0;
    }
    int listening = atoi(line);
    if (listening <= 0)
        die("the proxy reported a bad port: %s", line);
    return listening;
}

/* A proxy on any free port, or (--proxy-port P) the first free one of
 * P .. P+99. */
static int proxy_start(int rtt_us, proxy_proc *p)
{
    for (int i = 0; i < (cfg.proxy_port ? 100 : 1); i++) {
        int port = proxy_try(rtt_us, cfg.proxy_port ? cfg.proxy_port + i : 0, p);
        if (port > 0)
            return port;
    }
    die("the proxy could not listen%s", cfg.proxy_port ? " on a port of "
        "--proxy-port's range" : "");
}


static void proxies_stop(void)
{
    for (int i = 0; i < MAXLIST; i++)
        proxy_stop(&proxies[i]);
}

/* ------------------------------------------------------------------ */
/* prepared statements of the baselines                               */
/* ------------------------------------------------------------------ */

/* Parameter slots a worker binds its statements to. */
typedef struct params {
    unsigned long long shop, item, loc, q, ttl_us;
    unsigned long long items[CART_LINES], locs[CART_LINES];
    char tok[96];
    unsigned long toklen;
} params;

typedef struct pstmt {
    MYSQL_STMT *st;
    MYSQL_BIND b[8 * CART_LINES];
    int n;
} pstmt;

static void bind_u64(pstmt *s, unsigned long long *v)
{
    MYSQL_BIND *b = &s->b[s->n++];
    memset(b, 0, sizeof *b);
    b->buffer_type = MYSQL_TYPE_LONGLONG;
    b->buffer = v;
    b->is_unsigned = 1;
}

static void bind_tok(pstmt *s, params *p)
{
    MYSQL_BIND *b = &s->b[s->n++];
    memset(b, 0, sizeof *b);
    b->buffer_type = MYSQL_TYPE_BLOB;
    b->buffer = p->tok;
    b->buffer_length = sizeof p->tok;
    b->length = &p->toklen;
}

/* One hold's parameters, in the order every hold statement and the
 * hot-row procedure take them: shop, token, item, location, units, ttl. */
static void bind_hold(pstmt *s, params *p, unsigned long long *item,
                      unsigned long long *loc)
{
    bind_u64(s, &p->shop);
    bind_tok(s, p);
    bind_u64(s, item);
    bind_u64(s, loc);
    bind_u64(s, &p->q);
    bind_u64(s, &p->ttl_us);
}

static int pstmt_prepare(MYSQL *c, pstmt *s, const char *sql)
{
    s->st = mysql_stmt_init(c);
    if (!s->st || mysql_stmt_prepare(s->st, sql, (unsigned long)strlen(sql))) {
        fprintf(stderr, "bench: prepare %.80s: %s\n", sql,
                s->st ? mysql_stmt_error(s->st) : mysql_error(c));
        return -1;
    }
    return 0;
}

static int pstmt_finish(pstmt *s)
{
    if (mysql_stmt_param_count(s->st) != (unsigned long)s->n) {
        fprintf(stderr, "bench: statement has %lu parameters, bound %d\n",
                mysql_stmt_param_count(s->st), s->n);
        return -1;
    }
    if (mysql_stmt_bind_param(s->st, s->b)) {
        fprintf(stderr, "bench: bind: %s\n", mysql_stmt_error(s->st));
        return -1;
    }
    return 0;
}

/* Returns 0 or the server/client error number. */
static unsigned int pstmt_exec(pstmt *s, unsigned long long *affected)
{
    if (mysql_stmt_execute(s->st))
        return mysql_stmt_errno(s->st);
    if (affected)
        *affected = mysql_stmt_affected_rows(s->st);
    return 0;
}

#define E_PROTOCOL 100000u /* a CALL that answered no row */

/* A CALL of one of the hot row's procedures, one round trip: the
 * procedure answers one row of one integer (1 done, 0 no stock / no such
 * hold), then the CALL's own status follows.  Returns 0 with the answer
 * in *answer, or an error number. */
static unsigned int pstmt_call(pstmt *s, long long *answer)
{
    if (mysql_stmt_execute(s->st))
        return mysql_stmt_errno(s->st);
    unsigned int e = 0;
    int got = 0;
    for (int guard = 0; guard < 16; guard++) {
        if (mysql_stmt_field_count(s->st) > 0) {
            long long v = -1;
            MYSQL_BIND rb;
            memset(&rb, 0, sizeof rb);
            rb.buffer_type = MYSQL_TYPE_LONGLONG;
            rb.buffer = &v;
            if (mysql_stmt_bind_result(s->st, &rb) != 0) {
                e = mysql_stmt_errno(s->st);
            } else {
                int f;
                while ((f = mysql_stmt_fetch(s->st)) == 0 ||
                       f == MYSQL_DATA_TRUNCATED)
                    if (!got) {
                        *answer = v;
                        got = 1;
                    }
                if (f == 1 && !e)
                    e = mysql_stmt_errno(s->st);
            }
            mysql_stmt_free_result(s->st);
        }
        int n = mysql_stmt_next_result(s->st);
        if (n > 0 && !e)
            e = mysql_stmt_errno(s->st);
        if (n != 0)
            break;
    }
    if (!e && !got)
        e = E_PROTOCOL;
    return e;
}

/* ------------------------------------------------------------------ */
/* measurements                                                       */
/* ------------------------------------------------------------------ */

/* libreserve's own counters (rsv_stats_get) reported per measurement:
 * which path the reserves took. */
static const uint32_t lib_stat[] = {RSV_STAT_CALLS, RSV_STAT_ONE_TRIP,
                                    RSV_STAT_SLOW_PATHS, RSV_STAT_BACK_TO_FAST,
                                    RSV_STAT_INLINE_REFILLS,
                                    RSV_STAT_SHORT_READS, RSV_STAT_RETRIES,
                                    RSV_STAT_STATEMENTS,
                                    RSV_STAT_LEDGER_TAKES};
static const char *const lib_stat_name[] = {"calls", "one_trip", "slow_paths",
                                            "back_to_fast", "inline_refills",
                                            "short_reads", "retries",
                                            "statements", "ledger_takes"};
#define LIB_NSTATS (sizeof lib_stat / sizeof lib_stat[0])

/* Which way each libreserve reserve went, told from its counters before
 * and after the call, so the tail can be pinned on a path: the one-trip
 * CALL alone; the CALL and more statements (the context's pool-count
 * probe, or a second CALL after a short read from the cursor); a reserve
 * that refilled the pool itself afterwards; the slow path; a slow path
 * that went back to the fast path (the pool was refilled while it
 * queued); the waited ledger take (units from the ledger row without a
 * one-trip CALL: it waited for the row after a short read, refilling the
 * pool or not); everything else (the statement path). */
enum { P_ONE_TRIP, P_PROBE, P_REFILL, P_SLOW, P_BACK, P_WAITED, P_STATEMENTS,
       NPATHS };
static const char *const path_name[NPATHS] = {"one_trip", "one_trip+more",
                                              "refill", "slow",
                                              "back_to_fast",
                                              "waited_ledger_take",
                                              "statements"};
static const uint32_t path_stat[] = {RSV_STAT_ONE_TRIP, RSV_STAT_STATEMENTS,
                                     RSV_STAT_INLINE_REFILLS,
                                     RSV_STAT_SLOW_PATHS,
                                     RSV_STAT_BACK_TO_FAST,
                                     RSV_STAT_LEDGER_TAKES};
#define PATH_NSTATS (sizeof path_stat / sizeof path_stat[0])

typedef struct latvec {
    uint32_t *v;
    size_t n, cap;
} latvec;

/* Answer codes counted per call (the stampede), by -code: RSV_OK and the
 * RSV_E* codes; the baselines' answers are mapped to the library's
 * (base_code). */
#define NCODES 32
static int code_slot(int rc)
{
    return rc <= 0 && rc > -NCODES ? -rc : NCODES - 1;
}

typedef struct meas {
    int id;
    int design, workload, clients, rtt_idx, rtt_us;
    int round;               /* 1.. in its cell; 0 = a profiled re-run */
    uint64_t t_start, t_end; /* the measured window (us, monotonic) */
    volatile int go;         /* set once t_start/t_end are known */
    pthread_barrier_t ready;
    long claim_base, claim_n; /* holds this measurement may claim */
    /* results */
    double ops_per_s;
    uint32_t p50, p99, p999;
    uint64_t ops, errors, retries;
    /* every success of the whole measurement (warm-up and tail too), for
     * the check of the tables at the end of the run: reserves that made
     * holds, their hold rows and units, claims */
    uint64_t done_ops, done_rows, done_units, done_claims, in_doubt;
    long long semisync_no_tx, semisync_yes_tx;
    int exhausted;
    int valid;
    rsv_batcher *batcher;    /* libreserve-batcher: shared by the clients */
    /* the stampede: its item, every call's answer, the slowest call */
    uint64_t item;
    uint64_t codes[NCODES];
    uint32_t max_us;
} meas;

typedef struct worker {
    meas *m;
    int tid;
    MYSQL *conn;
    rsv_ctx *ctx;
    rsv_cart *cart;
    rsv_cart *bcart[BATCH_BUYERS]; /* libreserve-batch: a cart per buyer */
    params p;
    pstmt st_take, st_hold1, st_hold5, st_del, st_claimupd;
    pstmt st_call_one, st_call_cart, st_call_claim; /* hotrow-1rt */
    char lines[512];         /* hotrow-1rt: the cart, as its procedure reads it */
    unsigned long lineslen;
    uint64_t rng;
    uint64_t seq;
    long claim_next;
    uint32_t *lat;
    size_t nlat, caplat;
    latvec path_lat[NPATHS]; /* libreserve reserves: latency by path */
    uint64_t errors, retries;
    uint64_t done_ops, done_rows, done_units, done_claims, in_doubt;
    char first_err[256];
    int setup_failed;
    int lib_reset;           /* libreserve counters restarted at t_start */
    uint64_t lib[LIB_NSTATS];  /* and read at the end (lib_stats) */
    int fatal;
    /* the stampede: the last call's answer (as a library code), every
     * answer counted, and when this buyer's last call ended */
    int last_rc;
    uint64_t codes[NCODES];
    uint64_t t_last;
} worker;

static void vec_push(uint32_t **v, size_t *n, size_t *capp, uint32_t x)
{
    if (*n == *capp) {
        size_t cap = *capp ? *capp * 2 : 4096;
        uint32_t *nv = realloc(*v, cap * sizeof *nv);
        if (!nv)
            die("out of memory");
        *v = nv;
        *capp = cap;
    }
    (*v)[(*n)++] = x;
}

static void lat_push(worker *w, uint32_t v)
{
    vec_push(&w->lat, &w->nlat, &w->caplat, v);
}

static void path_counters(worker *w, uint64_t *out)
{
    for (size_t i = 0; i < PATH_NSTATS; i++) {
        out[i] = 0; /* (a library without the counter leaves it) */
        rsv_stats_get(w->ctx, path_stat[i], RSV_OP_RESERVE, &out[i]);
    }
}

static int path_of(const uint64_t *before, const uint64_t *after)
{
    uint64_t d[PATH_NSTATS];
    for (size_t i = 0; i < PATH_NSTATS; i++)
        d[i] = after[i] - before[i];
    if (d[3])
        return P_SLOW;
    if (d[4])
        return P_BACK;
    if (d[5] && !d[0])
        return P_WAITED;
    if (d[2])
        return P_REFILL;
    if (d[0])
        return d[1] > 1 ? P_PROBE : P_ONE_TRIP;
    return P_STATEMENTS;
}

static void note_err(worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note_err(worker *w, const char *fmt, ...)
{
    w->errors++;
    if (w->first_err[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->first_err, sizeof w->first_err, fmt, ap);
    va_end(ap);
}

static const char *hold_table(int design)
{
    switch (design) {
    case D_HOT:
        return "bench_hot_holds";
    case D_HOT1:
        return "bench_hot1_holds";
    case D_FLOOR1:
        return "bench_floor1_holds";
    default:
        return "bench_floor_holds";
    }
}

/* The hot rows' ledgers: one table each, so each can be checked alone. */
static const char *level_table(int design)
{
    return design == D_HOT1 ? "bench_hot1_levels" : "bench_hot_levels";
}

static void bind_str(pstmt *s, char *buf, size_t cap, unsigned long *len)
{
    MYSQL_BIND *b = &s->b[s->n++];
    memset(b, 0, sizeof *b);
    b->buffer_type = MYSQL_TYPE_STRING;
    b->buffer = buf;
    b->buffer_length = (unsigned long)cap;
    b->length = len;
}

/* The hotrow-1rt CALLs (procedures made by setup_procedures). */
static int setup_hot1(worker *w)
{
    params *p = &w->p;
    if (pstmt_prepare(w->conn, &w->st_call_one,
                      "CALL bench_hot1_reserve(?, ?, ?, ?, ?, ?)"))
        return -1;
    bind_hold(&w->st_call_one, p, &p->item, &p->loc);
    if (pstmt_finish(&w->st_call_one))
        return -1;
    if (pstmt_prepare(w->conn, &w->st_call_cart,
                      "CALL bench_hot1_cart(?, ?, ?, ?, ?)"))
        return -1;
    bind_u64(&w->st_call_cart, &p->shop);
    bind_tok(&w->st_call_cart, p);
    bind_str(&w->st_call_cart, w->lines, sizeof w->lines, &w->lineslen);
    bind_u64(&w->st_call_cart, &p->q);
    bind_u64(&w->st_call_cart, &p->ttl_us);
    if (pstmt_finish(&w->st_call_cart))
        return -1;
    if (pstmt_prepare(w->conn, &w->st_call_claim,
                      "CALL bench_hot1_claim(?, ?, ?, ?, ?)"))
        return -1;
    bind_u64(&w->st_call_claim, &p->shop);
    bind_tok(&w->st_call_claim, p);
    bind_u64(&w->st_call_claim, &p->item);
    bind_u64(&w->st_call_claim, &p->loc);
    bind_u64(&w->st_call_claim, &p->q);
    return pstmt_finish(&w->st_call_claim);
}

/* The pool cap of libreserve's contexts in a measurement (0: default). */
static int64_t meas_pool_cap(const meas *m)
{
    return wl_is_stampede(m->workload) ? cfg.stampede_cap : 0;
}

/* libreserve-batch: the connections, and which buyers each serves. */
static int batch_conns(const meas *m)
{
    return (m->clients + BATCH_BUYERS - 1) / BATCH_BUYERS;
}

static int batch_buyers(const worker *w)
{
    int conns = batch_conns(w->m);
    return w->tid < conns ? (w->m->clients - w->tid + conns - 1) / conns : 0;
}

static int worker_setup(worker *w)
{
    meas *m = w->m;
    if (m->design == D_BATCH && batch_buyers(w) == 0)
        return 0; /* a buyer served by another thread's connection */
    params *p = &w->p;
    p->shop = SHOP;
    p->q = (unsigned long long)wl_qty[m->workload];
    p->ttl_us = (unsigned long long)HOLD_TTL_MS * 1000u;
    p->loc = 1;
    if (m->design == D_BATCHER) /* its connections are the batcher's */
        return m->batcher && rsv_cart_new(&w->cart) == RSV_OK ? 0 : -1;
    w->conn = connect_rtt(m->rtt_idx, dbname);
    if (!w->conn)
        return -1;
    if (is_lib(m->design)) {
        int rc = lib_open_cap(&w->ctx, w->conn, meas_pool_cap(m));
        if (rc != RSV_OK) {
            fprintf(stderr, "bench: rsv_open: %s\n", rsv_errmsg(w->ctx));
            return -1;
        }
        if (rsv_cart_new(&w->cart) != RSV_OK)
            return -1;
        for (int i = 0; m->design == D_BATCH && i < BATCH_BUYERS; i++)
            if (rsv_cart_new(&w->bcart[i]) != RSV_OK)
                return -1;
        return 0;
    }
    /* The one-round-trip designs commit by themselves: the procedure
     * with its own COMMIT, the floor's INSERT with autocommit. */
    if (mysql_query(w->conn, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED") ||
        mysql_autocommit(w->conn, is_1rt(m->design) ? 1 : 0)) {
        fprintf(stderr, "bench: session setup: %s\n", mysql_error(w->conn));
        return -1;
    }
    if (m->design == D_HOT1)
        return setup_hot1(w);
    char sql[2048];
    const char *tbl = hold_table(m->design);
    if (m->design == D_HOT) {
        snprintf(sql, sizeof sql,
                 "UPDATE %s SET available = available - ? WHERE shop_id = ? "
                 "AND item_id = ? AND location_id = ? AND "
                 "available >= ?", level_table(m->design));
        if (pstmt_prepare(w->conn, &w->st_take, sql))
            return -1;
        bind_u64(&w->st_take, &p->q);
        bind_u64(&w->st_take, &p->shop);
        bind_u64(&w->st_take, &p->item);
        bind_u64(&w->st_take, &p->loc);
        bind_u64(&w->st_take, &p->q);
        if (pstmt_finish(&w->st_take))
            return -1;
        snprintf(sql, sizeof sql,
                 "UPDATE %s SET claimed = claimed + ? WHERE shop_id = ? AND "
                 "item_id = ? AND location_id = ?",
                 level_table(m->design));
        if (pstmt_prepare(w->conn, &w->st_claimupd, sql))
            return -1;
        bind_u64(&w->st_claimupd, &p->q);
        bind_u64(&w->st_claimupd, &p->shop);
        bind_u64(&w->st_claimupd, &p->item);
        bind_u64(&w->st_claimupd, &p->loc);
        if (pstmt_finish(&w->st_claimupd))
            return -1;
    }
    snprintf(sql, sizeof sql,
             "INSERT INTO %s (shop_id, checkout_token, item_id, "
             "location_id, quantity, generation, expires_at, "
             "created_at) VALUES (?, ?, ?, ?, ?, 1, NOW(6) + INTERVAL ? "
             "MICROSECOND, NOW(6))", tbl);
    if (pstmt_prepare(w->conn, &w->st_hold1, sql))
        return -1;
    bind_hold(&w->st_hold1, p, &p->item, &p->loc);
    if (pstmt_finish(&w->st_hold1))
        return -1;
    size_t len = (size_t)snprintf(sql, sizeof sql,
                                  "INSERT INTO %s (shop_id, checkout_token, "
                                  "item_id, location_id, "
                                  "quantity, generation, expires_at, "
                                  "created_at) VALUES ", tbl);
    for (int i = 0; i < CART_LINES; i++)
        len += (size_t)snprintf(sql + len, sizeof sql - len,
                                "%s(?, ?, ?, ?, ?, 1, NOW(6) + INTERVAL ? "
                                "MICROSECOND, NOW(6))", i ? ", " : "");
    if (pstmt_prepare(w->conn, &w->st_hold5, sql))
        return -1;
    for (int i = 0; i < CART_LINES; i++)
        bind_hold(&w->st_hold5, p, &p->items[i], &p->locs[i]);
    if (pstmt_finish(&w->st_hold5))
        return -1;
    snprintf(sql, sizeof sql,
             "DELETE FROM %s WHERE shop_id = ? AND checkout_token = ? AND "
             "item_id = ? AND location_id = ?", tbl);
    if (pstmt_prepare(w->conn, &w->st_del, sql))
        return -1;
    bind_u64(&w->st_del, &p->shop);
    bind_tok(&w->st_del, p);
    bind_u64(&w->st_del, &p->item);
    bind_u64(&w->st_del, &p->loc);
    if (pstmt_finish(&w->st_del))
        return -1;
    return 0;
}

static void worker_teardown(worker *w)
{
    pstmt *all[] = {&w->st_take, &w->st_hold1, &w->st_hold5, &w->st_del,
                    &w->st_claimupd, &w->st_call_one, &w->st_call_cart,
                    &w->st_call_claim};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->st)
            mysql_stmt_close(all[i]->st);
    rsv_cart_free(w->cart);
    for (int i = 0; i < BATCH_BUYERS; i++)
        rsv_cart_free(w->bcart[i]);
    for (size_t i = 0; w->ctx && w->lib_reset && i < LIB_NSTATS; i++)
        rsv_stats_get(w->ctx, lib_stat[i], RSV_OP_ALL, &w->lib[i]);
    rsv_close(w->ctx);
    if (w->conn)
        mysql_close(w->conn);
}

/* A cart: CART_LINES distinct items in ascending order (every design locks
 * in item order), each line at CART_LOCS locations in a random rotation. */
static void make_cart(worker *w, uint64_t *items, uint64_t locs[][CART_LOCS])
{
    int n = 0;
    while (n < CART_LINES) {
        uint64_t it = CART_BASE + 1 + ll_rng_next(&w->rng) % CART_N;
        int dup = 0;
        for (int i = 0; i < n; i++)
            dup |= items[i] == it;
        if (!dup)
            items[n++] = it;
    }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && items[j - 1] > items[j]; j--) {
            uint64_t t = items[j];
            items[j] = items[j - 1];
            items[j - 1] = t;
        }
    for (int i = 0; i < n; i++) {
        uint64_t r = ll_rng_next(&w->rng) % CART_LOCS;
        for (int k = 0; k < CART_LOCS; k++)
            locs[i][k] = 1 + (r + (uint64_t)k) % CART_LOCS;
    }
    if (w->m->workload == W_HOTCART) {
        /* the flash item (lowest id: first in item order) instead of the
         * last line; it has one location, repeated for the hot row's
         * loop over locations */
        memmove(&items[1], &items[0], (CART_LINES - 1) * sizeof items[0]);
        memmove(&locs[1], &locs[0], (CART_LINES - 1) * sizeof locs[0]);
        items[0] = FLASH_ITEM;
        for (int k = 0; k < CART_LOCS; k++)
            locs[0][k] = 1;
    }
}

static void claim_token(char *buf, size_t len, int design, int rtt_us,
                        long i)
{
    snprintf(buf, len, "c%c%d.%ld", design_tag[design], rtt_us, i);
}

/* ---- one operation of each design ---- */

static int is_conn_err(unsigned int e)
{
    return e == CR_SERVER_GONE_ERROR || e == CR_SERVER_LOST ||
           e == CR_CONNECTION_ERROR || e == ER_CONNECTION_KILLED;
}

/* Answers of a baseline's body besides 0 (done) and error numbers. */
#define E_NOSTOCK ((unsigned int)-2) /* out of stock / no such hold */
#define E_SOLDOUT ((unsigned int)-3) /* the sold-out answer (expected) */
#define E_HADSTOCK ((unsigned int)-4) /* the sold-out item had stock */

/* hotrow-1rt's cart as its procedure reads it: "item:loc,loc;item:loc"
 * in item order, locations in the order to try. */
static void format_lines(worker *w, const uint64_t *items,
                         uint64_t locs[][CART_LOCS], int sold_first)
{
    size_t n = 0;
    if (sold_first)
        n += (size_t)snprintf(w->lines, sizeof w->lines, "%d:1;",
                              SOLDOUT_ITEM);
    for (int i = 0; i < CART_LINES && n < sizeof w->lines; i++) {
        int nl = items[i] == FLASH_ITEM ? 1 : CART_LOCS;
        n += (size_t)snprintf(w->lines + n, sizeof w->lines - n, "%s%llu:",
                              i ? ";" : "", (unsigned long long)items[i]);
        for (int k = 0; k < nl && n < sizeof w->lines; k++)
            n += (size_t)snprintf(w->lines + n, sizeof w->lines - n, "%s%llu",
                                  k ? "," : "", (unsigned long long)locs[i][k]);
    }
    if (n >= sizeof w->lines)
        die("a cart does not fit its buffer");
    w->lineslen = (unsigned long)n;
}

/* hotrow-1rt: one CALL; its answer 1 is done, 0 is no stock. */
static unsigned int hot1_call(pstmt *s)
{
    long long ans = -1;
    unsigned int e = pstmt_call(s, &ans);
    if (e)
        return e;
    return ans == 1 ? 0 : E_NOSTOCK;
}

/* A baseline's operation: 0 done, E_NOSTOCK, E_SOLDOUT, E_HADSTOCK, or an
 * error number.  The statement forms leave their transaction open for
 * op_base to commit; the one-round-trip forms have committed. */
static unsigned int base_body(worker *w)
{
    meas *m = w->m;
    params *p = &w->p;
    unsigned long long aff = 0;
    unsigned int e;
    switch (m->workload) {
    case W_FLASH:
    case W_FLASHQ2:
    case W_FLASHQ5:
    case W_SPREAD:
    case W_STAMPEDE:
    case W_STAMPEDE_FRESH:
        if (m->design == D_HOT1)
            return hot1_call(&w->st_call_one);
        if (m->design == D_HOT) {
            if ((e = pstmt_exec(&w->st_take, &aff)))
                return e;
            if (aff != 1)
                return E_NOSTOCK;
        }
        return pstmt_exec(&w->st_hold1, NULL);
    case W_SOLDOUT: /* (hot rows only) the UPDATE finds no stock */
        if (m->design == D_HOT1) {
            e = hot1_call(&w->st_call_one);
            return e == E_NOSTOCK ? E_SOLDOUT : e ? e : E_HADSTOCK;
        }
        if ((e = pstmt_exec(&w->st_take, &aff)))
            return e;
        return aff == 0 ? E_SOLDOUT : E_HADSTOCK;
    case W_SOLDCART:
        /* (the sold-out item's line comes first in item order) */
        if (m->design == D_HOT1) {
            uint64_t items[CART_LINES], locs[CART_LINES][CART_LOCS];
            make_cart(w, items, locs);
            format_lines(w, items, locs, 1);
            e = hot1_call(&w->st_call_cart);
            return e == E_NOSTOCK ? E_SOLDOUT : e ? e : E_HADSTOCK;
        }
        if ((e = pstmt_exec(&w->st_take, &aff)))
            return e;
        return aff == 0 ? E_SOLDOUT : E_HADSTOCK;
    case W_CART:
    case W_HOTCART: {
        uint64_t items[CART_LINES], locs[CART_LINES][CART_LOCS];
        make_cart(w, items, locs);
        if (m->design == D_HOT1) {
            format_lines(w, items, locs, 0);
            return hot1_call(&w->st_call_cart);
        }
        for (int i = 0; i < CART_LINES; i++) {
            p->items[i] = items[i];
            p->locs[i] = locs[i][0];
            if (m->design != D_HOT)
                continue;
            int k;
            for (k = 0; k < CART_LOCS; k++) {
                p->item = items[i];
                p->loc = locs[i][k];
                if ((e = pstmt_exec(&w->st_take, &aff)))
                    return e;
                if (aff == 1)
                    break;
            }
            if (k == CART_LOCS)
                return E_NOSTOCK;
            p->locs[i] = locs[i][k];
        }
        return pstmt_exec(&w->st_hold5, NULL);
    }
    case W_CLAIM:
        if (m->design == D_HOT1)
            return hot1_call(&w->st_call_claim);
        if (m->design == D_HOT && (e = pstmt_exec(&w->st_claimupd, NULL)))
            return e;
        if ((e = pstmt_exec(&w->st_del, &aff)))
            return e;
        return aff == 1 ? 0 : E_NOSTOCK;
    }
    return 0;
}

/* A baseline's answer as the library's code would say it. */
static int base_code(unsigned int e)
{
    return e == 0 || e == E_SOLDOUT ? RSV_OK
           : e == E_NOSTOCK         ? RSV_EOUTOFSTOCK
           : e == ER_LOCK_DEADLOCK || e == ER_LOCK_WAIT_TIMEOUT ? RSV_EBUSY
           : is_conn_err(e)         ? RSV_ECONN
                                    : RSV_EDB;
}

/* Returns 1 on success, 0 on a counted failure, -1 when the thread must
 * stop.  w->last_rc: the answer as a library code. */
static int op_base(worker *w)
{
    int committed_alone = is_1rt(w->m->design);
    for (int attempt = 0; attempt < 20; attempt++) {
        unsigned int e = base_body(w);
        if (e == 0) {
            if (committed_alone || mysql_commit(w->conn) == 0) {
                w->last_rc = RSV_OK;
                return 1;
            }
            e = mysql_errno(w->conn);
        }
        w->last_rc = base_code(e);
        if (e == E_SOLDOUT || e == E_HADSTOCK) {
            if (!committed_alone)
                mysql_rollback(w->conn);
            if (e == E_SOLDOUT)
                return 1; /* the answer this workload measures */
            note_err(w, "the sold-out item had stock");
            return 0;
        }
        if (e != E_NOSTOCK && e != E_PROTOCOL && is_conn_err(e)) {
            /* it may have committed: the check of the tables allows it */
            w->in_doubt++;
            note_err(w, "connection lost: %s", mysql_error(w->conn));
            return -1;
        }
        if (!committed_alone)
            mysql_rollback(w->conn);
        if (e == ER_LOCK_DEADLOCK || e == ER_LOCK_WAIT_TIMEOUT) {
            w->retries++;
            continue;
        }
        if (e == E_NOSTOCK)
            note_err(w, "out of stock / no such hold");
        else if (e == E_PROTOCOL)
            note_err(w, "a CALL answered no row");
        else
            note_err(w, "error %u: %s", e, mysql_error(w->conn));
        return 0;
    }
    note_err(w, "deadlocks persisted through 20 retries");
    w->last_rc = RSV_EBUSY;
    return 0;
}

/* The library designs' cart of a cart workload, in c: cart5x3's and
 * hotcart5's (make_cart), or soldcart5's, a cart5x3 cart whose line at a
 * random place is the sold-out item (at its one location). */
static int lib_cart(worker *w, rsv_cart *c)
{
    uint64_t items[CART_LINES], locs[CART_LINES][CART_LOCS];
    uint64_t sold_loc = 1;
    make_cart(w, items, locs);
    int sold = w->m->workload == W_SOLDCART
                   ? (int)(ll_rng_next(&w->rng) % CART_LINES)
                   : -1;
    rsv_cart_clear(c);
    int rc = RSV_OK;
    for (int i = 0; i < CART_LINES && rc == RSV_OK; i++)
        rc = i == sold ? rsv_cart_add(c, SOLDOUT_ITEM, &sold_loc, 1, 1, 0)
                       : rsv_cart_add(c, items[i], locs[i],
                                      items[i] == FLASH_ITEM ? 1 : CART_LOCS,
                                      1, 0);
    return rc;
}

static int op_lib(worker *w)
{
    meas *m = w->m;
    params *p = &w->p;
    int rc = RSV_OK;
    switch (m->workload) {
    case W_FLASH:
    case W_FLASHQ2:
    case W_FLASHQ5:
    case W_SPREAD:
    case W_STAMPEDE:
    case W_STAMPEDE_FRESH:
        rc = rsv_reserve_one(w->ctx, SHOP, p->tok, p->toklen, p->item, 1,
                             (int64_t)p->q, HOLD_TTL_MS);
        break;
    case W_CART:
    case W_HOTCART:
        rc = lib_cart(w, w->cart);
        if (rc == RSV_OK)
            rc = rsv_reserve(w->ctx, SHOP, p->tok, p->toklen, w->cart,
                             HOLD_TTL_MS);
        break;
    case W_CLAIM:
        rc = rsv_claim(w->ctx, SHOP, p->tok, p->toklen);
        break;
    case W_SOLDOUT:
    case W_SOLDCART:
        if (m->workload == W_SOLDOUT) {
            rc = rsv_reserve_one(w->ctx, SHOP, p->tok, p->toklen, SOLDOUT_ITEM,
                                 1, 1, HOLD_TTL_MS);
        } else {
            rc = lib_cart(w, w->cart);
            if (rc == RSV_OK)
                rc = rsv_reserve(w->ctx, SHOP, p->tok, p->toklen, w->cart,
                                 HOLD_TTL_MS);
        }
        if (rc == RSV_EOUTOFSTOCK) {
            w->last_rc = RSV_OK;
            return 1; /* the answer this workload measures */
        }
        if (rc == RSV_OK) {
            note_err(w, "the sold-out item had stock");
            return 0;
        }
        break;
    }
    w->last_rc = rc;
    if (rc == RSV_OK)
        return 1;
    note_err(w, "%s: %s", rsv_code_name(rc) ? rsv_code_name(rc) : "?",
             rsv_errmsg(w->ctx));
    if (rc == RSV_EINDOUBT)
        w->in_doubt++; /* it may have committed: the check allows it */
    if (rc == RSV_ECONN || rc == RSV_EINDOUBT)
        return -1;
    return 0;
}

/* libreserve-batcher: this buyer's own reserve or claim, through the
 * shared batcher; answered as op_lib's rsv_reserve_one or rsv_claim. */
static int op_batcher(worker *w)
{
    meas *m = w->m;
    params *p = &w->p;
    int sold = wl_is_soldout(m->workload);
    int rc;
    if (m->workload == W_CLAIM) {
        rc = rsv_batcher_claim(m->batcher, SHOP, p->tok, p->toklen);
        /* Every hold is claimed once, by this call: RSV_ECLAIMED is the
         * batcher's repeat after a lost connection finding that the claim
         * had committed, a success the check of the tables holds it to. */
        if (rc == RSV_OK || rc == RSV_ECLAIMED)
            return 1;
    } else {
        if (wl_is_cart(m->workload)) {
            rc = lib_cart(w, w->cart);
            if (rc == RSV_OK)
                rc = rsv_batcher_reserve(m->batcher, SHOP, p->tok, p->toklen,
                                         w->cart, HOLD_TTL_MS);
        } else {
            rc = rsv_batcher_reserve_one(m->batcher, SHOP, p->tok,
                                         p->toklen, p->item, 1,
                                         (int64_t)p->q, HOLD_TTL_MS);
        }
        w->last_rc = sold && rc == RSV_EOUTOFSTOCK ? RSV_OK : rc;
        if (sold ? rc == RSV_EOUTOFSTOCK : rc == RSV_OK)
            return 1;
    }
    /* (no message per call: the code says what happened) */
    note_err(w, "%s", rsv_code_name(rc) ? rsv_code_name(rc) : "?");
    if (rc == RSV_EINDOUBT)
        w->in_doubt++; /* it may have committed: the check allows it */
    if (rc == RSV_ECONN || rc == RSV_EINDOUBT)
        return -1;
    return 0;
}

/* libreserve-batch: one request of each buyer this connection serves, as
 * one rsv_reserve_batch (claim1: one rsv_claim_batch); every entry counted
 * as an operation of its own, its latency the batch's.  Returns -1 when
 * the thread must stop, 0 when its buyers have no claim holds left. */
static int op_batch(worker *w, uint64_t t1)
{
    meas *m = w->m;
    int nb = batch_buyers(w);
    uint64_t shops[BATCH_BUYERS], items[BATCH_BUYERS], locs[BATCH_BUYERS];
    int64_t qty[BATCH_BUYERS];
    char toks[BATCH_BUYERS][64];
    const void *tp[BATCH_BUYERS];
    size_t lens[BATCH_BUYERS];
    int res[BATCH_BUYERS];
    int sold = wl_is_soldout(m->workload);
    int claim = m->workload == W_CLAIM;
    /* Buyer i of this connection is client tid + i * conns; it claims the
     * holds libreserve's client of that number would (its number, then
     * every clients-th), so the buyers share the holds out between them. */
    long conns = batch_conns(m);
    if (claim && w->claim_next + (nb - 1) * conns >= m->claim_n) {
        __atomic_store_n(&m->exhausted, 1, __ATOMIC_RELAXED);
        return 0;
    }
    for (int i = 0; i < nb; i++) {
        if (claim)
            claim_token(toks[i], sizeof toks[i], m->design, m->rtt_us,
                        m->claim_base + w->claim_next + i * conns);
        else
            snprintf(toks[i], sizeof toks[i], "%c%d.%d.%llu",
                     design_tag[m->design], m->id, w->tid,
                     (unsigned long long)w->seq++);
        tp[i] = toks[i];
        lens[i] = strlen(toks[i]);
        shops[i] = SHOP;
        items[i] = m->workload == W_SPREAD
                       ? SPREAD_BASE + 1 + ll_rng_next(&w->rng) % SPREAD_N
                       : wl_item(m->workload);
        locs[i] = 1;
        qty[i] = sold ? 1 : (int64_t)w->p.q;
    }
    int rc;
    if (claim) {
        w->claim_next += m->clients;
        rc = rsv_claim_batch(w->ctx, (size_t)nb, shops, tp, lens, res);
    } else if (wl_is_cart(m->workload)) {
        rc = RSV_OK;
        for (int i = 0; i < nb && rc == RSV_OK; i++)
            rc = lib_cart(w, w->bcart[i]);
        if (rc == RSV_OK)
            rc = rsv_reserve_cart_batch(w->ctx, (size_t)nb, shops, tp, lens,
                                        w->bcart, HOLD_TTL_MS, res);
    } else {
        rc = rsv_reserve_batch(w->ctx, (size_t)nb, shops, tp, lens, items,
                               locs, qty, HOLD_TTL_MS, res);
    }
    uint64_t t2 = now_us();
    uint32_t us = (uint32_t)(t2 - t1 > UINT32_MAX ? UINT32_MAX : t2 - t1);
    int stop = rc == RSV_ECONN || rc == RSV_EINDOUBT;
    if (rc == RSV_EINDOUBT)
        w->in_doubt += (uint64_t)nb; /* they may have committed */
    for (int i = 0; i < nb; i++) {
        int r = rc != RSV_OK ? rc : res[i];
        int ok = sold ? r == RSV_EOUTOFSTOCK : r == RSV_OK;
        if (!ok) {
            note_err(w, "%s: %s", rsv_code_name(r) ? rsv_code_name(r) : "?",
                     rsv_errmsg(w->ctx));
            if (rc == RSV_OK && r == RSV_EINDOUBT)
                w->in_doubt++;
            stop |= r == RSV_ECONN || r == RSV_EINDOUBT;
            continue;
        }
        if (claim) {
            w->done_claims++;
        } else if (!sold) {
            int lines = wl_is_cart(m->workload) ? CART_LINES : 1;
            w->done_ops++;
            w->done_rows += (uint64_t)lines;
            w->done_units += (uint64_t)lines * w->p.q;
        }
        if (t2 >= m->t_start && t2 < m->t_end)
            lat_push(w, us);
    }
    return stop ? -1 : 1;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    meas *m = w->m;
    if (worker_setup(w) != 0)
        w->setup_failed = 1;
    pthread_barrier_wait(&m->ready);
    while (!m->go)
        sleep_us(1000);
    if (w->setup_failed) {
        worker_teardown(w);
        return NULL;
    }
    w->claim_next = w->tid;
    int stampede = wl_is_stampede(m->workload);
    int calls = 0;
    if (stampede) /* every buyer's first call at the same moment */
        sleep_until(m->t_start);
    for (;;) {
        uint64_t t1 = now_us();
        if (t1 >= m->t_end || (stampede && calls++ == cfg.stampede_reserves))
            break;
        if (m->design == D_BATCH) {
            if (!w->ctx)
                break; /* (its requests go through another connection) */
            if (!w->lib_reset && t1 >= m->t_start) {
                rsv_stats_reset(w->ctx);
                w->lib_reset = 1;
            }
            int r = op_batch(w, t1);
            if (r < 0)
                w->fatal = 1;
            if (r <= 0)
                break;
            continue;
        }
        params *p = &w->p;
        if (m->workload == W_CLAIM) {
            if (w->claim_next >= m->claim_n) {
                __atomic_store_n(&m->exhausted, 1, __ATOMIC_RELAXED);
                break;
            }
            claim_token(p->tok, sizeof p->tok, m->design, m->rtt_us,
                        m->claim_base + w->claim_next);
            w->claim_next += m->clients;
            p->item = CLAIM_ITEM;
            p->loc = 1;
        } else {
            snprintf(p->tok, sizeof p->tok, "%c%d.%d.%llu",
                     design_tag[m->design], m->id, w->tid,
                     (unsigned long long)w->seq++);
            p->item = m->workload == W_SPREAD
                          ? SPREAD_BASE + 1 + ll_rng_next(&w->rng) % SPREAD_N
                      : stampede ? m->item
                                 : wl_item(m->workload);
            p->loc = 1;
        }
        p->toklen = (unsigned long)strlen(p->tok);
        if (w->ctx && !w->lib_reset && t1 >= m->t_start) {
            rsv_stats_reset(w->ctx);
            w->lib_reset = 1;
        }
        uint64_t before[PATH_NSTATS], after[PATH_NSTATS];
        int by_path = w->ctx && m->workload != W_CLAIM;
        if (by_path)
            path_counters(w, before);
        int r = m->design == D_LIB       ? op_lib(w)
                : m->design == D_BATCHER ? op_batcher(w)
                                         : op_base(w);
        uint64_t t2 = now_us();
        if (r > 0) {
            /* what the tables must show at the end of the run */
            int lines = wl_is_cart(m->workload) ? CART_LINES : 1;
            if (m->workload == W_CLAIM) {
                w->done_claims++;
            } else if (!wl_is_soldout(m->workload)) {
                w->done_ops++;
                w->done_rows += (uint64_t)lines;
                w->done_units += (uint64_t)lines * p->q;
            }
        }
        uint32_t us = (uint32_t)(t2 - t1 > UINT32_MAX ? UINT32_MAX : t2 - t1);
        int counted = r > 0 && t2 >= m->t_start && t2 < m->t_end;
        if (stampede) {
            w->codes[code_slot(w->last_rc)]++;
            w->t_last = t2;
            counted = 1; /* a buyer waits for a failed call too */
        }
        if (counted) {
            lat_push(w, us);
            if (by_path) {
                path_counters(w, after);
                latvec *pv = &w->path_lat[path_of(before, after)];
                vec_push(&pv->v, &pv->n, &pv->cap, us);
            }
        }
        if (r < 0) {
            w->fatal = 1;
            break;
        }
    }
    worker_teardown(w);
    return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static uint32_t pct(const uint32_t *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    size_t idx = (size_t)ceil(p * (double)n);
    if (idx < 1)
        idx = 1;
    if (idx > n)
        idx = n;
    return v[idx - 1];
}

/* ---- profiling (sampled while a measurement runs) ---- */

typedef struct prof_entry {
    char key[200];
    long count;
} prof_entry;

typedef struct prof_list {
    prof_entry e[256];
    int n;
} prof_list;

typedef struct profiler {
    meas *m;
    volatile int stop;
    uint64_t dump_at;        /* when to save SHOW ENGINE INNODB STATUS */
    prof_list conns;         /* connections by command, state, statement */
    prof_list waits;         /* lock waits (the stampede) */
    long samples, lockwait_sum, trx_sum;
    char status_file[512];
} profiler;

static void prof_add(prof_list *l, const char *key)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->e[i].key, key) == 0) {
            l->e[i].count++;
            return;
        }
    if (l->n < 256) {
        snprintf(l->e[l->n].key, sizeof l->e[l->n].key, "%s", key);
        l->e[l->n++].count = 1;
    }
}

/* Statement text without the conn_tag comment, whitespace squeezed. */
static void squeeze(const char *in, char *out, size_t outlen)
{
    size_t o = 0;
    int space = 0;
    while (*in && o + 1 < outlen) {
        if (in[0] == '/' && in[1] == '*') {
            const char *e = strstr(in + 2, "*/");
            if (!e)
                break;
            in = e + 2;
            continue;
        }
        if (*in == ' ' || *in == '\n' || *in == '\t') {
            space = o > 0;
            in++;
            continue;
        }
        if (space && o + 2 < outlen)
            out[o++] = ' ';
        space = 0;
        out[o++] = *in++;
    }
    out[o] = '\0';
    if (o > 64)
        out[64] = '\0';
}

/* Who waits for whom: one sample of every lock wait, as "lock wait |
 * MODE TYPE | the waiting statement <- the holder's statement" (a
 * statement inside a procedure shows as itself). */
static void prof_lock_waits(profiler *pr, MYSQL *c)
{
    if (mysql_query(c, "SELECT l.lock_mode, l.lock_type, "
                       "COALESCE(r.trx_query, ''), COALESCE(b.trx_query, '') "
                       "FROM information_schema.INNODB_LOCK_WAITS w "
                       "JOIN information_schema.INNODB_TRX r ON "
                       "r.trx_id = w.requesting_trx_id "
                       "JOIN information_schema.INNODB_TRX b ON "
                       "b.trx_id = w.blocking_trx_id "
                       "JOIN information_schema.INNODB_LOCKS l ON "
                       "l.lock_id = w.requested_lock_id") != 0)
        return;
    MYSQL_RES *r = mysql_store_result(c);
    MYSQL_ROW row;
    while (r && (row = mysql_fetch_row(r))) {
        char waiting[128], holder[128], key[200];
        squeeze(row[2] ? row[2] : "", waiting, sizeof waiting);
        squeeze(row[3] ? row[3] : "", holder, sizeof holder);
        snprintf(key, sizeof key, "lock wait | %s %s | %.70s <- %.70s",
                 row[0] ? row[0] : "", row[1] ? row[1] : "", waiting, holder);
        prof_add(&pr->waits, key);
    }
    if (r)
        mysql_free_result(r);
}

static void *profiler_main(void *arg)
{
    profiler *pr = arg;
    meas *m = pr->m;
    MYSQL *c = connect_local();
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT COMMAND, COALESCE(STATE, ''), COALESCE(INFO, '') FROM "
             "information_schema.PROCESSLIST WHERE DB = '%s' AND ID <> "
             "CONNECTION_ID()", dbname);
    int dumped = 0;
    while (!m->go)
        sleep_us(1000);
    sleep_until(m->t_start);
    while (!pr->stop && now_us() < m->t_end) {
        if (mysql_query(c, sql) == 0) {
            MYSQL_RES *r = mysql_store_result(c);
            MYSQL_ROW row;
            while (r && (row = mysql_fetch_row(r))) {
                char info[128], key[200];
                squeeze(row[2] ? row[2] : "", info, sizeof info);
                snprintf(key, sizeof key, "%s | %s | %s", row[0] ? row[0] : "",
                         row[1] ? row[1] : "", info);
                prof_add(&pr->conns, key);
            }
            if (r)
                mysql_free_result(r);
        }
        pr->lockwait_sum += q_i64(c, "SELECT COUNT(*) FROM "
                                     "information_schema.INNODB_TRX WHERE "
                                     "trx_state = 'LOCK WAIT'");
        pr->trx_sum += q_i64(c, "SELECT COUNT(*) FROM information_schema.INNODB_TRX");
        pr->samples++;
        if (wl_is_stampede(m->workload))
            prof_lock_waits(pr, c);
        if (!dumped && now_us() >= pr->dump_at) {
            dumped = 1;
            if (mysql_query(c, "SHOW ENGINE INNODB STATUS") == 0) {
                MYSQL_RES *r = mysql_store_result(c);
                MYSQL_ROW row = r ? mysql_fetch_row(r) : NULL;
                FILE *f = fopen(pr->status_file, "w");
                if (f && row && row[2])
                    fputs(row[2], f);
                if (f)
                    fclose(f);
                if (r)
                    mysql_free_result(r);
            }
        }
        sleep_us(20000);
    }
    mysql_close(c);
    return NULL;
}

static int cmp_prof(const void *a, const void *b)
{
    const prof_entry *x = a, *y = b;
    return x->count < y->count ? 1 : x->count > y->count ? -1 : 0;
}

/* "codes=RSV_OK:n,RSV_EBUSY:n,..." of the codes seen, RSV_EBUSY always. */
static void print_codes(const uint64_t *codes)
{
    printf("codes=");
    const char *sep = "";
    for (int c = 0; c < NCODES; c++)
        if (codes[c] || -c == RSV_EBUSY) {
            const char *name = rsv_code_name(-c);
            printf("%s%s:%llu", sep, name ? name : "other",
                   (unsigned long long)codes[c]);
            sep = ",";
        }
}

/* The 12 most frequent keys of a profile list, as shares of its samples. */
static void print_prof(prof_list *l, const char *what)
{
    qsort(l->e, (size_t)l->n, sizeof l->e[0], cmp_prof);
    long all = 0;
    for (int i = 0; i < l->n; i++)
        all += l->e[i].count;
    for (int i = 0; i < l->n && i < 12; i++)
        printf("# profile   %s%5.1f%%  %s\n", what,
               100.0 * (double)l->e[i].count / (double)(all ? all : 1),
               l->e[i].key);
}

/* ---- one measurement ---- */

static int meas_counter;

/* The keys of a measurement, as every line about it starts. */
static void meas_key(const meas *m, char *buf, size_t len)
{
    snprintf(buf, len, "design=%s workload=%s clients=%d rtt_us=%d %s",
             design_name[m->design], wl_name[m->workload], m->clients,
             m->rtt_us, cfg_key_for(m->workload));
}

/* One line: how many reserves took each path, and their p50/p99 (us). */
static void print_paths(const meas *m, const worker *w, const char *key)
{
    printf("# lib_paths %s", key);
    for (int q = 0; q < NPATHS; q++) {
        size_t n = 0;
        for (int i = 0; i < m->clients; i++)
            n += w[i].path_lat[q].n;
        uint32_t *all = xcalloc(n ? n : 1, sizeof *all);
        size_t k = 0;
        for (int i = 0; i < m->clients; i++) {
            if (w[i].path_lat[q].n)
                memcpy(all + k, w[i].path_lat[q].v,
                       w[i].path_lat[q].n * sizeof *all);
            k += w[i].path_lat[q].n;
        }
        qsort(all, n, sizeof *all, cmp_u32);
        printf(" %s=%zu/p50:%u/p99:%u", path_name[q], n, pct(all, n, 0.50),
               pct(all, n, 0.99));
        free(all);
    }
    printf("\n");
}

/* libreserve-batcher: the shared batcher of a measurement, on the same
 * path to the server as the other designs' clients (the socket, or the
 * delay proxy). */
static rsv_batcher *batcher_open(const meas *m)
{
    char u[256], pw[256], sock[1024], dsn[2048];
    ll_dsn_escape(u, sizeof u, cfg.user);
    ll_dsn_escape(pw, sizeof pw, cfg.pass);
    if (proxy_port[m->rtt_idx] == 0) {
        ll_dsn_escape(sock, sizeof sock, cfg.sock);
        snprintf(dsn, sizeof dsn, "mariadb://%s:%s@/%s?socket=%s", u, pw,
                 dbname, sock);
    } else {
        snprintf(dsn, sizeof dsn, "mariadb://%s:%s@127.0.0.1:%d/%s", u, pw,
                 proxy_port[m->rtt_idx], dbname);
    }
    rsv_options o;
    lib_options(&o, meas_pool_cap(m));
    rsv_batcher *b = NULL;
    int rc = rsv_batcher_open(&b, dsn, &o, (uint32_t)batch_conns(m));
    if (rc != RSV_OK)
        fprintf(stderr, "bench: rsv_batcher_open: %s\n", rsv_strerror(rc));
    return b;
}

static void batcher_counters(const meas *m, uint64_t *out)
{
    for (size_t j = 0; j < LIB_NSTATS; j++) {
        out[j] = 0;
        rsv_batcher_stats_get(m->batcher, lib_stat[j], RSV_OP_ALL, &out[j]);
    }
}


/* --processes: every client a process of its own (fork), as the workers
 * of a PHP-FPM or Puma pool are, each with its own connection.  The
 * measurement's shared fields (the barrier, go, the window) live in
 * memory shared with the children; each child runs worker_main and
 * leaves what it counted in a slot of its own, which the parent copies
 * back into its worker after waiting for it. */
#define PROC_LAT_MAX 131072 /* latencies a client process can hand back */
typedef struct proc_slot {
    worker w;               /* as it ended (its pointers mean nothing here) */
    uint32_t nlat, npath[NPATHS];
    uint32_t lat[PROC_LAT_MAX]; /* its latencies, then each path's */
} proc_slot;

static void *shared_alloc(size_t len)
{
    /* /dev/zero mapped shared: anonymous memory the children share,
     * within POSIX (MAP_ANONYMOUS is not) */
    int fd = open("/dev/zero", O_RDWR);
    if (fd < 0)
        die("cannot open /dev/zero");
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        die("mmap of %zu bytes failed", len);
    return p;
}

static pid_t proc_start(worker *w, proc_slot *slot)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        die("fork failed");
    if (pid > 0)
        return pid;
    worker_main(w);
    slot->w = *w;
    size_t n = w->nlat < PROC_LAT_MAX ? w->nlat : PROC_LAT_MAX;
    memcpy(slot->lat, w->lat, n * sizeof *w->lat);
    slot->nlat = (uint32_t)n;
    uint32_t k = (uint32_t)n;
    for (int q = 0; q < NPATHS; q++) {
        size_t pn = w->path_lat[q].n;
        if (pn > PROC_LAT_MAX - k)
            pn = PROC_LAT_MAX - k;
        memcpy(slot->lat + k, w->path_lat[q].v, pn * sizeof *slot->lat);
        slot->npath[q] = (uint32_t)pn;
        k += (uint32_t)pn;
    }
    _exit(0);
}

static void proc_join(pid_t pid, worker *w, const proc_slot *slot)
{
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        w->setup_failed = 1;
        return;
    }
    meas *m = w->m;
    *w = slot->w;
    w->m = m;
    w->lat = xcalloc(slot->nlat + 1, sizeof *w->lat);
    memcpy(w->lat, slot->lat, slot->nlat * sizeof *w->lat);
    w->nlat = w->caplat = slot->nlat;
    uint32_t k = slot->nlat;
    for (int q = 0; q < NPATHS; q++) {
        latvec *pv = &w->path_lat[q];
        pv->v = xcalloc(slot->npath[q] + 1, sizeof *pv->v);
        memcpy(pv->v, slot->lat + k, slot->npath[q] * sizeof *pv->v);
        pv->n = pv->cap = slot->npath[q];
        k += slot->npath[q];
    }
}

static void run_measurement_in(meas *m, MYSQL *mon, int profile)
{
    m->id = ++meas_counter;
    char key[256];
    meas_key(m, key, sizeof key);
    worker *w = xcalloc((size_t)m->clients, sizeof *w);
    pthread_t *th = xcalloc((size_t)m->clients, sizeof *th);
    if (m->design == D_BATCHER)
        m->batcher = batcher_open(m);
    pthread_barrierattr_t ba;
    pthread_barrierattr_init(&ba);
    if (cfg.processes)
        pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&m->ready, &ba, (unsigned)m->clients + 1);
    pthread_barrierattr_destroy(&ba);
    pid_t *pids = cfg.processes ? xcalloc((size_t)m->clients, sizeof *pids)
                                : NULL;
    proc_slot *slots = cfg.processes
                           ? shared_alloc((size_t)m->clients * sizeof *slots)
                           : NULL;
    for (int i = 0; i < m->clients; i++) {
        w[i].m = m;
        w[i].tid = i;
        w[i].rng = 0x9E3779B97F4A7C15ULL ^ ((uint64_t)m->id << 32) ^ (uint64_t)(i + 1);
        if (pids)
            pids[i] = proc_start(&w[i], &slots[i]);
        else if (pthread_create(&th[i], NULL, worker_main, &w[i]) != 0)
            die("pthread_create failed");
    }
    pthread_barrier_wait(&m->ready);
    int setup_failed = 0;
    for (int i = 0; i < m->clients; i++)
        setup_failed |= w[i].setup_failed;
    uint64_t t0 = now_us();
    int stampede = wl_is_stampede(m->workload);
    if (stampede) {
        /* every buyer released at t_start; t_end only a bound: the
         * measurement ends when the last buyer is done */
        m->t_start = t0 + STAMPEDE_RELEASE_US;
        m->t_end = m->t_start + STAMPEDE_MAX_US;
    } else {
        m->t_start = t0 + (uint64_t)cfg.warmup_ms * 1000u;
        m->t_end = m->t_start + (uint64_t)cfg.duration_ms * 1000u;
    }
    profiler *pr = NULL;
    pthread_t pth;
    if (profile) {
        pr = xcalloc(1, sizeof *pr);
        pr->m = m;
        pr->dump_at = stampede ? m->t_start + STAMPEDE_DUMP_US
                               : (m->t_start + m->t_end) / 2;
        snprintf(pr->status_file, sizeof pr->status_file,
                 "%s/innodb-status-%s-%s%s-c%d-rtt%d.txt", cfg.outdir,
                 design_name[m->design], wl_name[m->workload],
                 m->workload == W_STAMPEDE_FRESH ? "-fresh"
                 : m->workload == W_STAMPEDE     ? "-warm"
                                                 : "",
                 m->clients, m->rtt_us);
        pthread_create(&pth, NULL, profiler_main, pr);
    }
    __atomic_store_n(&m->go, 1, __ATOMIC_SEQ_CST);
    status_snap s0, s1;
    cpu_snap c0, c1;
    cpu_proxy_pid = m->rtt_us ? proxies[m->rtt_idx].pid : 0;
    uint64_t blib0[LIB_NSTATS] = {0};
    if (!stampede) /* (the stampede's counters start before its release) */
        sleep_until(m->t_start);
    status_read(mon, 0, &s0);
    cpu_read(&c0);
    uint64_t cpu_t0 = now_us();
    if (m->batcher)
        batcher_counters(m, blib0);
    if (stampede) {
        for (int i = 0; i < m->clients; i++) {
            if (pids)
                proc_join(pids[i], &w[i], &slots[i]);
            else
                pthread_join(th[i], NULL);
        }
        uint64_t last = m->t_start + 1;
        for (int i = 0; i < m->clients; i++)
            if (w[i].t_last > last)
                last = w[i].t_last;
        m->t_end = last;
    } else {
        sleep_until(m->t_end);
    }
    cpu_read(&c1);
    uint64_t cpu_t1 = now_us();
    status_read(mon, 0, &s1);
    if (!stampede) {
        for (int i = 0; i < m->clients; i++) {
            if (pids)
                proc_join(pids[i], &w[i], &slots[i]);
            else
                pthread_join(th[i], NULL);
        }
    }
    if (m->batcher) {
        /* the window and the tail, as the other library designs count:
         * all on the first client, whose lines are summed below */
        batcher_counters(m, w[0].lib);
        for (size_t j = 0; j < LIB_NSTATS; j++)
            w[0].lib[j] -= blib0[j];
        rsv_batcher_close(m->batcher);
        m->batcher = NULL;
    }
    if (pr) {
        pr->stop = 1;
        pthread_join(pth, NULL);
    }

    size_t total = 0;
    int fatal = 0;
    const char *err = NULL;
    for (int i = 0; i < m->clients; i++) {
        total += w[i].nlat;
        m->errors += w[i].errors;
        m->retries += w[i].retries;
        m->done_ops += w[i].done_ops;
        m->done_rows += w[i].done_rows;
        m->done_units += w[i].done_units;
        m->done_claims += w[i].done_claims;
        m->in_doubt += w[i].in_doubt;
        fatal |= w[i].fatal;
        if (!err && w[i].first_err[0])
            err = w[i].first_err;
        for (int c = 0; c < NCODES; c++)
            m->codes[c] += w[i].codes[c];
    }
    uint32_t *all = xcalloc(total, sizeof *all);
    size_t k = 0;
    for (int i = 0; i < m->clients; i++) {
        memcpy(all + k, w[i].lat, w[i].nlat * sizeof *all);
        k += w[i].nlat;
    }
    qsort(all, total, sizeof *all, cmp_u32);
    /* (the stampede's latencies count its failed calls: its rate only
     * the successes) */
    m->ops = stampede ? m->codes[0] : total;
    m->max_us = total ? all[total - 1] : 0;
    m->ops_per_s = (double)m->ops * 1e6 / (double)(m->t_end - m->t_start);
    m->p50 = pct(all, total, 0.50);
    m->p99 = pct(all, total, 0.99);
    m->p999 = pct(all, total, 0.999);
    m->valid = !setup_failed && total > 0;
    m->semisync_no_tx = status_delta(&s0, &s1, "Rpl_semi_sync_master_no_tx");
    m->semisync_yes_tx = status_delta(&s0, &s1, "Rpl_semi_sync_master_yes_tx");

    if (setup_failed)
        printf("# ERROR %s: a client could not connect or prepare (see "
               "stderr)\n", key);
    printf("# round=%d %s ops_per_s=%.0f p50_us=%u p99_us=%u p999_us=%u",
           m->round, key, m->ops_per_s, m->p50, m->p99, m->p999);
    if (stampede) {
        printf(" max_us=%u wall_ms=%.0f calls=%zu ", m->max_us,
               (double)(m->t_end - m->t_start) / 1e3, total);
        print_codes(m->codes);
    }
    printf("\n");
    if (m->errors || m->retries || fatal || m->exhausted)
        printf("# note %s errors=%llu retries=%llu%s%s first_error=\"%s\"\n",
               key, (unsigned long long)m->errors,
               (unsigned long long)m->retries,
               fatal ? " connection_lost=1" : "",
               m->exhausted ? " claim_holds_exhausted=1" : "", err ? err : "");
    double ops = total ? (double)total : 1.0;
    long long lw = status_delta(&s0, &s1, "Innodb_row_lock_waits");
    long long lt = status_delta(&s0, &s1, "Innodb_row_lock_time");
    printf("# status %s per_op:"
           " questions=%.2f commits=%.2f rollbacks=%.3f stmt_execute=%.2f"
           " handler_read_key=%.2f handler_read_next=%.2f handler_write=%.2f"
           " handler_delete=%.2f handler_update=%.2f rows_read=%.2f"
           " row_lock_waits=%.3f row_lock_time_ms=%.3f deadlocks=%lld"
           " data_fsyncs=%.3f binlog_group_commits=%.3f | window:"
           " row_lock_waits=%lld row_lock_time_ms=%lld"
           " history_list_length_at_end=%lld\n",
           key,
           (double)status_delta(&s0, &s1, "Questions") / ops,
           (double)status_delta(&s0, &s1, "Com_commit") / ops,
           (double)status_delta(&s0, &s1, "Com_rollback") / ops,
           (double)status_delta(&s0, &s1, "Com_stmt_execute") / ops,
           (double)status_delta(&s0, &s1, "Handler_read_key") / ops,
           (double)status_delta(&s0, &s1, "Handler_read_next") / ops,
           (double)status_delta(&s0, &s1, "Handler_write") / ops,
           (double)status_delta(&s0, &s1, "Handler_delete") / ops,
           (double)status_delta(&s0, &s1, "Handler_update") / ops,
           (double)status_delta(&s0, &s1, "Rows_read") / ops,
           (double)lw / ops, (double)lt / ops,
           status_delta(&s0, &s1, "Innodb_deadlocks"),
           (double)status_delta(&s0, &s1, "Innodb_data_fsyncs") / ops,
           (double)status_delta(&s0, &s1, "Binlog_group_commits") / ops,
           lw, lt, status_get(&s1, "Innodb_history_list_length"));
    if (cfg.semisync) {
        long long waits = status_delta(&s0, &s1, "Rpl_semi_sync_master_tx_waits");
        long long wait_us = status_delta(&s0, &s1, "Rpl_semi_sync_master_tx_wait_time");
        printf("# semisync %s window: yes_tx=%lld no_tx=%lld (must stay 0) "
               "tx_waits=%lld avg_tx_wait_us=%.0f clients_at_end=%lld\n",
               key, m->semisync_yes_tx, m->semisync_no_tx, waits,
               waits > 0 ? (double)wait_us / (double)waits : 0.0,
               status_get(&s1, "Rpl_semi_sync_master_clients"));
    }
    if (is_lib(m->design)) {
        /* counted from each client's first call in the window to its
         * last (which may end just after it) */
        uint64_t lib[LIB_NSTATS] = {0};
        for (int i = 0; i < m->clients; i++)
            for (size_t j = 0; j < LIB_NSTATS; j++)
                lib[j] += w[i].lib[j];
        double calls = lib[0] ? (double)lib[0] : 1.0;
        printf("# lib %s calls=%llu per_call:", key, (unsigned long long)lib[0]);
        for (size_t j = 1; j < LIB_NSTATS; j++)
            printf(" %s=%.3f", lib_stat_name[j], (double)lib[j] / calls);
        printf("\n");
        if (m->design == D_LIB) /* (a batch's entries share one latency) */
            print_paths(m, w, key);
    }
    /* (the stampede's counters were read from before its release to
     * after its last buyer) */
    double secs = (double)(stampede ? cpu_t1 - cpu_t0 : m->t_end - m->t_start) / 1e6;
    double c_server = cpu_cores(c0.server, c1.server, secs),
           c_self = cpu_cores(c0.self, c1.self, secs),
           c_proxy = m->rtt_us ? cpu_cores(c0.proxy, c1.proxy, secs) : 0.0,
           c_machine = cpu_cores(c0.machine, c1.machine, secs);
    double other = c_machine - c_server - c_self - c_proxy;
    /* (with --processes the clients are not this process: their CPU
     * shows under other processes) */
    printf("# cpu %s cores_busy: server=%.2f bench_clients=%.2f proxy=%.2f "
           "whole_machine=%.2f (of %ld; other processes=%.2f) "
           "server_us_per_op=%.0f\n",
           key, c_server, c_self, c_proxy, c_machine,
           sysconf(_SC_NPROCESSORS_ONLN), fmax(0.0, other),
           m->ops_per_s > 0 ? c_server * 1e6 / m->ops_per_s : 0.0);
    if (c0.machine >= 0 && c0.server >= 0 && other > 0.25 && !cfg.processes)
        printf("# noisy %s: other processes used %.2f cores during this "
               "measurement\n", key, other);
    if (pr) {
        printf("# profile %s samples=%ld avg_open_trx=%.1f "
               "avg_lock_wait_trx=%.1f innodb_status=%s\n",
               key, pr->samples,
               pr->samples ? (double)pr->trx_sum / (double)pr->samples : 0.0,
               pr->samples ? (double)pr->lockwait_sum / (double)pr->samples : 0.0,
               pr->status_file);
        print_prof(&pr->conns, "");
        print_prof(&pr->waits, "lock waits, share of all wait samples: ");
        free(pr);
    }
    fflush(stdout);
    for (int i = 0; i < m->clients; i++) {
        free(w[i].lat);
        for (int q = 0; q < NPATHS; q++)
            free(w[i].path_lat[q].v);
    }
    free(all);
    free(w);
    free(th);
    free(pids);
    if (slots)
        munmap(slots, (size_t)m->clients * sizeof *slots);
    pthread_barrier_destroy(&m->ready);
}

/* A measurement whose clients are processes keeps its shared fields in
 * shared memory for the run, and the results in m after. */
static void run_measurement(meas *m, MYSQL *mon, int profile)
{
    if (!cfg.processes) {
        run_measurement_in(m, mon, profile);
        return;
    }
    meas *sm = shared_alloc(sizeof *sm);
    *sm = *m;
    run_measurement_in(sm, mon, profile);
    *m = *sm;
    munmap(sm, sizeof *sm);
}

/* ------------------------------------------------------------------ */
/* setup                                                              */
/* ------------------------------------------------------------------ */

/* Run fn(ctx, index) for index in [0, n) over a few threads, each with its
 * own connection and context (Unix socket). */
typedef int (*par_fn)(rsv_ctx *ctx, long idx, void *arg);
typedef struct par_job {
    par_fn fn;
    void *arg;
    long n;
    long next;
    pthread_mutex_t mu;
    int failed;
    char err[256];
} par_job;

static void *par_main(void *a)
{
    par_job *j = a;
    MYSQL *c = connect_local();
    rsv_ctx *ctx = NULL;
    if (lib_open(&ctx, c) != RSV_OK)
        die("rsv_open: %s", rsv_errmsg(ctx));
    for (;;) {
        pthread_mutex_lock(&j->mu);
        long i = j->failed ? j->n : j->next++;
        pthread_mutex_unlock(&j->mu);
        if (i >= j->n)
            break;
        int rc = j->fn(ctx, i, j->arg);
        if (rc != RSV_OK) {
            pthread_mutex_lock(&j->mu);
            if (!j->failed)
                snprintf(j->err, sizeof j->err, "%s: %s", rsv_code_name(rc),
                         rsv_errmsg(ctx));
            j->failed = 1;
            pthread_mutex_unlock(&j->mu);
        }
    }
    rsv_close(ctx);
    mysql_close(c);
    return NULL;
}

static void par_run(const char *what, par_fn fn, void *arg, long n, int threads)
{
    par_job j;
    memset(&j, 0, sizeof j);
    j.fn = fn;
    j.arg = arg;
    j.n = n;
    pthread_mutex_init(&j.mu, NULL);
    pthread_t th[64];
    if (threads > 64)
        threads = 64;
    uint64_t t = now_us();
    for (int i = 0; i < threads; i++)
        pthread_create(&th[i], NULL, par_main, &j);
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    pthread_mutex_destroy(&j.mu);
    if (j.failed)
        die("setup (%s) failed: %s", what, j.err);
    progress("setup: %s: %ld in %.1f s", what, n, (double)(now_us() - t) / 1e6);
}

typedef struct keyset {
    uint64_t base;
    int items, locs;
    int64_t stock;
} keyset;

static int fn_stock(rsv_ctx *ctx, long i, void *arg)
{
    keyset *k = arg;
    return rsv_stock_set(ctx, SHOP, k->base + 1 + (uint64_t)(i / k->locs),
                         1 + (uint64_t)(i % k->locs), k->stock);
}

static int fn_refill(rsv_ctx *ctx, long i, void *arg)
{
    keyset *k = arg;
    return rsv_replenish(ctx, SHOP, k->base + 1 + (uint64_t)(i / k->locs),
                         1 + (uint64_t)(i % k->locs), NULL);
}

static void lib_keys(const char *what, uint64_t base, int items, int locs,
                     int64_t stock, int refill)
{
    keyset k = {base, items, locs, stock};
    char buf[128];
    snprintf(buf, sizeof buf, "%s: stock", what);
    par_run(buf, fn_stock, &k, (long)items * locs, cfg.setup_threads);
    if (refill) {
        snprintf(buf, sizeof buf, "%s: fill pools", what);
        par_run(buf, fn_refill, &k, (long)items * locs, cfg.setup_threads);
    }
}

/* Every success of every design over the whole run (all measurements,
 * profiled re-runs too) and the claim holds made at setup: what its
 * tables must show at the end. */
typedef struct tally {
    uint64_t reserves, rows, units, claims, in_doubt;
    long long claim_holds;
} tally;

typedef struct claimfill {
    int design, rtt_us;
} claimfill;

static int fn_claim_hold(rsv_ctx *ctx, long i, void *arg)
{
    claimfill *cf = arg;
    char tok[64];
    claim_token(tok, sizeof tok, cf->design, cf->rtt_us, i);
    int rc = rsv_reserve_one(ctx, SHOP, tok, strlen(tok), CLAIM_ITEM, 1, 1,
                             HOLD_TTL_MS);
    /* a re-run of the same token (not expected) is fine */
    return rc == RSV_ECLAIMED ? RSV_OK : rc;
}

/* hotrow-1rt's procedures.  Each is one round trip and commits on the
 * server.  The reserve inserts the hold before it updates the ledger row,
 * so the row lock is held from the UPDATE to the COMMIT only (the order
 * that serves a hot row best); a failed guard rolls the hold back.  The
 * cart procedure has to lock a line's row to know its location, so it
 * updates first and inserts the line's hold after.  The claim deletes the
 * hold first for the same reason.  Each answers one row: 1 done, 0 no
 * stock (or no such hold). */
static const char *const hot1_procs[] = {
    "CREATE PROCEDURE bench_hot1_reserve(IN p_shop BIGINT UNSIGNED,"
    " IN p_token VARBINARY(128), IN p_item BIGINT UNSIGNED,"
    " IN p_loc BIGINT UNSIGNED, IN p_q BIGINT, IN p_ttl_us BIGINT)\n"
    "BEGIN\n"
    "  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;\n"
    "  START TRANSACTION;\n"
    "  INSERT INTO bench_hot1_holds (shop_id, checkout_token,"
    " item_id, location_id, quantity, generation,"
    " expires_at, created_at) VALUES (p_shop, p_token, p_item, p_loc, p_q,"
    " 1, NOW(6) + INTERVAL p_ttl_us MICROSECOND, NOW(6));\n"
    "  UPDATE bench_hot1_levels SET available = available - p_q"
    " WHERE shop_id = p_shop AND item_id = p_item"
    " AND location_id = p_loc AND available >= p_q;\n"
    "  IF ROW_COUNT() = 1 THEN\n"
    "    COMMIT;\n"
    "    SELECT 1 AS done;\n"
    "  ELSE\n"
    "    ROLLBACK;\n"
    "    SELECT 0 AS done;\n"
    "  END IF;\n"
    "END",
    /* p_lines: "item:loc,loc,...;item:..." in item order */
    "CREATE PROCEDURE bench_hot1_cart(IN p_shop BIGINT UNSIGNED,"
    " IN p_token VARBINARY(128), IN p_lines VARCHAR(512), IN p_q BIGINT,"
    " IN p_ttl_us BIGINT)\n"
    "body: BEGIN\n"
    "  DECLARE v_rest, v_line, v_locs VARCHAR(512) DEFAULT '';\n"
    "  DECLARE v_item, v_loc BIGINT UNSIGNED;\n"
    "  DECLARE v_got INT;\n"
    "  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;\n"
    "  START TRANSACTION;\n"
    "  SET v_rest = p_lines;\n"
    "  WHILE v_rest <> '' DO\n"
    "    SET v_line = SUBSTRING_INDEX(v_rest, ';', 1);\n"
    "    SET v_rest = SUBSTRING(v_rest, CHAR_LENGTH(v_line) + 2);\n"
    "    SET v_item = SUBSTRING_INDEX(v_line, ':', 1);\n"
    "    SET v_locs = SUBSTRING_INDEX(v_line, ':', -1);\n"
    "    SET v_got = 0;\n"
    "    WHILE v_got = 0 AND v_locs <> '' DO\n"
    "      SET v_loc = SUBSTRING_INDEX(v_locs, ',', 1);\n"
    "      SET v_locs = SUBSTRING(v_locs,"
    " CHAR_LENGTH(SUBSTRING_INDEX(v_locs, ',', 1)) + 2);\n"
    "      UPDATE bench_hot1_levels SET available = available - p_q"
    " WHERE shop_id = p_shop AND item_id = v_item"
    " AND location_id = v_loc AND available >= p_q;\n"
    "      SET v_got = ROW_COUNT();\n"
    "    END WHILE;\n"
    "    IF v_got <> 1 THEN\n"
    "      ROLLBACK;\n"
    "      SELECT 0 AS done;\n"
    "      LEAVE body;\n"
    "    END IF;\n"
    "    INSERT INTO bench_hot1_holds (shop_id, checkout_token,"
    " item_id, location_id, quantity, generation,"
    " expires_at, created_at) VALUES (p_shop, p_token, v_item, v_loc, p_q,"
    " 1, NOW(6) + INTERVAL p_ttl_us MICROSECOND, NOW(6));\n"
    "  END WHILE;\n"
    "  COMMIT;\n"
    "  SELECT 1 AS done;\n"
    "END",
    "CREATE PROCEDURE bench_hot1_claim(IN p_shop BIGINT UNSIGNED,"
    " IN p_token VARBINARY(128), IN p_item BIGINT UNSIGNED,"
    " IN p_loc BIGINT UNSIGNED, IN p_q BIGINT)\n"
    "BEGIN\n"
    "  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;\n"
    "  START TRANSACTION;\n"
    "  DELETE FROM bench_hot1_holds WHERE shop_id = p_shop"
    " AND checkout_token = p_token AND item_id = p_item"
    " AND location_id = p_loc AND quantity = p_q;\n"
    "  IF ROW_COUNT() = 1 THEN\n"
    "    UPDATE bench_hot1_levels SET claimed = claimed + p_q"
    " WHERE shop_id = p_shop AND item_id = p_item"
    " AND location_id = p_loc;\n"
    "    COMMIT;\n"
    "    SELECT 1 AS done;\n"
    "  ELSE\n"
    "    ROLLBACK;\n"
    "    SELECT 0 AS done;\n"
    "  END IF;\n"
    "END",
};

static void setup_database(MYSQL *c)
{
    snprintf(dbname, sizeof dbname, "rsvbench_%d", (int)getpid());
    q_execf(c, "DROP DATABASE IF EXISTS %s", dbname);
    q_execf(c, "CREATE DATABASE %s", dbname);
    q_execf(c, "USE %s", dbname);
    char err[512];
    int rc = ll_load_schema(c, cfg.schema_path, err, sizeof err);
    if (rc == -1)
        die("cannot read %s", cfg.schema_path);
    if (rc != 0)
        die("loading %s: %s", cfg.schema_path, err);
    /* The hot rows' ledgers: stock is what the row started with, so
     * stock = available + claimed + units held, at any time. */
    q_exec(c, "CREATE TABLE bench_hot_levels ("
              " shop_id BIGINT UNSIGNED NOT NULL,"
              " item_id BIGINT UNSIGNED NOT NULL,"
              " location_id BIGINT UNSIGNED NOT NULL,"
              " stock BIGINT NOT NULL,"
              " available BIGINT NOT NULL,"
              " claimed BIGINT NOT NULL DEFAULT 0,"
              " PRIMARY KEY (shop_id, item_id, location_id),"
              " CONSTRAINT bench_levels_bounds CHECK (available >= 0 AND"
              " claimed >= 0)"
              ") ENGINE=InnoDB");
    q_exec(c, "CREATE TABLE bench_hot1_levels LIKE bench_hot_levels");
    for (int d = 0; d < D_N; d++)
        if (!is_lib(d))
            q_execf(c, "CREATE TABLE %s LIKE rsv_holds",
                    hold_table(d));
    for (size_t i = 0; i < sizeof hot1_procs / sizeof hot1_procs[0]; i++)
        q_exec(c, hot1_procs[i]);
}

static void setup_hot_ledger(MYSQL *c, const char *tbl)
{
    q_execf(c, "INSERT INTO %s (shop_id, item_id, "
               "location_id, stock, available) VALUES "
               "(%d, %d, 1, %lld, %lld), (%d, %d, 1, %lld, %lld), "
               "(%d, %d, 1, 0, 0), (%d, %d, 1, %lld, %lld), "
               "(%d, %d, 1, %lld, %lld)", tbl,
            SHOP, FLASH_ITEM, BIG_STOCK, BIG_STOCK,
            SHOP, CLAIM_ITEM, BIG_STOCK, BIG_STOCK,
            SHOP, SOLDOUT_ITEM,
            SHOP, FLASHQ2_ITEM, BIG_STOCK, BIG_STOCK,
            SHOP, FLASHQ5_ITEM, BIG_STOCK, BIG_STOCK);
    q_execf(c, "INSERT INTO %s (shop_id, item_id, "
               "location_id, stock, available) SELECT %d, %d + seq, "
               "1, %ld, %ld FROM seq_1_to_%d", tbl, SHOP, SPREAD_BASE,
            cfg.spread_stock, cfg.spread_stock, SPREAD_N);
    q_execf(c, "INSERT INTO %s (shop_id, item_id, "
               "location_id, stock, available) SELECT %d, "
               "%d + a.seq, b.seq, %lld, %lld FROM seq_1_to_%d a JOIN "
               "seq_1_to_%d b", tbl, SHOP, CART_BASE, BIG_STOCK, BIG_STOCK,
            CART_N, CART_LOCS);
}

/* Holds for the claim workload, per design and RTT: tokens c<tag><rtt>.0
 * .. c<tag><rtt>.<n-1> (<tag> the design's byte), one unit each.  The
 * library designs reserve them as libreserve does, one call each. */
static tally done[D_N];

static void setup_claims(MYSQL *c, int design, int rtt_us, long n)
{
    done[design].claim_holds += n;
    if (is_lib(design)) {
        claimfill cf = {design, rtt_us};
        char what[64];
        snprintf(what, sizeof what, "claim holds (%s, rtt %d)",
                 design_name[design], rtt_us);
        par_run(what, fn_claim_hold, &cf, n, cfg.setup_threads);
        return;
    }
    uint64_t t = now_us();
    q_exec(c, "START TRANSACTION");
    q_execf(c, "INSERT INTO %s (shop_id, checkout_token, item_id, "
               "location_id, quantity, generation, expires_at, "
               "created_at) SELECT %d, CONCAT('c%c%d.', seq), %d, 1, 1, 1, "
               "NOW(6) + INTERVAL %lld SECOND, NOW(6) FROM seq_0_to_%ld",
            hold_table(design), SHOP, design_tag[design], rtt_us, CLAIM_ITEM,
            HOLD_TTL_MS / 1000, n - 1);
    if (is_hot(design))
        q_execf(c, "UPDATE %s SET available = available - %ld "
                   "WHERE shop_id = %d AND item_id = %d AND "
                   "location_id = 1", level_table(design), n, SHOP,
                CLAIM_ITEM);
    q_exec(c, "COMMIT");
    progress("setup: claim holds (%s, rtt %d): %ld in %.1f s",
             design_name[design], rtt_us, n, (double)(now_us() - t) / 1e6);
}

/* ------------------------------------------------------------------ */
/* extra probes                                                       */
/* ------------------------------------------------------------------ */

/* Statements per reserve, from the session's own status counters, for
 * carts of 1, 5 and 50 lines (each line: one item at 3 locations). */
static void stmts_probe(void)
{
    static const int sizes[] = {1, 5, STMT_MAX_LINES};
    const int reps = 600;
    MYSQL *c = connect_local();
    rsv_ctx *ctx = NULL;
    if (lib_open(&ctx, c) != RSV_OK)
        die("rsv_open: %s", rsv_errmsg(ctx));
    rsv_cart *cart;
    rsv_cart_new(&cart);
    printf("# statements per reserve: one connection, local socket, %d "
           "reserves per cart size after a warm-up; pools start full "
           "(pool_cap 1000), so refills are included when they happen\n",
           reps);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int lines = sizes[s];
        uint64_t locs[3] = {1, 2, 3};
        rsv_cart_clear(cart);
        for (int l = 0; l < lines; l++)
            rsv_cart_add(cart, STMT_BASE + 1 + (uint64_t)l, locs, 3, 1, 0);
        char tok[64];
        for (int i = 0; i < 3; i++) {
            snprintf(tok, sizeof tok, "s%d.w%d", lines, i);
            int rc = rsv_reserve(ctx, SHOP, tok, strlen(tok), cart, HOLD_TTL_MS);
            if (rc != RSV_OK)
                die("stmts warm-up: %s", rsv_errmsg(ctx));
        }
        status_snap a, b;
        status_read(c, 1, &a);
        uint64_t t = now_us();
        for (int i = 0; i < reps; i++) {
            snprintf(tok, sizeof tok, "s%d.%d", lines, i);
            int rc = rsv_reserve(ctx, SHOP, tok, strlen(tok), cart, HOLD_TTL_MS);
            if (rc != RSV_OK)
                die("stmts: %s", rsv_errmsg(ctx));
        }
        double us = (double)(now_us() - t) / reps;
        status_read(c, 1, &b);
        /* The second SHOW STATUS counts itself once. */
        double qn = (double)(status_delta(&a, &b, "Questions") - 1) / reps;
        printf("stmts design=libreserve %s cart_lines=%d statements_per_reserve=%.2f "
               "stmt_execute=%.2f text_queries=%.2f prepares=%.3f commits=%.2f "
               "rollbacks=%.3f handler_write=%.1f handler_delete=%.1f "
               "mean_us=%.0f\n",
               cfg_key(), lines, qn, (double)status_delta(&a, &b, "Com_stmt_execute") / reps,
               qn - (double)status_delta(&a, &b, "Com_stmt_execute") / reps,
               (double)status_delta(&a, &b, "Com_stmt_prepare") / reps,
               (double)status_delta(&a, &b, "Com_commit") / reps,
               (double)status_delta(&a, &b, "Com_rollback") / reps,
               (double)status_delta(&a, &b, "Handler_write") / reps,
               (double)status_delta(&a, &b, "Handler_delete") / reps, us);
    }
    fflush(stdout);
    rsv_cart_free(cart);
    rsv_close(ctx);
    mysql_close(c);
}

/* The first reserve of an item whose pool is empty (it refills the pool
 * inline) against the next reserves, one client, local socket. */
static void cold_probe(void)
{
    const int n = 20;
    MYSQL *c = connect_local();
    rsv_ctx *ctx = NULL;
    if (lib_open(&ctx, c) != RSV_OK)
        die("rsv_open: %s", rsv_errmsg(ctx));
    uint32_t cold[64], warm[64 * 5];
    int nw = 0;
    for (int i = 0; i < n; i++) {
        uint64_t item = COLD_BASE + 1 + (uint64_t)i;
        if (rsv_stock_set(ctx, SHOP, item, 1, BIG_STOCK) != RSV_OK)
            die("cold: %s", rsv_errmsg(ctx));
        for (int r = 0; r < 6; r++) {
            char tok[64];
            snprintf(tok, sizeof tok, "k%d.%d", i, r);
            uint64_t t = now_us();
            if (rsv_reserve_one(ctx, SHOP, tok, strlen(tok), item, 1, 1,
                                HOLD_TTL_MS) != RSV_OK)
                die("cold: %s", rsv_errmsg(ctx));
            uint32_t us = (uint32_t)(now_us() - t);
            if (r == 0)
                cold[i] = us;
            else
                warm[nw++] = us;
        }
    }
    qsort(cold, (size_t)n, sizeof cold[0], cmp_u32);
    qsort(warm, (size_t)nw, sizeof warm[0], cmp_u32);
    printf("# first-touch %s: %d items with stock %lld and an empty pool, "
           "one client, local socket: first reserve p50_us=%u max_us=%u; "
           "next reserves p50_us=%u max_us=%u\n",
           cfg_key(), n, BIG_STOCK, pct(cold, (size_t)n, 0.5), cold[n - 1],
           pct(warm, (size_t)nw, 0.5), warm[nw - 1]);
    fflush(stdout);
    rsv_close(ctx);
    mysql_close(c);
}

/* Round trip of SELECT 1 through a connection: checks the proxy. */
static void ping_probe(int rtt_idx)
{
    MYSQL *c = connect_rtt(rtt_idx, dbname);
    if (!c)
        die("cannot connect (rtt %d)", cfg.rtts.v[rtt_idx]);
    uint32_t v[200];
    for (int i = 0; i < 200; i++) {
        uint64_t t = now_us();
        q_exec(c, "SELECT 1");
        v[i] = (uint32_t)(now_us() - t);
    }
    qsort(v, 200, sizeof v[0], cmp_u32);
    printf("# network rtt_us=%d %s via=%s: SELECT 1 round trip p50_us=%u "
           "p99_us=%u\n", cfg.rtts.v[rtt_idx], cfg_key(),
           proxy_port[rtt_idx] ? "proxy(127.0.0.1)" : "unix-socket",
           pct(v, 200, 0.5), pct(v, 200, 0.99));
    mysql_close(c);
}

/* ------------------------------------------------------------------ */
/* reporting                                                          */
/* ------------------------------------------------------------------ */

#define MAXMEAS 4096
static meas *results[MAXMEAS];
static int nresults;

/* Every success of every design over the whole run (all measurements,
 * profiled re-runs too) and the claim holds made at setup: what its
 * tables must show at the end. */

static void tally_add(const meas *m)
{
    tally *t = &done[m->design];
    t->reserves += m->done_ops;
    t->rows += m->done_rows;
    t->units += m->done_units;
    t->claims += m->done_claims;
    t->in_doubt += m->in_doubt;
}

/* One design's rounds of one (workload, clients, RTT), summarised. */
typedef struct summary {
    int n;                     /* valid rounds */
    const meas *r[MAXROUNDS];  /* by round; NULL = no valid measurement */
    double ops, ops_min, ops_max;
    double p50, p99, p99_min, p99_max, p999;
    long long no_tx;           /* semi-sync: commits not acknowledged */
    double max_us, max_min, max_max; /* the slowest call (the stampede) */
    uint64_t codes[NCODES];    /* every answer of the rounds (the stampede) */
} summary;

static double median(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    if (n == 0)
        return 0;
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int summarize(int design, int workload, int clients, int rtt_us,
                     summary *s)
{
    memset(s, 0, sizeof *s);
    double ops[MAXROUNDS], p50[MAXROUNDS], p99[MAXROUNDS], p999[MAXROUNDS],
        mx[MAXROUNDS];
    for (int i = 0; i < nresults; i++) {
        const meas *m = results[i];
        if (m->design != design || m->workload != workload ||
            m->clients != clients || m->rtt_us != rtt_us || m->round < 1 ||
            m->round > MAXROUNDS)
            continue;
        if (m->semisync_no_tx > 0)
            s->no_tx += m->semisync_no_tx;
        if (!m->valid)
            continue;
        s->r[m->round - 1] = m;
        ops[s->n] = m->ops_per_s;
        p50[s->n] = m->p50;
        p99[s->n] = m->p99;
        p999[s->n] = m->p999;
        mx[s->n] = m->max_us;
        for (int c = 0; c < NCODES; c++)
            s->codes[c] += m->codes[c];
        if (s->n == 0 || m->max_us < s->max_min)
            s->max_min = m->max_us;
        if (s->n == 0 || m->max_us > s->max_max)
            s->max_max = m->max_us;
        if (s->n == 0 || m->ops_per_s < s->ops_min)
            s->ops_min = m->ops_per_s;
        if (s->n == 0 || m->ops_per_s > s->ops_max)
            s->ops_max = m->ops_per_s;
        if (s->n == 0 || m->p99 < s->p99_min)
            s->p99_min = m->p99;
        if (s->n == 0 || m->p99 > s->p99_max)
            s->p99_max = m->p99;
        s->n++;
    }
    s->ops = median(ops, s->n);
    s->p50 = median(p50, s->n);
    s->p99 = median(p99, s->n);
    s->p999 = median(p999, s->n);
    s->max_us = median(mx, s->n);
    return s->n;
}

/* The medians of one (workload, clients, RTT), one line per design. */
static void print_cell(int workload, int clients, int rtt_us)
{
    for (int d = 0; d < D_N; d++) {
        summary s;
        if (!cfg.designs[d] || sits_out(workload, d))
            continue;
        if (!summarize(d, workload, clients, rtt_us, &s)) {
            printf("# ERROR design=%s workload=%s clients=%d rtt_us=%d %s: "
                   "no round measured\n", design_name[d], wl_name[workload],
                   clients, rtt_us, cfg_key_for(workload));
            continue;
        }
        printf("bench design=%s workload=%s clients=%d rtt_us=%d %s "
               "ops_per_s=%.0f p50_us=%.0f p99_us=%.0f p999_us=%.0f "
               "rounds=%d ops_per_s_range=%.0f-%.0f p99_us_range=%.0f-%.0f",
               design_name[d], wl_name[workload], clients, rtt_us,
               cfg_key_for(workload),
               s.ops, s.p50, s.p99, s.p999, s.n, s.ops_min, s.ops_max,
               s.p99_min, s.p99_max);
        if (cfg.semisync)
            printf(" semisync_no_tx=%lld", s.no_tx);
        if (wl_is_stampede(workload)) {
            printf(" max_us=%.0f max_us_range=%.0f-%.0f ", s.max_us,
                   s.max_min, s.max_max);
            print_codes(s.codes); /* (summed over the rounds) */
        }
        printf("\n");
    }
    fflush(stdout);
}

/* The baselines a ratio is taken against, in the order printed. */
static const int ratio_base[] = {D_HOT1, D_FLOOR1, D_HOT, D_FLOOR, D_BATCH,
                                 D_BATCHER};
#define NRATIO (sizeof ratio_base / sizeof ratio_base[0])

static void print_ratios(void)
{
    printf("# ratios: throughput libreserve/<design> and p99 "
           "libreserve/<design> (lower is better), medians over the rounds; "
           "the '# ratio_rounds' line after each gives the range of the "
           "per-round ratios (each round's libreserve over the same "
           "round's baseline)\n");
    int seen[W_N][MAXLIST][MAXLIST];
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < nresults; i++) {
        const meas *l = results[i];
        if (l->design != D_LIB || l->round < 1)
            continue;
        int ci = -1, ri = l->rtt_idx;
        for (int k = 0; k < cfg.clients[l->workload].n; k++)
            if (cfg.clients[l->workload].v[k] == l->clients)
                ci = k;
        if (ci < 0 || seen[l->workload][ci][ri])
            continue;
        seen[l->workload][ci][ri] = 1;
        summary ls;
        if (!summarize(D_LIB, l->workload, l->clients, l->rtt_us, &ls))
            continue;
        char rounds[512];
        size_t rn = 0;
        rounds[0] = '\0';
        printf("ratio workload=%s clients=%d rtt_us=%d %s",
               wl_name[l->workload], l->clients, l->rtt_us,
               cfg_key_for(l->workload));
        for (size_t b = 0; b < NRATIO; b++) {
            summary bs;
            int d = ratio_base[b];
            if (!cfg.designs[d] ||
                !summarize(d, l->workload, l->clients, l->rtt_us, &bs) ||
                bs.ops <= 0)
                continue;
            printf(" libreserve/%s=%.2f", design_name[d], ls.ops / bs.ops);
            double lo = 0, hi = 0;
            int n = 0;
            for (int r = 0; r < MAXROUNDS; r++)
                if (ls.r[r] && bs.r[r] && bs.r[r]->ops_per_s > 0) {
                    double x = ls.r[r]->ops_per_s / bs.r[r]->ops_per_s;
                    lo = n == 0 || x < lo ? x : lo;
                    hi = n == 0 || x > hi ? x : hi;
                    n++;
                }
            if (n && rn < sizeof rounds)
                rn += (size_t)snprintf(rounds + rn, sizeof rounds - rn,
                                       " libreserve/%s=%.2f-%.2f",
                                       design_name[d], lo, hi);
        }
        for (size_t b = 0; b < NRATIO; b++) {
            summary bs;
            int d = ratio_base[b];
            if (cfg.designs[d] &&
                summarize(d, l->workload, l->clients, l->rtt_us, &bs) &&
                bs.p99 > 0)
                printf(" p99_libreserve/%s=%.2f", design_name[d],
                       ls.p99 / bs.p99);
        }
        printf("\n");
        if (rounds[0])
            printf("# ratio_rounds workload=%s clients=%d rtt_us=%d %s%s\n",
                   wl_name[l->workload], l->clients, l->rtt_us,
                   cfg_key_for(l->workload), rounds);
    }

    /* The speed targets, as they were set: against the statement forms
     * (hotrow, 3 round trips; floor, 2).  Printed, never enforced. */
    summary l, h, f;
    int hl = summarize(D_LIB, W_FLASH, 64, 500, &l);
    int hh = cfg.designs[D_HOT] && summarize(D_HOT, W_FLASH, 64, 500, &h);
    int hf = cfg.designs[D_FLOOR] && summarize(D_FLOOR, W_FLASH, 64, 500, &f);
    if (hl && hh && h.ops > 0)
        printf("target flash1 clients=64 rtt_us=500 %s libreserve/hotrow>=6: "
               "%.2f %s\n", cfg_key(), l.ops / h.ops,
               l.ops >= 6 * h.ops ? "met" : "MISSED");
    if (hl && hf && f.ops > 0)
        printf("target flash1 clients=64 rtt_us=500 %s libreserve/floor>=0.5: "
               "%.2f %s\n", cfg_key(), l.ops / f.ops,
               l.ops >= 0.5 * f.ops ? "met" : "MISSED");
    if (hl && hf && f.p99 > 0)
        printf("target flash1 clients=64 rtt_us=500 %s p99 libreserve<=2x "
               "floor: %.0f us vs %.0f us (%.2fx) %s\n", cfg_key(), l.p99,
               f.p99, l.p99 / f.p99, l.p99 <= 2 * f.p99 ? "met" : "MISSED");
    /* The stampede's: no RSV_EBUSY while stock is there, p99 <= 1 s (the
     * median over the rounds), on a fresh server and on a warm one. */
    for (int wl = W_STAMPEDE; wl <= W_STAMPEDE_FRESH; wl++)
        for (int ci = 0; ci < cfg.clients[wl].n; ci++)
            for (int r = 0; r < cfg.rtts.n; r++) {
                summary x;
                if (!summarize(D_LIB, wl, cfg.clients[wl].v[ci],
                               cfg.rtts.v[r], &x))
                    continue;
                uint64_t busy = x.codes[code_slot(RSV_EBUSY)];
                printf("target stampede clients=%d rtt_us=%d %s no RSV_EBUSY "
                       "and p99<=1s: ebusy=%llu p99_us=%.0f (rounds %.0f-%.0f) "
                       "%s\n", cfg.clients[wl].v[ci], cfg.rtts.v[r],
                       cfg_key_for(wl), (unsigned long long)busy, x.p99,
                       x.p99_min, x.p99_max,
                       busy == 0 && x.p99 <= 1e6 ? "met" : "MISSED");
            }
    summary lc, hc;
    if (summarize(D_LIB, W_CLAIM, 64, 500, &lc) && cfg.designs[D_HOT] &&
        summarize(D_HOT, W_CLAIM, 64, 500, &hc) && hc.ops > 0)
        printf("target claim1 clients=64 rtt_us=500 %s libreserve/hotrow>=3: "
               "%.2f %s\n", cfg_key(), lc.ops / hc.ops,
               lc.ops >= 3 * hc.ops ? "met" : "MISSED");
    for (int w = 0; w < W_N; w++)
        for (int ci = 0; ci < cfg.clients[w].n; ci++) {
            summary x, y;
            int c = cfg.clients[w].v[ci];
            if (summarize(D_LIB, w, c, 0, &x) && cfg.designs[D_HOT] &&
                summarize(D_HOT, w, c, 0, &y) && y.ops > 0)
                printf("target %s clients=%d rtt_us=0 %s libreserve not "
                       "slower than hotrow: %.2f %s\n", wl_name[w], c,
                       cfg_key(), x.ops / y.ops,
                       x.ops >= y.ops ? "met" : "MISSED");
        }
    fflush(stdout);
}

/* ---- the check of every design's tables against its successes ---- */

static long long q_i64f(MYSQL *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static long long q_i64f(MYSQL *c, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    long long v = q_i64(c, buf);
    if (v < 0)
        die("%.200s: %s", buf, mysql_error(c));
    return v;
}

/* actual == expected, or within the operations whose outcome the client
 * could not know (a connection lost before the answer). */
static int agrees(long long actual, long long expected, uint64_t in_doubt)
{
    long long diff = actual > expected ? actual - expected : expected - actual;
    return diff <= (long long)in_doubt;
}

/* Counts, for each design, the rows its reserves left, the units they
 * hold, the claims done, and for the hot rows the ledger rows whose
 * numbers do not add up (stock = available + claimed + units held, with
 * available never below 0: nothing oversold), and holds on the sold-out
 * item.  libreserve's ledger is checked by rsv_audit() (units issued =
 * pool + held + settled; pool + held <= stock on hand).  Returns the
 * number of designs whose tables disagree. */
static int check_tables(MYSQL *c)
{
    int failed = 0;
    printf("# check: every success the clients counted, against the tables "
           "(hold rows and units of each design's reserves, claims, the "
           "hot rows' ledgers, holds on the sold-out item)\n");
    for (int d = 0; d < D_N; d++) {
        if (!cfg.designs[d])
            continue;
        const tally *t = &done[d];
        const char *holds = is_lib(d) ? "rsv_holds" : hold_table(d);
        long long rows = q_i64f(c, "SELECT COUNT(*) FROM %s WHERE shop_id = %d "
                                   "AND checkout_token LIKE '%c%%'", holds,
                                SHOP, design_tag[d]);
        long long units = q_i64f(c, "SELECT COALESCE(SUM(quantity), 0) FROM "
                                    "%s WHERE shop_id = %d AND checkout_token "
                                    "LIKE '%c%%'", holds, SHOP,
                                 design_tag[d]);
        long long left = q_i64f(c, "SELECT COUNT(*) FROM %s WHERE shop_id = "
                                   "%d AND checkout_token LIKE 'c%c%%'", holds,
                                SHOP, design_tag[d]);
        long long sold = q_i64f(c, "SELECT COUNT(*) FROM %s WHERE shop_id = "
                                   "%d AND item_id = %d", holds,
                                SHOP, SOLDOUT_ITEM);
        long long claims = t->claim_holds - left, extra = 0, bad = 0;
        int ok = agrees(rows, (long long)t->rows, t->in_doubt) &&
                 agrees(units, (long long)t->units, t->in_doubt * 5) &&
                 agrees(claims, (long long)t->claims, t->in_doubt) &&
                 sold == 0;
        char more[256] = "";
        if (is_lib(d)) {
            /* a reserve of a new checkout made one checkout row; a claim
             * marked it claimed */
            long long co = q_i64f(c, "SELECT COUNT(*) FROM "
                                     "rsv_checkouts WHERE shop_id = "
                                     "%d AND checkout_token LIKE '%c%%' AND "
                                     "status = 1", SHOP, design_tag[d]);
            long long cl = q_i64f(c, "SELECT COUNT(*) FROM "
                                     "rsv_checkouts WHERE shop_id = "
                                     "%d AND checkout_token LIKE 'c%c%%' AND "
                                     "status = 2", SHOP, design_tag[d]);
            rsv_ctx *ctx = NULL;
            int64_t v = -1;
            uint64_t a0 = now_us();
            int rc = lib_open(&ctx, c);
            if (rc == RSV_OK)
                rc = rsv_audit(ctx, SHOP, 0, NULL, NULL, &v);
            if (rc != RSV_OK)
                fprintf(stderr, "bench: rsv_audit: %s\n",
                        ctx ? rsv_errmsg(ctx) : rsv_code_name(rc));
            rsv_close(ctx);
            uint64_t audit_ms = (now_us() - a0) / 1000u;
            ok = ok && agrees(co, (long long)t->reserves, t->in_doubt) &&
                 agrees(cl, (long long)t->claims, t->in_doubt) &&
                 rc == RSV_OK && v == 0;
            snprintf(more, sizeof more, " checkouts_held=%lld/%llu "
                     "checkouts_claimed=%lld/%llu audit=%s audit_violations=%lld "
                     "audit_ms=%llu",
                     co, (unsigned long long)t->reserves, cl,
                     (unsigned long long)t->claims,
                     rsv_code_name(rc) ? rsv_code_name(rc) : "?",
                     (long long)v, (unsigned long long)audit_ms);
        } else if (is_hot(d)) {
            const char *lv = level_table(d);
            bad = q_i64f(c, "SELECT COUNT(*) FROM %s l LEFT JOIN (SELECT "
                            "shop_id, item_id, location_id, "
                            "SUM(quantity) AS q FROM %s GROUP BY shop_id, "
                            "item_id, location_id) h USING "
                            "(shop_id, item_id, location_id) "
                            "WHERE l.stock <> l.available + l.claimed + "
                            "COALESCE(h.q, 0) OR l.available < 0", lv, holds);
            extra = q_i64f(c, "SELECT COUNT(*) FROM %s h LEFT JOIN %s l USING "
                              "(shop_id, item_id, "
                              "location_id) WHERE l.stock IS NULL",
                           holds, lv);
            long long claimed = q_i64f(c, "SELECT COALESCE(SUM(claimed), 0) "
                                          "FROM %s", lv);
            ok = ok && bad == 0 && extra == 0 &&
                 agrees(claimed, (long long)t->claims, t->in_doubt);
            snprintf(more, sizeof more, " ledger_claimed=%lld "
                     "ledger_rows_not_adding_up=%lld holds_without_ledger=%lld",
                     claimed, bad, extra);
        } else {
            snprintf(more, sizeof more, " (no stock guard: the floor "
                     "cannot oversell or refuse)");
        }
        printf("check design=%s %s reserves=%llu hold_rows=%lld/%llu "
               "units=%lld/%llu claims=%lld/%llu sold_out_item_holds=%lld "
               "in_doubt=%llu%s: %s\n",
               design_name[d], cfg_key(), (unsigned long long)t->reserves,
               rows, (unsigned long long)t->rows, units,
               (unsigned long long)t->units, claims,
               (unsigned long long)t->claims, sold,
               (unsigned long long)t->in_doubt, more, ok ? "ok" : "FAILED");
        failed += !ok;
    }
    fflush(stdout);
    return failed;
}

/* ------------------------------------------------------------------ */
/* main                                                               */
/* ------------------------------------------------------------------ */

static void usage(void)
{
    fprintf(stderr,
            "usage: bench [--quick] [--proxy PATH] [--schema FILE] [--outdir DIR]\n"
            "             [--warmup-ms N] [--duration-ms N] [--rounds N]\n"
            "             [--rtt-us LIST] [--clients LIST] [--workloads LIST]\n"
            "             [--designs LIST] [--no-stmts] [--no-cold] [--no-profile]\n"
            "             [--spread-stock N] [--warm-spread] [--claim-holds N]\n"
            "             [--statements-only] [--proxy-port P] [--processes]\n"
            "             [--stampede] [--stampede-reserves N] [--stampede-cap N]\n"
            "             [--stampede-profile]\n"
            "LIST is comma-separated; workloads: flash1,flash1q2,flash1q5,\n"
            "spread10k,cart5x3,claim1,soldout1,soldcart5,hotcart5,stampede;\n"
            "designs: libreserve,hotrow-1rt,floor-1rt,hotrow,floor,\n"
            "libreserve-batch,libreserve-batcher.\n"
            "--quick: flash1, claim1, spread10k, cart5x3 and flash1q5, 64\n"
            "clients, libreserve, libreserve-batcher, hotrow-1rt and\n"
            "floor-1rt,\n"
            "0.5 ms, no probes.  --stampede: the stampede alone (300 buyers,\n"
            "4 reserves each, pool_cap 50), libreserve and hotrow-1rt, 0.5 ms;\n"
            "its fresh-server measurements need RSV_BENCH_RESTART, a command\n"
            "that replaces the server by a freshly started one.  --proxy-port:\n"
            "the proxies listen on the first free port from P (of 100).\n"
            "Needs RSV_TEST_SOCKET (tests/bench/run-bench.sh starts the\n"
            "servers: make bench / bench-quick / bench-stampede).\n");
    exit(2);
}

static int name_index(const char *s, size_t len, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strlen(names[i]) == len && strncmp(s, names[i], len) == 0)
            return i;
    return -1;
}

static void parse_names(const char *s, const char *const *names, int n, int *sel)
{
    for (int i = 0; i < n; i++)
        sel[i] = 0;
    while (*s) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        int i = name_index(s, len, names, n);
        if (i < 0)
            usage();
        else
            sel[i] = 1;
        s += len + (e ? 1 : 0);
    }
}

/* The server's configuration, read once: it labels every line. */
static void read_server_config(MYSQL *mon)
{
    char v[64];
    q_str(mon, "SELECT @@log_bin", v, sizeof v);
    cfg.binlog = strcmp(v, "1") == 0;
    /* (a server without semi-sync has no such variable: the query fails
     * and leaves v empty) */
    q_str(mon, "SELECT @@rpl_semi_sync_master_enabled", v, sizeof v);
    cfg.semisync = strcmp(v, "1") == 0;
}

static void print_header(MYSQL *mon)
{
    char ver[128], flush[16], sync[16], fmt[32], iso[32], bp[32], lfs[32],
        dw[16], wp[32], to[32], cl[32];
    q_str(mon, "SELECT VERSION()", ver, sizeof ver);
    q_str(mon, "SELECT @@innodb_flush_log_at_trx_commit", flush, sizeof flush);
    q_str(mon, "SELECT @@sync_binlog", sync, sizeof sync);
    q_str(mon, "SELECT @@binlog_format", fmt, sizeof fmt);
    q_str(mon, "SELECT @@global.tx_isolation", iso, sizeof iso);
    q_str(mon, "SELECT @@innodb_buffer_pool_size", bp, sizeof bp);
    q_str(mon, "SELECT @@innodb_log_file_size", lfs, sizeof lfs);
    q_str(mon, "SELECT @@innodb_doublewrite", dw, sizeof dw);
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    printf("# libreserve bench: library %s, %s, %ld cpu(s) online, mode=%s, "
           "%s\n", rsv_version(), date, sysconf(_SC_NPROCESSORS_ONLN),
           cfg.quick ? "quick" : cfg.workloads[W_FLASH] ? "full" : "stampede",
           cfg_key());
    printf("# server %s: version=%s log_bin=%s binlog_format=%s "
           "sync_binlog=%s innodb_flush_log_at_trx_commit=%s "
           "innodb_doublewrite=%s innodb_buffer_pool_size=%s "
           "innodb_log_file_size=%s isolation=READ-COMMITTED (set by every "
           "design; server default %s)\n",
           cfg_key(), ver, cfg.binlog ? "ON" : "OFF", fmt, sync, flush, dw, bp,
           lfs, iso);
    if (cfg.binlog && (strcmp(sync, "1") != 0 || strcmp(flush, "1") != 0))
        printf("# warning %s: the binary log is on but not synced at every "
               "commit (sync_binlog=%s, innodb_flush_log_at_trx_commit=%s): "
               "not the production configuration\n", cfg_key(), sync, flush);
    if (cfg.semisync) {
        q_str(mon, "SELECT @@rpl_semi_sync_master_wait_point", wp, sizeof wp);
        q_str(mon, "SELECT @@rpl_semi_sync_master_timeout", to, sizeof to);
        q_str(mon, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                   "WHERE VARIABLE_NAME = 'RPL_SEMI_SYNC_MASTER_CLIENTS'",
              cl, sizeof cl);
        printf("# semisync %s: every commit waits for a replica's "
               "acknowledgement: rpl_semi_sync_master_wait_point=%s "
               "rpl_semi_sync_master_timeout=%s ms, replicas connected=%s; "
               "Rpl_semi_sync_master_no_tx (commits that did not wait) must "
               "stay 0\n", cfg_key(), wp, to, cl);
        if (strcmp(cl, "0") == 0 || !cl[0])
            printf("# warning %s: no semi-synchronous replica is connected\n",
                   cfg_key());
    }
    printf("# %s warmup_ms=%d duration_ms=%d per measurement, %d round(s): "
           "every design once per round, the order rotated each round; each "
           "client thread has its own connection; hold ttl %lld s; stock "
           "%lld (flash, cart, claim items), %ld per spread item; pool_cap "
           "default (1000); pools warmed with rsv_replenish before the run: "
           "flash, cart and claim items%s\n",
           cfg_key(), cfg.warmup_ms, cfg.duration_ms, cfg.rounds,
           HOLD_TTL_MS / 1000, BIG_STOCK, cfg.spread_stock,
           cfg.warm_spread ? ", spread items (--warm-spread)"
                           : " (not the spread items: see --warm-spread)");
    printf("# designs %s (round trips of one reserve):", cfg_key());
    for (int d = 0; d < D_N; d++)
        printf(" %s = %s;", design_name[d], design_trips[d]);
    printf("\n");
    printf("# baselines %s: hotrow-1rt reserve = CALL of a procedure (INSERT "
           "hold, UPDATE ledger SET available = available - q WHERE ... AND "
           "available >= q, ROW_COUNT() checked, COMMIT), claim = CALL "
           "(DELETE hold, UPDATE ledger claimed, COMMIT), carts = one CALL; "
           "floor-1rt = one autocommit INSERT (claim: one DELETE); hotrow = "
           "UPDATE ledger + INSERT hold + COMMIT (claim: UPDATE ledger + "
           "DELETE hold + COMMIT); floor = INSERT hold + COMMIT (claim: "
           "DELETE hold + COMMIT); statement forms: prepared statements, "
           "autocommit off\n", cfg_key());
    fflush(stdout);
}

static void add_result(meas *m)
{
    if (nresults == MAXMEAS)
        die("too many measurements");
    results[nresults++] = m;
    tally_add(m);
}

static void read_server_pid(MYSQL *mon)
{
    char pidfile[600], pidbuf[32];
    server_pid = 0;
    q_str(mon, "SELECT @@pid_file", pidfile, sizeof pidfile);
    FILE *f = pidfile[0] ? fopen(pidfile, "r") : NULL;
    if (f && fgets(pidbuf, sizeof pidbuf, f))
        server_pid = (pid_t)atoi(pidbuf);
    if (f)
        fclose(f);
}

/* ---- the stampede ---- */

/* The server replaced by a freshly started one of the same configuration
 * at the same socket (cfg.restart_cmd does it), the database made again;
 * returns the new monitor connection.  The proxies connect to the socket
 * per connection, so they carry on. */
static MYSQL *server_restart(MYSQL *mon)
{
    mysql_close(mon);
    progress("replacing the server by a freshly started one");
    int rc = system(cfg.restart_cmd);
    if (rc != 0)
        die("RSV_BENCH_RESTART (%s) failed (%d)", cfg.restart_cmd, rc);
    dbname[0] = '\0';
    mon = connect_local();
    read_server_pid(mon);
    setup_database(mon);
    setup_hot_ledger(mon, level_table(D_HOT));
    setup_hot_ledger(mon, level_table(D_HOT1));
    return mon;
}

/* A stampede item of its own for design d: stock for twice the demand, in
 * the hot rows' ledger rows, or in libreserve's ledger with its pool
 * filled to the stampede's cap (as rsv_replenish does before a sale). */
static void stampede_item(MYSQL *mon, int d, uint64_t item, int64_t stock)
{
    if (is_hot(d)) {
        for (int t = 0; t < 2; t++)
            q_execf(mon, "INSERT INTO %s (shop_id, item_id, location_id, "
                         "stock, available) VALUES (%d, %llu, 1, %lld, %lld)",
                    level_table(t ? D_HOT1 : D_HOT), SHOP,
                    (unsigned long long)item, (long long)stock,
                    (long long)stock);
        return;
    }
    rsv_ctx *ctx = NULL;
    int rc = lib_open_cap(&ctx, mon, cfg.stampede_cap);
    if (rc == RSV_OK)
        rc = rsv_stock_set(ctx, SHOP, item, 1, stock);
    if (rc == RSV_OK)
        rc = rsv_replenish(ctx, SHOP, item, 1, NULL);
    if (rc != RSV_OK)
        die("stampede item: %s", rsv_errmsg(ctx));
    rsv_close(ctx);
}

static void stampede_measure(MYSQL *mon, int d, int wl, int rtt_idx,
                             int clients, int round)
{
    meas *m = xcalloc(1, sizeof *m);
    m->design = d;
    m->workload = wl;
    m->clients = clients;
    m->rtt_idx = rtt_idx;
    m->rtt_us = cfg.rtts.v[rtt_idx];
    m->round = round;
    m->item = STAMPEDE_BASE + (uint64_t)meas_counter + 1; /* (its id) */
    stampede_item(mon, d, m->item,
                  2 * (int64_t)clients * cfg.stampede_reserves);
    wait_purge(mon, 5000);
    progress("run round %d/%d %s stampede (%s) clients=%d rtt_us=%d", round,
             cfg.rounds, design_name[d],
             wl == W_STAMPEDE_FRESH ? "fresh server" : "warm server",
             clients, m->rtt_us);
    run_measurement(m, mon, cfg.stampede_profile);
    add_result(m);
}

/* Per (RTT, clients) and round, each design in turn (one later each
 * round): on a server started just before it (server=fresh), then again
 * on that server (server=warm), each on an item of its own.  The tables
 * of a server are checked before it is replaced.  Returns the number of
 * failed checks. */
static int stampede_run(MYSQL **monp)
{
    int sel[D_N], nsel = 0, failed = 0;
    for (int d = 0; d < D_N; d++)
        if (cfg.designs[d] && !sits_out(W_STAMPEDE, d))
            sel[nsel++] = d;
    char mc[32], tc[32], bl[32], th[64], ps[32];
    q_str(*monp, "SELECT @@max_connections", mc, sizeof mc);
    q_str(*monp, "SELECT @@thread_cache_size", tc, sizeof tc);
    q_str(*monp, "SELECT @@back_log", bl, sizeof bl);
    q_str(*monp, "SELECT @@thread_handling", th, sizeof th);
    q_str(*monp, "SELECT @@max_prepared_stmt_count", ps, sizeof ps);
    printf("# stampede %s: each buyer its own thread and connection, all "
           "released at once on one item of their own per measurement, "
           "each making %d reserves of 1 unit one after the other; stock "
           "twice the demand; libreserve's pool_cap %d (its pool filled "
           "before the release, refill_low_water its default), "
           "call_timeout_ms default; every call's latency counts, failed "
           "ones too; ops_per_s = successes / (last call's end - release); "
           "server=fresh: a server started just before (RSV_BENCH_RESTART), "
           "server=warm: the same server right after; server max_connections"
           "=%s thread_cache_size=%s back_log=%s thread_handling=%s "
           "max_prepared_stmt_count=%s\n", cfg_key(), cfg.stampede_reserves,
           cfg.stampede_cap, mc, tc, bl, th, ps);
    if (!cfg.restart_cmd)
        printf("# stampede %s: no server=fresh measurements: no command "
               "that starts a fresh server was given (RSV_BENCH_RESTART; "
               "tests/bench/run-bench.sh gives one)\n", cfg_key());
    for (int r = 0; r < cfg.rtts.n; r++)
        for (int ci = 0; ci < cfg.clients[W_STAMPEDE].n; ci++) {
            int clients = cfg.clients[W_STAMPEDE].v[ci];
            for (int round = 1; round <= cfg.rounds; round++)
                for (int k = 0; k < nsel; k++) {
                    int d = sel[(k + round - 1) % nsel];
                    if (cfg.restart_cmd) {
                        failed += check_tables(*monp);
                        memset(done, 0, sizeof done);
                        *monp = server_restart(*monp);
                        stampede_measure(*monp, d, W_STAMPEDE_FRESH, r,
                                         clients, round);
                    }
                    stampede_measure(*monp, d, W_STAMPEDE, r, clients,
                                     round);
                }
            if (cfg.restart_cmd)
                print_cell(W_STAMPEDE_FRESH, clients, cfg.rtts.v[r]);
            print_cell(W_STAMPEDE, clients, cfg.rtts.v[r]);
        }
    return failed;
}

int main(int argc, char **argv)
{
    cfg.sock = getenv("RSV_TEST_SOCKET");
    cfg.user = getenv("RSV_TEST_USER") ? getenv("RSV_TEST_USER") : "root";
    cfg.pass = getenv("RSV_TEST_PASSWORD");
    cfg.proxy_path = "build/bench/proxy";
    cfg.schema_path = "sql/schema.sql";
    cfg.outdir = "build/bench";
    cfg.warmup_ms = 1000;
    cfg.duration_ms = 3000;
    cfg.rounds = 3;
    parse_list("0,500", &cfg.rtts);
    parse_list("1,16,64,128", &cfg.clients[W_FLASH]);
    parse_list("64", &cfg.clients[W_FLASHQ2]);
    parse_list("64", &cfg.clients[W_FLASHQ5]);
    parse_list("1,16,64,128", &cfg.clients[W_SPREAD]);
    parse_list("16,64,128", &cfg.clients[W_CART]);
    parse_list("64", &cfg.clients[W_CLAIM]);
    parse_list("64", &cfg.clients[W_SOLDOUT]);
    parse_list("64", &cfg.clients[W_SOLDCART]);
    parse_list("16,64", &cfg.clients[W_HOTCART]);
    parse_list("300", &cfg.clients[W_STAMPEDE]);
    cfg.stampede_reserves = 4;
    cfg.stampede_cap = 50;
    cfg.restart_cmd = getenv("RSV_BENCH_RESTART");
    if (cfg.restart_cmd && !*cfg.restart_cmd)
        cfg.restart_cmd = NULL;
    /* (the stampede runs only when asked: --stampede or --workloads) */
    for (int i = 0; i < W_N; i++)
        cfg.workloads[i] = !wl_is_stampede(i);
    for (int i = 0; i < D_N; i++)
        cfg.designs[i] = 1;
    cfg.stmts = cfg.cold = cfg.profile = 1;
    cfg.spread_stock = 100;
    /* Claim holds per measurement: more than the fastest run of each
     * design claims in its warm-up, window and tail. */
    cfg.claim_holds[D_LIB] = 50000;
    cfg.claim_holds[D_HOT1] = 100000;
    cfg.claim_holds[D_FLOOR1] = 200000;
    cfg.claim_holds[D_HOT] = 60000;
    cfg.claim_holds[D_FLOOR] = 200000;
    cfg.claim_holds[D_BATCH] = 100000;
    cfg.claim_holds[D_BATCHER] = 100000;
    cfg.setup_threads = 8;
    /* --quick sets defaults the other options may still change */
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--quick") == 0) {
            /* the headline: the workloads of a normal day and of a sale,
             * against the strongest simple alternatives, at 64 buyers */
            cfg.quick = 1;
            for (int w = 0; w < W_N; w++) {
                cfg.workloads[w] = w == W_FLASH || w == W_CLAIM ||
                                   w == W_SPREAD || w == W_CART ||
                                   w == W_FLASHQ5;
                parse_list("64", &cfg.clients[w]);
            }
            for (int d = 0; d < D_N; d++)
                cfg.designs[d] = d == D_LIB || d == D_BATCHER ||
                                 d == D_HOT1 || d == D_FLOOR1;
            parse_list("500", &cfg.rtts);
            cfg.stmts = cfg.cold = cfg.profile = 0;
        } else if (strcmp(argv[i], "--stampede") == 0) {
            /* the stampede alone: libreserve and the one-trip hot row,
             * 0.5 ms */
            for (int w = 0; w < W_N; w++)
                cfg.workloads[w] = wl_is_stampede(w);
            for (int d = 0; d < D_N; d++)
                cfg.designs[d] = d == D_LIB || d == D_HOT1;
            parse_list("500", &cfg.rtts);
            cfg.stmts = cfg.cold = cfg.profile = 0;
        }
    intlist only_clients = {{0}, 0};
    long claim_override = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (strcmp(a, name) == 0 && v && (i++, 1))
        if (strcmp(a, "--quick") == 0 || strcmp(a, "--stampede") == 0) {
            /* (applied above) */
        } else if (ARG("--proxy")) {
            cfg.proxy_path = v;
        } else if (ARG("--schema")) {
            cfg.schema_path = v;
        } else if (ARG("--outdir")) {
            cfg.outdir = v;
        } else if (ARG("--warmup-ms")) {
            cfg.warmup_ms = atoi(v);
        } else if (ARG("--duration-ms")) {
            cfg.duration_ms = atoi(v);
        } else if (ARG("--rounds")) {
            cfg.rounds = atoi(v);
        } else if (ARG("--rtt-us")) {
            if (parse_list(v, &cfg.rtts))
                usage();
        } else if (ARG("--clients")) {
            if (parse_list(v, &only_clients))
                usage();
        } else if (ARG("--workloads")) {
            parse_names(v, wl_name, W_N, cfg.workloads);
        } else if (ARG("--designs")) {
            parse_names(v, design_name, D_N, cfg.designs);
        } else if (strcmp(a, "--warm-spread") == 0) {
            cfg.warm_spread = 1;
        } else if (ARG("--spread-stock")) {
            cfg.spread_stock = atol(v);
        } else if (ARG("--claim-holds")) {
            claim_override = atol(v);
        } else if (strcmp(a, "--processes") == 0) {
            cfg.processes = 1;
        } else if (strcmp(a, "--no-stmts") == 0) {
            cfg.stmts = 0;
        } else if (strcmp(a, "--no-cold") == 0) {
            cfg.cold = 0;
        } else if (strcmp(a, "--no-profile") == 0) {
            cfg.profile = 0;
        } else if (strcmp(a, "--statements-only") == 0) {
            cfg.lib_flags |= TEST_OPT_STATEMENTS_ONLY;
        } else if (ARG("--stampede-reserves")) {
            cfg.stampede_reserves = atoi(v);
        } else if (ARG("--stampede-cap")) {
            cfg.stampede_cap = atoi(v);
        } else if (strcmp(a, "--stampede-profile") == 0) {
            cfg.stampede_profile = 1;
        } else if (ARG("--proxy-port")) {
            cfg.proxy_port = atoi(v);
        } else {
            usage();
        }
#undef ARG
    }
    if (only_clients.n)
        for (int i = 0; i < W_N; i++)
            cfg.clients[i] = only_clients;
    cfg.workloads[W_STAMPEDE_FRESH] = cfg.workloads[W_STAMPEDE];
    cfg.clients[W_STAMPEDE_FRESH] = cfg.clients[W_STAMPEDE];
    if (claim_override > 0)
        for (int d = 0; d < D_N; d++)
            cfg.claim_holds[d] = claim_override;
    /* a crowd of processes has no batch or batcher to share */
    if (cfg.processes)
        cfg.designs[D_BATCH] = cfg.designs[D_BATCHER] = 0;
    if (!cfg.sock)
        usage();
    if (cfg.warmup_ms < 0 || cfg.duration_ms < 100 || cfg.spread_stock < 1 ||
        cfg.rounds < 1 || cfg.rounds > MAXROUNDS ||
        cfg.stampede_reserves < 1 || cfg.stampede_cap < 1 ||
        cfg.stampede_cap > 10000 || cfg.proxy_port < 0 ||
        cfg.proxy_port > 65000)
        usage();
    signal(SIGPIPE, SIG_IGN);
    if (mysql_library_init(0, NULL, NULL))
        die("mysql_library_init failed");

    MYSQL *mon = connect_local();
    read_server_config(mon);
    setup_database(mon);
    read_server_pid(mon);
    print_header(mon);

    /* ---- proxies ---- */
    atexit(proxies_stop);
    for (int r = 0; r < cfg.rtts.n; r++) {
        if (cfg.rtts.v[r] == 0)
            continue;
        proxy_port[r] = proxy_start(cfg.rtts.v[r], &proxies[r]);
        progress("proxy for rtt %d us listening on 127.0.0.1:%d", cfg.rtts.v[r],
                 proxy_port[r]);
    }
    for (int r = 0; r < cfg.rtts.n; r++)
        ping_probe(r);

    /* ---- data ---- */
    uint64_t tsetup = now_us();
    setup_hot_ledger(mon, level_table(D_HOT));
    setup_hot_ledger(mon, level_table(D_HOT1));
    int windowed = 0; /* a workload besides the stampede */
    for (int wl = 0; wl < W_N; wl++)
        windowed |= cfg.workloads[wl] && !wl_is_stampede(wl);
    if (windowed)
        lib_keys("flash item", 0, 1, 1, BIG_STOCK, 1);
    if (cfg.workloads[W_FLASHQ2])
        lib_keys("flash1q2 item", FLASHQ2_ITEM - 1, 1, 1, BIG_STOCK, 1);
    if (cfg.workloads[W_FLASHQ5])
        lib_keys("flash1q5 item", FLASHQ5_ITEM - 1, 1, 1, BIG_STOCK, 1);
    if (cfg.workloads[W_SPREAD])
        /* Not warmed unless asked: rsv_replenish(3) is for the items of a
         * sale, before it opens; a catalog's ordinary items sell from
         * their ledger rows and get a pool when buyers first contend. */
        lib_keys("spread items", SPREAD_BASE, SPREAD_N, 1, cfg.spread_stock,
                 cfg.warm_spread);
    if (cfg.workloads[W_CART] || cfg.workloads[W_SOLDCART] ||
        cfg.workloads[W_HOTCART])
        lib_keys("cart items", CART_BASE, CART_N, CART_LOCS, BIG_STOCK, 1);
    if (cfg.workloads[W_CLAIM])
        lib_keys("claim item", CLAIM_ITEM - 1, 1, 1, BIG_STOCK, 1);
    if (cfg.workloads[W_SOLDOUT] || cfg.workloads[W_SOLDCART])
        lib_keys("sold-out item", SOLDOUT_ITEM - 1, 1, 1, 0, 1);
    if (cfg.stmts)
        lib_keys("statement-count items", STMT_BASE, STMT_MAX_LINES, 3,
                 BIG_STOCK, 1);
    progress("setup done in %.1f s", (double)(now_us() - tsetup) / 1e6);

    if (cfg.cold)
        cold_probe();
    if (cfg.stmts)
        stmts_probe();

    /* ---- measurements: per (workload, RTT, clients), the rounds ---- */
    static const int order[] = {W_FLASH, W_FLASHQ2, W_FLASHQ5, W_SPREAD,
                                W_CART, W_CLAIM, W_SOLDOUT, W_SOLDCART,
                                W_HOTCART};
    for (size_t oi = 0; oi < sizeof order / sizeof order[0]; oi++) {
        int wl = order[oi];
        if (!cfg.workloads[wl])
            continue;
        int sel[D_N], nsel = 0;
        for (int d = 0; d < D_N; d++)
            if (cfg.designs[d] && !sits_out(wl, d))
                sel[nsel++] = d;
        for (int r = 0; r < cfg.rtts.n; r++) {
            const intlist *cl = &cfg.clients[wl];
            /* every claim measurement gets its own range of holds */
            if (wl == W_CLAIM)
                for (int k = 0; k < nsel; k++)
                    setup_claims(mon, sel[k], cfg.rtts.v[r],
                                 cfg.claim_holds[sel[k]] * (long)cl->n *
                                     cfg.rounds);
            for (int ci = 0; ci < cl->n; ci++) {
                binlog_trim(mon);
                for (int round = 1; round <= cfg.rounds; round++)
                    for (int k = 0; k < nsel; k++) {
                        /* each round starts one design later */
                        int d = sel[(k + round - 1) % nsel];
                        meas *m = xcalloc(1, sizeof *m);
                        m->design = d;
                        m->workload = wl;
                        m->clients = cl->v[ci];
                        m->rtt_idx = r;
                        m->rtt_us = cfg.rtts.v[r];
                        m->round = round;
                        m->claim_base = cfg.claim_holds[d] *
                                        (long)(ci * cfg.rounds + round - 1);
                        m->claim_n = cfg.claim_holds[d];
                        wait_purge(mon, 5000);
                        progress("run round %d/%d %s %s clients=%d rtt_us=%d",
                                 round, cfg.rounds, design_name[d],
                                 wl_name[wl], m->clients, m->rtt_us);
                        run_measurement(m, mon, 0);
                        add_result(m);
                    }
                print_cell(wl, cl->v[ci], cfg.rtts.v[r]);
            }
        }
    }

    int failed = 0;
    if (cfg.workloads[W_STAMPEDE])
        failed += stampede_run(&mon);

    /* ---- profiled re-runs of the key measurement ---- */
    if (cfg.profile && cfg.workloads[W_FLASH]) {
        int r500 = -1;
        for (int r = 0; r < cfg.rtts.n; r++)
            if (cfg.rtts.v[r] == 500)
                r500 = r;
        if (r500 >= 0) {
            printf("# profile: flash1 at 64 clients and 0.5 ms RTT again, "
                   "sampling information_schema.PROCESSLIST and INNODB_TRX "
                   "every 20 ms (these runs are perturbed by the sampling "
                   "and are not part of the results: round=0); share = "
                   "fraction of connection samples in each COMMAND | STATE "
                   "| statement\n");
            for (int d = 0; d < D_N; d++) {
                if (!cfg.designs[d])
                    continue;
                meas *m = xcalloc(1, sizeof *m);
                m->design = d;
                m->workload = W_FLASH;
                m->clients = 64;
                m->rtt_idx = r500;
                m->rtt_us = 500;
                wait_purge(mon, 5000);
                progress("profile %s flash1 clients=64 rtt_us=500", design_name[d]);
                run_measurement(m, mon, 1);
                add_result(m);
            }
        }
    }

    print_ratios();
    failed += check_tables(mon);
    if (!getenv("RSV_BENCH_KEEP_DB"))
        q_execf(mon, "DROP DATABASE %s", dbname);
    mysql_close(mon);
    proxies_stop();
    for (int i = 0; i < nresults; i++)
        free(results[i]);
    mysql_library_end();
    if (failed) {
        fprintf(stderr, "bench: the tables of %d design(s) disagree with the "
                        "successes their clients counted (see the check "
                        "lines)\n", failed);
        return 1;
    }
    return 0;
}
