/*
 * rsv-admin - the operator's command-line tool for libreserve.
 *
 * Reads and changes the stock of a shop through the library (so every
 * change takes the same locks and keeps the same invariants as the
 * checkouts running next to it), runs the audit, gives back expired holds
 * (the sweeper: one shop or every shop), tops pools up, settles a stuck
 * checkout by hand and prints the figures an operator graphs (text, JSON
 * or the Prometheus text format).  It also reports, installs and upgrades
 * the database schema (schema status | install | upgrade), without the
 * library's context: rsv_open refuses exactly the databases those commands
 * are for.  Human-readable output by default, one JSON document on stdout
 * with --json.  See `rsv-admin --help` and
 * rsv-admin(1) for the commands and the exit codes.
 *
 * This file: the command line, the connection, and the commands on
 * stock, checkouts, the audit and the schema; sweep, stats,
 * connections and migrate have files of their own, and what every command shares
 * (output, codes, arguments) is common.c's (admin.h).
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <reserve.h>

#include "admin.h"
#include "sqlscript.h"

/* The schema file install and upgrade load by default: mk/admin.mk names
 * the in-tree sql/schema.sql for the tool built in the tree (it runs with
 * the tree's library, which that file matches) and the installed copy
 * for the tool make install puts in BINDIR. */
#ifndef RSV_ADMIN_SCHEMA
#define RSV_ADMIN_SCHEMA RSV_DATADIR "/libreserve/schema.sql"
#endif

static void usage(FILE *f)
{
    fprintf(f,
"usage: %s [options] COMMAND [ARGS]\n"
"\n"
"Commands:\n"
"  stock SHOP ITEM LOCATION          stock on hand, held, pooled, available\n"
"  levels SHOP                       every item and location of a shop:\n"
"                                    stock, holds and pool depth\n"
"  stats SHOP | stats --all          per item and location: on hand, held,\n"
"                                    pooled, expired holds not given back,\n"
"                                    journal backlog, buyers waiting for\n"
"                                    the ledger row; per shop: sweep lag,\n"
"                                    journal and pool rows, checkouts by\n"
"                                    state (--by-shop: only those; --json,\n"
"                                    --prometheus, --metrics-file)\n"
"  audit SHOP | audit --all          check the invariants (exit 1 if any\n"
"                                    is violated)\n"
"  sweep SHOP | sweep --all          give back expired holds (up to N per\n"
"                                    shop with --max N), fold the journal,\n"
"                                    drain idle pools, purge old checkouts;\n"
"                                    prints what it did (--metrics-file:\n"
"                                    also the run's figures for Prometheus)\n"
"  replenish SHOP ITEM LOCATION      top the pool up from the ledger\n"
"  drain SHOP ITEM LOCATION          give the pool back to the ledger (a\n"
"                                    sale is over)\n"
"  set-stock SHOP ITEM LOCATION N    set the stock on hand to N\n"
"  adjust-stock SHOP ITEM LOCATION D add D (may be negative) to the stock\n"
"  checkout SHOP TOKEN               the state of a checkout\n"
"  release SHOP TOKEN                give a stuck checkout's units back\n"
"  claim SHOP TOKEN                  settle a paid checkout by hand\n"
"                                    (checkout, release, claim: --hex for\n"
"                                    a hexadecimal TOKEN)\n"
"  schema status                     the database's schema version, the one\n"
"                                    the library needs, its procedures, and\n"
"                                    a state: ok, upgrade-needed,\n"
"                                    library-too-old, not-installed,\n"
"                                    no-procedures (exit 1 unless ok)\n"
"  schema install | schema upgrade   load the schema file (--schema FILE;\n"
"                                    default %s)\n"
"  migrate show [SHOP,...]           each shop's migration stage, since when,\n"
"                                    why, and what the handles counted\n"
"                                    (--json, --prometheus)\n"
"  migrate set STAGE SHOP[,SHOP...]  move shops to old, shadow, primary or\n"
"                                    complete (--reason TEXT; to primary:\n"
"                                    --max-ttl S, the old store's longest\n"
"                                    hold); unsafe steps are refused\n"
"  migrate percent P                 P%% of the shops at shadow or beyond, in\n"
"                                    a fixed order (raising keeps every shop\n"
"                                    in, lowering removes the newest)\n"
"  migrate mismatches [SHOP]         recent calls where the stores disagreed\n"
"  migrate compare --csv FILE | --query SQL | --redis HOST:PORT --pattern P\n"
"                                    libreserve's available units per key\n"
"                                    against the old store's (P like\n"
"                                    stock:{shop}:{item}:{location}); keys\n"
"                                    that differ are checked again --settle S\n"
"                                    later, once the queues have passed them;\n"
"                                    exit 1 on drift (--json, --rate)\n"
"  migrate compared SHOP[,SHOP...]   the shops' stock was compared and mended:\n"
"                                    clear their needs-compare mark\n"
"  import --csv FILE | --query SQL   load stock levels (shop, item, location,\n"
"                                    on hand) from the store sold through\n"
"                                    before: checked whole first, then in\n"
"                                    chunks (--chunk N, --rate ROWS/S) with\n"
"                                    progress; resumes where it stopped\n"
"  connections                       the server's sessions by statement tag:\n"
"                                    running, waiting for a lock, idle in a\n"
"                                    transaction, idle; the oldest open\n"
"                                    transactions; who blocks whom (--json,\n"
"                                    --prometheus, --metrics-file,\n"
"                                    --tag-prefix P: tags /* Pname */)\n"
"\n"
"Options:\n"
"  -S, --socket PATH    Unix socket of the server\n"
"  -h, --host HOST      server host (TCP; \"localhost\" means the socket)\n"
"  -P, --port N         server port (TCP)\n"
"  -u, --user NAME      user name\n"
"  -pPASSWORD           password, attached to -p (a lone -p is refused:\n"
"                       rsv-admin never prompts)\n"
"  --password PW        password (default: $RSV_ADMIN_PASSWORD)\n"
"  -D, --database NAME  the database holding the libreserve schema\n"
"                       (default: $RSV_ADMIN_DATABASE)\n"
"  --no-defaults        do not read the [client] and [rsv-admin] groups of\n"
"                       the MariaDB option files\n"
"  --defaults-file FILE read those groups from FILE only (the sweeper\n"
"                       service's /etc/rsv-admin/NAME.cnf)\n"
"  --json               print one JSON object on stdout\n"
"  --prometheus         stats, connections, migrate show: the Prometheus\n"
"                       text format\n"
"  --metrics-file FILE  sweep, stats, connections: write the Prometheus\n"
"                       text to FILE (replaced whole: node_exporter's\n"
"                       textfile collector reads it)\n"
"  --all, --max N, --hex  see the commands\n"
"  --schema FILE        schema install and upgrade: the file to load\n"
"  --csv FILE, --query SQL, --chunk N, --rate ROWS  see import\n"
"  --redis HOST:PORT, --pattern P, --settle S  see migrate compare\n"
"  --reason TEXT        migrate set and percent: why (kept with the stage)\n"
"  --max-ttl SECONDS    migrate set primary: the longest hold the old store\n"
"                       gives (default: 600, or longer holds seen)\n"
"  --help, --version\n"
"  --                   end of options (for a TOKEN that starts with -)\n"
"\n"
"Exit status:\n"
"  0  success (audit: no violation; schema status: ok)\n"
"  1  the audit found violations, or the item, location, checkout or\n"
"     shop does not exist; schema status: anything but ok\n"
"  2  usage error: unknown command or option, bad argument value\n"
"  3  connection, server or library error (message on stderr), including\n"
"     a refused stock change (RSV_ESTOCK) and a shop that sweep --all\n"
"     could not sweep\n"
"  4  release or claim refused by the checkout's state (claimed,\n"
"     released, expired); schema install or upgrade refused by the\n"
"     database's (installed already, nothing installed, newer); a\n"
"     migration step refused as unsafe\n"
"\n"
"A sweeper is required: run 'rsv-admin sweep --all' every 10 to 60 s\n"
"(cron, a systemd timer).  See rsv-admin(1).\n", prog, RSV_ADMIN_SCHEMA);
}

