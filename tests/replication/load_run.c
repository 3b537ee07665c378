/*
 * load_run.c - failover_load run: the clients and the sweeper.
 *
 * Owns the load of the failover test: client threads that reserve,
 * claim and release checkouts of one shop and log every acknowledged
 * outcome (the format is in failover_load.c), a sweeper thread, their
 * connections to whichever server of the pair is writable (found by the
 * library from a dsn of both, or, for a MYSQL of the client's own, by
 * the client), and the end
 * of the run a given time after the first outcome acknowledged by
 * another server than the first.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <reserve.h>

#include "failover.h"

#define HOT_ITEM 1
#define HOT_LOC 1
#define N_OTHER 4      /* items 2..5 */
#define N_LOCS 2       /* locations 1..2 */
#define RING 3         /* holds a client keeps open before settling them */

static const int64_t hot_stock = 200000;
static const int64_t other_stock = 50000;

static uint64_t t0_ms;

/* ms since the run started: the time in the logs */
static long run_ms(void) { return (long)(ll_now_ms() - t0_ms); }

static atomic_int stop_flag;
static atomic_long first_new_ms = -1;   /* first ack by another server */
static atomic_long last_old_ms = -1;    /* last ack by the first server */
static atomic_long acked[MAX_EP];
static atomic_long n_indoubt, n_econn, n_readonly, n_edb, n_eintxn, n_busy;
static atomic_long n_gaveup, n_notfound;

static void on_signal(int sig)
{
    (void)sig;
    atomic_store(&stop_flag, 1);
}

enum { K_RESERVE = LL_RESERVE, K_CLAIM = LL_CLAIM, K_RELEASE = LL_RELEASE };

struct client {
    int id;
    int in_place;      /* keep the context, reconnect its MYSQL in place;
                          else the context has a connection of its own,
                          from a dsn of both servers */
    int trusting;      /* do not ask a server whether it is read-only:
                          learn it from a refused write (like a client
                          behind an address that moved too early) */
    MYSQL mem;         /* the connection of an in-place client */
    MYSQL *db;
    rsv_ctx *ctx;
    int ep;            /* endpoint of the current connection */
    int connected;
    FILE *log;
    uint64_t rng;
    long seq;
    char ring[RING][TOKLEN];
    int n_ring;
};

static void lg(struct client *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(c->log, fmt, ap);
    va_end(ap);
    fputc('\n', c->log);
    if (fflush(c->log) != 0)
        die("client %d: writing its log: %s", c->id, strerror(errno));
}

static void note_ack(struct client *c)
{
    long t = run_ms();
    atomic_fetch_add(&acked[c->ep], 1);
    if (c->ep == 0) {
        long prev = atomic_load(&last_old_ms);
        while (t > prev &&
               !atomic_compare_exchange_weak(&last_old_ms, &prev, t))
            ;
    } else {
        long none = -1;
        atomic_compare_exchange_strong(&first_new_ms, &none, t);
    }
}

/* 1 if the server answers that it is read-only (a replica not yet
 * promoted), 0 if writable, -1 if the question failed. */
static int server_read_only(MYSQL *m)
{
    int64_t ro;
    if (ll_i64(m, "SELECT @@global.read_only", -1, &ro) < 0 || ro < 0)
        return -1;
    return ro != 0;
}

static void disconnect(struct client *c)
{
    if (!c->in_place) {
        /* the context stays, for rsv_reconnect; its connection is
         * replaced then */
    } else if (c->connected) {
        /* the context stays bound to &c->mem; it must not be used until
         * the handle is connected again */
        mysql_close(&c->mem);
    }
    c->connected = 0;
}

static void client_options(rsv_options *o)
{
    rsv_options_init(o, RSV_OPTIONS_VERSION);
    if (C.replica_ack)
        o->flags |= RSV_OPT_REPLICA_ACK;
}

/* The endpoint a connection is on, from its port. */
static int endpoint_of(MYSQL *m)
{
    unsigned int port = 0;
    mariadb_get_infov(m, MARIADB_CONNECTION_PORT, &port);
    for (int e = 0; e < C.n_ep; e++)
        if (C.ep_port[e] == port)
            return e;
    return 0;
}

/* A context of its own connection to the writable server of the pair:
 * rsv_open_dsn with every endpoint in the dsn, later rsv_reconnect; the
 * library passes over the read-only replica (target=writable). */
