/*
 * http_request.c - reads an HTTP/1.x request head within limits and turns
 * its parameters into one checkout call, refusing anything it cannot
 * serve exactly (see http_request.h).  Strict on purpose: a server that
 * guesses (cuts a long token, reads "abc" as 0, lets GET change state)
 * turns a client's mistake into a wrong sale.
 */
#include "http_request.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int fail(http_error *e, int status, const char *code, int close,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int fail(http_error *e, int status, const char *code, int close,
                const char *fmt, ...)
{
    va_list ap;
    e->status = status;
    e->code = code;
    e->close = close;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return HTTP_BAD;
}

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* s[0..n) equals the lower-case word w, ignoring case */
static int word_is(const char *s, size_t n, const char *w)
{
    if (strlen(w) != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)s[i]) != w[i])
            return 0;
    return 1;
}

/* RFC 9110's tchar: what a method or a header name is made of */
static int is_tchar(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

static void trim(const char **s, size_t *n)
{
    while (*n && (**s == ' ' || **s == '\t'))
        (*s)++, (*n)--;
    while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
        (*n)--;
}

/* Does a comma-separated header value list the token w? */
static int list_has(const char *v, size_t n, const char *w)
{
    while (n) {
        const char *comma = memchr(v, ',', n);
        size_t len = comma ? (size_t)(comma - v) : n;
        const char *item = v;
        size_t ilen = len;
        trim(&item, &ilen);
        if (word_is(item, ilen, w))
            return 1;
        if (!comma)
            break;
        v = comma + 1;
        n -= len + 1;
    }
    return 0;
}

static int request_line(const char *s, size_t n, http_head *h,
                        http_error *e)
{
    const char *sp1 = memchr(s, ' ', n);
    if (!sp1 || sp1 == s || (size_t)(sp1 - s) >= sizeof h->method)
        return fail(e, 400, "bad_request", 1, "malformed request line");
    for (const char *p = s; p < sp1; p++)
        if (!is_tchar((unsigned char)*p))
            return fail(e, 400, "bad_request", 1, "malformed method");
    memcpy(h->method, s, (size_t)(sp1 - s));
    h->method[sp1 - s] = '\0';
    const char *target = sp1 + 1;
    const char *sp2 = memchr(target, ' ', n - (size_t)(target - s));
    if (!sp2 || *target != '/')
        return fail(e, 400, "bad_request", 1,
                    "malformed request line: expected METHOD /path HTTP/1.1");
    for (const char *p = target; p < sp2; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f || *p == '#')
            return fail(e, 400, "bad_request", 1, "malformed request target");
    const char *q = memchr(target, '?', (size_t)(sp2 - target));
    h->path = target;
    h->path_len = (size_t)((q ? q : sp2) - target);
    h->query = q ? q + 1 : NULL;
    h->query_len = q ? (size_t)(sp2 - q - 1) : 0;
    const char *ver = sp2 + 1;
    size_t vlen = n - (size_t)(ver - s);
    if (vlen == 8 && !memcmp(ver, "HTTP/1.1", 8))
        h->keep_alive = 1;
    else if (vlen == 8 && !memcmp(ver, "HTTP/1.0", 8))
        h->keep_alive = 0;
    else if (vlen == 8 && !memcmp(ver, "HTTP/", 5) && ver[5] >= '0' &&
             ver[5] <= '9' && ver[6] == '.' && ver[7] >= '0' && ver[7] <= '9')
        return fail(e, 505, "version_not_supported", 1,
                    "only HTTP/1.0 and HTTP/1.1 are served");
    else
        return fail(e, 400, "bad_request", 1, "malformed HTTP version");
    return 0;
}

int http_parse_head(const char *buf, size_t len, http_head *h,
                    http_error *e)
{
    memset(h, 0, sizeof *h);
    memset(e, 0, sizeof *e);
    h->form_body = 1;
    /* The head ends at an empty line; CRLF is the rule, a bare LF is
     * accepted as RFC 9112 allows. */
    size_t lim = len < HTTP_HEAD_MAX ? len : HTTP_HEAD_MAX, end = 0;
    for (size_t i = 0; i < lim && !end; i++) {
        if (buf[i] != '\n')
            continue;
        if (i + 1 < lim && buf[i + 1] == '\n')
            end = i + 2;
        else if (i + 2 < lim && buf[i + 1] == '\r' && buf[i + 2] == '\n')
            end = i + 3;
    }
    if (!end)
        return len >= HTTP_HEAD_MAX
                   ? fail(e, 431, "headers_too_large", 1,
                          "the request head is longer than %d bytes",
                          HTTP_HEAD_MAX)
                   : HTTP_INCOMPLETE;
    h->head_len = end;

    int minor1 = 0, have_length = 0, hosts = 0;
    const char *p = buf, *stop = buf + end;
    for (int lineno = 0; p < stop; lineno++) {
        const char *nl = memchr(p, '\n', (size_t)(stop - p));
        size_t n = (size_t)(nl - p);
        const char *line = p;
        p = nl + 1;
        if (n && line[n - 1] == '\r')
            n--;
        if (memchr(line, '\r', n) || memchr(line, '\0', n))
            return fail(e, 400, "bad_request", 1, "stray CR or NUL in the head");
        if (n == 0)
            break; /* the blank line */
        if (lineno == 0) {
            if (request_line(line, n, h, e))
                return HTTP_BAD;
            minor1 = h->keep_alive;
            continue;
        }
        if (line[0] == ' ' || line[0] == '\t')
            return fail(e, 400, "bad_request", 1,
                        "folded header lines are not accepted");
        const char *colon = memchr(line, ':', n);
        if (!colon || colon == line)
            return fail(e, 400, "bad_request", 1, "malformed header line");
        for (const char *c = line; c < colon; c++)
            if (!is_tchar((unsigned char)*c))
                return fail(e, 400, "bad_request", 1, "malformed header name");
        const char *name = line, *v = colon + 1;
        size_t nlen = (size_t)(colon - line), vlen = n - nlen - 1;
        trim(&v, &vlen);
        if (word_is(name, nlen, "content-length")) {
            size_t cl = 0;
            if (vlen == 0)
                return fail(e, 400, "bad_request", 1, "empty Content-Length");
            for (size_t i = 0; i < vlen; i++) {
                if (v[i] < '0' || v[i] > '9')
                    return fail(e, 400, "bad_request", 1,
                                "Content-Length is not a number");
                if (cl <= HTTP_BODY_MAX)
                    cl = cl * 10 + (size_t)(v[i] - '0');
            }
            if (have_length && cl != h->body_len)
                return fail(e, 400, "bad_request", 1,
                            "two different Content-Length headers");
            have_length = 1;
            h->body_len = cl;
        } else if (word_is(name, nlen, "transfer-encoding")) {
            return fail(e, 501, "not_implemented", 1,
                        "Transfer-Encoding is not supported: send the body "
                        "with a Content-Length");
        } else if (word_is(name, nlen, "connection")) {
            if (list_has(v, vlen, "close"))
                h->keep_alive = 0;
            else if (list_has(v, vlen, "keep-alive"))
                h->keep_alive = 1;
        } else if (word_is(name, nlen, "expect")) {
            if (!word_is(v, vlen, "100-continue"))
                return fail(e, 417, "expectation_failed", 1,
                            "only Expect: 100-continue is understood");
            h->expect_continue = 1;
        } else if (word_is(name, nlen, "content-type")) {
            const char *semi = memchr(v, ';', vlen);
            size_t tlen = semi ? (size_t)(semi - v) : vlen;
            trim(&v, &tlen);
            h->form_body = word_is(v, tlen, "application/x-www-form-urlencoded");
        } else if (word_is(name, nlen, "host")) {
            hosts++;
        }
    }
    /* RFC 9112 3.2: a 1.1 request without exactly one Host is refused. */
    if (minor1 && hosts != 1)
        return fail(e, 400, "bad_request", 1,
                    "an HTTP/1.1 request needs exactly one Host header");
    if (h->body_len > HTTP_BODY_MAX)
        return fail(e, 413, "body_too_large",
                    1, "the body is longer than %d bytes", HTTP_BODY_MAX);
    return HTTP_HEAD_OK;
}


/* ---- parameters ---------------------------------------------------- */

static int hexval(int c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* Form decoding ('+' is a space, %XX a byte) of s[0..n) into out (cap
 * bytes): 0, -1 for a malformed escape, -2 when it does not fit.  A value
 * that does not fit is refused whole, never cut. */
static int form_decode(const char *s, size_t n, unsigned char *out,
                       size_t cap, size_t *out_len)
{
    size_t k = 0;
    int too_long = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            if (n - i < 3)
                return -1;
            int hi = hexval((unsigned char)s[i + 1]);
            int lo = hexval((unsigned char)s[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            c = hi * 16 + lo;
            i += 2;
        } else if (c == '+') {
            c = ' ';
        }
        if (k < cap)
            out[k++] = (unsigned char)c;
        else
            too_long = 1;
    }
    *out_len = k;
    return too_long ? -2 : 0;
}

enum { P_SHOP, P_TOKEN, P_ITEM, P_LOCATION, P_QUANTITY, P_TTL, P_COUNT };
static const char *const param_name[P_COUNT] = {
    "shop", "token", "item", "location", "quantity", "ttl_ms"};
#define BIT(p) (1u << (p))
#define SHOP_TOKEN (BIT(P_SHOP) | BIT(P_TOKEN))

static const struct route {
    const char *path;
    enum checkout_op op;
    int post;               /* POST only, else GET or HEAD */
    unsigned takes, needs;  /* sets of P_* */
    const char *usage;
} routes[] = {
    {"/reserve", OP_RESERVE, 1, SHOP_TOKEN | BIT(P_ITEM) | BIT(P_LOCATION) |
     BIT(P_QUANTITY) | BIT(P_TTL), SHOP_TOKEN | BIT(P_ITEM) | BIT(P_LOCATION),
     "shop, token, item, location, and optionally quantity (1) and ttl_ms"},
    {"/claim", OP_CLAIM, 1, SHOP_TOKEN, SHOP_TOKEN, "shop and token"},
    {"/release", OP_RELEASE, 1, SHOP_TOKEN, SHOP_TOKEN, "shop and token"},
    {"/status", OP_STATUS, 0, SHOP_TOKEN, SHOP_TOKEN, "shop and token"},
    {"/stats", OP_STATS, 0, 0, 0, "no parameters"},
};

#define TTL_MS_MAX 2592000000LL /* 30 days, the library's limit */

/* Decimal digits only (no sign, no spaces), at most max. */
static int parse_u64(const unsigned char *s, size_t n, uint64_t max,
                     uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (max - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* A parameter name as it may be quoted in a message: printable ASCII. */
static void quotable(char *out, size_t cap, const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < cap; i++)
        out[k++] = s[i] > ' ' && s[i] < 0x7f && s[i] != '"' && s[i] != '\\'
                       ? s[i]
                       : '?';
    out[k] = '\0';
}

static int one_param(const struct route *r, const char *k, size_t klen,
                     const char *v, size_t vlen, checkout_req *req,
                     unsigned *seen, http_error *e)
{
    unsigned char key[16];
    size_t kn;
    int p = -1;
    if (form_decode(k, klen, key, sizeof key, &kn) == 0)
        for (int i = 0; i < P_COUNT; i++)
            if (strlen(param_name[i]) == kn && !memcmp(key, param_name[i], kn))
                p = i;
    if (p < 0 || !(r->takes & BIT(p))) {
        char name[40];
        quotable(name, sizeof name, k, klen);
        return fail(e, 400, "bad_request", 0,
                    "unknown parameter '%s': %s takes %s", name, r->path + 1,
                    r->usage);
    }
    if (*seen & BIT(p))
        return fail(e, 400, "bad_request", 0, "parameter '%s' given twice",
                    param_name[p]);
    *seen |= BIT(p);
    if (p == P_TOKEN) {
        int rc = form_decode(v, vlen, req->token, sizeof req->token,
                             &req->token_len);
        if (rc == -1)
            return fail(e, 400, "bad_request", 0,
                        "token has a malformed %%-escape");
        if (rc == -2)
            return fail(e, 400, "bad_request", 0,
                        "token is longer than %d bytes", RSV_TOKEN_MAX);
        if (req->token_len == 0)
            return fail(e, 400, "bad_request", 0, "token is empty");
        return 0;
    }
    unsigned char num[24];
    size_t nn;
    uint64_t x;
    int ok = form_decode(v, vlen, num, sizeof num, &nn) == 0;
    switch (p) {
    case P_QUANTITY:
        if (!ok || parse_u64(num, nn, RSV_QUANTITY_MAX, &x) || x == 0)
            return fail(e, 400, "bad_request", 0,
                        "quantity must be an integer from 1 to %d",
                        RSV_QUANTITY_MAX);
        req->quantity = (int64_t)x;
        return 0;
    case P_TTL:
        if (!ok || parse_u64(num, nn, TTL_MS_MAX, &x) || x == 0)
            return fail(e, 400, "bad_request", 0,
                        "ttl_ms must be an integer from 1 to %lld (30 days)",
                        TTL_MS_MAX);
        req->ttl_ms = (int64_t)x;
        return 0;
    default:
        if (!ok || parse_u64(num, nn, UINT64_MAX, &x))
            return fail(e, 400, "bad_request", 0,
                        "%s must be an unsigned integer (0 to "
                        "18446744073709551615)", param_name[p]);
        *(p == P_SHOP ? &req->shop : p == P_ITEM ? &req->item
                                                 : &req->location) = x;
        return 0;
    }
}

/* key=value&key=value (a key without '=' has an empty value) */
static int params(const struct route *r, const char *s, size_t n,
                  checkout_req *req, unsigned *seen, http_error *e)
{
    while (n) {
        const char *amp = memchr(s, '&', n);
        size_t len = amp ? (size_t)(amp - s) : n;
        if (len) {
            const char *eq = memchr(s, '=', len);
            size_t klen = eq ? (size_t)(eq - s) : len;
            if (one_param(r, s, klen, eq ? eq + 1 : s + len,
                          eq ? len - klen - 1 : 0, req, seen, e))
                return HTTP_BAD;
        }
        if (!amp)
            break;
        s = amp + 1;
        n -= len + 1;
    }
    return 0;
}

int checkout_parse(const http_head *h, const char *body, checkout_req *req,
                   http_error *e)
{
    memset(req, 0, sizeof *req);
    memset(e, 0, sizeof *e);
    const struct route *r = NULL;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (strlen(routes[i].path) == h->path_len &&
            !memcmp(routes[i].path, h->path, h->path_len))
            r = &routes[i];
    if (!r)
        return fail(e, 404, "not_found", 0,
                    "no such endpoint: POST /reserve, /claim, /release; "
                    "GET /status, /stats");
    int get = !strcmp(h->method, "GET"), head = !strcmp(h->method, "HEAD");
    int post = !strcmp(h->method, "POST");
    if (r->post ? !post : !(get || head)) {
        e->allow = r->post ? "POST" : "GET, HEAD";
        return fail(e, 405, "method_not_allowed", 0, "%s %s: use %s",
                    h->method, r->path,
                    r->post ? "POST (it changes state)" : "GET");
    }
    req->op = r->op;
    req->quantity = 1;
    unsigned seen = 0;
    if (h->query && params(r, h->query, h->query_len, req, &seen, e))
        return HTTP_BAD;
    if (post && h->body_len) {
        if (!h->form_body)
            return fail(e, 415, "unsupported_media_type", 0,
                        "send the parameters as "
                        "application/x-www-form-urlencoded or in the query");
        if (params(r, body, h->body_len, req, &seen, e))
            return HTTP_BAD;
    }
    for (int p = 0; p < P_COUNT; p++)
        if ((r->needs & ~seen) & BIT(p))
            return fail(e, 400, "bad_request", 0,
                        "missing parameter '%s': %s takes %s", param_name[p],
                        r->path + 1, r->usage);
    return 0;
}

/* ---- JSON ----------------------------------------------------------- */

/* The length of the well-formed UTF-8 sequence at s (n bytes left), or 0
 * (overlong forms, surrogates and code points above U+10FFFF are not). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t len = s[0] >= 0xc2 && s[0] <= 0xdf   ? 2
                 : s[0] >= 0xe0 && s[0] <= 0xef ? 3
                 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4
                                                : 0;
    if (!len || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) ||
        (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))
        return 0;
    return len;
}

long json_escape(char *out, size_t cap, const void *src, size_t n)
{
    const unsigned char *s = src;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        char tmp[8];
        const char *from = tmp;
        size_t m;
        if (s[i] >= 0x80) {
            if (!(m = utf8_len(s + i, n - i)))
                return -1;
            from = (const char *)s + i;
        } else if (s[i] == '"' || s[i] == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)s[i];
            m = 2;
        } else if (s[i] < 0x20 || s[i] == 0x7f) {
            m = (size_t)snprintf(tmp, sizeof tmp, "\\u%04x", s[i]);
        } else {
            tmp[0] = (char)s[i];
            m = 1;
        }
        if (k + m > cap)
            return -1;
        memcpy(out + k, from, m);
        k += m;
        i += s[i] >= 0x80 ? m : 1;
    }
    return (long)k;
}
