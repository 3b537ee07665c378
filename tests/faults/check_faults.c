/*
 * check_faults.c - every operation through every failure point.
 *
 * Linked against build/fault/libreserve-fault.a (lib/fault.h), never the
 * shared library.  For each operation: run it once on a fresh fixture to
 * count its database calls, then for every call n and every fault kind
 * restore the fixture, make call n fail, run the operation again and check
 * the documented code, that nothing was applied (or, on success, that it
 * was applied exactly once), that no transaction is left open, that the
 * invariants hold, and that the context works again (after a reconnect on
 * the same MYSQL handle where the connection was lost).
 *
 * The connection-loss tests at the end kill the session from another
 * connection and reconnect the handle the ways Connector/C allows.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <errmsg.h>

#include <reserve/batch.h>

#include "testutil.h"
#include "fault.h"
#include "../../lib/test_flags.h"

#define TOK(s) (s), strlen(s)

enum { I1 = 1, I2 = 2, I3 = 3, I4 = 4, L1 = 1, L2 = 2 };

static uint64_t S;         /* the walk's shop */
static rsv_options opts;   /* fast retries, small pools */
static MYSQL *adm;         /* helper connection: fixture, checks, KILL */
static rsv_ctx *actx;      /* audits, on adm */
static MYSQL *conn;        /* the connection under test */
static rsv_ctx *ctx;
static rsv_ctx *sctx;      /* on conn too, TEST_OPT_STATEMENTS_ONLY: claims
                              and releases by statements (ctx calls the
                              schema's procedure) */

static const char *const tables[] = {
    "rsv_ledger", "rsv_pool", "rsv_checkouts",
    "rsv_holds", "rsv_journal",
};

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void fill_opts(void)
{
    rsv_options_init(&opts, RSV_OPTIONS_VERSION);
    opts.pool_cap = 10;
    /* The walk needs the same calls on every run of an operation: no
     * per-context read cursors (they move with every read). */
    opts.flags = TEST_OPT_READ_FROM_BOTTOM;
    opts.max_retries = 2;
    opts.retry_base_us = 50;
}

static rsv_ctx *open_on_flags(MYSQL *c, uint32_t flags)
{
    rsv_options o = opts;
    o.flags |= flags;
    rsv_ctx *x = NULL;
    int rc = rsv_open(&x, c, &o);
    TU_RC(x, rc, RSV_OK);
    return x;
}

static rsv_ctx *open_on(MYSQL *c) { return open_on_flags(c, 0); }

/* ---------------- fixture ---------------- */

/* Built once: pools, a held checkout, a claimed one whose
 * settlement is not folded yet, an expired hold, an item whose pool and
 * ledger row are each too small for a reserve (the slow path) and one
 * whose stock is all in its pool (the procedure takes pool rows; at I1
 * and I2 the ledger row has units beyond the pool, and the procedures
 * take them from there).  Kept in fx_* copies and restored in one
 * transaction before every case. */
static void build_fixture(void)
{
    MYSQL *c = tu_connect();
    rsv_ctx *x = open_on(c);
    TU_OK(x, rsv_stock_set(x, S, I1, L1, 50));
    TU_OK(x, rsv_replenish(x, S, I1, L1, NULL));
    TU_OK(x, rsv_stock_set(x, S, I2, L1, 30));
    TU_OK(x, rsv_replenish(x, S, I2, L1, NULL));
    TU_OK(x, rsv_stock_set(x, S, I2, L2, 30));
    TU_OK(x, rsv_replenish(x, S, I2, L2, NULL));
    TU_OK(x, rsv_stock_set(x, S, I3, L1, 20));
    char q[256];
    snprintf(q, sizeof q, "UPDATE rsv_ledger SET pool_cap = 4 WHERE "
             "shop_id = %llu AND item_id = %d",
             (unsigned long long)S, I3);
    tu_exec(c, q);
    TU_OK(x, rsv_replenish(x, S, I3, L1, NULL));
    TU_OK(x, rsv_stock_set(x, S, I4, L1, 8));
    TU_OK(x, rsv_replenish(x, S, I4, L1, NULL));
    rsv_cart *cart;
    const uint64_t l1[] = {L1}, l2[] = {L2};
    TU_OK(x, rsv_cart_new(&cart));
    TU_OK(x, rsv_cart_add(cart, I1, l1, 1, 2, 0));
    TU_OK(x, rsv_cart_add(cart, I2, l2, 1, 1, 0));
    TU_OK(x, rsv_reserve(x, S, TOK("held-a"), cart, 0));
    rsv_cart_free(cart);
    TU_OK(x, rsv_reserve_one(x, S, TOK("done-c"), I1, L1, 1, 0));
    TU_OK(x, rsv_claim(x, S, TOK("done-c")));
    TU_OK(x, rsv_reserve_one(x, S, TOK("exp-e"), I2, L1, 1, 1));
    sleep_ms(20);
    rsv_close(x);
    for (size_t t = 0; t < 5; t++) {
        snprintf(q, sizeof q,
                 "CREATE TABLE fx_%s AS SELECT * FROM %s WHERE shop_id = %llu",
                 tables[t], tables[t], (unsigned long long)S);
        tu_exec(c, q);
    }
    mysql_close(c);
}

static void restore_fixture(void)
{
    char q[2048];
    size_t n = (size_t)snprintf(q, sizeof q, "START TRANSACTION;");
    for (size_t t = 0; t < 5; t++)
        n += (size_t)snprintf(q + n, sizeof q - n,
                              "DELETE FROM %s WHERE shop_id = %llu;"
                              "INSERT INTO %s SELECT * FROM fx_%s;",
                              tables[t], (unsigned long long)S, tables[t],
                              tables[t]);
    snprintf(q + n, sizeof q - n, "COMMIT");
    tu_exec(adm, q);
}

/* The shop's state without clocks (deadlines depend on NOW()). */
static char *fingerprint(void)
{
    char q[2048];
    unsigned long long s = (unsigned long long)S;
    snprintf(q, sizeof q,
        "SELECT CONCAT_WS(' | ', "
        "(SELECT GROUP_CONCAT(CONCAT_WS(',', item_id, "
        "location_id, on_hand, issued, next_unit_id) ORDER BY 1) FROM "
        "rsv_ledger WHERE shop_id = %llu), "
        "(SELECT CONCAT(COUNT(*), ':', COALESCE(SUM(id), 0)) FROM "
        "rsv_pool WHERE shop_id = %llu), "
        "(SELECT GROUP_CONCAT(CONCAT_WS(',', HEX(checkout_token), status, "
        "generation, hold_count) ORDER BY 1) FROM rsv_checkouts WHERE "
        "shop_id = %llu), "
        "(SELECT GROUP_CONCAT(CONCAT_WS(',', HEX(checkout_token), "
        "item_id, location_id, quantity, generation) ORDER "
        "BY 1) FROM rsv_holds WHERE shop_id = %llu), "
        "(SELECT GROUP_CONCAT(CONCAT_WS(',', HEX(checkout_token), "
        "item_id, location_id, generation, kind, quantity) "
        "ORDER BY 1) FROM rsv_journal WHERE shop_id = %llu))",
        s, s, s, s, s);
    ck_assert_msg(mysql_query(adm, q) == 0, "%s", mysql_error(adm));
    MYSQL_RES *r = mysql_store_result(adm);
    MYSQL_ROW row = r ? mysql_fetch_row(r) : NULL;
    char *fp = strdup(row && row[0] ? row[0] : "");
    if (r)
        mysql_free_result(r);
    return fp;
}

