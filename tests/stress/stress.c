/*
 * stress.c - fault-injection stress of libreserve (make stress).
 *
 * One program, several roles, all forked from the orchestrator:
 *
 *  - clients (N processes, each its own connection through the cut proxy):
 *      mixed buyers   shop 1: multi-line carts over 6 items x 3 locations,
 *                     split lines, re-reserves of the same token, claims,
 *                     releases, abandoned holds that expire (short TTLs),
 *                     status/extend/replenish/sweep calls; a quarter of
 *                     them are "impatient" (lock_wait_timeout_s = 1,
 *                     max_retries = 1) so provoked lock waits surface as
 *                     RSV_EBUSY;
 *      flash buyers   shop 2: flash-sale rounds, one item per round with
 *                     stock at two locations, qty-1 holds with a one-hour
 *                     TTL, half of them claimed, none released, until every
 *                     flash buyer has seen "out of stock";
 *      the merchant   (slot 0) stock adjustments up and down, replenish,
 *                     sweep;
 *      batch buyers   both shops through rsv_reserve_batch (or, half
 *                     the time, rsv_reserve_cart_batch with a cart of one
 *                     line an entry), rsv_claim_batch and
 *                     rsv_release_batch: batches of
 *                     one-line checkouts with mixed outcomes (re-reserves,
 *                     a token twice, claimed, released and unknown tokens,
 *                     bad quantities and items, sold-out flash items);
 *      batcher buyers one rsv_batcher per process, a few connections
 *                     shared by several threads that reserve, claim and
 *                     release through it, often all at once.
 *    Every call's outcome is appended to the client's log after it
 *    returns ("acknowledged"), every batch entry's as if it were a call of
 *    its own; before each state-changing call (each batch entry) an
 *    attempt line is written, so a client killed mid-call leaves an
 *    attempt without an outcome (unknown: it may or may not have applied).
 *    RSV_EINDOUBT and RSV_ECONN are resolved by reconnecting and repeating
 *    the same call (claim/release/reserve are idempotent per token; a
 *    batch answered so is repeated whole, entries answered so are repeated
 *    alone); only a stock adjustment in doubt is not repeated (it is not
 *    idempotent) and is logged as unknown.
 *  - the troublemaker (one process, its own connections straight to the
 *    server socket): storms of FOR UPDATE locks held past the impatient
 *    clients' lock-wait timeout on ledger rows, checkout rows and pool
 *    rows, and deadlock storms (checkout rows then ledger rows in reverse
 *    order, against re-reserves that take them in the library's order).
 *  - the orchestrator: starts the proxy, forks the rest, injects faults on
 *    a schedule (SIGKILL a client that is inside rsv_reserve / rsv_claim,
 *    have the proxy cut commit points, every COMMIT and every CALL of a
 *    procedure alike, with a probability that follows their rate, SIGKILL
 *    mariadbd and restart it on the same data directory), advances the
 *    flash rounds, watches progress, and at the end checks the database
 *    against the logs and prints the one-line verdict.
 *
 * Two other modes reuse the same workload:
 *  - --selftest: a short run without cuts or kills, then the checks seven
 *    times: as they are (must be clean); after each of five tamperings
 *    behind the library's back, each undone before the next (a claim
 *    written into a mixed buyer's log that was never made; the same in a
 *    batch buyer's log; a batch claim's first answer made "already
 *    claimed"; pool rows inserted for a sold-out flash item; an
 *    acknowledged hold deleted), each of which must make its own counters
 *    fire and leave the others at 0; and once more when all is undone
 *    (clean again).  Shows that the checks can fail at all.
 *  - --fill PATH: fills the file system of the data directory with PATH
 *    for a while during the run (keeps it full), then removes it; the run
 *    must see the server refuse work for want of space, no client may
 *    crash or sit in one call for 30 s, and the usual checks must come out
 *    clean once the space is back.
 *
 * Run it through tests/stress/run-stress.sh (make stress / stress-quick /
 * stress-diskfull).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <mysql.h>
#include <reserve.h>
#include <reserve/batch.h>

#include "../loadlib.h"

#define MAXC 256
#define SHOP_MIX 1
#define SHOP_FLASH 2
#define NITEMS 6
#define NLOCS 3
#define FLASH_ITEM0 1000
#define FLASH_LOCS 2
/* Odd flash items sell at location 1 only (stock 0 at location 2): carts of
 * one item at one location take the reserve procedure (one round trip),
 * the even items' two-location carts send statements; both must be
 * exact. */
static int flash_locs(int f) { return f % 2 ? 1 : FLASH_LOCS; }
static int64_t flash_stock_at(int f, int l, int64_t stock)
{
    return l <= flash_locs(f) ? stock : 0;
}
#define MAX_ALLOC 32

/* What a client is doing (its slot's op): idle, one of the three calls
 * (the kinds of ll_call), or another library call. */
enum { OP_IDLE, OP_RESERVE = LL_RESERVE, OP_CLAIM = LL_CLAIM,
       OP_RELEASE = LL_RELEASE, OP_OTHER };
enum { ROLE_MIX, ROLE_FLASH, ROLE_MERCHANT, ROLE_BATCH, ROLE_BATCHER };

struct slot {
    atomic_int op;
    atomic_int pid;
    atomic_int inc;
    atomic_long ops;
    atomic_int flash_done; /* last flash round (+1) it saw sold out */
    atomic_ullong op_since; /* ll_now_ms() when op became non-idle */
    atomic_int reported;    /* a stuck call was reported */
};

#define NCODES 32 /* return codes 0..-31, counted by -code */

/* What the batch and batcher buyers saw, for the report (the logs hold
 * the outcomes).  Indexed by kind - 1: reserve, claim, release. */
struct batchst {
    atomic_long calls[3], entries[3]; /* rsv_*_batch calls, their entries */
    atomic_long indoubt;    /* whole batches answered RSV_EINDOUBT */
    atomic_long econn;      /* whole batches answered RSV_ECONN */
    atomic_long entry_lost; /* entries answered RSV_ECONN / RSV_EINDOUBT */
    atomic_long lost_mid;   /* batches answered RSV_OK with such entries */
    atomic_long repeats;    /* batch calls that repeated entries */
    /* entries of batches in doubt, looked up before the repeat: the cut
     * came after the server's COMMIT, or before it */
    atomic_long found_committed, found_not;
    atomic_long repeat_claimed; /* claims a repeat found claimed */
    atomic_long bt_calls, bt_lost; /* batcher calls; answered in doubt */
    /* mixed checkouts a batch buyer abandoned, or claimed without doubt:
     * the self-test runs until it has some of each to tamper with */
    atomic_long abandoned, claimed;
};

struct shm {
    atomic_int stop;
    atomic_int flash_round;
    atomic_long storms;
    atomic_long tm_deadlocks; /* the troublemaker was the victim */
    atomic_ullong max_call_ms; /* longest single library call */
    /* disk-full run */
    atomic_int full;            /* the data directory is being kept full */
    atomic_long full_rc[NCODES]; /* answers while it is */
    atomic_long edb_full;       /* RSV_EDB saying the disk/table is full */
    atomic_int full_msg_set;
    char full_msg[300];         /* the first such message */
    struct batchst b;
    struct slot s[MAXC];
};

static struct cfg {
    const char *sock, *srvdir, *logdir, *proxy, *mariadb_sh;
    int clients;
    long ops;
    int duration, max_duration;
    unsigned seed;
    int port;
    double kc_every, cc_every, ks_every, storm_every;
    int think_ms;
    long init_stock;
    int pool_cap;
    long flash_stock;
    int nflash;
    int storm_hold_ms;
    int batch_max; /* entries of a batch buyer's reserve batch: 2..this */
    int bt_threads, bt_conns; /* of each batcher buyer */
    int no_proxy; /* clients straight to the socket: no cuts */
    int selftest; /* --selftest: no cuts or kills; tamper, check, undo */
    const char *fill; /* --fill PATH: the disk-full run's filler file */
    double fill_at, fill_for; /* when (s from the start), how long */
} C;

static struct shm *shm;

/* ------------------------------------------------------------------ */
/* Clients                                                            */
/* ------------------------------------------------------------------ */

struct cl {
    int slot, inc, role, impatient;
    rsv_options opts;
    MYSQL *db;
    rsv_ctx *ctx;     /* NULL in a batcher buyer's threads */
    rsv_batcher *bt;  /* theirs */
    int thread;       /* a batcher buyer's thread: 1, 2, ... */
    int logfd;
    uint64_t rng;
    long seq;
    long edb_logged;
};

/* The client of this thread: a batcher buyer's threads each log apart. */
static _Thread_local struct cl *me;

