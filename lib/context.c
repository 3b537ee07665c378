/*
 * context.c - options, opening and closing a context (rsv_open,
 * rsv_open_dsn, rsv_close), and the checks made on the server and
 * connection when a context is opened (the schema's are schema.c's).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "internal.h"

static void options_defaults(rsv_options *o)
{
    memset(o, 0, sizeof *o);
    o->version = RSV_OPTIONS_VERSION;
    o->flags = 0;
    o->pool_cap = 1000;
    o->refill_low_water = -1; /* = pool_cap * 3 / 4, resolved at open */
    o->hold_ttl_ms = 600000;
    o->max_retries = 8;
    o->retry_base_us = 2000;
    o->lock_wait_timeout_s = 0;
    o->conn_tag_prefix = NULL;
    o->settled_retention_s = 7 * 24 * 3600;
    o->pool_idle_s = 3600;
    o->call_timeout_ms = 5000;
    o->stmt_cache_max = RSV_STMT_CACHE;
}

RSV_EXTERN int rsv_options_init(rsv_options *opts, unsigned int version)
{
    if (!opts || version == 0 || version > RSV_OPTIONS_VERSION)
        return RSV_EINVAL;
    rsv_options o;
    options_defaults(&o);
    o.version = version;
    memcpy(opts, &o, sizeof o);
    return RSV_OK;
}

RSV_EXTERN size_t rsv_options_size(void) { return sizeof(rsv_options); }

static int valid_tag_prefix(const char *p)
{
    size_t n = strlen(p);
    if (n > 32)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        /* No '*' or '/': the prefix goes inside a comment it must not
         * close. */
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == ':' || c == '.' ||
              c == '-'))
            return 0;
    }
    return 1;
}

static int apply_options(rsv_ctx *ctx, const rsv_options *in)
{
    rsv_options o;
    options_defaults(&o);
    if (in) {
        if (in->version == 0 || in->version > RSV_OPTIONS_VERSION)
            return ctx_fail(ctx, RSV_EINVAL,
                            "options version %u unknown (this library knows "
                            "up to %u): use rsv_options_init()",
                            in->version, RSV_OPTIONS_VERSION);
        memcpy(&o, in, sizeof o);
        o.version = RSV_OPTIONS_VERSION;
    }
    if (o.flags &
        ~(RSV_OPT_NO_PROACTIVE_REFILL | RSV_OPT_REPLICA_ACK | TEST_OPT_FLAGS))
        return ctx_fail(ctx, RSV_EINVAL, "unknown option flags 0x%x", o.flags);
    if (o.pool_cap < 1 || o.pool_cap > POOL_CAP_MAX)
        return ctx_fail(ctx, RSV_EINVAL, "pool_cap must be 1..%d, not %lld",
                        POOL_CAP_MAX, (long long)o.pool_cap);
    if (o.refill_low_water == -1)
        /* three quarters: at half, hot pools ran dry before the refill
         * came (docs/performance.md) */
        o.refill_low_water = o.pool_cap * 3 / 4;
    if (o.refill_low_water < 0 || o.refill_low_water > o.pool_cap)
        return ctx_fail(ctx, RSV_EINVAL,
                        "refill_low_water must be 0..pool_cap (or -1 for "
                        "pool_cap * 3 / 4), not %lld",
                        (long long)o.refill_low_water);
    if (o.hold_ttl_ms < 1 || o.hold_ttl_ms > RSV_TTL_MAX_MS)
        return ctx_fail(ctx, RSV_EINVAL, "hold_ttl_ms must be 1..30 days");
    if (o.max_retries < 0 || o.max_retries > 100)
        return ctx_fail(ctx, RSV_EINVAL, "max_retries must be 0..100");
    if (o.retry_base_us < 1 || o.retry_base_us > 1000000)
        return ctx_fail(ctx, RSV_EINVAL, "retry_base_us must be 1..1000000");
    if (o.lock_wait_timeout_s < 0 || o.lock_wait_timeout_s > 3600)
        return ctx_fail(ctx, RSV_EINVAL,
                        "lock_wait_timeout_s must be 0..3600");
    if (o.settled_retention_s < 0)
        return ctx_fail(ctx, RSV_EINVAL, "settled_retention_s must be >= 0");
    if (o.pool_idle_s < 0 || o.pool_idle_s > 30LL * 24 * 3600)
        return ctx_fail(ctx, RSV_EINVAL,
                        "pool_idle_s must be 0..2592000 (30 days), not %lld",
                        (long long)o.pool_idle_s);
    if (o.call_timeout_ms < 0 || o.call_timeout_ms > 3600 * 1000)
        return ctx_fail(ctx, RSV_EINVAL,
                        "call_timeout_ms must be 0..3600000 (one hour), not "
                        "%lld", (long long)o.call_timeout_ms);
    if (o.stmt_cache_max < 1 || o.stmt_cache_max > RSV_STMT_CACHE)
        return ctx_fail(ctx, RSV_EINVAL, "stmt_cache_max must be 1..%d, not "
                        "%d", RSV_STMT_CACHE, (int)o.stmt_cache_max);
    const char *prefix = o.conn_tag_prefix ? o.conn_tag_prefix : "conn_tag:";
    if (!valid_tag_prefix(prefix))
        return ctx_fail(ctx, RSV_EINVAL,
                        "conn_tag_prefix must be at most 32 characters of "
                        "[A-Za-z0-9_:.-]");
    snprintf(ctx->tag_prefix, sizeof ctx->tag_prefix, "%s", prefix);
    o.conn_tag_prefix = NULL; /* the copy lives in tag_prefix */
    ctx->opts = o;
    ctx->stmt_lock_wait_s = o.lock_wait_timeout_s;
    if (o.call_timeout_ms > 0) {
        /* A statement may wait for a row lock a quarter of the budget (at
         * least the server's 1 s granularity): a call whose every attempt
         * waits still gets a few before the budget is spent, and the last
         * wait ends at most that long after it. */
        int32_t w = (int32_t)((o.call_timeout_ms + 3999) / 4000);
        if (ctx->stmt_lock_wait_s == 0 || w < ctx->stmt_lock_wait_s)
            ctx->stmt_lock_wait_s = w;
    }
    return RSV_OK;
}