static void report(void *arg, uint64_t shop, uint64_t item, uint64_t loc,
                   const char *problem)
{
    fprintf(stderr, "AUDIT %s: shop %llu item %llu loc %llu: %s\n",
            (const char *)arg, (unsigned long long)shop,
            (unsigned long long)item, (unsigned long long)loc, problem);
}

static void audit_clean(const char *where)
{
    int64_t v = -1;
    int rc = rsv_audit(actx, S, 0, report, (void *)where, &v);
    TU_RC(actx, rc, RSV_OK);
    ck_assert_msg(v == 0, "%s: audit found %lld violation(s)", where,
                  (long long)v);
}

/* ---------------- the connection under test ---------------- */

static int64_t q_i64(const char *fmt, unsigned long id)
{
    char q[256];
    snprintf(q, sizeof q, fmt, id);
    return tu_i64(adm, q);
}

static int client_in_trans(MYSQL *c)
{
    unsigned int st = 0;
    mariadb_get_infov(c, MARIADB_CONNECTION_SERVER_STATUS, &st);
    return (st & SERVER_STATUS_IN_TRANS) != 0;
}

/* Until the server has ended session id (and rolled back its work). */
static void wait_session_gone(unsigned long id, const char *where)
{
    for (int i = 0; i < 500; i++) {
        if (q_i64("SELECT COUNT(*) FROM information_schema.processlist "
                  "WHERE id = %lu", id) == 0)
            return;
        sleep_ms(10);
    }
    ck_abort_msg("%s: session %lu still alive 5 s after its connection was "
                 "lost", where, id);
}

/* The reconnect an application does after RSV_ECONN / RSV_EINDOUBT, on
 * the same handle the context is bound to: mariadb_reconnect() needs
 * MYSQL_OPT_RECONNECT, which is switched on only for that call (the
 * library refuses auto-reconnect, which could replay a statement outside
 * its transaction). */
static void reconnect(MYSQL *c)
{
    my_bool on = 1, off = 0;
    mysql_optionsv(c, MYSQL_OPT_RECONNECT, &on);
    int r = mariadb_reconnect(c);
    mysql_optionsv(c, MYSQL_OPT_RECONNECT, &off);
    ck_assert_msg(r == 0, "mariadb_reconnect: %s", mysql_error(c));
}

static void setup_conn(void)
{
    adm = tu_connect();
    actx = open_on(adm);
    conn = tu_connect();
    ctx = open_on(conn);
    sctx = open_on_flags(conn, TEST_OPT_STATEMENTS_ONLY);
}

static void teardown_conn(void)
{
    rsv_close(ctx);
    rsv_close(sctx);
    mysql_close(conn);
    rsv_close(actx);
    mysql_close(adm);
}

/* ---------------- the operations ---------------- */

#define OPF_REFILL_AFTER 0x1 /* reserve: calls after the first COMMIT are the
                                best-effort refill of a committed reserve */
#define OPF_PARTIAL 0x2      /* several transactions: a failure may follow
                                committed ones (sweep) */
#define OPF_NOT_IDEMPOTENT 0x4 /* never repeated after RSV_EINDOUBT */
#define OPF_JOINED 0x8       /* runs in the caller's transaction */
#define OPF_OPEN 0x10        /* opens its own context */
#define OPF_REPEAT_DIFFERS 0x20 /* a repeat is a new reserve of the token */
#define OPF_STATEMENTS 0x80  /* runs on sctx (statements, no procedure) */

struct op {
    const char *name;
    int (*run)(void);
    int flags;
    int repeat_after_commit; /* code of a repeat once the COMMIT applied */
    const char *token;       /* OPF_REPEAT_DIFFERS: the token reserved */
    int64_t units;           /* and the units it must hold after a repeat */
};

static int op_open(void)
{
    rsv_ctx *x = NULL;
    int rc = rsv_open(&x, conn, &opts);
    rsv_close(x);
    return rc;
}

static int op_reserve_one(void)
{
    /* I1's ledger row is free and has 40 units beyond its pool: the
     * procedure takes the 6 straight from it */
    return rsv_reserve_one(ctx, S, TOK("new-1"), I1, L1, 6, 0);
}

static int op_reserve_pool(void)
{
    /* I4's stock is all in its pool: the procedure takes pool rows */
    return rsv_reserve_one(ctx, S, TOK("new-5"), I4, L1, 3, 0);
}

static int op_reserve_multi(void)
{
    rsv_cart *cart;
    const uint64_t l1[] = {L1}, l12[] = {L1, L2};
    int rc = rsv_cart_new(&cart);
    if (rc != RSV_OK)
        return rc;
    if ((rc = rsv_cart_add(cart, I1, l1, 1, 1, 0)) == RSV_OK &&
        (rc = rsv_cart_add(cart, I2, l12, 2, 12, RSV_LINE_SPLIT)) == RSV_OK &&
        (rc = rsv_cart_add(cart, I2, l12, 2, 2, 0)) == RSV_OK)
        rc = rsv_reserve(ctx, S, TOK("new-2"), cart, 0);
    rsv_cart_free(cart);
    return rc;
}

static int op_reserve_cart(void)
{
    /* a new cart every line of which its first location covers: one CALL
     * of the cart procedure, which takes I1's units from its ledger row
     * and I4's from its pool, and commits */
    rsv_cart *cart;
    const uint64_t l1[] = {L1}, l12[] = {L1, L2};
    int rc = rsv_cart_new(&cart);
    if (rc != RSV_OK)
        return rc;
    if ((rc = rsv_cart_add(cart, I1, l1, 1, 2, 0)) == RSV_OK &&
        (rc = rsv_cart_add(cart, I2, l12, 2, 1, 0)) == RSV_OK &&
        (rc = rsv_cart_add(cart, I4, l1, 1, 1, 0)) == RSV_OK)
        rc = rsv_reserve(ctx, S, TOK("new-4"), cart, 0);
    rsv_cart_free(cart);
    return rc;
}

