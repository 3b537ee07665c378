/*
 * fuzz_stateful.c - libFuzzer target that drives the whole API against a
 * real MariaDB (RSV_TEST_SOCKET, e.g. under tools/mariadb.sh run; see
 * make fuzz-stateful).
 *
 * Each input decodes to a sequence of up to MAX_STEPS calls on one fresh
 * shop (so inputs never see each other's rows, and nothing has to be
 * deleted): reserve with random carts over 3 items x 3 locations (ids
 * include 0 and values above INT64_MAX; the shop id alternates between
 * small and above INT64_MAX too), re-reserve of a token, claim, release,
 * extend, status, sweep, replenish, stock_set / stock_adjust / stock_get,
 * batches of reserves, claims or releases (tokens may repeat in one),
 * short sleeps so holds with TTLs of 1-20 ms expire, claim/release joined
 * to a caller's transaction that is then committed or rolled back, and two
 * contexts with different options on two connections.
 *
 * Checks, any failure of which abort()s (libFuzzer saves the input):
 *  - every return code is one the header documents for that function,
 *    and not one that cannot happen here (RSV_EDB, RSV_ECONN, ...);
 *  - a per-token model (never reserved / held until a deadline / claimed
 *    / released or expired) predicts the idempotency codes: a claimed
 *    token stays claimed, an unknown one is RSV_ENOTFOUND, a hold well
 *    before its deadline is claimable and reports HELD, one well after it
 *    reports EXPIRED;
 *  - after a successful reserve every line is allocated in full at its own
 *    locations (one location unless RSV_LINE_SPLIT);
 *  - a reserve answered RSV_EOUTOFSTOCK is confirmed by rsv_stock_get
 *    for its failed line (available < quantity at every location, or all
 *    of them together for a split line) when no other line names that
 *    item and the token held nothing, unless a hold's deadline fell
 *    inside the window;
 *  - rsv_audit() of the shop after the sequence finds no violation.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <reserve/batch.h>

#include "fuzz_util.h"
#include "../loadlib.h"

#define MAX_STEPS 48
#define NTOK 4
#define NCTX 2

static MYSQL *conns[NCTX];
static rsv_ctx *ctxs[NCTX];
static char db_name[64];
static uint64_t shop_counter;

static const uint64_t items[3] = {1, 2, UINT64_MAX};
static const uint64_t locs[3] = {0, 7, UINT64_MAX - 1};
static const int64_t ttls[8] = {1, 2, 5, 20, 0, 0, 60000, 1};

enum { T_NONE, T_HELD, T_CLAIMED, T_GONE, T_UNKNOWN };
static const char *const tstate_name[] = {"none", "held", "claimed", "gone",
                                          "unknown"};
static struct {
    int state;
    double lo, hi; /* T_HELD: the deadline lies in [lo, hi] (ms) */
} toks[NTOK];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Slack for clocks and rounding between this process and the server
 * (same host). */
#define SLACK_MS 3.0

static MYSQL *connect_db(const char *db)
{
    ll_server srv;
    if (ll_server_from_env(&srv) != 0) {
        fprintf(stderr, "fuzz_stateful: RSV_TEST_SOCKET is not set: run "
                        "make fuzz-stateful (tools/mariadb.sh run ...)\n");
        exit(2);
    }
    char err[512];
    MYSQL *c = ll_connect(NULL, &srv, db, err, sizeof err);
    if (!c) {
        fprintf(stderr, "fuzz_stateful: connect: %s\n", err);
        exit(2);
    }
    return c;
}

static void exec_all(MYSQL *c, const char *sql)
{
    if (ll_exec(c, sql) != 0) {
        fprintf(stderr, "fuzz_stateful: %.60s: %s\n", sql, mysql_error(c));
        exit(2);
    }
}