/* ---------------- output helpers ---------------- */

/* ---------------- argument parsing ---------------- */

/* The options that take a value, with the letter the mariadb client uses
 * for the same option (0: no short form). */
static const struct value_opt {
    const char *name;
    char letter;
} value_opts[] = {
    {"--socket", 'S'}, {"--host", 'h'}, {"--port", 'P'},
    {"--user", 'u'}, {"--password", 'p'}, {"--database", 'D'},
    {"--max", 0}, {"--schema", 0}, {"--defaults-file", 0},
    {"--metrics-file", 0}, {"--tag-prefix", 0},
    {"--reason", 0}, {"--max-ttl", 0},
    {"--csv", 0}, {"--query", 0}, {"--chunk", 0}, {"--rate", 0},
    {"--redis", 0}, {"--pattern", 0}, {"--settle", 0},
};

#define N_VALUE_OPTS (sizeof value_opts / sizeof value_opts[0])

/* Store the value of the option `name` (a long name from value_opts).
 * Returns -1 to go on, or an exit status. */
static int set_value(opts *o, const char *name, const char *v)
{
    if (strcmp(name, "--socket") == 0)
        o->socket = v;
    else if (strcmp(name, "--host") == 0)
        o->host = v;
    else if (strcmp(name, "--user") == 0)
        o->user = v;
    else if (strcmp(name, "--password") == 0)
        o->password = v;
    else if (strcmp(name, "--database") == 0)
        o->database = v;
    else if (strcmp(name, "--schema") == 0)
        o->schema = v;
    else if (strcmp(name, "--defaults-file") == 0)
        o->defaults_file = v;
    else if (strcmp(name, "--metrics-file") == 0)
        o->metrics_file = v;
    else if (strcmp(name, "--tag-prefix") == 0) {
        /* the characters rsv_options.conn_tag_prefix allows */
        if (!*v || strlen(v) > 32 ||
            v[strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                        "0123456789_:.-")])
            return usage_fail("bad --tag-prefix (at most 32 characters of "
                              "[A-Za-z0-9_:.-])", v);
        o->tag_prefix = v;
    } else if (strcmp(name, "--reason") == 0) {
        if (strlen(v) > 255)
            return usage_fail("--reason is longer than 255 bytes", NULL);
        o->reason = v;
    } else if (strcmp(name, "--max-ttl") == 0) {
        if (parse_i64(v, &o->max_ttl_s) || o->max_ttl_s < 0)
            return usage_fail("bad --max-ttl (seconds)", v);
    } else if (strcmp(name, "--redis") == 0) {
        if (!strchr(v, ':'))
            return usage_fail("--redis takes HOST:PORT", v);
        o->redis = v;
    } else if (strcmp(name, "--pattern") == 0) {
        o->pattern = v;
    } else if (strcmp(name, "--settle") == 0) {
        if (parse_i64(v, &o->settle_s) || o->settle_s < 0 ||
            o->settle_s > 3600)
            return usage_fail("bad --settle (seconds, 0 to 3600)", v);
    } else if (strcmp(name, "--csv") == 0) {
        o->csv = v;
    } else if (strcmp(name, "--query") == 0) {
        o->query = v;
    } else if (strcmp(name, "--chunk") == 0) {
        if (parse_i64(v, &o->chunk) || o->chunk < 1 || o->chunk > 10000)
            return usage_fail("bad --chunk (1 to 10000 rows)", v);
    } else if (strcmp(name, "--rate") == 0) {
        if (parse_i64(v, &o->rate) || o->rate < 1)
            return usage_fail("bad --rate (rows per second, at least 1)", v);
    } else if (strcmp(name, "--port") == 0) {
        uint64_t p;
        if (parse_u64(v, &p) || p < 1 || p > 65535)
            return usage_fail("bad port", v);
        o->port = (unsigned int)p;
    } else {
        if (parse_i64(v, &o->max) || o->max < 0)
            return usage_fail("bad --max value", v);
        o->have_max = 1;
    }
    return -1;
}

/* Returns -1 to go on, or an exit status. */
static int parse_args(opts *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    o->max_ttl_s = -1;
    o->settle_s = -1;
    o->password = getenv("RSV_ADMIN_PASSWORD");
    o->database = getenv("RSV_ADMIN_DATABASE");
    int only_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_pos && strcmp(a, "--") == 0) {
            only_pos = 1;
            continue;
        }
        /* Short options: '-' and an ASCII letter, value attached (-uroot)
         * or in the next argument (-u root), as the mariadb client takes
         * them.  Anything else that starts with '-' (a negative delta of
         * adjust-stock, "-") stays an argument; a TOKEN that starts with
         * "-" and a letter needs "--" before it. */
        if (!only_pos && a[0] == '-' &&
            ((a[1] >= 'a' && a[1] <= 'z') || (a[1] >= 'A' && a[1] <= 'Z'))) {
            const char *name = NULL;
            for (size_t k = 0; k < N_VALUE_OPTS; k++)
                if (value_opts[k].letter == a[1])
                    name = value_opts[k].name;
            if (!name)
                return usage_fail("unknown option", a);
            const char *v;
            if (a[2])
                v = a + 2;
            else if (a[1] == 'p')
                /* The mariadb client prompts after a lone -p; a tool run
                 * from cron must never wait for a terminal. */
                return usage_fail("-p takes the password attached "
                                  "(-pSECRET); rsv-admin never prompts: "
                                  "use -pSECRET, --password, "
                                  "RSV_ADMIN_PASSWORD or an option file",
                                  NULL);
            else if (i + 1 < argc)
                v = argv[++i];
            else if (a[1] == 'h')
                return usage_fail("a value is missing for '-h' (the host, "
                                  "as in mariadb; help is --help)", NULL);
            else
                return usage_fail("a value is missing for", a);
            int st = set_value(o, name, v);
            if (st >= 0)
                return st;
            continue;
        }
        if (only_pos || strncmp(a, "--", 2) != 0) {
            if (o->npos == (int)(sizeof o->pos / sizeof o->pos[0]))
                return usage_fail("too many arguments", a);
            o->pos[o->npos++] = a;
            continue;
        }
        if (strcmp(a, "--help") == 0) {
            usage(stdout);
            return EXIT_OKAY;
        }
        if (strcmp(a, "--version") == 0) {
            printf("rsv-admin (libreserve %s)\n", rsv_version());
            return EXIT_OKAY;
        }
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
            continue;
        }
        if (strcmp(a, "--prometheus") == 0) {
            o->prometheus = 1;
            continue;
        }
        if (strcmp(a, "--all") == 0) {
            o->all = 1;
            continue;
        }
        if (strcmp(a, "--hex") == 0) {
            o->hex = 1;
            continue;
        }
        if (strcmp(a, "--by-shop") == 0) {
            o->by_shop = 1;
            continue;
        }
        if (strcmp(a, "--no-defaults") == 0) {
            o->no_defaults = 1;
            continue;
        }
        /* options with a value: --opt VALUE or --opt=VALUE */
        char name[32];
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        if (len >= sizeof name)
            return usage_fail("unknown option", a);
        memcpy(name, a, len);
        name[len] = '\0';
        int known = 0;
        for (size_t k = 0; k < N_VALUE_OPTS; k++)
            if (strcmp(name, value_opts[k].name) == 0)
                known = 1;
        if (!known)
            return usage_fail("unknown option", name);
        const char *v;
        if (eq)
            v = eq + 1;
        else if (i + 1 < argc)
            v = argv[++i];
        else
            return usage_fail("a value is missing for", name);
        int st = set_value(o, name, v);
        if (st >= 0)
            return st;
    }
    return -1;
}

