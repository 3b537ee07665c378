/*
 * checkout_demo.c - libreserve by example.
 *
 * Part 1 is a short narrated walkthrough of one shop: set stock, reserve a
 * cart, claim it, reserve and release, an out-of-stock answer and an
 * expired hold, printing the stock numbers after every step.
 *
 * Part 2 is a flash sale: many concurrent buyers (threads, each with its
 * own MYSQL connection and rsv_ctx) fill multi-line carts over several
 * items and locations; their payments succeed (claim), fail (release) or
 * are abandoned (the hold is left to expire and a sweeper thread gives the
 * units back with rsv_sweep).  A progress line is updated on stderr while
 * it runs; the summary at the end reports what was sold, released and
 * expired, out-of-stock answers, pool refills, client-side latency of
 * reserve and claim, and checks the result: rsv_audit must find nothing,
 * and the units sold must equal the initial stock minus the final stock on
 * hand, for every item and location.
 *
 * Run it with `make demo` (a throwaway MariaDB, a fresh database, the
 * schema loaded: see examples/run-demo.sh), or against your own database,
 * named by RSV_DSN as for every example (make try-db prints one) or by
 * the connection options:
 *   RSV_DSN='mariadb://shop:secret@localhost/shop_test' checkout_demo
 *   checkout_demo --socket /run/mysqld/mysqld.sock --database shop_test
 * The database must hold the libreserve schema (sql/schema.sql); the demo
 * writes to shops 1 and 2 (see --walk-shop, --sale-shop).
 *
 * Exit status: 0 when every check passed, 1 when a check failed or the
 * library reported an unexpected error, 2 on bad usage.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mysql.h>
#include <reserve.h>

/* ------------------------------------------------------------------ */
/* Options                                                            */
/* ------------------------------------------------------------------ */

typedef struct config {
    const char *dsn; /* when set, every context opens its own connection */
    const char *socket, *host, *user, *password, *database;
    unsigned int port;
    int buyers, items, locations;
    int64_t stock;          /* units per item and location */
    double fail_rate, abandon_rate;
    double duration_s;
    int64_t ttl_ms;
    int64_t pool_cap;
    int max_lines, max_qty;
    int think_ms, pay_ms;   /* upper bounds of the random delays */
    uint64_t seed;
    uint64_t walk_shop, sale_shop;
    int walkthrough, sale, progress;
} config;

static void usage(FILE *f, const char *argv0)
{
    fprintf(f,
"usage: %s [options]\n"
"\n"
"A narrated walkthrough of libreserve, then a flash-sale simulation with\n"
"concurrent buyers, checked by rsv_audit at the end.\n"
"\n"
"Connection (the database must hold sql/schema.sql):\n"
"  --dsn DSN            mariadb://USER:PW@HOST/DATABASE?socket=... (default:\n"
"                       $RSV_DSN, unless the options below are given)\n"
"  --socket PATH        Unix socket (default: $RSV_TEST_SOCKET)\n"
"  --host HOST          TCP host (default: the local socket)\n"
"  --port N             TCP port\n"
"  --user NAME          user (default: $RSV_TEST_USER or root)\n"
"  --password PW        password (default: $RSV_TEST_PASSWORD)\n"
"  --database NAME      database (default: $RSV_DEMO_DATABASE)\n"
"\n"
"Flash sale:\n"
"  --buyers N           concurrent buyers, one connection each (default 24)\n"
"  --items N            items on sale (default 6)\n"
"  --locations N        locations stocking every item (default 3)\n"
"  --stock N            units per item and location (default 300)\n"
"  --fail-rate F        share of payments that fail -> release (default 0.15)\n"
"  --abandon-rate F     share of checkouts abandoned -> expire (default 0.10)\n"
"  --duration S         seconds to run; ends early when sold out (default 10)\n"
"  --ttl-ms N           hold lifetime in ms (default 1500)\n"
"  --pool-cap N         pool rows per item and location (default 50)\n"
"  --max-lines N        lines per cart, 1..N (default 3)\n"
"  --max-qty N          units per line, 1..N (default 3)\n"
"  --think-ms N         a buyer browses 0..N ms between checkouts (default 40)\n"
"  --pay-ms N           a payment takes 0..N ms (default 60)\n"
"  --seed N             random seed (default: time)\n"
"\n"
"Other:\n"
"  --walk-shop ID       shop id of the walkthrough (default 1)\n"
"  --sale-shop ID       shop id of the flash sale (default 2)\n"
"  --no-walkthrough     skip part 1\n"
"  --no-sale            skip part 2\n"
"  --no-progress        no progress line on stderr\n"
"  --help               this text\n"
"\n"
"Exit status: 0 all checks passed, 1 a check failed or an unexpected\n"
"library error, 2 bad usage.\n", argv0);
}

static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_rate(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (!*s || *end || !(v >= 0.0 && v <= 1.0))
        return -1;
    *out = v;
    return 0;
}