static int op_reserve_slow(void)
{
    /* I3 has 4 units pooled and 16 more in its ledger row, and neither
     * covers 18: the procedure rolls back, a read without locks (one
     * statement, autocommit being on) finds the item not sold out, and the
     * slow path covers the line from both */
    return rsv_reserve_one(ctx, S, TOK("new-3"), I3, L1, 18, 0);
}

static int op_reserve_waited_statements(void)
{
    /* by statements: I3's pool (4 units) cannot give 6 and its ledger row
     * (16 more) can: the fast read rolls back, and the waited ledger take
     * locks the ledger row and takes the 6 straight from it */
    return rsv_reserve_one(sctx, S, TOK("new-6"), I3, L1, 6, 0);
}

static int op_rereserve(void)
{
    return rsv_reserve_one(ctx, S, TOK("held-a"), I2, L2, 3, 0);
}

static int op_claim(void) { return rsv_claim(ctx, S, TOK("held-a")); }

static int op_claim_joined(void)
{
    if (mysql_query(conn, "START TRANSACTION") != 0)
        return RSV_ECONN;
    int rc = rsv_claim(ctx, S, TOK("held-a"));
    /* what the application does: commit its order with the claim, or
     * roll both back */
    if (mysql_query(conn, rc == RSV_OK ? "COMMIT" : "ROLLBACK") != 0 &&
        rc == RSV_OK)
        rc = RSV_EINDOUBT;
    return rc;
}

static int op_release(void) { return rsv_release(ctx, S, TOK("held-a")); }

static int op_claim_statements(void)
{
    return rsv_claim(sctx, S, TOK("held-a"));
}

static int op_release_statements(void)
{
    return rsv_release(sctx, S, TOK("held-a"));
}

static int op_extend(void)
{
    return rsv_extend(ctx, S, TOK("held-a"), 900000);
}

static int op_status(void)
{
    int32_t st = 0;
    int64_t units = 0, ms = 0;
    int rc = rsv_checkout_status(ctx, S, TOK("held-a"), &st, &units, &ms);
    /* no ck_assert in an operation: see the allocation walk */
    return rc == RSV_OK && !(st == RSV_STATUS_HELD && units == 3) ? RSV_EDB
                                                                    : rc;
}

static int op_replenish(void)
{
    int64_t added = -1;
    return rsv_replenish(ctx, S, I1, L1, &added);
}

static int op_sweep(void)
{
    int64_t n = -1;
    return rsv_sweep(ctx, S, 0, &n);
}

static int op_pool_drain(void)
{
    int64_t n = -1;
    return rsv_pool_drain(ctx, S, I2, L2, &n);
}

/* A sweep that also drains a pool left idle: I4's ledger row is set two
 * hours back first, on the helper connection, as time would. */
static int op_sweep_idle(void)
{
    char q[200];
    snprintf(q, sizeof q, "UPDATE rsv_ledger SET updated_at = NOW(6) - "
             "INTERVAL 2 HOUR WHERE shop_id = %llu AND item_id = %d",
             (unsigned long long)S, I4);
    if (mysql_query(adm, q) != 0)
        return RSV_EDB; /* no ck_assert in an operation */
    int64_t n = -1;
    return rsv_sweep(ctx, S, 0, &n);
}

static int op_stock_set(void) { return rsv_stock_set(ctx, S, I1, L1, 40); }

static int op_stock_adjust(void)
{
    int64_t now = 0;
    return rsv_stock_adjust(ctx, S, I2, L1, 5, &now);
}

static int op_stock_get(void)
{
    int64_t on_hand = 0, held = 0, pooled = 0, avail = 0;
    return rsv_stock_get(ctx, S, I1, L1, &on_hand, &held, &pooled, &avail);
}

static int op_audit(void)
{
    int64_t v = -1;
    int rc = rsv_audit(ctx, S, 0, NULL, NULL, &v);
    return rc == RSV_OK && v != 0 ? RSV_EDB : rc;
}

/* Batches: every entry decided by the one batch CALL (no entry runs on
 * its own), so the walk sees one commit point.  The op answers the batch's
 * code, or its first entry's when the others answered what they must. */
static int op_reserve_batch(void)
{
    /* a free ledger row (I1), a pool (I4), and I2 at L1 */
    const uint64_t shops[] = {S, S, S}, items[] = {I4, I1, I2},
                   locs[] = {L1, L1, L1};
    const void *toks[] = {"bat-2", "bat-1", "bat-3"};
    const size_t lens[] = {5, 5, 5};
    const int64_t qty[] = {3, 6, 2};
    int res[3];
    int rc = rsv_reserve_batch(ctx, 3, shops, toks, lens, items, locs, qty,
                               0, res);
    if (rc != RSV_OK)
        return rc;
    for (int i = 0; i < 3; i++)
        if (res[i] != RSV_OK)
            return res[i];
    return RSV_OK;
}

static int op_reserve_cart_batch(void)
{
    /* carts of a free ledger row and a pool (I1, I4), of I2 at L1, of I2
     * at L2 and I3's pool: every one decided by the one CALL */
    static const uint64_t l1[] = {L1}, l2[] = {L2};
    const uint64_t shops[] = {S, S, S};
    const void *toks[] = {"cbat-1", "cbat-2", "cbat-3"};
    const size_t lens[] = {6, 6, 6};
    rsv_cart *carts[3] = {NULL, NULL, NULL};
    int res[3], rc = RSV_OK;
    for (int i = 0; i < 3 && rc == RSV_OK; i++)
        rc = rsv_cart_new(&carts[i]);
    if (rc == RSV_OK &&
        (rc = rsv_cart_add(carts[0], I1, l1, 1, 2, 0)) == RSV_OK &&
        (rc = rsv_cart_add(carts[0], I4, l1, 1, 1, 0)) == RSV_OK &&
        (rc = rsv_cart_add(carts[1], I2, l1, 1, 1, 0)) == RSV_OK &&
        (rc = rsv_cart_add(carts[2], I2, l2, 1, 1, 0)) == RSV_OK &&
        (rc = rsv_cart_add(carts[2], I3, l1, 1, 2, 0)) == RSV_OK)
        rc = rsv_reserve_cart_batch(ctx, 3, shops, toks, lens, carts, 0,
                                    res);
    for (int i = 0; i < 3 && rc == RSV_OK; i++)
        if (res[i] != RSV_OK)
            rc = res[i];
    for (int i = 0; i < 3; i++)
        rsv_cart_free(carts[i]);
    return rc;
}

static int settle_batch(int claim, const char *second, int second_rc)
{
    const uint64_t shops[] = {S, S, S};
    const void *toks[] = {"held-a", second, "nobody"};
    const size_t lens[] = {6, strlen(second), 6};
    int res[3];
    int rc = claim ? rsv_claim_batch(ctx, 3, shops, toks, lens, res)
                   : rsv_release_batch(ctx, 3, shops, toks, lens, res);
    if (rc != RSV_OK)
        return rc;
    return res[1] == second_rc && res[2] == RSV_ENOTFOUND ? res[0] : RSV_EDB;
}