/* ---------------- connection ---------------- */

/* Connect, and open a library context on the connection unless out_ctx
 * is NULL (the schema commands work on databases rsv_open refuses). */
static int connect_db(const opts *o, MYSQL **out_conn, rsv_ctx **out_ctx)
{
    *out_conn = NULL;
    if (out_ctx)
        *out_ctx = NULL;
    MYSQL *m = mysql_init(NULL);
    if (!m) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return EXIT_ERROR;
    }
    unsigned int timeout = 10;
    mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    if (o->defaults_file) {
        /* Connector/C passes over a file it cannot read without a word:
         * a sweeper pointed at a missing file would connect as whoever
         * runs it. */
        FILE *f = fopen(o->defaults_file, "r");
        if (!f) {
            fprintf(stderr, "%s: --defaults-file: cannot read %s: %s\n",
                    prog, o->defaults_file, strerror(errno));
            mysql_close(m);
            return EXIT_ERROR;
        }
        fclose(f);
        mysql_options(m, MYSQL_READ_DEFAULT_FILE, o->defaults_file);
    }
    if (!o->no_defaults)
        mysql_options(m, MYSQL_READ_DEFAULT_GROUP, "rsv-admin");
    if (!mysql_real_connect(m, o->host, o->user, o->password, o->database,
                            o->port, o->socket, 0)) {
        fprintf(stderr, "%s: cannot connect: %s (MySQL error %u)\n", prog,
                mysql_error(m), mysql_errno(m));
        if (o->json) {
            printf("{\"error\":");
            json_error_obj(RSV_ECONN, mysql_error(m));
            printf("}\n");
        }
        mysql_close(m);
        return EXIT_ERROR;
    }
    if (!out_ctx) {
        *out_conn = m;
        return EXIT_OKAY;
    }
    rsv_ctx *ctx = NULL;
    int rc = rsv_open(&ctx, m, NULL);
    if (rc != RSV_OK) {
        (void)lib_fail(o, ctx, "rsv_open", rc);
        rsv_close(ctx);
        mysql_close(m);
        return EXIT_ERROR; /* whatever the code: the tool cannot run */
    }
    *out_conn = m;
    *out_ctx = ctx;
    return EXIT_OKAY;
}

/* ---------------- commands ---------------- */


/* Print the stock of a key (after reading it); used by stock, set-stock,
 * adjust-stock and replenish. */
static int show_stock(const cmd_env *e, const uint64_t *k, const char *verb,
                      const char *extra_json, int64_t extra)
{
    int64_t on_hand, held, pooled, avail;
    int rc = rsv_stock_get(e->ctx, k[0], k[1], k[2], &on_hand, &held,
                           &pooled, &avail);
    if (rc != RSV_OK)
        return lib_fail(e->o, e->ctx, "rsv_stock_get", rc);
    if (e->o->json) {
        putchar('{');
        print_key_json(k, 3);
        printf(",\"on_hand\":%" PRId64 ",\"held\":%" PRId64
               ",\"pooled\":%" PRId64 ",\"available\":%" PRId64,
               on_hand, held, pooled, avail);
        if (extra_json)
            printf(",\"%s\":%" PRId64, extra_json, extra);
        printf("}\n");
    } else {
        if (verb)
            printf("%s\n", verb);
        printf("shop %" PRIu64 " item %" PRIu64 " location %" PRIu64 "\n",
               k[0], k[1], k[2]);
        printf("  on hand    %" PRId64 "\n", on_hand);
        printf("  held       %" PRId64 "\n", held);
        printf("  pooled     %" PRId64 "\n", pooled);
        printf("  available  %" PRId64 "\n", avail);
    }
    return EXIT_OKAY;
}

static int cmd_stock(const cmd_env *e)
{
    uint64_t k[3];
    int st = ids(e, 3, k);
    return st ? st : show_stock(e, k, NULL, NULL, 0);
}

static int cmd_set_stock(const cmd_env *e)
{
    uint64_t k[3];
    int64_t n;
    int st = ids(e, 3, k);
    if (st)
        return st;
    if (parse_i64(e->args[3], &n))
        return usage_fail("bad stock value", e->args[3]);
    int rc = rsv_stock_set(e->ctx, k[0], k[1], k[2], n);
    if (rc != RSV_OK)
        return lib_fail(e->o, e->ctx, "rsv_stock_set", rc);
    char msg[64];
    snprintf(msg, sizeof msg, "stock on hand set to %" PRId64, n);
    return show_stock(e, k, msg, NULL, 0);
}

static int cmd_adjust_stock(const cmd_env *e)
{
    uint64_t k[3];
    int64_t d, now = 0;
    int st = ids(e, 3, k);
    if (st)
        return st;
    if (parse_i64(e->args[3], &d))
        return usage_fail("bad delta", e->args[3]);
    int rc = rsv_stock_adjust(e->ctx, k[0], k[1], k[2], d, &now);
    if (rc != RSV_OK)
        return lib_fail(e->o, e->ctx, "rsv_stock_adjust", rc);
    char msg[96];
    snprintf(msg, sizeof msg, "stock on hand adjusted by %+" PRId64
             " to %" PRId64, d, now);
    return show_stock(e, k, msg, "delta", d);
}

/* replenish and drain: one key in, a count of pool rows out */
static int pool_cmd(const cmd_env *e, int drain)
{
    uint64_t k[3];
    int64_t n = 0;
    int st = ids(e, 3, k);
    if (st)
        return st;
    int rc = drain ? rsv_pool_drain(e->ctx, k[0], k[1], k[2], &n)
                   : rsv_replenish(e->ctx, k[0], k[1], k[2], &n);
    if (rc != RSV_OK)
        return lib_fail(e->o, e->ctx, drain ? "rsv_pool_drain"
                                            : "rsv_replenish", rc);
    char msg[64];
    snprintf(msg, sizeof msg, drain ? "gave back %" PRId64 " pool row(s)"
                                    : "added %" PRId64 " pool row(s)", n);
    return show_stock(e, k, msg, drain ? "drained" : "added", n);
}

static int cmd_replenish(const cmd_env *e) { return pool_cmd(e, 0); }

static int cmd_drain(const cmd_env *e) { return pool_cmd(e, 1); }

static int cmd_levels(const cmd_env *e)
{
    uint64_t shop;
    int st = ids(e, 1, &shop);
    if (st)
        return st;
    char q[512];
    snprintf(q, sizeof q,
             "/* conn_tag:admin */ SELECT CAST(item_id AS CHAR), "
             "CAST(location_id AS CHAR), on_hand, held, "
             "on_hand - held, pooled FROM rsv_stock WHERE shop_id = %"
             PRIu64 " ORDER BY item_id, location_id", shop);
    if (sql(e, q) != 0)
        return db_fail(e->o, e->conn, "levels");
    MYSQL_RES *r = mysql_store_result(e->conn);
    if (!r)
        return db_fail(e->o, e->conn, "levels");
    static const char *cols[] = {"item_id", "location_id", "on_hand",
                                 "held", "available", "pooled"};
    unsigned long long n = mysql_num_rows(r);
    if (e->o->json)
        printf("{\"shop_id\":%" PRIu64 ",\"levels\":[", shop);
    else if (n)
        printf("%-20s %-20s %12s %10s %12s %8s\n", "ITEM", "LOCATION",
               "ON_HAND", "HELD", "AVAILABLE", "POOLED");
    MYSQL_ROW row;
    unsigned long long i = 0;
    while ((row = mysql_fetch_row(r))) {
        if (e->o->json) {
            printf("%s{", i ? "," : "");
            for (int c = 0; c < 6; c++)
                printf("%s\"%s\":%s", c ? "," : "", cols[c],
                       row[c] ? row[c] : "null");
            putchar('}');
        } else {
            printf("%-20s %-20s %12s %10s %12s %8s\n", row[0], row[1],
                   row[2], row[3], row[4], row[5]);
        }
        i++;
    }
    mysql_free_result(r);
    if (e->o->json)
        printf("]}\n");
    if (n == 0) {
        fprintf(stderr, "%s: shop %" PRIu64 " has no stock ledger rows\n",
                prog, shop);
        return EXIT_FOUND;
    }
    return EXIT_OKAY;
}

