/*
 * http_checkout.c - an HTTP checkout server on libuv that never waits on
 * the database, and a flash sale of a few hundred buyers against it.
 *
 * The server: one libuv loop, a listening socket on 127.0.0.1 and a
 * handful of libreserve contexts (--contexts, each on a connection of its
 * own from rsv_open_dsn), attached to the loop with <reserve/libuv.h>.  A
 * request takes a free context and starts its call (rsv_reserve_one_start,
 * rsv_claim_start, rsv_release_start); the loop goes on serving the others
 * and writes the answer when the call is done: the code's name and the
 * context's message.
 *
 *   POST /reserve?shop=3&token=abc&item=1&location=1&quantity=1
 *     200 RSV_OK
 *     409 RSV_EOUTOFSTOCK line 0 (item 1, 1 units) cannot be covered ...
 *   POST /claim?shop=3&token=abc          POST /release?shop=3&token=abc
 *
 * Requests wait in a queue while every context is busy.  The request line
 * is parsed by hand (any method; %XX escapes in the token); every answer
 * closes the connection.
 *
 * The sale (the default): the server and, on the same loop, --buyers HTTP
 * clients (libuv TCP) that each buy one unit of one item with --stock
 * units, all at once: reserve, then claim (the payment succeeded) or, for
 * one buyer in --fail-every, release.  It prints what was sold and checks
 * it against the tables: units claimed == stock taken off the ledger,
 * nothing left held, nothing oversold, rsv_audit clean; and how long the
 * loop ever went without turning (a 10 ms timer).  --serve runs only the
 * server, until interrupted (try it with curl).
 *
 * Port: 127.0.0.1:--port (default 17080: below Linux's ephemeral range,
 * 32768-60999, so no outgoing connection of this machine holds it); when
 * it is taken the next 19 ports are tried.  The server stops at the end of
 * the sale.
 *
 * Built and run by `make demo` after examples/checkout_demo.c (see
 * examples/run-demo.sh); by hand:
 *   cc http_checkout.c $(pkg-config --cflags --libs reserve libuv)
 *   ./a.out --socket /run/mysqld/mysqld.sock --database shop_test
 * The database must hold the libreserve schema; the sale writes to shop 3
 * (--shop).
 *
 * Exit status: 0 when every check passed, 1 otherwise, 2 on bad usage.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <reserve.h>
#include <reserve/libuv.h>
#include <uv.h>

/* ------------------------------------------------------------------ */
/* Options                                                            */
/* ------------------------------------------------------------------ */

typedef struct config {
    const char *socket, *user, *password, *database;
    int port, contexts, buyers, fail_every, serve;
    int64_t stock;
    uint64_t shop, item, location;
} config;

static void usage(FILE *f, const char *argv0)
{
    fprintf(f,
"usage: %s [options]\n"
"  --socket PATH      MariaDB Unix socket (default /run/mysqld/mysqld.sock)\n"
"  --user NAME        (default root)    --password PW\n"
"  --database DB      holds the libreserve schema (default $RSV_DEMO_DATABASE\n"
"                     or shop)\n"
"  --port N           listen on 127.0.0.1:N, or the next free of 20 (17080)\n"
"  --contexts N       libreserve contexts, one connection each (8)\n"
"  --buyers N         concurrent buyers in the sale (300)\n"
"  --stock N          units of the item on sale (100)\n"
"  --fail-every N     one buyer in N releases instead of claiming (10)\n"
"  --shop ID --item ID --location ID   what is sold (3, 1, 1)\n"
"  --serve            run only the server, until interrupted\n", argv0);
}

