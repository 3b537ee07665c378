/*
 * connect.c - the connections a context opens itself (rsv_open_dsn),
 * and reconnecting (rsv_reconnect).
 *
 * Owns the connection string: its parsing (%XX escapes, the keys it
 * knows, nothing else, a list of hosts), the Connector/C options it
 * becomes, the copy kept for connecting again, and finding the server
 * the target asks for among its hosts (the writable one: after a
 * failover or a node's loss the same dsn leads to the new one).  Bindings
 * over FFI have no MYSQL* of their own to lend, so the library opens one;
 * everything else about the context is rsv_open's (context.c, which opens
 * a context on what conn_open_dsn connected).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

#define DSN_HOSTS_MAX 16

enum { TARGET_WRITABLE, TARGET_ANY };

struct dsn_parts {
    char *text;          /* the decoded parts, NUL-separated, owned */
    const char *user, *password, *db, *socket;
    const char *host[DSN_HOSTS_MAX]; /* "" for none (the default) */
    unsigned int port[DSN_HOSTS_MAX];
    int nhosts;
    const char *ssl_ca, *ssl_capath, *ssl_cert, *ssl_key;
    unsigned int connect_timeout, read_timeout, write_timeout;
    int ssl, ssl_verify, connect_timeout_set;
    int target;          /* TARGET_* */
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
    else if (!strcmp(key, "connect_timeout")) {
        num = &d->connect_timeout;
        d->connect_timeout_set = 1;
    } else if (!strcmp(key, "target")) {
        if (!strcmp(val, "writable"))
            d->target = TARGET_WRITABLE;
        else if (!strcmp(val, "any"))
            d->target = TARGET_ANY;
        else
            return -1;
        return 0;
    }
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
    /* HOST[:PORT], or several of them separated by commas */
    for (;;) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *hend = comma ? comma : end;
        const char *colon = memchr(s, ':', (size_t)(hend - s));
        int hbad = 0;
        unsigned int port = 0;
        if (d->nhosts == DSN_HOSTS_MAX)
            return ctx_fail(ctx, RSV_EINVAL,
                            "the dsn names more than %d hosts",
                            DSN_HOSTS_MAX);
        if (colon) {
            char num[8];
            size_t n = (size_t)(hend - colon - 1);
            if (n == 0 || n >= sizeof num) {
                hbad = 1;
            } else {
                memcpy(num, colon + 1, n);
                num[n] = '\0';
                hbad = parse_uint(num, 65535, &port) != 0 || port == 0;
            }
        }
        const char *host = decode(s, (size_t)((colon ? colon : hend) - s),
                                  &w, &hbad);
        if (hbad || ((comma || d->nhosts) && !*host))
            return ctx_fail(ctx, RSV_EINVAL,
                            "malformed host '%.*s' in the dsn: each of a "
                            "list of hosts is HOST or HOST:PORT, PORT "
                            "1..65535", (int)(hend - s > 64 ? 64 : hend - s),
                            s);
        d->host[d->nhosts] = host;
        d->port[d->nhosts++] = port;
        if (!comma)
            break;
        s = comma + 1;
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
    if (d->nhosts > 1 && d->socket && *d->socket)
        return ctx_fail(ctx, RSV_EINVAL,
                        "the dsn names several hosts and a socket: a "
                        "socket is one local server; list hosts only");
    /* Connector/C waits for an unreachable host as long as the system
     * does (minutes) unless told: with other hosts to try, a few seconds
     * per host. */
    if (d->nhosts > 1 && !d->connect_timeout_set)
        d->connect_timeout = 5;
    return RSV_OK;
}

static const char *or_null(const char *s) { return s && *s ? s : NULL; }

/* Host i as the messages name it. */
static void host_name(const struct dsn_parts *d, int i, char *out,
                      size_t len)
{
    const char *h = d->host[i];
    if (d->socket && *d->socket)
        snprintf(out, len, "%s", d->socket);
    else if (d->port[i])
        snprintf(out, len, "%s:%u", *h ? h : "localhost", d->port[i]);
    else
        snprintf(out, len, "%s", *h ? h : "localhost");
}

/* Rows of name and value (SHOW VARIABLES, SHOW STATUS) into out by the
 * position of their name in names ("" where the server has none); 0, or
 * -1 with the server's error. */