static void lg(const char *fmt, ...)
{
    char b[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b, sizeof b - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (n > (int)sizeof b - 2)
        n = (int)sizeof b - 2;
    b[n++] = '\n';
    if (write(me->logfd, b, (size_t)n) != n) {
        perror("stress: client log");
        _exit(4);
    }
    if (b[0] >= 'A' && b[0] <= 'Z' && b[0] != 'D' && b[0] != 'F')
        atomic_fetch_add(&shm->s[me->slot].ops, 1);
}

static MYSQL *raw_connect(const char *host, int port, const char *sock,
                          unsigned read_timeout)
{
    ll_server srv = {.host = host, .port = (unsigned)port, .socket = sock,
                     .connect_timeout_s = 5, .rw_timeout_s = read_timeout};
    return ll_connect(NULL, &srv, "stress", NULL, 0);
}

static void cl_connect(struct cl *c)
{
    for (int tries = 0;; tries++) {
        MYSQL *m = C.no_proxy ? raw_connect(NULL, 0, C.sock, 120)
                              : raw_connect("127.0.0.1", C.port, NULL, 120);
        if (m) {
            rsv_ctx *x = NULL;
            int rc = rsv_open(&x, m, &c->opts);
            if (rc == RSV_OK) {
                c->db = m;
                c->ctx = x;
                return;
            }
            rsv_close(x);
            mysql_close(m);
        }
        if (atomic_load(&shm->stop) && tries > 100)
            _exit(0); /* shutting down and the server is not back */
        if (tries > 1200) {
            fprintf(stderr, "stress: client %d cannot connect for minutes\n",
                    c->slot);
            _exit(3);
        }
        ll_backoff(&c->rng, tries, 10, 6);
    }
}

static void cl_reconnect(struct cl *c)
{
    rsv_close(c->ctx);
    if (c->db)
        mysql_close(c->db);
    c->ctx = NULL;
    c->db = NULL;
    cl_connect(c);
}

/* Does a message say the disk or a table is full (1114 "The table ... is
 * full", 1021 "Disk full", errno 28 "No space left on device")? */
static int says_full(const char *msg)
{
    return msg && (strcasestr(msg, "full") || strcasestr(msg, "space"));
}

/* Every answer: the longest call, what was answered while the disk was
 * full, and the database errors that said so. */
static void note_answer(struct cl *c, int rc, uint64_t since)
{
    uint64_t ms = ll_now_ms() - since;
    unsigned long long mx = atomic_load(&shm->max_call_ms);
    while (ms > mx && !atomic_compare_exchange_weak(&shm->max_call_ms, &mx, ms))
        ;
    if (atomic_load(&shm->full) && rc <= 0 && rc > -NCODES)
        atomic_fetch_add(&shm->full_rc[-rc], 1);
    /* (the batcher keeps no message) */
    if (rc != RSV_EDB || !c->ctx || !says_full(rsv_errmsg(c->ctx)))
        return;
    atomic_fetch_add(&shm->edb_full, 1);
    int z = 0;
    if (atomic_compare_exchange_strong(&shm->full_msg_set, &z, 1))
        snprintf(shm->full_msg, sizeof shm->full_msg, "%s",
                 rsv_errmsg(c->ctx));
}

/* Run a call until its outcome is known: after RSV_EINDOUBT / RSV_ECONN
 * reconnect and repeat it (idempotent per token). */
static int run_call(struct cl *c, ll_call *k, int *doubt)
{
    *doubt = 0;
    static const char *names[] = {"", "reserve", "claim", "release"};
    for (int attempt = 0;; attempt++) {
        uint64_t since = ll_now_ms();
        atomic_store(&shm->s[c->slot].op_since, since);
        atomic_store(&shm->s[c->slot].op, k->kind);
        int rc = ll_call_once(c->ctx, k);
        atomic_store(&shm->s[c->slot].op, OP_IDLE);
        note_answer(c, rc, since);
        if (rc == RSV_EINDOUBT) {
            *doubt = 1;
            lg("D %s %s", names[k->kind], k->tok);
            cl_reconnect(c);
            continue;
        }
        if (rc == RSV_ECONN) {
            lg("D econn %s", k->tok);
            cl_reconnect(c);
            continue;
        }
        if (rc == RSV_EINTXN && attempt < 20) {
            /* Clients never open transactions of their own, so this is the
             * library's: after a connection lost during a COMMIT whose
             * failure it swallowed (the refill after a reserve), the
             * client-side status still says "in transaction" and every
             * later call is refused.  Do what the code asks (roll back),
             * which shows the connection is gone, and count it: the run
             * fails on it. */
            lg("D eintxn %s", k->tok);
            if (mysql_query(c->db, "ROLLBACK") != 0)
                cl_reconnect(c);
            continue;
        }
        if (rc == RSV_EDB && attempt < 20) {
            /* e.g. the server refusing work during crash recovery; nothing
             * was applied (reserve.h), so repeating is safe */
            if (c->edb_logged++ < 3)
                fprintf(stderr, "stress: client %d %s: %s\n", c->slot,
                        names[k->kind], rsv_errmsg(c->ctx));
            lg("D edb %s", k->tok);
            /* a moment for the server (recovery, or a full disk) */
            ll_sleep_ms(20 + (long)ll_rnd(&c->rng, 100));
            cl_reconnect(c);
            continue;
        }
        return rc;
    }
}

/* Log the outcome of a reserve, with its allocation. */
static void log_reserve(struct cl *c, const char *tok, rsv_cart *cart,
                        const uint64_t *items, int rc, int doubt)
{
    (void)c;
    ll_alloc a[MAX_ALLOC];
    int na = rc == RSV_OK ? ll_cart_allocations(cart, items, 1, a, MAX_ALLOC)
                          : 0;
    char b[900];
    ll_format_allocations(a, na, b, sizeof b);
    lg("R %s %d %d %d%s", tok, rc, doubt, na, b);
}

static void shuffle_locs(struct cl *c, uint64_t *locs, int n, int base)
{
    for (int i = 0; i < n; i++)
        locs[i] = (uint64_t)(base + i);
    for (int i = n - 1; i > 0; i--) {
        int j = (int)ll_rnd(&c->rng, (unsigned)i + 1);
        uint64_t t = locs[i];
        locs[i] = locs[j];
        locs[j] = t;
    }
}

static void build_cart(struct cl *c, rsv_cart *cart, uint64_t *items)
{
    rsv_cart_clear(cart);
    /* a third are one line at one location: the one-round-trip path for
     * a new token */
    int single = ll_rnd(&c->rng, 3) == 0;
    int nl = single ? 1 : 1 + (int)ll_rnd(&c->rng, 4);
    for (int l = 0; l < nl; l++) {
        uint64_t locs[NLOCS];
        shuffle_locs(c, locs, NLOCS, 1);
        int nloc = single ? 1 : 1 + (int)ll_rnd(&c->rng, NLOCS);
        items[l] = 1 + ll_rnd(&c->rng, NITEMS);
        uint32_t fl = ll_rnd(&c->rng, 3) == 0 ? RSV_LINE_SPLIT : 0;
        rsv_cart_add(cart, items[l], locs, (size_t)nloc,
                     1 + (int64_t)ll_rnd(&c->rng, 3), fl);
    }
}

static void think(struct cl *c, int ms)
{
    if (ms > 0)
        ll_sleep_ms((long)ll_rnd(&c->rng, (unsigned)ms * 2 + 1));
}

/* A settle call (claim or release) with logging. */
static int settle(struct cl *c, uint64_t shop, const char *tok, int kind)
{
    ll_call k = {kind, shop, tok, NULL, 0};
    int doubt;
    lg("a %c %s", kind == OP_CLAIM ? 'c' : 'l', tok);
    int rc = run_call(c, &k, &doubt);
    lg("%c %s %d %d", kind == OP_CLAIM ? 'C' : 'L', tok, rc, doubt);
    return rc;
}

/* Reserve with logging; a reserve in doubt whose repeat did not succeed
 * leaves the token in an unknown state: release it to settle it. */
static int reserve(struct cl *c, uint64_t shop, const char *tok,
                   rsv_cart *cart, const uint64_t *items, int64_t ttl,
                   int cleanup)
{
    ll_call k = {OP_RESERVE, shop, tok, cart, ttl};
    int doubt;
    lg("a r %s", tok);
    int rc = run_call(c, &k, &doubt);
    log_reserve(c, tok, cart, items, rc, doubt);
    if (rc != RSV_OK && doubt && cleanup)
        settle(c, shop, tok, OP_RELEASE);
    return rc;
}

/* The answer of a call made in the argument list (no duration). */
static void other(struct cl *c, const char *name, int rc)
{
    note_answer(c, rc, ll_now_ms());
    lg("O %s %d", name, rc);
    if (rc == RSV_EINTXN) {
        lg("D eintxn -");
        if (mysql_query(c->db, "ROLLBACK") != 0)
            cl_reconnect(c);
    }
    if (rc == RSV_ECONN || rc == RSV_EINDOUBT || rc == RSV_EDB)
        cl_reconnect(c);
}

static void flow_mix(struct cl *c, rsv_cart *cart)
{
    char tok[64];
    uint64_t items[8];
    snprintf(tok, sizeof tok, "m%d.%d.%ld", c->slot, c->inc, c->seq++);
    build_cart(c, cart, items);
    int64_t ttl = ll_rnd(&c->rng, 5) == 0 ? 800 + ll_rnd(&c->rng, 1500) : 30000;
    int rc = reserve(c, SHOP_MIX, tok, cart, items, ttl, 1);
    if (rc != RSV_OK)
        return;
    if (ll_rnd(&c->rng, 5) == 0) { /* the cart changed: re-reserve */
        think(c, C.think_ms / 2);
        build_cart(c, cart, items);
        rc = reserve(c, SHOP_MIX, tok, cart, items, ttl, 1);
        if (rc != RSV_OK && rc != RSV_EOUTOFSTOCK && rc != RSV_EBUSY)
            return;
    }
    think(c, C.think_ms);
    unsigned r = ll_rnd(&c->rng, 100);
    if (r < 8) {
        int32_t st;
        int64_t units, exp;
        other(c, "status", rsv_checkout_status(c->ctx, SHOP_MIX, tok,
                                               strlen(tok), &st, &units,
                                               &exp));
    } else if (r < 14) {
        other(c, "extend", rsv_extend(c->ctx, SHOP_MIX, tok, strlen(tok),
                                      20000));
    }
    r = ll_rnd(&c->rng, 100);
    if (r < 60) {
        rc = settle(c, SHOP_MIX, tok, OP_CLAIM);
        if (rc == RSV_EBUSY)
            settle(c, SHOP_MIX, tok, OP_RELEASE);
    } else if (r < 85) {
        settle(c, SHOP_MIX, tok, OP_RELEASE);
    } /* else: abandoned, it expires */
    if (ll_rnd(&c->rng, 100) == 0) {
        int64_t n;
        other(c, "sweep", rsv_sweep(c->ctx, SHOP_MIX, 0, &n));
    } else if (ll_rnd(&c->rng, 50) == 0) {
        int64_t n;
        other(c, "replenish",
              rsv_replenish(c->ctx, SHOP_MIX, 1 + ll_rnd(&c->rng, NITEMS),
                            1 + ll_rnd(&c->rng, NLOCS), &n));
    }
}

static void flow_flash(struct cl *c, rsv_cart *cart)
{
    int round = atomic_load(&shm->flash_round);
    struct slot *s = &shm->s[c->slot];
    if (round >= C.nflash || atomic_load(&s->flash_done) > round) {
        ll_sleep_ms(20);
        return;
    }
    uint64_t item = FLASH_ITEM0 + (uint64_t)round;
    char tok[64];
    uint64_t items[1] = {item}, locs[FLASH_LOCS];
    snprintf(tok, sizeof tok, "f%d.%d.%ld", c->slot, c->inc, c->seq++);
    int nloc = flash_locs(round);
    shuffle_locs(c, locs, nloc, 1);
    rsv_cart_clear(cart);
    rsv_cart_add(cart, item, locs, (size_t)nloc, 1, 0);
    /* no clean-up release: nothing is ever released in a flash sale */
    int rc = reserve(c, SHOP_FLASH, tok, cart, items, 3600000, 0);
    if (rc == RSV_EOUTOFSTOCK) {
        lg("F %llu", (unsigned long long)item);
        atomic_store(&s->flash_done, round + 1);
        return;
    }
    if (rc == RSV_OK && ll_rnd(&c->rng, 2) == 0) {
        think(c, C.think_ms / 10);
        settle(c, SHOP_FLASH, tok, OP_CLAIM);
    }
    think(c, C.think_ms / 4);
}

static void flow_merchant(struct cl *c)
{
    uint64_t item = 1 + ll_rnd(&c->rng, NITEMS);
    uint64_t loc = 1 + ll_rnd(&c->rng, NLOCS);
    int64_t on_hand, held, pooled, avail;
    int rc = rsv_stock_get(c->ctx, SHOP_MIX, item, loc, &on_hand, &held,
                           &pooled, &avail);
    other(c, "stock_get", rc);
    if (rc == RSV_OK) {
        int64_t delta = 0;
        if (avail < 120)
            delta = 100 + ll_rnd(&c->rng, 200);
        else if (ll_rnd(&c->rng, 4) == 0)
            delta = -(int64_t)(1 + ll_rnd(&c->rng, 8));
        if (delta) {
            lg("a s %llu %llu %lld", (unsigned long long)item,
               (unsigned long long)loc, (long long)delta);
            uint64_t since = ll_now_ms();
            atomic_store(&shm->s[c->slot].op_since, since);
            atomic_store(&shm->s[c->slot].op, OP_OTHER);
            rc = rsv_stock_adjust(c->ctx, SHOP_MIX, item, loc, delta, NULL);
            atomic_store(&shm->s[c->slot].op, OP_IDLE);
            note_answer(c, rc, since);
            /* not idempotent: an adjustment in doubt is not repeated, it
             * stays unknown to the checker */
            lg("S %llu %llu %lld %d", (unsigned long long)item,
               (unsigned long long)loc, (long long)delta, rc);
            if (rc == RSV_EINTXN) {
                lg("D eintxn -");
                if (mysql_query(c->db, "ROLLBACK") != 0)
                    cl_reconnect(c);
            }
            if (rc == RSV_ECONN || rc == RSV_EINDOUBT || rc == RSV_EDB)
                cl_reconnect(c);
        }
    }
    if (ll_rnd(&c->rng, 10) == 0) {
        int64_t n;
        other(c, "sweep", rsv_sweep(c->ctx, ll_rnd(&c->rng, 2) ? SHOP_MIX
                                                            : SHOP_FLASH,
                                    0, &n));
    }
    if (ll_rnd(&c->rng, 5) == 0) {
        int64_t n;
        other(c, "replenish",
              rsv_replenish(c->ctx, SHOP_MIX, 1 + ll_rnd(&c->rng, NITEMS),
                            1 + ll_rnd(&c->rng, NLOCS), &n));
    }
    if (ll_rnd(&c->rng, 8) == 0) {
        /* pools given back while buyers take from them: the flash item of
         * the running round too, whose buyers must never be told "sold
         * out" while its units sit in the ledger row */
        int64_t n;
        int round = atomic_load(&shm->flash_round);
        if (ll_rnd(&c->rng, 2) && round < C.nflash)
            other(c, "pool_drain",
                  rsv_pool_drain(c->ctx, SHOP_FLASH,
                                 FLASH_ITEM0 + (uint64_t)round, 1, &n));
        else
            other(c, "pool_drain",
                  rsv_pool_drain(c->ctx, SHOP_MIX, 1 + ll_rnd(&c->rng, NITEMS),
                                 1 + ll_rnd(&c->rng, NLOCS), &n));
    }
    think(c, C.think_ms);
}

/* ---- batch buyers ---- */

/* Entries of one batch call: a reserve batch (up to C.batch_max entries),
 * or a settle batch of its checkouts, the claims refused as busy and a
 * few extra tokens. */
#define BATCH_CAP 48
#define BATCH_TOK 48

struct bent {
    char tok[BATCH_TOK];
    uint64_t shop, item, loc;
    int64_t qty;
    int first; /* the token's first entry in this batch */
    int probe; /* looked up when the batch is in doubt (see bat_probe) */
    int old;   /* a token of an earlier batch: its OLD_* state, else -1 */
    int big;   /* more units than the batch statement takes: released */
    int rc, doubt, pending;
};

struct bat {
    int kind; /* OP_RESERVE, OP_CLAIM, OP_RELEASE */
    int carts; /* OP_RESERVE: sent as rsv_reserve_cart_batch, each entry
                  a cart of its one line (the same outcomes) */
    int64_t ttl_ms;
    int n;
    struct bent e[BATCH_CAP];
};

static struct bent *bat_add(struct bat *b, uint64_t shop, const char *tok)
{
    struct bent *e = &b->e[b->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->tok, sizeof e->tok, "%s", tok);
    e->shop = shop;
    e->old = -1;
    e->first = 1;
    for (int i = 0; i < b->n - 1; i++)
        if (b->e[i].shop == shop && !strcmp(b->e[i].tok, tok))
            e->first = 0;
    return e;
}

/* An entry's acknowledged outcome, in the single calls' format. */
static void bat_log(const struct bat *b, const struct bent *e)
{
    if (b->kind == OP_RESERVE && e->rc == RSV_OK)
        lg("R %s %d %d 1 %llu:%llu:%lld", e->tok, e->rc, e->doubt,
           (unsigned long long)e->item, (unsigned long long)e->loc,
           (long long)e->qty);
    else if (b->kind == OP_RESERVE)
        lg("R %s %d %d 0", e->tok, e->rc, e->doubt);
    else
        lg("%c %s %d %d", b->kind == OP_CLAIM ? 'C' : 'L', e->tok, e->rc,
           e->doubt);
}

/* A batch in doubt, on its new connection before it is repeated: which
 * entries had committed (the cut came after the server's COMMIT) and
 * which had not.  Only where the status tells: a new checkout exists or
 * not, a held checkout is claimed (released) or not. */
static void bat_probe(struct cl *c, const struct bat *b)
{
    int want = b->kind == OP_CLAIM ? RSV_STATUS_CLAIMED : RSV_STATUS_RELEASED;
    for (int i = 0; i < b->n; i++) {
        const struct bent *e = &b->e[i];
        if (!e->pending || !e->first || !e->probe)
            continue;
        int32_t st = 0;
        int64_t units, exp;
        int rc = rsv_checkout_status(c->ctx, e->shop, e->tok, strlen(e->tok),
                                     &st, &units, &exp);
        if (rc == RSV_OK || rc == RSV_ENOTFOUND) {
            int done = rc == RSV_OK && (b->kind == OP_RESERVE || st == want);
            atomic_fetch_add(done ? &shm->b.found_committed : &shm->b.found_not,
                             1);
        } else if (rc == RSV_ECONN || rc == RSV_EINDOUBT || rc == RSV_EDB ||
                   rc == RSV_EINTXN) {
            cl_reconnect(c);
            return;
        }
    }
}

/* A reserve batch as rsv_reserve_cart_batch: each entry a cart of its one
 * line, which every entry answers as it would in rsv_reserve_batch. */
static int cart_batch(struct cl *c, size_t m, const uint64_t *shop,
                      const void *const *tok, const size_t *len,
                      const uint64_t *item, const uint64_t *loc,
                      const int64_t *qty, int64_t ttl_ms, int *res)
{
    rsv_cart *carts[BATCH_CAP] = {NULL};
    int rc = RSV_OK;
    for (size_t i = 0; i < m && rc == RSV_OK; i++)
        if ((rc = rsv_cart_new(&carts[i])) == RSV_OK)
            rc = rsv_cart_add(carts[i], item[i], &loc[i], 1, qty[i], 0);
    if (rc == RSV_OK)
        rc = rsv_reserve_cart_batch(c->ctx, m, shop, tok, len, carts, ttl_ms,
                                    res);
    else {
        fprintf(stderr, "stress: client %d: a cart of a batch: %s\n",
                c->slot, rsv_code_name(rc));
        for (size_t i = 0; i < m; i++)
            res[i] = rc; /* (as the library answers a whole batch) */
    }
    for (size_t i = 0; i < m; i++)
        rsv_cart_free(carts[i]);
    return rc;
}

/* Send a batch until every entry's outcome is known, the way reserve.h
 * tells users to: a batch answered RSV_EINDOUBT or RSV_ECONN as a whole is
 * repeated whole on a new connection, entries answered so (those run
 * alone after the connection was lost) are repeated alone; every entry is
 * idempotent by its token.  Each round logs the entries it decided, in
 * the batch's order, which is the order the library decides a token's
 * entries in; an entry repeated later is logged later. */
static void batch_run(struct cl *c, struct bat *b)
{
    static const char att[] = {0, 'r', 'c', 'l'};
    static const char *const what[] = {"", "reserve", "claim", "release"};
    static const char *const bname[] = {"", "rbatch", "cbatch", "lbatch"};
    static uint64_t shop[BATCH_CAP], item[BATCH_CAP], loc[BATCH_CAP];
    static const void *tok[BATCH_CAP];
    static size_t len[BATCH_CAP];
    static int64_t qty[BATCH_CAP];
    static int res[BATCH_CAP], map[BATCH_CAP];
    atomic_fetch_add(&shm->b.calls[b->kind - 1], 1);
    atomic_fetch_add(&shm->b.entries[b->kind - 1], b->n);
    /* one attempt line per entry, however often it is sent: an entry
     * repeated is the same attempt until it is answered */
    for (int i = 0; i < b->n; i++) {
        b->e[i].pending = 1;
        b->e[i].doubt = 0;
        lg("a %c %s", att[b->kind], b->e[i].tok);
    }
    for (int round = 0;; round++) {
        int m = 0;
        for (int i = 0; i < b->n; i++) {
            struct bent *e = &b->e[i];
            if (!e->pending)
                continue;
            map[m] = i;
            shop[m] = e->shop;
            tok[m] = e->tok;
            len[m] = strlen(e->tok);
            item[m] = e->item;
            loc[m] = e->loc;
            qty[m] = e->qty;
            m++;
        }
        if (m == 0)
            return;
        if (round > 0)
            atomic_fetch_add(&shm->b.repeats, 1);
        uint64_t since = ll_now_ms();
        atomic_store(&shm->s[c->slot].op_since, since);
        atomic_store(&shm->s[c->slot].op, b->kind);
        int rc;
        if (b->kind == OP_RESERVE && b->carts)
            rc = cart_batch(c, (size_t)m, shop, tok, len, item, loc, qty,
                            b->ttl_ms, res);
        else if (b->kind == OP_RESERVE)
            rc = rsv_reserve_batch(c->ctx, (size_t)m, shop, tok, len, item,
                                   loc, qty, b->ttl_ms, res);
        else if (b->kind == OP_CLAIM)
            rc = rsv_claim_batch(c->ctx, (size_t)m, shop, tok, len, res);
        else
            rc = rsv_release_batch(c->ctx, (size_t)m, shop, tok, len, res);
        atomic_store(&shm->s[c->slot].op, OP_IDLE);
        note_answer(c, rc, since);
        if (rc == RSV_EINDOUBT) {
            lg("D %s %d", bname[b->kind], m);
            atomic_fetch_add(&shm->b.indoubt, 1);
            for (int j = 0; j < m; j++)
                b->e[map[j]].doubt = 1;
            cl_reconnect(c);
            /* the cut CALL may still run on the server: a moment first */
            ll_sleep_ms(100);
            bat_probe(c, b);
            continue;
        }
        if (rc == RSV_ECONN) {
            lg("D econn %s", bname[b->kind]);
            atomic_fetch_add(&shm->b.econn, 1);
            cl_reconnect(c);
            continue;
        }
        if (rc == RSV_EINTXN && round < 20) {
            /* as in run_call: counted, and the run fails on it */
            lg("D eintxn %s", bname[b->kind]);
            if (mysql_query(c->db, "ROLLBACK") != 0)
                cl_reconnect(c);
            continue;
        }
        if (rc == RSV_EDB && round < 20) {
            /* nothing applied (reserve.h): repeat, as run_call does */
            if (c->edb_logged++ < 3)
                fprintf(stderr, "stress: client %d %s: %s\n", c->slot,
                        bname[b->kind], rsv_errmsg(c->ctx));
            lg("D edb %s", bname[b->kind]);
            ll_sleep_ms(20 + (long)ll_rnd(&c->rng, 100));
            cl_reconnect(c);
            continue;
        }
        if (rc != RSV_OK && rc != RSV_EBUSY && c->edb_logged++ < 3)
            fprintf(stderr, "stress: client %d %s of %d: %s: %s\n", c->slot,
                    bname[b->kind], m, rsv_code_name(rc), rsv_errmsg(c->ctx));
        /* RSV_OK: every entry's own code; else the whole batch's code in
         * every entry (RSV_EBUSY: nothing applied) */
        int lost = 0;
        for (int j = 0; j < m; j++) {
            struct bent *e = &b->e[map[j]];
            int r = res[j];
            if (rc == RSV_OK &&
                (r == RSV_EINDOUBT || r == RSV_ECONN ||
                 ((r == RSV_EDB || r == RSV_EINTXN) && round < 20))) {
                if (r == RSV_EINDOUBT) {
                    e->doubt = 1;
                    lg("D %s %s", what[b->kind], e->tok);
                } else {
                    lg("D %s %s", r == RSV_ECONN ? "econn"
                                  : r == RSV_EDB ? "edb" : "eintxn",
                       e->tok);
                }
                lost++;
                continue;
            }
            e->rc = r;
            e->pending = 0;
            bat_log(b, e);
            /* a claim of a held checkout, in doubt, that the repeat finds
             * claimed: it had committed before the cut */
            if (b->kind == OP_CLAIM && e->doubt && e->first && e->old < 0 &&
                r == RSV_ECLAIMED)
                atomic_fetch_add(&shm->b.repeat_claimed, 1);
        }
        if (lost) {
            atomic_fetch_add(&shm->b.entry_lost, lost);
            atomic_fetch_add(&shm->b.lost_mid, 1);
            cl_reconnect(c);
        }
    }
}

/* Tokens of earlier batches, by the state they were left in, for the
 * outcomes of checkouts in that state: an abandoned hold is reserved
 * again (a re-reserve, held or expired), a claimed checkout reserved or
 * released again (RSV_ECLAIMED), a released one claimed (RSV_ERELEASED). */
enum { OLD_HELD, OLD_CLAIMED, OLD_RELEASED, OLD_STATES };
#define OLD_N 8
static char old_tok[OLD_STATES][OLD_N][BATCH_TOK];
static unsigned old_next[OLD_STATES];

static void old_put(int state, const char *tok)
{
    snprintf(old_tok[state][old_next[state]++ % OLD_N], BATCH_TOK, "%s", tok);
}

/* Take a token left in `state` (removed: its state is about to change),
 * or NULL. */
static const char *old_take(struct cl *c, int state, char *out)
{
    unsigned j = ll_rnd(&c->rng, OLD_N);
    for (unsigned k = 0; k < OLD_N; k++) {
        char *t = old_tok[state][(j + k) % OLD_N];
        if (t[0]) {
            snprintf(out, BATCH_TOK, "%s", t);
            t[0] = 0;
            return out;
        }
    }
    return NULL;
}

/* One reserve batch, then the claim and release batches of its
 * checkouts.  Mixed shop entries take 1-3 units of any item and
 * location; with a flash round running, a third of the batches also hold
 * one unit each of the round's item (never released, as in a flash
 * sale).  Some entries give the other outcomes a batch must keep apart:
 * a token twice (the second re-reserves), a token of an earlier batch, a
 * quantity of 0 or one above what the batch statement takes, an unknown
 * item. */
static void flow_batch(struct cl *c)
{
    static struct bat rb, cb, lb;
    char tok[BATCH_TOK];
    memset(&rb, 0, sizeof rb);
    rb.kind = OP_RESERVE;
    int round = atomic_load(&shm->flash_round);
    int flash = round < C.nflash && ll_rnd(&c->rng, 3) == 0;
    uint64_t fitem = FLASH_ITEM0 + (uint64_t)round;
    rb.ttl_ms = flash                      ? 3600000
                : ll_rnd(&c->rng, 5) == 0 ? 800 + ll_rnd(&c->rng, 1500)
                                          : 30000;
    int n = 2 + (int)ll_rnd(&c->rng, (unsigned)C.batch_max - 1);
    for (int i = 0; i < n; i++) {
        struct bent *e;
        if (flash && i % 2 == 0) {
            snprintf(tok, sizeof tok, "bf%d.%d.%ld", c->slot, c->inc,
                     c->seq++);
            e = bat_add(&rb, SHOP_FLASH, tok);
            e->item = fitem;
            e->loc = 1 + ll_rnd(&c->rng, (unsigned)flash_locs(round));
            e->qty = 1;
            e->probe = 1;
            continue;
        }
        unsigned r = ll_rnd(&c->rng, 100);
        int state = -1;
        if (r < 5 && i > 0 && rb.e[i - 1].shop == SHOP_MIX &&
            rb.e[i - 1].old < 0) {
            e = bat_add(&rb, SHOP_MIX, rb.e[i - 1].tok); /* the same token */
        } else if (r < 10 && old_take(c, OLD_HELD, tok)) {
            e = bat_add(&rb, SHOP_MIX, tok);
            state = OLD_HELD;
        } else if (r < 12 && old_take(c, OLD_CLAIMED, tok)) {
            e = bat_add(&rb, SHOP_MIX, tok);
            state = OLD_CLAIMED;
        } else {
            snprintf(tok, sizeof tok, "bm%d.%d.%ld", c->slot, c->inc,
                     c->seq++);
            e = bat_add(&rb, SHOP_MIX, tok);
            e->probe = 1;
        }
        e->old = state;
        e->item = 1 + ll_rnd(&c->rng, NITEMS);
        e->loc = 1 + ll_rnd(&c->rng, NLOCS);
        e->qty = 1 + (int64_t)ll_rnd(&c->rng, 3);
        /* refused by its arguments, or run alone: on new tokens only,
         * which must then not exist */
        if (e->probe && r >= 95) {
            if (r < 97)
                e->qty = 0;     /* RSV_EQUANTITY */
            else if (r < 99)
                e->item = 99;   /* RSV_ENOITEM */
            else
                e->qty = 65;    /* more than the batch statement takes */
            e->big = e->qty == 65;
        }
    }
    /* half the batches without a quantity of 0 (which no cart line takes)
     * as batches of carts */
    rb.carts = ll_rnd(&c->rng, 2) == 0;
    for (int i = 0; i < rb.n; i++)
        rb.carts &= rb.e[i].qty > 0;
    batch_run(c, &rb);
    int said_soldout = 0;
    for (int i = 0; i < rb.n; i++) {
        const struct bent *e = &rb.e[i];
        /* a one-location round: "out of stock" there means sold out */
        if (e->shop == SHOP_FLASH && e->rc == RSV_EOUTOFSTOCK &&
            flash_locs(round) == 1 && !said_soldout++)
            lg("F %llu", (unsigned long long)fitem);
    }
    think(c, C.think_ms);

    memset(&cb, 0, sizeof cb);
    memset(&lb, 0, sizeof lb);
    cb.kind = OP_CLAIM;
    lb.kind = OP_RELEASE;
    for (int i = 0; i < rb.n; i++) {
        const struct bent *e = &rb.e[i];
        int last = 1, ok = 0, unknown = 0, big = 0;
        for (int j = 0; j < rb.n; j++) {
            const struct bent *o = &rb.e[j];
            if (o->shop != e->shop || strcmp(o->tok, e->tok))
                continue;
            last &= j <= i;
            ok |= o->rc == RSV_OK;
            unknown |= o->doubt && o->rc != RSV_OK;
            big |= o->big && o->rc == RSV_OK;
        }
        if (!last) /* each checkout once, after its last entry */
            continue;
        if (e->shop == SHOP_FLASH) {
            if (ok && ll_rnd(&c->rng, 2) == 0)
                bat_add(&cb, e->shop, e->tok)->probe = 1;
            continue;
        }
        if (unknown) { /* settled by a release, as reserve() does */
            bat_add(&lb, e->shop, e->tok);
            continue;
        }
        if (!ok && e->old != OLD_HELD) {
            if (e->old == OLD_CLAIMED)
                old_put(OLD_CLAIMED, e->tok);
            continue;
        }
        unsigned r = ll_rnd(&c->rng, 100);
        if (big || (r >= 60 && r < 85))
            bat_add(&lb, e->shop, e->tok)->probe = 1;
        else if (r < 60)
            bat_add(&cb, e->shop, e->tok)->probe = 1;
        else {
            old_put(OLD_HELD, e->tok); /* abandoned: it expires */
            if (ok)
                atomic_fetch_add(&shm->b.abandoned, 1);
        }
    }
    if (cb.n > 0 && ll_rnd(&c->rng, 6) == 0) /* a token twice */
        bat_add(&cb, cb.e[0].shop, cb.e[0].tok);
    if (ll_rnd(&c->rng, 5) == 0 && old_take(c, OLD_RELEASED, tok))
        bat_add(&cb, SHOP_MIX, tok)->old = OLD_RELEASED;
    if (ll_rnd(&c->rng, 5) == 0) { /* never reserved */
        snprintf(tok, sizeof tok, "bm%d.%d.%ld.none", c->slot, c->inc,
                 c->seq++);
        bat_add(&cb, SHOP_MIX, tok);
    }
    if (cb.n > 0) {
        batch_run(c, &cb);
        for (int i = 0; i < cb.n; i++) {
            const struct bent *e = &cb.e[i];
            if (!e->first || e->shop != SHOP_MIX)
                continue;
            if (e->rc == RSV_OK && !e->doubt)
                atomic_fetch_add(&shm->b.claimed, 1);
            if (e->rc == RSV_EBUSY) /* as flow_mix: give the units back */
                bat_add(&lb, e->shop, e->tok);
            else if (e->rc == RSV_OK || e->rc == RSV_ECLAIMED)
                old_put(OLD_CLAIMED, e->tok);
            else if (e->old == OLD_RELEASED && e->rc == RSV_ERELEASED)
                old_put(OLD_RELEASED, e->tok);
        }
    }
    if (ll_rnd(&c->rng, 5) == 0 && old_take(c, OLD_CLAIMED, tok))
        bat_add(&lb, SHOP_MIX, tok)->old = OLD_CLAIMED;
    if (lb.n > 0) {
        batch_run(c, &lb);
        for (int i = 0; i < lb.n; i++)
            if (lb.e[i].first && lb.e[i].rc == RSV_OK)
                old_put(OLD_RELEASED, lb.e[i].tok);
    }
}

/* ---- batcher buyers ---- */

/* One call through the batcher until its outcome is known.  The batcher
 * repeats a batch that lost its connection once by itself; a caller sees
 * RSV_ECONN or RSV_EINDOUBT only when that failed too, and then repeats
 * the call with the same token (the batcher reconnects on its next
 * batch). */
static int bt_call(struct cl *c, int kind, uint64_t shop, const char *tok,
                   uint64_t item, uint64_t loc, int64_t qty, int64_t ttl,
                   int *doubt)
{
    static const char *const names[] = {"", "reserve", "claim", "release"};
    size_t tl = strlen(tok);
    *doubt = 0;
    for (int attempt = 0;; attempt++) {
        uint64_t since = ll_now_ms();
        atomic_store(&shm->s[c->slot].op_since, since);
        atomic_store(&shm->s[c->slot].op, kind);
        int rc = kind == OP_RESERVE
                     ? rsv_batcher_reserve_one(c->bt, shop, tok, tl, item, loc,
                                               qty, ttl)
                 : kind == OP_CLAIM ? rsv_batcher_claim(c->bt, shop, tok, tl)
                                    : rsv_batcher_release(c->bt, shop, tok, tl);
        atomic_store(&shm->s[c->slot].op, OP_IDLE);
        note_answer(c, rc, since);
        atomic_fetch_add(&shm->b.bt_calls, 1);
        if (rc == RSV_EINDOUBT || rc == RSV_ECONN) {
            if (rc == RSV_EINDOUBT) {
                *doubt = 1;
                lg("D %s %s", names[kind], tok);
            } else {
                lg("D econn %s", tok);
            }
            atomic_fetch_add(&shm->b.bt_lost, 1);
            ll_backoff(&c->rng, attempt < 6 ? attempt : 6, 20, 4);
            continue;
        }
        if ((rc == RSV_EDB || rc == RSV_EINTXN) && attempt < 20) {
            /* nothing applied; EINTXN is counted and fails the run (the
             * batcher's connections are its own) */
            lg("D %s %s", rc == RSV_EDB ? "edb" : "eintxn", tok);
            ll_sleep_ms(20 + (long)ll_rnd(&c->rng, 100));
            continue;
        }
        return rc;
    }
}

static int bt_settle(struct cl *c, uint64_t shop, const char *tok, int kind)
{
    int doubt;
    lg("a %c %s", kind == OP_CLAIM ? 'c' : 'l', tok);
    int rc = bt_call(c, kind, shop, tok, 0, 0, 0, 0, &doubt);
    lg("%c %s %d %d", kind == OP_CLAIM ? 'C' : 'L', tok, rc, doubt);
    return rc;
}

/* Wait for the next tick of 200 ms: the threads of a process that do so
 * call at the same moment, as the buyers of a sale do, so the batcher
 * finds several requests to put into one batch. */
static void bt_tick(void)
{
    ll_sleep_ms((long)(200 - ll_now_ms() % 200));
}

/* One checkout through the batcher: a mixed one (1-3 units of one item
 * at one location, claimed, released or abandoned) or, with a flash
 * round running, one unit of its item (claimed or kept). */
static void flow_batcher(struct cl *c)
{
    bt_tick(); /* every reserve: the threads' requests come in waves */
    int round = atomic_load(&shm->flash_round);
    int flash = round < C.nflash && ll_rnd(&c->rng, 4) == 0;
    char tok[BATCH_TOK];
    uint64_t shop, item, loc;
    int64_t qty, ttl;
    if (flash) {
        shop = SHOP_FLASH;
        item = FLASH_ITEM0 + (uint64_t)round;
        loc = 1 + ll_rnd(&c->rng, (unsigned)flash_locs(round));
        qty = 1;
        ttl = 3600000;
    } else {
        shop = SHOP_MIX;
        item = 1 + ll_rnd(&c->rng, NITEMS);
        loc = 1 + ll_rnd(&c->rng, NLOCS);
        qty = 1 + (int64_t)ll_rnd(&c->rng, 3);
        ttl = ll_rnd(&c->rng, 5) == 0 ? 800 + ll_rnd(&c->rng, 1500) : 30000;
    }
    snprintf(tok, sizeof tok, "t%c%d.%d.%d.%ld", flash ? 'f' : 'm', c->slot,
             c->inc, c->thread, c->seq++);
    int doubt;
    lg("a r %s", tok);
    int rc = bt_call(c, OP_RESERVE, shop, tok, item, loc, qty, ttl, &doubt);
    if (rc == RSV_OK)
        lg("R %s %d %d 1 %llu:%llu:%lld", tok, rc, doubt,
           (unsigned long long)item, (unsigned long long)loc, (long long)qty);
    else
        lg("R %s %d %d 0", tok, rc, doubt);
    if (flash && rc == RSV_EOUTOFSTOCK && flash_locs(round) == 1)
        lg("F %llu", (unsigned long long)item);
    if (rc != RSV_OK) {
        if (doubt && !flash)
            bt_settle(c, shop, tok, OP_RELEASE);
        return;
    }
    if (ll_rnd(&c->rng, 2))
        bt_tick();
    else
        think(c, C.think_ms / 2);
    unsigned r = ll_rnd(&c->rng, 100);
    if (flash) {
        if (r < 50)
            bt_settle(c, shop, tok, OP_CLAIM);
    } else if (r < 60) {
        if (bt_settle(c, shop, tok, OP_CLAIM) == RSV_EBUSY)
            bt_settle(c, shop, tok, OP_RELEASE);
    } else if (r < 85) {
        bt_settle(c, shop, tok, OP_RELEASE);
    }
}

static void *bt_thread(void *arg)
{
    struct cl *c = arg;
    me = c;
    while (!atomic_load(&shm->stop))
        flow_batcher(c);
    return NULL;
}

#define BT_MAX_THREADS 16

/* A batcher buyer: one rsv_batcher with its own connections (through the
 * proxy, tagged so that the proxy tells its batch CALLs apart), and
 * --bt-threads threads calling it, each with a log of its own. */
static void batcher_main(struct cl *p)
{
    char dsn[1400];
    const char *tail = "connect_timeout=5&read_timeout=120&write_timeout=120";
    if (C.no_proxy) {
        char sock[1100];
        ll_dsn_escape(sock, sizeof sock, C.sock);
        snprintf(dsn, sizeof dsn, "mariadb://root@/stress?socket=%s&%s",
                 sock, tail);
    } else {
        snprintf(dsn, sizeof dsn, "mariadb://root@127.0.0.1:%d/stress?%s",
                 C.port, tail);
    }
    p->opts.conn_tag_prefix = "batcher:";
    rsv_batcher *b = NULL;
    for (int tries = 0;; tries++) {
        int rc = rsv_batcher_open(&b, dsn, &p->opts, (uint32_t)C.bt_conns);
        if (rc == RSV_OK)
            break;
        if (atomic_load(&shm->stop) && tries > 100)
            _exit(0);
        if (tries > 1200) {
            fprintf(stderr, "stress: batcher client %d cannot open: %s\n",
                    p->slot, rsv_code_name(rc));
            _exit(3);
        }
        ll_backoff(&p->rng, tries, 10, 6);
    }
    static struct cl th[BT_MAX_THREADS];
    pthread_t tid[BT_MAX_THREADS];
    int nt = C.bt_threads;
    for (int i = 0; i < nt; i++) {
        struct cl *c = &th[i];
        *c = *p;
        c->bt = b;
        c->thread = i + 1;
        c->rng = p->rng ^ ((uint64_t)(i + 1) * 0x9E3779B97F4A7C15ULL);
        if (!c->rng)
            c->rng = 1;
        char path[512];
        snprintf(path, sizeof path, "%s/c%d.%d.t%d.log", C.logdir, p->slot,
                 p->inc, i + 1);
        c->logfd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (c->logfd < 0) {
            perror(path);
            _exit(4);
        }
        if (pthread_create(&tid[i], NULL, bt_thread, c) != 0) {
            fprintf(stderr, "stress: batcher client %d: no thread\n", p->slot);
            _exit(4);
        }
    }
    for (int i = 0; i < nt; i++)
        pthread_join(tid[i], NULL);
    rsv_batcher_close(b);
    for (int i = 0; i < nt; i++)
        close(th[i].logfd);
    _exit(0);
}

/* Of every eight slots: 3 and 7 flash buyers, 2 a batch buyer, 6 a
 * batcher buyer, the others mixed buyers (slot 0: the merchant). */
static int role_of(int slot)
{
    if (slot == 0)
        return ROLE_MERCHANT;
    switch (slot % 8) {
    case 3:
    case 7:
        return ROLE_FLASH;
    case 2:
        return ROLE_BATCH;
    case 6:
        return ROLE_BATCHER;
    default:
        return ROLE_MIX;
    }
}

static void client_main(int slot, int inc)
{
    struct cl c;
    memset(&c, 0, sizeof c);
    me = &c;
    c.slot = slot;
    c.inc = inc;
    c.role = role_of(slot);
    /* a quarter of the mixed buyers, every other batch buyer */
    c.impatient = (c.role == ROLE_MIX && slot % 8 == 5) ||
                  (c.role == ROLE_BATCH && slot % 16 == 10);
    c.rng = (C.seed * 0x9E3779B97F4A7C15ULL) ^ ((uint64_t)slot << 32) ^
            ((uint64_t)inc << 16) ^ (uint64_t)getpid() ^ 0x1234567ULL;
    if (!c.rng)
        c.rng = 1;
    rsv_options_init(&c.opts, RSV_OPTIONS_VERSION);
    /* every other client with eight times the cap: its refills mint rows
     * of several units, so pools hold rows of one unit and of several
     * (pool_cap / 100 a row) side by side */
    c.opts.pool_cap = slot % 2 ? C.pool_cap * 8 : C.pool_cap;
    c.opts.pool_idle_s = 2; /* sweeps drain pools while others reserve */
    if (c.impatient) {
        c.opts.lock_wait_timeout_s = 1;
        c.opts.max_retries = 1;
    } else {
        c.opts.lock_wait_timeout_s = 10;
    }
    if (c.role == ROLE_BATCHER)
        batcher_main(&c); /* its threads log, each to a file of its own */
    char path[512];
    snprintf(path, sizeof path, "%s/c%d.%d.log", C.logdir, slot, inc);
    c.logfd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (c.logfd < 0) {
        perror(path);
        _exit(4);
    }
    cl_connect(&c);
    rsv_cart *cart;
    if (rsv_cart_new(&cart) != RSV_OK)
        _exit(4);
    while (!atomic_load(&shm->stop)) {
        switch (c.role) {
        case ROLE_MIX:
            flow_mix(&c, cart);
            break;
        case ROLE_FLASH:
            flow_flash(&c, cart);
            break;
        case ROLE_BATCH:
            flow_batch(&c);
            break;
        default:
            flow_merchant(&c);
        }
    }
    rsv_cart_free(cart);
    rsv_close(c.ctx);
    mysql_close(c.db);
    close(c.logfd);
    _exit(0);
}

/* ------------------------------------------------------------------ */
/* The troublemaker                                                   */
/* ------------------------------------------------------------------ */

static MYSQL *tm_connect(void)
{
    for (int tries = 0; !atomic_load(&shm->stop) || tries < 50; tries++) {
        MYSQL *m = raw_connect(NULL, 0, C.sock, 60);
        if (m) {
            if (mysql_query(m, "SET SESSION innodb_lock_wait_timeout = 5") ||
                mysql_query(m, "SET SESSION TRANSACTION ISOLATION LEVEL "
                               "READ COMMITTED")) {
                mysql_close(m);
            } else {
                return m;
            }
        }
        ll_sleep_ms(200);
    }
    return NULL;
}

static void troublemaker_main(void)
{
    uint64_t rng = C.seed ^ 0xABCDEF12345ULL;
    MYSQL *m = NULL;
    long mode = 0;
    while (!atomic_load(&shm->stop)) {
        ll_sleep_ms((long)(C.storm_every * 500) +
                 ll_rnd(&rng, (unsigned)(C.storm_every * 1000) + 1));
        if (atomic_load(&shm->stop))
            break;
        if (!m && !(m = tm_connect()))
            break;
        char q[512], q2[512];
        unsigned item = 1 + ll_rnd(&rng, NITEMS);
        q2[0] = 0;
        switch (mode++ % 4) {
        case 0: /* the ledger rows of one item */
            snprintf(q, sizeof q,
                     "SELECT on_hand FROM rsv_ledger WHERE shop_id = 1 "
                     "AND item_id = %u FOR UPDATE", item);
            break;
        case 1: /* the checkout rows of held checkouts */
            snprintf(q, sizeof q,
                     "SELECT status FROM rsv_checkouts WHERE "
                     "shop_id = 1 AND status = 1 ORDER BY updated_at DESC "
                     "LIMIT 300 FOR UPDATE");
            break;
        case 2: /* every pool row of one item: reserves find the pool
                   empty and wait for these rows in the slow path */
            snprintf(q, sizeof q,
                     "SELECT id FROM rsv_pool WHERE shop_id = 1 AND "
                     "item_id = %u FOR UPDATE", item);
            break;
        default: /* deadlock storm: pool rows, then (once reserves of the
                    item sit in the slow path holding its ledger rows and
                    waiting for these pool rows) the ledger rows: the
                    reverse of the library's lock order */
            snprintf(q, sizeof q,
                     "SELECT (SELECT COUNT(*) FROM (SELECT id FROM "
                     "rsv_pool WHERE shop_id = 1 AND "
                     "item_id = %u FOR UPDATE) u), (SELECT on_hand "
                     "FROM rsv_ledger WHERE shop_id = 1 AND "
                     "item_id = %u AND location_id = %d "
                     "FOR UPDATE)", item, item, NLOCS);
            snprintf(q2, sizeof q2,
                     "SELECT on_hand FROM rsv_ledger WHERE shop_id = 1 "
                     "AND item_id = %u AND location_id < %d "
                     "ORDER BY location_id DESC FOR UPDATE", item,
                     NLOCS);
        }
        unsigned e = ll_exec(m, "START TRANSACTION");
        if (!e)
            e = ll_exec(m, q);
        if (!e && q2[0]) {
            e = ll_exec(m, "SELECT SLEEP(0.4)");
            if (!e)
                e = ll_exec(m, q2);
            if (e == 1213)
                atomic_fetch_add(&shm->tm_deadlocks, 1);
        }
        if (!e) {
            atomic_fetch_add(&shm->storms, 1);
            char s[64];
            snprintf(s, sizeof s, "SELECT SLEEP(%.3f)", C.storm_hold_ms / 1000.0);
            e = ll_exec(m, s);
        }
        unsigned e2 = ll_exec(m, "ROLLBACK");
        if (e >= 2000 || e2 >= 2000 || e == 1927 || e == 1053) {
            mysql_close(m); /* client-side error: the server went away */
            m = NULL;
        }
    }
    if (m) {
        ll_exec(m, "ROLLBACK");
        mysql_close(m);
    }
    _exit(0);
}

/* ------------------------------------------------------------------ */
/* Orchestrator: processes, proxy, server                             */
/* ------------------------------------------------------------------ */

static FILE *proxy_in, *proxy_out;
static pid_t proxy_pid;
static int fill_fd = -1; /* the disk-full run's filler, while it exists */

/* In a child: only the orchestrator talks to the proxy, and the proxy
 * stops when the orchestrator's end of its input closes.  Nor may a
 * child hold the filler open: its blocks would stay taken after the
 * orchestrator removes it. */
static void close_parent_fds(void)
{
    if (proxy_in)
        close(fileno(proxy_in));
    if (proxy_out)
        close(fileno(proxy_out));
    if (fill_fd >= 0)
        close(fill_fd);
}

static pid_t spawn_client(int slot)
{
    int inc = atomic_fetch_add(&shm->s[slot].inc, 1) + 1;
    atomic_store(&shm->s[slot].op, OP_IDLE);
    atomic_store(&shm->s[slot].reported, 0);
    pid_t p = fork();
    if (p == 0) {
        close_parent_fds();
        client_main(slot, inc);
    }
    if (p < 0) {
        perror("stress: fork");
        exit(2);
    }
    atomic_store(&shm->s[slot].pid, p);
    return p;
}

static void start_proxy(void)
{
    int in[2], out[2];
    if (pipe(in) || pipe(out)) {
        perror("pipe");
        exit(2);
    }
    proxy_pid = fork();
    if (proxy_pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        execl(C.proxy, C.proxy, "--unix", C.sock, (char *)NULL);
        perror(C.proxy);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    fcntl(in[1], F_SETFD, FD_CLOEXEC);
    fcntl(out[0], F_SETFD, FD_CLOEXEC);
    proxy_in = fdopen(in[1], "w");
    proxy_out = fdopen(out[0], "r");
    if (fscanf(proxy_out, "%d", &C.port) != 1) {
        fprintf(stderr, "stress: the proxy did not start\n");
        exit(2);
    }
}

static void proxy_cmd(const char *c)
{
    fputs(c, proxy_in);
    fflush(proxy_in);
}

/* The proxy's counters ("s"), by kind of commit point: COMMIT texts and
 * the CALLs of rsv_reserve_key*, rsv_fast_cart*, rsv_settle*, others,
 * rsv_reserve_batch*, rsv_settle_batch*, and the batch CALLs of the
 * batcher buyers' connections. */
enum { NKINDS = 8 };
static const char *const kind_name[NKINDS] = {
    "commit", "reserve_call", "cart_call", "settle_call", "other_call",
    "reserve_batch_call", "settle_batch_call", "batcher_batch_call"};
/* the proxy's names for them ("k NAME" arms a cut of the next one) */
static const char *const kind_arm[NKINDS] = {
    "commit", "reserve", "cart", "settle", "other", "rbatch", "sbatch",
    "batcher"};
enum { SETTLE_KIND = 3, RBATCH_KIND = 5, SBATCH_KIND = 6, BATCHER_KIND = 7 };
struct pstats {
    long cuts, after, before, armed;
    long cut[NKINDS], seen[NKINDS];
    /* settle_call, settle_batch_call: unknown, claim, release */
    long cut_sub[2][3], seen_sub[2][3];
    long after_kind[NKINDS]; /* cut after forwarding: the server commits */
};

static int proxy_stats(struct pstats *p)
{
    memset(p, 0, sizeof *p);
    proxy_cmd("s\n");
    long *v[4 + 2 * NKINDS + 12 + NKINDS];
    int n = 0;
    v[n++] = &p->cuts;
    v[n++] = &p->after;
    v[n++] = &p->before;
    v[n++] = &p->armed;
    for (int k = 0; k < NKINDS; k++)
        v[n++] = &p->cut[k];
    for (int k = 0; k < NKINDS; k++)
        v[n++] = &p->seen[k];
    for (int r = 0; r < 2; r++) {
        for (int k = 0; k < 3; k++)
            v[n++] = &p->cut_sub[r][k];
        for (int k = 0; k < 3; k++)
            v[n++] = &p->seen_sub[r][k];
    }
    for (int k = 0; k < NKINDS; k++)
        v[n++] = &p->after_kind[k];
    int ok = fscanf(proxy_out, " cuts") == 0;
    for (int i = 0; ok && i < n; i++)
        ok = fscanf(proxy_out, "%ld", v[i]) == 1;
    if (!ok) {
        fprintf(stderr, "stress: no answer from the proxy\n");
        return 0;
    }
    return 1;
}

static int server_pid(void)
{
    char p[600];
    snprintf(p, sizeof p, "%s/mysqld.pid", C.srvdir);
    FILE *f = fopen(p, "r");
    int pid = 0;
    if (f) {
        if (fscanf(f, "%d", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    return pid;
}

static int proc_alive(int pid)
{
    char p[64], st = 0;
    snprintf(p, sizeof p, "/proc/%d/stat", pid);
    FILE *f = fopen(p, "r");
    if (!f)
        return 0;
    int r = fscanf(f, "%*d %*s %c", &st);
    fclose(f);
    return r == 1 && st != 'Z' && st != 'X';
}

static MYSQL *raw_connect(const char *host, int port, const char *sock,
                          unsigned read_timeout);
static int64_t q_int(MYSQL *m, const char *q);
static int64_t deadlocks_before; /* Innodb_deadlocks of earlier servers */

static int64_t server_deadlocks(void)
{
    MYSQL *m = raw_connect(NULL, 0, C.sock, 10);
    int64_t v = 0;
    if (m) {
        v = q_int(m, "SELECT variable_value FROM "
                     "information_schema.global_status WHERE variable_name "
                     "= 'INNODB_DEADLOCKS'");
        mysql_close(m);
    }
    return v > 0 ? v : 0;
}

/* Start the server again on its data directory (crash recovery).  quiet:
 * a failure is expected (it may abort again while the disk is full), its
 * messages go to restart-failures.log in the server directory. */
/* Restarts that needed --tc-heuristic-recover (see below). */
static long heuristic_recoveries;

/* MariaDB may refuse to start after aborting on a full disk: "Found N
 * prepared transactions! ... start with --tc-heuristic-recover" (its
 * binary log no longer tells it what to do with them).  A transaction is
 * prepared only once its COMMIT reached the server, so the library has
 * answered it RSV_OK or RSV_EINDOUBT, never "nothing applied": committing
 * keeps every promise (an in-doubt call is repeated and finds it done),
 * while rolling back could undo an acknowledged commit.  So the server is
 * started once with --tc-heuristic-recover=COMMIT (it may stop after the
 * recovery), stopped, and started normally. */
static int heuristic_restart(int quiet)
{
    char cmd[3000], log[2100];
    snprintf(log, sizeof log, "%s/error.log", C.srvdir);
    FILE *f = fopen(log, "r");
    if (!f)
        return -1;
    char line[1024];
    int needed = 0;
    while (fgets(line, sizeof line, f))
        needed = strstr(line, "tc-heuristic-recover") != NULL
                     ? 1
                     : (strstr(line, "ready for connections") ? 0 : needed);
    fclose(f);
    if (!needed)
        return -1;
    const char *extra = getenv("RSV_MARIADB_OPTS");
    snprintf(cmd, sizeof cmd,
             "RSV_MARIADB_OPTS='%s --tc-heuristic-recover=COMMIT' '%s' resume "
             "'%s' >/dev/null 2>>'%s/restart-failures.log'; '%s' stop '%s' "
             ">/dev/null 2>&1; '%s' resume '%s' >/dev/null%s%s%s",
             extra ? extra : "", C.mariadb_sh, C.srvdir, C.srvdir,
             C.mariadb_sh, C.srvdir, C.mariadb_sh, C.srvdir,
             quiet ? " 2>>'" : "", quiet ? C.srvdir : "",
             quiet ? "/restart-failures.log'" : "");
    if (system(cmd) != 0)
        return -1;
    heuristic_recoveries++;
    fprintf(stderr, "stress: the server's prepared transactions were "
                    "committed by --tc-heuristic-recover=COMMIT\n");
    return 0;
}

static int restart_server(const char *why, int quiet)
{
    char cmd[2800];
    if (quiet)
        snprintf(cmd, sizeof cmd, "'%s' resume '%s' >/dev/null "
                 "2>>'%s/restart-failures.log'", C.mariadb_sh, C.srvdir,
                 C.srvdir);
    else
        snprintf(cmd, sizeof cmd, "'%s' resume '%s' >/dev/null", C.mariadb_sh,
                 C.srvdir);
    uint64_t t0 = ll_now_ms();
    int rc = system(cmd);
    if (rc != 0 && heuristic_restart(quiet) == 0)
        rc = 0;
    if (rc != 0) {
        fprintf(stderr, "stress: restarting the server failed (%d)\n", rc);
        return -1;
    }
    fprintf(stderr, "stress: server %s and restarted in %.1f s\n", why,
            (ll_now_ms() - t0) / 1000.0);
    return 1;
}

static int kill_server(void)
{
    int pid = server_pid();
    if (pid <= 0 || !proc_alive(pid))
        return 0;
    deadlocks_before += server_deadlocks();
    kill(pid, SIGKILL);
    for (int i = 0; i < 1000 && proc_alive(pid); i++)
        ll_sleep_ms(10);
    return restart_server("killed", 0);
}

/* ---- the disk-full run: a file that takes every free block ---- */

static long long fill_bytes;

/* Append until the file system says ENOSPC (1 MiB, then page-sized
 * writes); called again while the phase lasts, since the server may free
 * space (a temporary file removed) that would otherwise let it go on. */
static void fill_top_up(void)
{
    static char zero[1 << 20];
    for (size_t chunk = sizeof zero; chunk >= 4096; chunk /= 256) {
        for (int i = 0; i < 1 << 16; i++) { /* bound: 64 GiB */
            ssize_t w = write(fill_fd, zero, chunk);
            if (w > 0) {
                fill_bytes += w;
                continue;
            }
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0 && errno != ENOSPC && errno != EDQUOT)
                fprintf(stderr, "stress: filling %s: %s\n", C.fill,
                        strerror(errno));
            break;
        }
    }
}

/* Once per loop: fill at fill_at, keep it full, free it after fill_for. */
static void fill_step(double el)
{
    static uint64_t next_top_up;
    static int done;
    if (!C.fill || done || el < C.fill_at)
        return;
    if (fill_fd < 0) {
        fill_fd = open(C.fill, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                       0600);
        if (fill_fd < 0) {
            fprintf(stderr, "stress: %s: %s\n", C.fill, strerror(errno));
            exit(2);
        }
        fill_top_up();
        atomic_store(&shm->full, 1);
        fprintf(stderr, "stress: %.0f s: the data directory's file system is "
                        "full (%lld MiB written to %s)\n", el,
                fill_bytes >> 20, C.fill);
    }
    if (el >= C.fill_at + C.fill_for) {
        close(fill_fd);
        fill_fd = -1;
        unlink(C.fill);
        atomic_store(&shm->full, 0);
        done = 1;
        fprintf(stderr, "stress: %.0f s: space is back (%lld MiB freed)\n",
                el, fill_bytes >> 20);
        return;
    }
    if (ll_now_ms() >= next_top_up) {
        fill_top_up();
        next_top_up = ll_now_ms() + 500;
    }
}

static MYSQL *admin_connect(void)
{
    for (int i = 0; i < 600; i++) {
        MYSQL *m = raw_connect(NULL, 0, C.sock, 300);
        if (m)
            return m;
        ll_sleep_ms(100);
    }
    fprintf(stderr, "stress: cannot connect to %s\n", C.sock);
    exit(2);
}

static void dump_query(MYSQL *m, const char *title, const char *q)
{
    fprintf(stderr, "stress: --- %s\n", title);
    if (mysql_query(m, q)) {
        fprintf(stderr, "  (%s)\n", mysql_error(m));
        return;
    }
    MYSQL_RES *r = mysql_store_result(m);
    if (!r)
        return;
    unsigned nf = mysql_num_fields(r);
    MYSQL_ROW row;
    int n = 0;
    while ((row = mysql_fetch_row(r)) && n++ < 60) {
        fprintf(stderr, " ");
        for (unsigned i = 0; i < nf; i++)
            fprintf(stderr, " | %.160s", row[i] ? row[i] : "NULL");
        fprintf(stderr, "\n");
    }
    mysql_free_result(r);
}

static void dump_state(void)
{
    MYSQL *m = raw_connect(NULL, 0, C.sock, 30);
    if (!m)
        return;
    dump_query(m, "innodb_trx",
               "SELECT trx_mysql_thread_id, trx_state, trx_started, "
               "trx_wait_started, trx_rows_locked, trx_query FROM "
               "information_schema.innodb_trx ORDER BY trx_started");
    dump_query(m, "processlist",
               "SELECT id, command, time, state, LEFT(info, 150) FROM "
               "information_schema.processlist WHERE command <> 'Sleep' OR "
               "time > 5 ORDER BY time DESC");
    mysql_close(m);
}

/* Where a stuck client is (best effort: needs gdb). */
static void backtrace_of(int pid)
{
    char cmd[200];
    snprintf(cmd, sizeof cmd, "gdb -p %d -batch -ex bt </dev/null "
             "2>/dev/null | grep '^#' >&2", pid);
    if (system(cmd) != 0)
        fprintf(stderr, "stress: (no gdb backtrace)\n");
    /* its sockets: bytes queued either way tell who is waiting for whom */
    snprintf(cmd, sizeof cmd, "ss -npx -t 2>/dev/null | grep 'pid=%d,' >&2",
             pid);
    if (system(cmd) != 0)
        fprintf(stderr, "stress: (no socket listing)\n");
}

static int64_t q_int(MYSQL *m, const char *q)
{
    int64_t v;
    if (ll_i64(m, q, -1, &v) < 0)
        fprintf(stderr, "stress: %s: %s\n", q, mysql_error(m));
    return v;
}

/* ------------------------------------------------------------------ */
/* The checker                                                        */
/* ------------------------------------------------------------------ */

struct key {
    int shop;
    long item, loc;
    long stock_min, stock_max; /* stock put in, bounds */
    long claim_acked, claim_unknown;
    long visible, held, pooled; /* from the database */
    int found;
};

static struct key *keys;
static size_t nkeys, capkeys;

static struct key *key_get(int shop, long item, long loc)
{
    for (size_t i = 0; i < nkeys; i++)
        if (keys[i].shop == shop && keys[i].item == item && keys[i].loc == loc)
            return &keys[i];
    if (nkeys == capkeys) {
        capkeys = capkeys ? capkeys * 2 : 64;
        keys = realloc(keys, capkeys * sizeof *keys);
        if (!keys)
            exit(2);
    }
    struct key *k = &keys[nkeys++];
    memset(k, 0, sizeof *k);
    k->shop = shop;
    k->item = item;
    k->loc = loc;
    return k;
}

struct dbco {
    int shop;
    char tok[64];
    int status;
    long holds;
};

static struct dbco *dbcos;
static size_t ncos;

static int co_cmp(const void *a, const void *b)
{
    const struct dbco *x = a, *y = b;
    if (x->shop != y->shop)
        return x->shop - y->shop;
    return strcmp(x->tok, y->tok);
}

static struct dbco *co_find(int shop, const char *tok)
{
    struct dbco k;
    memset(&k, 0, sizeof k);
    k.shop = shop;
    snprintf(k.tok, sizeof k.tok, "%s", tok);
    return bsearch(&k, dbcos, ncos, sizeof k, co_cmp);
}

/* EX_NOTHING: a new token's reserves were all answered with an error that
 * says nothing was applied (out of stock, busy, a database error): there
 * must be no checkout. */
enum { EX_NONE, EX_HELD, EX_CLAIMED, EX_RELEASED, EX_NOTCLAIMED, EX_ABSENT,
       EX_NOTHING };

struct tokst {
    char tok[64];
    int shop;
    int active;
    int acked_hold, expect, unknown, claim_acked, claim_pending;
    int claim_tried; /* a claim of ours may have applied */
    char pending;    /* the kind of the attempts not yet answered */
    int open;        /* how many (a batch may list a token twice) */
    int na;
    long ai[MAX_ALLOC], al[MAX_ALLOC], aq[MAX_ALLOC];
};

/* The shop of a token: its first letter (m mixed, f flash), the second
 * for the batch (b) and batcher (t) buyers' tokens. */
static int tok_shop(const char *tok)
{
    char k = tok[0] == 'b' || tok[0] == 't' ? tok[1] : tok[0];
    return k == 'f' ? SHOP_FLASH : SHOP_MIX;
}

/* A token whose calls the batcher may have repeated by itself: its
 * caller cannot tell a first answer from a repeat's. */
static int tok_repeated_unseen(const char *tok)
{
    return tok[0] == 't';
}

/* The tokens of one log by name: once a client sends batches its lines
 * for one token are no longer together (every entry's attempt, then
 * every entry's answer, then the next batch's). */
struct tokmap {
    struct tokst **all; /* in the order they first appear */
    size_t n, cap;
    size_t *slot; /* open addressing: index into all + 1, 0 empty */
    size_t nslot;
};

static size_t tok_hash(const char *s)
{
    size_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static struct tokst *tok_get(struct tokmap *m, const char *tok)
{
    if (2 * (m->n + 1) > m->nslot) {
        size_t ns = m->nslot ? m->nslot * 2 : 1024;
        size_t *sl = calloc(ns, sizeof *sl);
        if (!sl)
            exit(2);
        for (size_t i = 0; i < m->n; i++) {
            size_t h = tok_hash(m->all[i]->tok) & (ns - 1);
            while (sl[h])
                h = (h + 1) & (ns - 1);
            sl[h] = i + 1;
        }
        free(m->slot);
        m->slot = sl;
        m->nslot = ns;
    }
    size_t h = tok_hash(tok) & (m->nslot - 1);
    for (; m->slot[h]; h = (h + 1) & (m->nslot - 1))
        if (!strcmp(m->all[m->slot[h] - 1]->tok, tok))
            return m->all[m->slot[h] - 1];
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 256;
        m->all = realloc(m->all, m->cap * sizeof *m->all);
        if (!m->all)
            exit(2);
    }
    struct tokst *t = calloc(1, sizeof *t);
    if (!t)
        exit(2);
    t->active = 1;
    snprintf(t->tok, sizeof t->tok, "%s", tok);
    t->shop = tok_shop(tok);
    m->all[m->n++] = t;
    m->slot[h] = m->n;
    return t;
}

static void tok_free(struct tokmap *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->all[i]);
    free(m->all);
    free(m->slot);
    memset(m, 0, sizeof *m);
}

static struct counts {
    long ops, lock_timeout, indoubt, econn, edb, eintxn, flash_soldout_lines;
    long lost_holds, double_claims, oversold, undersold, open_txns;
    long audit_violations, tokens, unknown_tokens;
} K;

static char *flash_soldout; /* per flash item: some buyer saw sold out */

static void tok_finish(struct tokst *t)
{
    if (!t->active)
        return;
    t->active = 0;
    K.tokens++;
    if (t->pending) {
        t->unknown = 1;
        if (t->pending == 'c')
            t->claim_pending = 1;
    }
    if (t->unknown) {
        K.unknown_tokens++;
        if (getenv("STRESS_DEBUG") && K.unknown_tokens < 10)
            fprintf(stderr, "stress: unknown %s pending %c\n", t->tok,
                    t->pending ? t->pending : '-');
    }
    for (int y = 0; y < t->na; y++) {
        struct key *k = key_get(t->shop, t->ai[y], t->al[y]);
        if (t->claim_acked)
            k->claim_acked += t->aq[y];
        else if (t->claim_pending)
            k->claim_unknown += t->aq[y];
    }
    if (!t->acked_hold && t->expect != EX_CLAIMED && t->expect != EX_NOTHING)
        return;
    struct dbco *co = co_find(t->shop, t->tok);
    const char *bad = NULL;
    if (!co) {
        if (t->acked_hold)
            bad = "acknowledged hold has no checkout row";
    } else if (!t->unknown) {
        switch (t->expect) {
        case EX_HELD:
            if (co->status != 1 && co->status != 4)
                bad = "acknowledged hold neither held nor expired";
            break;
        case EX_CLAIMED:
            if (co->status != 2)
                bad = "acknowledged claim not claimed";
            break;
        case EX_RELEASED:
            if (co->status != 3 && co->status != 4)
                bad = "acknowledged release not released";
            break;
        case EX_NOTCLAIMED:
            if (co->status == 2)
                bad = "claimed although the claim was refused";
            break;
        case EX_ABSENT:
            bad = "release said not found, but the checkout exists";
            break;
        case EX_NOTHING:
            bad = "every reserve answered an error (nothing applied), but "
                  "the checkout exists";
            break;
        }
    }
    if (bad) {
        K.lost_holds++;
        if (K.lost_holds <= 20)
            fprintf(stderr, "stress: lost hold: %s: %s (status %d)\n", t->tok,
                    bad, co ? co->status : -1);
    }
}

static void parse_alloc(struct tokst *t, char *rest, int na)
{
    t->na = 0;
    char *sv = NULL;
    for (char *w = strtok_r(rest, " ", &sv); w && t->na < na && t->na < MAX_ALLOC;
         w = strtok_r(NULL, " ", &sv)) {
        long i, l, q;
        if (sscanf(w, "%ld:%ld:%ld", &i, &l, &q) == 3) {
            t->ai[t->na] = i;
            t->al[t->na] = l;
            t->aq[t->na] = q;
            t->na++;
        }
    }
}

/* A claim (or a release) answered "already claimed" when no claim of
 * ours may have applied: every earlier claim was answered with a code
 * that says nothing was applied (RSV_ECONN, RSV_EDB, RSV_EBUSY), or there
 * was none.  Such an answer had applied after all. */
static void claimed_unseen(struct tokst *t, char what, int rc, int d)
{
    if (rc != RSV_ECLAIMED || d || t->claim_tried ||
        tok_repeated_unseen(t->tok))
        return;
    K.lost_holds++;
    if (K.lost_holds <= 20)
        fprintf(stderr, "stress: lost hold: %s: %s answered already claimed, "
                        "but no claim of ours may have applied (an answer "
                        "that said nothing was applied had applied)\n",
                t->tok, what == 'C' ? "the first claim" : "a release");
}

/* An outcome line: one attempt of the token answered. */
static void answered(struct tokst *t)
{
    if (t->open > 0 && --t->open == 0)
        t->pending = 0;
}

static void parse_log(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        return;
    }
    struct tokmap map;
    memset(&map, 0, sizeof map);
    char line[1200];
    /* a pending stock adjustment: its outcome is unknown if none follows */
    int s_pending = 0;
    long s_item = 0, s_loc = 0, s_delta = 0;
    while (fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        if (n == 0 || line[n - 1] != '\n')
            break; /* torn last line of a killed client */
        line[--n] = 0;
        char tok[64] = "", op = 0;
        int rc = 0, d = 0, na = 0, off = 0;
        struct tokst *t;
        switch (line[0]) {
        case 'a':
            if (sscanf(line, "a %c %63s", &op, tok) != 2)
                break;
            if (op == 's') {
                if (sscanf(line, "a s %ld %ld %ld", &s_item, &s_loc,
                           &s_delta) == 3)
                    s_pending = 1;
                break;
            }
            t = tok_get(&map, tok);
            t->pending = op;
            t->open++;
            break;
        case 'R':
            K.ops++;
            if (sscanf(line, "R %63s %d %d %d%n", tok, &rc, &d, &na, &off) < 4)
                break;
            if (rc == RSV_EBUSY)
                K.lock_timeout++;
            t = tok_get(&map, tok);
            answered(t);
            if (rc == RSV_OK) {
                t->acked_hold = 1;
                t->expect = EX_HELD;
                t->unknown = 0;
                parse_alloc(t, line + off, na);
            } else if (d || (rc != RSV_EOUTOFSTOCK && rc != RSV_EBUSY &&
                             rc != RSV_ECLAIMED && rc != RSV_EDB &&
                             rc != RSV_EQUANTITY && rc != RSV_ENOITEM)) {
                t->unknown = 1;
            } else if (!t->acked_hold && t->expect == EX_NONE) {
                /* (a re-reserve answered so leaves the holds it had) */
                t->expect = EX_NOTHING;
            }
            break;
        case 'C':
        case 'L':
            K.ops++;
            if (sscanf(line + 2, "%63s %d %d", tok, &rc, &d) != 3)
                break;
            if (rc == RSV_EBUSY)
                K.lock_timeout++;
            t = tok_get(&map, tok);
            answered(t);
            claimed_unseen(t, line[0], rc, d);
            if (line[0] == 'C') {
                if (rc == RSV_OK || rc == RSV_ECLAIMED) {
                    t->expect = EX_CLAIMED;
                    t->claim_acked = 1;
                    t->unknown = 0;
                } else if (rc == RSV_EEXPIRED || rc == RSV_ERELEASED ||
                           rc == RSV_ENOTFOUND) {
                    t->expect = EX_NOTCLAIMED;
                } else if (rc != RSV_EBUSY) {
                    t->unknown = 1;
                    t->claim_pending = 1;
                }
                /* all but the answers that say it was not applied */
                if (d || (rc != RSV_EBUSY && rc != RSV_EEXPIRED &&
                          rc != RSV_ERELEASED && rc != RSV_ENOTFOUND))
                    t->claim_tried = 1;
            } else {
                if (rc == RSV_OK) {
                    t->expect = EX_RELEASED;
                    t->unknown = 0;
                } else if (rc == RSV_ENOTFOUND) {
                    if (t->acked_hold && !t->unknown) {
                        K.lost_holds++;
                        fprintf(stderr, "stress: lost hold: %s: release "
                                        "says not found\n", t->tok);
                    }
                    t->expect = EX_ABSENT;
                    t->acked_hold = 0;
                } else if (rc == RSV_ECLAIMED) {
                    t->expect = EX_CLAIMED;
                    t->claim_acked = 1;
                    t->unknown = 0;
                } else if (rc != RSV_EBUSY) {
                    t->unknown = 1;
                }
            }
            break;
        case 'S': {
            K.ops++;
            long item, loc, delta;
            if (sscanf(line, "S %ld %ld %ld %d", &item, &loc, &delta, &rc) != 4)
                break;
            if (rc == RSV_EBUSY)
                K.lock_timeout++;
            s_pending = 0;
            struct key *k = key_get(SHOP_MIX, item, loc);
            if (rc == RSV_OK) {
                k->stock_min += delta;
                k->stock_max += delta;
            } else if (rc == RSV_EINDOUBT || rc == RSV_EDB) {
                if (delta < 0)
                    k->stock_min += delta;
                else
                    k->stock_max += delta;
            }
            break;
        }
        case 'O':
            K.ops++;
            if (sscanf(line, "O %63s %d", tok, &rc) == 2 && rc == RSV_EBUSY)
                K.lock_timeout++;
            break;
        case 'D':
            if (!strncmp(line, "D econn", 7))
                K.econn++;
            else if (!strncmp(line, "D eintxn", 8))
                K.eintxn++;
            else if (!strncmp(line, "D edb", 5))
                K.edb++;
            else
                K.indoubt++;
            break;
        case 'F': {
            long item;
            if (sscanf(line, "F %ld", &item) == 1 && item >= FLASH_ITEM0 &&
                item < FLASH_ITEM0 + C.nflash) {
                flash_soldout[item - FLASH_ITEM0] = 1;
                K.flash_soldout_lines++;
            }
            break;
        }
        }
    }
    for (size_t i = 0; i < map.n; i++)
        tok_finish(map.all[i]);
    tok_free(&map);
    if (s_pending) { /* killed during a stock adjustment */
        struct key *k = key_get(SHOP_MIX, s_item, s_loc);
        if (s_delta < 0)
            k->stock_min += s_delta;
        else
            k->stock_max += s_delta;
    }
    fclose(f);
}

static void audit_cb(void *arg, uint64_t shop, uint64_t item, uint64_t loc,
                     const char *problem)
{
    (void)arg;
    if (strstr(problem, "oversold"))
        K.oversold++;
    if (K.audit_violations < 30)
        fprintf(stderr, "stress: audit: shop %llu item %llu location %llu: %s\n",
                (unsigned long long)shop, (unsigned long long)item,
                (unsigned long long)loc, problem);
}

static void load_db(MYSQL *m)
{
    if (mysql_query(m, "SELECT shop_id, checkout_token, status, (SELECT "
                       "COUNT(*) FROM rsv_holds h WHERE h.shop_id = "
                       "c.shop_id AND h.checkout_token = c.checkout_token) "
                       "FROM rsv_checkouts c")) {
        fprintf(stderr, "stress: %s\n", mysql_error(m));
        exit(2);
    }
    MYSQL_RES *r = mysql_store_result(m);
    size_t n = r ? (size_t)mysql_num_rows(r) : 0;
    dbcos = calloc(n + 1, sizeof *dbcos);
    MYSQL_ROW row;
    while (r && (row = mysql_fetch_row(r))) {
        struct dbco *c = &dbcos[ncos++];
        c->shop = atoi(row[0]);
        snprintf(c->tok, sizeof c->tok, "%s", row[1]);
        c->status = atoi(row[2]);
        c->holds = atol(row[3]);
    }
    if (r)
        mysql_free_result(r);
    qsort(dbcos, ncos, sizeof *dbcos, co_cmp);

    if (mysql_query(m, "SELECT shop_id, item_id, "
                       "location_id, on_hand, held, pooled FROM "
                       "rsv_stock")) {
        fprintf(stderr, "stress: %s\n", mysql_error(m));
        exit(2);
    }
    r = mysql_store_result(m);
    while (r && (row = mysql_fetch_row(r))) {
        struct key *k = key_get(atoi(row[0]), atol(row[1]), atol(row[2]));
        k->found = 1;
        k->visible = atol(row[3]);
        k->held = atol(row[4]);
        k->pooled = atol(row[5]);
    }
    if (r)
        mysql_free_result(r);
}

static void check_units(void)
{
    for (size_t i = 0; i < nkeys; i++) {
        struct key *k = &keys[i];
        if (!k->found) {
            fprintf(stderr, "stress: no ledger row for shop %d item %ld "
                            "location %ld\n", k->shop, k->item, k->loc);
            K.lost_holds++;
            continue;
        }
        long left_min = k->stock_min - k->visible;
        long left_max = k->stock_max - k->visible;
        long cmin = k->claim_acked, cmax = k->claim_acked + k->claim_unknown;
        long twice = left_min > cmax ? left_min - cmax : 0;
        long missing = cmin > left_max ? cmin - left_max : 0;
        if (twice || missing) {
            K.double_claims += twice + missing;
            fprintf(stderr,
                    "stress: shop %d item %ld location %ld: %ld..%ld units "
                    "left the ledger, claims account for %ld..%ld (%s)\n",
                    k->shop, k->item, k->loc, left_min, left_max, cmin, cmax,
                    twice ? "units taken without a claim" :
                            "acknowledged claims not in the ledger");
        }
        long over = cmin + k->held + k->pooled - k->stock_max;
        if (over > 0) {
            K.oversold += over;
            fprintf(stderr,
                    "stress: shop %d item %ld location %ld: oversold by %ld "
                    "(claimed %ld + held %ld + pooled %ld > stock %ld)\n",
                    k->shop, k->item, k->loc, over, cmin, k->held, k->pooled,
                    k->stock_max);
        }
    }
    /* flash sale: every item some buyer saw sold out must be sold out */
    for (int f = 0; f < C.nflash; f++) {
        if (!flash_soldout[f])
            continue;
        long avail = 0;
        for (int l = 1; l <= FLASH_LOCS; l++) {
            struct key *k = key_get(SHOP_FLASH, FLASH_ITEM0 + f, l);
            avail += k->visible - k->held;
        }
        if (avail > 0) {
            K.undersold += avail;
            fprintf(stderr, "stress: flash item %d: sold out was answered, "
                            "but %ld units were never reserved\n",
                    FLASH_ITEM0 + f, avail);
        } else if (avail < 0) {
            K.oversold += -avail;
        }
    }
}

static int run_checks(MYSQL *m)
{
    /* open transactions: sessions of killed clients may take a moment to
     * be torn down */
    int64_t open = 0;
    for (int i = 0; i < 50; i++) {
        open = q_int(m, "SELECT COUNT(*) FROM information_schema.innodb_trx "
                        "WHERE trx_mysql_thread_id <> CONNECTION_ID()");
        if (open == 0)
            break;
        ll_sleep_ms(100);
    }
    if (open != 0) {
        dump_state();
        if (open < 0)
            open = 1;
    }
    K.open_txns = open;

    rsv_options o;
    rsv_options_init(&o, RSV_OPTIONS_VERSION);
    o.pool_cap = C.pool_cap;
    rsv_ctx *ctx = NULL;
    int rc = rsv_open(&ctx, m, &o);
    if (rc != RSV_OK) {
        fprintf(stderr, "stress: rsv_open: %s\n", rsv_errmsg(ctx));
        return 2;
    }
    int64_t v = 0;
    rc = rsv_audit(ctx, 0, 1, audit_cb, NULL, &v);
    if (rc != RSV_OK) {
        fprintf(stderr, "stress: rsv_audit: %s\n", rsv_errmsg(ctx));
        return 2;
    }
    K.audit_violations = v;
    rsv_close(ctx);

    /* stock put in by the orchestrator */
    for (int i = 1; i <= NITEMS; i++)
        for (int l = 1; l <= NLOCS; l++) {
            struct key *k = key_get(SHOP_MIX, i, l);
            k->stock_min = k->stock_max = C.init_stock;
        }
    for (int f = 0; f < C.nflash; f++)
        for (int l = 1; l <= FLASH_LOCS; l++) {
            struct key *k = key_get(SHOP_FLASH, FLASH_ITEM0 + f, l);
            k->stock_min = k->stock_max = flash_stock_at(f, l, C.flash_stock);
        }
    load_db(m);
    DIR *d = opendir(C.logdir);
    if (!d) {
        perror(C.logdir);
        return 2;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] != 'c')
            continue;
        char p[1200];
        snprintf(p, sizeof p, "%s/%s", C.logdir, e->d_name);
        parse_log(p);
    }
    closedir(d);
    check_units();
    return 0;
}