/* Returns 0 to run, 1 after --help, 2 on bad usage. */
static int parse_args(config *c, int argc, char **argv)
{
    memset(c, 0, sizeof *c);
    /* --dsn, else the parts given on the command line, else $RSV_DSN
     * (empty counts as unset), else the parts from the environment */
    const char *dsn_opt = NULL;
    int parts = 0;
    c->dsn = getenv("RSV_DSN");
    if (c->dsn && !*c->dsn)
        c->dsn = NULL;
    c->socket = getenv("RSV_TEST_SOCKET");
    c->user = getenv("RSV_TEST_USER") ? getenv("RSV_TEST_USER") : "root";
    c->password = getenv("RSV_TEST_PASSWORD");
    c->database = getenv("RSV_DEMO_DATABASE");
    c->buyers = 24;
    c->items = 6;
    c->locations = 3;
    c->stock = 300;
    c->fail_rate = 0.15;
    c->abandon_rate = 0.10;
    c->duration_s = 10;
    c->ttl_ms = 1500;
    c->pool_cap = 50;
    c->max_lines = 3;
    c->max_qty = 3;
    c->think_ms = 40;
    c->pay_ms = 60;
    c->seed = (uint64_t)time(NULL);
    c->walk_shop = 1;
    c->sale_shop = 2;
    c->walkthrough = c->sale = c->progress = 1;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        int64_t n = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout, argv[0]);
            return 1;
        }
        if (strcmp(a, "--no-walkthrough") == 0) {
            c->walkthrough = 0;
            continue;
        }
        if (strcmp(a, "--no-sale") == 0) {
            c->sale = 0;
            continue;
        }
        if (strcmp(a, "--no-progress") == 0) {
            c->progress = 0;
            continue;
        }
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n",
                    argv[0], a);
            return 2;
        }
        /* every other option takes a value: --opt VALUE or --opt=VALUE */
        char name[32];
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        if (len >= sizeof name) {
            fprintf(stderr, "%s: unknown option '%s' (see --help)\n", argv[0],
                    a);
            return 2;
        }
        memcpy(name, a, len);
        name[len] = '\0';
        if (eq)
            v = eq + 1;
        else if (i + 1 < argc)
            v = argv[++i];
        else {
            fprintf(stderr, "%s: option %s needs a value\n", argv[0], name);
            return 2;
        }
        static const char *const parts_opts[] = {
            "--socket", "--host", "--port", "--user", "--password", "--database",
        };
        for (size_t k = 0; k < sizeof parts_opts / sizeof *parts_opts; k++)
            if (strcmp(name, parts_opts[k]) == 0)
                parts = 1;
        int bad = 0;
        if (strcmp(name, "--dsn") == 0)
            dsn_opt = v;
        else if (strcmp(name, "--socket") == 0)
            c->socket = v;
        else if (strcmp(name, "--host") == 0)
            c->host = v;
        else if (strcmp(name, "--user") == 0)
            c->user = v;
        else if (strcmp(name, "--password") == 0)
            c->password = v;
        else if (strcmp(name, "--database") == 0)
            c->database = v;
        else if (strcmp(name, "--port") == 0) {
            bad = parse_i64(v, 1, 65535, &n);
            c->port = (unsigned)n;
        } else if (strcmp(name, "--buyers") == 0) {
            bad = parse_i64(v, 1, 500, &n);
            c->buyers = (int)n;
        } else if (strcmp(name, "--items") == 0) {
            bad = parse_i64(v, 1, 10000, &n);
            c->items = (int)n;
        } else if (strcmp(name, "--locations") == 0) {
            bad = parse_i64(v, 1, RSV_LINE_MAX_LOCATIONS, &n);
            c->locations = (int)n;
        } else if (strcmp(name, "--stock") == 0) {
            bad = parse_i64(v, 0, 100000000, &n);
            c->stock = n;
        } else if (strcmp(name, "--fail-rate") == 0)
            bad = parse_rate(v, &c->fail_rate);
        else if (strcmp(name, "--abandon-rate") == 0)
            bad = parse_rate(v, &c->abandon_rate);
        else if (strcmp(name, "--duration") == 0) {
            char *end;
            c->duration_s = strtod(v, &end);
            bad = !*v || *end || !(c->duration_s > 0 && c->duration_s <= 3600);
        } else if (strcmp(name, "--ttl-ms") == 0) {
            bad = parse_i64(v, 1, 3600000, &n);
            c->ttl_ms = n;
        } else if (strcmp(name, "--pool-cap") == 0) {
            bad = parse_i64(v, 1, 10000, &n);
            c->pool_cap = n;
        } else if (strcmp(name, "--max-lines") == 0) {
            bad = parse_i64(v, 1, 50, &n);
            c->max_lines = (int)n;
        } else if (strcmp(name, "--max-qty") == 0) {
            bad = parse_i64(v, 1, 1000, &n);
            c->max_qty = (int)n;
        } else if (strcmp(name, "--think-ms") == 0) {
            bad = parse_i64(v, 0, 60000, &n);
            c->think_ms = (int)n;
        } else if (strcmp(name, "--pay-ms") == 0) {
            bad = parse_i64(v, 0, 60000, &n);
            c->pay_ms = (int)n;
        } else if (strcmp(name, "--seed") == 0) {
            bad = parse_i64(v, 0, INT64_MAX, &n);
            c->seed = (uint64_t)n;
        } else if (strcmp(name, "--walk-shop") == 0) {
            bad = parse_i64(v, 1, INT64_MAX, &n);
            c->walk_shop = (uint64_t)n;
        } else if (strcmp(name, "--sale-shop") == 0) {
            bad = parse_i64(v, 1, INT64_MAX, &n);
            c->sale_shop = (uint64_t)n;
        } else {
            fprintf(stderr, "%s: unknown option '%s' (see --help)\n", argv[0],
                    name);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "%s: bad value '%s' for %s (see --help)\n",
                    argv[0], v, name);
            return 2;
        }
    }
    if (c->fail_rate + c->abandon_rate > 1.0) {
        fprintf(stderr, "%s: --fail-rate + --abandon-rate must not exceed 1\n",
                argv[0]);
        return 2;
    }
    if (c->max_lines > c->items)
        c->max_lines = c->items;
    if (dsn_opt)
        c->dsn = dsn_opt;
    else if (parts)
        c->dsn = NULL;
    if (!c->dsn && !c->database) {
        fprintf(stderr, "%s: no database: pass --dsn or --database, or set "
                        "RSV_DSN or RSV_DEMO_DATABASE (make demo does it for "
                        "you)\n",
                argv[0]);
        return 2;
    }
    if (c->walkthrough && c->sale && c->walk_shop == c->sale_shop) {
        fprintf(stderr, "%s: --walk-shop and --sale-shop must differ\n",
                argv[0]);
        return 2;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Small helpers                                                      */
/* ------------------------------------------------------------------ */

/* Distinguishes the tokens of this run from those of earlier runs. */
static char run_id[16];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(double ms)
{
    if (ms <= 0)
        return;
    struct timespec ts;
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)((ms - (double)ts.tv_sec * 1000) * 1e6);
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* xorshift64*, one per thread */
static uint64_t rnd(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* uniform in [0, 1) */
static double rnd01(uint64_t *s)
{
    return (double)(rnd(s) >> 11) / 9007199254740992.0; /* 2^53 */
}

/* uniform in [0, n) */
static int rnd_int(uint64_t *s, int n)
{
    return n <= 1 ? 0 : (int)(rnd(s) % (uint64_t)n);
}

static MYSQL *db_connect(const config *c)
{
    MYSQL *m = mysql_init(NULL);
    if (!m) {
        fprintf(stderr, "mysql_init failed\n");
        return NULL;
    }
    if (!mysql_real_connect(m, c->host, c->user, c->password, c->database,
                            c->port, c->host ? NULL : c->socket, 0)) {
        fprintf(stderr, "connect to %s: %s\n",
                c->host ? c->host : (c->socket ? c->socket : "localhost"),
                mysql_error(m));
        mysql_close(m);
        return NULL;
    }
    return m;
}

/* A context and the connection it runs on (*m, for the demo's own
 * queries).  From a DSN the context opens the connection and owns it
 * (rsv_connection() lends it); from the parts the demo opens it and
 * lends it to the context.  ctx_close() ends both either way. */
static rsv_ctx *ctx_open(const config *c, MYSQL **m, int64_t ttl_ms)
{
    rsv_options o;
    rsv_options_init(&o, RSV_OPTIONS_VERSION);
    o.pool_cap = c->pool_cap;
    o.refill_low_water = -1; /* the default: half the cap */
    if (ttl_ms > 0)
        o.hold_ttl_ms = ttl_ms;
    rsv_ctx *ctx = NULL;
    int rc;
    *m = NULL;
    if (c->dsn) {
        rc = rsv_open_dsn(&ctx, c->dsn, &o);
    } else {
        if (!(*m = db_connect(c)))
            return NULL;
        rc = rsv_open(&ctx, *m, &o);
    }
    if (rc != RSV_OK) {
        fprintf(stderr, "%s: %s: %s\n", c->dsn ? "rsv_open_dsn" : "rsv_open",
                rsv_code_name(rc), rsv_errmsg(ctx));
        rsv_close(ctx);
        if (*m)
            mysql_close(*m);
        *m = NULL;
        return NULL;
    }
    if (c->dsn)
        *m = rsv_connection(ctx);
    return ctx;
}

static void ctx_close(const config *c, rsv_ctx *ctx, MYSQL *m)
{
    rsv_close(ctx);
    if (!c->dsn && m)
        mysql_close(m);
}

#define TOK(s) (s), strlen(s)

/* ------------------------------------------------------------------ */
/* Part 1: the walkthrough                                            */
/* ------------------------------------------------------------------ */

static int walk_failed;

static void show(rsv_ctx *ctx, uint64_t shop, uint64_t item, uint64_t loc)
{
    int64_t on_hand, held, pooled, avail;
    int rc = rsv_stock_get(ctx, shop, item, loc, &on_hand, &held, &pooled,
                           &avail);
    if (rc != RSV_OK) {
        printf("     item %" PRIu64 " @ location %" PRIu64 ": %s (%s)\n",
               item, loc, rsv_code_name(rc), rsv_errmsg(ctx));
        walk_failed = 1;
        return;
    }
    printf("     item %" PRIu64 " @ location %" PRIu64
           ":  on hand %2" PRId64 "   held %2" PRId64 "   available %2"
           PRId64 "   (pool rows %" PRId64 ")\n",
           item, loc, on_hand, held, avail, pooled);
}

/* Print a call's answer; flag it when it is not the one the story needs. */
static void answer(rsv_ctx *ctx, const char *call, int rc, int want)
{
    printf("   %s -> %s", call, rsv_code_name(rc) ? rsv_code_name(rc) : "?");
    if (rc != RSV_OK)
        printf(" (%s)", rsv_errmsg(ctx));
    printf("\n");
    if (rc != want) {
        printf("   !! expected %s\n", rsv_code_name(want));
        walk_failed = 1;
    }
}

static void show_allocation(const rsv_cart *cart, const uint64_t *items)
{
    for (size_t l = 0; l < rsv_cart_lines(cart); l++) {
        size_t n = 0;
        rsv_cart_allocation_count(cart, l, &n);
        printf("     line %zu (item %" PRIu64 "):", l, items[l]);
        for (size_t i = 0; i < n; i++) {
            uint64_t loc;
            int64_t qty;
            if (rsv_cart_allocation(cart, l, i, &loc, &qty) == RSV_OK)
                printf("%s %" PRId64 " held at location %" PRIu64,
                       i ? "," : "", qty, loc);
        }
        printf("\n");
    }
}

static void audit_print(void *arg, uint64_t shop, uint64_t item, uint64_t loc,
                        const char *problem)
{
    int *shown = arg;
    if ((*shown)++ < 20)
        printf("   VIOLATION shop %" PRIu64 " item %" PRIu64 " location %"
               PRIu64 ": %s\n", shop, item, loc, problem);
}

static int walkthrough(const config *c)
{
    MYSQL *m;
    rsv_ctx *ctx = ctx_open(c, &m, 0);
    if (!ctx)
        return 1;
    const uint64_t shop = c->walk_shop, tee = 101, mug = 102;
    const uint64_t warehouse = 1, store = 2;
    /* Tokens unique to this run, so the demo can run again on the same
     * database (a claimed token cannot be reserved again). */
    char alice[32], bob[32], carol[32], dave[32];
    snprintf(alice, sizeof alice, "alice-%s", run_id);
    snprintf(bob, sizeof bob, "bob-%s", run_id);
    snprintf(carol, sizeof carol, "carol-%s", run_id);
    snprintf(dave, sizeof dave, "dave-%s", run_id);
    int rc;
    rsv_cart *cart = NULL;
    if (rsv_cart_new(&cart) != RSV_OK) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }

    printf("== Part 1: a walkthrough (shop %" PRIu64 ", library %s) ==\n\n",
           shop, rsv_version());
    printf("Checkout tokens of this run: %s, %s, %s, %s.\n\n", alice, bob,
           carol, dave);

    printf("1. The merchant sets stock on hand: 5 T-shirts (item %" PRIu64
           ") in the warehouse (location %" PRIu64 "),\n   mugs (item %"
           PRIu64 "): 2 in the warehouse and 3 in the store (location %"
           PRIu64 ").\n", tee, warehouse, mug, store);
    answer(ctx, "rsv_stock_set(tee, warehouse, 5)",
           rsv_stock_set(ctx, shop, tee, warehouse, 5), RSV_OK);
    answer(ctx, "rsv_stock_set(mug, warehouse, 2)",
           rsv_stock_set(ctx, shop, mug, warehouse, 2), RSV_OK);
    answer(ctx, "rsv_stock_set(mug, store, 3)",
           rsv_stock_set(ctx, shop, mug, store, 3), RSV_OK);
    show(ctx, shop, tee, warehouse);
    show(ctx, shop, mug, warehouse);
    show(ctx, shop, mug, store);

    printf("\n2. Alice's cart: 2 T-shirts from the warehouse, and 3 mugs from "
           "the warehouse\n   or, for what it lacks, the store "
           "(RSV_LINE_SPLIT). Her units are held for 10 minutes\n   while "
           "she pays.\n");
    const uint64_t wh_only[] = {warehouse}, wh_then_store[] = {warehouse, store};
    const uint64_t alice_items[] = {tee, mug};
    rsv_cart_add(cart, tee, wh_only, 1, 2, 0);
    rsv_cart_add(cart, mug, wh_then_store, 2, 3, RSV_LINE_SPLIT);
    rc = rsv_reserve(ctx, shop, TOK(alice), cart, 600000);
    answer(ctx, "rsv_reserve(alice)", rc, RSV_OK);
    if (rc == RSV_OK)
        show_allocation(cart, alice_items);
    show(ctx, shop, tee, warehouse);
    show(ctx, shop, mug, warehouse);
    show(ctx, shop, mug, store);

    printf("\n3. Alice's payment succeeds: the claim takes her units off the "
           "stock for good.\n");
    answer(ctx, "rsv_claim(alice)",
           rsv_claim(ctx, shop, TOK(alice)), RSV_OK);
    show(ctx, shop, tee, warehouse);
    show(ctx, shop, mug, warehouse);
    show(ctx, shop, mug, store);
    printf("   The payment provider retries its webhook; the repeated claim "
           "takes nothing:\n");
    answer(ctx, "rsv_claim(alice)",
           rsv_claim(ctx, shop, TOK(alice)), RSV_ECLAIMED);
    show(ctx, shop, tee, warehouse);

    printf("\n4. Bob holds the last 3 T-shirts.\n");
    answer(ctx, "rsv_reserve_one(bob, tee, warehouse, 3)",
           rsv_reserve_one(ctx, shop, TOK(bob), tee, warehouse, 3, 0),
           RSV_OK);
    show(ctx, shop, tee, warehouse);
    printf("   Carol wants one too: every unit is held, so she is told "
           "\"out of stock\".\n");
    rc = rsv_reserve_one(ctx, shop, TOK(carol), tee, warehouse, 1, 0);
    answer(ctx, "rsv_reserve_one(carol, tee, warehouse, 1)", rc,
           RSV_EOUTOFSTOCK);

    printf("\n5. Bob's card is declined: the release gives his units back.\n");
    answer(ctx, "rsv_release(bob)",
           rsv_release(ctx, shop, TOK(bob)), RSV_OK);
    show(ctx, shop, tee, warehouse);
    printf("   Carol tries again, for 4: only 3 exist, so out of stock "
           "again;\n   for 1 it works.\n");
    answer(ctx, "rsv_reserve_one(carol, tee, warehouse, 4)",
           rsv_reserve_one(ctx, shop, TOK(carol), tee, warehouse, 4, 0),
           RSV_EOUTOFSTOCK);
    answer(ctx, "rsv_reserve_one(carol, tee, warehouse, 1)",
           rsv_reserve_one(ctx, shop, TOK(carol), tee, warehouse, 1, 0),
           RSV_OK);
    answer(ctx, "rsv_claim(carol)",
           rsv_claim(ctx, shop, TOK(carol)), RSV_OK);
    show(ctx, shop, tee, warehouse);

    printf("\n6. Dave holds 2 T-shirts for 300 ms and walks away.\n");
    answer(ctx, "rsv_reserve_one(dave, tee, warehouse, 2, 300 ms)",
           rsv_reserve_one(ctx, shop, TOK(dave), tee, warehouse, 2,
                           300), RSV_OK);
    show(ctx, shop, tee, warehouse);
    sleep_ms(400);
    int32_t st = 0;
    int64_t units = 0, left_ms = 0;
    rc = rsv_checkout_status(ctx, shop, TOK(dave), &st, &units,
                             &left_ms);
    printf("   400 ms later: rsv_checkout_status -> %s, status %s, "
           "deadline %" PRId64 " ms ago\n", rsv_code_name(rc),
           st == RSV_STATUS_EXPIRED ? "EXPIRED" : "(not expired?)", -left_ms);
    if (rc != RSV_OK || st != RSV_STATUS_EXPIRED)
        walk_failed = 1;
    show(ctx, shop, tee, warehouse);
    int64_t swept = 0;
    answer(ctx, "rsv_sweep() (what a sweeper process runs)",
           rsv_sweep(ctx, shop, 0, &swept), RSV_OK);
    printf("     %" PRId64 " expired hold(s) given back\n", swept);
    show(ctx, shop, tee, warehouse);
    printf("   Dave's payment arrives late: nothing is claimed.\n");
    answer(ctx, "rsv_claim(dave)",
           rsv_claim(ctx, shop, TOK(dave)), RSV_EEXPIRED);

    printf("\n7. The merchant counts the shelf and corrects the stock "
           "(+2 T-shirts).\n");
    int64_t on_hand = 0;
    answer(ctx, "rsv_stock_adjust(tee, warehouse, +2)",
           rsv_stock_adjust(ctx, shop, tee, warehouse, 2, &on_hand), RSV_OK);
    show(ctx, shop, tee, warehouse);

    printf("\n8. The audit checks every invariant of the shop on one "
           "snapshot.\n");
    int64_t violations = -1;
    int shown = 0;
    rc = rsv_audit(ctx, shop, 0, audit_print, &shown, &violations);
    answer(ctx, "rsv_audit()", rc, RSV_OK);
    printf("     %" PRId64 " violation(s)\n\n", violations);
    if (violations != 0)
        walk_failed = 1;

    rsv_cart_free(cart);
    ctx_close(c, ctx, m);
    if (walk_failed)
        printf("walkthrough: FAILED (an answer differed from the story)\n\n");
    return walk_failed;
}

/* ------------------------------------------------------------------ */
/* Part 2: the flash sale                                             */
/* ------------------------------------------------------------------ */

/* Latency samples in microseconds, one growable array per thread. */
typedef struct samples {
    uint32_t *v;
    size_t n, cap;
} samples;

static void sample_add(samples *s, double seconds)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        uint32_t *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return; /* drop the sample rather than the run */
        s->v = v;
        s->cap = cap;
    }
    double us = seconds * 1e6;
    s->v[s->n++] = us > 4e9 ? 4000000000u : (uint32_t)us;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static double percentile_ms(const samples *s, double p)
{
    if (s->n == 0)
        return 0;
    size_t i = (size_t)(p * (double)s->n);
    if (i > 0 && (double)i == p * (double)s->n)
        i--;
    if (i >= s->n)
        i = s->n - 1;
    return s->v[i] / 1000.0;
}

