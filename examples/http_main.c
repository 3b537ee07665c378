/*
 * http_main.c - the program around the HTTP checkout server
 * (examples/http_checkout.c): its options, and either the server alone
 * until SIGINT or SIGTERM (--serve), or the demo's flash sale against it,
 * checked against the tables afterwards.
 *
 * The sale (the default, which `make demo` runs): the server and, on the
 * same loop, --buyers HTTP clients (examples/http_sale.c) that each buy
 * one unit of one item with --stock units, all at once.  Then it checks:
 * units claimed == stock taken off the ledger, nothing left held, nothing
 * oversold, rsv_audit clean; and prints how long the loop ever went
 * without turning.  The server stops at the end of the sale.
 *
 *   ./http_checkout --socket /run/mysqld/mysqld.sock --database shop
 *   RSV_DSN=mariadb://shop:secret@localhost/shop ./http_checkout --serve &
 *   curl -d 'shop=3&token=abc&item=1&location=1' localhost:17080/reserve
 *
 * Port: --host:--port (default 127.0.0.1:17080, below Linux's ephemeral
 * range, 32768-60999, so no outgoing connection of this machine holds
 * it); when it is taken the next 19 ports are tried, and --port-file
 * says which one it got.  The database must hold the libreserve schema.
 *
 * Built by make (mk/http.mk):
 *   cc http_main.c http_checkout.c http_request.c http_sale.c \
 *      $(pkg-config --cflags --libs reserve libuv)
 *
 * Exit status: 0 when every check passed (--serve: stopped by a signal),
 * 1 otherwise, 2 on bad usage.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <reserve.h>
#include <uv.h>

#include "http_checkout.h"
#include "http_sale.h"

typedef struct options {
    const char *socket, *user, *password, *database, *port_file, *dsn;
    int serve, parts; /* parts: a --socket, --user, ... was given */
    int dsn_given;
    server_config server;
    sale_config sale;
    int64_t stock;
} options;

static void usage(FILE *f, const char *argv0)
{
    fprintf(f,
"usage: %s [options]\n"
"  --dsn DSN          the database, as every example names it (default\n"
"                     $RSV_DSN, unless the options below are given)\n"
"  --socket PATH      MariaDB Unix socket (default /run/mysqld/mysqld.sock)\n"
"  --user NAME        (default root)    --password PW\n"
"  --database DB      holds the libreserve schema (default $RSV_DEMO_DATABASE\n"
"                     or shop)\n"
"  --serve            run only the server, until SIGINT or SIGTERM\n"
"server:\n"
"  --host ADDR        listen on ADDR (127.0.0.1)\n"
"  --port N           listen on port N, or the next free of 20 (17080)\n"
"  --port-file PATH   write the port there once listening\n"
"  --contexts N       libreserve contexts, one connection each (8)\n"
"  --max-connections N  client connections at once (1024)\n"
"  --request-timeout-ms N  a request must arrive within this (10000)\n"
"  --idle-timeout-ms N     a kept-alive connection may idle this long (60000)\n"
"  --queue-timeout-ms N    wait this long for a free context, then 503 (5000)\n"
"  --call-timeout-ms N     a call's time budget (the library's: 5000)\n"
"  --ttl-ms N              holds last this long (the library's: 600000)\n"
"the sale (without --serve):\n"
"  --buyers N         concurrent buyers (300)\n"
"  --stock N          units of the item on sale (100)\n"
"  --fail-every N     one buyer in N releases instead of claiming (10)\n"
"  --shop ID --item ID --location ID   what is sold (3, 1, 1)\n", argv0);
}