/* ------------------------------------------------------------------ */
/* The self-test of the checks                                        */
/* ------------------------------------------------------------------ */

/* Forget what one round of checks found, so that they can run again. */
static void checks_reset(void)
{
    memset(&K, 0, sizeof K);
    nkeys = 0;
    free(dbcos);
    dbcos = NULL;
    ncos = 0;
    memset(flash_soldout, 0, (size_t)C.nflash);
}

static int q_ok(MYSQL *m, const char *q)
{
    if (ll_exec(m, q) != 0) {
        fprintf(stderr, "stress: selftest: %s: %s\n", q, mysql_error(m));
        return 0;
    }
    return 1;
}

/* A tampered client's log, as it was, to be put back. */
static char forged_path[1200], *forged_orig;
static size_t forged_len;

static int write_file(const char *path, const char *p, size_t n)
{
    char tmp[1300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        perror(tmp);
        return 0;
    }
    return rename(tmp, path) == 0;
}

/* What one log says of each token, for the tamperings: where its last
 * acknowledged reserve ends, if nothing followed it, and where its first
 * claim is, if that was acknowledged at once.  The tokens' lines may be
 * interleaved (batches). */
struct logtok {
    char tok[64];
    long after;       /* end of its acknowledged reserve's line, or -1 */
    int spoiled;      /* a claim, release or doubt came after it */
    long c_at, c_end; /* its first claim's line if "C TOK 0 0", else -1 */
    int claims, doubt;
};

