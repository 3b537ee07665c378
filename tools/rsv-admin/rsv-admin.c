/*
 * rsv-admin - the operator's command-line tool for libreserve.
 *
 * Reads and changes the stock of a shop through the library (so every
 * change takes the same locks and keeps the same invariants as the
 * checkouts running next to it), runs the audit, gives back expired holds
 * (the sweeper: one shop or every shop), tops pools up, settles a stuck
 * checkout by hand and prints the figures an operator graphs (text, JSON
 * or the Prometheus text format).  Human-readable output by default, one
 * JSON document on stdout with --json.  See `rsv-admin --help` and
 * rsv-admin(1) for the commands and the exit codes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <reserve.h>

enum {
    EXIT_OKAY = 0,     /* done */
    EXIT_FOUND = 1,    /* audit violations, or no such item/checkout/shop */
    EXIT_USAGE = 2,    /* bad command line or argument value */
    EXIT_ERROR = 3,    /* connection, server or library failure */
    EXIT_REFUSED = 4   /* the checkout's state does not allow the change
                          (release of a claimed checkout, claim of a
                          claimed, released or expired one) */
};

typedef struct opts {
    const char *socket, *host, *user, *password, *database;
    unsigned int port;
    int json, prometheus, all, hex, no_defaults;
    int64_t max;
    int have_max;
    const char *pos[8];
    int npos;
} opts;

static const char *prog = "rsv-admin";

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
"                                    journal backlog (--json, --prometheus)\n"
"  audit SHOP | audit --all          check the invariants (exit 1 if any\n"
"                                    is violated)\n"
"  sweep SHOP | sweep --all          give back expired holds (up to N per\n"
"                                    shop with --max N), drain idle pools,\n"
"                                    purge old checkouts\n"
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
"  --json               print one JSON object on stdout\n"
"  --prometheus         stats: the Prometheus text exposition format\n"
"  --all, --max N, --hex  see the commands\n"
"  --help, --version\n"
"  --                   end of options (for a TOKEN that starts with -)\n"
"\n"
"Exit status:\n"
"  0  success (audit: no violation)\n"
"  1  the audit found violations, or the item, location, checkout or\n"
"     shop does not exist\n"
"  2  usage error: unknown command or option, bad argument value\n"
"  3  connection, server or library error (message on stderr), including\n"
"     a refused stock change (RSV_ESTOCK) and a shop that sweep --all\n"
"     could not sweep\n"
"  4  release or claim refused by the checkout's state (claimed,\n"
"     released, expired)\n"
"\n"
"A sweeper is required: run 'rsv-admin sweep --all' every 10 to 60 s\n"
"(cron, a systemd timer).  See rsv-admin(1).\n", prog);
}

/* ---------------- output helpers ---------------- */

static void json_str(const void *p, size_t n)
{
    const unsigned char *s = p;
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = s[i];
        switch (ch) {
        case '"': fputs("\\\"", stdout); break;
        case '\\': fputs("\\\\", stdout); break;
        case '\n': fputs("\\n", stdout); break;
        case '\r': fputs("\\r", stdout); break;
        case '\t': fputs("\\t", stdout); break;
        default:
            /* Control bytes and bytes >= 0x80 (tokens are bytes, not
             * necessarily UTF-8) are escaped, so the output is always
             * valid JSON. */
            if (ch < 0x20 || ch >= 0x7f)
                printf("\\u%04x", ch);
            else
                putchar(ch);
        }
    }
    putchar('"');
}

static void json_cstr(const char *s) { json_str(s, strlen(s)); }

static const char *code_name(int rc)
{
    const char *n = rsv_code_name(rc);
    return n ? n : "RSV_E?";
}

/* {"code":N,"name":"RSV_...","message":"..."} */
static void json_error_obj(int rc, const char *msg)
{
    printf("{\"code\":%d,\"name\":", rc);
    json_cstr(code_name(rc));
    printf(",\"message\":");
    json_cstr(msg);
    putchar('}');
}

