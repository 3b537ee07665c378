/*
 * galera_load.c - libreserve on a 3-node Galera cluster: many clients on
 * every node doing reserve / claim / release / sweep on one hot item and a
 * few others, one node SIGKILLed mid-run and brought back, and then every
 * acknowledged outcome checked against the database of every node
 * (tests/galera/run-galera.sh starts the cluster and runs this).
 *
 * Owns: the clients (threads, one connection and context each, spread
 * over the nodes, each node with clients of three kinds: one call at a
 * time through the procedures, the same sending statements one by one,
 * and batches of checkouts, claims and releases; each connects with
 * rsv_open_dsn to a dsn of every node, its home node first, and after a
 * lost connection, an answer in doubt or a refusal calls rsv_reconnect,
 * which lands on a node that takes writes, and repeats the call it was
 * in: every call is idempotent per token), the record of
 * every acknowledged outcome, the fault schedule (kill a node, restart it,
 * through tests/galera/cluster.sh), and the checks:
 *
 *   - after every library call the connection is not inside a transaction
 *     (SELECT @@in_transaction), and no call answered RSV_EINTXN (the
 *     clients never open transactions of their own);
 *   - every acknowledged reserve has its checkout (held or expired, or
 *     claimed / released as acknowledged later); every acknowledged claim
 *     is claimed, every refused claim is not; every acknowledged release
 *     is released or expired;
 *   - per item and location, the stock that left the ledger is exactly
 *     the units of the acknowledged claims (RSV_EINDOUBT and lost
 *     connections are settled by repeating the call until it answers);
 *   - the holds of every held checkout are the units it was acknowledged;
 *   - rsv_audit() on every node finds nothing, every node has the same
 *     rows, and no transaction is left open on any node.
 *
 * The verdict is one line, "galera-load: ok ..." or "galera-load: FAILED
 * ..." with the failed checks above it; the exit status is 0 only when
 * every check passed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <mysql.h>
#include <mysqld_error.h>
#include <reserve.h>
#include <reserve/batch.h>
#include <reserve/stats.h>
#include "../../lib/test_flags.h"
#include "../loadlib.h"

#define NODES 3
#define SHOP 1
#define HOT_ITEM 1
#define LOC 1
#define NITEMS 4      /* item 1 is the hot one; 2..4 are bought in carts */
#define MAX_LINES 3
#define MAX_CLIENTS 64
#define BATCH_MAX 4   /* checkouts per batch round */
#define CALL_ATTEMPTS 200 /* repeats of one call before it counts as hung */
#define CALL_MAX_MS 180000 /* and the time it may take, repeats included */

enum { ST_NONE = 0, ST_HELD = 1, ST_CLAIMED = 2, ST_RELEASED = 3,
       ST_EXPIRED = 4 };

static struct cfg {
    const char *dir, *cluster_sh, *db;
    unsigned seed;
    int clients, duration, kill_node;
    const char *fault;  /* what happens to fault_node: kill, cut, flap,
                           lossy, slow (NULL: nothing) */
    int fault_node, fault_s, loss_pct, kbps;
    int64_t call_timeout_ms; /* the clients' budget (0: the default) */
    int soak_s;              /* a soak: faults in turn on every node, and
                                a sample of the process and the servers
                                every soak_s seconds (0: no soak) */
    long hot_stock, other_stock;
    int pool_cap;
    uint32_t flags;
    int verbose;
    const char *addr_prefix; /* node N listens on addr_prefix N */
    unsigned port_base;      /* and port port_base + N */
    const char *proxy; /* the delay proxy, clients behind it */
    int rtt_us;
    unsigned proxy_port; /* its ports: this and the next two */
    int late_apply; /* --late-apply: that check instead of the load */
} C = {NULL, "tests/galera/cluster.sh", "rsvtest", 1, 9, 40, 2,
       NULL, 0, 8, 30, 64, 0, 0,
       100000, 100000, 50, 0, 0, "127.0.14.", 14000, NULL, 0, 14040};

static char sockets[NODES][600];
static unsigned proxy_ports[NODES]; /* 0: clients use the socket */
static atomic_int node_down[NODES];
static atomic_int stop_flag;
/* node + 1 while the fault of --cut-node and the like is on it (its links
 * cut, lossy or slow), else 0 */
static atomic_int fault_on;

/* ------------------------------------------------------------------ */
/* Problems found                                                     */
/* ------------------------------------------------------------------ */

static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;
static long problems;

static void problem(const char *fmt, ...)
{
    char b[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&report_lock);
    if (problems++ < 40)
        fprintf(stderr, "galera-load: %s\n", b);
    pthread_mutex_unlock(&report_lock);
}

/* ------------------------------------------------------------------ */
/* What was acknowledged                                              */
/* ------------------------------------------------------------------ */

struct line {
    uint64_t item;
    int64_t qty;
};

/* One checkout: its cart and the final acknowledged outcome of each call
 * made on it (0 = not called). */
struct rec {
    char tok[48];
    int nlines;
    struct line lines[MAX_LINES];
    int reserve_rc;  /* final answer of the reserve */
    int settle_kind; /* 0, 'c' claim or 'r' release */
    int settle_rc;   /* its final answer */
    int hung;        /* a call never answered definitively */
};

enum { KIND_PROCS, KIND_STATEMENTS, KIND_BATCH };

struct client {
    int id, home, node, kind;
    uint64_t rng;
    MYSQL *db;
    rsv_ctx *ctx;
    rsv_options opts;
    struct rec *recs;
    size_t nrecs, caprecs;
    long ops, in_txn, eintxn, repeats, edb, ebusy, moved, batches;
    uint64_t call_us; /* time inside library calls */
    uint64_t max_call_us; /* the longest single call */
    long over_budget;     /* calls longer than their budget allows */
    long code_count[32];
    long fault_codes[32]; /* the answers of the faulted node while the
                             fault was on */
    uint64_t deadlocks, retries, one_trip; /* the library's counters, over
                                              every context it opened */
};

static struct client clients[MAX_CLIENTS];

static struct rec *rec_new(struct client *c)
{
    if (c->nrecs == c->caprecs) {
        c->caprecs = c->caprecs ? c->caprecs * 2 : 256;
        c->recs = realloc(c->recs, c->caprecs * sizeof *c->recs);
        if (!c->recs) {
            perror("galera-load");
            exit(2);
        }
    }
    struct rec *r = &c->recs[c->nrecs++];
    memset(r, 0, sizeof *r);
    return r;
}

/* ------------------------------------------------------------------ */
/* Connections                                                        */
/* ------------------------------------------------------------------ */

static MYSQL *node_connect(int node, unsigned timeout_s)
{
    ll_server srv = {.socket = sockets[node], .connect_timeout_s = 5,
                     .rw_timeout_s = timeout_s};
    return ll_connect(NULL, &srv, C.db, NULL, 0);
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* The longest a call may take: its budget (call_timeout_ms), one
 * statement's lock wait past it (a quarter of the budget, whole seconds,
 * reserve.h), and a second for a machine shared with the three nodes.
 * A commit waiting for the cluster is not bounded by the server: without
 * the budget it waits as long as the cluster does. */
static uint64_t call_bound_us(void)
{
    int64_t budget = C.call_timeout_ms > 0 ? C.call_timeout_ms : 5000;
    int64_t lock_wait_s = (budget + 3999) / 4000;
    return (uint64_t)(budget + lock_wait_s * 1000 + 1000) * 1000u;
}

static void count_code(struct client *c, int rc);

/* One library call's answer and time. */
static void note_call(struct client *c, uint64_t us, int rc)
{
    c->call_us += us;
    if (us > c->max_call_us)
        c->max_call_us = us;
    if (us > call_bound_us())
        c->over_budget++;
    if (atomic_load(&fault_on) == c->node + 1 && rc <= 0 && rc > -32)
        c->fault_codes[-rc]++;
    (void)count_code;
}
/* A client's dsn: every node (through its delay proxy when there is
 * one; the checks always use the socket), its home node first.  The
 * library connects to the first that takes writes (target=writable, the
 * default): a node killed, partitioned away or still joining is passed
 * over, and rsv_reconnect goes back to the home node once it is back. */