static struct logtok *logtok_get(struct logtok *v, int *n, int max,
                                 const char *tok)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(v[i].tok, tok))
            return &v[i];
    if (*n == max)
        return NULL;
    struct logtok *t = &v[(*n)++];
    memset(t, 0, sizeof *t);
    snprintf(t->tok, sizeof t->tok, "%s", tok);
    t->after = t->c_at = t->c_end = -1;
    return t;
}

/* Read the tokens of buf (a log) into v. */
static int log_tokens(const char *buf, struct logtok *v, int max)
{
    int n = 0;
    for (const char *l = buf; *l;) {
        const char *nl = strchr(l, '\n');
        if (!nl)
            break;
        char tok[64] = "", op = 0;
        int rc = -1, dbt = -1, na = 0, off = 0;
        struct logtok *t = NULL;
        if (sscanf(l, "a %c %63s", &op, tok) == 2 && op != 's') {
            if ((t = logtok_get(v, &n, max, tok)) && op != 'r')
                t->spoiled = 1;
        } else if (l[0] == 'R' && sscanf(l, "R %63s %d %d %d%n", tok, &rc,
                                          &dbt, &na, &off) >= 4) {
            if (!(t = logtok_get(v, &n, max, tok)))
                goto next;
            /* only where a forged claim cannot also look like an
             * oversell: every key it claims at has stock to spare beyond
             * its quantity (the log-based count of claims + holds + pool
             * against the stock put in) */
            int spare = rc == 0 && dbt == 0 && na > 0;
            struct tokst a;
            memset(&a, 0, sizeof a);
            char rest[1200]; /* parse_alloc cuts its text up */
            snprintf(rest, sizeof rest, "%.*s", (int)(nl - l - off), l + off);
            parse_alloc(&a, rest, na);
            for (int y = 0; y < a.na && spare; y++) {
                struct key *k = key_get(tok_shop(tok), a.ai[y], a.al[y]);
                spare = k->stock_max - k->claim_acked - k->held -
                            k->pooled >= 2 * a.aq[y];
            }
            t->after = spare ? nl + 1 - buf : -1;
            t->spoiled = !spare;
            t->doubt |= dbt != 0;
        } else if ((l[0] == 'C' || l[0] == 'L') &&
                   sscanf(l + 2, "%63s %d %d", tok, &rc, &dbt) == 3) {
            if (!(t = logtok_get(v, &n, max, tok)))
                goto next;
            t->spoiled = 1;
            if (l[0] == 'C' && t->claims++ == 0 && rc == 0 && dbt == 0 &&
                !t->doubt) {
                t->c_at = l - buf;
                t->c_end = nl + 1 - buf;
            }
        } else if (l[0] == 'D') {
            /* the token it names, if any: its last word */
            const char *w = nl;
            while (w > l && w[-1] != ' ')
                w--;
            snprintf(tok, sizeof tok, "%.*s", (int)(nl - w), w);
            for (int i = 0; i < n; i++)
                if (!strcmp(v[i].tok, tok))
                    v[i].spoiled = v[i].doubt = 1;
        }
    next:
        l = nl + 1;
    }
    return n;
}

