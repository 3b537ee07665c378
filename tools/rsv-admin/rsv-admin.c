/*
 * rsv-admin - the operator's command-line tool for libreserve.
 *
 * Reads and changes the stock of a shop through the library (so every
 * change takes the same locks and keeps the same invariants as the
 * checkouts running next to it), runs the audit, gives back expired holds
 * and tops pools up.  Human-readable output by default, one JSON document
 * on stdout with --json.  See `rsv-admin --help` for the commands and the
 * exit codes.
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
    EXIT_ERROR = 3     /* connection, server or library failure */
};

typedef struct opts {
    const char *socket, *host, *user, *password, *database;
    unsigned int port;
    int json, all, hex, no_defaults;
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
"  audit SHOP | audit --all          check the invariants (exit 1 if any\n"
"                                    is violated)\n"
"  sweep SHOP [--max N]              give back expired holds (up to N)\n"
"  replenish SHOP ITEM LOCATION      top the pool up from the ledger\n"
"  drain SHOP ITEM LOCATION          give the pool back to the ledger (a\n"
"                                    sale is over)\n"
"  set-stock SHOP ITEM LOCATION N    set the stock on hand to N\n"
"  adjust-stock SHOP ITEM LOCATION D add D (may be negative) to the stock\n"
"  checkout SHOP TOKEN               the state of a checkout (--hex: TOKEN\n"
"                                    is hexadecimal)\n"
"\n"
"Options:\n"
"  --socket PATH      Unix socket of the server\n"
"  --host HOST        server host (TCP)\n"
"  --port N           server port\n"
"  --user NAME        user name\n"
"  --password PW      password (default: $RSV_ADMIN_PASSWORD)\n"
"  --database NAME    the database holding the libreserve schema\n"
"                     (default: $RSV_ADMIN_DATABASE)\n"
"  --no-defaults      do not read the [client] and [rsv-admin] groups of\n"
"                     the MariaDB option files\n"
"  --json             print one JSON object on stdout\n"
"  --help, --version\n"
"\n"
"Exit status:\n"
"  0  success (audit: no violation)\n"
"  1  the audit found violations, or the item, location, checkout or\n"
"     shop does not exist\n"
"  2  usage error: unknown command or option, bad argument value\n"
"  3  connection, server or library error (message on stderr), including\n"
"     a refused stock change (RSV_ESTOCK)\n", prog);
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

/* Report a library failure on stderr (and on stdout with --json); returns
 * the exit status for it. */
