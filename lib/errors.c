/*
 * errors.c - return codes, their names and texts, the per-context message
 * and its public readers (rsv_errmsg, rsv_errcode), and the mapping from server/client error numbers to libreserve codes.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <errmsg.h>
#include <mysqld_error.h>

#include "internal.h"

struct code_info {
    int code;
    const char *name;
    const char *text;
};

static const struct code_info codes[] = {
    {RSV_OK, "RSV_OK", "success"},
    {RSV_PENDING, "RSV_PENDING", "the non-blocking call is in progress"},
    {RSV_EOUTOFSTOCK, "RSV_EOUTOFSTOCK", "out of stock"},
    {RSV_ENOTFOUND, "RSV_ENOTFOUND", "no such checkout"},
    {RSV_EEXPIRED, "RSV_EEXPIRED", "the hold expired and its units were given back"},
    {RSV_ECLAIMED, "RSV_ECLAIMED", "the checkout was already claimed"},
    {RSV_ERELEASED, "RSV_ERELEASED", "the checkout was released"},
    {RSV_EBUSY, "RSV_EBUSY", "busy: lock conflicts persisted through every retry"},
    {RSV_EINDOUBT, "RSV_EINDOUBT", "connection lost during COMMIT: outcome unknown, repeat the call"},
    {RSV_ECONN, "RSV_ECONN", "connection lost or not connected; nothing was applied"},
    {RSV_EINVAL, "RSV_EINVAL", "invalid argument"},
    {RSV_EQUANTITY, "RSV_EQUANTITY", "invalid quantity"},
    {RSV_EEMPTY, "RSV_EEMPTY", "the cart is empty"},
    {RSV_ETOKEN, "RSV_ETOKEN", "invalid checkout token"},
    {RSV_ENOITEM, "RSV_ENOITEM", "unknown item or location"},
    {RSV_ESCHEMA, "RSV_ESCHEMA", "the libreserve schema is not loaded"},
    {RSV_ESERVER, "RSV_ESERVER", "unsupported server or server setting"},
    {RSV_EINTXN, "RSV_EINTXN", "the caller is inside a transaction"},
    {RSV_ENOMEM, "RSV_ENOMEM", "out of memory"},
    {RSV_EDB, "RSV_EDB", "database error"},
    {RSV_ETOOBIG, "RSV_ETOOBIG", "the cart is too large"},
    {RSV_ESTOCK, "RSV_ESTOCK", "stock change refused: units are held"},
    {RSV_ECONFIG, "RSV_ECONFIG", "unsupported connection configuration"},
    {RSV_ERANGE, "RSV_ERANGE", "index out of range"},
    {RSV_EDISABLED, "RSV_EDISABLED", "libreserve is switched off on this context (rsv_set_enabled)"},
    {RSV_ESCHEMAVER, "RSV_ESCHEMAVER", "the database schema version does not match the library (upgrade one of them)"},
    {RSV_ECANCELED, "RSV_ECANCELED", "the call was canceled (rsv_cancel); nothing was applied"},
    {RSV_ENOTPRIMARY, "RSV_ENOTPRIMARY", "the server does not take writes (a replica, or a Galera node outside the primary component); nothing was applied"},
};

static const struct code_info *find_code(int code)
{
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (codes[i].code == code)
            return &codes[i];
    return NULL;
}

RSV_EXTERN const char *rsv_strerror(int code)
{
    const struct code_info *c = find_code(code);
    return c ? c->text : "unknown error code";
}

RSV_EXTERN const char *rsv_code_name(int code)
{
    const struct code_info *c = find_code(code);
    return c ? c->name : NULL;
}

RSV_EXTERN const char *rsv_version(void) { return RSV_VERSION; }

RSV_EXTERN int rsv_version_number(void) { return RSV_VERSION_NUMBER; }

RSV_EXTERN int rsv_schema_version(void) { return RSV_SCHEMA_VERSION; }

int ctx_ok(rsv_ctx *ctx)
{
    ctx->code = RSV_OK;
    ctx->msg[0] = '\0';
    return RSV_OK;
}

int ctx_fail(rsv_ctx *ctx, int code, const char *fmt, ...)
{
    /* Format into a copy: callers often extend the previous message
     * ("%s (gave up ...)", ctx->msg), and formatting a buffer into itself
     * is undefined. */
    char tmp[sizeof ctx->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    memcpy(ctx->msg, tmp, sizeof tmp);
    ctx->code = code;
    return code;
}

int is_conn_errno(unsigned int err)
{
    switch (err) {
    case CR_SERVER_GONE_ERROR:
    case CR_SERVER_LOST:
    case CR_CONN_HOST_ERROR:
    case CR_SERVER_LOST_EXTENDED:
    case CR_COMMANDS_OUT_OF_SYNC: /* a half-read reply: the stream is lost */
    case ER_CONNECTION_KILLED:
    case ER_SERVER_SHUTDOWN:
        return 1;
    default:
        return 0;
    }
}

/* Map a server/client error to a code and record the message.  Deadlocks
 * and lock-wait timeouts become RSV__RETRY: the transaction frame rolls
 * back and retries (a lock-wait timeout only rolls back the statement, so
 * the rollback is ours to do). */
int ctx_db_fail(rsv_ctx *ctx, unsigned int err, const char *text,
                const char *what)
{
    int code;
    ctx->db_errno = err;
    switch (err) {
    case ER_LOCK_DEADLOCK:
    case ER_LOCK_WAIT_TIMEOUT:
        code = RSV__RETRY;
        break;
    case ER_NO_SUCH_TABLE:
    case ER_BAD_FIELD_ERROR:
        code = RSV_ESCHEMA;
        break;
    /* A server that refuses the statement before it runs: a Galera node
     * outside the primary component ("WSREP has not yet prepared node for
     * application use", also for reads and START TRANSACTION), or a
     * read-only one (the only option that stops our statements). */
    case ER_UNKNOWN_COM_ERROR:
    case ER_OPTION_PREVENTS_STATEMENT:
        code = RSV_ENOTPRIMARY;
        break;
    default:
        code = is_conn_errno(err) ? RSV_ECONN : RSV_EDB;
        break;
    }
    char tmp[sizeof ctx->msg];
    snprintf(tmp, sizeof tmp, "%s: %s (MySQL error %u)%s", what,
             text && *text ? text : "unknown error", err,
             code == RSV_ESCHEMA
                 ? "; load sql/schema.sql into this database" : "");
    memcpy(ctx->msg, tmp, sizeof tmp);
    ctx->code = code;
    return code;
}

void ctx_error_save(const rsv_ctx *ctx, ctx_error *e)
{
    e->code = ctx->code;
    e->db_errno = ctx->db_errno;
    memcpy(e->msg, ctx->msg, sizeof e->msg);
}

void ctx_error_restore(rsv_ctx *ctx, const ctx_error *e)
{
    ctx->code = e->code;
    ctx->db_errno = e->db_errno;
    memcpy(ctx->msg, e->msg, sizeof ctx->msg);
}

int rc_needs_reconnect(int rc)
{
    return rc == RSV_ECONN || rc == RSV_EINDOUBT || rc == RSV_ENOTPRIMARY;
}

RSV_EXTERN const char *rsv_errmsg(const rsv_ctx *ctx)
{
    if (!ctx)
        return "no context (NULL)";
    return nb_busy(ctx) ? nb_busy_msg() : ctx->msg;
}

RSV_EXTERN int rsv_errcode(const rsv_ctx *ctx)
{
    if (!ctx)
        return RSV_EINVAL;
    return nb_busy(ctx) ? RSV_PENDING : ctx->code;
}
