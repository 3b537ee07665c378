/*
 * http_request.h - what the HTTP checkout server accepts as a request:
 * the head of an HTTP/1.x request read within limits, and its parameters
 * turned into one checkout call, checked before anything reaches the
 * library.  No I/O and no database here (examples/http_request.c); the
 * server (examples/http_checkout.c) feeds it bytes and answers what it
 * says.
 */
#ifndef HTTP_REQUEST_H
#define HTTP_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include <reserve.h>

/* A request head (request line and headers) longer than this is answered
 * 431; a body longer than HTTP_BODY_MAX, 413.  A form of the checkout
 * calls' parameters, with a token of RSV_TOKEN_MAX bytes %-escaped, fits
 * in well under 1 KiB. */
#define HTTP_HEAD_MAX 8192
#define HTTP_BODY_MAX 4096

/* What http_parse_head() found in a complete head. */
typedef struct http_head {
    char method[16];
    const char *path;       /* into the caller's buffer, not terminated */
    size_t path_len;
    const char *query;      /* after '?', or NULL */
    size_t query_len;
    size_t head_len;        /* bytes up to and including the blank line */
    size_t body_len;        /* Content-Length (0 without one) */
    int keep_alive;         /* HTTP/1.1 unless "close"; 1.0 if asked */
    int expect_continue;    /* "Expect: 100-continue" */
    int form_body;          /* the body is application/x-www-form-urlencoded
                               (or has no Content-Type) */
} http_head;

/* The answer to a request that cannot be served, before any call. */
typedef struct http_error {
    int status;             /* 400, 404, 405, 413, 415, 417, 431, 501, 505 */
    const char *code;       /* a short word for the JSON answer */
    char message[200];      /* a sentence for a person */
    const char *allow;      /* 405: the Allow header's value */
    int close;              /* the connection's framing is lost: close it */
} http_error;

#define HTTP_INCOMPLETE 0   /* need more bytes */
#define HTTP_HEAD_OK 1
#define HTTP_BAD (-1)       /* err says what to answer */

/* Look at buf[0..len): HTTP_INCOMPLETE while no blank line ended the head
 * (and len < HTTP_HEAD_MAX), HTTP_HEAD_OK with *h filled, or HTTP_BAD
 * with *err filled (a head over the limit, a malformed line, a body
 * larger than HTTP_BODY_MAX, a transfer coding). */
int http_parse_head(const char *buf, size_t len, http_head *h,
                    http_error *err);

/* What a request asks the server for. */
enum checkout_op {
    OP_RESERVE, OP_CLAIM, OP_RELEASE, /* POST: they change state */
    OP_STATUS, OP_STATS               /* GET (or HEAD): they read */
};

typedef struct checkout_req {
    enum checkout_op op;
    uint64_t shop, item, location;
    int64_t quantity, ttl_ms;
    unsigned char token[RSV_TOKEN_MAX];
    size_t token_len;
} checkout_req;

/* Route the request and check every parameter (from the query string and,
 * for POST, a form body of h->body_len bytes at body): 0 with *req filled,
 * or HTTP_BAD with *err (404 unknown path, 405 wrong method, 400 bad or
 * missing or unknown parameter, 415 a body that is not a form).  A token
 * longer than RSV_TOKEN_MAX bytes is refused here, never cut. */
int checkout_parse(const http_head *h, const char *body, checkout_req *req,
                   http_error *err);

/* Append s (n bytes) to out as the inside of a JSON string: quotes,
 * backslashes and control characters escaped; bytes that are not UTF-8
 * make it fail.  Returns the bytes written, or -1 when out (cap bytes)
 * is too small or s is not UTF-8.  out is not terminated. */
long json_escape(char *out, size_t cap, const void *s, size_t n);

#endif /* HTTP_REQUEST_H */
