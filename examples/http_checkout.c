/*
 * http_checkout.c - an HTTP checkout server on one libuv loop that never
 * waits on the database: the connections, their limits and timeouts, the
 * contexts the calls run on, and the JSON answers.  What a request may be
 * is examples/http_request.c's; the program around it (options, signals,
 * the demo's flash sale) is examples/http_main.c.
 *
 *   POST /reserve   shop, token, item, location[, quantity][, ttl_ms]
 *   POST /claim     shop, token          (the payment succeeded)
 *   POST /release   shop, token          (it failed, or the buyer left)
 *   GET  /status    shop, token          (the checkout's state)
 *   GET  /stats                          (this server's counters)
 *
 * Parameters come in the query string or, for POST, a form body
 * (application/x-www-form-urlencoded).  Every answer is JSON:
 *
 *   200 {"ok":true,"code":"RSV_OK","token":"abc","held":1}
 *   409 {"ok":false,"code":"RSV_EOUTOFSTOCK","token":"abc","message":"..."}
 *   400 {"ok":false,"code":"bad_request","message":"quantity must be ..."}
 *
 * How a request lives.  A connection reads one request at a time (bytes
 * a client sends ahead, pipelined, wait in its buffer).  A complete,
 * valid request takes a free context, or waits in a queue for one; its
 * call starts (rsv_*_start) and the loop serves everyone else until the
 * context's descriptor says the call is done (<reserve/libuv.h>).  Then
 * the answer is written, and the connection reads the next request.
 *
 * Clients that hang up.  A request whose client closed the connection
 * while it waited for a context is dropped: it was never started, so
 * nothing happened and no one waits for it.  A call already running is
 * not cancelled: rsv_cancel() would cut the connection mid-statement,
 * leaving a reserve or claim in doubt and the context needing a
 * reconnect.  It finishes cleanly and its answer is thrown away.  The
 * hold of a reserve finished that way is left to expire (hold_ttl_ms;
 * rsv-admin sweep gives it back), not released: the token is the
 * client's, a client that lost its answer repeats the reserve with the
 * same token, which re-reserves that checkout in one transaction, and a
 * release sent behind its back could land after that retry and take the
 * hold the client was just told it has.
 *
 * Limits.  A head over HTTP_HEAD_MAX (431) or a body over HTTP_BODY_MAX
 * (413), a request not complete within request_timeout_ms of its first
 * byte (408), and a malformed head (400) are answered and the connection
 * closed, since its framing can no longer be trusted; a bad parameter
 * (400), an unknown path (404) or a wrong method (405, with Allow) keep
 * it.  At most max_connections connections (each holds about 15 KiB of
 * buffers, so this bounds the memory too); a kept-alive connection idle
 * for idle_timeout_ms is closed; a request that waited queue_timeout_ms
 * for a context is answered 503 with Retry-After.
 *
 * Contexts.  Each context has a database connection of its own
 * (rsv_open_dsn).  After RSV_ECONN or RSV_EINDOUBT the connection is
 * gone, and after RSV_ENOTPRIMARY it leads to a server that no longer
 * takes writes: the context reconnects on libuv's thread pool (rsv_reconnect
 * blocks) and is out of service until it has, so the loop never waits.
 */
#include "http_checkout.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <reserve.h>
#include <reserve/async.h>
#include <reserve/libuv.h>

#include "http_request.h"

void server_config_init(server_config *c)
{
    memset(c, 0, sizeof *c);
    c->host = "127.0.0.1";
    c->port = 17080;
    c->contexts = 8;
    c->max_connections = 1024;
    c->request_timeout_ms = 10000;
    c->idle_timeout_ms = 60000;
    c->queue_timeout_ms = 5000;
}

typedef struct conn conn;

typedef struct slot {       /* a context and the request it serves */
    rsv_ctx *ctx;
    rsv_uv *uv;
    server *srv;
    conn *c;                /* the request running on it, or NULL */
    int reconnecting;       /* on the thread pool, or waiting to retry */
    int reconnect_rc;
    uv_work_t work;
    uv_timer_t retry;
    int32_t status;         /* rsv_checkout_status_start's outputs */
    int64_t units, expires_in_ms;
} slot;