static void drop_db(void)
{
    for (int i = 0; i < NCTX; i++) {
        rsv_close(ctxs[i]);
        mysql_close(conns[i]);
    }
    if (getenv("RSV_TEST_KEEP_DB"))
        return;
    MYSQL *c = connect_db(NULL);
    char q[128];
    snprintf(q, sizeof q, "DROP DATABASE IF EXISTS %s", db_name);
    mysql_query(c, q);
    mysql_close(c);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(db_name, sizeof db_name, "rsvfuzz_%d", (int)getpid());
    MYSQL *c = connect_db(NULL);
    char q[256];
    snprintf(q, sizeof q, "CREATE DATABASE %s", db_name); /* fails if dirty */
    exec_all(c, q);
    snprintf(q, sizeof q, "USE %s", db_name);
    exec_all(c, q);
    char err[512];
    int loaded = ll_load_schema(c, NULL, err, sizeof err);
    if (loaded == -1) {
        fprintf(stderr, "fuzz_stateful: cannot read sql/schema.sql (run "
                        "from the source tree or set RSV_SCHEMA)\n");
        exit(2);
    }
    if (loaded != 0) {
        fprintf(stderr, "fuzz_stateful: loading the schema: %s\n", err);
        exit(2);
    }
    mysql_close(c);

    /* Both contexts: a tiny pool, so refills, shrinks and the slow path
     * run all the time.  Context 1: otherwise the defaults, without
     * proactive refill, with the default pool_cap: pools filled by
     * contexts with different caps must still audit clean (finding 1 in
     * docs/testing.md, fixed; its input is in the corpus). */
    rsv_options o[NCTX];
    rsv_options_init(&o[0], RSV_OPTIONS_VERSION);
    o[0].pool_cap = 3;
    o[0].refill_low_water = 1;
    o[0].max_retries = 3;
    o[0].retry_base_us = 200;
    rsv_options_init(&o[1], RSV_OPTIONS_VERSION);
    o[1].flags = RSV_OPT_NO_PROACTIVE_REFILL;
    o[1].conn_tag_prefix = "fuzz.tag:";
    for (int i = 0; i < NCTX; i++) {
        conns[i] = connect_db(db_name);
        int rc = rsv_open(&ctxs[i], conns[i], &o[i]);
        if (rc != RSV_OK) {
            fprintf(stderr, "fuzz_stateful: rsv_open: %s\n",
                    rsv_errmsg(ctxs[i]));
            exit(2);
        }
    }
    atexit(drop_db);
    return 0;
}

/* ---- return-code sets ---- */

static int in_set(int rc, const int *set)
{
    for (; *set != 1; set++)
        if (*set == rc)
            return 1;
    return 0;
}
#define END 1
/* Documented by include/reserve.h and possible in this setting (one
 * process, a healthy server, no caller transaction unless noted).
 * RSV_EBUSY is documented everywhere; it needs a lock conflict, which
 * one thread cannot cause, but is accepted. */
static const int RC_RESERVE[] = {RSV_OK, RSV_EOUTOFSTOCK, RSV_ECLAIMED,
                                 RSV_EBUSY, RSV_ENOITEM, END};
static const int RC_CLAIM[] = {RSV_OK, RSV_ECLAIMED, RSV_EEXPIRED,
                               RSV_ERELEASED, RSV_ENOTFOUND, RSV_EBUSY, END};
static const int RC_RELEASE[] = {RSV_OK, RSV_ECLAIMED, RSV_ENOTFOUND,
                                 RSV_EBUSY, END};
static const int RC_EXTEND[] = {RSV_OK, RSV_EEXPIRED, RSV_ECLAIMED,
                                RSV_ERELEASED, RSV_ENOTFOUND, RSV_EBUSY, END};
static const int RC_STATUS[] = {RSV_OK, RSV_ENOTFOUND, END};
static const int RC_REPLENISH[] = {RSV_OK, RSV_ENOITEM, RSV_EBUSY, END};
static const int RC_SWEEP[] = {RSV_OK, RSV_EBUSY, END};
static const int RC_DRAIN[] = {RSV_OK, RSV_ENOITEM, RSV_EBUSY, END};
static const int RC_STOCK_SET[] = {RSV_OK, RSV_ESTOCK, RSV_EQUANTITY,
                                   RSV_EBUSY, END};