/* The message of the last failing call on ctx, or the code's text. */
static const char *lib_msg(rsv_ctx *ctx, int rc)
{
    const char *msg = ctx ? rsv_errmsg(ctx) : "";
    return msg && *msg ? msg : rsv_strerror(rc);
}

/* The exit status for a library code. */
static int exit_for(int rc)
{
    switch (rc) {
    case RSV_OK:
        return EXIT_OKAY;
    case RSV_ENOITEM:
    case RSV_ENOTFOUND:
        return EXIT_FOUND;
    case RSV_EINVAL:
    case RSV_EQUANTITY:
    case RSV_ETOKEN:
        return EXIT_USAGE;
    case RSV_ECLAIMED:
    case RSV_ERELEASED:
    case RSV_EEXPIRED:
        return EXIT_REFUSED;
    default:
        return EXIT_ERROR;
    }
}

/* Report a library failure on stderr (and on stdout with --json); returns
 * the exit status for it. */
static int lib_fail(const opts *o, rsv_ctx *ctx, const char *what, int rc)
{
    const char *msg = lib_msg(ctx, rc);
    fprintf(stderr, "%s: %s: %s: %s\n", prog, what, code_name(rc), msg);
    if (o->json) {
        printf("{\"error\":");
        json_error_obj(rc, msg);
        printf("}\n");
    }
    return exit_for(rc);
}

/* Report a failed statement of the tool's own (stderr, and an RSV_EDB
 * error document with --json); returns EXIT_ERROR. */
static int db_fail(const opts *o, MYSQL *conn, const char *what)
{
    char msg[600];
    snprintf(msg, sizeof msg, "%s (MySQL error %u)", mysql_error(conn),
             mysql_errno(conn));
    fprintf(stderr, "%s: %s: %s\n", prog, what, msg);
    if (o->json) {
        printf("{\"error\":");
        json_error_obj(RSV_EDB, msg);
        printf("}\n");
    }
    return EXIT_ERROR;
}

/* "rsv-admin: WHAT 'ARG' (see rsv-admin --help)"; arg may be NULL. */
static int usage_fail(const char *what, const char *arg)
{
    if (arg)
        fprintf(stderr, "%s: %s '%s' (see %s --help)\n", prog, what, arg,
                prog);
    else
        fprintf(stderr, "%s: %s (see %s --help)\n", prog, what, prog);
    return EXIT_USAGE;
}

/* ---------------- argument parsing ---------------- */

static int parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno)
        return -1;
    *out = v;
    return 0;
}

static int parse_i64(const char *s, int64_t *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno)
        return -1;
    *out = v;
    return 0;
}

/* The options that take a value, with the letter the mariadb client uses
 * for the same option (0: no short form). */