static void client_dsn(const struct client *c, char *out, size_t len)
{
    size_t n = (size_t)snprintf(out, len, "mariadb://root@");
    for (int k = 0; k < NODES; k++) {
        int node = (c->home + k) % NODES;
        if (proxy_ports[node])
            n += (size_t)snprintf(out + n, len - n, "%s127.0.0.1:%u",
                                  k ? "," : "", proxy_ports[node]);
        else
            n += (size_t)snprintf(out + n, len - n, "%s%s%d:%u",
                                  k ? "," : "", C.addr_prefix, node + 1,
                                  C.port_base + 1u + (unsigned)node);
    }
    snprintf(out + n, len - n, "/%s?connect_timeout=5&read_timeout=60&"
             "write_timeout=60", C.db);
}

/* The node a connection is on, from its port. */
static int conn_node(MYSQL *m)
{
    unsigned int port = 0;
    mariadb_get_infov(m, MARIADB_CONNECTION_PORT, &port);
    for (int n = 0; n < NODES; n++)
        if (proxy_ports[n] ? port == proxy_ports[n]
                           : port == C.port_base + 1u + (unsigned)n)
            return n;
    return -1;
}

/* One delay proxy per node (tests/bench/proxy.c), on 127.0.0.1 ports
 * proxy_port.. (below the kernel's outgoing range); each stops when this
 * process ends (its standard input closes). */
static int start_proxies(void)
{
    for (int n = 0; n < NODES; n++) {
        int in[2], out[2];
        if (pipe(in) || pipe(out))
            return -1;
        pid_t pid = fork();
        if (pid < 0)
            return -1;
        if (pid == 0) {
            char rtt[16], port[16];
            snprintf(rtt, sizeof rtt, "%d", C.rtt_us);
            snprintf(port, sizeof port, "%u", C.proxy_port + (unsigned)n);
            dup2(in[0], 0);
            dup2(out[1], 1);
            close(in[1]);
            close(out[0]);
            execl(C.proxy, C.proxy, "--unix", sockets[n], "--rtt-us", rtt,
                  "--port", port, (char *)NULL);
            _exit(127);
        }
        /* in[1] stays open for the proxy's life, and in this process
         * only: not in the nodes that cluster.sh restarts */
        close(in[0]);
        close(out[1]);
        fcntl(in[1], F_SETFD, FD_CLOEXEC);
        char line[32] = "";
        FILE *f = fdopen(out[0], "r");
        if (!f || !fgets(line, sizeof line, f) || atoi(line) <= 0)
            return -1;
        proxy_ports[n] = (unsigned)atoi(line);
        fclose(f);
    }
    return 0;
}

static void cl_close(struct client *c)
{
    uint64_t v = 0;
    if (c->ctx && rsv_stats_get(c->ctx, RSV_STAT_DEADLOCKS, RSV_OP_ALL, &v) ==
                      RSV_OK)
        c->deadlocks += v;
    if (c->ctx && rsv_stats_get(c->ctx, RSV_STAT_RETRIES, RSV_OP_ALL, &v) ==
                      RSV_OK)
        c->retries += v;
    if (c->ctx && rsv_stats_get(c->ctx, RSV_STAT_ONE_TRIP, RSV_OP_ALL, &v) ==
                      RSV_OK)
        c->one_trip += v;
    rsv_close(c->ctx); /* (and its connection: the context opened it) */
    c->ctx = NULL;
    c->db = NULL;
}

/* Connect through the client's dsn (or, with a context, reconnect it:
 * the documented way after a lost connection or a refusal), until a node
 * takes it. */
static void cl_connect(struct client *c)
{
    uint64_t start = ll_now_ms();
    char dsn[512];
    client_dsn(c, dsn, sizeof dsn);
    for (int tries = 0;; tries++) {
        int rc;
        if (c->ctx) {
            rc = rsv_reconnect(c->ctx);
        } else {
            rc = rsv_open_dsn(&c->ctx, dsn, &c->opts);
            if (rc != RSV_OK) {
                if (C.verbose)
                    fprintf(stderr, "galera-load: client %d: %s\n", c->id,
                            rsv_errmsg(c->ctx));
                rsv_close(c->ctx);
                c->ctx = NULL;
            }
        }
        if (rc == RSV_OK) {
            c->db = rsv_connection(c->ctx);
            int n = conn_node(c->db);
            if (n != c->node)
                c->moved++;
            c->node = n < 0 ? c->home : n;
            return;
        }
        if (C.verbose && c->ctx)
            fprintf(stderr, "galera-load: client %d: rsv_reconnect: %s\n",
                    c->id, rsv_errmsg(c->ctx));
        if (ll_now_ms() - start > 240000) {
            problem("client %d: no node accepted a connection for 240 s",
                    c->id);
            exit(2);
        }
        ll_sleep_ms(50L << (tries < 5 ? tries : 5));
    }
}

static void cl_reconnect(struct client *c)
{
    cl_connect(c);
}

/* The library must never leave the connection inside a transaction. */
static void check_in_txn(struct client *c, const char *what, int rc)
{
    int64_t open = 0;
    if (!c->db || ll_i64(c->db, "SELECT @@in_transaction", 0, &open) < 0)
        return; /* (connection gone: the next call finds out) */
    if (open) {
        c->in_txn++;
        problem("client %d (node %d): inside a transaction after %s "
                "returned %s", c->id, c->node + 1, what, rsv_code_name(rc));
        (void)mysql_query(c->db, "ROLLBACK");
    }
}

/* ------------------------------------------------------------------ */
/* Calls                                                              */
/* ------------------------------------------------------------------ */

enum { CALL_RESERVE = LL_RESERVE, CALL_CLAIM = LL_CLAIM,
       CALL_RELEASE = LL_RELEASE };
static const char *call_names[] = {"", "rsv_reserve", "rsv_claim",
                                   "rsv_release"};

static int do_call(struct client *c, int kind, struct rec *r, int64_t ttl)
{
    ll_call k = {kind, SHOP, r->tok, NULL, ttl};
    if (kind != CALL_RESERVE) {
        uint64_t t0 = now_us();
        int rc = ll_call_once(c->ctx, &k);
        note_call(c, now_us() - t0, rc);
        return rc;
    }
    if (rsv_cart_new(&k.cart) != RSV_OK)
        return RSV_ENOMEM;
    for (int l = 0; l < r->nlines; l++) {
        uint64_t loc = LOC;
        rsv_cart_add(k.cart, r->lines[l].item, &loc, 1, r->lines[l].qty, 0);
    }
    uint64_t t0 = now_us();
    int rc = ll_call_once(c->ctx, &k);
    note_call(c, now_us() - t0, rc);
    rsv_cart_free(k.cart);
    return rc;
}

/* Whether an answer settles what the call did.  Lost connections,
 * RSV_EINDOUBT and database errors are repeated (every call is
 * idempotent per token); RSV_EBUSY says nothing was applied, unless an
 * earlier attempt of the same call may have been. */
static int definitive(int rc, int doubt)
{
    switch (rc) {
    case RSV_OK:
    case RSV_EOUTOFSTOCK:
    case RSV_ENOTFOUND:
    case RSV_EEXPIRED:
    case RSV_ECLAIMED:
    case RSV_ERELEASED:
        return 1;
    case RSV_EBUSY:
        return !doubt;
    default:
        return 0;
    }
}

static void count_code(struct client *c, int rc)
{
    if (rc <= 0 && rc > -32)
        c->code_count[-rc]++;
}

/* Run a call until its answer is definitive; doubt: an earlier attempt
 * (a batch's) may have applied it. */
static int run_call(struct client *c, int kind, struct rec *r, int64_t ttl,
                    int doubt)
{
    int rc = RSV_EDB;
    uint64_t start = ll_now_ms();
    for (int attempt = 0;
         attempt < CALL_ATTEMPTS && ll_now_ms() - start < CALL_MAX_MS;
         attempt++) {
        rc = do_call(c, kind, r, ttl);
        c->ops++;
        count_code(c, rc);
        check_in_txn(c, call_names[kind], rc);
        if (definitive(rc, doubt))
            return rc;
        c->repeats++;
        switch (rc) {
        case RSV_EINTXN:
            /* Clients never open transactions: this one is the
             * library's. */
            c->eintxn++;
            problem("client %d (node %d): %s %s answered RSV_EINTXN: %s",
                    c->id, c->node + 1, call_names[kind], r->tok,
                    rsv_errmsg(c->ctx));
            if (mysql_query(c->db, "ROLLBACK"))
                cl_reconnect(c);
            break;
        case RSV_EBUSY:
            ll_sleep_ms(5 + ll_rnd(&c->rng, 20));
            break;
        case RSV_EDB:
            c->edb++;
            if (C.verbose)
                fprintf(stderr, "galera-load: client %d (node %d): %s: %s\n",
                        c->id, c->node + 1, call_names[kind],
                        rsv_errmsg(c->ctx));
            doubt = 1;
            cl_reconnect(c);
            break;
        default: /* RSV_EINDOUBT, RSV_ECONN and anything unexpected */
            doubt = 1;
            cl_reconnect(c);
            break;
        }
    }
    r->hung = 1;
    problem("client %d: %s %s never answered definitively (last %s: %s)",
            c->id, call_names[kind], r->tok, rsv_code_name(rc),
            c->ctx ? rsv_errmsg(c->ctx) : "");
    return rc;
}