static int parse_args(int argc, char **argv, options *o)
{
    const char *db = getenv("RSV_DEMO_DATABASE");
    memset(o, 0, sizeof *o);
    o->dsn = getenv("RSV_DSN");
    if (o->dsn && !*o->dsn)
        o->dsn = NULL;
    o->socket = "/run/mysqld/mysqld.sock";
    o->user = "root";
    o->database = db && *db ? db : "shop";
    server_config_init(&o->server);
    o->sale = (sale_config){NULL, 0, 300, 10, 3, 1, 1};
    o->stock = 100;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout, argv[0]);
            exit(0);
        }
        if (!strcmp(a, "--serve")) {
            o->serve = 1;
            continue;
        }
        if (i + 1 >= argc)
            return -1;
        const char *v = argv[++i];
        char *end;
        long long n = strtoll(v, &end, 10);
        int num = *v && !*end && n >= 0;
        if (!strcmp(a, "--dsn"))
            o->dsn = v, o->dsn_given = 1;
        else if (!strcmp(a, "--socket"))
            o->socket = v, o->parts = 1;
        else if (!strcmp(a, "--user"))
            o->user = v, o->parts = 1;
        else if (!strcmp(a, "--password"))
            o->password = v, o->parts = 1;
        else if (!strcmp(a, "--database"))
            o->database = v, o->parts = 1;
        else if (!strcmp(a, "--host"))
            o->server.host = v;
        else if (!strcmp(a, "--port-file"))
            o->port_file = v;
        else if (!num)
            return -1;
        else if (!strcmp(a, "--port") && n > 0 && n < 65536)
            o->server.port = (int)n;
        else if (!strcmp(a, "--contexts") && n >= 1 && n <= 256)
            o->server.contexts = (int)n;
        else if (!strcmp(a, "--max-connections") && n >= 1 && n <= 100000)
            o->server.max_connections = (int)n;
        else if (!strcmp(a, "--request-timeout-ms") && n >= 1)
            o->server.request_timeout_ms = n;
        else if (!strcmp(a, "--idle-timeout-ms") && n >= 1)
            o->server.idle_timeout_ms = n;
        else if (!strcmp(a, "--queue-timeout-ms") && n >= 1)
            o->server.queue_timeout_ms = n;
        else if (!strcmp(a, "--call-timeout-ms") && n >= 1)
            o->server.call_timeout_ms = n;
        else if (!strcmp(a, "--ttl-ms") && n >= 1)
            o->server.hold_ttl_ms = n;
        else if (!strcmp(a, "--buyers") && n >= 1 && n <= 10000)
            o->sale.buyers = (int)n;
        else if (!strcmp(a, "--stock"))
            o->stock = n;
        else if (!strcmp(a, "--fail-every"))
            o->sale.fail_every = (int)n;
        else if (!strcmp(a, "--shop"))
            o->sale.shop = (uint64_t)n;
        else if (!strcmp(a, "--item"))
            o->sale.item = (uint64_t)n;
        else if (!strcmp(a, "--location"))
            o->sale.location = (uint64_t)n;
        else
            return -1;
    }
    return 0;
}

/* mariadb://USER:PW@/DB?socket=PATH, every part %XX-escaped. */
static void dsn_part(char *out, size_t cap, const char *s)
{
    size_t n = strlen(out);
    for (; s && *s && n + 4 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
            (ch >= '0' && ch <= '9') || strchr("-_.~/", ch))
            out[n++] = (char)ch;
        else
            n += (size_t)snprintf(out + n, cap - n, "%%%02X", ch);
    }
    out[n] = '\0';
}

static void make_dsn(const options *o, char *out, size_t cap)
{
    snprintf(out, cap, "mariadb://");
    dsn_part(out, cap, o->user);
    if (o->password) {
        strncat(out, ":", cap - strlen(out) - 1);
        dsn_part(out, cap, o->password);
    }
    strncat(out, "@/", cap - strlen(out) - 1);
    dsn_part(out, cap, o->database);
    strncat(out, "?socket=", cap - strlen(out) - 1);
    dsn_part(out, cap, o->socket);
}

static uv_signal_t sigint, sigterm;

static void on_signal(uv_signal_t *h, int signum)
{
    (void)signum;
    server_shutdown(h->data);
    uv_close((uv_handle_t *)&sigint, NULL);
    uv_close((uv_handle_t *)&sigterm, NULL);
}

static int serve(uv_loop_t *loop, server *srv, const options *o)
{
    printf("listening on http://%s:%d/ with %d contexts\n", o->server.host,
           server_port(srv), o->server.contexts);
    fflush(stdout);
    if (o->port_file) {
        FILE *f = fopen(o->port_file, "w");
        if (!f || fprintf(f, "%d\n", server_port(srv)) < 0 || fclose(f)) {
            perror(o->port_file);
            return 1;
        }
    }
    uv_signal_init(loop, &sigint);
    uv_signal_init(loop, &sigterm);
    sigint.data = sigterm.data = srv;
    uv_signal_start(&sigint, on_signal, SIGINT);
    uv_signal_start(&sigterm, on_signal, SIGTERM);
    uv_run(loop, UV_RUN_DEFAULT);
    printf("stopped\n");
    return 0;
}

static void sale_done(void *srv) { server_shutdown(srv); }

static void print_violation(void *arg, uint64_t shop, uint64_t item,
                            uint64_t loc, const char *problem)
{
    (void)arg;
    fprintf(stderr, "audit: shop %" PRIu64 " item %" PRIu64 " location %"
                    PRIu64 ": %s\n", shop, item, loc, problem);
}