typedef struct problem {
    uint64_t shop, item, loc;
    char *text;
} problem;

typedef struct problems {
    problem *v;
    size_t n, cap;
    int oom;
} problems;

static void collect(void *arg, uint64_t shop, uint64_t item, uint64_t loc,
                    const char *text)
{
    problems *p = arg;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        problem *v = realloc(p->v, cap * sizeof *v);
        if (!v) {
            p->oom = 1;
            return;
        }
        p->v = v;
        p->cap = cap;
    }
    /* `text` is only valid during the call: keep a copy. */
    char *copy = malloc(strlen(text) + 1);
    if (!copy) {
        p->oom = 1;
        return;
    }
    strcpy(copy, text);
    p->v[p->n++] = (problem){shop, item, loc, copy};
}

static int cmd_audit(const cmd_env *e)
{
    uint64_t shop = 0;
    int st = shop_or_all(e, "audit", &shop);
    if (st)
        return st;
    problems p = {0};
    int64_t count = 0;
    int rc = rsv_audit(e->ctx, shop, e->o->all, collect, &p, &count);
    if (rc != RSV_OK) {
        for (size_t i = 0; i < p.n; i++)
            free(p.v[i].text);
        free(p.v);
        return lib_fail(e->o, e->ctx, "rsv_audit", rc);
    }
    if (e->o->json) {
        if (e->o->all)
            printf("{\"scope\":\"all\"");
        else
            printf("{\"scope\":\"shop\",\"shop_id\":%" PRIu64, shop);
        printf(",\"violations\":%" PRId64 ",\"problems\":[", count);
        for (size_t i = 0; i < p.n; i++) {
            printf("%s{\"shop_id\":%" PRIu64 ",\"item_id\":%" PRIu64
                   ",\"location_id\":%" PRIu64 ",\"problem\":",
                   i ? "," : "", p.v[i].shop, p.v[i].item, p.v[i].loc);
            json_cstr(p.v[i].text);
            putchar('}');
        }
        printf("]}\n");
    } else {
        for (size_t i = 0; i < p.n; i++)
            printf("shop %" PRIu64 " item %" PRIu64 " location %" PRIu64
                   ": %s\n", p.v[i].shop, p.v[i].item, p.v[i].loc,
                   p.v[i].text);
        if (e->o->all)
            printf("audit of every shop: %" PRId64 " violation(s)\n", count);
        else
            printf("audit of shop %" PRIu64 ": %" PRId64 " violation(s)\n",
                   shop, count);
    }
    if (p.oom)
        fprintf(stderr, "%s: out of memory: some problems not listed\n",
                prog);
    for (size_t i = 0; i < p.n; i++)
        free(p.v[i].text);
    free(p.v);
    return count > 0 ? EXIT_FOUND : EXIT_OKAY;
}

/* ---------------- checkouts ---------------- */

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

typedef struct token {
    unsigned char b[RSV_TOKEN_MAX + 1];
    size_t len;
    const char *arg; /* as given, for the text output */
} token;

/* The TOKEN argument, as bytes or (--hex) decoded from hexadecimal. */
static int parse_token(const cmd_env *e, const char *arg, token *t)
{
    t->arg = arg;
    t->len = 0;
    if (e->o->hex) {
        size_t n = strlen(arg);
        if (n % 2 || n / 2 > sizeof t->b)
            return usage_fail("bad hexadecimal token", arg);
        for (size_t i = 0; i < n; i += 2) {
            int hi = hexval(arg[i]), lo = hexval(arg[i + 1]);
            if (hi < 0 || lo < 0)
                return usage_fail("bad hexadecimal token", arg);
            t->b[t->len++] = (unsigned char)(hi * 16 + lo);
        }
    } else {
        t->len = strlen(arg);
        if (t->len > sizeof t->b)
            t->len = sizeof t->b; /* the library answers RSV_ETOKEN */
        memcpy(t->b, arg, t->len);
    }
    return 0;
}

typedef struct co_state {
    int32_t status;
    int64_t units, expires_in;
} co_state;

static const char *status_name(int32_t status)
{
    static const char *names[] = {"unknown", "held", "claimed", "released",
                                  "expired"};
    return status >= 1 && status <= 4 ? names[status] : "unknown";
}

static int read_state(const cmd_env *e, uint64_t shop, const token *t,
                      co_state *s)
{
    *s = (co_state){0};
    return rsv_checkout_status(e->ctx, shop, t->b, t->len, &s->status,
                               &s->units, &s->expires_in);
}

/* The state of a checkout, as checkout prints it; release and claim pass
 * what they did (action, its code and the state before) to print first. */
static void print_state(const cmd_env *e, uint64_t shop, const token *t,
                        const co_state *s, const char *action, int outcome,
                        const co_state *before)
{
    const char *name = status_name(s->status);
    if (e->o->json) {
        printf("{\"shop_id\":%" PRIu64 ",\"token\":", shop);
        json_str(t->b, t->len);
        printf(",\"token_hex\":\"");
        for (size_t i = 0; i < t->len; i++)
            printf("%02x", t->b[i]);
        putchar('"');
        if (action)
            printf(",\"action\":\"%s\",\"outcome\":\"%s\","
                   "\"outcome_code\":%d,\"previous_status\":\"%s\"",
                   action, code_name(outcome), outcome,
                   status_name(before->status));
        printf(",\"status\":\"%s\",\"status_code\":%d,\"units\":%" PRId64
               ",\"expires_in_ms\":%" PRId64 "}\n", name, (int)s->status,
               s->units, s->expires_in);
        return;
    }
    if (action && outcome == RSV_OK)
        printf("%s (it was %s)\n",
               strcmp(action, "release") == 0 ? "released" : "claimed",
               status_name(before->status));
    else if (action)
        printf("not %s: %s (it was %s)\n",
               strcmp(action, "release") == 0 ? "released" : "claimed",
               rsv_strerror(outcome), status_name(before->status));
    printf("shop %" PRIu64 " checkout %s%s\n", shop, e->o->hex ? "0x" : "",
           t->arg);
    printf("  status      %s\n", name);
    printf("  units held  %" PRId64 "\n", s->units);
    if (s->expires_in >= 0)
        printf("  deadline    in %" PRId64 " ms\n", s->expires_in);
    else
        printf("  deadline    %" PRId64 " ms ago\n", -s->expires_in);
}

static int cmd_checkout(const cmd_env *e)
{
    uint64_t shop;
    token t;
    int st = ids(e, 1, &shop);
    if (st || (st = parse_token(e, e->args[1], &t)))
        return st;
    co_state s;
    int rc = read_state(e, shop, &t, &s);
    if (rc != RSV_OK)
        return lib_fail(e->o, e->ctx, "rsv_checkout_status", rc);
    print_state(e, shop, &t, &s, NULL, RSV_OK, NULL);
    return EXIT_OKAY;
}