static int lib_fail(const opts *o, rsv_ctx *ctx, const char *what, int rc)
{
    const char *msg = ctx ? rsv_errmsg(ctx) : "";
    if (!msg || !*msg)
        msg = rsv_strerror(rc);
    fprintf(stderr, "%s: %s: %s: %s\n", prog, what, code_name(rc), msg);
    if (o->json) {
        printf("{\"error\":{\"code\":%d,\"name\":", rc);
        json_cstr(code_name(rc));
        printf(",\"message\":");
        json_cstr(msg);
        printf("}}\n");
    }
    switch (rc) {
    case RSV_ENOITEM:
    case RSV_ENOTFOUND:
        return EXIT_FOUND;
    case RSV_EINVAL:
    case RSV_EQUANTITY:
    case RSV_ETOKEN:
        return EXIT_USAGE;
    default:
        return EXIT_ERROR;
    }
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

/* Returns -1 to go on, or an exit status. */
static int parse_args(opts *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    o->password = getenv("RSV_ADMIN_PASSWORD");
    o->database = getenv("RSV_ADMIN_DATABASE");
    int only_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_pos || strncmp(a, "--", 2) != 0 || strcmp(a, "--") == 0) {
            if (!only_pos && strcmp(a, "--") == 0) {
                only_pos = 1;
                continue;
            }
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
        const char *v;
        if (strcmp(name, "--socket") && strcmp(name, "--host") &&
            strcmp(name, "--port") && strcmp(name, "--user") &&
            strcmp(name, "--password") && strcmp(name, "--database") &&
            strcmp(name, "--max"))
            return usage_fail("unknown option", name);
        if (eq)
            v = eq + 1;
        else if (i + 1 < argc)
            v = argv[++i];
        else
            return usage_fail("a value is missing for", name);
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
            printf("{\"error\":{\"code\":%d,\"name\":\"RSV_ECONN\","
                   "\"message\":", RSV_ECONN);
            json_cstr(mysql_error(m));
            printf("}}\n");
        }
        mysql_close(m);
        return EXIT_ERROR;
    }
    rsv_ctx *ctx = NULL;
    int rc = rsv_open(&ctx, m, NULL);
    if (rc != RSV_OK) {
        int st = lib_fail(o, ctx, "rsv_open", rc);
        rsv_close(ctx);
        mysql_close(m);
        return st == EXIT_USAGE || st == EXIT_FOUND ? EXIT_ERROR : st;
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

static int cmd_sweep(const cmd_env *e)
{
    uint64_t shop;
    int64_t released = 0;
    int st = ids(e, 1, &shop);
    if (st)
        return st;
    int rc = rsv_sweep(e->ctx, shop, e->o->have_max ? e->o->max : 0,
                       &released);
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
    if (mysql_real_query(e->conn, q, strlen(q)) != 0) {
        fprintf(stderr, "%s: levels: %s (MySQL error %u)\n", prog,
                mysql_error(e->conn), mysql_errno(e->conn));
        return EXIT_ERROR;
    }
    MYSQL_RES *r = mysql_store_result(e->conn);
    if (!r) {
        fprintf(stderr, "%s: levels: %s\n", prog, mysql_error(e->conn));
        return EXIT_ERROR;
    }
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
    if (e->o->all && e->nargs > 0)
        return usage_fail("audit: give a SHOP or --all, not both", NULL);
    if (!e->o->all) {
        if (e->nargs != 1)
            return usage_fail("audit needs a SHOP or --all", NULL);
        int st = ids(e, 1, &shop);
        if (st)
            return st;
    }
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

static int cmd_checkout(const cmd_env *e)
{
    uint64_t shop;
    int st = ids(e, 1, &shop);
    if (st)
        return st;
    const char *arg = e->args[1];
    unsigned char tok[RSV_TOKEN_MAX + 1];
    size_t len = 0;
    if (e->o->hex) {
        size_t n = strlen(arg);
        if (n % 2 || n / 2 > sizeof tok)
            return usage_fail("bad hexadecimal token", arg);
        for (size_t i = 0; i < n; i += 2) {
            int hi = hexval(arg[i]), lo = hexval(arg[i + 1]);
            if (hi < 0 || lo < 0)
                return usage_fail("bad hexadecimal token", arg);
            tok[len++] = (unsigned char)(hi * 16 + lo);
        }
    } else {
        len = strlen(arg);
        if (len > sizeof tok)
            len = sizeof tok; /* the library answers RSV_ETOKEN */
        memcpy(tok, arg, len);
    }
    int32_t status = 0;
    int64_t units = 0, expires_in = 0;
    int rc = rsv_checkout_status(e->ctx, shop, tok, len, &status, &units,
                                 &expires_in);
    if (rc != RSV_OK)
        return lib_fail(e->o, e->ctx, "rsv_checkout_status", rc);
    static const char *names[] = {"unknown", "held", "claimed", "released",
                                  "expired"};
    const char *name = status >= 1 && status <= 4 ? names[status] : "unknown";
    if (e->o->json) {
        printf("{\"shop_id\":%" PRIu64 ",\"token\":", shop);
        json_str(tok, len);
        printf(",\"token_hex\":\"");
        for (size_t i = 0; i < len; i++)
            printf("%02x", tok[i]);
        printf("\",\"status\":\"%s\",\"status_code\":%d,\"units\":%" PRId64
               ",\"expires_in_ms\":%" PRId64 "}\n", name, (int)status, units,
               expires_in);
    } else {
        printf("shop %" PRIu64 " checkout %s%s\n", shop, e->o->hex ? "0x" : "",
               arg);
        printf("  status      %s\n", name);
        printf("  units held  %" PRId64 "\n", units);
        if (expires_in >= 0)
            printf("  deadline    in %" PRId64 " ms\n", expires_in);
        else
            printf("  deadline    %" PRId64 " ms ago\n", -expires_in);
    }
    return EXIT_OKAY;
}

typedef struct command {
    const char *name;
    int nargs;        /* exact number of arguments; -1 = checked by cmd */
    int (*run)(const cmd_env *);
} command;

static const command commands[] = {
    {"stock", 3, cmd_stock},
    {"levels", 1, cmd_levels},
    {"audit", -1, cmd_audit},
    {"sweep", 1, cmd_sweep},
    {"replenish", 3, cmd_replenish},
    {"drain", 3, cmd_drain},
    {"set-stock", 4, cmd_set_stock},
    {"adjust-stock", 4, cmd_adjust_stock},
    {"checkout", 2, cmd_checkout},
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
    if (o.have_max && strcmp(cmd->name, "sweep") != 0)
        return usage_fail("--max only applies to sweep", NULL);
    if (o.all && strcmp(cmd->name, "audit") != 0)
        return usage_fail("--all only applies to audit", NULL);
    if (o.hex && strcmp(cmd->name, "checkout") != 0)
        return usage_fail("--hex only applies to checkout", NULL);

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