static int parse_args(int argc, char **argv, config *c)
{
    const char *db = getenv("RSV_DEMO_DATABASE");
    *c = (config){"/run/mysqld/mysqld.sock", "root", NULL,
                  db && *db ? db : "shop", 17080, 8, 300, 10, 0, 100, 3, 1,
                  1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout, argv[0]);
            exit(0);
        }
        if (!strcmp(a, "--serve")) {
            c->serve = 1;
            continue;
        }
        if (i + 1 >= argc)
            return -1;
        const char *v = argv[++i];
        char *end;
        long long n = strtoll(v, &end, 10);
        int num_ok = *v && !*end && n >= 0;
        if (!strcmp(a, "--socket"))
            c->socket = v;
        else if (!strcmp(a, "--user"))
            c->user = v;
        else if (!strcmp(a, "--password"))
            c->password = v;
        else if (!strcmp(a, "--database"))
            c->database = v;
        else if (!num_ok)
            return -1;
        else if (!strcmp(a, "--port") && n > 0 && n < 65536)
            c->port = (int)n;
        else if (!strcmp(a, "--contexts") && n >= 1 && n <= 256)
            c->contexts = (int)n;
        else if (!strcmp(a, "--buyers") && n >= 1 && n <= 10000)
            c->buyers = (int)n;
        else if (!strcmp(a, "--stock"))
            c->stock = n;
        else if (!strcmp(a, "--fail-every"))
            c->fail_every = (int)n;
        else if (!strcmp(a, "--shop"))
            c->shop = (uint64_t)n;
        else if (!strcmp(a, "--item"))
            c->item = (uint64_t)n;
        else if (!strcmp(a, "--location"))
            c->location = (uint64_t)n;
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

static void make_dsn(const config *c, char *out, size_t cap)
{
    snprintf(out, cap, "mariadb://");
    dsn_part(out, cap, c->user);
    if (c->password) {
        strncat(out, ":", cap - strlen(out) - 1);
        dsn_part(out, cap, c->password);
    }
    strncat(out, "@/", cap - strlen(out) - 1);
    dsn_part(out, cap, c->database);
    strncat(out, "?socket=", cap - strlen(out) - 1);
    dsn_part(out, cap, c->socket);
}

/* ------------------------------------------------------------------ */
/* The server                                                         */
/* ------------------------------------------------------------------ */

enum { EP_RESERVE, EP_CLAIM, EP_RELEASE };

typedef struct server server;
typedef struct request request;

typedef struct slot {      /* a context and what it serves */
    rsv_ctx *ctx;
    rsv_uv *uv;
    request *req;
    server *srv;
} slot;

struct request {
    uv_tcp_t tcp;
    uv_write_t wr;
    server *srv;
    char in[2048];
    size_t len;
    char out[1024];
    int ep;
    uint64_t shop, item, loc;
    int64_t qty;
    char token[RSV_TOKEN_MAX + 1];
    size_t token_len;
    request *next;         /* in the queue */
};

struct server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    int port;
    slot *slots;
    slot **idle;
    int nslots, nidle;
    request *qhead, *qtail;
    long served, queued_max, qlen;
};

static void req_closed(uv_handle_t *h) { free(h->data); }

static void written(uv_write_t *w, int status)
{
    request *r = w->data;
    (void)status;
    uv_close((uv_handle_t *)&r->tcp, req_closed);
}

static void respond(request *r, int http, const char *body)
{
    const char *reason = http == 200   ? "OK"
                         : http == 409 ? "Conflict"
                         : http == 400 ? "Bad Request"
                         : http == 404 ? "Not Found"
                                       : "Internal Server Error";
    int n = snprintf(r->out, sizeof r->out,
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     http, reason, strlen(body), body);
    if (n < 0 || (size_t)n >= sizeof r->out)
        n = (int)sizeof r->out - 1;
    uv_buf_t b = uv_buf_init(r->out, (unsigned)n);
    r->wr.data = r;
    if (uv_write(&r->wr, (uv_stream_t *)&r->tcp, &b, 1, written) != 0)
        uv_close((uv_handle_t *)&r->tcp, req_closed);
}

static void run_on(slot *s, request *r);

/* The call is done: answer, and give the context to the next request. */
static void call_done(rsv_ctx *ctx, int code, void *data)
{
    slot *s = data;
    server *srv = s->srv;
    request *r = s->req;
    char body[700];
    snprintf(body, sizeof body, "%s %s\n",
             rsv_code_name(code) ? rsv_code_name(code) : "?",
             code == RSV_OK ? "" : rsv_errmsg(ctx));
    respond(r, code == RSV_OK ? 200 : code < 0 && code >= RSV_EINDOUBT ? 409
                                                                   : 500,
            body);
    srv->served++;
    s->req = NULL;
    /* The connection is gone after these: connect again (a blocking call,
     * short and rare; a server that cannot afford it would do it on a
     * thread of its own).  An in-doubt call is settled by the client
     * repeating it with the same token. */
    if (code == RSV_ECONN || code == RSV_EINDOUBT)
        rsv_reconnect(ctx);
    request *next = srv->qhead;
    if (next) {
        srv->qhead = next->next;
        if (!srv->qhead)
            srv->qtail = NULL;
        srv->qlen--;
        run_on(s, next);
    } else {
        srv->idle[srv->nidle++] = s;
    }
}

