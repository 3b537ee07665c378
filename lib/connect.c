/*
 * connect.c - the connections a context opens itself (rsv_open_dsn),
 * and reconnecting (rsv_reconnect).
 *
 * Owns the connection string: its parsing (%XX escapes, the keys it
 * knows, nothing else), the Connector/C options it becomes, and the copy
 * kept for connecting again.  Bindings over FFI have no MYSQL* of their own
 * to lend, so the library opens one; everything else about the context is
 * rsv_open's (context.c, which opens a context on what conn_open_dsn
 * connected).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct dsn_parts {
    char *text;          /* the decoded parts, NUL-separated, owned */
    const char *user, *password, *host, *db, *socket;
    const char *ssl_ca, *ssl_capath, *ssl_cert, *ssl_key;
    unsigned int port;
    unsigned int connect_timeout, read_timeout, write_timeout;
    int ssl, ssl_verify;
};

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

/* Decode s[0..n) (%XX escapes) into *w, NUL-terminate it there and
 * advance *w; the decoded part is never longer than the text. */
static const char *decode(const char *s, size_t n, char **w, int *bad)
{
    char *out = *w, *p = out;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            *p++ = s[i];
            continue;
        }
        int hi = i + 2 < n ? hexval(s[i + 1]) : -1;
        int lo = i + 2 < n ? hexval(s[i + 2]) : -1;
        if (hi < 0 || lo < 0) {
            *bad = 1;
            break;
        }
        *p++ = (char)(hi * 16 + lo);
        i += 2;
    }
    *p++ = '\0';
    *w = p;
    return out;
}

static int parse_uint(const char *s, unsigned int max, unsigned int *out)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (!*s || *end || v > max)
        return -1;
    *out = (unsigned int)v;
    return 0;
}

static int set_key(struct dsn_parts *d, const char *key, const char *val)
{
    const char **str = NULL;
    unsigned int *num = NULL;
    int *flag = NULL;
    if (!strcmp(key, "socket"))
        str = &d->socket;
    else if (!strcmp(key, "ssl_ca"))
        str = &d->ssl_ca;
    else if (!strcmp(key, "ssl_capath"))
        str = &d->ssl_capath;
    else if (!strcmp(key, "ssl_cert"))
        str = &d->ssl_cert;
    else if (!strcmp(key, "ssl_key"))
        str = &d->ssl_key;
    else if (!strcmp(key, "connect_timeout"))
        num = &d->connect_timeout;
    else if (!strcmp(key, "read_timeout"))
        num = &d->read_timeout;
    else if (!strcmp(key, "write_timeout"))
        num = &d->write_timeout;
    else if (!strcmp(key, "ssl"))
        flag = &d->ssl;
    else if (!strcmp(key, "ssl_verify"))
        flag = &d->ssl_verify;
    else
        return -1;
    if (str) {
        *str = val;
        return 0;
    }
    if (num)
        return parse_uint(val, 86400, num);
    if (strcmp(val, "0") && strcmp(val, "1"))
        return -1;
    *flag = val[0] == '1';
    return 0;
}

/* Parse dsn into d (d->text owned); RSV_EINVAL with the message on a
 * malformed one. */
static int dsn_parse(rsv_ctx *ctx, const char *dsn, struct dsn_parts *d)
{
    memset(d, 0, sizeof *d);
    const char *s = dsn;
    if (!strncmp(s, "mariadb://", 10))
        s += 10;
    else if (!strncmp(s, "mysql://", 8))
        s += 8;
    else
        return ctx_fail(ctx, RSV_EINVAL,
                        "the dsn must begin with mariadb:// or mysql://");
    d->text = malloc(strlen(s) + 16);
    if (!d->text)
        return ctx_fail(ctx, RSV_ENOMEM, "out of memory");
    char *w = d->text;
    int bad = 0;
    const char *end = s + strcspn(s, "/?");  /* authority */
    const char *at = memchr(s, '@', (size_t)(end - s));
    if (at) {
        const char *colon = memchr(s, ':', (size_t)(at - s));
        d->user = decode(s, (size_t)((colon ? colon : at) - s), &w, &bad);
        if (colon)
            d->password = decode(colon + 1, (size_t)(at - colon - 1), &w,
                                 &bad);
        s = at + 1;
    }
    const char *colon = memchr(s, ':', (size_t)(end - s));
    d->host = decode(s, (size_t)((colon ? colon : end) - s), &w, &bad);
    if (colon) {
        char port[8];
        size_t n = (size_t)(end - colon - 1);
        if (n == 0 || n >= sizeof port)
            bad = 1;
        else {
            memcpy(port, colon + 1, n);
            port[n] = '\0';
            bad |= parse_uint(port, 65535, &d->port) != 0;
        }
    }
    s = end;
    if (*s == '/') {
        end = s + 1 + strcspn(s + 1, "?");
        d->db = decode(s + 1, (size_t)(end - s - 1), &w, &bad);
        s = end;
    }
    if (bad)
        return ctx_fail(ctx, RSV_EINVAL,
                        "malformed dsn (user, password, host, port or "
                        "database): %%XX escapes and a numeric port");
    while (*s == '?' || *s == '&') {
        s++;
        end = s + strcspn(s, "&");
        const char *eq = memchr(s, '=', (size_t)(end - s));
        if (!eq)
            return ctx_fail(ctx, RSV_EINVAL,
                            "malformed dsn: a key without a value");
        const char *key = decode(s, (size_t)(eq - s), &w, &bad);
        const char *val = decode(eq + 1, (size_t)(end - eq - 1), &w, &bad);
        if (bad || set_key(d, key, val) != 0)
            return ctx_fail(ctx, RSV_EINVAL,
                            "dsn key '%.64s' is unknown or its value is "
                            "malformed", key);
        s = end;
    }
    if (!d->db || !*d->db)
        return ctx_fail(ctx, RSV_EINVAL,
                        "the dsn names no database (.../DATABASE)");
    return RSV_OK;
}