static const struct value_opt {
    const char *name;
    char letter;
} value_opts[] = {
    {"--socket", 'S'}, {"--host", 'h'}, {"--port", 'P'},
    {"--user", 'u'}, {"--password", 'p'}, {"--database", 'D'},
    {"--max", 0},
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
    else if (strcmp(name, "--port") == 0) {
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

static int connect_db(const opts *o, MYSQL **out_conn, rsv_ctx **out_ctx)
{
    *out_conn = NULL;
    *out_ctx = NULL;
    MYSQL *m = mysql_init(NULL);
    if (!m) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return EXIT_ERROR;
    }
    unsigned int timeout = 10;
    mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
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

typedef struct cmd_env {
    const opts *o;
    MYSQL *conn;
    rsv_ctx *ctx;
    const char *const *args; /* after the command name */
    int nargs;
} cmd_env;

/* Parse the SHOP ITEM LOCATION arguments (as many as n). */
static int ids(const cmd_env *e, int n, uint64_t *v)
{
    static const char *what[] = {"bad shop id", "bad item id",
                                 "bad location id"};
    for (int i = 0; i < n; i++)
        if (parse_u64(e->args[i], &v[i]))
            return usage_fail(what[i], e->args[i]);
    return 0;
}

/* audit, sweep and stats: "SHOP" or "--all", exactly one of them. */
static int shop_or_all(const cmd_env *e, const char *cmd, uint64_t *shop)
{
    char m[64];
    *shop = 0;
    if (e->o->all && e->nargs > 0) {
        snprintf(m, sizeof m, "%s: give a SHOP or --all, not both", cmd);
        return usage_fail(m, NULL);
    }
    if (e->o->all)
        return 0;
    if (e->nargs != 1) {
        snprintf(m, sizeof m, "%s needs a SHOP or --all", cmd);
        return usage_fail(m, NULL);
    }
    return ids(e, 1, shop);
}

/* Send one statement of the tool's own; 0 or -1 (the caller reports). */
static int sql(const cmd_env *e, const char *q)
{
    return mysql_real_query(e->conn, q, strlen(q)) == 0 ? 0 : -1;
}

/* End a transaction of the tool's own the way the library ends its
 * transactions: AND NO CHAIN NO RELEASE, so a completion_type set on the
 * connection (an option file's init-command) neither opens the next one
 * nor drops the connection. */
static void end_txn(const cmd_env *e, int commit)
{
    (void)sql(e, commit ? "COMMIT AND NO CHAIN NO RELEASE"
                        : "ROLLBACK AND NO CHAIN NO RELEASE");
}

static void print_key_json(const uint64_t *k, int n)
{
    static const char *names[] = {"shop_id", "item_id", "location_id"};
    for (int i = 0; i < n; i++)
        printf("%s\"%s\":%" PRIu64, i ? "," : "", names[i], k[i]);
}

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
        "inventory_levels) UNION (SELECT DISTINCT shop_id FROM "
        "reservation_checkouts) ORDER BY shop_id";
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

static int sweep_all(const cmd_env *e, int64_t max)
{
    uint64_t *shops;
    size_t n;
    int st = list_shops(e, &shops, &n);
    if (st)
        return st;
    int json = e->o->json;
    int64_t total = 0;
    size_t swept = 0, failed = 0, reached = 0;
    if (json)
        printf("{\"scope\":\"all\",\"shops\":[");
    for (size_t i = 0; i < n; i++) {
        int64_t released = 0;
        int rc = rsv_sweep(e->ctx, shops[i], max, &released);
        reached++;
        /* A failed sweep keeps what it gave back before the failure, and
         * says how much. */
        total += released;
        if (rc == RSV_OK)
            swept++;
        else
            failed++;
        if (json) {
            printf("%s{\"shop_id\":%" PRIu64 ",\"released\":%" PRId64,
                   i ? "," : "", shops[i], released);
            if (rc != RSV_OK) {
                printf(",\"error\":");
                json_error_obj(rc, lib_msg(e->ctx, rc));
            }
            putchar('}');
        } else if (rc == RSV_OK) {
            printf("shop %" PRIu64 ": gave back %" PRId64
                   " expired hold(s)\n", shops[i], released);
        } else {
            printf("shop %" PRIu64 ": failed (%s) after giving back %"
                   PRId64 " expired hold(s)\n", shops[i], code_name(rc),
                   released);
        }
        if (rc != RSV_OK)
            fprintf(stderr, "%s: rsv_sweep of shop %" PRIu64 ": %s: %s\n",
                    prog, shops[i], code_name(rc), lib_msg(e->ctx, rc));
        /* The library never reconnects: without a connection every
         * further shop would fail the same way.  One busy or failing shop
         * does not keep the others from being swept. */
        if (rc == RSV_ECONN || rc == RSV_EINDOUBT)
            break;
    }
    size_t not_reached = n - reached;
    if (json) {
        printf("],\"shops_swept\":%zu,\"shops_failed\":%zu,"
               "\"shops_not_reached\":%zu,\"released\":%" PRId64 "}\n",
               swept, failed, not_reached, total);
    } else {
        printf("every shop: gave back %" PRId64 " expired hold(s) in %zu "
               "shop(s)", total, swept);
        if (failed)
            printf(", %zu failed", failed);
        if (not_reached)
            printf(", %zu not reached (connection lost)", not_reached);
        putchar('\n');
    }
    free(shops);
    return failed || not_reached ? EXIT_ERROR : EXIT_OKAY;
}

static int cmd_sweep(const cmd_env *e)
{
    uint64_t shop;
    int st = shop_or_all(e, "sweep", &shop);
    if (st)
        return st;
    int64_t max = e->o->have_max ? e->o->max : 0;
    if (e->o->all)
        return sweep_all(e, max);
    int64_t released = 0;
    int rc = rsv_sweep(e->ctx, shop, max, &released);
    if (rc != RSV_OK)
        return lib_fail(e->o, e->ctx, "rsv_sweep", rc);
    if (e->o->json)
        printf("{\"shop_id\":%" PRIu64 ",\"released\":%" PRId64 "}\n", shop,
               released);
    else
        printf("shop %" PRIu64 ": gave back %" PRId64 " expired hold(s)\n",
               shop, released);
    return EXIT_OKAY;
}

static int cmd_levels(const cmd_env *e)
{
    uint64_t shop;
    int st = ids(e, 1, &shop);
    if (st)
        return st;
    char q[512];
    snprintf(q, sizeof q,
             "/* conn_tag:admin */ SELECT CAST(inventory_item_id AS CHAR), "
             "CAST(inventory_group_id AS CHAR), on_hand, held, "
             "on_hand - held, pooled FROM inventory_stock WHERE shop_id = %"
             PRIu64 " ORDER BY inventory_item_id, inventory_group_id", shop);
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

/* ---------------- stats ---------------- */

enum { SV_ON_HAND, SV_HELD, SV_AVAILABLE, SV_POOLED, SV_EXPIRED,
       SV_BACKLOG, N_SV };

/* One figure per (shop, item, location): its --json member, text column,
 * Prometheus metric and the metric's help text. */
static const struct stat_def {
    const char *json, *column, *metric, *help;
} stat_defs[N_SV] = {
    {"on_hand", "ON_HAND", "libreserve_on_hand_units",
     "Stock on hand as buyers see it: the ledger less the claims not yet "
     "folded into it."},
    {"held", "HELD", "libreserve_held_units",
     "Units held by active checkouts (deadline not passed)."},
    {"available", "AVAILABLE", "libreserve_available_units",
     "Units a new checkout can still reserve (on hand less held)."},
    {"pooled", "POOLED", "libreserve_pooled_units",
     "Pool depth: reservable units kept as rows of the pool."},
    {"expired", "EXPIRED", "libreserve_expired_units",
     "Units of holds whose deadline passed and that were not given back "
     "yet (a sweep or the next refill of the pool gives them back)."},
    {"journal_backlog", "BACKLOG", "libreserve_journal_backlog",
     "Claims and releases journalled and not yet folded into the ledger "
     "(rows of reservation_settlements)."},
};

typedef struct key_stats {
    uint64_t k[3]; /* shop, item, location */
    int64_t v[N_SV];
} key_stats;

/* Every figure of every key in one statement; the subqueries name their
 * indexes for the reason the view inventory_stock does (with the
 * statistics of freshly loaded tables the optimizer read every hold of the
 * shop once per ledger row). */
#define KEYMATCH(t)                                                      \
    " WHERE " t ".shop_id = l.shop_id AND " t ".inventory_item_id = "    \
    "l.inventory_item_id AND " t ".inventory_group_id = "                \
    "l.inventory_group_id"
#define HOLDS(cond)                                                      \
    "CAST(COALESCE((SELECT SUM(h.quantity) FROM reserved_quantities h "  \
    "FORCE INDEX (reserved_quantities_expiry)" KEYMATCH("h")             \
    " AND h.expires_at " cond " NOW(6)), 0) AS SIGNED)"
static const char stats_sql[] =
    "/* conn_tag:admin */ SELECT l.shop_id, l.inventory_item_id, "
    "l.inventory_group_id, CAST(l.on_hand - COALESCE((SELECT "
    "SUM(x.quantity) FROM reservation_settlements x FORCE INDEX (PRIMARY)"
    KEYMATCH("x") " AND x.kind = 2), 0) AS SIGNED), " HOLDS(">") ", "
    HOLDS("<=") ", (SELECT COUNT(*) FROM reservation_units u FORCE INDEX "
    "(PRIMARY)" KEYMATCH("u") "), (SELECT COUNT(*) FROM "
    "reservation_settlements x FORCE INDEX (PRIMARY)" KEYMATCH("x") ") "
    "FROM inventory_levels l";
#undef HOLDS
#undef KEYMATCH

/* Read the figures of one shop (all = 0) or every shop into *out
 * (malloc'd).  Plain reads, no locks, on one consistent snapshot: a READ
 * ONLY transaction at REPEATABLE READ started WITH CONSISTENT SNAPSHOT,
 * as rsv_audit reads, so a figure never mixes two moments. */
static int read_stats(const cmd_env *e, uint64_t shop, int all,
                      key_stats **out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    char q[sizeof stats_sql + 128];
    if (all)
        snprintf(q, sizeof q, "%s ORDER BY l.shop_id, l.inventory_item_id, "
                 "l.inventory_group_id", stats_sql);
    else
        snprintf(q, sizeof q, "%s WHERE l.shop_id = %" PRIu64 " ORDER BY "
                 "l.inventory_item_id, l.inventory_group_id", stats_sql,
                 shop);
    MYSQL_RES *r = NULL;
    if (sql(e, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ") ||
        sql(e, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY") ||
        sql(e, q) || !(r = mysql_store_result(e->conn))) {
        int st = db_fail(e->o, e->conn, "stats");
        end_txn(e, 0);
        return st;
    }
    size_t n = (size_t)mysql_num_rows(r);
    key_stats *v = calloc(n ? n : 1, sizeof *v);
    if (!v) {
        mysql_free_result(r);
        end_txn(e, 0);
        fprintf(stderr, "%s: out of memory\n", prog);
        return EXIT_ERROR;
    }
    MYSQL_ROW row;
    size_t i = 0;
    int bad = 0;
    while ((row = mysql_fetch_row(r)) && i < n) {
        for (int c = 0; c < 3; c++)
            bad |= parse_u64(row[c], &v[i].k[c]);
        int64_t on_hand, held, expired, pooled, backlog;
        bad |= parse_i64(row[3], &on_hand) | parse_i64(row[4], &held) |
               parse_i64(row[5], &expired) | parse_i64(row[6], &pooled) |
               parse_i64(row[7], &backlog);
        v[i].v[SV_ON_HAND] = on_hand;
        v[i].v[SV_HELD] = held;
        v[i].v[SV_AVAILABLE] = on_hand - held;
        v[i].v[SV_POOLED] = pooled;
        v[i].v[SV_EXPIRED] = expired;
        v[i].v[SV_BACKLOG] = backlog;
        i++;
    }
    mysql_free_result(r);
    end_txn(e, 1);
    if (bad) {
        free(v);
        fprintf(stderr, "%s: stats: the server answered a value that is "
                        "not a number\n", prog);
        return EXIT_ERROR;
    }
    *out = v;
    *n_out = i;
    return EXIT_OKAY;
}

/* The Prometheus text exposition format (version 0.0.4): per metric one
 * HELP and one TYPE line, then a sample per key.  Label values are
 * decimal ids, which need no escaping. */
static void print_prometheus(const key_stats *v, size_t n)
{
    for (int m = 0; m < N_SV; m++) {
        printf("# HELP %s %s\n# TYPE %s gauge\n", stat_defs[m].metric,
               stat_defs[m].help, stat_defs[m].metric);
        for (size_t i = 0; i < n; i++)
            printf("%s{shop_id=\"%" PRIu64 "\",item_id=\"%" PRIu64
                   "\",location_id=\"%" PRIu64 "\"} %" PRId64 "\n",
                   stat_defs[m].metric, v[i].k[0], v[i].k[1], v[i].k[2],
                   v[i].v[m]);
    }
}

static int cmd_stats(const cmd_env *e)
{
    uint64_t shop;
    int st = shop_or_all(e, "stats", &shop);
    if (st)
        return st;
    key_stats *v;
    size_t n;
    if ((st = read_stats(e, shop, e->o->all, &v, &n)))
        return st;
    int64_t tot[N_SV] = {0};
    size_t shops = 0;
    for (size_t i = 0; i < n; i++) {
        for (int m = 0; m < N_SV; m++)
            tot[m] += v[i].v[m];
        if (i == 0 || v[i].k[0] != v[i - 1].k[0])
            shops++; /* the rows come ordered by shop */
    }
    if (e->o->prometheus) {
        print_prometheus(v, n);
    } else if (e->o->json) {
        if (e->o->all)
            printf("{\"scope\":\"all\"");
        else
            printf("{\"scope\":\"shop\",\"shop_id\":%" PRIu64, shop);
        printf(",\"keys\":[");
        for (size_t i = 0; i < n; i++) {
            printf("%s{", i ? "," : "");
            print_key_json(v[i].k, 3);
            for (int m = 0; m < N_SV; m++)
                printf(",\"%s\":%" PRId64, stat_defs[m].json, v[i].v[m]);
            putchar('}');
        }
        printf("],\"totals\":{\"shops\":%zu,\"keys\":%zu", shops, n);
        for (int m = 0; m < N_SV; m++)
            printf(",\"%s\":%" PRId64, stat_defs[m].json, tot[m]);
        printf("}}\n");
    } else {
        if (n) {
            printf("%-20s %-20s %-20s", "SHOP", "ITEM", "LOCATION");
            for (int m = 0; m < N_SV; m++)
                printf(" %10s", stat_defs[m].column);
            putchar('\n');
        }
        for (size_t i = 0; i < n; i++) {
            printf("%-20" PRIu64 " %-20" PRIu64 " %-20" PRIu64, v[i].k[0],
                   v[i].k[1], v[i].k[2]);
            for (int m = 0; m < N_SV; m++)
                printf(" %10" PRId64, v[i].v[m]);
            putchar('\n');
        }
        printf("total: %zu shop(s), %zu item/location key(s)", shops, n);
        for (int m = 0; m < N_SV; m++)
            printf(", %s %" PRId64, stat_defs[m].json, tot[m]);
        putchar('\n');
    }
    free(v);
    if (n == 0 && !e->o->all) {
        fprintf(stderr, "%s: shop %" PRIu64 " has no stock ledger rows\n",
                prog, shop);
        return EXIT_FOUND;
    }
    return EXIT_OKAY;
}

/* ---------------- main ---------------- */

typedef struct command {
    const char *name;
    int nargs;        /* exact number of arguments; -1 = checked by cmd */
    int (*run)(const cmd_env *);
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
};

/* Is `name` one of the space-separated words of `list`? */
static int one_of(const char *name, const char *list)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        size_t w = strcspn(p, " ");
        if (w == n && strncmp(p, name, n) == 0)
            return 1;
        p += w;
        p += strspn(p, " ");
    }
    return 0;
}

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
    if (o.prometheus && !one_of(cmd->name, "stats"))
        return usage_fail("--prometheus only applies to stats", NULL);
    if (o.prometheus && o.json)
        return usage_fail("give --json or --prometheus, not both", NULL);

    MYSQL *conn;
    rsv_ctx *ctx;
    if ((st = connect_db(&o, &conn, &ctx)) != EXIT_OKAY)
        return st;
    cmd_env e = {&o, conn, ctx, (const char *const *)&o.pos[1], o.npos - 1};
    st = cmd->run(&e);
    rsv_close(ctx);
    mysql_close(conn);
    return st;
}