static int connect_dsn(struct client *c)
{
    uint64_t since = ll_now_ms();
    char dsn[1024], u[200], p[200];
    ll_dsn_escape(u, sizeof u, C.user);
    ll_dsn_escape(p, sizeof p, C.password ? C.password : "");
    size_t n = (size_t)snprintf(dsn, sizeof dsn, "mariadb://%s%s%s@", u,
                                C.password ? ":" : "", C.password ? p : "");
    for (int e = 0; e < C.n_ep; e++)
        n += (size_t)snprintf(dsn + n, sizeof dsn - n, "%s%s:%u",
                              e ? "," : "", C.ep_host[e], C.ep_port[e]);
    snprintf(dsn + n, sizeof dsn - n, "/%s?connect_timeout=2&"
             "read_timeout=30&write_timeout=30", C.db);
    rsv_options o;
    client_options(&o);
    for (int tries = 0;; tries++) {
        int rc;
        if (c->ctx) {
            rc = rsv_reconnect(c->ctx);
        } else if ((rc = rsv_open_dsn(&c->ctx, dsn, &o)) != RSV_OK) {
            if (tries == 0)
                fprintf(stderr, "failover_load: client %d: rsv_open_dsn: "
                                "%s\n", c->id, rsv_errmsg(c->ctx));
            rsv_close(c->ctx);
            c->ctx = NULL;
        }
        if (rc == RSV_OK) {
            c->db = rsv_connection(c->ctx);
            c->ep = endpoint_of(c->db);
            c->connected = 1;
            return 0;
        }
        if (atomic_load(&stop_flag) && tries > 3)
            return -1;
        if (ll_now_ms() - since > 60000) {
            fprintf(stderr, "failover_load: client %d: no writable server "
                            "for 60 s (%s)\n", c->id,
                    c->ctx ? rsv_errmsg(c->ctx) : "no context");
            return -1;
        }
        ll_backoff(&c->rng, tries, 20, 4); /* up to 320 ms */
    }
}

/* Connect to a writable server, trying the endpoints in turn, starting
 * with the one last used.  Returns 0, or -1 when none was found in time
 * (or the run is stopping). */
static int connect_writable(struct client *c)
{
    if (!c->in_place)
        return connect_dsn(c);
    uint64_t since = ll_now_ms();
    int ep = c->ep;
    rsv_options o;
    client_options(&o);
    for (int tries = 0;; tries++) {
        ll_server srv;
        endpoint_server(ep, &srv);
        MYSQL *m = ll_connect(c->in_place ? &c->mem : NULL, &srv, C.db,
                              NULL, 0);
        if (m && (c->trusting || server_read_only(m) == 0)) {
            c->ep = ep;
            if (!c->in_place) {
                rsv_ctx *x = NULL;
                int rc = rsv_open(&x, m, &o);
                if (rc == RSV_OK) {
                    c->db = m;
                    c->ctx = x;
                    c->connected = 1;
                    return 0;
                }
                fprintf(stderr, "failover_load: client %d: rsv_open: %s\n",
                        c->id, rsv_errmsg(x));
                rsv_close(x);
            } else {
                c->db = m;
                c->connected = 1;
                if (c->ctx)
                    return 0; /* it notices the new connection itself */
                int rc = rsv_open(&c->ctx, m, &o);
                if (rc == RSV_OK)
                    return 0;
                fprintf(stderr, "failover_load: client %d: rsv_open: %s\n",
                        c->id, rsv_errmsg(c->ctx));
                rsv_close(c->ctx);
                c->ctx = NULL;
                c->connected = 0;
            }
        }
        if (m)
            mysql_close(m);
        if (atomic_load(&stop_flag) && tries > 3)
            return -1;
        if (ll_now_ms() - since > 60000) {
            fprintf(stderr, "failover_load: client %d: no writable server "
                            "for 60 s\n", c->id);
            return -1;
        }
        ep = (ep + 1) % C.n_ep;
        ll_backoff(&c->rng, tries, 20, 4); /* up to 320 ms */
    }
}

static int reconnect(struct client *c)
{
    disconnect(c);
    return connect_writable(c);
}

/* The end of a client: the context is closed before its connection. */
static void client_finish(struct client *c)
{
    if (c->in_place) {
        rsv_close(c->ctx);
        c->ctx = NULL;
        if (c->connected)
            mysql_close(&c->mem);
        c->connected = 0;
    } else {
        rsv_close(c->ctx); /* and its connection */
        c->ctx = NULL;
        c->connected = 0;
    }
    if (c->log)
        fclose(c->log);
}

/* A statement refused because the server is read-only: the replica was
 * reached (or the primary was demoted); go and find the writable one. */
static int refused_read_only(struct client *c)
{
    return strstr(rsv_errmsg(c->ctx), "(MySQL error 1290)") != NULL ||
           strstr(rsv_errmsg(c->ctx), "read-only") != NULL;
}

