/*
 * http_sale.c - the demo's buyers: each opens one kept-alive connection
 * to the checkout server, reserves one unit, then claims it (the payment
 * succeeded) or, one buyer in fail_every, releases it, on the same
 * connection; and a 10 ms timer that measures how long the loop ever went
 * without turning while the server worked beside them.
 */
#include "http_sale.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct buyer buyer;

struct sale {
    sale_config c;
    uv_loop_t *loop;
    uv_timer_t tick;
    uint64_t last_tick_ms;
    int finished;
    void (*done)(void *);
    void *arg;
    buyer *buyers;
    sale_result r;
};

struct buyer {
    uv_tcp_t tcp;
    uv_connect_t conn;
    uv_write_t wr;
    sale *s;
    int id, step, pays, answered;
    char req[512], resp[2048];
    size_t rlen;
};

static void buyer_closed(uv_handle_t *h)
{
    buyer *b = h->data;
    sale *s = b->s;
    if (++s->finished == s->c.buyers) {
        uv_timer_stop(&s->tick);
        uv_close((uv_handle_t *)&s->tick, NULL);
        s->done(s->arg);
    }
}

static void buyer_fail(buyer *b, const char *what)
{
    b->s->r.errors++;
    fprintf(stderr, "buyer %d %s: %s\n", b->id,
            b->step == 0 ? "reserve" : b->pays ? "claim" : "release", what);
    uv_close((uv_handle_t *)&b->tcp, buyer_closed);
}

static void buyer_written(uv_write_t *w, int status)
{
    if (status < 0)
        buyer_fail(w->data, uv_strerror(status));
}

static void buyer_send(buyer *b)
{
    const sale_config *c = &b->s->c;
    char form[200];
    if (b->step == 0)
        snprintf(form, sizeof form,
                 "shop=%" PRIu64 "&token=buyer-%d&item=%" PRIu64
                 "&location=%" PRIu64 "&quantity=1",
                 c->shop, b->id, c->item, c->location);
    else
        snprintf(form, sizeof form, "shop=%" PRIu64 "&token=buyer-%d",
                 c->shop, b->id);
    snprintf(b->req, sizeof b->req,
             "POST /%s HTTP/1.1\r\nHost: %s\r\nContent-Type: "
             "application/x-www-form-urlencoded\r\nContent-Length: %zu\r\n"
             "\r\n%s",
             b->step == 0 ? "reserve" : b->pays ? "claim" : "release",
             c->host, strlen(form), form);
    b->rlen = 0;
    uv_buf_t buf = uv_buf_init(b->req, (unsigned)strlen(b->req));
    b->wr.data = b;
    if (uv_write(&b->wr, (uv_stream_t *)&b->tcp, &buf, 1, buyer_written))
        buyer_fail(b, "write");
}

/* The answer's "code" once it is complete, "" before. */
static int answer_code(buyer *b, char *code, size_t cap)
{
    const char *end = strstr(b->resp, "\r\n\r\n");
    const char *cl = strstr(b->resp, "Content-Length: ");
    if (!end || !cl || cl > end)
        return 0;
    size_t body = (size_t)strtoul(cl + 16, NULL, 10);
    if (b->rlen < (size_t)(end + 4 - b->resp) + body)
        return 0;
    const char *k = strstr(end, "\"code\":\"");
    size_t n = 0;
    if (k)
        for (k += 8; k[n] && k[n] != '"' && n + 1 < cap; n++)
            code[n] = k[n];
    code[n] = '\0';
    return 1;
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
    sale *s = b->s;
    char code[40];
    (void)buf;
    if (n < 0) {
        buyer_fail(b, n == UV_EOF ? "closed before the answer"
                                  : uv_strerror((int)n));
        return;
    }
    b->rlen += (size_t)n;
    b->resp[b->rlen] = '\0';
    if (!answer_code(b, code, sizeof code)) {
        if (b->rlen == sizeof b->resp - 1)
            buyer_fail(b, "answer too long");
        return;
    }
    int ok = !strcmp(code, "RSV_OK");
    if (b->step == 0 && ok) {
        s->r.reserved++;
        b->step = 1;
        buyer_send(b);
        return;
    }
    if (b->step == 0 && !strcmp(code, "RSV_EOUTOFSTOCK"))
        s->r.out_of_stock++;
    else if (b->step == 1 && ok)
        *(b->pays ? &s->r.sold : &s->r.released) += 1;
    else {
        buyer_fail(b, b->resp);
        return;
    }
    uv_close((uv_handle_t *)&b->tcp, buyer_closed);
}

static void buyer_connected(uv_connect_t *cr, int status)
{
    buyer *b = cr->data;
    if (status != 0) {
        buyer_fail(b, uv_strerror(status));
        return;
    }
    if (uv_read_start((uv_stream_t *)&b->tcp, buyer_alloc, buyer_read)) {
        buyer_fail(b, "read");
        return;
    }
    buyer_send(b);
}

static void on_tick(uv_timer_t *t)
{
    sale *s = t->data;
    uint64_t now = uv_now(s->loop);
    if (s->last_tick_ms && now - s->last_tick_ms > s->r.max_gap_ms)
        s->r.max_gap_ms = now - s->last_tick_ms;
    s->last_tick_ms = now;
}

int sale_start(sale **out, uv_loop_t *loop, const sale_config *c,
               void (*done)(void *), void *arg)
{
    sale *s = calloc(1, sizeof *s);
    *out = s;
    if (!s || !(s->buyers = calloc((size_t)c->buyers, sizeof *s->buyers)))
        return -1;
    s->c = *c;
    s->loop = loop;
    s->done = done;
    s->arg = arg;
    uv_timer_init(loop, &s->tick);
    s->tick.data = s;
    uv_timer_start(&s->tick, on_tick, 10, 10);
    struct sockaddr_in addr;
    uv_ip4_addr(c->host, c->port, &addr);
    for (int i = 0; i < c->buyers; i++) {
        buyer *b = &s->buyers[i];
        b->s = s;
        b->id = i;
        b->pays = c->fail_every <= 0 || (i + 1) % c->fail_every != 0;
        uv_tcp_init(loop, &b->tcp);
        b->tcp.data = b->conn.data = b;
        if (uv_tcp_connect(&b->conn, &b->tcp, (const struct sockaddr *)&addr,
                           buyer_connected) != 0)
            buyer_fail(b, "connect");
    }
    return 0;
}

const sale_result *sale_get_result(const sale *s) { return &s->r; }

void sale_free(sale *s)
{
    if (s)
        free(s->buyers);
    free(s);
}