static const int RC_STOCK_ADJ[] = {RSV_OK, RSV_ESTOCK, RSV_EQUANTITY,
                                   RSV_ENOITEM, RSV_EBUSY, END};
static const int RC_STOCK_GET[] = {RSV_OK, RSV_ENOITEM, END};

static const char *what;   /* the call being checked, for messages */
static uint64_t cur_shop;

#define expect_in(ctx, rc, set)                                             \
    check(in_set((rc), (set)), "%s (shop %llu): code %d (%s) not expected: " \
          "%s", what, (unsigned long long)cur_shop, (rc),                   \
          rsv_code_name(rc) ? rsv_code_name(rc) : "?", rsv_errmsg(ctx))

static int one_of(int rc, int a, int b) { return rc == a || rc == b; }

static void tok_name(int t, char *buf, size_t *len)
{
    /* Binary tokens, NUL included; token 3 is the longest allowed. */
    static const char *const base[NTOK] = {"t0", "t\0\xff", "t'2\\", NULL};
    if (t == 3) {
        memset(buf, 'L', RSV_TOKEN_MAX);
        *len = RSV_TOKEN_MAX;
    } else {
        *len = t == 1 ? 3 : strlen(base[t]);
        memcpy(buf, base[t], *len);
    }
}

/* No hold of this shop has a deadline inside [t0, t1]. */
static int no_deadline_within(double t0, double t1)
{
    for (int t = 0; t < NTOK; t++) {
        if (toks[t].state == T_UNKNOWN)
            return 0;
        if (toks[t].state == T_HELD && toks[t].hi + SLACK_MS >= t0 &&
            toks[t].lo - SLACK_MS <= t1)
            return 0;
    }
    return 1;
}

static int held_live(int t, double at)
{
    return toks[t].state == T_HELD && at < toks[t].lo - SLACK_MS;
}

static int held_dead(int t, double at)
{
    return toks[t].state == T_HELD && at > toks[t].hi + SLACK_MS;
}

static void set_held(int t, double t0, double t1, int64_t ttl)
{
    int64_t eff = ttl ? ttl : 600000; /* both contexts' hold_ttl_ms */
    toks[t].state = T_HELD;
    toks[t].lo = t0 + (double)eff;
    toks[t].hi = t1 + (double)eff;
}