static int op_claim_batch(void)
{
    return settle_batch(1, "done-c", RSV_ECLAIMED);
}

static int op_release_batch(void)
{
    /* exp-e's deadline passed, its hold not yet given back: released */
    return settle_batch(0, "exp-e", RSV_OK);
}

static const struct op ops[] = {
    {"open", op_open, OPF_OPEN, 0, NULL, 0},
    {"reserve_one", op_reserve_one, OPF_REFILL_AFTER | OPF_REPEAT_DIFFERS,
     RSV_OK, "new-1", 6},
    {"reserve_multi", op_reserve_multi, OPF_REFILL_AFTER | OPF_REPEAT_DIFFERS,
     RSV_OK, "new-2", 15},
    {"reserve_pool", op_reserve_pool, OPF_REFILL_AFTER | OPF_REPEAT_DIFFERS,
     RSV_OK, "new-5", 3},
    {"reserve_cart", op_reserve_cart, OPF_REFILL_AFTER | OPF_REPEAT_DIFFERS,
     RSV_OK, "new-4", 4},
    {"reserve_slow", op_reserve_slow,
     OPF_REFILL_AFTER | OPF_REPEAT_DIFFERS, RSV_OK, "new-3", 18},
    {"reserve_waited_statements", op_reserve_waited_statements,
     OPF_REFILL_AFTER | OPF_REPEAT_DIFFERS | OPF_STATEMENTS, RSV_OK, "new-6",
     6},
    {"rereserve", op_rereserve, OPF_REFILL_AFTER | OPF_REPEAT_DIFFERS,
     RSV_OK, "held-a", 3},
    {"claim", op_claim, 0, RSV_ECLAIMED, NULL, 0},
    {"claim_joined", op_claim_joined, OPF_JOINED, RSV_ECLAIMED, NULL, 0},
    {"release", op_release, 0, RSV_OK, NULL, 0},
    {"claim_statements", op_claim_statements, OPF_STATEMENTS, RSV_ECLAIMED,
     NULL, 0},
    {"release_statements", op_release_statements, OPF_STATEMENTS, RSV_OK,
     NULL, 0},
    {"extend", op_extend, 0, RSV_OK, NULL, 0},
    {"status", op_status, 0, RSV_OK, NULL, 0},
    {"replenish", op_replenish, 0, RSV_OK, NULL, 0},
    {"sweep", op_sweep, OPF_PARTIAL, RSV_OK, NULL, 0},
    {"pool_drain", op_pool_drain, 0, RSV_OK, NULL, 0},
    {"sweep_idle", op_sweep_idle, OPF_PARTIAL, RSV_OK, NULL, 0},
    {"stock_set", op_stock_set, 0, RSV_OK, NULL, 0},
    {"stock_adjust", op_stock_adjust, OPF_NOT_IDEMPOTENT, RSV_OK, NULL, 0},
    {"stock_get", op_stock_get, 0, RSV_OK, NULL, 0},
    {"audit", op_audit, 0, RSV_OK, NULL, 0},
    {"reserve_batch", op_reserve_batch,
     OPF_REFILL_AFTER | OPF_REPEAT_DIFFERS, RSV_OK, "bat-1", 6},
    {"reserve_cart_batch", op_reserve_cart_batch,
     OPF_REFILL_AFTER | OPF_REPEAT_DIFFERS, RSV_OK, "cbat-1", 3},
    {"claim_batch", op_claim_batch, 0, RSV_ECLAIMED, NULL, 0},
    {"release_batch", op_release_batch, 0, RSV_OK, NULL, 0},
};
#define N_OPS (sizeof ops / sizeof ops[0])

/* ---------------- the walk ---------------- */

#define MAX_CALLS 256
static const char *trace[MAX_CALLS + 1];
static uint64_t n_calls;

static const char *const SET_RC =
    "SET TRANSACTION ISOLATION LEVEL READ COMMITTED";

/* The library's transaction control says AND NO CHAIN NO RELEASE. */
static int is_commit(const char *t) { return strncmp(t, "COMMIT", 6) == 0; }
static int is_rollback(const char *t)
{
    return strncmp(t, "ROLLBACK", 8) == 0;
}

struct point {
    int retried;      /* inside a transaction of the retry frame */
    int commit;       /* the frame's COMMIT, or the reserve procedure */
    int call;         /* the reserve procedure (its own transaction) */
    int commits;      /* the call that committed the operation */
    int best_effort;  /* after the operation committed */
};

/* "CALL": the reserve procedure, which begins and commits (or rolls back,
 * "CALL (rolled back)": the statement path follows) inside one statement,
 * so it is retried like a frame and is a commit point. */
static struct point classify(const struct op *op, uint64_t n)
{
    struct point p = {0, 0, 0, 0, 0};
    int in_frame = 0, committed = 0;
    for (uint64_t i = 1; i <= n; i++) {
        const char *t = trace[i];
        if (strcmp(t, SET_RC) == 0)
            in_frame = 1;
        p.call = strncmp(t, "CALL", 4) == 0;
        p.retried = in_frame || p.call;
        p.commit = (in_frame && is_commit(t)) || p.call;
        p.best_effort = (op->flags & OPF_REFILL_AFTER) && committed;
        p.commits = !committed &&
                    ((in_frame && is_commit(t)) ||
                     strcmp(t, "CALL") == 0);
        if (is_commit(t) || is_rollback(t)) {
            if (in_frame && is_commit(t))
                committed = 1;
            in_frame = 0;
        }
        if (strcmp(t, "CALL") == 0)
            committed = 1;
    }
    return p;
}

static int conn_kind(int kind)
{
    return kind == RSV_FAULT_GONE || kind == RSV_FAULT_LOST ||
           kind == RSV_FAULT_LOST_AFTER;
}

static int expected(const struct point *p, int kind)
{
    if (p->best_effort)
        return RSV_OK;
    switch (kind) {
    case RSV_FAULT_DEADLOCK:
    case RSV_FAULT_LOCKWAIT:
        return p->retried ? RSV_OK : RSV_EBUSY;
    case RSV_FAULT_DEADLOCK_ALWAYS:
    case RSV_FAULT_LOCKWAIT_ALWAYS:
        return RSV_EBUSY;
    case RSV_FAULT_OOM:
        return RSV_ENOMEM;
    case RSV_FAULT_LOST_AFTER:
        return p->commit ? RSV_EINDOUBT : RSV_ECONN;
    default:
        /* A loss found before the CALL went out (the walk's GONE and LOST
         * both close the socket first): nothing can have run.  A COMMIT is
         * in doubt either way. */
        return p->commit && !p->call ? RSV_EINDOUBT : RSV_ECONN;
    }
}

