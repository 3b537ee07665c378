/*
 * schema.c - the library's contract with sql/schema.sql: the tables it
 * needs, the schema version it speaks, and the stored procedures it calls
 * (their names, which call which, the CALL statement of each), and the
 * checks that decide, at rsv_open and again at every rsv_reconnect, what
 * of that the database holds.
 *
 * The procedure list here is the one list: the library's calls, the
 * checks, and rsv-admin's `schema status` (through
 * rsv_schema_procedure()) read it.  A procedure's name changes only when
 * its arguments or its answer do; a new body under the same name is
 * loaded with the schema (CREATE OR REPLACE semantics: DROP, then CREATE).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mysqld_error.h>

#include "fault.h"
#include "internal.h"

static const struct {
    const char *name;
    uint32_t needs; /* the procedures it calls, itself included */
} procs[PROC__COUNT] = {
    [PROC_RESERVE] = {RSV_PROC_RESERVE,
                      PROC_BIT(PROC_RESERVE) | PROC_BIT(PROC_TAKE_UNITS) |
                          PROC_BIT(PROC_TOP_UP) | PROC_BIT(PROC_TOP_UP_HELD)},
    [PROC_CART] = {RSV_PROC_CART,
                   PROC_BIT(PROC_CART) | PROC_BIT(PROC_TAKE_UNITS) |
                       PROC_BIT(PROC_TOP_UP) | PROC_BIT(PROC_TOP_UP_HELD)},
    [PROC_RESERVE_BATCH] = {RSV_PROC_RESERVE_BATCH,
                            PROC_BIT(PROC_RESERVE_BATCH) |
                                PROC_BIT(PROC_RESERVE) |
                                PROC_BIT(PROC_TAKE_UNITS) |
                                PROC_BIT(PROC_TOP_UP) |
                                PROC_BIT(PROC_TOP_UP_HELD)},
    [PROC_CART_BATCH] = {RSV_PROC_CART_BATCH,
                         PROC_BIT(PROC_CART_BATCH) | PROC_BIT(PROC_CART) |
                             PROC_BIT(PROC_TAKE_UNITS) |
                             PROC_BIT(PROC_TOP_UP) |
                             PROC_BIT(PROC_TOP_UP_HELD)},
    [PROC_SETTLE] = {RSV_PROC_SETTLE,
                     PROC_BIT(PROC_SETTLE) | PROC_BIT(PROC_SETTLE_CHECKOUT)},
    [PROC_SETTLE_BATCH] = {RSV_PROC_SETTLE_BATCH,
                           PROC_BIT(PROC_SETTLE_BATCH) |
                               PROC_BIT(PROC_SETTLE_CHECKOUT)},
    [PROC_TAKE_UNITS] = {RSV_PROC_TAKE_UNITS, PROC_BIT(PROC_TAKE_UNITS)},
    [PROC_TOP_UP] = {RSV_PROC_TOP_UP, PROC_BIT(PROC_TOP_UP)},
    [PROC_TOP_UP_HELD] = {RSV_PROC_TOP_UP_HELD, PROC_BIT(PROC_TOP_UP_HELD)},
    [PROC_SETTLE_CHECKOUT] = {RSV_PROC_SETTLE_CHECKOUT,
                              PROC_BIT(PROC_SETTLE_CHECKOUT)},
};

RSV_EXTERN const char *rsv_schema_procedure(size_t index)
{
    return index < PROC__COUNT ? procs[index].name : NULL;
}

/* ---- the CALL statements: each procedure's arguments, in order ---- */

/* The OUT arguments of the reserve procedures are placeholders, bound by
 * the caller (arg_outs) and never read: the server sends their values
 * back as a result set of their own in the same answer, which sql.c
 * skips (the answer row has them).  A user variable there would stay in
 * the application's session after the call. */
static void out_args(strbuf *s, int n)
{
    for (int i = 0; i < n; i++)
        buf_puts(s, i ? ", ?" : "?");
}