/* release and claim: the state before (which also tells an unknown
 * checkout apart before anything is attempted), the call, the state
 * after.  A refusal by the checkout's state (RSV_ECLAIMED, RSV_ERELEASED,
 * RSV_EEXPIRED) still prints the state, which is what the operator needs
 * to decide what to do next, and exits 4. */
static int settle_cmd(const cmd_env *e, int claim)
{
    const char *action = claim ? "claim" : "release";
    const char *fn = claim ? "rsv_claim" : "rsv_release";
    uint64_t shop;
    token t;
    int st = ids(e, 1, &shop);
    if (st || (st = parse_token(e, e->args[1], &t)))
        return st;
    co_state before, after;
    int rc = read_state(e, shop, &t, &before);
    if (rc != RSV_OK)
        return lib_fail(e->o, e->ctx, "rsv_checkout_status", rc);
    int outcome = claim ? rsv_claim(e->ctx, shop, t.b, t.len)
                        : rsv_release(e->ctx, shop, t.b, t.len);
    st = exit_for(outcome);
    if (outcome != RSV_OK && st != EXIT_REFUSED)
        return lib_fail(e->o, e->ctx, fn, outcome);
    if (outcome != RSV_OK)
        fprintf(stderr, "%s: %s: %s: %s\n", prog, fn, code_name(outcome),
                lib_msg(e->ctx, outcome));
    rc = read_state(e, shop, &t, &after);
    if (rc != RSV_OK)
        return lib_fail(e->o, e->ctx, "rsv_checkout_status", rc);
    print_state(e, shop, &t, &after, action, outcome, &before);
    return st;
}

static int cmd_release(const cmd_env *e) { return settle_cmd(e, 0); }

static int cmd_claim(const cmd_env *e) { return settle_cmd(e, 1); }

/* ---------------- schema: what the database holds ---------------- */

/* The tables rsv_open requires (besides rsv_schema, which only a schema
 * from before versions lacks). */
static const char *const schema_tables[] = {
    "rsv_ledger", "rsv_pool", "rsv_checkouts",
    "rsv_holds", "rsv_journal",
};
#define N_TABLES (sizeof schema_tables / sizeof schema_tables[0])
#define MAX_PROCS 16

/* An EXECUTE probe calls a procedure with one argument more than it
 * takes, so the server answers before running it (see probe_proc); for a
 * procedure the account cannot see, whose count is unknown, with more
 * than any procedure of the schema takes. */
#define PROBE_ARGS_UNSEEN 64

typedef struct proc_state {
    char name[65];
    int visible;    /* in information_schema.routines: what the library
                       counts at rsv_open */
    int nparams;    /* when visible */
    int exists;     /* visible, or the probe found it */
    int executable; /* the probe was not refused EXECUTE */
} proc_state;

typedef struct schema_info {
    char db[256], account[300];
    int table[N_TABLES];
    size_t n_tables;   /* how many of schema_tables exist */
    int versioned;     /* the table rsv_schema exists */
    int installed;     /* any of the tables exists */
    long version, oldest;
    char updated_at[40];
    proc_state proc[MAX_PROCS];
    size_t n_procs, n_exec, n_missing;
    const char *state;
} schema_info;

/* "'a', 'b', ..." of the names, for an IN list (they are identifiers of
 * our own, nothing to escape). */
static void in_list(char *buf, size_t len, const char *const *names,
                    size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s'%s'",
                                 i ? ", " : "", names[i]);
}

/* Does the account have EXECUTE on the procedure?  The server checks the
 * privilege before it counts the arguments, and counts them before it
 * runs anything: a CALL with one argument too many answers "incorrect
 * number of arguments" (1318) when the account may execute it, "execute
 * command denied" (1370) when not, "does not exist" (1305) when it is
 * gone, and never runs the body.  Reading SHOW GRANTS instead would mean
 * re-implementing the server's matching of users, roles, wildcards and
 * routine-level grants.  Returns 0 (the answer in *p) or -1 (an error on
 * the connection). */
static int probe_proc(MYSQL *c, proc_state *p)
{
    size_t nargs = p->visible ? (size_t)p->nparams + 1 : PROBE_ARGS_UNSEEN;
    size_t cap = 64 + sizeof p->name + 5 * nargs, len;
    char *q = malloc(cap);
    if (!q)
        return -1;
    len = (size_t)snprintf(q, cap, "/* conn_tag:admin */ CALL `%s`(",
                           p->name);
    for (size_t i = 0; i < nargs; i++)
        len += (size_t)snprintf(q + len, cap - len, "%sNULL", i ? "," : "");
    snprintf(q + len, cap - len, ")");
    int sent = mysql_real_query(c, q, strlen(q));
    free(q);
    if (sent == 0) {
        /* cannot happen with a wrong count; read what it answered */
        int rc;
        do {
            MYSQL_RES *r = mysql_store_result(c);
            if (r)
                mysql_free_result(r);
        } while ((rc = mysql_next_result(c)) == 0);
        p->exists = p->executable = 1;
        return rc > 0 ? -1 : 0;
    }
    switch (mysql_errno(c)) {
    case 1318: /* ER_SP_WRONG_NO_OF_ARGS */
        p->exists = p->executable = 1;
        return 0;
    case 1370: /* ER_PROCACCESS_DENIED_ERROR */
        p->exists = 1;
        p->executable = 0;
        return 0;
    case 1305: /* ER_SP_DOES_NOT_EXIST */
        p->exists = p->executable = 0;
        return 0;
    default:
        return -1;
    }
}

/* What the database holds, and (probe) which procedures the account can
 * execute.  Returns EXIT_OKAY, or reports (as o says: an error document
 * with --json) and returns EXIT_ERROR. */