static int cases_walked, cases_skipped;

/* The context an operation's faults are armed on (NULL: any, for one
 * that opens its own). */
static rsv_ctx *op_ctx(const struct op *op)
{
    return (op->flags & OPF_OPEN) ? NULL
           : (op->flags & OPF_STATEMENTS) ? sctx
                                          : ctx;
}

static int run_op(const struct op *op, uint64_t nth, int kind)
{
    rsv__fault_arm(op_ctx(op), nth, kind);
    int rc = op->run();
    rsv__fault_disarm();
    return rc;
}

static void walk(const struct op *op)
{
    setup_conn();
    /* Once first: a context remembers which ledger rows it has seen
     * (ledger_seen.c), and a cart goes to the procedure only once it
     * knows them all.  Every run of the walk must make the same calls. */
    restore_fixture();
    (void)run_op(op, 0, RSV_FAULT_NONE);
    restore_fixture();
    char *fp0 = fingerprint();
    int rc = run_op(op, 0, RSV_FAULT_NONE);
    TU_RC(ctx, rc, RSV_OK);
    n_calls = rsv__fault_calls(NULL);
    ck_assert_msg(n_calls > 0 && n_calls <= MAX_CALLS, "%s: %llu calls",
                  op->name, (unsigned long long)n_calls);
    for (uint64_t i = 1; i <= n_calls; i++)
        trace[i] = rsv__fault_call(i);
    char *fp_ok = fingerprint();
    audit_clean(op->name);

    for (uint64_t n = 1; n <= n_calls; n++) {
        struct point p = classify(op, n);
        for (int kind = 1; kind < RSV_FAULT__COUNT; kind++) {
            /* A server never reports a lock conflict on ROLLBACK, and its
             * text fits the buffer every earlier call grew: only the
             * connection can fail there. */
            if (is_rollback(trace[n]) && !conn_kind(kind)) {
                cases_skipped++;
                continue;
            }
            char where[160];
            snprintf(where, sizeof where, "%s, call %llu/%llu (%s), %s",
                     op->name, (unsigned long long)n,
                     (unsigned long long)n_calls, trace[n],
                     rsv__fault_kind_name(kind));
            restore_fixture();
            unsigned long tid = mysql_thread_id(conn);
            rc = run_op(op, n, kind);
            uint64_t calls = rsv__fault_calls(NULL);
            int want = expected(&p, kind);
            ck_assert_msg(rsv__fault_fired() > 0, "%s: never reached", where);
            /* a persistent conflict is retried max_retries times, no more;
             * nothing else is ever retried */
            int always = kind == RSV_FAULT_DEADLOCK_ALWAYS ||
                         kind == RSV_FAULT_LOCKWAIT_ALWAYS;
            int tries = always && p.retried ? opts.max_retries + 1 : 1;
            ck_assert_msg(p.best_effort || rsv__fault_fired() == tries,
                          "%s: the failing call ran %d times, want %d",
                          where, rsv__fault_fired(), tries);
            ck_assert_msg(rc == want, "%s: got %s, want %s: %s", where,
                          rsv_code_name(rc), rsv_code_name(want),
                          rsv_errmsg(ctx));

            if (conn_kind(kind)) {
                /* Nothing after the lost call but a ROLLBACK attempt (or
                 * the next transaction's first statement, after a lost
                 * ROLLBACK), and the START TRANSACTION that goes out in
                 * the same round trip as a SET TRANSACTION: no statement
                 * is ever sent again. */
                for (uint64_t j = n + 1; j <= calls && !p.best_effort; j++) {
                    const char *t = rsv__fault_call(j);
                    const char *before = rsv__fault_call(j - 1);
                    int paired = t && before &&
                                 strncmp(t, "START TRANSACTION", 17) == 0 &&
                                 strcmp(before, SET_RC) == 0;
                    ck_assert_msg(t && (is_rollback(t) || paired ||
                                        strcmp(t, SET_RC) == 0),
                                  "%s: call %llu (%s) sent after the "
                                  "connection was lost", where,
                                  (unsigned long long)j, t ? t : "?");
                }
                /* Before reconnecting: a clear code, not "inside a
                 * transaction", and nothing applied. */
                int r2 = rsv_reserve_one(ctx, S, TOK("probe"), I1, L1, 1, 0);
                ck_assert_msg(r2 == RSV_ECONN, "%s: reserve on the dead "
                              "connection: %s: %s", where, rsv_code_name(r2),
                              rsv_errmsg(ctx));
                r2 = rsv_claim(ctx, S, TOK("held-a"));
                ck_assert_msg(r2 == RSV_ECONN, "%s: claim on the dead "
                              "connection: %s", where, rsv_code_name(r2));
                ck_assert(!client_in_trans(conn));
                wait_session_gone(tid, where);
                reconnect(conn);
                ck_assert(mysql_thread_id(conn) != tid);
            }
            if (op->flags & OPF_JOINED)
                ck_assert_msg(!client_in_trans(conn), "%s: caller's "
                              "transaction still open", where);
            ck_assert_msg(!client_in_trans(conn), "%s: transaction left open",
                          where);
            ck_assert_msg(q_i64("SELECT COUNT(*) FROM "
                                "information_schema.innodb_trx WHERE "
                                "trx_mysql_thread_id = %lu",
                                mysql_thread_id(conn)) == 0,
                          "%s: the server has a transaction open", where);

            char *fp = fingerprint();
            if (rc == RSV_OK && !p.best_effort &&
                !(op->flags & OPF_PARTIAL))
                ck_assert_msg(strcmp(fp, fp_ok) == 0, "%s: not applied "
                              "exactly once:\n got %s\nwant %s", where, fp,
                              fp_ok);
            else if (rc != RSV_OK && rc != RSV_EINDOUBT &&
                     !(op->flags & OPF_PARTIAL))
                ck_assert_msg(strcmp(fp, fp0) == 0, "%s: %s but something "
                              "was applied:\n got %s\nwant %s", where,
                              rsv_code_name(rc), fp, fp0);
            else if (rc == RSV_EINDOUBT) {
                /* LOST_AFTER let the COMMIT run; the others did not. */
                int applied = kind == RSV_FAULT_LOST_AFTER;
                if (!(op->flags & OPF_PARTIAL) &&
                    (!(op->flags & OPF_REPEAT_DIFFERS) || !applied))
                    ck_assert_msg(strcmp(fp, applied ? fp_ok : fp0) == 0,
                                  "%s: in doubt, yet the state is neither "
                                  "before nor after:\n got %s", where, fp);
                if (!(op->flags & OPF_NOT_IDEMPOTENT)) {
                    int r2 = op->run();
                    int want2 = applied ? op->repeat_after_commit : RSV_OK;
                    ck_assert_msg(r2 == want2, "%s: repeated after "
                                  "RSV_EINDOUBT: %s, want %s: %s", where,
                                  rsv_code_name(r2), rsv_code_name(want2),
                                  rsv_errmsg(ctx));
                    if (op->flags & OPF_REPEAT_DIFFERS) {
                        /* the repeat replaced the holds, never added */
                        char q[256];
                        snprintf(q, sizeof q, "SELECT COALESCE(SUM(quantity), "
                                 "0) FROM rsv_holds WHERE shop_id "
                                 "= %llu AND checkout_token = '%s'",
                                 (unsigned long long)S, op->token);
                        int64_t units = tu_i64(adm, q);
                        ck_assert_msg(units == op->units, "%s: repeat "
                                      "holds %lld units, want %lld", where,
                                      (long long)units, (long long)op->units);
                    } else {
                        char *fp2 = fingerprint();
                        ck_assert_msg(strcmp(fp2, fp_ok) == 0, "%s: repeat "
                                      "did not resolve:\n got %s\nwant %s",
                                      where, fp2, fp_ok);
                        free(fp2);
                    }
                }
            }
            free(fp);
            audit_clean(where);
            /* still usable */
            int64_t on_hand = -1;
            int r3 = rsv_stock_get(ctx, S, I1, L1, &on_hand, NULL, NULL, NULL);
            ck_assert_msg(r3 == RSV_OK, "%s: context unusable afterwards: %s",
                          where, rsv_errmsg(ctx));
            cases_walked++;
        }
    }
    printf("%-14s %3llu calls, %d cases (%d skipped)\n", op->name,
           (unsigned long long)n_calls, cases_walked, cases_skipped);
    free(fp0);
    free(fp_ok);
    teardown_conn();
}