static int show_values(MYSQL *m, const char *q, const char *const *names,
                       int n, char (*out)[32])
{
    for (int i = 0; i < n; i++)
        out[i][0] = '\0';
    if (mysql_query(m, q) != 0)
        return -1;
    MYSQL_RES *r = mysql_store_result(m);
    if (!r)
        return -1;
    MYSQL_ROW row;
    while (mysql_num_fields(r) == 2 && (row = mysql_fetch_row(r)))
        for (int i = 0; i < n; i++)
            if (row[0] && row[1] && !strcasecmp(row[0], names[i]))
                snprintf(out[i], sizeof out[i], "%s", row[1]);
    mysql_free_result(r);
    return 0;
}

/* NULL when m is a server that takes writes now; else why not (into
 * why).  Not read-only; and on a Galera node (wsrep_on) ready, synced
 * and in the primary component, where a write can commit. */
static const char *not_writable(MYSQL *m, char *why, size_t len)
{
    static const char *const vars[] = {"read_only", "wsrep_on"};
    static const char *const status[] = {
        "wsrep_ready", "wsrep_local_state_comment", "wsrep_cluster_status"};
    char v[2][32], ws[3][32];
    if (show_values(m, "SHOW GLOBAL VARIABLES WHERE Variable_name IN "
                       "('read_only', 'wsrep_on')", vars, 2, v) != 0 ||
        (!strcasecmp(v[1], "ON") &&
         show_values(m, "SHOW GLOBAL STATUS WHERE Variable_name IN "
                        "('wsrep_ready', 'wsrep_local_state_comment', "
                        "'wsrep_cluster_status')", status, 3, ws) != 0)) {
        snprintf(why, len, "cannot tell whether it takes writes: %s (MySQL "
                 "error %u)", mysql_error(m), mysql_errno(m));
        return why;
    }
    if (strcasecmp(v[0], "OFF") != 0 && strcmp(v[0], "0") != 0) {
        snprintf(why, len, "read-only (read_only=%s: a replica?)", v[0]);
        return why;
    }
    if (strcasecmp(v[1], "ON") != 0)
        return NULL; /* not a Galera node */
    if (strcmp(ws[2], "Primary") != 0 || strcasecmp(ws[0], "ON") != 0 ||
        strcmp(ws[1], "Synced") != 0) {
        snprintf(why, len, "a Galera node that takes no writes now "
                 "(wsrep_cluster_status %s, wsrep_ready %s, state %s: "
                 "outside the primary component, or joining)",
                 ws[2][0] ? ws[2] : "?", ws[0][0] ? ws[0] : "?",
                 ws[1][0] ? ws[1] : "?");
        return why;
    }
    return NULL;
}

/* A connection to host i of d, or NULL with the reason in why. */
static MYSQL *host_connect(const struct dsn_parts *d, int i, char *why,
                           size_t len)
{
    MYSQL *m = mysql_init(NULL);
    if (!m) {
        snprintf(why, len, "out of memory (mysql_init)");
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
    if (!mysql_real_connect(m, or_null(d->host[i]), or_null(d->user),
                            d->password, d->db, d->port[i],
                            or_null(d->socket), 0)) {
        snprintf(why, len, "cannot connect: %s (MySQL error %u)",
                 mysql_error(m), mysql_errno(m));
        mysql_close(m);
        return NULL;
    }
    return m;
}

/* A connection to the first host of d, in the order given, that answers
 * and is what the target asks for; or NULL with the message set, naming
 * every host and why it was passed over: RSV_ENOTPRIMARY when a host
 * answered but takes no writes, else RSV_ECONN. */
static MYSQL *dsn_connect(rsv_ctx *ctx, const struct dsn_parts *d)
{
    char msg[sizeof ctx->msg] = "", why[256], name[128];
    size_t used = 0;
    int answered = 0;
    for (int i = 0; i < d->nhosts; i++) {
        MYSQL *m = host_connect(d, i, why, sizeof why);
        if (m) {
            answered = 1;
            if (d->target == TARGET_ANY || !not_writable(m, why, sizeof why))
                return m;
            mysql_close(m);
        }
        host_name(d, i, name, sizeof name);
        if (used < sizeof msg)
            used += (size_t)snprintf(msg + used, sizeof msg - used, "%s%s: %s",
                                     i ? "; " : "", name, why);
    }
    if (d->nhosts == 1)
        ctx_fail(ctx, answered ? RSV_ENOTPRIMARY : RSV_ECONN, "%s%s",
                 answered ? "not the writable server (target=writable; "
                            "target=any takes it): " : "",
                 msg);
    else
        ctx_fail(ctx, answered ? RSV_ENOTPRIMARY : RSV_ECONN,
                 "no %sserver among the dsn's %d hosts: %s",
                 d->target == TARGET_WRITABLE ? "writable " : "", d->nhosts,
                 msg);
    return NULL;
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