/* Shared counters, read by the progress line while buyers run. */
static struct {
    atomic_llong attempts, reserved, units_reserved;
    atomic_llong sold, units_sold;
    atomic_llong released, units_released;
    atomic_llong abandoned, units_abandoned;
    atomic_llong late, oos, busy, errors;
    atomic_llong swept_holds, sweeps, replenish_rows;
    atomic_int stop;
} S;

typedef struct held_unit {
    size_t key;                  /* key_index() of the item and location */
    int64_t qty;
} held_unit;

typedef struct buyer {
    int id;
    const config *cfg;
    pthread_t thread;
    uint64_t rng;
    int64_t *sold_per_key;       /* items * locations */
    samples lat_reserve, lat_claim;
    char (*abandoned)[48];       /* tokens left to expire */
    size_t n_abandoned, cap_abandoned;
    int failed_connect;
} buyer;

static size_t key_index(const config *c, uint64_t item, uint64_t loc)
{
    return (size_t)(item - 1) * (size_t)c->locations + (size_t)(loc - 1);
}

static void report_error(int id, const char *what, int rc, rsv_ctx *ctx)
{
    long long n = atomic_fetch_add(&S.errors, 1);
    if (n < 5)
        fprintf(stderr, "\nbuyer %d: %s: %s: %s\n", id, what,
                rsv_code_name(rc), rsv_errmsg(ctx));
}