/* Run a call until its outcome is known.  Returns the code, or 1 when the
 * client gave up (no writable server; the outcome stays unknown). */
static int run_call(struct client *c, const ll_call *k, int *doubt)
{
    *doubt = 0;
    int edb = 0, eintxn = 0, busy = 0;
    for (;;) {
        if (!c->connected && connect_writable(c) != 0)
            return 1;
        int rc = ll_call_once(c->ctx, k);
        if (rc == RSV_EINDOUBT || rc == RSV_ECONN) {
            /* in doubt: it may have committed; repeating it is safe (the
             * same token) and tells which */
            if (rc == RSV_EINDOUBT)
                *doubt = 1;
            atomic_fetch_add(rc == RSV_EINDOUBT ? &n_indoubt : &n_econn, 1);
            lg(c, "D %s %d %ld", rc == RSV_EINDOUBT ? "indoubt" : "econn",
               c->ep, run_ms());
            if (reconnect(c) != 0)
                return 1;
            continue;
        }
        if (rc == RSV_ENOTPRIMARY ||
            (rc == RSV_EDB && refused_read_only(c))) {
            /* nothing was applied (reserve.h): repeat it elsewhere */
            if (atomic_fetch_add(&n_readonly, 1) == 0)
                fprintf(stderr, "failover_load: client %d: first write "
                                "refused by a read-only server: %s\n",
                        c->id, rsv_errmsg(c->ctx));
            lg(c, "D readonly %d %ld", c->ep, run_ms());
            ll_sleep_ms(50 + (long)ll_rnd(&c->rng, 50));
            c->ep = (c->ep + 1) % C.n_ep;
            if (reconnect(c) != 0)
                return 1;
            continue;
        }
        if (rc == RSV_EDB && edb++ < 10) {
            /* e.g. a server still starting up; nothing was applied */
            atomic_fetch_add(&n_edb, 1);
            if (edb <= 2)
                fprintf(stderr, "failover_load: client %d: %s\n", c->id,
                        rsv_errmsg(c->ctx));
            lg(c, "D edb %d %ld", c->ep, run_ms());
            if (reconnect(c) != 0)
                return 1;
            continue;
        }
        if (rc == RSV_EINTXN && eintxn++ < 5) {
            /* the clients never open a transaction of their own, so this
             * one is the library's, left behind: counted, and reported as
             * a library problem by the driver */
            atomic_fetch_add(&n_eintxn, 1);
            fprintf(stderr, "failover_load: client %d: RSV_EINTXN: %s\n",
                    c->id, rsv_errmsg(c->ctx));
            lg(c, "D eintxn %d %ld", c->ep, run_ms());
            if (reconnect(c) != 0)
                return 1;
            continue;
        }
        if (rc == RSV_EBUSY && k->kind != K_RESERVE && busy++ < 5) {
            atomic_fetch_add(&n_busy, 1);
            continue; /* nothing was applied; a settle must happen */
        }
        return rc;
    }
}

static void log_reserve(struct client *c, const char *tok, rsv_cart *cart,
                        const uint64_t *items, int rc, int doubt)
{
    ll_alloc a[MAX_ALLOC];
    int na = rc == RSV_OK ? ll_cart_allocations(cart, items, 0, a, MAX_ALLOC)
                          : 0;
    char b[512];
    ll_format_allocations(a, na, b, sizeof b);
    lg(c, "R %s %d %d %d %ld %d%s", tok, rc, doubt, c->ep, run_ms(), na, b);
}

static void build_cart(struct client *c, rsv_cart *cart, uint64_t *items)
{
    rsv_cart_clear(cart);
    unsigned r = ll_rnd(&c->rng, 10);
    if (r < 5) { /* the hot item, one unit: the flash-sale procedure */
        uint64_t loc = HOT_LOC;
        items[0] = HOT_ITEM;
        rsv_cart_add(cart, HOT_ITEM, &loc, 1, 1, 0);
        return;
    }
    int lines = r < 8 ? 1 : 2 + (int)ll_rnd(&c->rng, 2);
    for (int l = 0; l < lines; l++) {
        uint64_t locs[N_LOCS] = {1, 2};
        if (ll_rnd(&c->rng, 2)) {
            locs[0] = 2;
            locs[1] = 1;
        }
        size_t nloc = lines == 1 ? 1 : 1 + ll_rnd(&c->rng, N_LOCS);
        items[l] = 2 + (l + ll_rnd(&c->rng, N_OTHER)) % N_OTHER;
        uint32_t fl = nloc > 1 && ll_rnd(&c->rng, 2) ? RSV_LINE_SPLIT : 0;
        rsv_cart_add(cart, items[l], locs, nloc,
                     1 + (int64_t)ll_rnd(&c->rng, 3), fl);
    }
}