/* Reserve recs[0..n) as rsv_reserve_cart_batch, a cart of its lines
 * each. */
static int cart_batch(struct client *c, struct rec **recs, int n,
                      const uint64_t *shops, const void *const *toks,
                      const size_t *lens, int64_t ttl, int *res)
{
    rsv_cart *carts[BATCH_MAX] = {NULL};
    int rc = RSV_OK;
    for (int i = 0; i < n && rc == RSV_OK; i++) {
        rc = rsv_cart_new(&carts[i]);
        for (int l = 0; rc == RSV_OK && l < recs[i]->nlines; l++) {
            uint64_t loc = LOC;
            rc = rsv_cart_add(carts[i], recs[i]->lines[l].item, &loc, 1,
                              recs[i]->lines[l].qty, 0);
        }
    }
    if (rc == RSV_OK)
        rc = rsv_reserve_cart_batch(c->ctx, (size_t)n, shops, toks, lens,
                                    carts, ttl, res);
    for (int i = 0; i < n; i++)
        rsv_cart_free(carts[i]);
    return rc;
}

/* One batch call of kind over recs[0..n): each entry's answer, and every
 * entry the batch did not settle (the whole batch, or the entry, lost or
 * in doubt) repeated on its own until its answer is definitive.  Reserves
 * of more than one line go as a batch of carts. */
static void run_batch(struct client *c, int kind, struct rec **recs, int n,
                      int64_t ttl, int *out)
{
    uint64_t shops[BATCH_MAX], items[BATCH_MAX], locs[BATCH_MAX];
    int64_t qty[BATCH_MAX];
    const void *toks[BATCH_MAX];
    size_t lens[BATCH_MAX];
    int res[BATCH_MAX];
    for (int i = 0; i < n; i++) {
        shops[i] = SHOP;
        toks[i] = recs[i]->tok;
        lens[i] = strlen(recs[i]->tok);
        items[i] = recs[i]->lines[0].item;
        locs[i] = LOC;
        qty[i] = recs[i]->lines[0].qty;
    }
    uint64_t t0 = now_us();
    int rc = kind == CALL_RESERVE && recs[0]->nlines > 1
                 ? cart_batch(c, recs, n, shops, toks, lens, ttl, res)
             : kind == CALL_RESERVE
                 ? rsv_reserve_batch(c->ctx, (size_t)n, shops, toks, lens,
                                     items, locs, qty, ttl, res)
             : kind == CALL_CLAIM
                 ? rsv_claim_batch(c->ctx, (size_t)n, shops, toks, lens, res)
                 : rsv_release_batch(c->ctx, (size_t)n, shops, toks, lens,
                                     res);
    note_call(c, now_us() - t0, rc);
    c->ops++;
    c->batches++;
    count_code(c, rc);
    check_in_txn(c, call_names[kind], rc);
    int lost = 0;
    for (int i = 0; i < n; i++) {
        if (rc != RSV_OK)
            res[i] = rc;
        lost |= !definitive(res[i], 0);
    }
    /* (EBUSY for the whole batch: nothing applied, as for one call) */
    if (lost && (rc == RSV_EINDOUBT || rc == RSV_ECONN || rc == RSV_EDB))
        cl_reconnect(c);
    for (int i = 0; i < n; i++) {
        out[i] = res[i];
        if (definitive(res[i], 0))
            continue;
        c->repeats++;
        if (res[i] == RSV_ECONN || res[i] == RSV_EINDOUBT) {
            if (c->db && mysql_ping(c->db))
                cl_reconnect(c);
        }
        out[i] = run_call(c, kind, recs[i], ttl, 1);
    }
}

/* A round of batched checkouts: 2-4 checkouts of the hot item reserved in
 * one batch (half the rounds carts with a second line of another item, as
 * one batch of carts), then some claimed and some released, each kind in
 * one batch, the rest kept. */
static void batch_round(struct client *c, long *seq)
{
    struct rec *recs[BATCH_MAX], *claim[BATCH_MAX], *rel[BATCH_MAX];
    int rc[BATCH_MAX];
    int n = 2 + (int)ll_rnd(&c->rng, BATCH_MAX - 1), nc = 0, nr = 0;
    int carts = ll_rnd(&c->rng, 2) == 0;
    for (int i = 0; i < n; i++) {
        /* (rec_new may move the array: the pointers are taken after) */
        struct rec *r = rec_new(c);
        snprintf(r->tok, sizeof r->tok, "s%u.c%d.%ld", C.seed, c->id,
                 (*seq)++);
        r->nlines = 1;
        r->lines[0].item = HOT_ITEM;
        r->lines[0].qty = 1 + (int64_t)ll_rnd(&c->rng, 3);
        if (carts) {
            r->nlines = 2;
            r->lines[1].item = 2 + ll_rnd(&c->rng, NITEMS - 1);
            r->lines[1].qty = 1 + (int64_t)ll_rnd(&c->rng, 3);
        }
    }
    for (int i = 0; i < n; i++)
        recs[i] = &c->recs[c->nrecs - (size_t)n + (size_t)i];
    run_batch(c, CALL_RESERVE, recs, n, 600000, rc);
    for (int i = 0; i < n; i++) {
        recs[i]->reserve_rc = rc[i];
        if (rc[i] != RSV_OK || recs[i]->hung)
            continue;
        unsigned fate = ll_rnd(&c->rng, 4);
        if (fate < 2)
            claim[nc++] = recs[i];
        else if (fate == 2)
            rel[nr++] = recs[i];
    }
    if (nc > 0) {
        run_batch(c, CALL_CLAIM, claim, nc, 0, rc);
        for (int i = 0; i < nc; i++) {
            claim[i]->settle_kind = 'c';
            claim[i]->settle_rc = rc[i];
        }
    }
    if (nr > 0) {
        run_batch(c, CALL_RELEASE, rel, nr, 0, rc);
        for (int i = 0; i < nr; i++) {
            rel[i]->settle_kind = 'r';
            rel[i]->settle_rc = rc[i];
        }
    }
}

static void *client_main(void *p)
{
    struct client *c = p;
    mysql_thread_init();
    cl_connect(c);
    for (long seq = 0; !atomic_load(&stop_flag); seq++) {
        /* back home after the node came back */
        if (c->node != c->home && seq % 50 == 0 &&
            !atomic_load(&node_down[c->home]))
            cl_reconnect(c);
        if (seq % 40 == 39) {
            int64_t released = 0;
            uint64_t t0 = now_us();
            int rc = rsv_sweep(c->ctx, SHOP, 200, &released);
            note_call(c, now_us() - t0, rc);
            c->ops++;
            count_code(c, rc);
            check_in_txn(c, "rsv_sweep", rc);
            if (rc == RSV_EINTXN) {
                c->eintxn++;
                problem("client %d (node %d): rsv_sweep answered "
                        "RSV_EINTXN", c->id, c->node + 1);
                (void)mysql_query(c->db, "ROLLBACK");
            }
            if (rc != RSV_OK && rc != RSV_EBUSY && rc != RSV_EINTXN)
                cl_reconnect(c);
            continue;
        }
        /* the batch clients batch a third of their checkouts */
        if (c->kind == KIND_BATCH && ll_rnd(&c->rng, 3) == 0) {
            batch_round(c, &seq);
            continue;
        }
        struct rec *r = rec_new(c);
        snprintf(r->tok, sizeof r->tok, "s%u.c%d.%ld", C.seed, c->id, seq);
        /* mostly the hot item alone (the one-key procedure), else a cart
         * with or without it (the cart procedure) */
        unsigned shape = ll_rnd(&c->rng, 10);
        r->nlines = shape < 7 ? 1 : 2 + (int)ll_rnd(&c->rng, MAX_LINES - 1);
        uint64_t first = shape < 9 ? HOT_ITEM : 2;
        for (int l = 0; l < r->nlines; l++) {
            r->lines[l].item = first + (uint64_t)l;
            r->lines[l].qty = 1 + (int64_t)ll_rnd(&c->rng, 3);
        }
        /* a fifth abandoned with a short TTL: they expire, and the sweep
         * or a refill gives them back */
        unsigned fate = ll_rnd(&c->rng, 20);
        int64_t ttl = fate < 4 ? 200 + ll_rnd(&c->rng, 800) : 600000;
        r->reserve_rc = run_call(c, CALL_RESERVE, r, ttl, 0);
        if (r->reserve_rc != RSV_OK || r->hung)
            continue;
        if (fate < 4) {
            /* abandoned; now and then claimed late (may find it
             * expired) */
            if (fate == 0) {
                ll_sleep_ms((long)ttl + 50);
                r->settle_kind = 'c';
                r->settle_rc = run_call(c, CALL_CLAIM, r, 0, 0);
            }
            continue;
        }
        if (fate < 14) {
            r->settle_kind = 'c';
            r->settle_rc = run_call(c, CALL_CLAIM, r, 0, 0);
        } else if (fate < 18) {
            r->settle_kind = 'r';
            r->settle_rc = run_call(c, CALL_RELEASE, r, 0, 0);
        }
        /* (the rest stay held) */
    }
    cl_close(c);
    mysql_thread_end();
    return NULL;
}