static void remember_abandoned(buyer *b, const char *token)
{
    if (b->n_abandoned == b->cap_abandoned) {
        size_t cap = b->cap_abandoned ? b->cap_abandoned * 2 : 64;
        char (*p)[48] = realloc(b->abandoned, cap * sizeof *p);
        if (!p)
            return;
        b->abandoned = p;
        b->cap_abandoned = cap;
    }
    snprintf(b->abandoned[b->n_abandoned++], 48, "%s", token);
}

static void *buyer_main(void *arg)
{
    buyer *b = arg;
    const config *c = b->cfg;
    mysql_thread_init();
    MYSQL *m;
    rsv_ctx *ctx = ctx_open(c, &m, c->ttl_ms);
    rsv_cart *cart = NULL;
    if (!ctx || rsv_cart_new(&cart) != RSV_OK) {
        b->failed_connect = 1;
        atomic_store(&S.stop, 1);
        goto out;
    }
    uint64_t *items = calloc((size_t)c->max_lines, sizeof *items);
    /* Each line is held at up to all its locations. */
    const size_t max_held = (size_t)c->max_lines * (size_t)c->locations;
    held_unit *held = calloc(max_held, sizeof *held);
    uint64_t locs[RSV_LINE_MAX_LOCATIONS];
    /* Every buyer lives near one location and prefers it. */
    int home = b->id % c->locations;
    unsigned int seq = 0;

    while (!atomic_load(&S.stop) && items && held) {
        sleep_ms(rnd01(&b->rng) * c->think_ms); /* browsing */
        if (atomic_load(&S.stop))
            break;

        /* A cart of 1..max_lines distinct items. */
        rsv_cart_clear(cart);
        int nlines = 1 + rnd_int(&b->rng, c->max_lines);
        for (int l = 0; l < nlines; l++) {
            uint64_t item;
            int dup;
            do {
                item = 1 + (uint64_t)rnd_int(&b->rng, c->items);
                dup = 0;
                for (int k = 0; k < l; k++)
                    dup |= items[k] == item;
            } while (dup);
            items[l] = item;
            /* Mostly one unit; sometimes a few. */
            int64_t qty = rnd01(&b->rng) < 0.6
                              ? 1 : 1 + rnd_int(&b->rng, c->max_qty);
            /* The home location first, then the others as fallback (some
             * buyers only accept their home location). */
            int nloc = 1 + rnd_int(&b->rng, c->locations);
            for (int i = 0; i < nloc; i++)
                locs[i] = 1 + (uint64_t)((home + i) % c->locations);
            uint32_t flags = rnd01(&b->rng) < 0.5 ? RSV_LINE_SPLIT : 0;
            int rc = rsv_cart_add(cart, item, locs, (size_t)nloc, qty, flags);
            if (rc != RSV_OK)
                report_error(b->id, "rsv_cart_add", rc, ctx);
        }

        char token[48];
        snprintf(token, sizeof token, "sale-%s-b%03d-%07u", run_id, b->id,
                 seq++);
        atomic_fetch_add(&S.attempts, 1);
        double t0 = now_s();
        int rc = rsv_reserve(ctx, c->sale_shop, TOK(token), cart, 0);
        sample_add(&b->lat_reserve, now_s() - t0);
        if (rc == RSV_EOUTOFSTOCK) {
            atomic_fetch_add(&S.oos, 1);
            continue;
        }
        if (rc == RSV_EBUSY) {
            atomic_fetch_add(&S.busy, 1);
            continue;
        }
        if (rc != RSV_OK) {
            report_error(b->id, "rsv_reserve", rc, ctx);
            continue;
        }

        /* Where the units are held, per (item, location). */
        size_t nheld = 0;
        int64_t units = 0;
        for (size_t l = 0; l < rsv_cart_lines(cart); l++) {
            size_t n = 0;
            rsv_cart_allocation_count(cart, l, &n);
            for (size_t i = 0; i < n && nheld < max_held; i++) {
                uint64_t loc;
                int64_t qty;
                if (rsv_cart_allocation(cart, l, i, &loc, &qty) != RSV_OK)
                    continue;
                held[nheld].key = key_index(c, items[l], loc);
                held[nheld++].qty = qty;
                units += qty;
            }
        }
        atomic_fetch_add(&S.reserved, 1);
        atomic_fetch_add(&S.units_reserved, units);

        /* The buyer pays... */
        double fate = rnd01(&b->rng);
        if (fate < c->abandon_rate) {
            /* ...or closes the tab: the hold expires. */
            atomic_fetch_add(&S.abandoned, 1);
            atomic_fetch_add(&S.units_abandoned, units);
            remember_abandoned(b, token);
            continue;
        }
        sleep_ms(rnd01(&b->rng) * c->pay_ms);
        if (fate < c->abandon_rate + c->fail_rate) {
            rc = rsv_release(ctx, c->sale_shop, TOK(token));
            if (rc == RSV_OK) {
                atomic_fetch_add(&S.released, 1);
                atomic_fetch_add(&S.units_released, units);
            } else {
                report_error(b->id, "rsv_release", rc, ctx);
            }
            continue;
        }
        t0 = now_s();
        rc = rsv_claim(ctx, c->sale_shop, TOK(token));
        if (rc == RSV_EINDOUBT) /* repeat the same call: it is idempotent */
            rc = rsv_claim(ctx, c->sale_shop, TOK(token));
        sample_add(&b->lat_claim, now_s() - t0);
        if (rc == RSV_OK) {
            atomic_fetch_add(&S.sold, 1);
            atomic_fetch_add(&S.units_sold, units);
            for (size_t i = 0; i < nheld; i++)
                b->sold_per_key[held[i].key] += held[i].qty;
        } else if (rc == RSV_EEXPIRED) {
            atomic_fetch_add(&S.late, 1); /* paid after the hold was gone */
        } else if (rc == RSV_EBUSY) {
            atomic_fetch_add(&S.busy, 1);
            rsv_release(ctx, c->sale_shop, TOK(token));
        } else {
            report_error(b->id, "rsv_claim", rc, ctx);
        }
    }
    free(items);
    free(held);
out:
    rsv_cart_free(cart);
    ctx_close(c, ctx, m);
    mysql_thread_end();
    return NULL;
}