static int read_schema(const opts *o, MYSQL *c, schema_info *s, int probe)
{
    memset(s, 0, sizeof *s);
    MYSQL_RES *r = query_rows(c, "/* conn_tag:admin */ SELECT DATABASE(), "
                                 "CURRENT_USER()");
    if (!r)
        return db_fail(o, c, "schema");
    MYSQL_ROW row = mysql_fetch_row(r);
    if (row && row[0])
        snprintf(s->db, sizeof s->db, "%s", row[0]);
    if (row && row[1])
        snprintf(s->account, sizeof s->account, "%s", row[1]);
    mysql_free_result(r);
    if (!s->db[0]) {
        const char *msg = "no database selected: name the one that holds "
                          "(or is to hold) the libreserve schema with "
                          "--database (-D) or RSV_ADMIN_DATABASE";
        fprintf(stderr, "%s: %s\n", prog, msg);
        if (o->json) {
            printf("{\"error\":");
            json_error_obj(RSV_ESCHEMA, msg);
            printf("}\n");
        }
        return EXIT_ERROR;
    }

    char names[512], q[2048];
    in_list(names, sizeof names, schema_tables, N_TABLES);
    snprintf(q, sizeof q, "/* conn_tag:admin */ SELECT table_name FROM "
             "information_schema.tables WHERE table_schema = DATABASE() AND "
             "table_name IN (%s, 'rsv_schema')", names);
    if (!(r = query_rows(c, q)))
        return db_fail(o, c, "schema: reading the tables");
    while ((row = mysql_fetch_row(r))) {
        if (!row[0])
            continue;
        if (strcmp(row[0], "rsv_schema") == 0)
            s->versioned = 1;
        for (size_t i = 0; i < N_TABLES; i++)
            if (strcmp(row[0], schema_tables[i]) == 0 && !s->table[i]) {
                s->table[i] = 1;
                s->n_tables++;
            }
    }
    mysql_free_result(r);
    s->installed = s->versioned || s->n_tables > 0;
    /* A schema from before versions, under the tables' old names (see the
     * top of sql/schema.sql), as rsv_open tells it from an application's
     * table of that name. */
    if (!s->installed) {
        if (!(r = query_rows(c, "/* conn_tag:admin */ SELECT COUNT(*) FROM "
                                "information_schema.columns WHERE "
                                "table_schema = DATABASE() AND table_name = "
                                "'inventory_levels' AND column_name IN "
                                "('issued', 'next_unit_id')")))
            return db_fail(o, c, "schema: reading the tables");
        row = mysql_fetch_row(r);
        s->installed = row && row[0] && strcmp(row[0], "2") == 0;
        mysql_free_result(r);
    }

    /* As rsv_open reads it: no row (or no table) is version 0. */
    if (s->versioned) {
        if (!(r = query_rows(c, "/* conn_tag:admin */ SELECT version, "
                                "oldest_library, updated_at FROM rsv_schema "
                                "WHERE id = 1")))
            return db_fail(o, c, "schema: reading rsv_schema");
        if ((row = mysql_fetch_row(r))) {
            s->version = row[0] ? strtol(row[0], NULL, 10) : 0;
            s->oldest = row[1] ? strtol(row[1], NULL, 10) : 0;
            snprintf(s->updated_at, sizeof s->updated_at, "%s",
                     row[2] ? row[2] : "");
        }
        mysql_free_result(r);
    }

    /* The procedures, in the order the library names them: the very ones
     * it would call (rsv_schema_procedure). */
    const char *pn_lib;
    while (s->n_procs < MAX_PROCS &&
           (pn_lib = rsv_schema_procedure(s->n_procs)) != NULL)
        snprintf(s->proc[s->n_procs++].name, sizeof s->proc[0].name, "%s",
                 pn_lib);
    const char *pn[MAX_PROCS];
    for (size_t i = 0; i < s->n_procs; i++)
        pn[i] = s->proc[i].name;
    in_list(names, sizeof names, pn, s->n_procs);
    /* Both views show only the routines the account holds some privilege
     * on (or defined), exactly what rsv_open counts. */
    snprintf(q, sizeof q, "/* conn_tag:admin */ SELECT r.routine_name, "
             "(SELECT COUNT(*) FROM information_schema.parameters p WHERE "
             "p.specific_schema = r.routine_schema AND p.specific_name = "
             "r.routine_name AND p.routine_type = 'PROCEDURE' AND "
             "p.ordinal_position > 0) FROM information_schema.routines r "
             "WHERE r.routine_schema = DATABASE() AND r.routine_type = "
             "'PROCEDURE' AND r.routine_name IN (%s)", names);
    if (!(r = query_rows(c, q)))
        return db_fail(o, c, "schema: reading the procedures");
    while ((row = mysql_fetch_row(r)))
        for (size_t i = 0; i < s->n_procs; i++)
            if (row[0] && strcmp(row[0], s->proc[i].name) == 0) {
                s->proc[i].visible = s->proc[i].exists = 1;
                s->proc[i].nparams = row[1] ? atoi(row[1]) : 0;
            }
    mysql_free_result(r);
    for (size_t i = 0; i < s->n_procs; i++) {
        proc_state *p = &s->proc[i];
        if (probe && probe_proc(c, p) != 0)
            return db_fail(o, c, "schema: probing EXECUTE on a procedure");
        /* a routine the account cannot see is one the library will not
         * call, whatever the probe says */
        if (!p->visible)
            p->executable = 0;
        s->n_exec += (size_t)p->executable;
        s->n_missing += (size_t)!p->exists;
    }

    /* The same order of checks as rsv_open: the database's version, what
     * it needs of the library, then the tables. */
    long need = rsv_schema_version();
    if (!s->installed)
        s->state = "not-installed";
    else if (s->version < need)
        s->state = "upgrade-needed";
    else if (s->oldest > need)
        s->state = "library-too-old";
    else if (s->n_tables < N_TABLES)
        s->state = "upgrade-needed";
    else if (probe && s->n_exec < s->n_procs)
        s->state = "no-procedures";
    else
        s->state = "ok";
    return EXIT_OKAY;
}

/* The schema's version in a line of text. */
static void describe_version(const schema_info *s, char *buf, size_t len)
{
    if (!s->installed)
        snprintf(buf, len, "not installed");
    else if (!s->versioned)
        snprintf(buf, len, "version 0 (no rsv_schema table: a schema from "
                           "before versions)");
    else
        snprintf(buf, len, "version %ld, oldest library %ld", s->version,
                 s->oldest);
}

/* The members that describe the schema's version (no braces). */
static void json_version(const schema_info *s)
{
    printf("\"installed\":%s,\"versioned\":%s", s->installed ? "true"
                                                             : "false",
           s->versioned ? "true" : "false");
    if (s->installed)
        printf(",\"schema_version\":%ld", s->version);
    else
        printf(",\"schema_version\":null");
    if (s->versioned)
        printf(",\"oldest_library\":%ld", s->oldest);
    else
        printf(",\"oldest_library\":null");
    printf(",\"updated_at\":");
    if (s->versioned && s->updated_at[0])
        json_cstr(s->updated_at);
    else
        printf("null");
}

/* What to do about a state that is not ok (NULL for ok). */
static const char *next_step(const schema_info *s, char *buf, size_t len)
{
    if (strcmp(s->state, "not-installed") == 0)
        return "rsv-admin schema install";
    if (strcmp(s->state, "upgrade-needed") == 0)
        return "rsv-admin schema upgrade (stop the processes of older "
               "libraries first), then deploy the library";
    if (strcmp(s->state, "library-too-old") == 0) {
        snprintf(buf, len, "upgrade the library: this database needs one "
                           "of schema version %ld or later", s->oldest);
        return buf;
    }
    if (strcmp(s->state, "no-procedures") == 0) {
        if (s->n_missing)
            return "rsv-admin schema upgrade (creates the missing "
                   "procedures)";
        /* CURRENT_USER() is user@host; a GRANT wants 'user'@'host' */
        const char *at = strrchr(s->account, '@');
        int ul = at ? (int)(at - s->account) : (int)strlen(s->account);
        snprintf(buf, len, "GRANT EXECUTE ON `%s`.* TO '%.*s'@'%s'", s->db,
                 ul, s->account, at ? at + 1 : "%");
        return buf;
    }
    return NULL;
}

static int schema_status(const cmd_env *e)
{
    schema_info s;
    int st = read_schema(e->o, e->conn, &s, 1);
    if (st)
        return st;
    char step_buf[600];
    const char *step = next_step(&s, step_buf, sizeof step_buf);
    if (e->o->json) {
        printf("{\"database\":");
        json_cstr(s.db);
        printf(",\"account\":");
        json_cstr(s.account);
        printf(",\"state\":\"%s\",", s.state);
        json_version(&s);
        printf(",\"library_schema_version\":%d,\"library_version\":",
               rsv_schema_version());
        json_cstr(rsv_version());
        printf(",\"tables\":{");
        for (size_t i = 0; i < N_TABLES; i++)
            printf("\"%s\":%s,", schema_tables[i],
                   s.table[i] ? "true" : "false");
        printf("\"rsv_schema\":%s},\"procedures\":[",
               s.versioned ? "true" : "false");
        for (size_t i = 0; i < s.n_procs; i++)
            printf("%s{\"name\":\"%s\",\"exists\":%s,\"executable\":%s}",
                   i ? "," : "", s.proc[i].name,
                   s.proc[i].exists ? "true" : "false",
                   s.proc[i].executable ? "true" : "false");
        printf("],\"next_step\":");
        if (step)
            json_cstr(step);
        else
            printf("null");
        printf("}\n");
    } else {
        printf("database         %s (as %s)\n", s.db, s.account);
        printf("state            %s\n", s.state);
        if (!s.installed)
            printf("schema version   not installed\n"
                   "oldest library   not installed\n");
        else if (!s.versioned)
            printf("schema version   0 (no rsv_schema table: a schema from "
                   "before versions)\noldest library   none\n");
        else if (!s.updated_at[0])
            printf("schema version   0 (rsv_schema has no row)\n"
                   "oldest library   0\n");
        else
            printf("schema version   %ld (since %s)\noldest library   "
                   "%ld\n", s.version, s.updated_at, s.oldest);
        printf("library needs    %d (libreserve %s)\n", rsv_schema_version(),
               rsv_version());
        printf("tables           %zu of %zu", s.n_tables, N_TABLES);
        for (size_t i = 0, k = 0; i < N_TABLES; i++)
            if (!s.table[i])
                printf("%s%s", k++ ? ", " : " (missing: ", schema_tables[i]);
        printf("%s\n", s.n_tables < N_TABLES ? ")" : "");
        printf("procedures       %zu of %zu executable by this account\n",
               s.n_exec, s.n_procs);
        for (size_t i = 0; i < s.n_procs; i++) {
            const proc_state *p = &s.proc[i];
            printf("  %-22s %s\n", p->name,
                   p->executable ? "executable"
                   : !p->exists  ? "missing"
                   : p->visible  ? "not executable (no EXECUTE)"
                                 : "not executable (no privilege on it)");
        }
        if (step)
            printf("next step        %s\n", step);
    }
    return strcmp(s.state, "ok") == 0 ? EXIT_OKAY : EXIT_ACTION;
}