/* A Galera node (MariaDB Galera Cluster, Percona XtraDB Cluster) rolls a
 * transaction back when a write set from another node conflicts with it
 * (a brute-force abort), whatever statement the transaction is in.  When
 * that lands during a prepared SELECT or a prepare, the server can answer
 * the statement as if nothing happened: the transaction is gone, the
 * connection is back in autocommit mode, and each later statement of the
 * transaction would commit on its own (measured on MariaDB 10.11 with
 * galera-4: tests/galera/repro_bf_abort.c).  Every answer says whether the
 * connection is still in a transaction, so the library checks it after
 * each statement of its transactions (sql.c) and runs the transaction
 * again.  The statements inside a procedure stay all or nothing (the same
 * program: docs/scaling.md section 7), so the procedures are used there
 * too; a procedure that fails with anything but a conflict is in doubt,
 * as a failed COMMIT is (txn.c).  SHOW VARIABLES: a server without wsrep
 * has no such variable and answers no row. */
static int check_galera(rsv_ctx *ctx)
{
    char name[64], on[16];
    int rc = sql_query_row(ctx, "/* conn_tag:open */ SHOW GLOBAL VARIABLES "
                                "LIKE 'wsrep_on'",
                           name, sizeof name, on, sizeof on);
    if (rc)
        return rc;
    ctx->galera = strcmp(on, "ON") == 0 || strcmp(on, "1") == 0;
    return RSV_OK;
}

static int check_server(rsv_ctx *ctx)
{
    const char *info = mysql_get_server_info(ctx->conn);
    unsigned long v = mysql_get_server_version(ctx->conn);
    FAULT_SERVER(&v, &info);
    ctx->is_mariadb = info && strstr(info, "MariaDB") != NULL;
    /* (MySQL renamed it in 8.0.3; MariaDB 10.x knows the old name) */
    ctx->isolation_var = ctx->is_mariadb || v < 80003 ? "tx_isolation"
                                                      : "transaction_isolation";
    /* SKIP LOCKED: MariaDB 10.6, MySQL 8.0.1; MySQL enforces the
     * schema's CHECK constraints (no stock figure below zero) only from
     * 8.0.16 and parses but ignores them before. */
    if (ctx->is_mariadb ? v < 100600 : v < 80016)
        return ctx_fail(ctx, RSV_ESERVER,
                        "server %s is too old: libreserve needs SELECT ... "
                        "FOR UPDATE SKIP LOCKED and enforced CHECK "
                        "constraints, MariaDB >= 10.6 or MySQL >= 8.0.16",
                        info ? info : "(unknown)");
    /* MySQL has no SET STATEMENT: the option could not be honoured. */
    if (!ctx->is_mariadb && ctx->opts.lock_wait_timeout_s > 0)
        return ctx_fail(ctx, RSV_ECONFIG,
                        "lock_wait_timeout_s is applied per statement with "
                        "MariaDB's SET STATEMENT, which MySQL lacks: leave "
                        "it 0 and set innodb_lock_wait_timeout on the "
                        "session");

    char log_bin[32], fmt[32];
    int rc = sql_query_row(ctx, "/* conn_tag:open */ SELECT @@log_bin, "
                                "@@binlog_format",
                           log_bin, sizeof log_bin, fmt, sizeof fmt);
    if (rc)
        return rc;
    if (strcmp(log_bin, "1") == 0 && strcmp(fmt, "STATEMENT") == 0)
        return ctx_fail(ctx, RSV_ESERVER,
                        "binlog_format=STATEMENT: statements with SKIP "
                        "LOCKED and LIMIT are unsafe to replicate by "
                        "statement, and InnoDB refuses writes at READ "
                        "COMMITTED under it; use ROW or MIXED");
    return check_galera(ctx);
}