typedef struct sweeper {
    const config *cfg;
    pthread_t thread;
    int failed;
} sweeper;

/* Gives back expired holds every 250 ms and tops the pools up every
 * second, as an operator's cron job or a background worker would. */
static void *sweeper_main(void *arg)
{
    sweeper *sw = arg;
    const config *c = sw->cfg;
    mysql_thread_init();
    MYSQL *m;
    rsv_ctx *ctx = ctx_open(c, &m, 0);
    if (!ctx) {
        sw->failed = 1;
        goto out;
    }
    for (unsigned int round = 0; !atomic_load(&S.stop); round++) {
        int64_t released = 0;
        int rc = rsv_sweep(ctx, c->sale_shop, 0, &released);
        if (rc == RSV_OK) {
            atomic_fetch_add(&S.sweeps, 1);
            atomic_fetch_add(&S.swept_holds, released);
        } else if (rc != RSV_EBUSY) {
            report_error(-1, "rsv_sweep", rc, ctx);
        }
        if (round % 4 == 3) {
            for (int it = 1; it <= c->items; it++)
                for (int lo = 1; lo <= c->locations; lo++) {
                    int64_t added = 0;
                    rc = rsv_replenish(ctx, c->sale_shop, (uint64_t)it,
                                       (uint64_t)lo, &added);
                    if (rc == RSV_OK)
                        atomic_fetch_add(&S.replenish_rows, added);
                    else if (rc != RSV_EBUSY)
                        report_error(-1, "rsv_replenish", rc, ctx);
                }
        }
        for (int i = 0; i < 5 && !atomic_load(&S.stop); i++)
            sleep_ms(50);
    }
out:
    ctx_close(c, ctx, m);
    mysql_thread_end();
    return NULL;
}