/* Settle the open hold at ring slot i with a claim or a release, and
 * take it out of the ring. */
static int settle_token(struct client *c, int i, int kind)
{
    char tok[TOKLEN];
    memcpy(tok, c->ring[i], TOKLEN);
    if (i < c->n_ring - 1)
        memmove(c->ring[i], c->ring[i + 1],
                sizeof c->ring[0] * (size_t)(c->n_ring - 1 - i));
    c->n_ring--;
    ll_call k = {kind, SHOP, tok, NULL, 0};
    int doubt;
    lg(c, "a %c %s", kind == K_CLAIM ? 'c' : 'l', tok);
    int rc = run_call(c, &k, &doubt);
    if (rc == 1)
        return -1;
    note_ack(c);
    if (rc == RSV_ENOTFOUND)
        atomic_fetch_add(&n_notfound, 1);
    lg(c, "%c %s %d %d %d %ld", kind == K_CLAIM ? 'C' : 'L', tok, rc, doubt,
       c->ep, run_ms());
    return 0;
}

/* Settle the oldest open hold: payment succeeded (claim) or failed
 * (release). */
static int settle_oldest(struct client *c)
{
    return settle_token(c, 0, ll_rnd(&c->rng, 10) < 7 ? K_CLAIM : K_RELEASE);
}

static void *client_main(void *arg)
{
    struct client *c = arg;
    char path[600];
    snprintf(path, sizeof path, "%s/c%02d.log", C.logdir, c->id);
    c->log = fopen(path, "a");
    if (!c->log)
        die("%s: %s", path, strerror(errno));
    rsv_cart *cart;
    if (rsv_cart_new(&cart) != RSV_OK)
        die("out of memory");
    if (connect_writable(c) != 0)
        goto gave_up;
    while (!atomic_load(&stop_flag)) {
        char tok[TOKLEN];
        uint64_t items[4];
        /* one in ten is abandoned with a short deadline, for the sweeper
         * (its token starts with x, the others with t) */
        int abandon = ll_rnd(&c->rng, 10) == 0;
        snprintf(tok, sizeof tok, "%c%u.%d.%ld", abandon ? 'x' : 't', C.seed,
                 c->id, c->seq++);
        build_cart(c, cart, items);
        ll_call k = {K_RESERVE, SHOP, tok, cart, abandon ? 1500 : 3600000};
        int doubt;
        lg(c, "a r %s", tok);
        int rc = run_call(c, &k, &doubt);
        if (rc == 1)
            goto gave_up;
        note_ack(c);
        log_reserve(c, tok, cart, items, rc, doubt);
        if (rc == RSV_OK && !abandon) {
            memcpy(c->ring[c->n_ring++], tok, TOKLEN);
            if (c->n_ring == RING && settle_oldest(c) != 0)
                goto gave_up;
        } else if (rc != RSV_OK && doubt) {
            /* the first attempt may have committed, the repeat did not
             * hold it: release it so that no hold is left nobody knows
             * of (a release is idempotent; not found is fine); the ring
             * has room: it is never left full */
            memcpy(c->ring[c->n_ring++], tok, TOKLEN);
            if (settle_token(c, c->n_ring - 1, K_RELEASE) != 0)
                goto gave_up;
        }
        if (rc == RSV_EBUSY)
            atomic_fetch_add(&n_busy, 1);
        ll_sleep_ms((long)ll_rnd(&c->rng, 8));
    }
    /* the holds still open stay held: the check expects them */
    rsv_cart_free(cart);
    client_finish(c);
    return NULL;
gave_up:
    atomic_fetch_add(&n_gaveup, 1);
    rsv_cart_free(cart);
    client_finish(c);
    return NULL;
}

/* The sweeper: gives back the abandoned holds and folds settlements into
 * the ledger while the clients run, like a shop's periodic job. */
static void *sweeper_main(void *arg)
{
    struct client *c = arg;
    char path[600];
    snprintf(path, sizeof path, "%s/sweeper.log", C.logdir);
    c->log = fopen(path, "a");
    if (!c->log)
        die("%s: %s", path, strerror(errno));
    while (!atomic_load(&stop_flag)) {
        if (!c->connected && connect_writable(c) != 0)
            break;
        int64_t n = 0;
        int rc = rsv_sweep(c->ctx, SHOP, 0, &n);
        lg(c, "O sweep %d %" PRId64 " %d %ld", rc, n, c->ep, run_ms());
        if (rc == RSV_ECONN || rc == RSV_EINDOUBT || rc == RSV_EDB ||
            rc == RSV_EINTXN)
            disconnect(c);
        ll_sleep_ms(300);
    }
    client_finish(c);
    return NULL;
}