START_TEST(walk_every_failure_point)
{
    walk(&ops[_i]);
}
END_TEST

/* ---------------- the library's own allocations ---------------- */

/* The suite links with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc:
 * every allocation of the library's objects (and of this binary, which is
 * why the operations above never assert) comes here; Connector/C's own
 * come from the shared libmariadb and are not counted. */
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);

#define MAX_ALLOCS 512
static int alloc_armed, alloc_failed;
static uint64_t alloc_n, alloc_fail_at;
static uint64_t alloc_call[MAX_ALLOCS + 1]; /* database calls made before */

static int alloc_fails(void)
{
    if (!alloc_armed)
        return 0;
    alloc_n++;
    if (alloc_n <= MAX_ALLOCS)
        alloc_call[alloc_n] = rsv__fault_calls(NULL);
    if (alloc_n != alloc_fail_at)
        return 0;
    alloc_failed++;
    return 1;
}

void *__wrap_malloc(size_t n)
{
    return alloc_fails() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
    return alloc_fails() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
    return alloc_fails() ? NULL : __real_realloc(p, n);
}

static int run_op_alloc(const struct op *op, uint64_t fail_at)
{
    rsv__fault_arm(op_ctx(op), 0, RSV_FAULT_NONE);
    alloc_n = 0;
    alloc_failed = 0;
    alloc_fail_at = fail_at;
    alloc_armed = 1;
    int rc = op->run();
    alloc_armed = 0;
    return rc;
}

/* A context that has never grown its buffers or prepared a statement, so
 * that every allocation an operation can make is made. */
static void fresh_ctx(void)
{
    rsv_close(ctx);
    ctx = open_on(conn);
    rsv_close(sctx);
    sctx = open_on_flags(conn, TEST_OPT_STATEMENTS_ONLY);
}

static void alloc_walk(const struct op *op)
{
    setup_conn();
    restore_fixture();
    char *fp0 = fingerprint();
    fresh_ctx();
    int rc = run_op_alloc(op, 0);
    TU_RC(ctx, rc, RSV_OK);
    uint64_t n_allocs = alloc_n;
    ck_assert(n_allocs <= MAX_ALLOCS);
    n_calls = rsv__fault_calls(NULL);
    for (uint64_t i = 1; i <= n_calls && i <= MAX_CALLS; i++)
        trace[i] = rsv__fault_call(i);
    uint64_t committed_at = 0; /* the operation's COMMIT (reserve) */
    if (op->flags & OPF_REFILL_AFTER)
        for (uint64_t i = 1; i <= n_calls && !committed_at; i++)
            if (classify(op, i).commits)
                committed_at = i;
    uint64_t after[MAX_ALLOCS + 1];
    memcpy(after, alloc_call, sizeof after);
    char *fp_ok = fingerprint();
    int walked = 0;
    for (uint64_t k = 1; k <= n_allocs; k++) {
        char where[128];
        snprintf(where, sizeof where, "%s, allocation %llu/%llu (after "
                 "call %llu)", op->name, (unsigned long long)k,
                 (unsigned long long)n_allocs, (unsigned long long)after[k]);
        restore_fixture();
        fresh_ctx();
        rc = run_op_alloc(op, k);
        /* allocations made while the committing call itself is built
         * still fail the operation */
        int best_effort = committed_at && after[k] > committed_at;
        int want = best_effort ? RSV_OK : RSV_ENOMEM;
        ck_assert_msg(alloc_failed == 1, "%s: never reached", where);
        ck_assert_msg(rc == want, "%s: got %s, want %s: %s", where,
                      rsv_code_name(rc), rsv_code_name(want),
                      rsv_errmsg(ctx));
        ck_assert_msg(!client_in_trans(conn), "%s: transaction left open",
                      where);
        ck_assert_msg(q_i64("SELECT COUNT(*) FROM "
                            "information_schema.innodb_trx WHERE "
                            "trx_mysql_thread_id = %lu",
                            mysql_thread_id(conn)) == 0,
                      "%s: the server has a transaction open", where);
        char *fp = fingerprint();
        if (rc != RSV_OK) {
            if (!(op->flags & OPF_PARTIAL))
                ck_assert_msg(strcmp(fp, fp0) == 0, "%s: %s but something "
                              "was applied:\n got %s\nwant %s", where,
                              rsv_code_name(rc), fp, fp0);
        } else if (!best_effort)
            ck_assert_msg(strcmp(fp, fp_ok) == 0, "%s: RSV_OK, but not "
                          "applied as without the failure:\n got %s\nwant %s",
                          where, fp, fp_ok);
        free(fp);
        audit_clean(where);
        int r3 = rsv_stock_get(ctx, S, I1, L1, NULL, NULL, NULL, NULL);
        ck_assert_msg(r3 == RSV_OK, "%s: context unusable afterwards: %s",
                      where, rsv_errmsg(ctx));
        walked++;
    }
    printf("%-14s %3llu allocations, %d cases\n", op->name,
           (unsigned long long)n_allocs, walked);
    free(fp0);
    free(fp_ok);
    teardown_conn();
}