static void run_on(slot *s, request *r)
{
    int rc;
    s->req = r;
    if (r->ep == EP_RESERVE)
        rc = rsv_reserve_one_start(s->ctx, r->shop, r->token, r->token_len,
                                   r->item, r->loc, r->qty, 0);
    else if (r->ep == EP_CLAIM)
        rc = rsv_claim_start(s->ctx, r->shop, r->token, r->token_len);
    else
        rc = rsv_release_start(s->ctx, r->shop, r->token, r->token_len);
    rsv_uv_wait(s->uv, rc, call_done, s);
}

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* "METHOD /path?k=v&k=v HTTP/1.1": fills r, or says what is wrong. */
static const char *parse_request(request *r)
{
    char *sp = strchr(r->in, ' ');
    if (!sp)
        return "malformed request line";
    char *target = sp + 1, *end = strchr(target, ' ');
    if (!end)
        return "malformed request line";
    *end = '\0';
    char *q = strchr(target, '?');
    if (q)
        *q++ = '\0';
    if (!strcmp(target, "/reserve"))
        r->ep = EP_RESERVE;
    else if (!strcmp(target, "/claim"))
        r->ep = EP_CLAIM;
    else if (!strcmp(target, "/release"))
        r->ep = EP_RELEASE;
    else
        return NULL; /* 404, below */
    int have_shop = 0, have_token = 0;
    r->qty = 1;
    for (char *kv = q ? strtok(q, "&") : NULL; kv; kv = strtok(NULL, "&")) {
        char *v = strchr(kv, '=');
        if (!v)
            continue;
        *v++ = '\0';
        if (!strcmp(kv, "token")) {
            size_t n = 0;
            for (const char *p = v; *p && n < RSV_TOKEN_MAX; p++) {
                int hi, lo;
                if (*p == '%' && (hi = hexval(p[1])) >= 0 &&
                    (lo = hexval(p[2])) >= 0) {
                    r->token[n++] = (char)(hi * 16 + lo);
                    p += 2;
                } else {
                    r->token[n++] = *p;
                }
            }
            r->token_len = n;
            have_token = 1;
        } else if (!strcmp(kv, "shop")) {
            r->shop = strtoull(v, NULL, 10);
            have_shop = 1;
        } else if (!strcmp(kv, "item")) {
            r->item = strtoull(v, NULL, 10);
        } else if (!strcmp(kv, "location")) {
            r->loc = strtoull(v, NULL, 10);
        } else if (!strcmp(kv, "quantity")) {
            r->qty = strtoll(v, NULL, 10);
        }
    }
    if (!have_shop || !have_token)
        return "shop and token are required";
    return "";
}

static void req_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    request *r = h->data;
    (void)hint;
    *buf = uv_buf_init(r->in + r->len, (unsigned)(sizeof r->in - 1 - r->len));
}

static void req_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    request *r = st->data;
    (void)buf;
    if (n < 0) {
        uv_close((uv_handle_t *)&r->tcp, req_closed);
        return;
    }
    r->len += (size_t)n;
    r->in[r->len] = '\0';
    if (!strstr(r->in, "\r\n\r\n")) {
        if (r->len == sizeof r->in - 1) {
            uv_read_stop(st);
            respond(r, 400, "request too long\n");
        }
        return;
    }
    uv_read_stop(st);
    const char *bad = parse_request(r);
    if (!bad) {
        respond(r, 404, "unknown endpoint: /reserve, /claim, /release\n");
        return;
    }
    if (*bad) {
        char body[128];
        snprintf(body, sizeof body, "%s\n", bad);
        respond(r, 400, body);
        return;
    }
    server *srv = r->srv;
    if (srv->nidle > 0) {
        run_on(srv->idle[--srv->nidle], r);
        return;
    }
    if (srv->qtail)
        srv->qtail->next = r;
    else
        srv->qhead = r;
    srv->qtail = r;
    if (++srv->qlen > srv->queued_max)
        srv->queued_max = srv->qlen;
}

static void on_connection(uv_stream_t *l, int status)
{
    server *srv = l->data;
    if (status < 0)
        return;
    request *r = calloc(1, sizeof *r);
    if (!r)
        return;
    r->srv = srv;
    uv_tcp_init(srv->loop, &r->tcp);
    r->tcp.data = r;
    if (uv_accept(l, (uv_stream_t *)&r->tcp) != 0 ||
        uv_read_start((uv_stream_t *)&r->tcp, req_alloc, req_read) != 0)
        uv_close((uv_handle_t *)&r->tcp, req_closed);
}