enum conn_state {
    C_READING,              /* a request is being read (or none yet) */
    C_QUEUED,               /* complete, waiting for a context */
    C_RUNNING,              /* its call runs on a context */
    C_WRITING,              /* its answer is being written */
    C_LINGER,               /* closing: FIN sent, the rest read and
                               dropped, so the answer is not reset */
    C_DONE                  /* the call finished for a client that left */
};

struct conn {
    uv_tcp_t tcp;
    uv_timer_t timer;       /* the deadline of the current state */
    uv_write_t wr, wr_continue;
    uv_shutdown_t sd;
    server *srv;
    enum conn_state state;
    int handles;            /* open libuv handles: freed at 0 */
    int closing, reading, keep_alive, have_head;
    http_head head;
    checkout_req req;
    conn *prev, *next;      /* every open connection */
    conn *qnext;            /* the wait queue */
    size_t len;             /* bytes in `in` */
    char in[HTTP_HEAD_MAX + HTTP_BODY_MAX];
    char out[2048];
};

struct server {
    uv_loop_t *loop;
    server_config cfg;
    uv_tcp_t listener;
    int port, listening;
    int stopping;           /* server_shutdown was called */
    int stopped;            /* ... and its handles are closed */
    slot *slots;
    slot **idle;
    int nslots, nidle;
    conn *conns;            /* every open connection */
    long nconns;
    conn *qhead, *qtail;
    long qlen;
    server_stats stats;
};

static void conn_close(conn *c);
static void arm(conn *c);
static void slot_free(slot *s);
static void check_stopped(server *srv);

/* ------------------------------------------------------------------ */
/* Answers                                                            */
/* ------------------------------------------------------------------ */

typedef struct jbuf {
    char *p;
    size_t len, cap;
} jbuf;

static void jraw(jbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void jraw(jbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        b->len = b->len + (size_t)n < b->cap ? b->len + (size_t)n : b->cap - 1;
}

/* ,"key":"s" with s escaped; 0, or -1 (written nothing) when s is not
 * UTF-8 or does not fit. */
static int jstr(jbuf *b, const char *key, const void *s, size_t n)
{
    size_t mark = b->len;
    jraw(b, ",\"%s\":\"", key);
    long k = json_escape(b->p + b->len, b->cap - b->len, s, n);
    if (k < 0 || b->len + (size_t)k + 2 >= b->cap) {
        b->len = mark;
        b->p[mark] = '\0';
        return -1;
    }
    b->len += (size_t)k;
    jraw(b, "\"");
    return 0;
}

/* The token as a string, or as hex when it is not UTF-8. */
static void jtoken(jbuf *b, const checkout_req *r)
{
    if (jstr(b, "token", r->token, r->token_len) == 0)
        return;
    jraw(b, ",\"token_hex\":\"");
    for (size_t i = 0; i < r->token_len; i++)
        jraw(b, "%02x", r->token[i]);
    jraw(b, "\"");
}

static const char *reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Internal Server Error";
    }
}

static void written(uv_write_t *w, int status);

/* Write the answer; the connection goes on reading after it unless
 * keep_alive is off (or the server is stopping).  extra: more header
 * lines, each ending in CRLF, or "". */
static void answer(conn *c, int status, const char *extra, const char *body)
{
    server *srv = c->srv;
    /* HEAD: the same head, no body (the length is still the body's) */
    int head_only = c->have_head && !strcmp(c->head.method, "HEAD");
    if (srv->stopping)
        c->keep_alive = 0;
    size_t blen = strlen(body);
    int n = snprintf(c->out, sizeof c->out,
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: %s\r\n%s\r\n%s",
                     status, reason(status), blen,
                     c->keep_alive ? "keep-alive" : "close", extra,
                     head_only ? "" : body);
    if (n < 0 || (size_t)n >= sizeof c->out) /* never: bodies are bounded */
        abort();
    srv->stats.answers[status / 100 < 6 ? status / 100 : 5]++;
    c->state = C_WRITING;
    arm(c);
    uv_buf_t buf = uv_buf_init(c->out, (unsigned)n);
    c->wr.data = c;
    if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &buf, 1, written) != 0)
        conn_close(c);
}