START_TEST(walk_every_allocation)
{
    alloc_walk(&ops[_i]);
}
END_TEST

/* ---------------- connection loss ---------------- */

static void kill_session(unsigned long id)
{
    char q[64];
    snprintf(q, sizeof q, "KILL CONNECTION %lu", id);
    tu_exec(adm, q);
    wait_session_gone(id, "KILL");
}

/* The server kills the session between two operations: the next one says
 * RSV_ECONN and applies nothing; the application reconnects the same
 * handle and carries on with the same context, statements prepared again
 * on the new connection. */
START_TEST(killed_then_reconnected)
{
    setup_conn();
    restore_fixture();
    char *fp0 = fingerprint();
    TU_OK(ctx, rsv_stock_get(ctx, S, I1, L1, NULL, NULL, NULL, NULL));
    unsigned long tid = mysql_thread_id(conn);
    kill_session(tid);
    rsv__fault_arm(ctx, 0, RSV_FAULT_NONE);
    int rc = rsv_claim(ctx, S, TOK("held-a"));
    TU_RC(ctx, rc, RSV_ECONN);
    /* one attempt, no retry of anything on a lost connection */
    ck_assert_int_eq(rsv__fault_calls(ctx), 1);
    rc = rsv_reserve_one(ctx, S, TOK("k1"), I1, L1, 1, 0);
    TU_RC(ctx, rc, RSV_ECONN);
    char *fp = fingerprint();
    ck_assert_str_eq(fp, fp0);
    free(fp);

    reconnect(conn);
    ck_assert(mysql_thread_id(conn) != tid);
    TU_OK(ctx, rsv_stock_get(ctx, S, I1, L1, NULL, NULL, NULL, NULL));
    TU_OK(ctx, rsv_claim(ctx, S, TOK("held-a")));
    rc = rsv_claim(ctx, S, TOK("held-a"));
    TU_RC(ctx, rc, RSV_ECLAIMED);
    TU_OK(ctx, rsv_reserve_one(ctx, S, TOK("k1"), I1, L1, 1, 0));
    audit_clean("killed_then_reconnected");
    free(fp0);
    teardown_conn();
}
END_TEST

/* Killed inside the library's transaction, before COMMIT: RSV_ECONN,
 * nothing applied, no statement sent again.  (A claim by statements: with
 * the schema's procedure the claim is one statement, below.) */
START_TEST(killed_inside_transaction)
{
    setup_conn();
    restore_fixture();
    char *fp0 = fingerprint();
    /* count claim's calls, then kill the session on the third (a locking
     * read inside the transaction) by really closing its socket */
    rsv__fault_arm(sctx, 3, RSV_FAULT_LOST);
    unsigned long tid = mysql_thread_id(conn);
    int rc = rsv_claim(sctx, S, TOK("held-a"));
    TU_RC(sctx, rc, RSV_ECONN);
    ck_assert_str_eq(rsv__fault_call(3), "stmt");
    ck_assert_int_eq(rsv__fault_calls(sctx), 3);
    rsv__fault_disarm();
    wait_session_gone(tid, "killed_inside_transaction");
    char *fp = fingerprint();
    ck_assert_str_eq(fp, fp0);
    free(fp);
    reconnect(conn);
    TU_OK(ctx, rsv_claim(ctx, S, TOK("held-a")));
    audit_clean("killed_inside_transaction");
    free(fp0);
    teardown_conn();
}
END_TEST

static rsv_ctx *claim_ctx; /* the context claim_thread claims with */

static void *claim_thread(void *arg)
{
    int *rc = arg;
    *rc = rsv_claim(claim_ctx, S, TOK("held-a"));
    return NULL;
}

/* Claim on c in a thread; once the server shows it waiting for the
 * checkout row another connection holds, kill its session (KILL from
 * another connection, as an operator or a failover would).  Returns the
 * claim's code, after the session is gone and its lock waiter let go,
 * having checked that nothing was applied (the shop's rows equal fp0). */
static int claim_killed_while_waiting(rsv_ctx *c, const char *fp0,
                                      const char *where)
{
    MYSQL *locker = tu_connect();
    char q[256];
    snprintf(q, sizeof q, "SELECT status FROM rsv_checkouts WHERE "
             "shop_id = %llu AND checkout_token = 'held-a' FOR UPDATE",
             (unsigned long long)S);
    tu_exec(locker, "START TRANSACTION");
    tu_exec(locker, q);
    unsigned long tid = mysql_thread_id(conn);
    rsv__fault_arm(c, 0, RSV_FAULT_NONE);
    int rc = 1;
    claim_ctx = c;
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, claim_thread, &rc), 0);
    int waiting = 0;
    for (int i = 0; i < 500 && !waiting; i++) {
        /* (a primary-key lock wait shows as "Statistics", in the
         * optimizer, and not always in innodb_trx; inside a procedure the
         * statement shown may be the CALL or the one it runs) */
        waiting = q_i64("SELECT COUNT(*) FROM information_schema.processlist "
                        "WHERE id = %lu AND state = 'Statistics' AND (info "
                        "LIKE '%%FOR UPDATE%%' OR info LIKE '%%rsv_settle%%')",
                        tid) > 0;
        if (!waiting)
            sleep_ms(10);
    }
    ck_assert_msg(waiting, "%s: the claim never waited for the lock", where);
    snprintf(q, sizeof q, "KILL CONNECTION %lu", tid);
    tu_exec(adm, q);
    pthread_join(th, NULL);
    tu_exec(locker, "ROLLBACK");
    mysql_close(locker);
    wait_session_gone(tid, where);
    char *fp = fingerprint();
    ck_assert_str_eq(fp, fp0);
    free(fp);
    return rc;
}

/* Killed while the library's transaction (a claim by statements) waits
 * for a row lock: RSV_ECONN, nothing applied, nothing sent again. */
START_TEST(killed_while_waiting_for_a_lock)
{
    setup_conn();
    restore_fixture();
    char *fp0 = fingerprint();
    int rc = claim_killed_while_waiting(sctx, fp0,
                                        "killed_while_waiting_for_a_lock");
    TU_RC(sctx, rc, RSV_ECONN);
    /* the locking read was the last call: no ROLLBACK, no retry */
    uint64_t calls = rsv__fault_calls(sctx);
    ck_assert_str_eq(rsv__fault_call(calls), "stmt");
    ck_assert(calls >= 3);
    reconnect(conn);
    TU_OK(ctx, rsv_claim(ctx, S, TOK("held-a")));
    audit_clean("killed_while_waiting_for_a_lock");
    free(fp0);
    teardown_conn();
}
END_TEST

/* The same kill while the claim's one statement (the schema's procedure)
 * waits for the lock: the library cannot tell whether the procedure got
 * to its COMMIT, so RSV_EINDOUBT; nothing was applied (the server rolled
 * it back), nothing was sent again, and repeating the call claims. */