/* ---------------- schema: loading the file ---------------- */
/* (split and sent by sqlscript.h, the loader the tests share) */

/* Does the statement start with these words (lower case, single
 * spaces), in any case and with any blanks between them?  The length of
 * the match, or 0. */
static size_t starts_with_words(const char *p, size_t n, const char *words)
{
    size_t i = 0;
    for (const char *w = words; *w; w++) {
        if (*w == ' ') {
            if (i >= n || !isspace((unsigned char)p[i]))
                return 0;
            while (i < n && isspace((unsigned char)p[i]))
                i++;
        } else if (i >= n || tolower((unsigned char)p[i]) != *w) {
            return 0;
        } else {
            i++;
        }
    }
    return i;
}

/* The version the file installs: the numbers of its row of rsv_schema,
 * "INSERT INTO rsv_schema (...) VALUES (1, version, oldest_library,
 * ...)" (or INSERT IGNORE, or REPLACE), read before anything runs so that
 * an upgrade can refuse to go down.  A file without that statement is
 * from before versions (0); one whose row cannot be read is refused
 * rather than guessed at.  0, or -1 with a message in err. */
static int script_version(sqlscript *s, char *err, size_t errlen)
{
    static const char *const forms[] = {
        "insert into rsv_schema", "insert ignore into rsv_schema",
        "replace into rsv_schema",
    };
    s->version = s->oldest = 0;
    for (size_t i = 0; i < s->n; i++) {
        const char *p = s->v[i].p;
        size_t n = s->v[i].n, k = 0;
        for (size_t f = 0; f < sizeof forms / sizeof forms[0] && !k; f++)
            k = starts_with_words(p, n, forms[f]);
        if (!k || (k < n && (isalnum((unsigned char)p[k]) || p[k] == '_')))
            continue;
        /* the text is terminated after the last statement, so strtol and
         * the scan below stop inside the buffer */
        const char *v = NULL;
        for (size_t j = k; j + 6 <= n && !v; j++)
            if (strncasecmp(p + j, "values", 6) == 0)
                v = p + j + 6;
        long num[3] = {0, 0, 0};
        int ok = v != NULL;
        for (int f = 0; ok && f < 3; f++) {
            while (isspace((unsigned char)*v))
                v++;
            if (*v != (f ? ',' : '(')) {
                ok = 0;
                break;
            }
            v++;
            char *after;
            num[f] = strtol(v, &after, 10);
            ok = after != v;
            v = after;
        }
        if (!ok || num[0] != 1 || num[1] < 1 || num[2] < 1) {
            snprintf(err, errlen, "line %d: cannot read the version from "
                     "its row of rsv_schema (expected VALUES (1, version, "
                     "oldest_library, ...))", s->v[i].line);
            return -1;
        }
        s->version = num[1];
        s->oldest = num[2];
        return 0;
    }
    return 0;
}

/* The length of a statement's first line. */
static int first_line_len(const sqlscript_stmt *st)
{
    const char *nl = memchr(st->p, '\n', st->n);
    size_t n = nl ? (size_t)(nl - st->p) : st->n;
    return (int)(n > 200 ? 200 : n);
}

/* install (upgrade = 0) and upgrade. */
static int schema_load(const cmd_env *e, int upgrade)
{
    const opts *o = e->o;
    const char *cmd = upgrade ? "upgrade" : "install";
    const char *path = o->schema ? o->schema : RSV_ADMIN_SCHEMA;
    sqlscript sc;
    char err[600];
    if (sqlscript_read(path, &sc, err, sizeof err) != 0 ||
        script_version(&sc, err, sizeof err) != 0) {
        sqlscript_free(&sc);
        fprintf(stderr, "%s: schema %s: %s%s\n", prog, cmd, err,
                o->schema ? "" : " (name the schema file with --schema)");
        if (o->json) {
            printf("{\"error\":");
            json_error_obj(RSV_EINVAL, err);
            printf("}\n");
        }
        return EXIT_ERROR;
    }
    /* The file is written for the mariadb client's default: every
     * statement commits on its own.  An option file's init-command that
     * turned autocommit off would leave the version row uncommitted. */
    schema_info before;
    int st;
    if (mysql_autocommit(e->conn, 1) != 0)
        st = db_fail(o, e->conn, "schema: autocommit");
    else
        st = read_schema(o, e->conn, &before, 0);
    if (st) {
        sqlscript_free(&sc);
        return st;
    }

    char refused[1200] = "", vbefore[120];
    describe_version(&before, vbefore, sizeof vbefore);
    if (!upgrade && before.installed)
        snprintf(refused, sizeof refused, "database %s already holds the "
                 "libreserve schema (%s): use rsv-admin schema upgrade",
                 before.db, vbefore);
    else if (upgrade && !before.installed)
        snprintf(refused, sizeof refused, "database %s holds no libreserve "
                 "schema to upgrade: use rsv-admin schema install",
                 before.db);
    else if (upgrade && before.version > sc.version)
        snprintf(refused, sizeof refused, "database %s holds schema version "
                 "%ld, newer than %.500s (version %ld): a schema is never "
                 "downgraded; load the file of the newest library", before.db,
                 before.version, path, sc.version);

    if (o->json) {
        printf("{\"command\":\"%s\",\"database\":", cmd);
        json_cstr(before.db);
        printf(",\"file\":");
        json_cstr(path);
        printf(",\"file_version\":%ld,\"statements\":%zu,\"before\":{",
               sc.version, sc.n);
        json_version(&before);
        putchar('}');
    } else {
        printf("database         %s (as %s)\n", before.db, before.account);
        printf("schema file      %s (version %ld, %zu statements)\n", path,
               sc.version, sc.n);
        printf("before           %s\n", vbefore);
    }
    if (refused[0]) {
        fprintf(stderr, "%s: schema %s: %s\n", prog, cmd, refused);
        if (o->json) {
            printf(",\"ran\":0,\"refused\":");
            json_cstr(refused);
            printf("}\n");
        }
        sqlscript_free(&sc);
        return EXIT_REFUSED;
    }

    /* One statement at a time, so a failure names its statement. */
    size_t ran = 0;
    const sqlscript_stmt *failed = NULL;
    unsigned int ferrno = 0;
    char fmsg[512] = "", fstate[6] = "";
    for (; ran < sc.n; ran++)
        if (sqlscript_exec(e->conn, &sc.v[ran]) != 0) {
            failed = &sc.v[ran];
            ferrno = mysql_errno(e->conn);
            snprintf(fmsg, sizeof fmsg, "%s", mysql_error(e->conn));
            snprintf(fstate, sizeof fstate, "%s", mysql_sqlstate(e->conn));
            break;
        }
    if (failed)
        fprintf(stderr, "%s: schema %s: statement %zu of %zu (line %d of "
                "%s) failed: %.*s\n%s: ERROR %u (%s): %s\n", prog, cmd,
                ran + 1, sc.n, failed->line, path, first_line_len(failed),
                failed->p, prog, ferrno, fstate, fmsg);
    /* The version after, also after a failure (unless the connection is
     * gone: client errors are 2000 and up).  A failure to read it goes to
     * stderr only: the JSON document is half written. */
    schema_info after;
    opts quiet = *o;
    quiet.json = 0;
    int have_after = !(failed && ferrno >= 2000) &&
                     (st = read_schema(&quiet, e->conn, &after, 1)) ==
                         EXIT_OKAY;
    if (failed && have_after)
        fprintf(stderr, "%s: the statements before it ran and stay; once "
                "the cause is fixed, run rsv-admin schema %s\n", prog,
                after.installed ? "upgrade" : "install");
    char vafter[120] = "unknown";
    if (have_after)
        describe_version(&after, vafter, sizeof vafter);
    if (o->json) {
        printf(",\"ran\":%zu", ran);
        if (failed) {
            printf(",\"failed\":{\"statement\":%zu,\"line\":%d,"
                   "\"first_line\":", ran + 1, failed->line);
            json_str(failed->p, (size_t)first_line_len(failed));
            printf(",\"errno\":%u,\"sqlstate\":", ferrno);
            json_cstr(fstate);
            printf(",\"message\":");
            json_cstr(fmsg);
            printf("},\"error\":");
            json_error_obj(RSV_EDB, fmsg);
        }
        if (have_after) {
            printf(",\"after\":{");
            json_version(&after);
            printf("},\"state\":\"%s\"", after.state);
        }
        printf("}\n");
    } else {
        printf("ran              %zu of %zu statements\n", ran, sc.n);
        printf("after            %s\n", vafter);
        if (have_after)
            printf("state            %s%s\n", after.state,
                   strcmp(after.state, "no-procedures") == 0
                       ? " (as this account sees it: see rsv-admin schema "
                         "status as the application's account)" : "");
    }
    sqlscript_free(&sc);
    if (failed)
        return EXIT_ERROR;
    return have_after ? EXIT_OKAY : st;
}