/* An answer the server gives itself (no library call). */
static void answer_error(conn *c, const http_error *e)
{
    char body[400], extra[64] = "";
    jbuf b = {body, 0, sizeof body};
    jraw(&b, "{\"ok\":false,\"code\":\"%s\"", e->code);
    jstr(&b, "message", e->message, strlen(e->message));
    jraw(&b, "}\n");
    if (e->allow)
        snprintf(extra, sizeof extra, "Allow: %s\r\n", e->allow);
    else if (e->status == 503)
        snprintf(extra, sizeof extra, "Retry-After: 1\r\n");
    if (e->close)
        c->keep_alive = 0;
    answer(c, e->status, extra, body);
}

static void answer_simple(conn *c, int status, const char *code,
                          int close, const char *message)
{
    http_error e = {.status = status, .code = code, .close = close};
    snprintf(e.message, sizeof e.message, "%s", message);
    answer_error(c, &e);
}

/* The HTTP status of a library code.  The expected outcomes a buyer can
 * act on are 409 (or 404: no such checkout, no such item); 503 says
 * "repeat the same request", which is safe because every call is
 * idempotent for its token. */
static int http_status(int code)
{
    switch (code) {
    case RSV_OK:
        return 200;
    case RSV_EOUTOFSTOCK: case RSV_EEXPIRED: case RSV_ECLAIMED:
    case RSV_ERELEASED:
        return 409;
    case RSV_ENOTFOUND: case RSV_ENOITEM:
        return 404;
    case RSV_EBUSY: case RSV_EINDOUBT: case RSV_ECONN: case RSV_EDISABLED:
    case RSV_ECANCELED: case RSV_ENOTPRIMARY:
        return 503;
    case RSV_EINVAL: case RSV_EQUANTITY: case RSV_ETOKEN: case RSV_EEMPTY:
        return 400;
    default:
        return 500;
    }
}

static const char *status_name(int32_t st)
{
    return st == RSV_STATUS_HELD       ? "held"
           : st == RSV_STATUS_CLAIMED  ? "claimed"
           : st == RSV_STATUS_RELEASED ? "released"
           : st == RSV_STATUS_EXPIRED  ? "expired"
                                       : "unknown";
}

static void answer_call(conn *c, slot *s, int code)
{
    const checkout_req *r = &c->req;
    char body[1600];
    jbuf b = {body, 0, sizeof body};
    const char *name = rsv_code_name(code);
    jraw(&b, "{\"ok\":%s,\"code\":\"%s\"", code == RSV_OK ? "true" : "false",
         name ? name : "unknown");
    jtoken(&b, r);
    if (code == RSV_OK && r->op == OP_RESERVE)
        jraw(&b, ",\"held\":%" PRId64, r->quantity);
    if (code == RSV_OK && r->op == OP_STATUS)
        jraw(&b, ",\"status\":\"%s\",\"units\":%" PRId64
                 ",\"expires_in_ms\":%" PRId64,
             status_name(s->status), s->units, s->expires_in_ms);
    if (code != RSV_OK) {
        const char *msg = rsv_errmsg(s->ctx);
        /* the server's text may not be UTF-8: the code's description
         * then */
        if (jstr(&b, "message", msg, strlen(msg)) != 0) {
            msg = rsv_strerror(code);
            jstr(&b, "message", msg, strlen(msg));
        }
    }
    if (code == RSV_EINDOUBT)
        jraw(&b, ",\"retry\":\"repeat the same request with the same "
                 "token: it is idempotent\"");
    jraw(&b, "}\n");
    int st = http_status(code);
    answer(c, st, st == 503 ? "Retry-After: 1\r\n" : "", body);
}

static void answer_stats(conn *c)
{
    server *srv = c->srv;
    const server_stats *t = &srv->stats;
    char body[1024];
    jbuf b = {body, 0, sizeof body};
    jraw(&b,
         "{\"ok\":true,\"connections\":%ld,\"contexts\":%d,\"busy\":%d,"
         "\"queued\":%ld,\"accepted\":%" PRIu64 ",\"refused\":%" PRIu64
         ",\"requests\":%" PRIu64 ",\"calls\":%" PRIu64
         ",\"abandoned\":%" PRIu64 ",\"unheard\":%" PRIu64
         ",\"shed\":%" PRIu64 ",\"timeouts\":%" PRIu64
         ",\"reconnects\":%" PRIu64 ",\"queued_max\":%" PRIu64
         ",\"answers\":{\"2xx\":%" PRIu64 ",\"4xx\":%" PRIu64
         ",\"5xx\":%" PRIu64 "}}\n",
         srv->nconns, srv->nslots, srv->nslots - srv->nidle, srv->qlen,
         t->accepted, t->refused, t->requests, t->calls, t->abandoned,
         t->unheard, t->shed, t->timeouts, t->reconnects, t->queued_max,
         t->answers[2], t->answers[4], t->answers[5]);
    answer(c, 200, "", body);
}