static void do_reserve(fz *f, int ci, int t)
{
    rsv_ctx *ctx = ctxs[ci];
    char tok[RSV_TOKEN_MAX];
    size_t tl;
    tok_name(t, tok, &tl);
    uint8_t shape = fz_u8(f);
    int64_t ttl = ttls[(shape >> 4) % 8];
    int nlines = shape % 3 + 1;
    rsv_cart *cart;
    check(rsv_cart_new(&cart) == RSV_OK, "cart_new");
    int64_t qty[3] = {0, 0, 0};
    uint64_t lineloc[3][3];
    size_t nloc[3];
    uint32_t flags[3];
    uint64_t lineitem[3];
    for (int l = 0; l < nlines; l++) {
        /* two bytes a line: item b % 3, locations (b >> 2) % 3 + 1
         * starting at (b >> 4) % 3, split bit 7; quantity q % 8 + 1 */
        uint8_t b = fz_u8(f);
        uint8_t q = fz_u8(f);
        uint64_t item = items[b % 3];
        lineitem[l] = item;
        nloc[l] = (size_t)(b >> 2) % 3 + 1;
        int first = (b >> 4) % 3;
        for (size_t i = 0; i < nloc[l]; i++)
            lineloc[l][i] = locs[(first + i) % 3];
        qty[l] = q % 8 + 1;
        flags[l] = (b & 0x80) ? RSV_LINE_SPLIT : 0;
        int rc = rsv_cart_add(cart, item, lineloc[l], nloc[l], qty[l],
                              flags[l]);
        check(rc == RSV_OK, "cart_add %d", rc);
    }
    what = "rsv_reserve";
    int prev = toks[t].state;
    double t0 = now_ms();
    int rc = rsv_reserve(ctx, cur_shop, tok, tl, cart, ttl);
    double t1 = now_ms();
    expect_in(ctx, rc, RC_RESERVE);
    if (prev == T_CLAIMED)
        check(rc == RSV_ECLAIMED, "reserve of a claimed token: %d", rc);
    if (rc == RSV_ECLAIMED)
        check(prev == T_CLAIMED || prev == T_UNKNOWN,
              "reserve: RSV_ECLAIMED for a token in state %s",
              tstate_name[prev]);
    if (rc == RSV_OK) {
        for (int l = 0; l < nlines; l++) {
            size_t cnt = 99;
            check(rsv_cart_allocation_count(cart, (size_t)l, &cnt) == RSV_OK,
                  "allocation_count");
            check(cnt >= 1 && cnt <= nloc[l], "line %d: %zu locations", l,
                  cnt);
            check(flags[l] & RSV_LINE_SPLIT || cnt == 1,
                  "unsplit line %d held at %zu locations", l, cnt);
            int64_t sum = 0;
            for (size_t k = 0; k < cnt; k++) {
                uint64_t lo;
                int64_t q;
                check(rsv_cart_allocation(cart, (size_t)l, k, &lo, &q) ==
                          RSV_OK, "allocation");
                int found = 0;
                for (size_t i = 0; i < nloc[l]; i++)
                    found |= lineloc[l][i] == lo;
                check(found && q > 0, "line %d: %lld at a foreign location",
                      l, (long long)q);
                sum += q;
            }
            check(sum == qty[l], "line %d allocated %lld of %lld", l,
                  (long long)sum, (long long)qty[l]);
        }
        check(rsv_cart_failed_line(cart) == (size_t)-1, "failed_line set");
        set_held(t, t0, t1, ttl);
    } else if (rc == RSV_EOUTOFSTOCK || rc == RSV_ENOITEM) {
        size_t fl = rsv_cart_failed_line(cart);
        check(fl < (size_t)nlines, "failed_line %zu of %d", fl, nlines);
        /* Confirm "out of stock" for the failed line of a token that held
         * nothing, when no other line of the cart names its item (else
         * the lines together may be what falls short): the committed
         * state must lack the units at each of its locations, or at all
         * of them together for a split line. */
        int alone = rc == RSV_EOUTOFSTOCK && fl < (size_t)nlines &&
                    (prev == T_NONE || prev == T_GONE);
        for (int l = 0; alone && l < nlines; l++)
            alone = (size_t)l == fl || lineitem[l] != lineitem[fl];
        if (alone) {
            int64_t best = 0, sum = 0;
            for (size_t i = 0; i < nloc[fl]; i++) {
                int64_t avail = -1;
                int grc = rsv_stock_get(ctx, cur_shop, lineitem[fl],
                                        lineloc[fl][i], NULL, NULL, NULL,
                                        &avail);
                check(grc == RSV_OK, "stock_get after out of stock: %d",
                      grc);
                best = avail > best ? avail : best;
                sum += avail > 0 ? avail : 0;
            }
            double t2 = now_ms();
            int64_t could = flags[fl] & RSV_LINE_SPLIT ? sum : best;
            if (no_deadline_within(t0, t2))
                check(could < qty[fl],
                      "line %zu of %lld answered out of stock, but "
                      "rsv_stock_get says %lld available", fl,
                      (long long)qty[fl], (long long)could);
        }
    } else if (rc == RSV_EBUSY) {
        toks[t].state = T_UNKNOWN;
    }
    rsv_cart_free(cart);
}

/* claim or release, in autocommit or joined to a caller's transaction
 * (then committed or, with rollback set, rolled back). */
