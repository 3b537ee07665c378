/*
 * txn.c - the transaction frame every operation runs in.
 *
 * Owns: READ COMMITTED and READ WRITE for one transaction only (never the
 * session's defaults), BEGIN/COMMIT/ROLLBACK (AND NO CHAIN NO RELEASE),
 * retrying deadlocks and lock-wait timeouts with a bounded, jittered
 * exponential backoff within the call's time budget, joining a transaction
 * the caller already has open (for claim/release and the two reads),
 * sending one read alone when the session allows it (and again in a frame
 * when it read uncommitted rows), never leaving a transaction of ours
 * open, and telling a lost connection before COMMIT (nothing applied:
 * RSV_ECONN) from one during COMMIT (outcome unknown: RSV_EINDOUBT).  The frame of
 * the public operation around it is op.c's.
 */
#include <stdio.h>
#include <string.h>

#include <mysqld_error.h>

#include "internal.h"

/* The server status of the last answer, or 0 if unknown: a local read,
 * no round trip (SET autocommit answers with the new status). */
static unsigned int server_status(rsv_ctx *ctx)
{
    unsigned int status = 0;
    if (mariadb_get_infov(ctx->conn, MARIADB_CONNECTION_SERVER_STATUS,
                          &status) != 0)
        return 0;
    return status;
}

int txn_caller_open(rsv_ctx *ctx)
{
    /* A connection Connector/C has given up on (its socket closed after a
     * loss) keeps the server status of its last answer, which may say "in
     * a transaction": the session, and the transaction, are gone.  Trust
     * the flag only on a live connection, or every later call would say
     * RSV_EINTXN instead of RSV_ECONN. */
    if (mysql_get_socket(ctx->conn) == MARIADB_INVALID_SOCKET)
        return 0;
    return (server_status(ctx) & SERVER_STATUS_IN_TRANS) != 0;
}

static int autocommit_on(rsv_ctx *ctx)
{
    return (server_status(ctx) & SERVER_STATUS_AUTOCOMMIT) != 0;
}

/* The next retry's pause: "full jitter", uniform in [cap/2, cap), so
 * retries spread out. */
static uint64_t backoff_us(rsv_ctx *ctx, int attempt)
{
    int64_t base = ctx->opts.retry_base_us;
    int64_t cap = base << (attempt < 10 ? attempt : 10);
    return (uint64_t)(cap / 2) + ctx_rand(ctx) % (uint64_t)(cap / 2 + 1);
}

/* Whether the call's time budget (rsv_options.call_timeout_ms) leaves room
 * for an attempt that starts after a pause of delay_us. */
static int budget_allows(const rsv_ctx *ctx, uint64_t delay_us)
{
    return !ctx->deadline_us || now_us() + delay_us < ctx->deadline_us;
}

static int budget_spent(rsv_ctx *ctx, int attempts)
{
    if (attempts == 0)
        return ctx_fail(ctx, RSV_EBUSY,
                        "the call's time budget (call_timeout_ms %lld) was "
                        "spent before this transaction could begin; nothing "
                        "was applied", (long long)ctx->opts.call_timeout_ms);
    return ctx_fail(ctx, RSV_EBUSY,
                    "%s (gave up after %d attempts: the call's time budget, "
                    "call_timeout_ms %lld, is spent; nothing was applied)",
                    ctx->msg, attempts, (long long)ctx->opts.call_timeout_ms);
}

/* Count what made the body ask for a retry.  A retry can also come from
 * a duplicate key (two reserves creating one checkout), counted as
 * neither. */
static void count_conflict(rsv_ctx *ctx, int rc)
{
    if (rc != RSV__RETRY)
        return;
    if (ctx->db_errno == ER_LOCK_DEADLOCK)
        stats_add(ctx, RSV_STAT_DEADLOCKS, 1);
    else if (ctx->db_errno == ER_LOCK_WAIT_TIMEOUT)
        stats_add(ctx, RSV_STAT_LOCK_WAIT_TIMEOUTS, 1);
}