/* ------------------------------------------------------------------ */
/* Calls                                                              */
/* ------------------------------------------------------------------ */

static void call_done(rsv_ctx *ctx, int code, void *data);

static void run_on(slot *s, conn *c)
{
    const checkout_req *r = &c->req;
    int rc = RSV_EINVAL;
    s->c = c;
    c->state = C_RUNNING;
    uv_timer_stop(&c->timer);
    c->srv->stats.calls++;
    switch (r->op) {
    case OP_RESERVE:
        rc = rsv_reserve_one_start(s->ctx, r->shop, r->token, r->token_len,
                                   r->item, r->location, r->quantity,
                                   r->ttl_ms);
        break;
    case OP_CLAIM:
        rc = rsv_claim_start(s->ctx, r->shop, r->token, r->token_len);
        break;
    case OP_RELEASE:
        rc = rsv_release_start(s->ctx, r->shop, r->token, r->token_len);
        break;
    case OP_STATUS:
        rc = rsv_checkout_status_start(s->ctx, r->shop, r->token,
                                       r->token_len, &s->status, &s->units,
                                       &s->expires_in_ms);
        break;
    case OP_STATS:
        break;
    }
    int e = rsv_uv_wait(s->uv, rc, call_done, s);
    if (e != 0) {
        /* The loop cannot watch the context: it stays out of service
         * (its call, if one started, ends with rsv_close). */
        fprintf(stderr, "http_checkout: rsv_uv_wait: %s\n",
                e < 0 && e > -4096 ? uv_strerror(e) : rsv_strerror(e));
        s->c = NULL;
        answer_simple(c, 500, "internal", 1, "a context failed");
    }
}

static void reconnect_work(uv_work_t *w)
{
    slot *s = w->data;
    s->reconnect_rc = rsv_reconnect(s->ctx);
}

static void reconnect_after(uv_work_t *w, int status);

static void reconnect_retry(uv_timer_t *t)
{
    slot *s = t->data;
    if (s->srv->stopping) {
        s->reconnecting = 0;
        check_stopped(s->srv);
        return;
    }
    s->work.data = s;
    uv_queue_work(s->srv->loop, &s->work, reconnect_work, reconnect_after);
}

static void reconnect_after(uv_work_t *w, int status)
{
    slot *s = w->data;
    (void)status;
    if (s->reconnect_rc != RSV_OK) {
        fprintf(stderr, "http_checkout: reconnect: %s: %s (again in 1 s)\n",
                rsv_code_name(s->reconnect_rc), rsv_errmsg(s->ctx));
        uv_timer_start(&s->retry, reconnect_retry, 1000, 0);
        return;
    }
    s->srv->stats.reconnects++;
    s->reconnecting = 0;
    slot_free(s);
}

/* The call is done: answer it (if its client is still there) and give
 * the context to the next request. */
static void call_done(rsv_ctx *ctx, int code, void *data)
{
    slot *s = data;
    conn *c = s->c;
    (void)ctx;
    s->c = NULL;
    if (c->closing) {
        c->srv->stats.unheard++;
        c->state = C_DONE;
        if (c->handles == 0)
            free(c);
    } else {
        answer_call(c, s, code);
    }
    if (code == RSV_ECONN || code == RSV_EINDOUBT ||
        code == RSV_ENOTPRIMARY) {
        s->reconnecting = 1;
        reconnect_retry(&s->retry);
        return;
    }
    slot_free(s);
}

static conn *queue_pop(server *srv)
{
    conn *c = srv->qhead;
    if (c) {
        srv->qhead = c->qnext;
        if (!srv->qhead)
            srv->qtail = NULL;
        c->qnext = NULL;
        srv->qlen--;
    }
    return c;
}

static void queue_remove(server *srv, conn *c)
{
    conn **pp = &srv->qhead, *prev = NULL;
    while (*pp && *pp != c)
        prev = *pp, pp = &(*pp)->qnext;
    if (!*pp)
        return;
    *pp = c->qnext;
    if (srv->qtail == c)
        srv->qtail = prev;
    c->qnext = NULL;
    srv->qlen--;
}