static const char *or_null(const char *s) { return s && *s ? s : NULL; }

/* A connection made as d says, or NULL with the message set. */
static MYSQL *dsn_connect(rsv_ctx *ctx, const struct dsn_parts *d)
{
    MYSQL *m = mysql_init(NULL);
    if (!m) {
        ctx_fail(ctx, RSV_ENOMEM, "mysql_init failed");
        return NULL;
    }
    if (d->connect_timeout)
        mysql_optionsv(m, MYSQL_OPT_CONNECT_TIMEOUT, &d->connect_timeout);
    if (d->read_timeout)
        mysql_optionsv(m, MYSQL_OPT_READ_TIMEOUT, &d->read_timeout);
    if (d->write_timeout)
        mysql_optionsv(m, MYSQL_OPT_WRITE_TIMEOUT, &d->write_timeout);
    if (d->ssl_ca)
        mysql_optionsv(m, MYSQL_OPT_SSL_CA, d->ssl_ca);
    if (d->ssl_capath)
        mysql_optionsv(m, MYSQL_OPT_SSL_CAPATH, d->ssl_capath);
    if (d->ssl_cert)
        mysql_optionsv(m, MYSQL_OPT_SSL_CERT, d->ssl_cert);
    if (d->ssl_key)
        mysql_optionsv(m, MYSQL_OPT_SSL_KEY, d->ssl_key);
    my_bool yes = 1;
    if (d->ssl)
        mysql_optionsv(m, MYSQL_OPT_SSL_ENFORCE, &yes);
    if (d->ssl_verify)
        mysql_optionsv(m, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &yes);
    if (!mysql_real_connect(m, or_null(d->host), or_null(d->user),
                            d->password, d->db, d->port, or_null(d->socket),
                            0)) {
        ctx_fail(ctx, RSV_ECONN, "cannot connect: %s (MySQL error %u)",
                 mysql_error(m), mysql_errno(m));
        mysql_close(m);
        return NULL;
    }
    return m;
}

void conn_release(rsv_ctx *ctx)
{
    if (!ctx->dsn)
        return;
    if (ctx->conn)
        mysql_close(ctx->conn);
    ctx->conn = NULL;
    free(ctx->dsn->text);
    free(ctx->dsn);
    ctx->dsn = NULL;
}

int conn_open_dsn(rsv_ctx *ctx, const char *dsn, MYSQL **out)
{
    *out = NULL;
    ctx->dsn = calloc(1, sizeof *ctx->dsn);
    if (!ctx->dsn)
        return ctx_fail(ctx, RSV_ENOMEM, "out of memory");
    int rc = dsn_parse(ctx, dsn, ctx->dsn);
    if (rc)
        return rc;
    *out = dsn_connect(ctx, ctx->dsn);
    return *out ? RSV_OK : ctx->code;
}

RSV_EXTERN int rsv_reconnect(rsv_ctx *ctx)
{
    if (!ctx || nb_busy(ctx))
        return RSV_EINVAL;
    /* Every statement handle belongs to the session that is gone. */
    sql_cache_clear(ctx);
    if (ctx->dsn) {
        MYSQL *m = dsn_connect(ctx, ctx->dsn);
        if (!m)
            return ctx->code;
        if (ctx->conn)
            mysql_close(ctx->conn);
        ctx->conn = m;
    } else {
        /* The application's handle, reconnected in place; auto-reconnect
         * stays off outside this call (txn_run refuses it). */
        my_bool on = 1, off = 0;
        mysql_optionsv(ctx->conn, MYSQL_OPT_RECONNECT, &on);
        int failed = mariadb_reconnect(ctx->conn) != 0;
        mysql_optionsv(ctx->conn, MYSQL_OPT_RECONNECT, &off);
        if (failed)
            return ctx_fail(ctx, RSV_ECONN, "cannot reconnect: %s "
                            "(MySQL error %u)", mysql_error(ctx->conn),
                            mysql_errno(ctx->conn));
    }
    ctx->thread_id = mysql_thread_id(ctx->conn);
    /* Another server, or the same one since a schema load: what it has
     * decides again which procedures are used. */
    int rc = schema_check(ctx);
    return rc ? rc : ctx_ok(ctx);
}