void txn_rollback_quietly(rsv_ctx *ctx)
{
    /* Keep the body's message: the rollback's own failure (on a dead
     * connection) says nothing new. */
    ctx_error said;
    ctx_error_save(ctx, &said);
    ctx->in_frame = 0;
    /* A ROLLBACK answered with an error other than a lost connection was
     * not run: on a Galera node that is the deadlock of a transaction
     * the server already rolled back for a conflicting write set, told
     * at the next statement.  The connection still holds the status of
     * the answer before ("in a transaction"), and the caller's next call
     * would say RSV_EINTXN; a second ROLLBACK runs and brings the status
     * up to date. */
    int rrc = sql_text(ctx, SQL_ROLLBACK);
    if (rrc != RSV_OK && !is_conn_errno(ctx->db_errno))
        rrc = sql_text(ctx, SQL_ROLLBACK);
    /* A Galera node that left the primary component while the transaction
     * was open refuses ROLLBACK as it refuses everything (1047): the
     * transaction would stay open, and the caller's next call join it.
     * The session is ended instead, which rolls it back; the ping makes
     * Connector/C see the connection gone (RSV_ECONN next, not
     * RSV_EINTXN). */
    int cut = rrc != RSV_OK && ctx->db_errno == ER_UNKNOWN_COM_ERROR;
    if (cut) {
        mariadb_cancel(ctx->conn);
        (void)mysql_ping(ctx->conn);
    }
    ctx_error_restore(ctx, &said);
    if (cut)
        ctx_fail(ctx, said.code, "%s; the node refused ROLLBACK too, so the "
                 "library closed the connection, which ends the "
                 "transaction: reconnect", said.msg);
}

/* One attempt of a body that is a single statement with its own
 * START TRANSACTION and COMMIT inside (a stored procedure).  The server
 * runs a procedure to its end even if the client has gone, so a
 * connection lost at any point after the call went out may have
 * committed: that is RSV_EINDOUBT (a loss found while preparing it is
 * RSV_ECONN: nothing was sent).  A procedure that fails rolls itself
 * back before it reports the error; a transaction still open (the
 * server's status flag, read locally) is rolled back here all the same,
 * so nothing is ever left holding locks. */
static int self_committed(rsv_ctx *ctx, int flags, txn_body body,
                          void *arg)
{
    ctx->commit_point = 1;
    int rc = body(ctx, arg);
    ctx->commit_point = 0;
    if (rc == RSV_ECONN && ctx->executed)
        return ctx_fail(ctx, RSV_EINDOUBT,
                        "connection lost during a one-statement "
                        "transaction (a stored procedure; %s): the outcome "
                        "is unknown; reconnect and repeat the call",
                        ctx->msg);
    /* (an error answer carries no status: after a refusal part-way the
     * procedure's transaction may still be open, its handler's ROLLBACK
     * refused too) */
    if (rc != RSV_OK && (txn_caller_open(ctx) ||
                         (rc == RSV_ENOTPRIMARY && ctx->executed)))
        txn_rollback_quietly(ctx);
    /* A node outside the primary component refuses each statement before
     * it runs, the procedure's COMMIT too (nothing applied), but a read
     * after that COMMIT as well. */
    if (rc == RSV_ENOTPRIMARY && ctx->executed &&
        (flags & TXN_READS_AFTER_COMMIT))
        return ctx_fail(ctx, RSV_EINDOUBT,
                        "a one-statement transaction (a stored procedure) "
                        "was refused part-way (%s): it may have committed "
                        "before; reconnect (to a node of the primary "
                        "component) and repeat the call", ctx->msg);
    /* As a failed COMMIT on a Galera node (txn_run): the procedure's own
     * COMMIT may have failed after its write set left for the others, and
     * which of its statements failed cannot be told from here. */
    if (rc == RSV_EDB && ctx->galera && ctx->executed)
        return ctx_fail(ctx, RSV_EINDOUBT,
                        "a one-statement transaction (a stored procedure) "
                        "failed on a Galera node (%s): the other nodes may "
                        "have committed it; reconnect (to a node of the "
                        "primary component) and repeat the call", ctx->msg);
    count_conflict(ctx, rc);
    return rc;
}

/* A TXN_ONE_READ body sent alone: its own transaction at the session's
 * isolation, one round trip.  Returns NEED_FRAME when a TXN_NO_DIRTY read
 * must be read again in a frame of ours. */
#define NEED_FRAME (-1001)
static int read_alone(rsv_ctx *ctx, int flags, txn_body body, void *arg)
{
    int guard = (flags & TXN_NO_DIRTY) != 0;
    ctx->commit_anyway = 0;
    ctx->res.answered = 0;
    ctx->guard_dirty = guard;
    int rc = body(ctx, arg);
    ctx->guard_dirty = 0;
    /* At READ UNCOMMITTED the rows may show changes that roll back, and
     * no row at all may be a row deleted by a transaction in flight. */
    if (ctx->res.answered && (ctx->res.dirty || ctx->res.rows == 0))
        return NEED_FRAME;
    count_conflict(ctx, rc);
    if (rc == RSV__RETRY)
        rc = ctx_fail(ctx, RSV_EBUSY, "%s", ctx->msg);
    return rc;
}

