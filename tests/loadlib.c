/*
 * loadlib.c - see loadlib.h.
 */
#include "loadlib.h"
#include "../tools/rsv-admin/sqlscript.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t ll_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void ll_sleep_ms(long ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

uint64_t ll_rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

unsigned ll_rnd(uint64_t *s, unsigned n)
{
    return n ? (unsigned)(ll_rng_next(s) % n) : 0;
}

void ll_backoff(uint64_t *rng, int tries, long base_ms, int max_shift)
{
    long ms = base_ms << (tries < max_shift ? tries : max_shift);
    ll_sleep_ms(ms / 2 + ll_rnd(rng, (unsigned)ms / 2 + 1));
}

int ll_server_from_env(ll_server *s)
{
    memset(s, 0, sizeof *s);
    s->socket = getenv("RSV_TEST_SOCKET");
    s->user = getenv("RSV_TEST_USER");
    s->password = getenv("RSV_TEST_PASSWORD");
    s->flags = CLIENT_MULTI_STATEMENTS;
    return s->socket ? 0 : -1;
}

MYSQL *ll_connect(MYSQL *into, const ll_server *s, const char *db,
                  char *err, size_t errlen)
{
    MYSQL *m = mysql_init(into);
    if (!m) {
        if (err)
            snprintf(err, errlen, "out of memory");
        return NULL;
    }
    unsigned to = s->connect_timeout_s, rw = s->rw_timeout_s;
    if (to)
        mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &to);
    if (rw) {
        mysql_options(m, MYSQL_OPT_READ_TIMEOUT, &rw);
        mysql_options(m, MYSQL_OPT_WRITE_TIMEOUT, &rw);
    }
    if (!mysql_real_connect(m, s->socket ? NULL : s->host,
                            s->user ? s->user : "root", s->password, db,
                            s->socket ? 0 : s->port, s->socket, s->flags)) {
        if (err)
            snprintf(err, errlen, "%s", mysql_error(m));
        mysql_close(m);
        return NULL;
    }
    return m;
}

static unsigned errno_of(MYSQL *m)
{
    unsigned e = mysql_errno(m);
    return e ? e : 2000; /* CR_UNKNOWN_ERROR: failed without a number */
}

unsigned ll_exec(MYSQL *m, const char *sql)
{
    if (mysql_query(m, sql) != 0)
        return errno_of(m);
    for (;;) {
        MYSQL_RES *r = mysql_store_result(m);
        if (r)
            mysql_free_result(r);
        else if (mysql_field_count(m) != 0)
            return errno_of(m); /* a result set that could not be read */
        /* mysql_next_result() resets mysql_affected_rows() even when
         * nothing follows: only asked when something does, so callers
         * can still read the count of a single statement */
        if (!mysql_more_results(m))
            return 0;
        if (mysql_next_result(m) > 0)
            return errno_of(m);
    }
}

int ll_i64(MYSQL *m, const char *sql, int64_t if_null, int64_t *out)
{
    *out = if_null;
    if (mysql_query(m, sql) != 0)
        return -1;
    MYSQL_RES *r = mysql_store_result(m);
    if (!r)
        return -1;
    MYSQL_ROW row = mysql_fetch_row(r);
    int found = row != NULL;
    if (row && row[0])
        *out = strtoll(row[0], NULL, 10);
    mysql_free_result(r);
    /* later results of a multi-statement query, so the connection is
     * ready for the next one */
    while (mysql_more_results(m) && mysql_next_result(m) == 0) {
        MYSQL_RES *x = mysql_store_result(m);
        if (x)
            mysql_free_result(x);
    }
    return found ? 0 : 1;
}

char *ll_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    if (p)
        p[n] = '\0';
    fclose(f);
    return p;
}

const char *ll_schema_path(void)
{
    const char *path = getenv("RSV_SCHEMA");
    return path ? path : "sql/schema.sql";
}

int ll_load_schema(MYSQL *m, const char *path, char *err, size_t errlen)
{
    if (!path)
        path = ll_schema_path();
    char *schema = ll_slurp(path);
    if (!schema) {
        snprintf(err, errlen, "cannot read %s", path);
        return -1;
    }
    int rc = sqlscript_run(m, schema, err, errlen);
    free(schema);
    return rc == 0 ? 0 : -2;
}

int ll_call_once(rsv_ctx *ctx, const ll_call *k)
{
    size_t tl = strlen(k->tok);
    switch (k->kind) {
    case LL_RESERVE:
        return rsv_reserve(ctx, k->shop, k->tok, tl, k->cart, k->ttl_ms);
    case LL_CLAIM:
        return rsv_claim(ctx, k->shop, k->tok, tl);
    default:
        return rsv_release(ctx, k->shop, k->tok, tl);
    }
}

int ll_cart_allocations(const rsv_cart *cart, const uint64_t *items,
                        int merge, ll_alloc *out, int max)
{
    int n = 0;
    size_t nl = rsv_cart_lines(cart);
    for (size_t l = 0; l < nl; l++) {
        size_t cnt = 0;
        rsv_cart_allocation_count(cart, l, &cnt);
        for (size_t x = 0; x < cnt; x++) {
            uint64_t loc;
            int64_t q;
            if (rsv_cart_allocation(cart, l, x, &loc, &q) != RSV_OK)
                continue;
            int f = -1;
            for (int y = 0; merge && y < n; y++)
                if (out[y].item == items[l] && out[y].loc == loc)
                    f = y;
            if (f < 0 && n < max) {
                f = n++;
                out[f] = (ll_alloc){items[l], loc, 0};
            }
            if (f >= 0)
                out[f].qty += q;
        }
    }
    return n;
}

void ll_format_allocations(const ll_alloc *a, int n, char *buf, size_t len)
{
    /* an entry is at most 20 + 1 + 20 + 1 + 20 characters and a blank */
    size_t o = 0;
    buf[0] = '\0';
    for (int y = 0; y < n && len - o > 64; y++)
        o += (size_t)snprintf(buf + o, len - o, " %llu:%llu:%lld",
                              (unsigned long long)a[y].item,
                              (unsigned long long)a[y].loc,
                              (long long)a[y].qty);
}

void ll_dsn_escape(char *out, size_t n, const char *s)
{
    size_t w = 0;
    for (; s && *s && w + 4 < n; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
            (ch >= '0' && ch <= '9'))
            out[w++] = (char)ch;
        else
            w += (size_t)snprintf(out + w, n - w, "%%%02X", ch);
    }
    out[w] = '\0';
}