static void slot_free(slot *s)
{
    server *srv = s->srv;
    conn *next = srv->stopping ? NULL : queue_pop(srv);
    if (next)
        run_on(s, next);
    else
        srv->idle[srv->nidle++] = s;
    check_stopped(srv);
}

static void dispatch(conn *c)
{
    server *srv = c->srv;
    srv->stats.requests++;
    if (c->req.op == OP_STATS) {
        answer_stats(c);
        return;
    }
    if (srv->nidle > 0) {
        run_on(srv->idle[--srv->nidle], c);
        return;
    }
    c->state = C_QUEUED;
    if (srv->qtail)
        srv->qtail->qnext = c;
    else
        srv->qhead = c;
    srv->qtail = c;
    if ((uint64_t)++srv->qlen > srv->stats.queued_max)
        srv->stats.queued_max = (uint64_t)srv->qlen;
    arm(c);
}

/* ------------------------------------------------------------------ */
/* Connections                                                        */
/* ------------------------------------------------------------------ */

/* How long a closing connection's leftover input is read and dropped. */
#define LINGER_MS 2000

static void on_timer(uv_timer_t *t);

/* The deadline of the connection's state: a request's clock starts at
 * its first byte and is not restarted by later ones, so a client sending
 * a byte now and then cannot hold the connection. */
static void arm(conn *c)
{
    const server_config *cfg = &c->srv->cfg;
    int64_t ms;
    switch (c->state) {
    case C_READING:
        ms = c->len ? cfg->request_timeout_ms : cfg->idle_timeout_ms;
        break;
    case C_QUEUED:
        ms = cfg->queue_timeout_ms;
        break;
    case C_WRITING:
        ms = cfg->request_timeout_ms;
        break;
    case C_LINGER:
        ms = LINGER_MS;
        break;
    default:
        uv_timer_stop(&c->timer);
        return;
    }
    uv_timer_start(&c->timer, on_timer, (uint64_t)ms, 0);
}

static void handle_closed(uv_handle_t *h)
{
    conn *c = h->data;
    /* a call still running keeps its request until call_done */
    if (--c->handles == 0 && c->state != C_RUNNING)
        free(c);
}

static void conn_close(conn *c)
{
    server *srv = c->srv;
    if (c->closing)
        return;
    c->closing = 1;
    if (c->state == C_QUEUED)
        queue_remove(srv, c);
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    srv->nconns--;
    uv_close((uv_handle_t *)&c->tcp, handle_closed);
    uv_close((uv_handle_t *)&c->timer, handle_closed);
    check_stopped(srv);
}

static void start_reading(conn *c);

/* Answer sent with Connection: close: send FIN, then read and drop what
 * the client still sends until it closes too, so that closing with
 * unread input (a reset) cannot destroy the answer on its way. */
static void linger(conn *c)
{
    c->state = C_LINGER;
    c->len = 0;
    arm(c);
    start_reading(c);
    if (uv_shutdown(&c->sd, (uv_stream_t *)&c->tcp, NULL) != 0)
        conn_close(c);
}

static void process(conn *c);

static void written(uv_write_t *w, int status)
{
    conn *c = w->data;
    if (c->closing)
        return;
    if (status < 0) {
        conn_close(c);
        return;
    }
    if (!c->keep_alive || c->srv->stopping) {
        linger(c);
        return;
    }
    /* Every answer that keeps the connection follows a whole request:
     * drop it and go on with what the client sent after it. */
    size_t used = c->head.head_len + c->head.body_len;
    memmove(c->in, c->in + used, c->len - used);
    c->len -= used;
    c->have_head = 0;
    c->state = C_READING;
    arm(c);
    start_reading(c);
    if (c->len)
        process(c);
}

static void send_continue(conn *c)
{
    static char msg[] = "HTTP/1.1 100 Continue\r\n\r\n";
    uv_buf_t b = uv_buf_init(msg, sizeof msg - 1);
    /* done before the answer, which is written after it on the stream */
    uv_write(&c->wr_continue, (uv_stream_t *)&c->tcp, &b, 1, NULL);
}