static int server_start(server *srv, uv_loop_t *loop, const config *c)
{
    memset(srv, 0, sizeof *srv);
    srv->loop = loop;
    srv->nslots = c->contexts;
    srv->slots = calloc((size_t)c->contexts, sizeof *srv->slots);
    srv->idle = calloc((size_t)c->contexts, sizeof *srv->idle);
    if (!srv->slots || !srv->idle)
        return -1;
    char dsn[1024];
    make_dsn(c, dsn, sizeof dsn);
    for (int i = 0; i < c->contexts; i++) {
        slot *s = &srv->slots[i];
        s->srv = srv;
        int rc = rsv_open_dsn(&s->ctx, dsn, NULL);
        if (rc != RSV_OK) {
            fprintf(stderr, "rsv_open_dsn: %s: %s\n", rsv_code_name(rc),
                    rsv_errmsg(s->ctx));
            return -1;
        }
        if ((rc = rsv_uv_attach(&s->uv, loop, s->ctx)) != 0) {
            fprintf(stderr, "rsv_uv_attach: %d\n", rc);
            return -1;
        }
        srv->idle[srv->nidle++] = s;
    }
    uv_tcp_init(loop, &srv->listener);
    srv->listener.data = srv;
    for (int p = c->port; p < c->port + 20 && p < 65536; p++) {
        struct sockaddr_in addr;
        uv_ip4_addr("127.0.0.1", p, &addr);
        if (uv_tcp_bind(&srv->listener, (const struct sockaddr *)&addr, 0) ==
                0 &&
            uv_listen((uv_stream_t *)&srv->listener, 1024, on_connection) ==
                0) {
            srv->port = p;
            return 0;
        }
        /* a failed bind or listen leaves the handle unusable: anew */
        uv_close((uv_handle_t *)&srv->listener, NULL);
        uv_run(loop, UV_RUN_NOWAIT);
        uv_tcp_init(loop, &srv->listener);
        srv->listener.data = srv;
    }
    fprintf(stderr, "no free port in %d..%d on 127.0.0.1\n", c->port,
            c->port + 19);
    return -1;
}

static void server_stop(server *srv)
{
    uv_close((uv_handle_t *)&srv->listener, NULL);
    for (int i = 0; i < srv->nslots; i++)
        rsv_uv_detach(srv->slots[i].uv);
}

static void server_free(server *srv)
{
    for (int i = 0; i < srv->nslots; i++)
        rsv_close(srv->slots[i].ctx);
    free(srv->slots);
    free(srv->idle);
}

/* ------------------------------------------------------------------ */
/* The buyers                                                         */
/* ------------------------------------------------------------------ */

typedef struct sale {
    const config *c;
    server *srv;
    uv_loop_t *loop;
    uv_timer_t tick;
    uint64_t last_tick_ms, max_gap_ms;
    int finished;
    long reserved, sold, released, out_of_stock, errors;
} sale;

typedef struct buyer {
    uv_tcp_t tcp;
    uv_connect_t conn;
    uv_write_t wr;
    sale *s;
    int id, step, pays;
    char req[512], resp[2048];
    size_t rlen;
    char code[32];
} buyer;

static void buyer_send(buyer *b);

static void buyer_finish(buyer *b)
{
    sale *s = b->s;
    if (++s->finished == s->c->buyers) {
        uv_timer_stop(&s->tick);
        uv_close((uv_handle_t *)&s->tick, NULL);
        server_stop(s->srv);
    }
}

static void buyer_closed(uv_handle_t *h)
{
    buyer *b = h->data;
    sale *s = b->s;
    int ok = !strcmp(b->code, "RSV_OK");
    if (b->step == 0) {
        if (ok) {
            s->reserved++;
            b->step = 1;
            buyer_send(b);
            return;
        }
        if (!strcmp(b->code, "RSV_EOUTOFSTOCK"))
            s->out_of_stock++;
        else {
            s->errors++;
            fprintf(stderr, "buyer %d reserve: %.200s\n", b->id, b->resp);
        }
    } else if (ok) {
        if (b->pays)
            s->sold++;
        else
            s->released++;
    } else {
        s->errors++;
        fprintf(stderr, "buyer %d %s: %.200s\n", b->id,
                b->pays ? "claim" : "release", b->resp);
    }
    buyer_finish(b);
}