int b_call_reserve(strbuf *s, uint32_t shape)
{
    (void)shape;
    /* shop, token, item, location, units, start, ttl_us, fill, wait; 1: in
     * a transaction of its own, answering a row; its OUT arguments */
    buf_puts(s, "CALL " RSV_PROC_RESERVE "(?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ");
    out_args(s, CALL_RESERVE_OUTS);
    buf_puts(s, ")");
    return 0;
}

int b_call_cart(strbuf *s, uint32_t shape)
{
    (void)shape;
    /* shop, token, key list, keys taken, ttl_us; 1: in a transaction of
     * its own, answering a row; its OUT arguments */
    buf_puts(s, "CALL " RSV_PROC_CART "(?, ?, ?, ?, ?, 1, ");
    out_args(s, CALL_CART_OUTS);
    buf_puts(s, ")");
    return 0;
}

int b_call_settle(strbuf *s, uint32_t shape)
{
    (void)shape;
    /* shop, token, kind */
    buf_puts(s, "CALL " RSV_PROC_SETTLE "(?, ?, ?)");
    return 0;
}

int b_call_reserve_batch(strbuf *s, uint32_t shape)
{
    (void)shape;
    /* the entries as JSON, ttl_us */
    buf_puts(s, "CALL " RSV_PROC_RESERVE_BATCH "(?, ?)");
    return 0;
}

int b_call_cart_batch(strbuf *s, uint32_t shape)
{
    (void)shape;
    /* the entries as JSON, ttl_us */
    buf_puts(s, "CALL " RSV_PROC_CART_BATCH "(?, ?)");
    return 0;
}

int b_call_settle_batch(strbuf *s, uint32_t shape)
{
    (void)shape;
    /* the entries as JSON, kind */
    buf_puts(s, "CALL " RSV_PROC_SETTLE_BATCH "(?, ?)");
    return 0;
}

int proc_unusable(rsv_ctx *ctx, int id)
{
    if (!sql_proc_unusable(ctx->db_errno))
        return 0;
    ctx->procs &= ~PROC_BIT(id);
    return 1;
}

/* ---- the checks ---- */

/* The schema's version against the library's (RSV_SCHEMA_VERSION); a
 * schema from before versions (no rsv_schema table) is version 0. */
static int check_version(rsv_ctx *ctx, const char *db, int has_table)
{
    char v[32] = "0", oldest[32] = "0";
    if (has_table) {
        /* a table read: with autocommit off it opens a transaction, which
         * must not outlive the check (unless it was the caller's) */
        int was_open = txn_caller_open(ctx);
        int rc = sql_query_row(ctx, "/* conn_tag:open */ SELECT version, "
                                    "oldest_library FROM rsv_schema WHERE "
                                    "id = 1",
                               v, sizeof v, oldest, sizeof oldest);
        if (!was_open && txn_caller_open(ctx))
            txn_rollback_quietly(ctx);
        if (rc)
            return rc;
    }
    long version = strtol(v, NULL, 10), need = strtol(oldest, NULL, 10);
    if (version < RSV_SCHEMA_VERSION)
        return ctx_fail(ctx, RSV_ESCHEMAVER,
                        "database %s holds libreserve schema version %ld; "
                        "this library needs version %d: stop the processes "
                        "of older libraries, then upgrade the schema (every "
                        "row is kept): mariadb %s < "
                        RSV_DATADIR "/libreserve/schema.sql", db, version,
                        RSV_SCHEMA_VERSION, db);
    if (need > RSV_SCHEMA_VERSION)
        return ctx_fail(ctx, RSV_ESCHEMAVER,
                        "database %s holds libreserve schema version %ld, "
                        "which needs a library of schema version %ld or "
                        "later; this library (%s) has version %d: upgrade "
                        "the library", db, version, need, RSV_VERSION,
                        RSV_SCHEMA_VERSION);
    return RSV_OK;
}