/* READ COMMITTED and READ WRITE (READ ONLY for a read) for this one
 * transaction, in one round trip.  The access mode is explicit so that a
 * session left READ ONLY by the application does not refuse our writes.
 * If the SET failed, the START still ran: a transaction it opened (at the
 * session's isolation) is rolled back rather than used. */
static int txn_begin(rsv_ctx *ctx, int read_only)
{
    int rc = sql_text_pair(ctx, "SET TRANSACTION ISOLATION LEVEL READ "
                                "COMMITTED",
                           read_only ? "START TRANSACTION READ ONLY"
                                     : "START TRANSACTION READ WRITE");
    if (rc != RSV_OK && !is_conn_errno(ctx->db_errno) &&
        txn_caller_open(ctx))
        txn_rollback_quietly(ctx);
    return rc;
}

/* Our own transaction around the body, retried on conflicts within the
 * retry count and the call's time budget. */
static int framed(rsv_ctx *ctx, int flags, txn_body body, void *arg)
{
    int rc = RSV__RETRY;
    for (int attempt = 0; attempt <= ctx->opts.max_retries; attempt++) {
        uint64_t pause = attempt > 0 ? backoff_us(ctx, attempt - 1) : 0;
        if (!budget_allows(ctx, pause))
            return budget_spent(ctx, attempt);
        if (attempt > 0) {
            stats_add(ctx, RSV_STAT_RETRIES, 1);
            nb_sleep(ctx, pause);
            if (nb_canceled(ctx))
                return ctx->code; /* rsv_cancel: stop before the attempt */
        }
        ctx->commit_anyway = 0;
        if (flags & TXN_SELF_COMMIT) {
            rc = self_committed(ctx, flags, body, arg);
            if (rc != RSV__RETRY)
                return rc;
            continue;
        }
        rc = txn_begin(ctx, (flags & TXN_ONE_READ) != 0);
        if (rc == RSV__RETRY) {
            count_conflict(ctx, rc);
            continue; /* nothing began, nothing to roll back: retry */
        }
        if (rc != RSV_OK)
            return rc;
        ctx->in_frame = 1;
        rc = body(ctx, arg);
        ctx->in_frame = 0;
        if (rc == RSV_OK || (ctx->commit_anyway && rc != RSV__RETRY &&
                             rc != RSV_ECONN)) {
            int body_rc = rc;
            ctx_error said;
            ctx_error_save(ctx, &said);
            ctx->commit_point = 1;
            int crc = sql_text(ctx, SQL_COMMIT);
            ctx->commit_point = 0;
            if (crc == RSV_OK) {
                if (body_rc != RSV_OK)
                    ctx_error_restore(ctx, &said);
                return body_rc;
            }
            if (crc == RSV_ECONN)
                return ctx_fail(ctx, RSV_EINDOUBT,
                                "connection lost during COMMIT (%s): the "
                                "outcome is unknown; reconnect and repeat "
                                "the call", ctx->msg);
            /* A Galera node answers a COMMIT that failed certification
             * with a deadlock (rolled back everywhere: retried below).
             * Any other error there may come after the write set left for
             * the other nodes (the node lost the cluster while it
             * committed), which may commit it: in doubt too. */
            if (ctx->galera && crc == RSV_EDB)
                return ctx_fail(ctx, RSV_EINDOUBT,
                                "COMMIT failed on a Galera node (%s): the "
                                "other nodes may have committed it; "
                                "reconnect (to a node of the primary "
                                "component) and repeat the call", ctx->msg);
            rc = crc;
        }
        if (rc == RSV_ECONN)
            return rc; /* the server rolled back when the session died */
        count_conflict(ctx, rc);
        txn_rollback_quietly(ctx);
        if (rc != RSV__RETRY)
            return rc;
    }
    return ctx_fail(ctx, RSV_EBUSY, "%s (gave up after %d retries)", ctx->msg,
                    ctx->opts.max_retries);
}

int replica_ack_lost(rsv_ctx *ctx)
{
    /* A text query read here: ctx->res and ctx->sql may still hold what
     * the operation reads after its transaction, and nothing of ours is
     * allocated after a commit.  No transaction: an information_schema
     * read opens none, whatever autocommit is. */
    char q[320];
    snprintf(q, sizeof q, "/* %sreplica_ack */ SELECT "
             "@@global.rpl_semi_sync_master_enabled, (SELECT VARIABLE_VALUE "
             "FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = "
             "'RPL_SEMI_SYNC_MASTER_STATUS')", ctx->tag_prefix);
    stats_add(ctx, RSV_STAT_STATEMENTS, 1);
    MYSQL_RES *r = NULL;
    if (mysql_real_query(ctx->conn, q, strlen(q)) != 0 ||
        !(r = mysql_store_result(ctx->conn))) {
        ctx_db_fail(ctx, mysql_errno(ctx->conn), mysql_error(ctx->conn),
                    "replication status");
        return -1;
    }
    MYSQL_ROW row = mysql_fetch_row(r);
    int lost = row && row[0] && strcmp(row[0], "1") == 0 &&
               !(row[1] && strcmp(row[1], "ON") == 0);
    mysql_free_result(r);
    return lost;
}