static void buyer_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    buyer *b = h->data;
    (void)hint;
    *buf = uv_buf_init(b->resp + b->rlen,
                       (unsigned)(sizeof b->resp - 1 - b->rlen));
}

static void buyer_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    buyer *b = st->data;
    (void)buf;
    if (n > 0) {
        b->rlen += (size_t)n;
        b->resp[b->rlen] = '\0';
        if (b->rlen < sizeof b->resp - 1)
            return;
    } else if (n == 0) {
        return;
    }
    /* EOF (the server closes after answering), an error or a full
     * buffer: the body's first word is the code's name */
    const char *body = strstr(b->resp, "\r\n\r\n");
    b->code[0] = '\0';
    if (body)
        sscanf(body + 4, "%31s", b->code);
    uv_close((uv_handle_t *)&b->tcp, buyer_closed);
}

static void buyer_written(uv_write_t *w, int status)
{
    buyer *b = w->data;
    if (status == 0 &&
        uv_read_start((uv_stream_t *)&b->tcp, buyer_alloc, buyer_read) == 0)
        return;
    b->code[0] = '\0';
    uv_close((uv_handle_t *)&b->tcp, buyer_closed);
}

static void buyer_connected(uv_connect_t *cr, int status)
{
    buyer *b = cr->data;
    if (status != 0) {
        snprintf(b->resp, sizeof b->resp, "connect: %s", uv_strerror(status));
        b->code[0] = '\0';
        uv_close((uv_handle_t *)&b->tcp, buyer_closed);
        return;
    }
    uv_buf_t buf = uv_buf_init(b->req, (unsigned)strlen(b->req));
    b->wr.data = b;
    if (uv_write(&b->wr, (uv_stream_t *)&b->tcp, &buf, 1, buyer_written))
        uv_close((uv_handle_t *)&b->tcp, buyer_closed);
}

static void buyer_send(buyer *b)
{
    const config *c = b->s->c;
    if (b->step == 0)
        snprintf(b->req, sizeof b->req,
                 "POST /reserve?shop=%" PRIu64 "&token=buyer-%d&item=%" PRIu64
                 "&location=%" PRIu64 "&quantity=1 HTTP/1.1\r\nHost: "
                 "127.0.0.1\r\nContent-Length: 0\r\n\r\n",
                 c->shop, b->id, c->item, c->location);
    else
        snprintf(b->req, sizeof b->req,
                 "POST /%s?shop=%" PRIu64 "&token=buyer-%d HTTP/1.1\r\n"
                 "Host: 127.0.0.1\r\nContent-Length: 0\r\n\r\n",
                 b->pays ? "claim" : "release", c->shop, b->id);
    b->rlen = 0;
    b->resp[0] = '\0';
    uv_tcp_init(b->s->loop, &b->tcp);
    b->tcp.data = b;
    b->conn.data = b;
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", b->s->srv->port, &addr);
    if (uv_tcp_connect(&b->conn, &b->tcp, (const struct sockaddr *)&addr,
                       buyer_connected) != 0)
        uv_close((uv_handle_t *)&b->tcp, buyer_closed);
}

static void on_tick(uv_timer_t *t)
{
    sale *s = t->data;
    uint64_t now = uv_now(s->loop);
    if (s->last_tick_ms && now - s->last_tick_ms > s->max_gap_ms)
        s->max_gap_ms = now - s->last_tick_ms;
    s->last_tick_ms = now;
}

/* ------------------------------------------------------------------ */
/* main                                                               */
/* ------------------------------------------------------------------ */

static void print_violation(void *arg, uint64_t shop, uint64_t item,
                            uint64_t loc, const char *problem)
{
    (void)arg;
    fprintf(stderr, "audit: shop %" PRIu64 " item %" PRIu64 " location %"
                    PRIu64 ": %s\n", shop, item, loc, problem);
}