/* Stock for the run, set on the first endpoint through the library, and
 * written to stock.txt for the check. */
static void setup_stock(void)
{
    struct client c;
    memset(&c, 0, sizeof c);
    c.rng = 1;
    if (connect_writable(&c) != 0 || c.ep != 0)
        die("setup: the first endpoint is not writable");
    char path[600];
    snprintf(path, sizeof path, "%s/stock.txt", C.logdir);
    FILE *f = fopen(path, "w");
    if (!f)
        die("%s: %s", path, strerror(errno));
    int rc = rsv_stock_set(c.ctx, SHOP, HOT_ITEM, HOT_LOC, hot_stock);
    fprintf(f, "%d %d %" PRId64 "\n", HOT_ITEM, HOT_LOC, hot_stock);
    for (int i = 2; rc == RSV_OK && i < 2 + N_OTHER; i++)
        for (int l = 1; rc == RSV_OK && l <= N_LOCS; l++) {
            rc = rsv_stock_set(c.ctx, SHOP, (uint64_t)i, (uint64_t)l,
                               other_stock);
            fprintf(f, "%d %d %" PRId64 "\n", i, l, other_stock);
        }
    if (rc != RSV_OK)
        die("setup: rsv_stock_set: %s", rsv_errmsg(c.ctx));
    fclose(f);
    client_finish(&c);
}

int run_main(void)
{
    mkdir(C.logdir, 0755);
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    t0_ms = ll_now_ms();
    if (C.setup)
        setup_stock();
    int n = C.clients;
    struct client *cl = calloc((size_t)n + 1, sizeof *cl);
    pthread_t *th = calloc((size_t)n + 1, sizeof *th);
    if (!cl || !th)
        die("out of memory");
    for (int i = 0; i <= n; i++) {
        cl[i].id = i;
        /* half the clients keep their context across reconnects (the
         * library's documented way), half open a new one each time */
        cl[i].in_place = i % 2 == 0;
        cl[i].trusting = i % 4 >= 2;
        cl[i].rng = ((uint64_t)C.seed * 0x9E3779B97F4A7C15ULL) ^
                    ((uint64_t)(i + 1) << 32) ^ 0x5DEECE66DULL;
        if (pthread_create(&th[i], NULL, i < n ? client_main : sweeper_main,
                           &cl[i]) != 0)
            die("pthread_create failed");
    }
    fprintf(stderr, "failover_load: %d clients and a sweeper started\n", n);
    int timed_out = 0;
    for (;;) {
        ll_sleep_ms(50);
        if (atomic_load(&stop_flag))
            break;
        long now = run_ms(), f = atomic_load(&first_new_ms);
        if (!C.no_failover && f >= 0 && now >= f + C.after_failover_s * 1000L)
            break;
        if (now >= C.max_s * 1000L) {
            timed_out = !C.no_failover;
            break;
        }
        if (atomic_load(&n_gaveup) >= n)
            break;
    }
    atomic_store(&stop_flag, 1);
    for (int i = 0; i <= n; i++)
        pthread_join(th[i], NULL);
    long total = 0;
    for (int e = 0; e < C.n_ep; e++)
        total += atomic_load(&acked[e]);
    long gap = atomic_load(&first_new_ms) >= 0
                   ? atomic_load(&first_new_ms) - atomic_load(&last_old_ms)
                   : -1;
    printf("load: clients=%d seconds=%.1f acked=%ld acked_first=%ld "
           "acked_others=%ld indoubt=%ld econn=%ld readonly=%ld edb=%ld "
           "eintxn=%ld busy=%ld notfound=%ld gave_up=%ld outage_ms=%ld\n",
           n, run_ms() / 1000.0, total, atomic_load(&acked[0]),
           total - atomic_load(&acked[0]), atomic_load(&n_indoubt),
           atomic_load(&n_econn), atomic_load(&n_readonly),
           atomic_load(&n_edb), atomic_load(&n_eintxn), atomic_load(&n_busy),
           atomic_load(&n_notfound), atomic_load(&n_gaveup), gap);
    free(cl);
    free(th);
    if (timed_out) {
        fprintf(stderr, "failover_load: no outcome from another server "
                        "within %d s\n", C.max_s);
        return 1;
    }
    return atomic_load(&n_gaveup) ? 1 : 0;
}