/* (main checked the subcommand before connecting) */
static int cmd_schema(const cmd_env *e)
{
    if (strcmp(e->args[0], "status") == 0)
        return schema_status(e);
    return schema_load(e, strcmp(e->args[0], "upgrade") == 0);
}

/* ---------------- main ---------------- */

typedef struct command {
    const char *name;
    int nargs;        /* exact number of arguments; -1 = checked by cmd */
    int (*run)(const cmd_env *);
    int no_ctx;       /* runs without a library context */
} command;

static const command commands[] = {
    {"stock", 3, cmd_stock},
    {"levels", 1, cmd_levels},
    {"stats", -1, cmd_stats},
    {"audit", -1, cmd_audit},
    {"sweep", -1, cmd_sweep},
    {"replenish", 3, cmd_replenish},
    {"drain", 3, cmd_drain},
    {"set-stock", 4, cmd_set_stock},
    {"adjust-stock", 4, cmd_adjust_stock},
    {"checkout", 2, cmd_checkout},
    {"release", 2, cmd_release},
    {"claim", 2, cmd_claim},
    {"schema", -1, cmd_schema, 1},
    {"connections", 0, cmd_connections, 1},
    {"migrate", -1, cmd_migrate, 1},
    {"import", -1, cmd_import},
};

int main(int argc, char **argv)
{
    opts o;
    int st = parse_args(&o, argc, argv);
    if (st >= 0)
        return st;
    if (o.npos == 0) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const command *cmd = NULL;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(commands[i].name, o.pos[0]) == 0)
            cmd = &commands[i];
    if (!cmd)
        return usage_fail("unknown command", o.pos[0]);
    if (cmd->nargs >= 0 && o.npos - 1 != cmd->nargs) {
        fprintf(stderr, "%s: %s takes %d argument(s), not %d (see %s "
                        "--help)\n", prog, cmd->name, cmd->nargs, o.npos - 1,
                prog);
        return EXIT_USAGE;
    }
    if (o.have_max && !one_of(cmd->name, "sweep"))
        return usage_fail("--max only applies to sweep", NULL);
    if (o.all && !one_of(cmd->name, "audit sweep stats"))
        return usage_fail("--all only applies to audit, sweep and stats",
                          NULL);
    if (o.hex && !one_of(cmd->name, "checkout release claim"))
        return usage_fail("--hex only applies to checkout, release and "
                          "claim", NULL);
    if (o.prometheus && !one_of(cmd->name, "stats connections migrate"))
        return usage_fail("--prometheus only applies to stats, "
                          "connections and migrate show", NULL);
    if (o.chunk && !one_of(cmd->name, "import"))
        return usage_fail("--chunk only applies to import", NULL);
    if (o.rate && !one_of(cmd->name, "import migrate"))
        return usage_fail("--rate only applies to import and migrate "
                          "compare", NULL);
    if ((o.csv || o.query) && !one_of(cmd->name, "import migrate"))
        return usage_fail("--csv and --query only apply to import and "
                          "migrate compare", NULL);
    if ((o.redis || o.pattern || o.settle_s >= 0) &&
        !one_of(cmd->name, "migrate"))
        return usage_fail("--redis, --pattern and --settle only apply to "
                          "migrate compare", NULL);
    if ((o.reason || o.max_ttl_s >= 0) && !one_of(cmd->name, "migrate"))
        return usage_fail("--reason and --max-ttl only apply to migrate",
                          NULL);
    if (o.metrics_file && !one_of(cmd->name, "sweep stats connections"))
        return usage_fail("--metrics-file only applies to sweep, stats and "
                          "connections", NULL);
    if (o.metrics_file && !*o.metrics_file)
        return usage_fail("--metrics-file needs a file name", NULL);
    if (o.by_shop && !one_of(cmd->name, "stats"))
        return usage_fail("--by-shop only applies to stats", NULL);
    if (o.tag_prefix && !one_of(cmd->name, "connections"))
        return usage_fail("--tag-prefix only applies to connections", NULL);
    if (o.defaults_file && o.no_defaults)
        return usage_fail("give --defaults-file or --no-defaults, not both",
                          NULL);
    if (o.prometheus && o.json)
        return usage_fail("give --json or --prometheus, not both", NULL);
    int schema_cmd = strcmp(cmd->name, "schema") == 0;
    if (schema_cmd &&
        (o.npos != 2 || !one_of(o.pos[1], "status install upgrade")))
        return usage_fail("schema takes one of status, install, upgrade",
                          NULL);
    if (o.schema && !(schema_cmd && one_of(o.pos[1], "install upgrade")))
        return usage_fail("--schema only applies to schema install and "
                          "schema upgrade", NULL);

    MYSQL *conn;
    rsv_ctx *ctx = NULL;
    if ((st = connect_db(&o, &conn, cmd->no_ctx ? NULL : &ctx)) != EXIT_OKAY) {
        if (strcmp(cmd->name, "sweep") == 0)
            sweep_connect_failed(&o);
        return st;
    }
    cmd_env e = {&o, conn, ctx, (const char *const *)&o.pos[1], o.npos - 1};
    st = cmd->run(&e);
    rsv_close(ctx);
    mysql_close(conn);
    return st;
}