int main(int argc, char **argv)
{
    config c;
    if (parse_args(argc, argv, &c) != 0) {
        usage(stderr, argv[0]);
        return 2;
    }
    uv_loop_t *loop = uv_default_loop();
    server srv;
    if (server_start(&srv, loop, &c) != 0)
        return 1;
    if (c.serve) {
        printf("listening on http://127.0.0.1:%d/ with %d contexts\n",
               srv.port, c.contexts);
        fflush(stdout);
        uv_run(loop, UV_RUN_DEFAULT);
        return 0;
    }

    /* Set the stock with a blocking call of a context of its own, before
     * the loop runs. */
    char dsn[1024];
    make_dsn(&c, dsn, sizeof dsn);
    rsv_ctx *admin = NULL;
    int rc = rsv_open_dsn(&admin, dsn, NULL);
    if (rc == RSV_OK)
        rc = rsv_stock_set(admin, c.shop, c.item, c.location, c.stock);
    if (rc != RSV_OK) {
        fprintf(stderr, "setup: %s: %s\n", rsv_code_name(rc),
                rsv_errmsg(admin));
        return 1;
    }
    int64_t initial = c.stock;

    printf("HTTP flash sale: %d buyers, %" PRId64 " units of item %" PRIu64
           " (shop %" PRIu64 "), server on 127.0.0.1:%d with %d contexts\n",
           c.buyers, c.stock, c.item, c.shop, srv.port, c.contexts);
    sale s = {0};
    s.c = &c;
    s.srv = &srv;
    s.loop = loop;
    uv_timer_init(loop, &s.tick);
    s.tick.data = &s;
    uv_timer_start(&s.tick, on_tick, 10, 10);
    buyer *buyers = calloc((size_t)c.buyers, sizeof *buyers);
    if (!buyers)
        return 1;
    uint64_t t0 = uv_hrtime();
    for (int i = 0; i < c.buyers; i++) {
        buyers[i].s = &s;
        buyers[i].id = i;
        buyers[i].pays = c.fail_every <= 0 || (i + 1) % c.fail_every != 0;
        buyer_send(&buyers[i]);
    }
    uv_run(loop, UV_RUN_DEFAULT);
    double secs = (double)(uv_hrtime() - t0) / 1e9;
    server_free(&srv);
    free(buyers);

    int64_t on_hand = -1, held = -1, violations = -1;
    rc = rsv_stock_get(admin, c.shop, c.item, c.location, &on_hand, &held,
                       NULL, NULL);
    int arc = rsv_audit(admin, c.shop, 0, print_violation, NULL, &violations);
    if (rc != RSV_OK || arc != RSV_OK)
        fprintf(stderr, "checking: %s\n", rsv_errmsg(admin));
    rsv_close(admin);

    long oversold = s.sold > c.stock ? s.sold - c.stock : 0;
    int sold_ok = rc == RSV_OK && initial - on_hand == s.sold;
    int held_ok = rc == RSV_OK && held == 0;
    int audit_ok = arc == RSV_OK && violations == 0;
    int count_ok = s.reserved == s.sold + s.released &&
                   s.reserved + s.out_of_stock + s.errors == c.buyers;
    printf("finished in %.2f s: %ld HTTP requests served, up to %ld queued "
           "for a context\n", secs, srv.served, srv.queued_max);
    printf("reserved            %ld checkouts\n", s.reserved);
    printf("sold (claimed)      %ld units\n", s.sold);
    printf("released (failed)   %ld units\n", s.released);
    printf("out of stock        %ld answers\n", s.out_of_stock);
    printf("errors              %ld\n", s.errors);
    printf("oversold            %ld\n", oversold);
    printf("final stock         on hand %" PRId64 ", held %" PRId64 "\n",
           on_hand, held);
    printf("sold-count check    initial %" PRId64 " - final on hand %" PRId64
           " = %" PRId64 " %s sold %ld: %s\n", initial, on_hand,
           initial - on_hand, sold_ok ? "==" : "!=", s.sold,
           sold_ok ? "ok" : "FAILED");
    printf("nothing held        %s\n", held_ok ? "ok" : "FAILED");
    printf("audit               %" PRId64 " violation(s): %s\n", violations,
           audit_ok ? "ok" : "FAILED");
    printf("event loop          largest gap between 10 ms ticks: %" PRIu64
           " ms\n", s.max_gap_ms);
    int failed = !sold_ok || !held_ok || !audit_ok || !count_ok ||
                 oversold || s.errors;
    if (!count_ok)
        printf("count check         FAILED (reserved != sold + released, or "
               "answers missing)\n");
    printf("\n%s\n", failed ? "http demo: FAILED" : "http demo: all checks "
                                                    "passed");
    uv_loop_close(loop);
    return failed ? 1 : 0;
}