static void do_settle(int ci, int t, int claim, int in_txn, int rollback)
{
    rsv_ctx *ctx = ctxs[ci];
    char tok[RSV_TOKEN_MAX];
    size_t tl;
    tok_name(t, tok, &tl);
    int prev = toks[t].state;
    if (in_txn)
        exec_all(conns[ci], "START TRANSACTION");
    double t0 = now_ms();
    int rc;
    if (claim) {
        what = in_txn ? "rsv_claim (joined)" : "rsv_claim";
        rc = rsv_claim(ctx, cur_shop, tok, tl);
        expect_in(ctx, rc, RC_CLAIM);
    } else {
        what = in_txn ? "rsv_release (joined)" : "rsv_release";
        rc = rsv_release(ctx, cur_shop, tok, tl);
        expect_in(ctx, rc, RC_RELEASE);
    }
    if (in_txn) {
        /* A function that runs its own transaction refuses to start
         * inside the caller's. */
        int64_t r = -1;
        what = "rsv_sweep (in a transaction)";
        int src = rsv_sweep(ctx, cur_shop, 0, &r);
        check_rc(ctx, src, RSV_EINTXN);
        exec_all(conns[ci], rollback || rc == RSV_EBUSY ? "ROLLBACK"
                                                         : "COMMIT");
    }
    /* the model */
    switch (prev) {
    case T_NONE:
        check_rc(ctx, rc, RSV_ENOTFOUND);
        break;
    case T_CLAIMED:
        check_rc(ctx, rc, RSV_ECLAIMED);
        break;
    case T_GONE:
        if (claim)
            check(one_of(rc, RSV_ERELEASED, RSV_EEXPIRED),
                  "claim of a released/expired checkout: %d", rc);
        else
            check_rc(ctx, rc, RSV_OK);
        break;
    case T_HELD:
        if (claim && held_live(t, t0))
            check_rc(ctx, rc, RSV_OK);
        else if (claim)
            check(one_of(rc, RSV_OK, RSV_EEXPIRED) || rc == RSV_EBUSY,
                  "claim of a held checkout: %d", rc);
        else
            check(rc == RSV_OK || rc == RSV_EBUSY,
                  "release of a held checkout: %d", rc);
        break;
    default:
        break;
    }
    if (in_txn && (rollback || rc == RSV_EBUSY))
        return; /* nothing happened */
    if (rc == RSV_OK)
        toks[t].state = claim ? T_CLAIMED : T_GONE;
    else if (rc == RSV_EEXPIRED)
        toks[t].state = T_GONE;
    else if (rc == RSV_EBUSY)
        toks[t].state = T_UNKNOWN;
}

static void do_extend(fz *f, int ci, int t)
{
    rsv_ctx *ctx = ctxs[ci];
    char tok[RSV_TOKEN_MAX];
    size_t tl;
    tok_name(t, tok, &tl);
    int64_t ttl = ttls[fz_u8(f) % 8];
    int prev = toks[t].state;
    what = "rsv_extend";
    double t0 = now_ms();
    int rc = rsv_extend(ctx, cur_shop, tok, tl, ttl);
    double t1 = now_ms();
    expect_in(ctx, rc, RC_EXTEND);
    if (prev == T_NONE)
        check_rc(ctx, rc, RSV_ENOTFOUND);
    else if (prev == T_CLAIMED)
        check_rc(ctx, rc, RSV_ECLAIMED);
    else if (prev == T_GONE)
        check(one_of(rc, RSV_ERELEASED, RSV_EEXPIRED),
              "extend of a released/expired checkout: %d", rc);
    else if (held_live(t, t0))
        check_rc(ctx, rc, RSV_OK);
    if (rc == RSV_OK)
        set_held(t, t0, t1, ttl);
    else if (rc == RSV_EEXPIRED)
        toks[t].state = T_GONE;
    else if (rc == RSV_EBUSY)
        toks[t].state = T_UNKNOWN;
}