/* A request is complete when its head and body are in the buffer. */
static void process(conn *c)
{
    http_error e;
    if (!c->have_head) {
        int rc = http_parse_head(c->in, c->len, &c->head, &e);
        if (rc == HTTP_INCOMPLETE)
            return;
        if (rc == HTTP_BAD) {
            answer_error(c, &e);
            return;
        }
        c->have_head = 1;
        c->keep_alive = c->head.keep_alive;
        if (c->head.expect_continue &&
            c->len < c->head.head_len + c->head.body_len)
            send_continue(c);
    }
    if (c->len < c->head.head_len + c->head.body_len)
        return;
    if (checkout_parse(&c->head, c->in + c->head.head_len, &c->req, &e)) {
        answer_error(c, &e);
        return;
    }
    dispatch(c);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    conn *c = h->data;
    (void)hint;
    if (c->state == C_LINGER)
        c->len = 0;
    *buf = uv_buf_init(c->in + c->len, (unsigned)(sizeof c->in - c->len));
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    conn *c = st->data;
    (void)buf;
    if (n == 0)
        return;
    if (n < 0) {
        /* The client hung up (or the connection broke): a request that
         * waits for a context is dropped unstarted; a running call
         * finishes and call_done throws its answer away. */
        if (c->state == C_QUEUED)
            c->srv->stats.abandoned++;
        conn_close(c);
        return;
    }
    size_t before = c->len;
    c->len += (size_t)n;
    switch (c->state) {
    case C_READING:
        /* a head plus a body within their limits always fits, so the
         * buffer cannot fill up here */
        if (before == 0)
            arm(c);
        process(c);
        break;
    case C_LINGER:
        c->len = 0;
        break;
    default:
        /* sent ahead of our answer: kept for later, until the buffer is
         * full (then the client waits; TCP's window holds it back) */
        if (c->len == sizeof c->in) {
            uv_read_stop(st);
            c->reading = 0;
        }
        break;
    }
}

static void start_reading(conn *c)
{
    if (c->reading)
        return;
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
        conn_close(c);
        return;
    }
    c->reading = 1;
}

static void on_timer(uv_timer_t *t)
{
    conn *c = t->data;
    server *srv = c->srv;
    char msg[120];
    switch (c->state) {
    case C_READING:
        srv->stats.timeouts++;
        if (c->len == 0) { /* idle between requests */
            conn_close(c);
            return;
        }
        snprintf(msg, sizeof msg, "the request was not complete within "
                 "%" PRId64 " ms", srv->cfg.request_timeout_ms);
        answer_simple(c, 408, "request_timeout", 1, msg);
        return;
    case C_QUEUED:
        queue_remove(srv, c);
        srv->stats.shed++;
        snprintf(msg, sizeof msg, "no database connection was free within "
                 "%" PRId64 " ms: retry", srv->cfg.queue_timeout_ms);
        answer_simple(c, 503, "busy", 0, msg);
        return;
    case C_WRITING: /* the client does not take its answer */
        srv->stats.timeouts++;
        conn_close(c);
        return;
    default:
        conn_close(c);
        return;
    }
}

static void refused_closed(uv_handle_t *h) { free(h); }