/* Tamper with one client's log: the first token whose name begins with
 * prefix and that fits (see the modes below) has the text of
 * [at, end) replaced by ins.  The log as it was is kept for
 * untamper_log.
 *   TAMPER_CLAIM: after the acknowledged reserve of a checkout that was
 *     then abandoned (no claim, release or doubt after it), a claim that
 *     was never made: "a c TOK" and "C TOK 0 0".  The checkout is not
 *     claimed in the database, and the claim's units never left the
 *     ledger.
 *   TAMPER_CLAIMED: the acknowledged first claim of a checkout ("C TOK 0
 *     0") answered RSV_ECLAIMED instead: as if an earlier claim that said
 *     nothing was applied had applied. */
enum { TAMPER_CLAIM, TAMPER_CLAIMED };

static int tamper_log(int mode, const char *prefix, char *what, size_t wn)
{
    enum { MAXTOK = 20000 };
    static struct logtok v[MAXTOK];
    DIR *d = opendir(C.logdir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] != 'c')
            continue;
        snprintf(forged_path, sizeof forged_path, "%s/%s", C.logdir,
                 e->d_name);
        char *buf = ll_slurp(forged_path);
        if (!buf)
            continue;
        int n = log_tokens(buf, v, MAXTOK);
        for (int i = 0; i < n; i++) {
            struct logtok *t = &v[i];
            struct dbco *co = co_find(tok_shop(t->tok), t->tok);
            if (strncmp(t->tok, prefix, strlen(prefix)) || !co)
                continue;
            char ins[200];
            long at, end;
            if (mode == TAMPER_CLAIM && t->after >= 0 && !t->spoiled &&
                co->status != 2) {
                at = end = t->after;
                snprintf(ins, sizeof ins, "a c %.63s\nC %.63s 0 0\n", t->tok,
                         t->tok);
                snprintf(what, wn, "%.63s (in %.60s) logged as claimed, "
                                   "never claimed", t->tok, e->d_name);
            } else if (mode == TAMPER_CLAIMED && t->c_at >= 0 &&
                       co->status == 2) {
                at = t->c_at;
                end = t->c_end;
                snprintf(ins, sizeof ins, "C %.63s %d 0\n", t->tok,
                         RSV_ECLAIMED);
                snprintf(what, wn, "the first claim of %.63s (in %.60s) "
                                   "logged as answered already claimed",
                         t->tok, e->d_name);
            } else {
                continue;
            }
            size_t len = strlen(buf), k = strlen(ins);
            char *nb = malloc(len + k + 1);
            if (!nb)
                exit(2);
            memcpy(nb, buf, (size_t)at);
            memcpy(nb + at, ins, k);
            memcpy(nb + at + k, buf + end, len - (size_t)end);
            forged_orig = buf;
            forged_len = len;
            int ok = write_file(forged_path, nb, len - (size_t)(end - at) + k);
            free(nb);
            closedir(d);
            return ok;
        }
        free(buf);
    }
    if (d)
        closedir(d);
    fprintf(stderr, "stress: selftest: no checkout of a %s... token to "
                    "tamper with\n", prefix);
    return 0;
}