static void do_status(int ci, int t)
{
    rsv_ctx *ctx = ctxs[ci];
    char tok[RSV_TOKEN_MAX];
    size_t tl;
    tok_name(t, tok, &tl);
    int32_t st = -1;
    int64_t units = -1, exp_ms = 0;
    what = "rsv_checkout_status";
    double t0 = now_ms();
    int rc = rsv_checkout_status(ctx, cur_shop, tok, tl, &st, &units, &exp_ms);
    double t1 = now_ms();
    expect_in(ctx, rc, RC_STATUS);
    int prev = toks[t].state;
    if (prev == T_NONE) {
        check_rc(ctx, rc, RSV_ENOTFOUND);
        return;
    }
    if (prev == T_UNKNOWN)
        return;
    check_rc(ctx, rc, RSV_OK);
    check(st >= RSV_STATUS_HELD && st <= RSV_STATUS_EXPIRED, "status %d", st);
    check(units >= 0, "units %lld", (long long)units);
    if (prev == T_CLAIMED)
        check(st == RSV_STATUS_CLAIMED, "claimed token reports %d", st);
    else if (prev == T_GONE)
        check(st == RSV_STATUS_RELEASED || st == RSV_STATUS_EXPIRED,
              "released/expired token reports %d", st);
    else if (held_live(t, t1))
        check(st == RSV_STATUS_HELD && units > 0,
              "live hold reports status %d, %lld units", st,
              (long long)units);
    else if (held_dead(t, t0))
        check(st == RSV_STATUS_EXPIRED && exp_ms <= 0,
              "hold past its deadline reports status %d, expires in %lld ms",
              st, (long long)exp_ms);
}

/* A batch of up to 5 entries over the tokens (a token may come twice):
 * reserves (one line each; quantity 0 now and then), claims, releases, or
 * reserves of carts (kind 3: one or two lines, the second of another
 * item).
 * Each entry must answer as its single call would, in the model's order
 * of that token's entries. */
#define FZ_BATCH 5
static void do_batch(fz *f, int ci, int kind)
{
    rsv_ctx *ctx = ctxs[ci];
    size_t n = 1 + fz_u8(f) % FZ_BATCH;
    int64_t ttl = ttls[fz_u8(f) % 8];
    char tok[FZ_BATCH][RSV_TOKEN_MAX];
    const void *tp[FZ_BATCH];
    size_t tl[FZ_BATCH];
    uint64_t shops[FZ_BATCH], it[FZ_BATCH], lc[FZ_BATCH];
    int64_t q[FZ_BATCH];
    int ti[FZ_BATCH], res[FZ_BATCH];
    rsv_cart *carts[FZ_BATCH] = {NULL};
    for (size_t i = 0; i < n; i++) {
        uint8_t b = fz_u8(f);
        ti[i] = b % NTOK;
        tok_name(ti[i], tok[i], &tl[i]);
        tp[i] = tok[i];
        shops[i] = cur_shop;
        it[i] = items[(b >> 2) % 3];
        lc[i] = locs[(b >> 4) % 3];
        q[i] = (b >> 6) == 3 ? 0 : 1 + (b >> 6);
        if (kind != 3)
            continue;
        /* (a cart line's quantity is checked when it is added) */
        if (q[i] == 0)
            q[i] = 1;
        uint8_t c = fz_u8(f);
        uint64_t item2 = items[c % 3], loc2 = locs[(c >> 2) % 3];
        check(rsv_cart_new(&carts[i]) == RSV_OK, "rsv_cart_new");
        check(rsv_cart_add(carts[i], it[i], &lc[i], 1, q[i], 0) == RSV_OK,
              "rsv_cart_add");
        if ((c & 0x10) && item2 != it[i])
            check(rsv_cart_add(carts[i], item2, &loc2, 1, 1 + (c >> 6),
                               0) == RSV_OK, "rsv_cart_add");
    }
    double t0 = now_ms();
    int rc;
    if (kind == 0) {
        what = "rsv_reserve_batch";
        rc = rsv_reserve_batch(ctx, n, shops, tp, tl, it, lc, q, ttl, res);
    } else if (kind == 3) {
        what = "rsv_reserve_cart_batch";
        rc = rsv_reserve_cart_batch(ctx, n, shops, tp, tl, carts, ttl, res);
    } else if (kind == 1) {
        what = "rsv_claim_batch";
        rc = rsv_claim_batch(ctx, n, shops, tp, tl, res);
    } else {
        what = "rsv_release_batch";
        rc = rsv_release_batch(ctx, n, shops, tp, tl, res);
    }
    double t1 = now_ms();
    for (size_t i = 0; i < n; i++)
        rsv_cart_free(carts[i]);
    check_rc(ctx, rc, RSV_OK);
    for (size_t i = 0; i < n; i++) {
        int t = ti[i], r = res[i], prev = toks[t].state;
        if (kind == 0 || kind == 3) {
            if (q[i] == 0) {
                check_rc(ctx, r, RSV_EQUANTITY);
                continue;
            }
            expect_in(ctx, r, RC_RESERVE);
            if (prev == T_CLAIMED)
                check(r == RSV_ECLAIMED, "batch reserve of a claimed "
                      "token: %d", r);
            if (r == RSV_ECLAIMED)
                check(prev == T_CLAIMED || prev == T_UNKNOWN,
                      "batch reserve: RSV_ECLAIMED for a token in state %s",
                      tstate_name[prev]);
            if (r == RSV_OK)
                set_held(t, t0, t1, ttl);
            else if (r == RSV_EBUSY)
                toks[t].state = T_UNKNOWN;
            continue;
        }
        expect_in(ctx, r, kind == 1 ? RC_CLAIM : RC_RELEASE);
        if (prev == T_NONE)
            check_rc(ctx, r, RSV_ENOTFOUND);
        else if (prev == T_CLAIMED)
            check_rc(ctx, r, RSV_ECLAIMED);
        else if (prev == T_GONE)
            check(kind == 1 ? one_of(r, RSV_ERELEASED, RSV_EEXPIRED)
                            : r == RSV_OK,
                  "batch settle of a released/expired checkout: %d", r);
        else if (prev == T_HELD && kind == 1 && held_live(t, t0))
            check_rc(ctx, r, RSV_OK);
        if (r == RSV_OK)
            toks[t].state = kind == 1 ? T_CLAIMED : T_GONE;
        else if (r == RSV_EEXPIRED)
            toks[t].state = T_GONE;
        else if (r == RSV_EBUSY)
            toks[t].state = T_UNKNOWN;
    }
}