static void on_connection(uv_stream_t *l, int status)
{
    server *srv = l->data;
    conn *c = NULL;
    if (status < 0)
        return;
    if (srv->nconns >= srv->cfg.max_connections ||
        !(c = calloc(1, sizeof *c))) {
        /* accepted and closed at once: left in the backlog it would
         * stop libuv from accepting anyone else */
        uv_tcp_t *t = malloc(sizeof *t);
        srv->stats.refused++;
        if (t) {
            uv_tcp_init(srv->loop, t);
            uv_accept(l, (uv_stream_t *)t);
            uv_close((uv_handle_t *)t, refused_closed);
        }
        return;
    }
    c->srv = srv;
    uv_tcp_init(srv->loop, &c->tcp);
    uv_timer_init(srv->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->wr.data = c->sd.data = c;
    c->handles = 2;
    c->state = C_READING;
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    srv->nconns++;
    srv->stats.accepted++;
    if (uv_accept(l, (uv_stream_t *)&c->tcp) != 0) {
        conn_close(c);
        return;
    }
    /* one small answer per request: do not let Nagle hold it back */
    uv_tcp_nodelay(&c->tcp, 1);
    arm(c);
    start_reading(c);
}

/* ------------------------------------------------------------------ */
/* Start and stop                                                     */
/* ------------------------------------------------------------------ */

int server_start(server **out, uv_loop_t *loop, const server_config *cfg)
{
    server *srv = calloc(1, sizeof *srv);
    *out = srv;
    if (!srv)
        return -1;
    srv->loop = loop;
    srv->cfg = *cfg;
    srv->nslots = cfg->contexts;
    srv->slots = calloc((size_t)cfg->contexts, sizeof *srv->slots);
    srv->idle = calloc((size_t)cfg->contexts, sizeof *srv->idle);
    if (!srv->slots || !srv->idle)
        return -1;
    rsv_options opts;
    rsv_options_init(&opts, RSV_OPTIONS_VERSION);
    if (cfg->call_timeout_ms)
        opts.call_timeout_ms = cfg->call_timeout_ms;
    if (cfg->hold_ttl_ms)
        opts.hold_ttl_ms = cfg->hold_ttl_ms;
    for (int i = 0; i < cfg->contexts; i++) {
        slot *s = &srv->slots[i];
        s->srv = srv;
        int rc = rsv_open_dsn(&s->ctx, cfg->dsn, &opts);
        if (rc != RSV_OK) {
            fprintf(stderr, "http_checkout: rsv_open_dsn: %s: %s\n",
                    rsv_code_name(rc), rsv_errmsg(s->ctx));
            return -1;
        }
        if ((rc = rsv_uv_attach(&s->uv, loop, s->ctx)) != 0) {
            fprintf(stderr, "http_checkout: rsv_uv_attach: %d\n", rc);
            return -1;
        }
        uv_timer_init(loop, &s->retry);
        s->retry.data = s;
        srv->idle[srv->nidle++] = s;
    }
    uv_tcp_init(loop, &srv->listener);
    srv->listener.data = srv;
    for (int p = cfg->port; p < cfg->port + 20 && p < 65536; p++) {
        struct sockaddr_in addr;
        if (uv_ip4_addr(cfg->host, p, &addr) != 0) {
            fprintf(stderr, "http_checkout: bad address %s\n", cfg->host);
            return -1;
        }
        if (uv_tcp_bind(&srv->listener, (const struct sockaddr *)&addr, 0) ==
                0 &&
            uv_listen((uv_stream_t *)&srv->listener, 1024, on_connection) ==
                0) {
            srv->port = p;
            srv->listening = 1;
            return 0;
        }
        /* a failed bind or listen leaves the handle unusable: anew */
        uv_close((uv_handle_t *)&srv->listener, NULL);
        uv_run(loop, UV_RUN_NOWAIT);
        uv_tcp_init(loop, &srv->listener);
        srv->listener.data = srv;
    }
    fprintf(stderr, "http_checkout: no free port in %d..%d on %s\n",
            cfg->port, cfg->port + 19, cfg->host);
    return -1;
}

int server_port(const server *srv) { return srv->port; }

const server_stats *server_get_stats(const server *srv)
{
    return &srv->stats;
}

/* Once stopping and nothing is left in flight, close the server's own
 * handles so that uv_run returns. */
static void check_stopped(server *srv)
{
    if (!srv->stopping || srv->stopped || srv->nconns > 0)
        return;
    for (int i = 0; i < srv->nslots; i++)
        if (srv->slots[i].c || srv->slots[i].reconnecting)
            return;
    for (int i = 0; i < srv->nslots; i++) {
        rsv_uv_detach(srv->slots[i].uv);
        srv->slots[i].uv = NULL;
        uv_close((uv_handle_t *)&srv->slots[i].retry, NULL);
    }
    srv->stopped = 1;
}

void server_shutdown(server *srv)
{
    if (srv->stopping)
        return;
    srv->stopping = 1;
    if (srv->listening)
        uv_close((uv_handle_t *)&srv->listener, NULL);
    srv->listening = 0;
    for (conn *c = srv->conns, *next; c; c = next) {
        next = c->next;
        if (c->state == C_READING) {
            conn_close(c);
        } else if (c->state == C_QUEUED) {
            queue_remove(srv, c);
            answer_simple(c, 503, "stopping", 1, "the server is stopping");
        }
    }
    check_stopped(srv);
}

void server_free(server *srv)
{
    if (!srv)
        return;
    for (int i = 0; i < srv->nslots; i++)
        rsv_close(srv->slots[i].ctx);
    free(srv->slots);
    free(srv->idle);
    free(srv);
}