static int untamper_log(void)
{
    int ok = write_file(forged_path, forged_orig, forged_len);
    free(forged_orig);
    forged_orig = NULL;
    return ok;
}

/* Two pool rows for a flash item every unit of which is held or claimed,
 * behind the library's back (not counted in `issued`, ids beyond
 * next_unit_id). */
static int add_pool_rows(MYSQL *m, long item, int undo, char *what, size_t wn)
{
    char q[600];
    if (undo)
        snprintf(q, sizeof q,
                 "DELETE FROM rsv_pool WHERE shop_id = %d AND "
                 "item_id = %ld AND location_id = 1 AND id "
                 ">= (SELECT next_unit_id + 1000000 FROM rsv_ledger "
                 "WHERE shop_id = %d AND item_id = %ld AND "
                 "location_id = 1)", SHOP_FLASH, item, SHOP_FLASH, item);
    else
        snprintf(q, sizeof q,
                 "INSERT INTO rsv_pool (shop_id, item_id, "
                 "location_id, id) SELECT shop_id, item_id, "
                 "location_id, next_unit_id + 1000000 + x.n FROM "
                 "rsv_ledger, (SELECT 0 AS n UNION ALL SELECT 1) x "
                 "WHERE shop_id = %d AND item_id = %ld AND "
                 "location_id = 1", SHOP_FLASH, item);
    if (!q_ok(m, q) || mysql_affected_rows(m) != 2)
        return 0;
    snprintf(what, wn, "2 pool rows inserted for sold-out flash item %ld "
                       "location 1", item);
    return 1;
}