int schema_check(rsv_ctx *ctx)
{
    /* (the fault-injection build's trace: which statements are CALLs) */
    FAULT_CALL_KIND(b_call_reserve, FAULT_ANSWER_STATUS);
    FAULT_CALL_KIND(b_call_cart, FAULT_ANSWER_STATUS);
    FAULT_CALL_KIND(b_call_settle, FAULT_ANSWER_DONE);
    FAULT_CALL_KIND(b_call_reserve_batch, FAULT_ANSWER_BATCH);
    FAULT_CALL_KIND(b_call_cart_batch, FAULT_ANSWER_BATCH);
    FAULT_CALL_KIND(b_call_settle_batch, FAULT_ANSWER_BATCH);
    static const char *tables[] = {
        "rsv_ledger", "rsv_pool", "rsv_checkouts",
        "rsv_holds", "rsv_journal", "rsv_schema",
    };
    enum { NTABLES = sizeof tables / sizeof tables[0] };
    /* One round trip: the database, then one digit per table (is it
     * there?) and one for each procedure. */
    char q[4096];
    size_t len = (size_t)snprintf(q, sizeof q,
                                  "/* conn_tag:open */ SELECT DATABASE(), "
                                  "CONCAT(");
    for (size_t i = 0; i < NTABLES; i++)
        len += (size_t)snprintf(q + len, sizeof q - len,
                                "(SELECT COUNT(*) FROM information_schema."
                                "tables WHERE table_schema = DATABASE() AND "
                                "table_name = '%s'), ", tables[i]);
    for (size_t i = 0; i < PROC__COUNT; i++)
        len += (size_t)snprintf(q + len, sizeof q - len,
                                "%s(SELECT COUNT(*) FROM information_schema."
                                "routines WHERE routine_schema = DATABASE() "
                                "AND routine_type = 'PROCEDURE' AND "
                                "routine_name = '%s')", i ? ", " : "",
                                procs[i].name);
    /* A schema from before versions named its tables differently (see
     * the top of sql/schema.sql): two of its ledger's columns tell it from
     * an application's table of that name. */
    len += (size_t)snprintf(q + len, sizeof q - len,
                            ", (SELECT COUNT(*) FROM information_schema."
                            "columns WHERE table_schema = DATABASE() AND "
                            "table_name = 'inventory_levels' AND column_name "
                            "IN ('issued', 'next_unit_id'))");
    snprintf(q + len, sizeof q - len, ")");
    char db[256], found[32];
    int rc = sql_query_row(ctx, q, db, sizeof db, found, sizeof found);
    if (rc)
        return rc;
    if (!db[0])
        return ctx_fail(ctx, RSV_ESCHEMA,
                        "no database selected on the connection: select the "
                        "database that holds the libreserve schema");
    /* The version first: an older schema lacks tables of today's names
     * and is upgraded, not installed. */
    int versioned = found[NTABLES - 1] == '1';
    int unversioned_old = found[NTABLES + PROC__COUNT] == '2';
    if ((versioned || unversioned_old) &&
        (rc = check_version(ctx, db, versioned)))
        return rc;
    for (size_t i = 0; i < NTABLES - 1; i++)
        if (found[i] != '1')
            return ctx_fail(ctx, RSV_ESCHEMA,
                            "table %s.%s is missing: load sql/schema.sql "
                            "(share/libreserve/schema.sql) into this database",
                            db, tables[i]);
    if (!versioned && (rc = check_version(ctx, db, 0)))
        return rc;
    /* The procedures are optional: without them (an account without
     * EXECUTE, which does not see them, or a loader that skipped them)
     * every reserve, claim and release sends its statements one by one:
     * the same transactions, in more round trips.  RSV_STAT_ONE_TRIP
     * shows which is used.  A procedure is used only when every procedure
     * it calls is there too. */
    uint32_t have = 0;
    for (size_t i = 0; i < PROC__COUNT; i++)
        if (found[NTABLES + i] == '1')
            have |= PROC_BIT(i);
    ctx->procs = 0;
    if (ctx->opts.flags & TEST_OPT_STATEMENTS_ONLY)
        return RSV_OK;
    for (size_t i = 0; i < PROC__COUNT; i++)
        if ((have & procs[i].needs) == procs[i].needs)
            ctx->procs |= PROC_BIT(i);
    return RSV_OK;
}