/* A new context, its operation clock started as rsv_open's; NULL when out
 * of memory. */
static rsv_ctx *ctx_new(void)
{
    rsv_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return NULL;
    FAULT_OPENED(ctx);
    ctx_rand_seed(ctx);
    op_begin(ctx, OP_OPEN, 0, 0, NULL, 0);
    return ctx;
}

/* rsv_open's options and checks, on conn. */
static int ctx_open_on(rsv_ctx *ctx, MYSQL *conn, const rsv_options *opts)
{
    ctx->conn = conn;
    int rc = apply_options(ctx, opts);
    if (rc)
        return rc;
    if (mysql_thread_id(conn) == 0 || mysql_ping(conn) != 0)
        return ctx_fail(ctx, RSV_ECONN,
                        "the connection is not established: %s",
                        mysql_error(conn));
    my_bool reconnect = 0;
    if (mysql_get_optionv(conn, MYSQL_OPT_RECONNECT, &reconnect) == 0 &&
        reconnect)
        return ctx_fail(ctx, RSV_ECONFIG,
                        "MYSQL_OPT_RECONNECT is enabled: an automatic "
                        "reconnect in the middle of a transaction could "
                        "apply a statement outside it; disable it and "
                        "reconnect explicitly");
    ctx->thread_id = mysql_thread_id(conn);
    if ((rc = check_server(ctx)) || (rc = schema_check(ctx)))
        return rc;
    if ((ctx->opts.flags & RSV_OPT_REPLICA_ACK) &&
        replica_ack_lost(ctx) < 0)
        return ctx->code == RSV_ECONN
                   ? RSV_ECONN
                   : ctx_fail(ctx, RSV_ECONFIG,
                              "RSV_OPT_REPLICA_ACK reads the server's "
                              "semi-synchronous replication status, which "
                              "it cannot: %s", ctx->msg);
    return ctx_ok(ctx);
}

RSV_EXTERN int rsv_open(rsv_ctx **out, MYSQL *conn, const rsv_options *opts)
{
    if (!out)
        return RSV_EINVAL;
    *out = NULL;
    if (!conn)
        return RSV_EINVAL;
    rsv_ctx *ctx = ctx_new();
    if (!ctx)
        return RSV_ENOMEM;
    *out = ctx;
    return ctx_open_on(ctx, conn, opts);
}

RSV_EXTERN int rsv_open_dsn(rsv_ctx **out, const char *dsn,
                            const rsv_options *opts)
{
    if (!out)
        return RSV_EINVAL;
    *out = NULL;
    if (!dsn)
        return RSV_EINVAL;
    rsv_ctx *ctx = ctx_new();
    if (!ctx)
        return RSV_ENOMEM;
    *out = ctx;
    MYSQL *m;
    int rc = conn_open_dsn(ctx, dsn, &m);
    return rc ? rc : ctx_open_on(ctx, m, opts);
}

RSV_EXTERN void rsv_close(rsv_ctx *ctx)
{
    if (!ctx)
        return;
    nb_free(ctx); /* first: a call in flight owns the connection */
    sql_cache_clear(ctx);
    conn_release(ctx);
    args_free(&ctx->args);
    res_free(&ctx->res);
    buf_free(&ctx->sql);
    free(ctx);
}

RSV_EXTERN MYSQL *rsv_connection(const rsv_ctx *ctx)
{
    return ctx ? ctx->conn : NULL;
}