/* Delete one active hold of a checkout that is still held, for a flash
 * item that its buyers were told is sold out: the client's log still
 * says the hold was acknowledged.  Kept aside to be put back. */
static int delete_hold(MYSQL *m, long item, int undo, char *what, size_t wn)
{
    char q[800];
    if (undo)
        return q_ok(m, "INSERT INTO rsv_holds SELECT * FROM "
                       "stress_selftest_hold") &&
               mysql_affected_rows(m) == 1 &&
               q_ok(m, "DROP TABLE stress_selftest_hold");
    snprintf(q, sizeof q,
             "CREATE TABLE stress_selftest_hold AS SELECT h.* FROM "
             "rsv_holds h JOIN rsv_checkouts c ON "
             "c.shop_id = h.shop_id AND c.checkout_token = h.checkout_token "
             "WHERE h.shop_id = %d AND h.item_id = %ld AND "
             "c.status = 1 AND h.expires_at > NOW(6) LIMIT 1", SHOP_FLASH,
             item);
    if (!q_ok(m, q) ||
        q_int(m, "SELECT COUNT(*) FROM stress_selftest_hold") != 1 ||
        !q_ok(m, "DELETE h FROM rsv_holds h JOIN "
                 "stress_selftest_hold s USING (shop_id, checkout_token, "
                 "item_id, location_id)") ||
        mysql_affected_rows(m) != 1)
        return 0;
    MYSQL_RES *r = NULL;
    MYSQL_ROW row;
    char tok[64] = "?";
    if (!mysql_query(m, "SELECT checkout_token FROM stress_selftest_hold") &&
        (r = mysql_store_result(m)) && (row = mysql_fetch_row(r)) && row[0])
        snprintf(tok, sizeof tok, "%s", row[0]);
    if (r)
        mysql_free_result(r);
    snprintf(what, wn, "the acknowledged hold of %s on sold-out flash item "
                       "%ld deleted", tok, item);
    return 1;
}

/* The four counters a tampering may make fire (open_txns never). */
enum { F_OVER = 1, F_UNDER = 2, F_LOST = 4, F_TWICE = 8 };

/* Run the checks; they must find exactly the counters in `fire` above 0
 * (and the audit violations only if `audit`).  1 if so. */
static int selftest_check(MYSQL *m, const char *name, const char *what,
                          int fire, int audit)
{
    checks_reset();
    if (run_checks(m))
        exit(2);
    int got = (K.oversold ? F_OVER : 0) | (K.undersold ? F_UNDER : 0) |
              (K.lost_holds ? F_LOST : 0) | (K.double_claims ? F_TWICE : 0);
    int ok = got == fire && !K.open_txns && !K.eintxn &&
             (audit ? K.audit_violations > 0 : K.audit_violations == 0);
    printf("stress: selftest: %-13s oversold=%ld undersold=%ld lost_holds=%ld "
           "double_claims=%ld open_txns=%ld audit_violations=%ld -> %s%s%s%s\n",
           name, K.oversold, K.undersold, K.lost_holds, K.double_claims,
           K.open_txns, K.audit_violations,
           ok ? (fire ? "fired, as it must" : "clean, as it must")
              : "WRONG", what[0] ? " (" : "", what, what[0] ? ")" : "");
    fflush(stdout);
    return ok;
}

/* The self-test: clean, then each tampering (and its undoing) in turn,
 * then clean again.  0 when every check fired where it must, only there. */
static int selftest_run(MYSQL *m)
{
    int round = atomic_load(&shm->flash_round);
    if (round < 1) {
        fprintf(stderr, "stress: selftest: no flash round was sold out\n");
        return 2;
    }
    long item = FLASH_ITEM0 + round - 1; /* every buyer saw it sold out */
    char what[300] = "";
    int ok = selftest_check(m, "as run:", "", 0, 0);

    /* the same in a batch buyer's log, whose tokens' lines interleave */
    static const char *const forge_in[2] = {"m", "bm"};
    static const char *const forge_name[2] = {"forged claim:",
                                              "batch claim:"};
    for (int i = 0; i < 2; i++) {
        if (!tamper_log(TAMPER_CLAIM, forge_in[i], what, sizeof what))
            return 2;
        ok &= selftest_check(m, forge_name[i], what, F_LOST | F_TWICE, 0);
        if (!untamper_log())
            return 2;
    }

    /* a batch claim answered "already claimed" at once */
    if (!tamper_log(TAMPER_CLAIMED, "bm", what, sizeof what))
        return 2;
    ok &= selftest_check(m, "claimed:", what, F_LOST, 0);
    if (!untamper_log())
        return 2;

    if (!add_pool_rows(m, item, 0, what, sizeof what))
        return 2;
    /* the audit sees it too: pool + holds above stock, units invented */
    ok &= selftest_check(m, "pool rows:", what, F_OVER, 1);
    if (!add_pool_rows(m, item, 1, what, sizeof what))
        return 2;

    if (!delete_hold(m, item, 0, what, sizeof what))
        return 2;
    /* the audit sees units lost; undersold counts the unit not held */
    ok &= selftest_check(m, "deleted hold:", what, F_UNDER, 1);
    if (!delete_hold(m, item, 1, what, sizeof what))
        return 2;

    what[0] = 0;
    ok &= selftest_check(m, "undone:", what, 0, 0);
    printf("stress: selftest: %s\n",
           ok ? "passed: each check fired on its tampering, and only then"
              : "FAILED: a check did not fire, or fired where it must not");
    return ok ? 0 : 1;
}

/* ------------------------------------------------------------------ */
/* Set-up and main                                                    */
/* ------------------------------------------------------------------ */

static void setup_stock(void)
{
    MYSQL *m = admin_connect();
    rsv_options o;
    rsv_options_init(&o, RSV_OPTIONS_VERSION);
    o.pool_cap = C.pool_cap;
    rsv_ctx *ctx = NULL;
    if (rsv_open(&ctx, m, &o) != RSV_OK) {
        fprintf(stderr, "stress: rsv_open: %s\n", rsv_errmsg(ctx));
        exit(2);
    }
    if (q_int(m, "SELECT COUNT(*) FROM rsv_ledger") != 0) {
        fprintf(stderr, "stress: the database is not empty\n");
        exit(2);
    }
    int rc = 0;
    for (int i = 1; i <= NITEMS && !rc; i++)
        for (int l = 1; l <= NLOCS && !rc; l++)
            rc = rsv_stock_set(ctx, SHOP_MIX, (uint64_t)i, (uint64_t)l,
                               C.init_stock);
    for (int f = 0; f < C.nflash && !rc; f++)
        for (int l = 1; l <= FLASH_LOCS && !rc; l++)
            rc = rsv_stock_set(ctx, SHOP_FLASH, FLASH_ITEM0 + (uint64_t)f,
                               (uint64_t)l, flash_stock_at(f, l, C.flash_stock));
    if (rc) {
        fprintf(stderr, "stress: stock set-up: %s\n", rsv_errmsg(ctx));
        exit(2);
    }
    rsv_close(ctx);
    mysql_close(m);
}

/* The batch and batcher buyers' line: what they sent, how their batch
 * CALLs (each the batch's one COMMIT) were cut, after forwarding (the
 * server commits, the client never hears) and before, and what the cuts
 * left in doubt and the buyers settled by repeating.  Returns 1 when the
 * batches were never cut at their COMMIT (with cuts on): that coverage
 * must not vanish unnoticed. */