/* Sum of the stock numbers of the sale; returns RSV_OK or a code. */
static int sale_totals(rsv_ctx *ctx, const config *c, int64_t *on_hand,
                       int64_t *held, int64_t *pooled, int64_t *per_key)
{
    *on_hand = *held = *pooled = 0;
    for (int it = 1; it <= c->items; it++)
        for (int lo = 1; lo <= c->locations; lo++) {
            int64_t oh, h, p;
            int rc = rsv_stock_get(ctx, c->sale_shop, (uint64_t)it,
                                   (uint64_t)lo, &oh, &h, &p, NULL);
            if (rc != RSV_OK)
                return rc;
            *on_hand += oh;
            *held += h;
            *pooled += p;
            if (per_key)
                per_key[key_index(c, (uint64_t)it, (uint64_t)lo)] = oh;
        }
    return RSV_OK;
}

static int64_t query_i64(MYSQL *m, const char *sql)
{
    int64_t v = -1;
    if (mysql_query(m, sql) != 0)
        return -1;
    MYSQL_RES *r = mysql_store_result(m);
    if (!r)
        return -1;
    MYSQL_ROW row = mysql_fetch_row(r);
    if (row && row[0])
        v = strtoll(row[0], NULL, 10);
    mysql_free_result(r);
    return v;
}

static void merge(samples *into, const samples *from)
{
    for (size_t i = 0; i < from->n; i++) {
        if (into->n == into->cap) {
            size_t cap = into->cap ? into->cap * 2 : 1024;
            uint32_t *v = realloc(into->v, cap * sizeof *v);
            if (!v)
                return;
            into->v = v;
            into->cap = cap;
        }
        into->v[into->n++] = from->v[i];
    }
}

static void progress(double elapsed, int64_t on_hand, int64_t held,
                     int64_t total)
{
    long long att = atomic_load(&S.attempts);
    /* About 100 columns, so \r can rewrite it in place; the trailing
     * blanks cover a previous, longer line. */
    fprintf(stderr,
            "\r[%4.1fs] %lld checkouts (%.0f/s) sold %lld failed %lld "
            "abandoned %lld OOS %lld | stock %lld/%lld held %lld    ",
            elapsed, att, elapsed > 0 ? (double)att / elapsed : 0.0,
            (long long)atomic_load(&S.sold),
            (long long)atomic_load(&S.released),
            (long long)atomic_load(&S.abandoned),
            (long long)atomic_load(&S.oos), (long long)on_hand,
            (long long)total, (long long)held);
    fflush(stderr);
}