static void print_violation(void *arg, uint64_t shop, uint64_t item,
                            uint64_t loc, const char *problem)
{
    (void)arg;
    fprintf(stderr, "AUDIT shop %llu item %llu location %llu: %s\n",
            (unsigned long long)shop, (unsigned long long)item,
            (unsigned long long)loc, problem);
}

static void audit(int ci)
{
    int64_t v = -1;
    what = "rsv_audit";
    int rc = rsv_audit(ctxs[ci], cur_shop, 0, print_violation, NULL, &v);
    check_rc(ctxs[ci], rc, RSV_OK);
    check(v == 0, "audit of shop %llu: %lld violation(s)",
          (unsigned long long)cur_shop, (long long)v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz f = {data, size};
    /* A fresh shop per input; every other one above INT64_MAX. */
    shop_counter++;
    cur_shop = (shop_counter & 1) ? shop_counter : UINT64_MAX - shop_counter;
    for (int t = 0; t < NTOK; t++)
        toks[t].state = T_NONE;
    /* FUZZ_STATEFUL_TRACE=1: print every step (to read a crash input). */
    static int trace = -1;
    if (trace < 0)
        trace = getenv("FUZZ_STATEFUL_TRACE") != NULL;

    for (int step = 0; step < MAX_STEPS && f.n > 0; step++) {
        uint8_t op = fz_u8(&f);
        uint8_t arg = fz_u8(&f);
        int ci = (op >> 7) & 1;
        int t = arg % NTOK;
        rsv_ctx *ctx = ctxs[ci];
        uint64_t item = items[(arg >> 2) % 3];
        uint64_t loc = locs[(arg >> 4) % 3];
        int rc;
        switch (op % 16) {
        case 0: case 1: case 2:
            do_reserve(&f, ci, t);
            break;
        case 3: case 4:
            do_settle(ci, t, 1, 0, 0);
            break;
        case 5:
            do_settle(ci, t, 0, 0, 0);
            break;
        case 6:
            do_settle(ci, t, (arg >> 6) & 1, 1, (arg >> 7) & 1);
            break;
        case 7:
            do_extend(&f, ci, t);
            break;
        case 8:
            do_status(ci, t);
            break;
        case 9: {
            int64_t released = -1;
            uint8_t m = fz_u8(&f);
            what = "rsv_sweep";
            rc = rsv_sweep(ctx, cur_shop, m % 4 == 0 ? 0 : m % 4, &released);
            expect_in(ctx, rc, RC_SWEEP);
            check(released >= 0, "sweep released %lld", (long long)released);
            break;
        }
        case 10: {
            int64_t added = -1;
            if (arg & 0x40) { /* the pool back to the ledger */
                what = "rsv_pool_drain";
                rc = rsv_pool_drain(ctx, cur_shop, item, loc, &added);
                expect_in(ctx, rc, RC_DRAIN);
            } else {
                what = "rsv_replenish";
                rc = rsv_replenish(ctx, cur_shop, item, loc, &added);
                expect_in(ctx, rc, RC_REPLENISH);
            }
            check(added >= 0 && (rc == RSV_OK || added == 0),
                  "%s gave %lld rows", what, (long long)added);
            break;
        }
        case 11: {
            uint8_t v = fz_u8(&f);
            int64_t on_hand = v < 250 ? v % 12
                            : v == 250 ? -1
                            : v == 251 ? ((int64_t)1 << 62)
                            : v == 252 ? ((int64_t)1 << 62) + 1
                            : v == 253 ? INT64_MIN : 0;
            what = "rsv_stock_set";
            rc = rsv_stock_set(ctx, cur_shop, item, loc, on_hand);
            expect_in(ctx, rc, RC_STOCK_SET);
            check((rc == RSV_EQUANTITY) ==
                      (on_hand < 0 || on_hand > ((int64_t)1 << 62)),
                  "stock_set(%lld) = %d", (long long)on_hand, rc);
            break;
        }
        case 12: {
            uint8_t v = fz_u8(&f);
            int64_t delta = v < 250 ? (int64_t)(v % 11) - 5
                          : v == 250 ? INT64_MIN
                          : v == 251 ? INT64_MAX
                          : v == 252 ? ((int64_t)1 << 62) : -((int64_t)1 << 62);
            int64_t oh = -7;
            what = "rsv_stock_adjust";
            rc = rsv_stock_adjust(ctx, cur_shop, item, loc, delta, &oh);
            expect_in(ctx, rc, RC_STOCK_ADJ);
            check(rc != RSV_OK || (oh >= 0 && oh <= ((int64_t)1 << 62)),
                  "stock_adjust(%lld) gave on hand %lld", (long long)delta,
                  (long long)oh);
            break;
        }
        case 13: {
            int64_t oh = -1, held = -1, pooled = -1, avail = -1;
            what = "rsv_stock_get";
            rc = rsv_stock_get(ctx, cur_shop, item, loc, &oh, &held, &pooled,
                               &avail);
            expect_in(ctx, rc, RC_STOCK_GET);
            if (rc == RSV_OK)
                check(oh >= 0 && held >= 0 && pooled >= 0 &&
                          avail == oh - held,
                      "stock_get: on hand %lld held %lld pooled %lld "
                      "available %lld", (long long)oh, (long long)held,
                      (long long)pooled, (long long)avail);
            break;
        }
        case 14: {
            struct timespec ts = {0, (long)(arg % 8 + 1) * 1000000L};
            nanosleep(&ts, NULL);
            break;
        }
        default:
            if (arg & 0x40)
                do_batch(&f, ci, (arg >> 2) % 4);
            else
                audit(ci);
            break;
        }
        check_msg(ctx);
        if (trace)
            fprintf(stderr, "step %2d ctx %d op %2d token %d item %llu "
                    "location %llu: %s -> %s %s\n", step, ci, op % 16, t,
                    (unsigned long long)item, (unsigned long long)loc,
                    what ? what : "-", rsv_code_name(rsv_errcode(ctx)),
                    rsv_errmsg(ctx));
        what = NULL;
    }
    audit(0);
    return 0;
}