/* ------------------------------------------------------------------ */
/* The fault schedule                                                 */
/* ------------------------------------------------------------------ */

static int cluster_cmd_arg(const char *what, int node, int arg)
{
    char n[16], a[16];
    snprintf(n, sizeof n, "%d", node);
    snprintf(a, sizeof a, "%d", arg);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        execl("/bin/bash", "bash", C.cluster_sh, what, C.dir, n,
              arg ? a : (char *)NULL, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int cluster_cmd(const char *what, int node)
{
    return cluster_cmd_arg(what, node, 0);
}

static long total_ops(void)
{
    long n = 0;
    for (int i = 0; i < C.clients; i++)
        n += clients[i].ops; /* (read racily: progress only) */
    return n;
}

/* The faulted node's links to the others for fault_s seconds: cut
 * (partitioned away, both sides alive), flapping (cut and healed in
 * turn), lossy (loss_pct of the packets dropped) or slow (kbps), then
 * healed; the node stays up throughout. */
static void fault_step(uint64_t start, const char *what, int arg)
{
    printf("galera-load: %.1f s, %ld calls: %s node %d%s\n",
           (ll_now_ms() - start) / 1000.0, total_ops(), what, C.fault_node,
           !strcmp(what, "heal") ? "'s links" : "");
    fflush(stdout);
    if (cluster_cmd_arg(what, C.fault_node, arg) != 0)
        problem("cluster.sh %s failed", what);
}

static void run_fault(uint64_t start);

/* ------------------------------------------------------------------ */
/* The soak: faults in turn, and what the process and servers hold     */
/* ------------------------------------------------------------------ */

struct sample {
    long rss_kb, fds, conns; /* rss_kb less the load's own records */
};

/* What the load's record of every checkout takes (it grows with the
 * calls, by design: the checks read it at the end); read racily, for the
 * samples only. */
static long records_kb(void)
{
    size_t n = 0;
    for (int i = 0; i < C.clients; i++)
        n += clients[i].nrecs;
    return (long)(n * sizeof(struct rec) / 1024);
}

static long proc_rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = atol(line + 6);
    if (f)
        fclose(f);
    return kb;
}

static long proc_fds(void)
{
    long n = 0;
    char path[64];
    for (int fd = 0; fd < 65536; fd++) {
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        if (access(path, F_OK) == 0)
            n++;
        else if (fd > 4096)
            break;
    }
    return n;
}

/* The clients' connections on every node: the sessions of the load's
 * database, the sampler's own left out. */
static long server_conns(void)
{
    long total = 0;
    for (int n = 0; n < NODES; n++) {
        MYSQL *m = node_connect(n, 10);
        if (!m)
            continue;
        char q[256];
        int64_t v = 0;
        snprintf(q, sizeof q, "SELECT COUNT(*) FROM information_schema."
                 "PROCESSLIST WHERE DB = '%s' AND ID <> CONNECTION_ID()",
                 C.db);
        if (ll_i64(m, q, 0, &v) == 0)
            total += v;
        mysql_close(m);
    }
    return total;
}

static struct sample samples[4096];
static int nsamples;

static void *sampler_main(void *arg)
{
    uint64_t start = *(uint64_t *)arg, next = start;
    mysql_thread_init();
    while (!atomic_load(&stop_flag) && nsamples < 4096) {
        next += (uint64_t)C.soak_s * 1000;
        while (!atomic_load(&stop_flag) && ll_now_ms() < next)
            ll_sleep_ms(100);
        if (atomic_load(&stop_flag))
            break;
        struct sample *s = &samples[nsamples];
        long rss = proc_rss_kb(), recs = records_kb();
        s->rss_kb = rss - recs;
        s->fds = proc_fds();
        s->conns = server_conns();
        printf("soak: %6.0f s %8ld calls  RSS %6ld kB (%6ld kB less the "
               "load's records)  fds %4ld  server connections %3ld%s\n",
               (ll_now_ms() - start) / 1000.0, total_ops(), rss, s->rss_kb,
               s->fds, s->conns,
               atomic_load(&fault_on) ? "  (fault on)" : "");
        fflush(stdout);
        nsamples++;
    }
    mysql_thread_end();
    return NULL;
}

/* Flat: the last sample holds no more descriptors or connections than
 * the most seen in the first third of the run (each client holds one
 * connection, and the checks' own come and go), and no more than a
 * quarter more memory besides the load's records (the allocator keeps
 * some of what peaks freed). */
static void soak_verdict(void)
{
    if (nsamples < 6) {
        problem("soak: %d samples, too few to tell (a longer run)",
                nsamples);
        return;
    }
    struct sample base = {0, 0, 0}, last = samples[nsamples - 1];
    for (int i = 1; i <= nsamples / 3; i++) {
        if (samples[i].rss_kb > base.rss_kb)
            base.rss_kb = samples[i].rss_kb;
        if (samples[i].fds > base.fds)
            base.fds = samples[i].fds;
        if (samples[i].conns > base.conns)
            base.conns = samples[i].conns;
    }
    printf("soak: first third at most RSS %ld kB, %ld fds, %ld server "
           "connections; last RSS %ld kB, %ld fds, %ld connections\n",
           base.rss_kb, base.fds, base.conns, last.rss_kb, last.fds,
           last.conns);
    if (last.fds > base.fds + 2)
        problem("soak: open descriptors grew from %ld to %ld", base.fds,
                last.fds);
    if (last.conns > base.conns + 2)
        problem("soak: server connections grew from %ld to %ld",
                base.conns, last.conns);
    if (last.rss_kb > base.rss_kb + base.rss_kb / 4)
        problem("soak: RSS grew from %ld kB to %ld kB", base.rss_kb,
                last.rss_kb);
}

/* Faults in turn until 20 s before the end: each kind of link failure on
 * each node in turn, fault_s seconds each, 10 s apart. */
static void soak_faults(uint64_t start)
{
    static const char *const kinds[] = {"cut", "lossy", "flap", "slow"};
    uint64_t end = start + (uint64_t)C.duration * 1000;
    for (int k = 0;; k++) {
        ll_sleep_ms(10000);
        if (ll_now_ms() + (uint64_t)C.fault_s * 1000 + 20000 > end)
            break;
        C.fault = kinds[k % 4];
        C.fault_node = k % NODES + 1;
        run_fault(start);
    }
}

static void run_fault(uint64_t start)
{
    uint64_t end = ll_now_ms() + (uint64_t)C.fault_s * 1000;
    atomic_store(&fault_on, C.fault_node);
    if (!strcmp(C.fault, "flap")) {
        /* cut longer than the suspect timeout (3 s): each cut ends in a
         * new view without the node, each heal in its rejoining */
        while (ll_now_ms() < end) {
            fault_step(start, "cut", 0);
            ll_sleep_ms(4000);
            fault_step(start, "heal", 0);
            ll_sleep_ms(2500);
        }
    } else {
        if (!strcmp(C.fault, "cut"))
            fault_step(start, "cut", 0);
        else if (!strcmp(C.fault, "lossy"))
            fault_step(start, "cut", C.loss_pct);
        else
            fault_step(start, "slow", C.kbps);
        ll_sleep_ms((long)(end - ll_now_ms()));
        fault_step(start, "heal", 0);
    }
    atomic_store(&fault_on, 0);
}

/* ------------------------------------------------------------------ */
/* Checks                                                             */
/* ------------------------------------------------------------------ */

static MYSQL *check_connect(int node)
{
    MYSQL *m = node_connect(node, 300);
    if (!m) {
        problem("node %d: cannot connect for the checks", node + 1);
        return NULL;
    }
    /* reads wait until the node has applied everything the cluster
     * committed before them */
    if (mysql_query(m, "SET SESSION wsrep_sync_wait = 15")) {
        problem("node %d: %s", node + 1, mysql_error(m));
        mysql_close(m);
        return NULL;
    }
    return m;
}

static int64_t q_int(MYSQL *m, const char *q)
{
    int64_t v;
    if (ll_i64(m, q, -1, &v) < 0)
        problem("%s: %s", q, mysql_error(m));
    return v;
}

static void audit_cb(void *arg, uint64_t shop, uint64_t item, uint64_t loc,
                     const char *what)
{
    problem("node %d: rsv_audit: shop %llu item %llu location %llu: %s",
            *(int *)arg + 1, (unsigned long long)shop,
            (unsigned long long)item, (unsigned long long)loc, what);
}

/* A fingerprint of every table's rows, to compare the nodes. */
static const char *const fingerprint_q =
    "SELECT CONCAT_WS(' ',"
    " (SELECT CONCAT(COUNT(*), ':', COALESCE(SUM(CRC32(CONCAT_WS(',',"
    "   item_id, location_id, on_hand, issued,"
    "   next_unit_id))), 0)) FROM rsv_ledger),"
    " (SELECT CONCAT(COUNT(*), ':', COALESCE(SUM(CRC32(CONCAT_WS(',',"
    "   item_id, location_id, id))), 0))"
    "   FROM rsv_pool),"
    " (SELECT CONCAT(COUNT(*), ':', COALESCE(SUM(CRC32(CONCAT_WS(',',"
    "   checkout_token, status, generation, hold_count))), 0))"
    "   FROM rsv_checkouts),"
    " (SELECT CONCAT(COUNT(*), ':', COALESCE(SUM(CRC32(CONCAT_WS(',',"
    "   checkout_token, item_id, quantity, generation))), 0))"
    "   FROM rsv_holds),"
    " (SELECT CONCAT(COUNT(*), ':', COALESCE(SUM(CRC32(CONCAT_WS(',',"
    "   checkout_token, item_id, kind, quantity))), 0))"
    "   FROM rsv_journal))";

static void check_node(int node, char *fp, size_t fplen)
{
    fp[0] = 0;
    MYSQL *m = check_connect(node);
    if (!m)
        return;
    int64_t open = -1;
    for (int i = 0; i < 100; i++) {
        open = q_int(m, "SELECT COUNT(*) FROM information_schema.innodb_trx "
                        "WHERE trx_mysql_thread_id <> CONNECTION_ID()");
        if (open == 0)
            break;
        ll_sleep_ms(100);
    }
    if (open != 0)
        problem("node %d: %lld transactions still open after the run",
                node + 1, (long long)open);
    rsv_options o;
    rsv_options_init(&o, RSV_OPTIONS_VERSION);
    o.pool_cap = C.pool_cap;
    rsv_ctx *ctx = NULL;
    int64_t v = 0;
    if (rsv_open(&ctx, m, &o) != RSV_OK)
        problem("node %d: rsv_open: %s", node + 1, rsv_errmsg(ctx));
    else if (rsv_audit(ctx, 0, 1, audit_cb, &node, &v) != RSV_OK)
        problem("node %d: rsv_audit: %s", node + 1, rsv_errmsg(ctx));
    rsv_close(ctx);
    if (mysql_query(m, fingerprint_q) == 0) {
        MYSQL_RES *r = mysql_store_result(m);
        MYSQL_ROW row = r ? mysql_fetch_row(r) : NULL;
        snprintf(fp, fplen, "%s", row && row[0] ? row[0] : "?");
        if (r)
            mysql_free_result(r);
    } else {
        problem("node %d: %s", node + 1, mysql_error(m));
    }
    mysql_close(m);
}

struct dbco {
    char tok[48];
    int status;      /* as stored */
    int hold_count;  /* holds it had when reserved */
    int past;        /* its deadline has passed */
    int holds;       /* holds still there */
};

static int dbco_cmp(const void *a, const void *b)
{
    return strcmp(((const struct dbco *)a)->tok, ((const struct dbco *)b)->tok);
}

struct dbhold {
    char tok[48];
    uint64_t item;
    int64_t qty;
};

static int dbhold_cmp(const void *a, const void *b)
{
    const struct dbhold *x = a, *y = b;
    int c = strcmp(x->tok, y->tok);
    return c ? c : (x->item > y->item) - (x->item < y->item);
}

static MYSQL_RES *query(MYSQL *m, const char *q)
{
    if (mysql_query(m, q)) {
        problem("%s: %s", q, mysql_error(m));
        return NULL;
    }
    return mysql_store_result(m);
}

static const char *status_name(int s)
{
    static const char *names[] = {"absent", "held", "claimed", "released",
                                  "expired"};
    return s >= 0 && s <= 4 ? names[s] : "?";
}

/* Every acknowledged outcome against node 1's rows (the nodes were
 * checked to hold the same rows). */
static void check_outcomes(int node)
{
    MYSQL *m = check_connect(node);
    if (!m)
        return;
    char q[256];
    snprintf(q, sizeof q, "SELECT checkout_token, status, hold_count, "
                          "expires_at <= NOW(6) FROM rsv_checkouts "
                          "WHERE shop_id = %d", SHOP);
    MYSQL_RES *r = query(m, q);
    size_t nco = r ? (size_t)mysql_num_rows(r) : 0, i = 0;
    struct dbco *cos = calloc(nco + 1, sizeof *cos);
    MYSQL_ROW row;
    while (r && (row = mysql_fetch_row(r)) && i < nco) {
        snprintf(cos[i].tok, sizeof cos[i].tok, "%s", row[0]);
        cos[i].status = atoi(row[1]);
        cos[i].hold_count = atoi(row[2]);
        cos[i++].past = atoi(row[3]);
    }
    if (r)
        mysql_free_result(r);
    qsort(cos, nco, sizeof *cos, dbco_cmp);

    snprintf(q, sizeof q, "SELECT checkout_token, item_id, "
                          "quantity FROM rsv_holds WHERE shop_id "
                          "= %d", SHOP);
    r = query(m, q);
    size_t nh = r ? (size_t)mysql_num_rows(r) : 0;
    struct dbhold *holds = calloc(nh + 1, sizeof *holds);
    i = 0;
    while (r && (row = mysql_fetch_row(r)) && i < nh) {
        snprintf(holds[i].tok, sizeof holds[i].tok, "%s", row[0]);
        holds[i].item = strtoull(row[1], NULL, 10);
        holds[i++].qty = strtoll(row[2], NULL, 10);
    }
    if (r)
        mysql_free_result(r);
    qsort(holds, nh, sizeof *holds, dbhold_cmp);
    for (i = 0; i < nh; i++) {
        struct dbco key;
        memset(&key, 0, sizeof key);
        snprintf(key.tok, sizeof key.tok, "%s", holds[i].tok);
        struct dbco *co = bsearch(&key, cos, nco, sizeof key, dbco_cmp);
        if (co)
            co->holds++;
        else
            problem("%s: holds without a checkout", holds[i].tok);
    }

    int64_t claimed[NITEMS + 1] = {0};
    long checked = 0;
    for (int ci = 0; ci < C.clients; ci++) {
        struct client *c = &clients[ci];
        for (size_t k = 0; k < c->nrecs; k++) {
            struct rec *t = &c->recs[k];
            if (t->hung)
                continue; /* (already a problem) */
            checked++;
            struct dbco key;
            memset(&key, 0, sizeof key);
            snprintf(key.tok, sizeof key.tok, "%s", t->tok);
            struct dbco *co = bsearch(&key, cos, nco, sizeof key, dbco_cmp);
            /* held, as rsv_checkout_status() says it: a held checkout
             * past its deadline, or with some of its holds given back,
             * has expired */
            int st = co ? co->status : ST_NONE;
            if (st == ST_HELD && (co->past || co->holds < co->hold_count))
                st = ST_EXPIRED;
            const char *bad = NULL;
            int claimed_ack = t->settle_kind == 'c' &&
                              (t->settle_rc == RSV_OK ||
                               t->settle_rc == RSV_ECLAIMED);
            if (claimed_ack)
                for (int l = 0; l < t->nlines; l++)
                    claimed[t->lines[l].item] += t->lines[l].qty;
            if (t->reserve_rc != RSV_OK) {
                if (st != ST_NONE)
                    bad = "a refused reserve left a checkout";
            } else if (claimed_ack) {
                if (st != ST_CLAIMED)
                    bad = "an acknowledged claim is not claimed";
            } else if (t->settle_kind == 'c') {
                if (st == ST_CLAIMED || st == ST_NONE)
                    bad = "a refused claim is claimed, or its checkout "
                          "is gone";
                else if (t->settle_rc == RSV_ENOTFOUND)
                    bad = "a claim was told its checkout does not exist";
            } else if (t->settle_kind == 'r' && t->settle_rc == RSV_OK) {
                if (st != ST_RELEASED && st != ST_EXPIRED)
                    bad = "an acknowledged release is not released";
            } else if (t->settle_kind == 'r' && t->settle_rc != RSV_EBUSY) {
                bad = "a release was refused";
            } else if (st != ST_HELD && st != ST_EXPIRED) {
                bad = "an acknowledged hold is neither held nor expired";
            }
            if (!bad && st == ST_HELD) {
                /* its holds are exactly what it was acknowledged */
                for (int l = 0; l < t->nlines && !bad; l++) {
                    struct dbhold hk;
                    memset(&hk, 0, sizeof hk);
                    snprintf(hk.tok, sizeof hk.tok, "%s", t->tok);
                    hk.item = t->lines[l].item;
                    struct dbhold *h =
                        bsearch(&hk, holds, nh, sizeof hk, dbhold_cmp);
                    if (!h || h->qty != t->lines[l].qty)
                        bad = "a held checkout's holds are not the units "
                              "it was acknowledged";
                }
            }
            if (bad)
                problem("%s: %s (reserve %s, %s %s; the database says %s)",
                        t->tok, bad, rsv_code_name(t->reserve_rc),
                        t->settle_kind == 'c'   ? "claim"
                        : t->settle_kind == 'r' ? "release"
                                                : "no settle",
                        t->settle_kind ? rsv_code_name(t->settle_rc) : "-",
                        status_name(st));
        }
    }
    /* units: what left the ledger is exactly what was claimed */
    for (uint64_t item = 1; item <= NITEMS; item++) {
        snprintf(q, sizeof q, "SELECT on_hand FROM rsv_stock WHERE "
                              "shop_id = %d AND item_id = %llu AND "
                              "location_id = %d", SHOP,
                 (unsigned long long)item, LOC);
        int64_t on_hand = q_int(m, q);
        int64_t stock = item == HOT_ITEM ? C.hot_stock : C.other_stock;
        int64_t left = stock - on_hand;
        if (left > claimed[item])
            problem("item %llu: %lld units left stock on hand, acknowledged "
                    "claims account for %lld (%lld units lost)",
                    (unsigned long long)item, (long long)left,
                    (long long)claimed[item],
                    (long long)(left - claimed[item]));
        else if (left < claimed[item])
            problem("item %llu: %lld units of acknowledged claims never "
                    "left stock on hand (%lld left, %lld claimed)",
                    (unsigned long long)item,
                    (long long)(claimed[item] - left), (long long)left,
                    (long long)claimed[item]);
        else if (C.verbose)
            fprintf(stderr, "galera-load: item %llu: %lld claimed, on hand "
                            "%lld\n", (unsigned long long)item,
                    (long long)claimed[item], (long long)on_hand);
    }
    printf("galera-load: %ld checkouts checked, %zu in the database\n",
           checked, nco);
    free(cos);
    free(holds);
    mysql_close(m);
}

/* The conflict counters of every node (wsrep_local_cert_failures,
 * _bf_aborts, _replays; since the node started): -1 if unknown. */
#define WSREP_COUNTERS 3
static void wsrep_counters(long long out[NODES][WSREP_COUNTERS])
{
    static const char *const names[WSREP_COUNTERS] = {
        "WSREP_LOCAL_CERT_FAILURES", "WSREP_LOCAL_BF_ABORTS",
        "WSREP_LOCAL_REPLAYS"};
    for (int n = 0; n < NODES; n++) {
        for (int k = 0; k < WSREP_COUNTERS; k++)
            out[n][k] = -1;
        MYSQL *m = node_connect(n, 30);
        if (!m)
            continue;
        for (int k = 0; k < WSREP_COUNTERS; k++) {
            char q[160];
            snprintf(q, sizeof q, "SELECT VARIABLE_VALUE FROM "
                                  "information_schema.GLOBAL_STATUS WHERE "
                                  "VARIABLE_NAME = '%s'", names[k]);
            out[n][k] = q_int(m, q);
        }
        mysql_close(m);
    }
}

/* What the run added to them (a node restarted in the run counts from
 * its restart). */
static void print_wsrep_counters(long long before[NODES][WSREP_COUNTERS])
{
    long long after[NODES][WSREP_COUNTERS];
    wsrep_counters(after);
    printf("galera-load: conflicts in the run (certification failures / "
           "brute-force aborts / replays):");
    for (int n = 0; n < NODES; n++) {
        printf(" node %d", n + 1);
        for (int k = 0; k < WSREP_COUNTERS; k++) {
            long long d = after[n][k] >= before[n][k]
                              ? after[n][k] - before[n][k]
                              : after[n][k];
            printf("%c%lld", k ? '/' : ' ', d);
        }
    }
    printf("\n");
}

/* ------------------------------------------------------------------ */
/* A node that has not applied a commit yet (--late-apply)            */
/* ------------------------------------------------------------------ */

/* Node 2 is paused (desynced, then FLUSH TABLES WITH READ LOCK, which
 * holds its applier) while node 1 commits reserves; a context on node 2
 * then asks about them, and node 2 resumes 1.5 s later.  A client that
 * moved to a node that had not applied its checkout yet was told the
 * checkout did not exist: each call here must answer as if it had. */
static MYSQL *pause_m;

static void node_pause(void)
{
    if (mysql_query(pause_m, "SET GLOBAL wsrep_desync = ON") ||
        mysql_query(pause_m, "FLUSH TABLES WITH READ LOCK"))
        problem("node 2: pause: %s", mysql_error(pause_m));
}

static void *node_resume_later(void *arg)
{
    (void)arg;
    ll_sleep_ms(1500);
    if (mysql_query(pause_m, "UNLOCK TABLES") ||
        mysql_query(pause_m, "SET GLOBAL wsrep_desync = OFF"))
        problem("node 2: resume: %s", mysql_error(pause_m));
    return NULL;
}

static rsv_ctx *late_ctx(int node)
{
    MYSQL *m = node_connect(node, 300);
    rsv_ctx *ctx = NULL;
    if (!m || rsv_open(&ctx, m, NULL) != RSV_OK) {
        fprintf(stderr, "galera-load: node %d: %s\n", node + 1,
                m ? rsv_errmsg(ctx) : "cannot connect");
        exit(2);
    }
    return ctx;
}

/* Reserve toks on node 1 while node 2 is paused, checking that node 2
 * really does not have them yet (else this tests nothing). */
static void late_reserve(rsv_ctx *c1, MYSQL *peek, const char *const *toks,
                         int n)
{
    node_pause();
    for (int i = 0; i < n; i++) {
        int rc = rsv_reserve_one(c1, SHOP, toks[i], strlen(toks[i]),
                                 HOT_ITEM + 1, LOC, 1, 600000);
        if (rc != RSV_OK)
            problem("late-apply: reserve %s: %s", toks[i], rsv_errmsg(c1));
        char q[200];
        snprintf(q, sizeof q, "SELECT COUNT(*) FROM rsv_checkouts "
                              "WHERE checkout_token = '%s'", toks[i]);
        if (q_int(peek, q) != 0)
            problem("late-apply: node 2 applied %s while paused: the "
                    "check tests nothing", toks[i]);
    }
}

static int late_apply_check(void)
{
    rsv_ctx *c1 = late_ctx(0), *c2 = late_ctx(1);
    MYSQL *peek = node_connect(1, 300);
    pause_m = node_connect(1, 300);
    if (!peek || !pause_m) {
        fprintf(stderr, "galera-load: node 2: cannot connect\n");
        return 2;
    }
    pthread_t th;
    const char *status_tok[] = {"late.status"};
    late_reserve(c1, peek, status_tok, 1);
    pthread_create(&th, NULL, node_resume_later, NULL);
    int32_t st = 0;
    int rc = rsv_checkout_status(c2, SHOP, status_tok[0],
                                 strlen(status_tok[0]), &st, NULL, NULL);
    pthread_join(th, NULL);
    if (rc != RSV_OK || st != RSV_STATUS_HELD)
        problem("late-apply: status on node 2: %s (status %d)",
                rsv_code_name(rc), (int)st);

    const char *batch_tok[] = {"late.batch.1", "late.batch.2"};
    late_reserve(c1, peek, batch_tok, 2);
    pthread_create(&th, NULL, node_resume_later, NULL);
    uint64_t shops[] = {SHOP, SHOP};
    size_t lens[] = {strlen(batch_tok[0]), strlen(batch_tok[1])};
    int res[2] = {0, 0};
    rc = rsv_release_batch(c2, 2, shops, (const void *const *)batch_tok,
                           lens, res);
    pthread_join(th, NULL);
    if (rc != RSV_OK || res[0] != RSV_OK || res[1] != RSV_OK)
        problem("late-apply: release batch on node 2: %s (%s, %s)",
                rsv_code_name(rc), rsv_code_name(res[0]),
                rsv_code_name(res[1]));

    const char *claim_tok[] = {"late.claim"};
    late_reserve(c1, peek, claim_tok, 1);
    pthread_create(&th, NULL, node_resume_later, NULL);
    rc = rsv_claim(c2, SHOP, claim_tok[0], strlen(claim_tok[0]));
    pthread_join(th, NULL);
    if (rc != RSV_OK)
        problem("late-apply: claim on node 2: %s: %s", rsv_code_name(rc),
                rsv_errmsg(c2));

    /* a token nobody reserved is still not found */
    rc = rsv_release(c2, SHOP, "late.none", 9);
    if (rc != RSV_ENOTFOUND)
        problem("late-apply: release of an unknown token: %s",
                rsv_code_name(rc));
    printf("galera-load: late-apply: %s\n", problems ? "FAILED" : "ok");
    return problems ? 1 : 0;
}

/* ------------------------------------------------------------------ */
/* Set-up and main                                                    */
/* ------------------------------------------------------------------ */

static void setup_stock(void)
{
    MYSQL *m = check_connect(0);
    if (!m)
        exit(2);
    rsv_options o;
    rsv_options_init(&o, RSV_OPTIONS_VERSION);
    o.pool_cap = C.pool_cap;
    rsv_ctx *ctx = NULL;
    if (rsv_open(&ctx, m, &o) != RSV_OK) {
        fprintf(stderr, "galera-load: rsv_open: %s\n", rsv_errmsg(ctx));
        exit(2);
    }
    if (q_int(m, "SELECT COUNT(*) FROM rsv_ledger") != 0) {
        fprintf(stderr, "galera-load: the database %s is not empty\n", C.db);
        exit(2);
    }
    for (uint64_t item = 1; item <= NITEMS; item++) {
        int rc = rsv_stock_set(ctx, SHOP, item, LOC,
                               item == HOT_ITEM ? C.hot_stock
                                                : C.other_stock);
        if (rc) {
            fprintf(stderr, "galera-load: stock: %s\n", rsv_errmsg(ctx));
            exit(2);
        }
    }
    rsv_close(ctx);
    mysql_close(m);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: galera_load --dir DIR [--cluster-sh PATH] [--db NAME]\n"
            "         [--seed N] [--clients N] [--duration S]\n"
            "         [--kill-node N (0: none)] [--hot-stock N]\n"
            "         [--cut-node|--flap-node|--lossy-node|--slow-node N\n"
            "          [--fault-seconds S] [--loss-pct P] [--kbps K]]\n"
            "         [--call-timeout-ms MS] [--addr-prefix P] [--port-base B]\n"
            "         [--soak SAMPLE_SECONDS]\n"
            "         [--pool-cap N] [--statements-only] [--verbose]\n"
            "         [--proxy PATH --rtt-us N [--proxy-port P]]\n"
            "       galera_load --dir DIR --db NAME --late-apply\n");
    exit(2);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--statements-only")) {
            C.flags |= TEST_OPT_STATEMENTS_ONLY;
            continue;
        }
        if (!strcmp(a, "--late-apply")) {
            C.late_apply = 1;
            continue;
        }
        if (!strcmp(a, "--verbose")) {
            C.verbose = 1;
            continue;
        }
        if (!v)
            usage();
        i++;
        if (!strcmp(a, "--dir"))
            C.dir = v;
        else if (!strcmp(a, "--cluster-sh"))
            C.cluster_sh = v;
        else if (!strcmp(a, "--db"))
            C.db = v;
        else if (!strcmp(a, "--seed"))
            C.seed = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--clients"))
            C.clients = atoi(v);
        else if (!strcmp(a, "--duration"))
            C.duration = atoi(v);
        else if (!strcmp(a, "--kill-node")) {
            C.kill_node = atoi(v);
            C.fault = NULL;
        }
        else if (!strcmp(a, "--cut-node") || !strcmp(a, "--flap-node") ||
                 !strcmp(a, "--lossy-node") || !strcmp(a, "--slow-node")) {
            C.fault = a[2] == 'c' ? "cut" : a[2] == 'f' ? "flap"
                      : a[2] == 'l' ? "lossy" : "slow";
            C.fault_node = atoi(v);
            C.kill_node = 0;
        } else if (!strcmp(a, "--fault-seconds"))
            C.fault_s = atoi(v);
        else if (!strcmp(a, "--loss-pct"))
            C.loss_pct = atoi(v);
        else if (!strcmp(a, "--kbps"))
            C.kbps = atoi(v);
        else if (!strcmp(a, "--call-timeout-ms"))
            C.call_timeout_ms = atoll(v);
        else if (!strcmp(a, "--soak")) {
            C.soak_s = atoi(v);
            C.kill_node = 0;
            C.fault = NULL;
        }
        else if (!strcmp(a, "--hot-stock"))
            C.hot_stock = atol(v);
        else if (!strcmp(a, "--pool-cap"))
            C.pool_cap = atoi(v);
        else if (!strcmp(a, "--proxy"))
            C.proxy = v;
        else if (!strcmp(a, "--addr-prefix"))
            C.addr_prefix = v;
        else if (!strcmp(a, "--port-base"))
            C.port_base = (unsigned)atoi(v);
        else if (!strcmp(a, "--rtt-us"))
            C.rtt_us = atoi(v);
        else if (!strcmp(a, "--proxy-port"))
            C.proxy_port = (unsigned)atoi(v);
        else
            usage();
    }
    if (!C.dir || C.clients < 1 || C.clients > MAX_CLIENTS ||
        C.duration < 1 || C.kill_node < 0 || C.kill_node > NODES ||
        (C.fault && (C.fault_node < 1 || C.fault_node > NODES ||
                     C.kill_node || C.fault_s < 1 || C.loss_pct < 1 ||
                     C.loss_pct > 100 || C.kbps < 1)) ||
        C.call_timeout_ms < 0 || C.soak_s < 0 ||
        (C.soak_s && (C.fault || C.kill_node || C.duration < 60)) ||
        C.hot_stock < 1 || C.pool_cap < 1 ||
        (C.proxy && (C.rtt_us < 0 || C.proxy_port < 1024 ||
                     C.proxy_port + NODES > 32768)))
        usage();
    for (int n = 0; n < NODES; n++)
        snprintf(sockets[n], sizeof sockets[n], "%s/n%d/mysqld.sock", C.dir,
                 n + 1);
    Dl_info dl;
    if (dladdr((void *)rsv_version, &dl) && dl.dli_fname)
        printf("galera-load: libreserve %s from %s\n", rsv_version(),
               dl.dli_fname);
    if (mysql_library_init(0, NULL, NULL)) {
        fprintf(stderr, "galera-load: mysql_library_init failed\n");
        return 2;
    }
    if (C.proxy && start_proxies()) {
        fprintf(stderr, "galera-load: the delay proxies did not start\n");
        return 2;
    }
    setup_stock();
    if (C.late_apply)
        return late_apply_check();
    long long counters[NODES][WSREP_COUNTERS];
    wsrep_counters(counters);

    for (int i = 0; i < C.clients; i++) {
        struct client *c = &clients[i];
        c->id = i;
        c->home = c->node = i % NODES;
        c->rng = ((uint64_t)C.seed << 32) ^ (uint64_t)(i + 1) * 0x9E3779B9u;
        rsv_options_init(&c->opts, RSV_OPTIONS_VERSION);
        c->opts.pool_cap = C.pool_cap;
        c->opts.flags = C.flags;
        if (C.call_timeout_ms > 0)
            c->opts.call_timeout_ms = C.call_timeout_ms;
        /* every node has clients of each kind: the one-trip procedures,
         * statements one by one (what a claim in the caller's transaction,
         * a re-reserve or the slow path send), and batches */
        c->kind = (i / NODES) % 3;
        if (c->kind == KIND_STATEMENTS)
            c->opts.flags |= TEST_OPT_STATEMENTS_ONLY;
    }
    pthread_t th[MAX_CLIENTS];
    uint64_t start = ll_now_ms();
    for (int i = 0; i < C.clients; i++)
        if (pthread_create(&th[i], NULL, client_main, &clients[i])) {
            perror("galera-load: pthread_create");
            return 2;
        }
    pthread_t sampler;
    if (C.soak_s) {
        if (pthread_create(&sampler, NULL, sampler_main, &start)) {
            perror("galera-load: pthread_create");
            return 2;
        }
        soak_faults(start);
        C.fault = NULL; /* (the faults are over: none at the end) */
    }
    /* kill a node a third in, bring it back half-way */
    uint64_t kill_at = start + (uint64_t)C.duration * 1000 / 3;
    uint64_t back_at = start + (uint64_t)C.duration * 1000 / 2;
    int killed = 0, back = 0;
    while (ll_now_ms() < start + (uint64_t)C.duration * 1000) {
        ll_sleep_ms(200);
        if (C.fault && !killed && ll_now_ms() >= kill_at) {
            run_fault(start);
            killed = back = 1;
        }
        if (C.kill_node && !killed && ll_now_ms() >= kill_at) {
            printf("galera-load: %.1f s, %ld calls: SIGKILL node %d\n",
                   (ll_now_ms() - start) / 1000.0, total_ops(), C.kill_node);
            fflush(stdout);
            atomic_store(&node_down[C.kill_node - 1], 1);
            if (cluster_cmd("kill", C.kill_node) != 0)
                problem("could not kill node %d", C.kill_node);
            killed = 1;
        }
        if (killed && !back && ll_now_ms() >= back_at) {
            printf("galera-load: %.1f s, %ld calls: restarting node %d\n",
                   (ll_now_ms() - start) / 1000.0, total_ops(), C.kill_node);
            fflush(stdout);
            if (cluster_cmd("restart", C.kill_node) != 0)
                problem("node %d did not rejoin", C.kill_node);
            atomic_store(&node_down[C.kill_node - 1], 0);
            printf("galera-load: %.1f s: node %d is synced again\n",
                   (ll_now_ms() - start) / 1000.0, C.kill_node);
            fflush(stdout);
            back = 1;
        }
    }
    atomic_store(&stop_flag, 1);
    for (int i = 0; i < C.clients; i++)
        pthread_join(th[i], NULL);
    if (C.soak_s) {
        pthread_join(sampler, NULL);
        soak_verdict();
    }
    double secs = (ll_now_ms() - start) / 1000.0;

    long ops = 0, in_txn = 0, eintxn = 0, repeats = 0, edb = 0, moved = 0,
         batches = 0;
    long codes[32] = {0};
    uint64_t deadlocks = 0, retries = 0, one_trip = 0;
    for (int i = 0; i < C.clients; i++) {
        deadlocks += clients[i].deadlocks;
        retries += clients[i].retries;
        one_trip += clients[i].one_trip;
        ops += clients[i].ops;
        in_txn += clients[i].in_txn;
        eintxn += clients[i].eintxn;
        repeats += clients[i].repeats;
        edb += clients[i].edb;
        moved += clients[i].moved;
        batches += clients[i].batches;
        for (int k = 0; k < 32; k++)
            codes[k] += clients[i].code_count[k];
    }
    printf("galera-load: %ld calls in %.1f s (%.0f/s), %ld of them batches, "
           "%d clients; repeated %ld, moved to another node %ld\n", ops,
           secs, ops / secs, batches, C.clients, repeats, moved);
    printf("galera-load: library: %llu deadlocks (conflicts) retried, %llu "
           "retries, %llu reserves in one round trip (procedures)\n",
           (unsigned long long)deadlocks, (unsigned long long)retries,
           (unsigned long long)one_trip);
    /* the mean time of a call for each kind of client, side by side in
     * one run (a batch client's calls: its batches and single calls) */
    static const char *const kind_names[] = {"procedures", "statements",
                                             "batch clients"};
    printf("galera-load: mean ms per call:");
    for (int k = 0; k < 3; k++) {
        long kops = 0;
        uint64_t us = 0;
        for (int i = 0; i < C.clients; i++)
            if (clients[i].kind == k) {
                kops += clients[i].ops;
                us += clients[i].call_us;
            }
        if (kops)
            printf(" %s %.2f", kind_names[k], (double)us / 1000.0 / kops);
    }
    if (C.proxy)
        printf(" (%d us round trip through the delay proxy)", C.rtt_us);
    printf("\n");
    /* the one-round-trip procedures are what a Galera node runs: the
     * run must have gone through them, batches included */
    int has_batch = 0;
    for (int i = 0; i < C.clients; i++)
        has_batch |= clients[i].kind == KIND_BATCH;
    if (one_trip == 0 && !(C.flags & TEST_OPT_STATEMENTS_ONLY))
        problem("no reserve went through the procedures (one round trip)");
    if (batches == 0 && has_batch)
        problem("no batch was sent");
    printf("galera-load: answers:");
    for (int k = 0; k < 32; k++)
        if (codes[k])
            printf(" %s %ld", rsv_code_name(-k) ? rsv_code_name(-k) : "?",
                   codes[k]);
    printf("\n");
    /* every call within its budget, on every node */
    long over = 0, fcodes[32] = {0};
    uint64_t max_us[NODES] = {0};
    for (int i = 0; i < C.clients; i++) {
        over += clients[i].over_budget;
        if (clients[i].max_call_us > max_us[clients[i].home])
            max_us[clients[i].home] = clients[i].max_call_us;
        for (int k = 0; k < 32; k++)
            fcodes[k] += clients[i].fault_codes[k];
    }
    printf("galera-load: longest call by home node:");
    for (int n = 0; n < NODES; n++)
        printf(" %d: %.2f s", n + 1, max_us[n] / 1e6);
    printf(" (bound %.2f s)\n", call_bound_us() / 1e6);
    if (over)
        problem("%ld calls took longer than their budget allows (%.2f s)",
                over, call_bound_us() / 1e6);
    if (C.fault) {
        printf("galera-load: answers on node %d while its links were %s:",
               C.fault_node, !strcmp(C.fault, "lossy") ? "lossy"
                             : !strcmp(C.fault, "slow") ? "slow"
                                                       : "cut");
        for (int k = 0; k < 32; k++)
            if (fcodes[k])
                printf(" %s %ld",
                       rsv_code_name(-k) ? rsv_code_name(-k) : "?",
                       fcodes[k]);
        printf("\n");
    }
    fflush(stdout);

    /* every node synced before anything is read */
    for (int n = 1; n <= NODES; n++)
        if (cluster_cmd("wait-synced", n) != 0)
            problem("node %d is not synced after the run", n);
    print_wsrep_counters(counters);
    char fps[NODES][512];
    for (int n = 0; n < NODES; n++)
        check_node(n, fps[n], sizeof fps[n]);
    for (int n = 1; n < NODES; n++)
        if (strcmp(fps[0], fps[n]) != 0)
            problem("node %d's rows differ from node 1's (%s / %s)", n + 1,
                    fps[n], fps[0]);
    check_outcomes(0);
    if (in_txn)
        problem("%ld calls left the connection inside a transaction", in_txn);
    if (eintxn)
        problem("%ld calls answered RSV_EINTXN", eintxn);
    fflush(stderr);
    if (problems) {
        printf("galera-load: FAILED, seed %u: %ld problems\n", C.seed,
               problems);
        return 1;
    }
    printf("galera-load: ok, seed %u\n", C.seed);
    return 0;
}