static int batch_report(const struct pstats *ps, const int *has_role,
                        int cutting)
{
    const struct batchst *b = &shm->b;
    if (!has_role[ROLE_BATCH] && !has_role[ROLE_BATCHER])
        return 0;
    printf("stress: batches: reserve=%ld claim=%ld release=%ld (entries "
           "%ld/%ld/%ld); batcher calls=%ld",
           (long)b->calls[0], (long)b->calls[1], (long)b->calls[2],
           (long)b->entries[0], (long)b->entries[1], (long)b->entries[2],
           (long)b->bt_calls);
    if (cutting) {
        printf("; cut at the batch CALL, after/before forwarding:");
        for (int k = RBATCH_KIND; k <= BATCHER_KIND; k++)
            printf(" %s=%ld/%ld", kind_name[k], ps->after_kind[k],
                   ps->cut[k] - ps->after_kind[k]);
    }
    printf("; in doubt: %ld batches repeated whole (entries looked up "
           "committed=%ld not=%ld; claims the repeat found claimed=%ld), "
           "%ld batches answered RSV_ECONN, %ld batches with %ld entries "
           "cut mid batch, %ld repeats; batcher calls answered in doubt=%ld\n",
           (long)b->indoubt, (long)b->found_committed, (long)b->found_not,
           (long)b->repeat_claimed, (long)b->econn, (long)b->lost_mid,
           (long)b->entry_lost, (long)b->repeats, (long)b->bt_lost);
    if (!cutting)
        return 0;
    int bad = 0;
    for (int k = RBATCH_KIND; k <= BATCHER_KIND; k++) {
        int role = k == BATCHER_KIND ? ROLE_BATCHER : ROLE_BATCH;
        if (!has_role[role])
            continue;
        /* both sides of the COMMIT for the batch buyers' CALLs; the
         * batcher's, at least once after it */
        long after = ps->after_kind[k], before = ps->cut[k] - after;
        if (after == 0 || (k != BATCHER_KIND && before == 0)) {
            bad = 1;
            fprintf(stderr, "stress: no %s was cut %s forwarding: the "
                            "batches' COMMIT went uncovered\n", kind_name[k],
                    after ? "before" : "after");
        }
    }
    if (has_role[ROLE_BATCH] && b->indoubt == 0) {
        bad = 1;
        fprintf(stderr, "stress: no batch was answered RSV_EINDOUBT: the "
                        "settling of batches in doubt went untested\n");
    }
    return bad;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: stress --socket PATH --server-dir DIR --logdir DIR "
            "--proxy PATH --mariadb-sh PATH\n"
            "              [--quick] [--clients N] [--ops N] [--duration S] "
            "[--seed N]\n"
            "              [--think-ms N] [--no-proxy (no COMMIT cuts)]\n"
            "              [--selftest] [--fill PATH [--fill-at S] "
            "[--fill-for S]]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int quick = 0, think = -1;
    long clients = -1, ops = -1, duration = -1;
    double fill_at = -1, fill_for = -1;
    C.seed = (unsigned)time(NULL);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) {
            quick = 1;
            continue;
        }
        if (!strcmp(a, "--think-ms") && v) {
            think = atoi(v);
            i++;
            continue;
        }
        if (!strcmp(a, "--no-proxy")) {
            C.no_proxy = 1;
            continue;
        }
        if (!strcmp(a, "--selftest")) {
            C.selftest = 1;
            continue;
        }
        if (!v)
            usage();
        i++;
        if (!strcmp(a, "--socket"))
            C.sock = v;
        else if (!strcmp(a, "--server-dir"))
            C.srvdir = v;
        else if (!strcmp(a, "--logdir"))
            C.logdir = v;
        else if (!strcmp(a, "--proxy"))
            C.proxy = v;
        else if (!strcmp(a, "--mariadb-sh"))
            C.mariadb_sh = v;
        else if (!strcmp(a, "--clients"))
            clients = atol(v);
        else if (!strcmp(a, "--ops"))
            ops = atol(v);
        else if (!strcmp(a, "--duration"))
            duration = atol(v);
        else if (!strcmp(a, "--seed"))
            C.seed = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--fill"))
            C.fill = v;
        else if (!strcmp(a, "--fill-at"))
            fill_at = atof(v);
        else if (!strcmp(a, "--fill-for"))
            fill_for = atof(v);
        else
            usage();
    }
    if (!C.sock || !C.srvdir || !C.logdir || !C.proxy || !C.mariadb_sh)
        usage();
    /* the default run and the quick one */
    C.clients = quick ? 16 : 40;
    C.ops = quick ? 5000 : 50000;
    C.duration = quick ? 60 : 480;
    C.think_ms = quick ? 200 : 400;
    C.kc_every = quick ? 1.5 : 2.5;
    C.cc_every = quick ? 1.0 : 2.0;
    C.ks_every = quick ? 25 : 60;
    C.storm_every = quick ? 3 : 4;
    C.storm_hold_ms = 2500;
    C.init_stock = 400;
    C.pool_cap = 50;
    C.flash_stock = 60;
    /* (the batch and batcher buyers sell flash rounds out too: the full
     * run needs more than 400) */
    C.nflash = quick ? 400 : 600;
    C.batch_max = quick ? 8 : 16;
    C.bt_threads = 6;
    C.bt_conns = 2;
    if (clients > 0)
        C.clients = (int)clients;
    if (think >= 0)
        C.think_ms = think;
    if (ops >= 0)
        C.ops = ops;
    if (duration > 0)
        C.duration = (int)duration;
    if (C.clients < 4 || C.clients > MAXC) {
        fprintf(stderr, "stress: --clients must be 4..%d\n", MAXC);
        return 2;
    }
    C.max_duration = C.duration * 2 + 60;
    /* the disk-full run: full from a quarter of the run for a third of it,
     * so the last part runs with the space back */
    C.fill_at = fill_at >= 0 ? fill_at : C.duration / 4.0;
    C.fill_for = fill_for > 0 ? fill_for : C.duration / 3.0;
    if (C.fill && C.fill_at + C.fill_for + 5 > C.duration) {
        fprintf(stderr, "stress: --fill-at + --fill-for must end 5 s before "
                        "--duration\n");
        return 2;
    }
    /* the self-test checks the checker: no cuts or kills, so that no
     * outcome is unknown and each tampering shows exactly */
    int no_cuts = C.selftest || getenv("STRESS_NO_CUTS") != NULL;
    int no_client_kill = C.selftest || getenv("STRESS_NO_CLIENT_KILL") != NULL;
    int no_server_kill = C.selftest || getenv("STRESS_NO_SERVER_KILL") != NULL;
    flash_soldout = calloc((size_t)C.nflash, 1);
    mkdir(C.logdir, 0755);
    signal(SIGPIPE, SIG_IGN);

    shm = mmap(NULL, sizeof *shm, PROT_READ | PROT_WRITE,
               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shm == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    memset(shm, 0, sizeof *shm);
    setup_stock();
    start_proxy();
    fprintf(stderr, "stress: %d clients, >= %ld operations, >= %d s, seed %u, "
                    "proxy port %d\n", C.clients, C.ops, C.duration, C.seed,
            C.port);

    pid_t tm = fork();
    if (tm == 0) {
        close_parent_fds();
        troublemaker_main();
    }
    for (int s = 0; s < C.clients; s++)
        spawn_client(s);

    uint64_t rng = C.seed ^ 0x5555;
    long kill_client = 0, kill_reserve = 0, kill_claim = 0, kill_server_n = 0;
    long cuts_done = 0, last_sent = 0, stalls = 0, stuck_calls = 0, client_exits = 0, flash_timeouts = 0;
    uint64_t t0 = ll_now_ms(), next_kc = t0 + (uint64_t)(C.kc_every * 1000);
    uint64_t next_cc = t0 + 1000, last_cc = 0;
    double cut_p = 0;
    /* Batch CALLs are a small share of the commit points, so a few cuts
     * of each batch kind are armed as well, spread over the run, until
     * each has been cut batch_floor times (half of them after forwarding:
     * the server commits, the client never hears); their coverage then
     * does not hang on chance. */
    int has_role[5] = {0};
    for (int s = 0; s < C.clients; s++)
        has_role[role_of(s)] = 1;
    const int batch_kinds[3] = {RBATCH_KIND, SBATCH_KIND, BATCHER_KIND};
    int batch_floor = quick ? 4 : 10;
    long armed_at[NKINDS] = {0};
    uint64_t arm_every =
        (uint64_t)C.duration * 1000 / (uint64_t)(batch_floor + 2);
    uint64_t next_arm = t0 + arm_every / 2;
    uint64_t next_ks = t0 + (uint64_t)(C.ks_every * 1000);
    uint64_t flash_t = t0, last_progress = t0, last_report = t0;
    uint64_t next_alive = t0 + 1000;
    long server_deaths = 0, server_deaths_full = 0;
    long last_ops = 0;
    int kill_target = OP_RESERVE, stalled = 0, tm_done = 0;
    for (;;) {
        uint64_t t = ll_now_ms();
        long total = 0;
        for (int s = 0; s < C.clients; s++)
            total += atomic_load(&shm->s[s].ops);
        double el = (double)(t - t0) / 1000.0;
        /* the self-test needs a flash round sold out, and a batch buyer's
         * abandoned and claimed checkouts, to tamper with */
        int enough = !C.selftest || (atomic_load(&shm->flash_round) >= 1 &&
                                     atomic_load(&shm->b.abandoned) >= 4 &&
                                     atomic_load(&shm->b.claimed) >= 4);
        if ((total >= C.ops && el >= C.duration && enough) ||
            el >= C.max_duration)
            break;
        /* children that exited on their own (they should not) */
        int st;
        pid_t p;
        while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
            if (p == tm) {
                tm_done = 1;
                fprintf(stderr, "stress: the troublemaker exited (%d)\n", st);
                continue;
            }
            if (p == proxy_pid) {
                fprintf(stderr, "stress: the proxy died (%d)\n", st);
                atomic_store(&shm->stop, 1);
                for (int s = 0; s < C.clients; s++)
                    kill(atomic_load(&shm->s[s].pid), SIGKILL);
                kill(tm, SIGKILL);
                exit(2);
            }
            for (int s = 0; s < C.clients; s++)
                if (atomic_load(&shm->s[s].pid) == p) {
                    client_exits++;
                    fprintf(stderr, "stress: client %d exited (status %d); "
                                    "restarting it\n", s, st);
                    spawn_client(s);
                }
        }
        if (t >= next_kc && !no_client_kill) {
            /* SIGKILL a client while it is inside reserve or claim */
            int victim = -1;
            for (int tries = 0; tries < 400 && victim < 0; tries++) {
                int start = (int)ll_rnd(&rng, (unsigned)C.clients);
                for (int j = 0; j < C.clients; j++) {
                    int s = (start + j) % C.clients;
                    if (atomic_load(&shm->s[s].op) == kill_target) {
                        kill(atomic_load(&shm->s[s].pid), SIGKILL);
                        victim = s;
                        break;
                    }
                }
                if (victim < 0)
                    ll_sleep_ms(1);
            }
            if (victim >= 0) {
                waitpid(atomic_load(&shm->s[victim].pid), &st, 0);
                kill_client++;
                if (kill_target == OP_RESERVE)
                    kill_reserve++;
                else
                    kill_claim++;
                spawn_client(victim);
                kill_target = kill_target == OP_RESERVE ? OP_CLAIM : OP_RESERVE;
            }
            next_kc = ll_now_ms() + (uint64_t)(C.kc_every * 500) +
                      ll_rnd(&rng, (unsigned)(C.kc_every * 1000) + 1);
        }
        if (t >= next_cc && !C.no_proxy && !no_cuts) {
            /* The proxy cuts every commit point with probability p, so
             * that each kind is cut as often as it is sent (not by time:
             * see cutproxy.c).  p follows the rate of commit points of
             * the last period, for one cut per cc_every seconds. */
            struct pstats ps;
            if (proxy_stats(&ps)) {
                long sent = 0;
                for (int k = 0; k < NKINDS; k++)
                    sent += ps.seen[k];
                double period = (double)(t - last_cc) / 1000.0;
                if (sent > last_sent && last_cc) {
                    cut_p = period / C.cc_every / (double)(sent - last_sent);
                    if (cut_p > 1)
                        cut_p = 1;
                }
                last_sent = sent;
                cuts_done = ps.cuts;
                char cmd[48];
                snprintf(cmd, sizeof cmd, "p %.9f\n", cut_p);
                proxy_cmd(cmd);
                for (int b = 0; b < 3 && t >= next_arm; b++) {
                    int k = batch_kinds[b];
                    int role = k == BATCHER_KIND ? ROLE_BATCHER : ROLE_BATCH;
                    /* one armed at a time: the last has been taken */
                    if (has_role[role] && ps.cut[k] < batch_floor &&
                        ps.cut[k] >= armed_at[k]) {
                        snprintf(cmd, sizeof cmd, "k %s\n", kind_arm[k]);
                        proxy_cmd(cmd);
                        armed_at[k] = ps.cut[k] + 1;
                    }
                }
                if (t >= next_arm)
                    next_arm = t + arm_every;
            }
            last_cc = t;
            next_cc = t + 2000;
        }
        if (t >= next_ks && !no_server_kill) {
            int r = kill_server();
            if (r < 0)
                break;
            kill_server_n += r;
            next_ks = ll_now_ms() + (uint64_t)(C.ks_every * 1000);
            last_progress = ll_now_ms();
        }
        if (t >= next_alive) {
            /* a server that died without being killed: a failure, but
             * start it again so that the run can still be checked.  While
             * the disk is full (and for a while after: its crash recovery)
             * MariaDB may abort, and abort again in recovery until the
             * space is back: counted apart, restarted until it stays up */
            int sp = server_pid();
            if (sp <= 0 || !proc_alive(sp)) {
                int full = C.fill && el >= C.fill_at &&
                           el < C.fill_at + C.fill_for + 10;
                if (full)
                    server_deaths_full++;
                else
                    server_deaths++;
                fprintf(stderr, "stress: %.0f s: the server died (not killed "
                                "by the stress%s); see %s/error.log\n", el,
                        full ? "; the disk is full" : "", C.srvdir);
                if (restart_server(full ? "died while the disk was full"
                                        : "died", full) < 0 && !full)
                    break;
                last_progress = ll_now_ms();
            }
            next_alive = ll_now_ms() + 1000;
        }
        fill_step(el);
        /* flash rounds: the next one starts when every flash buyer saw
         * the current one sold out */
        int round = atomic_load(&shm->flash_round);
        if (round < C.nflash) {
            int all = 1;
            for (int s = 0; s < C.clients; s++)
                if (role_of(s) == ROLE_FLASH &&
                    atomic_load(&shm->s[s].flash_done) <= round)
                    all = 0;
            if (all || t - flash_t > 60000) {
                if (!all)
                    flash_timeouts++;
                atomic_store(&shm->flash_round, round + 1);
                flash_t = t;
            }
        }
        /* a client stuck inside one call: show where */
        for (int s = 0; s < C.clients; s++) {
            struct slot *sl = &shm->s[s];
            uint64_t since = atomic_load(&sl->op_since);
            if (atomic_load(&sl->op) != OP_IDLE && since &&
                t > since + 30000 && !atomic_load(&sl->reported)) {
                atomic_store(&sl->reported, 1);
                stuck_calls++;
                fprintf(stderr, "stress: client %d (pid %d) inside one call "
                                "for 30 s\n", s, atomic_load(&sl->pid));
                dump_state();
                backtrace_of(atomic_load(&sl->pid));
            }
        }
        if (total != last_ops) {
            last_ops = total;
            last_progress = t;
            stalled = 0;
        } else if (t > last_progress + 30000 && !stalled) {
            stalls++;
            stalled = 1;
            fprintf(stderr, "stress: no progress for 30 s\n");
            dump_state();
        }
        if (t - last_report >= 30000) {
            last_report = t;
            fprintf(stderr, "stress: %.0f s: %ld ops, kills %ld, server "
                            "kills %ld, cuts %ld, flash round %d\n",
                    el, total, kill_client, kill_server_n, cuts_done,
                    atomic_load(&shm->flash_round));
        }
        ll_sleep_ms(5);
    }
    double elapsed = (double)(ll_now_ms() - t0) / 1000.0;
    {
        /* the clients are to finish against a live server */
        int sp = server_pid();
        if ((sp <= 0 || !proc_alive(sp)) && restart_server("died", 0) > 0)
            server_deaths++;
    }

    /* stop: clients finish the checkout in hand */
    atomic_store(&shm->stop, 1);
    proxy_cmd("x\n");
    uint64_t ts = ll_now_ms();
    int live = C.clients + (tm_done ? 0 : 1), hung = 0;
    int64_t hang_open = 0;
    while (live > 0) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            if (p == proxy_pid)
                continue;
            live--;
            continue;
        }
        if (ll_now_ms() - ts > 40000) {
            fprintf(stderr, "stress: %d processes did not stop in 40 s\n",
                    live);
            dump_state();
            {
                /* transactions still open while their clients are stuck:
                 * left open, whatever happens when we kill the clients */
                MYSQL *hm = raw_connect(NULL, 0, C.sock, 30);
                if (hm) {
                    hang_open = q_int(hm, "SELECT COUNT(*) FROM "
                                          "information_schema.innodb_trx "
                                          "WHERE trx_mysql_thread_id <> "
                                          "CONNECTION_ID()");
                    mysql_close(hm);
                }
            }
            if (getenv("STRESS_SERVER_STACKS")) {
                char cmd[1400];
                snprintf(cmd, sizeof cmd, "gdb -p %d -batch -ex 'thread "
                         "apply all bt 25' </dev/null >'%s/server-stacks.txt' "
                         "2>&1; ss -xpn >'%s/sockets.txt' 2>&1", server_pid(),
                         C.srvdir, C.srvdir);
                if (system(cmd) != 0)
                    fprintf(stderr, "stress: (no server stacks)\n");
            }
            for (int s = 0; s < C.clients; s++) {
                int pid = atomic_load(&shm->s[s].pid);
                if (proc_alive(pid)) {
                    hung++;
                    fprintf(stderr, "stress: client %d (pid %d, op %d) "
                                    "did not stop:\n", s, pid,
                            atomic_load(&shm->s[s].op));
                    backtrace_of(pid);
                    kill(pid, SIGKILL);
                }
            }
            kill(tm, SIGKILL);
            ll_sleep_ms(200);
            while (waitpid(-1, &st, WNOHANG) > 0)
                ;
            break;
        }
        ll_sleep_ms(20);
    }
    struct pstats ps;
    (void)proxy_stats(&ps);
    long cuts = ps.cuts, cuts_after = ps.after, cuts_before = ps.before;
    const long *cut_kind = ps.cut, *seen_kind = ps.seen;
    fclose(proxy_in);
    waitpid(proxy_pid, NULL, 0);
    if (fill_fd >= 0 && atomic_load(&shm->full)) { /* the run ended early */
        close(fill_fd);
        fill_fd = -1;
        unlink(C.fill);
        atomic_store(&shm->full, 0);
    }

    MYSQL *m = admin_connect();
    if (C.selftest) {
        int rc = selftest_run(m);
        mysql_close(m);
        return rc;
    }
    int64_t deadlocks = deadlocks_before + server_deadlocks();
    if (run_checks(m))
        return 2;
    if (hang_open > K.open_txns)
        K.open_txns = hang_open;
    mysql_close(m);

    /* Every kind of commit point must have gone through the proxy: else
     * the workload (or the library's choice of path) changed and the cuts
     * no longer reach that kind. */
    int uncovered = 0;
    if (!C.no_proxy) {
        for (int pass = 0; pass < 2; pass++) {
            const long *n = pass ? seen_kind : cut_kind;
            printf(pass ? " (commit points sent: " : "stress: cuts: ");
            for (int k = 0; k < NKINDS; k++) {
                printf("%s%s=%ld", k ? " " : "", kind_name[k], n[k]);
                if (k == SETTLE_KIND || k == SBATCH_KIND) {
                    const long *sub = pass ? ps.seen_sub[k == SBATCH_KIND]
                                           : ps.cut_sub[k == SBATCH_KIND];
                    printf(" (claims=%ld releases=%ld", sub[1], sub[2]);
                    if (sub[0]) /* the argument could not be read */
                        printf(" unread=%ld", sub[0]);
                    printf(")");
                }
            }
        }
        printf(")\n");
        for (int k = 0; k < NKINDS; k++) {
            int need = k < 4 || ((k == RBATCH_KIND || k == SBATCH_KIND) &&
                                 has_role[ROLE_BATCH]) ||
                       (k == BATCHER_KIND && has_role[ROLE_BATCHER]);
            if (need && !seen_kind[k]) {
                uncovered++;
                fprintf(stderr, "stress: no %s was sent through the proxy: "
                                "the run does not cover that commit "
                                "point\n", kind_name[k]);
            } else if (need && cuts >= 20 && !cut_kind[k]) {
                fprintf(stderr, "stress: (no %s was cut this time)\n",
                        kind_name[k]);
            }
        }
        for (int r = 0; r < 1 + has_role[ROLE_BATCH]; r++)
            for (int k = 1; k < 3; k++)
                if (!ps.seen_sub[r][k]) {
                    uncovered++;
                    fprintf(stderr, "stress: no %s went through %s\n",
                            k == 1 ? "claim" : "release",
                            kind_name[r ? SBATCH_KIND : SETTLE_KIND]);
                }
    }
    int batch_uncut = batch_report(&ps, has_role, !C.no_proxy && !no_cuts);
    int full_refused = 0;
    if (C.fill) {
        printf("stress: diskfull: %lld MiB filler for %.0f s; answers while "
               "full:", fill_bytes >> 20, C.fill_for);
        for (int i = 0; i < NCODES; i++)
            if (atomic_load(&shm->full_rc[i]))
                printf(" %s=%ld", rsv_code_name(-i),
                       (long)atomic_load(&shm->full_rc[i]));
        printf("; refused for want of space: %ld; server aborts while "
               "full: %ld; heuristic recoveries: %ld; longest call %llu ms\n",
               (long)atomic_load(&shm->edb_full), server_deaths_full,
               heuristic_recoveries,
               (unsigned long long)atomic_load(&shm->max_call_ms));
        if (atomic_load(&shm->full_msg_set))
            printf("stress: diskfull: first refusal: %s\n", shm->full_msg);
        /* The server met the full disk if it refused work for want of
         * space or aborted on it (MariaDB aborts when a rollback needs a
         * page it cannot get; a run may meet only that); neither: the
         * phase tested nothing. */
        full_refused = atomic_load(&shm->edb_full) > 0 ||
                       server_deaths_full > 0;
        if (!full_refused)
            fprintf(stderr, "stress: the server never refused work for want "
                            "of space nor aborted on it: the disk-full "
                            "phase tested nothing\n");
        if (stuck_calls)
            fprintf(stderr, "stress: %ld calls sat in the library for 30 s "
                            "(a hang while the disk was full?)\n",
                    stuck_calls);
    }

    long faults = kill_client + cuts + kill_server_n + K.lock_timeout;
    printf("stress: detail: elapsed=%.0fs kill_reserve=%ld kill_claim=%ld "
           "cuts_after_commit=%ld cuts_before_commit=%ld "
           "indoubt_resolved=%ld econn_retries=%ld edb_retries=%ld "
           "eintxn=%ld storms=%ld deadlocks=%lld "
           "troublemaker_deadlock_victim=%ld tokens=%ld unknown_tokens=%ld "
           "flash_rounds=%d flash_rounds_timed_out=%ld audit_violations=%ld "
           "stalls=%ld stuck_calls=%ld longest_call_ms=%llu hung_clients=%d "
           "unexpected_client_exits=%ld server_deaths=%ld\n",
           elapsed, kill_reserve, kill_claim, cuts_after, cuts_before,
           K.indoubt, K.econn, K.edb, K.eintxn,
           (long)atomic_load(&shm->storms), (long long)deadlocks,
           (long)atomic_load(&shm->tm_deadlocks), K.tokens, K.unknown_tokens,
           atomic_load(&shm->flash_round), flash_timeouts, K.audit_violations,
           stalls, stuck_calls,
           (unsigned long long)atomic_load(&shm->max_call_ms), hung,
           client_exits, server_deaths);
    printf("stress: clients=%d ops=%ld faults=%ld (kill_client=%ld "
           "cut_commit=%ld kill_server=%ld lock_timeout=%ld) oversold=%ld "
           "undersold=%ld lost_holds=%ld double_claims=%ld open_txns=%ld\n",
           C.clients, K.ops, faults, kill_client, cuts, kill_server_n,
           K.lock_timeout, K.oversold, K.undersold, K.lost_holds,
           K.double_claims, K.open_txns);
    fflush(stdout);
    int bad = K.oversold || K.undersold || K.lost_holds || K.double_claims ||
              K.open_txns;
    if (K.audit_violations)
        fprintf(stderr, "stress: the audit found %ld violations\n",
                K.audit_violations);
    if (K.eintxn)
        fprintf(stderr, "stress: %ld calls were refused with RSV_EINTXN on a "
                        "connection with no transaction of the client's "
                        "(library bug: see docs/stress.md)\n", K.eintxn);
    if (client_exits)
        fprintf(stderr, "stress: %ld client processes ended on their own "
                        "(crash or exit)\n", client_exits);
    if (server_deaths)
        fprintf(stderr, "stress: the server died %ld times on its own\n",
                server_deaths);
    return bad || K.audit_violations || hung || K.eintxn || client_exits ||
                   server_deaths || uncovered || batch_uncut ||
                   (C.fill && (!full_refused || stuck_calls))
               ? 1
               : 0;
}