START_TEST(killed_while_the_claim_procedure_waits)
{
    setup_conn();
    restore_fixture();
    char *fp0 = fingerprint();
    int rc = claim_killed_while_waiting(
        ctx, fp0, "killed_while_the_claim_procedure_waits");
    TU_RC(ctx, rc, RSV_EINDOUBT);
    ck_assert_int_eq(rsv__fault_calls(ctx), 1);
    ck_assert_str_eq(rsv__fault_call(1), "CALL (rolled back)");
    reconnect(conn);
    TU_OK(ctx, rsv_claim(ctx, S, TOK("held-a")));
    rc = rsv_claim(ctx, S, TOK("held-a"));
    TU_RC(ctx, rc, RSV_ECLAIMED);
    audit_clean("killed_while_the_claim_procedure_waits");
    free(fp0);
    teardown_conn();
}
END_TEST

/* A restarted server hands out connection ids from 1 again: a reconnect
 * may get the id the context's statements were prepared under.  The
 * statements must still be prepared again. */
START_TEST(reconnect_same_thread_id)
{
    setup_conn();
    restore_fixture();
    TU_OK(ctx, rsv_stock_get(ctx, S, I1, L1, NULL, NULL, NULL, NULL));
    TU_OK(ctx, rsv_extend(ctx, S, TOK("held-a"), 0));
    kill_session(mysql_thread_id(conn));
    reconnect(conn);
    rsv__fault_keep_thread_id(ctx, mysql_thread_id(conn));
    TU_OK(ctx, rsv_stock_get(ctx, S, I1, L1, NULL, NULL, NULL, NULL));
    TU_OK(ctx, rsv_extend(ctx, S, TOK("held-a"), 0));
    TU_OK(ctx, rsv_claim(ctx, S, TOK("held-a")));
    audit_clean("reconnect_same_thread_id");
    teardown_conn();
}
END_TEST

/* The other way Connector/C lets an application keep its handle: a MYSQL
 * it allocated itself, closed and connected again in place. */
START_TEST(reconnect_caller_owned_handle)
{
    const char *sock = getenv("RSV_TEST_SOCKET");
    const char *user = getenv("RSV_TEST_USER");
    const char *pass = getenv("RSV_TEST_PASSWORD");
    adm = tu_connect();
    actx = open_on(adm);
    restore_fixture();
    MYSQL own;
    for (int round = 0; round < 3; round++) {
        if (round == 0)
            ck_assert(mysql_init(&own) == &own);
        ck_assert_msg(mysql_real_connect(&own, NULL, user ? user : "root",
                                         pass, tu_db_name(), 0, sock, 0),
                      "%s", mysql_error(&own));
        if (round == 0)
            ctx = open_on(&own);
        else if (round == 2)
            /* and the id came back */
            rsv__fault_keep_thread_id(ctx, mysql_thread_id(&own));
        TU_OK(ctx, rsv_stock_get(ctx, S, I1, L1, NULL, NULL, NULL, NULL));
        TU_OK(ctx, rsv_extend(ctx, S, TOK("held-a"), 0));
        if (round < 2) {
            mysql_close(&own);
            mysql_init(&own);
        }
    }
    TU_OK(ctx, rsv_claim(ctx, S, TOK("held-a")));
    rsv_close(ctx);
    mysql_close(&own);
    audit_clean("reconnect_caller_owned_handle");
    rsv_close(actx);
    mysql_close(adm);
}
END_TEST

/* rsv_open refuses servers without SELECT ... FOR UPDATE SKIP LOCKED.  No
 * such server is at hand, so rsv_open is made to see one: the check is the
 * library's, only the version it reads is pretended. */
START_TEST(old_servers_are_refused)
{
    static const struct {
        unsigned long version;
        const char *info;
        int want;
    } cases[] = {
        {100505, "10.5.5-MariaDB", RSV_ESERVER},
        {100600, "10.6.0-MariaDB", RSV_OK},
        {80000, "8.0.0", RSV_ESERVER},
        {80001, "8.0.1", RSV_ESERVER}, /* (CHECK constraints ignored) */
        {80015, "8.0.15", RSV_ESERVER},
        {80016, "8.0.16", RSV_OK},
        {50744, "5.7.44-log", RSV_ESERVER},
    };
    MYSQL *c = tu_connect();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rsv__fault_pretend_server(cases[i].version, cases[i].info);
        rsv_ctx *x = NULL;
        int rc = rsv_open(&x, c, NULL);
        rsv__fault_pretend_server(0, NULL);
        ck_assert_msg(rc == cases[i].want, "%s: got %s (%s)", cases[i].info,
                      rsv_code_name(rc), rsv_errmsg(x));
        if (rc == RSV_ESERVER)
            ck_assert(strstr(rsv_errmsg(x), "SKIP LOCKED") != NULL);
        rsv_close(x);
    }
    /* MySQL has no SET STATEMENT for the option's lock wait */
    rsv_options o;
    rsv_options_init(&o, RSV_OPTIONS_VERSION);
    o.lock_wait_timeout_s = 5;
    rsv__fault_pretend_server(80040, "8.0.40");
    rsv_ctx *x = NULL;
    int rc = rsv_open(&x, c, &o);
    rsv__fault_pretend_server(0, NULL);
    ck_assert_msg(rc == RSV_ECONFIG, "got %s", rsv_code_name(rc));
    ck_assert(strstr(rsv_errmsg(x), "lock_wait_timeout_s") != NULL);
    rsv_close(x);
    mysql_close(c);
}
END_TEST

int main(void)
{
    tu_db_create("faults");
    fill_opts();
    S = tu_shop();
    Suite *s = suite_create("faults");
    TCase *tc = tcase_create("walk");
    /* in the runner, once: the tests below run after it and share it */
    tcase_add_unchecked_fixture(tc, build_fixture, NULL);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, walk_every_failure_point, 0, (int)N_OPS);
    tcase_add_loop_test(tc, walk_every_allocation, 0, (int)N_OPS);
    suite_add_tcase(s, tc);
    tu_add(s, "killed_then_reconnected", killed_then_reconnected);
    tu_add(s, "killed_inside_transaction", killed_inside_transaction);
    tu_add(s, "killed_while_waiting_for_a_lock",
           killed_while_waiting_for_a_lock);
    tu_add(s, "killed_while_the_claim_procedure_waits",
           killed_while_the_claim_procedure_waits);
    tu_add(s, "reconnect_same_thread_id", reconnect_same_thread_id);
    tu_add(s, "reconnect_caller_owned_handle", reconnect_caller_owned_handle);
    tu_add(s, "old_servers_are_refused", old_servers_are_refused);
    int status = tu_run(s);
    tu_db_drop();
    return status;
}