/* RSV_OPT_REPLICA_ACK: once per operation, after a transaction that
 * answered (what it wrote, or the state it read to say why it wrote
 * nothing, is on the primary), whether a replica acknowledged it. */
static int replica_ack(rsv_ctx *ctx, int flags, int rc)
{
    if (!(ctx->opts.flags & RSV_OPT_REPLICA_ACK) || (flags & TXN_ONE_READ) ||
        ctx->ack_checked)
        return rc;
    /* RSV_OK and the outcomes RSV_EOUTOFSTOCK .. RSV_ERELEASED answer
     * from the primary's state; the rest applied nothing or are in doubt
     * already */
    if (rc > RSV_OK || rc < RSV_ERELEASED)
        return rc;
    ctx->ack_checked = 1;
    ctx_error said;
    ctx_error_save(ctx, &said);
    int lost = replica_ack_lost(ctx);
    if (lost < 0)
        return ctx_fail(ctx, RSV_EINDOUBT, "the transaction ended (%s), but "
                        "whether a replica has it could not be read (%s); "
                        "reconnect and repeat the call",
                        rsv_code_name(rc), ctx->msg);
    if (lost)
        return ctx_fail(ctx, RSV_EINDOUBT,
                        "the primary answered (%s) without a replica's "
                        "acknowledgement: its semi-synchronous replication "
                        "has fallen back to asynchronous "
                        "(Rpl_semi_sync_master_status OFF), and a failover "
                        "now would lose this; repeat the call (after a "
                        "failover, on the new primary)", rsv_code_name(rc));
    ctx_error_restore(ctx, &said);
    return rc;
}

int txn_run(rsv_ctx *ctx, int flags, txn_body body, void *arg)
{
    if (nb_canceled(ctx))
        return ctx->code; /* rsv_cancel: nothing sent since */
    /* rsv_open refuses auto-reconnect; it may have been switched on since.
     * With it, a connection lost during COMMIT is silently re-opened and
     * the transaction's loss reported as success.  A local read: no round
     * trip. */
    my_bool reconnect = 0;
    if (mysql_get_optionv(ctx->conn, MYSQL_OPT_RECONNECT, &reconnect) == 0 &&
        reconnect)
        return ctx_fail(ctx, RSV_ECONFIG,
                        "MYSQL_OPT_RECONNECT was switched on after rsv_open: "
                        "an automatic reconnect could hide a lost "
                        "transaction; switch it off (reconnect explicitly)");
    if (txn_caller_open(ctx)) {
        if (!(flags & TXN_MAY_JOIN))
            return ctx_fail(ctx, RSV_EINTXN,
                            "the connection is inside a transaction; this "
                            "function runs its own (commit or roll back "
                            "first)");
        /* Joined: the caller owns COMMIT/ROLLBACK, and a retry would have
         * to replay the caller's own statements, so none is attempted. */
        ctx->commit_anyway = 0;
        ctx->in_frame = 1;
        int rc = body(ctx, arg);
        ctx->in_frame = 0;
        count_conflict(ctx, rc);
        if (rc == RSV__RETRY)
            rc = ctx_fail(ctx, RSV_EBUSY,
                          "%s; roll back the transaction and retry", ctx->msg);
        return rc;
    }

    /* With autocommit on, one consistent read needs no frame: the
     * statement is its own transaction with a read view of its own.  Two
     * round trips fewer (SET TRANSACTION with START TRANSACTION, and the
     * COMMIT).  With autocommit off it would leave a transaction open on
     * the application's connection.  Only on MariaDB, whose name of the
     * isolation variable the TXN_NO_DIRTY check uses. */
    int rc = NEED_FRAME;
    if ((flags & TXN_ONE_READ) && ctx->is_mariadb && autocommit_on(ctx))
        rc = read_alone(ctx, flags, body, arg);
    if (rc == NEED_FRAME)
        rc = framed(ctx, flags, body, arg);
    /* No transaction of ours outlives the call, whatever the session's
     * settings made of it (an old procedure's plain COMMIT under
     * completion_type=CHAIN opens the next one): the application's next
     * call would join it. */
    if (txn_caller_open(ctx))
        txn_rollback_quietly(ctx);
    return replica_ack(ctx, flags, rc);
}
