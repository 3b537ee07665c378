/*
 * http_sale.h - the demo's flash sale against the HTTP checkout server:
 * buyers as HTTP clients on the server's own loop (examples/http_sale.c).
 */
#ifndef HTTP_SALE_H
#define HTTP_SALE_H

#include <stdint.h>

#include <uv.h>

typedef struct sale_config {
    const char *host;
    int port;
    int buyers;             /* all at once, one connection each */
    int fail_every;         /* one buyer in N releases instead of paying */
    uint64_t shop, item, location;
} sale_config;

typedef struct sale_result {
    long reserved, sold, released, out_of_stock, errors;
    uint64_t max_gap_ms;    /* the longest the loop went without turning */
} sale_result;

typedef struct sale sale;

/* Start every buyer; done(arg) runs on the loop when the last one has
 * finished.  Returns 0, or -1 (out of memory). */
int sale_start(sale **out, uv_loop_t *loop, const sale_config *c,
               void (*done)(void *), void *arg);

const sale_result *sale_get_result(const sale *s);

/* After uv_run returned.  NULL is a no-op. */
void sale_free(sale *s);

#endif /* HTTP_SALE_H */