static int flash_sale(const config *c)
{
    int failed = 0;
    const size_t nkeys = (size_t)c->items * (size_t)c->locations;
    const int64_t total = c->stock * (int64_t)nkeys;
    MYSQL *m;
    rsv_ctx *ctx = ctx_open(c, &m, c->ttl_ms);
    if (!ctx)
        return 1;

    printf("== Part 2: a flash sale (shop %" PRIu64 ") ==\n\n", c->sale_shop);
    printf("%d items x %d locations, %" PRId64 " units each (%" PRId64
           " units), pool cap %" PRId64 " rows\n", c->items, c->locations,
           c->stock, total, c->pool_cap);
    printf("%d buyers, carts of 1..%d lines of 1..%d units; payments: %.0f%% "
           "fail, %.0f%% abandoned\n(holds expire after %" PRId64
           " ms); up to %.1f s\n\n", c->buyers, c->max_lines, c->max_qty,
           c->fail_rate * 100, c->abandon_rate * 100, c->ttl_ms,
           c->duration_s);

    int64_t *initial = calloc(nkeys, sizeof *initial);
    int64_t *final = calloc(nkeys, sizeof *final);
    int64_t *sold = calloc(nkeys, sizeof *sold);
    buyer *buyers = calloc((size_t)c->buyers, sizeof *buyers);
    if (!initial || !final || !sold || !buyers) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (int it = 1; it <= c->items; it++)
        for (int lo = 1; lo <= c->locations; lo++) {
            int rc = rsv_stock_set(ctx, c->sale_shop, (uint64_t)it,
                                   (uint64_t)lo, c->stock);
            if (rc != RSV_OK) {
                fprintf(stderr, "rsv_stock_set: %s: %s\n", rsv_code_name(rc),
                        rsv_errmsg(ctx));
                return 1;
            }
        }
    int64_t oh0, h0, p0;
    if (sale_totals(ctx, c, &oh0, &h0, &p0, initial) != RSV_OK) {
        fprintf(stderr, "rsv_stock_get: %s\n", rsv_errmsg(ctx));
        return 1;
    }

    memset(&S, 0, sizeof S);
    atomic_store(&S.stop, 0);
    sweeper sw = {c, 0, 0};
    double start = now_s();
    int started = 0;
    for (int i = 0; i < c->buyers; i++) {
        buyers[i].id = i;
        buyers[i].cfg = c;
        buyers[i].rng = (c->seed + 1) * 0x9E3779B97F4A7C15ULL + (uint64_t)i * 7919 + 1;
        buyers[i].sold_per_key = calloc(nkeys, sizeof(int64_t));
        if (!buyers[i].sold_per_key ||
            pthread_create(&buyers[i].thread, NULL, buyer_main, &buyers[i])) {
            fprintf(stderr, "cannot start buyer %d\n", i);
            atomic_store(&S.stop, 1);
            failed = 1;
            break;
        }
        started++;
    }
    int sweeper_started = pthread_create(&sw.thread, NULL, sweeper_main, &sw) == 0;

    double sold_out_at = 0;
    while (!atomic_load(&S.stop)) {
        sleep_ms(500);
        double el = now_s() - start;
        int64_t oh, h, p;
        if (sale_totals(ctx, c, &oh, &h, &p, NULL) == RSV_OK) {
            if (c->progress)
                progress(el, oh, h, total);
            if (oh == 0 && total > 0) {
                sold_out_at = el;
                break;
            }
        }
        if (el >= c->duration_s)
            break;
    }
    atomic_store(&S.stop, 1);
    for (int i = 0; i < started; i++)
        pthread_join(buyers[i].thread, NULL);
    if (sweeper_started)
        pthread_join(sw.thread, NULL);
    double elapsed = now_s() - start;
    if (c->progress)
        fprintf(stderr, "\n");
    for (int i = 0; i < started; i++)
        if (buyers[i].failed_connect)
            failed = 1;
    if (!sweeper_started || sw.failed)
        failed = 1;

    /* Abandoned holds: wait for their deadline, then sweep them back. */
    int64_t oh, held, pooled;
    int64_t final_swept = 0;
    if (sale_totals(ctx, c, &oh, &held, &pooled, NULL) == RSV_OK && held > 0) {
        printf("waiting %" PRId64 " ms for %" PRId64 " units of abandoned "
               "holds to expire...\n", c->ttl_ms + 100, held);
        sleep_ms((double)c->ttl_ms + 100);
    }
    for (int i = 0; i < 10; i++) {
        int64_t n = 0;
        int rc = rsv_sweep(ctx, c->sale_shop, 0, &n);
        if (rc != RSV_OK) {
            fprintf(stderr, "rsv_sweep: %s: %s\n", rsv_code_name(rc),
                    rsv_errmsg(ctx));
            failed = 1;
            break;
        }
        final_swept += n;
        if (n == 0)
            break;
    }
    atomic_fetch_add(&S.swept_holds, final_swept);

    /* Every abandoned checkout must now read as expired, holding nothing. */
    long long not_expired = 0, abandoned_checked = 0;
    for (int i = 0; i < started; i++)
        for (size_t k = 0; k < buyers[i].n_abandoned; k++) {
            int32_t st = 0;
            int64_t units = -1;
            const char *t = buyers[i].abandoned[k];
            int rc = rsv_checkout_status(ctx, c->sale_shop, TOK(t), &st,
                                         &units, NULL);
            abandoned_checked++;
            if (rc != RSV_OK || st != RSV_STATUS_EXPIRED || units != 0) {
                if (not_expired++ < 5)
                    fprintf(stderr, "abandoned checkout %s: %s, status %d, "
                                    "units %" PRId64 "\n", t,
                            rsv_code_name(rc), (int)st, units);
            }
        }

    /* Final numbers. */
    int rc = sale_totals(ctx, c, &oh, &held, &pooled, final);
    if (rc != RSV_OK) {
        fprintf(stderr, "rsv_stock_get: %s\n", rsv_errmsg(ctx));
        return 1;
    }
    samples lr = {0}, lc = {0};
    for (int i = 0; i < started; i++) {
        merge(&lr, &buyers[i].lat_reserve);
        merge(&lc, &buyers[i].lat_claim);
        for (size_t k = 0; k < nkeys; k++)
            sold[k] += buyers[i].sold_per_key[k];
    }
    qsort(lr.v, lr.n, sizeof *lr.v, cmp_u32);
    qsort(lc.v, lc.n, sizeof *lc.v, cmp_u32);

    int64_t initial_sum = 0, final_sum = 0, sold_sum = 0, key_mismatch = 0;
    for (size_t k = 0; k < nkeys; k++) {
        initial_sum += initial[k];
        final_sum += final[k];
        sold_sum += sold[k];
        if (initial[k] - final[k] != sold[k]) {
            if (key_mismatch++ < 5)
                printf("MISMATCH item %zu location %zu: initial %" PRId64
                       " - final %" PRId64 " != sold %" PRId64 "\n",
                       k / (size_t)c->locations + 1,
                       k % (size_t)c->locations + 1, initial[k], final[k],
                       sold[k]);
        }
    }

    /* Pool rows ever minted = sum of (next_unit_id - 1): every refill,
     * inline or by rsv_replenish, mints fresh ids. */
    char q[256];
    snprintf(q, sizeof q,
             "SELECT CAST(COALESCE(SUM(next_unit_id - 1), 0) AS SIGNED) FROM "
             "rsv_ledger WHERE shop_id = %" PRIu64, c->sale_shop);
    int64_t minted = query_i64(m, q);

    int64_t violations = -1;
    int shown = 0;
    int arc = rsv_audit(ctx, c->sale_shop, 0, audit_print, &shown,
                        &violations);
    if (arc != RSV_OK)
        fprintf(stderr, "rsv_audit: %s: %s\n", rsv_code_name(arc),
                rsv_errmsg(ctx));

    long long att = atomic_load(&S.attempts);
    printf("\n== Flash sale summary ==\n");
    printf("ran                 %.1f s", elapsed);
    if (sold_out_at > 0)
        printf(" (sold out after %.1f s)", sold_out_at);
    printf(", %lld checkouts attempted (%.0f/s)\n", att,
           elapsed > 0 ? (double)att / elapsed : 0.0);
    printf("reserved            %lld checkouts, %lld units\n",
           (long long)atomic_load(&S.reserved),
           (long long)atomic_load(&S.units_reserved));
    printf("sold (claimed)      %lld checkouts, %lld units\n",
           (long long)atomic_load(&S.sold),
           (long long)atomic_load(&S.units_sold));
    printf("released (failed)   %lld checkouts, %lld units\n",
           (long long)atomic_load(&S.released),
           (long long)atomic_load(&S.units_released));
    printf("expired (abandoned) %lld checkouts, %lld units; %lld/%lld read "
           "EXPIRED afterwards\n", (long long)atomic_load(&S.abandoned),
           (long long)atomic_load(&S.units_abandoned),
           abandoned_checked - not_expired, abandoned_checked);
    printf("                    holds given back by rsv_sweep: %lld (the "
           "rest by pool refills)\n", (long long)atomic_load(&S.swept_holds));
    printf("paid too late       %lld (claim answered RSV_EEXPIRED)\n",
           (long long)atomic_load(&S.late));
    printf("out of stock        %lld answers\n",
           (long long)atomic_load(&S.oos));
    printf("busy / errors       %lld / %lld\n", (long long)atomic_load(&S.busy),
           (long long)atomic_load(&S.errors));
    printf("refills             %" PRId64 " pool rows minted in all (cap %"
           PRId64 " per item and location),\n                    %lld of them "
           "by the sweeper's rsv_replenish\n", minted, c->pool_cap,
           (long long)atomic_load(&S.replenish_rows));
    printf("latency reserve     p50 %.2f ms  p99 %.2f ms  max %.2f ms  (%zu "
           "calls)\n", percentile_ms(&lr, 0.50), percentile_ms(&lr, 0.99),
           lr.n ? lr.v[lr.n - 1] / 1000.0 : 0.0, lr.n);
    printf("latency claim       p50 %.2f ms  p99 %.2f ms  max %.2f ms  (%zu "
           "calls)\n", percentile_ms(&lc, 0.50), percentile_ms(&lc, 0.99),
           lc.n ? lc.v[lc.n - 1] / 1000.0 : 0.0, lc.n);
    printf("final stock         on hand %" PRId64 ", held %" PRId64
           ", pool rows %" PRId64 "\n", oh, held, pooled);

    int stock_ok = key_mismatch == 0 && initial_sum - final_sum == sold_sum &&
                   sold_sum == (int64_t)atomic_load(&S.units_sold);
    printf("sold-count check    initial %" PRId64 " - final on hand %" PRId64
           " = %" PRId64 ", sold %" PRId64 ": %s\n", initial_sum, final_sum,
           initial_sum - final_sum, sold_sum, stock_ok ? "OK" : "FAILED");
    int audit_ok = arc == RSV_OK && violations == 0;
    printf("audit               %" PRId64 " violation(s): %s\n", violations,
           audit_ok ? "OK" : "FAILED");
    int expiry_ok = not_expired == 0 && held == 0;
    if (!expiry_ok)
        printf("expiry check        FAILED (%lld abandoned checkouts not "
               "expired, %" PRId64 " units still held)\n", not_expired, held);
    if (atomic_load(&S.errors))
        printf("unexpected errors   %lld (first ones on stderr): FAILED\n",
               (long long)atomic_load(&S.errors));
    if (!stock_ok || !audit_ok || !expiry_ok || atomic_load(&S.errors))
        failed = 1;

    for (int i = 0; i < c->buyers; i++) {
        free(buyers[i].sold_per_key);
        free(buyers[i].lat_reserve.v);
        free(buyers[i].lat_claim.v);
        free(buyers[i].abandoned);
    }
    free(buyers);
    free(lr.v);
    free(lc.v);
    free(initial);
    free(final);
    free(sold);
    ctx_close(c, ctx, m);
    return failed;
}

int main(int argc, char **argv)
{
    config c;
    int rc = parse_args(&c, argc, argv);
    if (rc == 1)
        return 0;
    if (rc)
        return 2;
    /* Line-buffered, so the story and the progress line (stderr) stay in
     * order when both go to one pipe. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    snprintf(run_id, sizeof run_id, "%lx",
             (unsigned long)(time(NULL) ^ ((long)getpid() << 16)) & 0xffffffUL);
    if (strcmp(rsv_version(), RSV_VERSION) != 0)
        fprintf(stderr, "warning: built against libreserve %s, running "
                        "with %s\n", RSV_VERSION, rsv_version());
    if (mysql_library_init(0, NULL, NULL) != 0) {
        fprintf(stderr, "mysql_library_init failed\n");
        return 1;
    }
    int failed = 0;
    if (c.walkthrough)
        failed |= walkthrough(&c);
    if (c.sale)
        failed |= flash_sale(&c);
    mysql_library_end();
    printf("\n%s\n", failed ? "demo: FAILED" : "demo: all checks passed");
    return failed ? 1 : 0;
}