static int run_sale(uv_loop_t *loop, server *srv, options *o,
                    const char *dsn)
{
    sale_config *c = &o->sale;
    /* The stock is set with a blocking call of a context of its own,
     * before the loop runs. */
    rsv_ctx *admin = NULL;
    int rc = rsv_open_dsn(&admin, dsn, NULL);
    if (rc == RSV_OK)
        rc = rsv_stock_set(admin, c->shop, c->item, c->location, o->stock);
    if (rc != RSV_OK) {
        fprintf(stderr, "setup: %s: %s\n", rsv_code_name(rc),
                rsv_errmsg(admin));
        return 1;
    }
    printf("HTTP flash sale: %d buyers, %" PRId64 " units of item %" PRIu64
           " (shop %" PRIu64 "), server on %s:%d with %d contexts\n",
           c->buyers, o->stock, c->item, c->shop, o->server.host,
           server_port(srv), o->server.contexts);
    c->host = o->server.host;
    c->port = server_port(srv);
    sale *s;
    if (sale_start(&s, loop, c, sale_done, srv) != 0) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    uint64_t t0 = uv_hrtime();
    uv_run(loop, UV_RUN_DEFAULT);
    double secs = (double)(uv_hrtime() - t0) / 1e9;
    const sale_result *r = sale_get_result(s);
    const server_stats *st = server_get_stats(srv);

    int64_t on_hand = -1, held = -1, violations = -1;
    rc = rsv_stock_get(admin, c->shop, c->item, c->location, &on_hand, &held,
                       NULL, NULL);
    int arc = rsv_audit(admin, c->shop, 0, print_violation, NULL, &violations);
    if (rc != RSV_OK || arc != RSV_OK)
        fprintf(stderr, "checking: %s\n", rsv_errmsg(admin));
    rsv_close(admin);

    long oversold = r->sold > o->stock ? r->sold - o->stock : 0;
    int sold_ok = rc == RSV_OK && o->stock - on_hand == r->sold;
    int held_ok = rc == RSV_OK && held == 0;
    int audit_ok = arc == RSV_OK && violations == 0;
    int count_ok = r->reserved == r->sold + r->released &&
                   r->reserved + r->out_of_stock + r->errors == c->buyers;
    printf("finished in %.2f s: %" PRIu64 " HTTP requests on %" PRIu64
           " connections, up to %" PRIu64 " queued for a context\n", secs,
           st->requests, st->accepted, st->queued_max);
    printf("reserved            %ld checkouts\n", r->reserved);
    printf("sold (claimed)      %ld units\n", r->sold);
    printf("released (failed)   %ld units\n", r->released);
    printf("out of stock        %ld answers\n", r->out_of_stock);
    printf("errors              %ld\n", r->errors);
    printf("oversold            %ld\n", oversold);
    printf("final stock         on hand %" PRId64 ", held %" PRId64 "\n",
           on_hand, held);
    printf("sold-count check    initial %" PRId64 " - final on hand %" PRId64
           " = %" PRId64 " %s sold %ld: %s\n", o->stock, on_hand,
           o->stock - on_hand, sold_ok ? "==" : "!=", r->sold,
           sold_ok ? "ok" : "FAILED");
    printf("nothing held        %s\n", held_ok ? "ok" : "FAILED");
    printf("audit               %" PRId64 " violation(s): %s\n", violations,
           audit_ok ? "ok" : "FAILED");
    printf("event loop          largest gap between 10 ms ticks: %" PRIu64
           " ms\n", r->max_gap_ms);
    int failed = !sold_ok || !held_ok || !audit_ok || !count_ok ||
                 oversold || r->errors;
    if (!count_ok)
        printf("count check         FAILED (reserved != sold + released, or "
               "answers missing)\n");
    printf("\n%s\n", failed ? "http demo: FAILED"
                            : "http demo: all checks passed");
    sale_free(s);
    return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    options o;
    if (parse_args(argc, argv, &o) != 0) {
        usage(stderr, argv[0]);
        return 2;
    }
    /* a client that hangs up must not kill the server with SIGPIPE */
    signal(SIGPIPE, SIG_IGN);
    char dsn[1024];
    /* --dsn, else the parts given on the command line, else $RSV_DSN,
     * else the parts' defaults. */
    if (o.dsn && (o.dsn_given || !o.parts))
        snprintf(dsn, sizeof dsn, "%s", o.dsn);
    else
        make_dsn(&o, dsn, sizeof dsn);
    o.server.dsn = dsn;
    uv_loop_t *loop = uv_default_loop();
    server *srv;
    if (server_start(&srv, loop, &o.server) != 0)
        return 1;
    int status = o.serve ? serve(loop, srv, &o) : run_sale(loop, srv, &o, dsn);
    server_free(srv);
    uv_loop_close(loop);
    return status;
}
