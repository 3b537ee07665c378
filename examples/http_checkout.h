/*
 * http_checkout.h - an HTTP checkout server on a libuv loop that never
 * waits on the database (examples/http_checkout.c): what starts it, stops
 * it and counts what it did.
 */
#ifndef HTTP_CHECKOUT_H
#define HTTP_CHECKOUT_H

#include <stdint.h>

#include <uv.h>

typedef struct server_config {
    const char *dsn;            /* for rsv_open_dsn, one connection per
                                   context */
    const char *host;           /* address to listen on (127.0.0.1) */
    int port;                   /* the first port tried; the next 19 too */
    int contexts;               /* libreserve contexts (database
                                   connections): calls run at once */
    int max_connections;        /* client connections; more are closed at
                                   once */
    int64_t request_timeout_ms; /* a request (head and body) must arrive
                                   within this from its first byte, and
                                   its answer be taken within it */
    int64_t idle_timeout_ms;    /* a kept-alive connection with no request
                                   is closed after this */
    int64_t queue_timeout_ms;   /* a request that waited this long for a
                                   free context is answered 503 */
    int64_t call_timeout_ms;    /* rsv_options.call_timeout_ms (0: the
                                   library's default) */
    int64_t hold_ttl_ms;        /* rsv_options.hold_ttl_ms (0: default) */
} server_config;

/* Fill *c with the defaults (dsn NULL). */
void server_config_init(server_config *c);

/* What the server did, since it started. */
typedef struct server_stats {
    uint64_t accepted;     /* connections accepted */
    uint64_t refused;      /* ... and closed at once: max_connections */
    uint64_t requests;     /* valid requests read (routed, parameters
                              checked) */
    uint64_t calls;        /* library calls started */
    uint64_t abandoned;    /* requests dropped unstarted: client gone */
    uint64_t unheard;      /* calls that finished after their client left */
    uint64_t shed;         /* 503: no context free within queue_timeout_ms */
    uint64_t timeouts;     /* connections dropped by a timeout */
    uint64_t reconnects;   /* contexts connected again */
    uint64_t answers[6];   /* by class: answers[2] counts 2xx, ... */
    uint64_t queued_max;   /* the longest wait queue seen */
} server_stats;

typedef struct server server;

/* Open the contexts and listen.  Returns 0, or -1 with the reason on
 * stderr. */
int server_start(server **out, uv_loop_t *loop, const server_config *c);

/* The port it listens on. */
int server_port(const server *srv);

const server_stats *server_get_stats(const server *srv);

/* Stop: no new connections; idle ones are closed, requests waiting for a
 * context answered 503, calls in flight finish and are answered (and
 * their connections closed).  Once nothing is left, every handle of the
 * server is closed, so uv_run returns; then server_free().  May be called
 * more than once. */
void server_shutdown(server *srv);

/* Close the contexts and free everything (after uv_run returned).  NULL
 * is a no-op. */
void server_free(server *srv);

#endif /* HTTP_CHECKOUT_H */
