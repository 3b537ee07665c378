/*
 * sql.c - prepared statements: the cache, parameter binding, execution and
 * result fetching.
 *
 * Every statement the library sends goes through sql_run() or sql_text(),
 * so this file is the one place that knows how a statement is tagged
 * (conn_tag comment), how results are drained (always completely, so the
 * application's next query never sees "commands out of sync"), and how a
 * new connection invalidates the prepared statements (they are prepared
 * again on first use: after a reconnect every server-side handle is gone).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errmsg.h>
#include <mysqld_error.h>

#include "fault.h"
#include "internal.h"
/* (after mysql.h, which internal.h includes) */
#include <ma_pvio.h>

/* ---------------- the call's budget on the wire ---------------- */

/* A COMMIT, or a procedure that commits, waits for replication on a
 * Galera node or a semi-synchronous primary, and nothing on the server
 * bounds that wait: while a cluster evicts a silent node every commit
 * stalls.  So the library bounds its own reads by the call's budget
 * (call_timeout_ms): Connector/C's read timeout (MYSQL_OPT_READ_TIMEOUT,
 * which it keeps in the connection's pvio in milliseconds and applies to
 * every wait for the socket) is set for one statement and restored after
 * it.  On a timeout Connector/C closes the connection (CR_SERVER_LOST):
 * a commit point answers RSV_EINDOUBT, any other statement RSV_ECONN, as
 * for any lost connection.  A commit point waits until the budget is
 * spent, and at least one statement's lock wait and a second: a
 * procedure's statements wait for row locks too, and the server's own
 * lock-wait answer (rolled back, retried or RSV_EBUSY: nothing applied)
 * must arrive before the library gives up; and a COMMIT after a body that
 * ended late still gets the time an ordinary commit needs.  Any other
 * statement, which the server bounds by its lock wait, is cut only when
 * the server has not answered a second after the budget and that lock
 * wait.  A shorter read
 * timeout of the application's own stays.  The pvio is the plugin
 * interface Connector/C installs (ma_pvio.h); over TLS some versions wait
 * on their own timeout instead, so the bound is left to the connection's
 * read_timeout there. */
typedef struct read_wait {
    MARIADB_PVIO *pvio; /* NULL: nothing was changed */
    int saved_ms;
    uint64_t until_us;  /* the wait ends (monotonic) */
} read_wait;

static void read_wait_arm(rsv_ctx *ctx, read_wait *w)
{
    w->pvio = NULL;
    MARIADB_PVIO *pvio = ctx->conn->net.pvio;
    if (!ctx->deadline_us || !pvio || pvio->ctls)
        return;
    uint64_t now = now_us();
    int64_t left_ms = ctx->deadline_us > now
                          ? (int64_t)((ctx->deadline_us - now) / 1000) : 0;
    int64_t lock_ms = (int64_t)ctx->stmt_lock_wait_s * 1000;
    int64_t floor_ms = lock_ms + 1000;
    int64_t ms = ctx->commit_point
                     ? (left_ms > floor_ms ? left_ms : floor_ms)
                     : left_ms + floor_ms;
    if (ms < 1)
        ms = 1;
    if (pvio->timeout[PVIO_READ_TIMEOUT] > 0 &&
        pvio->timeout[PVIO_READ_TIMEOUT] <= ms)
        return;
    w->pvio = pvio;
    w->saved_ms = pvio->timeout[PVIO_READ_TIMEOUT];
    w->until_us = now + (uint64_t)ms * 1000u;
    pvio->timeout[PVIO_READ_TIMEOUT] = (int)ms;
}

/* Restore the connection's read timeout; rc is the statement's code: a
 * connection lost when the wait ran out says so. */
static int read_wait_end(rsv_ctx *ctx, read_wait *w, int rc)
{
    if (!w->pvio)
        return rc;
    /* (a lost connection freed its pvio: nothing to restore) */
    if (ctx->conn->net.pvio == w->pvio)
        w->pvio->timeout[PVIO_READ_TIMEOUT] = w->saved_ms;
    if (rc == RSV_ECONN && is_conn_errno(ctx->db_errno) &&
        now_us() >= w->until_us)
        rc = ctx_fail(ctx, RSV_ECONN,
                      "%s; no answer within the call's time budget "
                      "(call_timeout_ms %lld): the library closed the "
                      "connection", ctx->msg,
                      (long long)ctx->opts.call_timeout_ms);
    return rc;
}

/* ---------------- buffers ---------------- */

static void buf_reserve(strbuf *b, size_t extra)
{
    if (b->oom || b->len + extra + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return;
    }
    b->p = p;
    b->cap = cap;
}

void buf_putn(strbuf *b, const char *s, size_t n)
{
    buf_reserve(b, n);
    if (b->oom)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void buf_puts(strbuf *b, const char *s) { buf_putn(b, s, strlen(s)); }

void buf_printf_u(strbuf *b, const char *before, uint64_t v, const char *after)
{
    char num[32];
    snprintf(num, sizeof num, "%llu", (unsigned long long)v);
    buf_puts(b, before);
    buf_puts(b, num);
    buf_puts(b, after);
}

void buf_free(strbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* ---------------- parameters ---------------- */

static sql_val *arg_push(sql_args *a)
{
    if (a->oom)
        return NULL;
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        sql_val *v = realloc(a->v, cap * sizeof *v);
        if (!v) {
            a->oom = 1;
            return NULL;
        }
        a->v = v;
        a->cap = cap;
    }
    sql_val *v = &a->v[a->n++];
    memset(v, 0, sizeof *v);
    return v;
}

void args_reset(sql_args *a)
{
    a->n = 0;
    a->oom = 0;
}

void arg_i64(sql_args *a, int64_t x)
{
    sql_val *v = arg_push(a);
    if (v) {
        v->type = V_I64;
        v->v.i = x;
    }
}

void arg_outs(sql_args *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        arg_i64(a, 0);
}

void arg_u64(sql_args *a, uint64_t x)
{
    sql_val *v = arg_push(a);
    if (v) {
        v->type = V_U64;
        v->v.u = x;
    }
}

void arg_bin(sql_args *a, const void *p, size_t len)
{
    sql_val *v = arg_push(a);
    if (v) {
        v->type = V_BIN;
        v->p = p;
        v->len = (unsigned long)len;
    }
}

void args_free(sql_args *a)
{
    free(a->v);
    free(a->binds);
    memset(a, 0, sizeof *a);
}

static int args_bind(sql_args *a)
{
    if (a->n > a->binds_cap) {
        MYSQL_BIND *b = realloc(a->binds, a->n * sizeof *b);
        if (!b)
            return -1;
        a->binds = b;
        a->binds_cap = a->n;
    }
    if (a->n)
        memset(a->binds, 0, a->n * sizeof *a->binds);
    for (size_t i = 0; i < a->n; i++) {
        MYSQL_BIND *b = &a->binds[i];
        sql_val *v = &a->v[i];
        switch (v->type) {
        case V_I64:
            b->buffer_type = MYSQL_TYPE_LONGLONG;
            b->buffer = &v->v.i;
            break;
        case V_U64:
            b->buffer_type = MYSQL_TYPE_LONGLONG;
            b->buffer = &v->v.u;
            b->is_unsigned = 1;
            break;
        default:
            /* BLOB: sent as a binary string, compared byte-exact against
             * the VARBINARY token columns. */
            b->buffer_type = MYSQL_TYPE_BLOB;
            b->buffer = (void *)v->p;
            b->buffer_length = v->len;
            b->length = &v->len;
            break;
        }
    }
    return 0;
}

/* ---------------- results ---------------- */

void res_free(sql_res *r)
{
    free(r->ints);
    free(r->nulls);
    free(r->bins);
    memset(r, 0, sizeof *r);
}

static int res_grow(sql_res *r)
{
    size_t cap = r->cap_rows ? r->cap_rows * 2 : 64;
    int64_t *ints = realloc(r->ints, cap * r->ncols * sizeof *ints);
    if (!ints)
        return -1;
    r->ints = ints;
    unsigned char *nulls = realloc(r->nulls, cap * r->ncols);
    if (!nulls)
        return -1;
    r->nulls = nulls;
    if (strchr(r->spec, COL_B)) {
        unsigned char *bins =
            realloc(r->bins, cap * r->ncols * (RSV_TOKEN_MAX + 1));
        if (!bins)
            return -1;
        r->bins = bins;
    }
    r->cap_rows = cap;
    return 0;
}

/* Buffers for a result of this shape, with room for the first rows,
 * made before the statement runs: a statement that commits (the reserve
 * procedure) must not be followed by an allocation that can fail, or a
 * committed reserve would be reported as out of memory. */
static int res_shape(sql_res *r, const char *spec)
{
    size_t ncols = strlen(spec);
    if (r->spec && (r->ncols != ncols || strcmp(r->spec, spec) != 0))
        res_free(r); /* different shape from the previous result */
    r->spec = spec;
    r->ncols = ncols;
    r->rows = 0;
    r->dirty = 0;
    return r->cap_rows ? 0 : res_grow(r);
}

int sql_res_room(rsv_ctx *ctx, const char *spec, size_t rows)
{
    sql_res *r = &ctx->res;
    if (res_shape(r, spec) != 0)
        return ctx_fail(ctx, RSV_ENOMEM, "out of memory");
    while (r->cap_rows < rows)
        if (res_grow(r) != 0)
            return ctx_fail(ctx, RSV_ENOMEM, "out of memory");
    return RSV_OK;
}

/* ---------------- the cache ---------------- */

void sql_key_rows(strbuf *b, size_t ncols, uint32_t n)
{
    /* The keys become a derived table that is joined, in the order given,
     * to the table by its primary key (STRAIGHT_JOIN fixes the order; each
     * key is one eq_ref lookup).  A WHERE list of the same keys (ORs of
     * equalities, or a row IN) leaves the access path to the optimizer,
     * which on a small table, or with many keys, picks a full scan: a
     * locking read or DELETE then waits on, and locks, rows of other keys
     * and other shops, out of lock order (deadlocks, convoys).  Callers
     * also name FORCE INDEX (PRIMARY): a secondary index would lock its
     * own entries, and SKIP LOCKED leaves those locked on rows it skips. */
    buf_puts(b, "(");
    for (uint32_t i = 0; i < n; i++) {
        buf_puts(b, i ? " UNION ALL SELECT " : "SELECT ");
        for (size_t c = 0; c < ncols; c++) {
            if (i == 0)
                buf_printf_u(b, c ? ", ? AS k" : "? AS k", c, "");
            else
                buf_puts(b, c ? ", ?" : "?");
        }
    }
    buf_puts(b, ") AS k STRAIGHT_JOIN ");
}

uint32_t sql_bucket(size_t n)
{
    uint32_t b = 1;
    while (b < n)
        b <<= 1;
    return b;
}

void tokens_read(token_list *t, const sql_res *r, size_t col)
{
    t->n = r->rows < TOKEN_BATCH ? r->rows : TOKEN_BATCH;
    for (size_t i = 0; i < t->n; i++) {
        t->len[i] = RES_BLEN(r, i, col);
        memcpy(t->tok[i], RES_B(r, i, col), t->len[i]);
    }
}

uint32_t args_tokens(sql_args *a, const token_list *t, int with_gen)
{
    uint32_t bucket = sql_bucket(t->n);
    for (uint32_t i = 0; i < bucket; i++) {
        if (i < t->n)
            arg_bin(a, t->tok[i], t->len[i]);
        else
            arg_bin(a, "", 0);
        if (with_gen)
            arg_i64(a, i < t->n ? t->gen[i] : 0);
    }
    return bucket;
}

void sql_cache_clear(rsv_ctx *ctx)
{
    for (int i = 0; i < RSV_STMT_CACHE; i++) {
        if (ctx->stmts[i].stmt)
            mysql_stmt_close(ctx->stmts[i].stmt);
        memset(&ctx->stmts[i], 0, sizeof ctx->stmts[i]);
    }
}

static const char *op_tag_names[OP__COUNT] = {
    "open", "reserve", "claim", "release", "extend", "status",
    "replenish", "sweep", "stock", "audit",
};

void sql_tag(rsv_ctx *ctx, strbuf *b)
{
    buf_puts(b, "/* ");
    buf_puts(b, ctx->tag_prefix);
    buf_puts(b, op_tag_names[ctx->op]);
    buf_puts(b, " */ ");
}

/* The connection changed under us (the application reconnected): every
 * server-side statement handle is gone, prepare them again on demand. */
static void check_connection(rsv_ctx *ctx)
{
    unsigned long tid = mysql_thread_id(ctx->conn);
    if (tid != ctx->thread_id) {
        sql_cache_clear(ctx);
        ctx->thread_id = tid;
    }
}

static int stmt_fail(rsv_ctx *ctx, MYSQL_STMT *st, const char *what)
{
    /* An error that arrives while rows are read (a lock wait or deadlock
     * in the middle of a locking read) may be recorded on the connection
     * rather than the statement. */
    if (mysql_stmt_errno(st) == 0 && mysql_errno(ctx->conn) != 0)
        return ctx_db_fail(ctx, mysql_errno(ctx->conn), mysql_error(ctx->conn),
                           what);
    return ctx_db_fail(ctx, mysql_stmt_errno(st), mysql_stmt_error(st), what);
}

/* Connector/C resets the statements of a handle that reconnects
 * (mariadb_reconnect, or mysql_close and mysql_real_connect on a MYSQL the
 * application owns) and leaves a connection error on each; a statement
 * that failed on a live connection was dropped by sql_run already.  The
 * thread id check alone misses a reconnect that got the old id back, as
 * happens after a server restart. */
static int stmt_orphaned(MYSQL_STMT *st)
{
    unsigned int err = mysql_stmt_errno(st);
    return err == CR_STMT_CLOSED || is_conn_errno(err);
}

/* A read sent alone runs at the session's isolation, which the
 * application may have set to READ UNCOMMITTED at any time.  Rather than a
 * round trip to ask, the read answers it: a first column, dropped by
 * fetch_all(), that is 1 at READ UNCOMMITTED (MariaDB's name for the
 * variable; only MariaDB sends reads alone). */
static int guard_column(strbuf *sql, size_t body_at)
{
    static const char sel[] = "SELECT ";
    static const char col[] = "@@session.tx_isolation = 'READ-UNCOMMITTED', ";
    if (sql->len - body_at < sizeof sel - 1 ||
        memcmp(sql->p + body_at, sel, sizeof sel - 1) != 0)
        return -1;
    size_t at = body_at + sizeof sel - 1, tail = sql->len - at;
    buf_putn(sql, col, sizeof col - 1); /* room, and the length */
    if (sql->oom)
        return -1;
    memmove(sql->p + at + sizeof col - 1, sql->p + at, tail);
    memcpy(sql->p + at, col, sizeof col - 1);
    return 0;
}

/* Close this context's least recently used statement other than keep;
 * 0 if there is none. */
static int cache_close_lru(rsv_ctx *ctx, const stmt_slot *keep)
{
    stmt_slot *lru = NULL;
    for (int i = 0; i < RSV_STMT_CACHE; i++) {
        stmt_slot *s = &ctx->stmts[i];
        if (s != keep && s->stmt && (!lru || s->last_used < lru->last_used))
            lru = s;
    }
    if (!lru)
        return 0;
    mysql_stmt_close(lru->stmt);
    memset(lru, 0, sizeof *lru);
    return 1;
}

/* Inside a transaction of ours every answer must still say "in a
 * transaction".  A Galera node that rolls the transaction back for a
 * conflicting write set (a brute-force abort) during a prepare or a
 * prepared SELECT may answer it without an error: the transaction is
 * gone, and the next statement would run, and commit, on its own.  The
 * status comes with every answer (read locally, no round trip); a lost
 * transaction is reported as the deadlock it is, so the frame rolls back
 * (nothing left to roll back) and runs the transaction again. */
static int frame_lost(rsv_ctx *ctx, const char *what)
{
    unsigned int status = 0;
    if (!ctx->in_frame ||
        mariadb_get_infov(ctx->conn, MARIADB_CONNECTION_SERVER_STATUS,
                          &status) != 0 ||
        (status & SERVER_STATUS_IN_TRANS))
        return RSV_OK;
    return ctx_db_fail(ctx, ER_LOCK_DEADLOCK,
                       "the server ended the transaction without an error "
                       "(a conflict with another Galera node)", what);
}

static stmt_slot *cache_get(rsv_ctx *ctx, sql_builder build,
                                uint32_t shape, const char *text, int *rc)
{
    stmt_slot *victim = &ctx->stmts[0];
    *rc = RSV_OK;
    /* (the slots past the option stay empty: the other loops over the
     * cache may run to RSV_STMT_CACHE) */
    for (int i = 0; i < ctx->opts.stmt_cache_max; i++) {
        stmt_slot *s = &ctx->stmts[i];
        if (s->stmt && s->build == build && s->shape == shape &&
            s->text == text && s->op == ctx->op &&
            s->guard == ctx->guard_dirty) {
            if (!stmt_orphaned(s->stmt)) {
                s->last_used = ++ctx->use_clock;
                return s;
            }
            mysql_stmt_close(s->stmt);
            memset(s, 0, sizeof *s);
        }
        if (!s->stmt || (victim->stmt && s->last_used < victim->last_used))
            victim = s;
    }
    if (victim->stmt)
        mysql_stmt_close(victim->stmt);
    memset(victim, 0, sizeof *victim);

    strbuf *sql = &ctx->sql;
    sql->len = 0;
    sql->oom = 0;
    sql_tag(ctx, sql);
    /* The lock wait of our statements (the option, or a part of the
     * call's time budget), for this statement only (MariaDB's SET
     * STATEMENT): the session's own setting is never changed. */
    if (ctx->stmt_lock_wait_s > 0 && ctx->is_mariadb)
        buf_printf_u(sql, "SET STATEMENT innodb_lock_wait_timeout = ",
                     (uint64_t)ctx->stmt_lock_wait_s, " FOR ");
    size_t body_at = sql->len;
    if ((build ? build(sql, shape) != 0 : (buf_puts(sql, text), 0)) ||
        sql->oom ||
        (ctx->guard_dirty && guard_column(sql, body_at) != 0)) {
        *rc = ctx_fail(ctx, RSV_ENOMEM, "out of memory building a statement");
        return NULL;
    }
    MYSQL_STMT *st = mysql_stmt_init(ctx->conn);
    if (!st) {
        *rc = ctx_fail(ctx, RSV_ENOMEM, "mysql_stmt_init failed");
        return NULL;
    }
    while (mysql_stmt_prepare(st, sql->p, sql->len) != 0) {
        /* The server holds max_prepared_stmt_count statements over all its
         * sessions: give one of ours back and try again, down to none
         * (then the call fails cleanly and the next one tries again). */
        if (mysql_stmt_errno(st) == ER_MAX_PREPARED_STMT_COUNT_REACHED &&
            cache_close_lru(ctx, victim)) {
            stats_add(ctx, RSV_STAT_STMT_EVICTIONS, 1);
            continue;
        }
        *rc = stmt_fail(ctx, st, "prepare");
        if (mysql_stmt_errno(st) == ER_MAX_PREPARED_STMT_COUNT_REACHED)
            *rc = ctx_fail(ctx, RSV_EDB,
                           "%s: the server holds max_prepared_stmt_count "
                           "prepared statements (every context holds up to "
                           "stmt_cache_max); raise it or lower that option",
                           ctx->msg);
        mysql_stmt_close(st);
        return NULL;
    }
    if ((*rc = frame_lost(ctx, "prepare")) != RSV_OK) {
        mysql_stmt_close(st);
        return NULL;
    }
    victim->build = build;
    victim->shape = shape;
    victim->text = text;
    victim->guard = ctx->guard_dirty;
    victim->op = ctx->op;
    victim->stmt = st;
    victim->last_used = ++ctx->use_clock;
    return victim;
}

static void cache_drop(rsv_ctx *ctx, stmt_slot *s)
{
    mysql_stmt_close(s->stmt);
    memset(s, 0, sizeof *s);
    (void)ctx;
}

static int fetch_all(rsv_ctx *ctx, MYSQL_STMT *st, const char *spec)
{
    sql_res *r = &ctx->res; /* shaped by run_stmt (res_shape) */
    size_t ncols = r->ncols;
    size_t g = ctx->guard_dirty ? 1 : 0; /* the isolation column first */

    /* the columns, and the isolation column before them */
    MYSQL_BIND bind[RES_COLS_MAX + 1], *out = bind + g;
    int64_t ival[RES_COLS_MAX], dirty = 0;
    my_bool isnull[RES_COLS_MAX], dirty_null = 0;
    unsigned long blen[RES_COLS_MAX];
    unsigned char bbuf[RES_COLS_MAX][RSV_TOKEN_MAX];
    if (ncols > RES_COLS_MAX || mysql_stmt_field_count(st) != ncols + g) {
        mysql_stmt_free_result(st);
        return ctx_fail(ctx, RSV_EDB,
                        "internal: result has %u columns, expected %zu",
                        mysql_stmt_field_count(st), ncols + g);
    }
    memset(bind, 0, sizeof bind);
    bind[0].buffer_type = MYSQL_TYPE_LONGLONG; /* (overwritten if !g) */
    bind[0].buffer = &dirty;
    bind[0].is_null = &dirty_null;
    for (size_t c = 0; c < ncols; c++) {
        out[c].is_null = &isnull[c];
        if (spec[c] == COL_B) {
            out[c].buffer_type = MYSQL_TYPE_BLOB;
            out[c].buffer = bbuf[c];
            out[c].buffer_length = RSV_TOKEN_MAX;
            out[c].length = &blen[c];
        } else if (spec[c] == COL_T) {
            out[c].buffer_type = MYSQL_TYPE_STRING;
            out[c].buffer = r->text;
            out[c].buffer_length = RES_TEXT_MAX;
            out[c].length = &blen[c];
        } else {
            out[c].buffer_type = MYSQL_TYPE_LONGLONG;
            out[c].buffer = &ival[c];
        }
    }
    if (mysql_stmt_bind_result(st, bind) != 0) {
        int rc = stmt_fail(ctx, st, "bind result");
        mysql_stmt_free_result(st);
        return rc;
    }
    /* Read the whole result now: a locking read can fail half-way (lock
     * wait timeout, deadlock), and the error must surface here, with the
     * connection left in sync. */
    if (mysql_stmt_store_result(st) != 0) {
        int rc = stmt_fail(ctx, st, "read result");
        mysql_stmt_free_result(st);
        return rc;
    }
    int rc = RSV_OK;
    for (;;) {
        int f = mysql_stmt_fetch(st);
        if (f == MYSQL_NO_DATA)
            break;
        if (f == 1) {
            rc = stmt_fail(ctx, st, "fetch");
            break;
        }
        /* MYSQL_DATA_TRUNCATED cannot happen for tokens (the columns are
         * VARBINARY(128)) nor for the cart procedure's answer (at most
         * 32 keys of 99 bytes); treat it as an error rather than guess. */
        if (f == MYSQL_DATA_TRUNCATED) {
            rc = ctx_fail(ctx, RSV_EDB, "internal: truncated result column");
            break;
        }
        if (r->rows == r->cap_rows && res_grow(r) != 0) {
            rc = ctx_fail(ctx, RSV_ENOMEM, "out of memory reading a result");
            break;
        }
        for (size_t c = 0; c < ncols; c++) {
            size_t i = r->rows * ncols + c;
            r->nulls[i] = isnull[c] ? 1 : 0;
            r->ints[i] = isnull[c] || spec[c] != COL_I ? 0 : ival[c];
            if (spec[c] == COL_T)
                r->text[isnull[c] ? 0 : blen[c]] = '\0';
            if (spec[c] == COL_B) {
                unsigned char *dst = &r->bins[i * (RSV_TOKEN_MAX + 1)];
                size_t n = isnull[c] ? 0 : blen[c];
                dst[0] = (unsigned char)n;
                memcpy(dst + 1, bbuf[c], n);
            }
        }
        r->dirty |= dirty != 0;
        r->rows++;
    }
    /* Always drain: the connection must be usable by the application. */
    mysql_stmt_free_result(st);
    return rc;
}

/* The result set in hand holds a CALL's OUT arguments, not an answer. */
static int out_params(rsv_ctx *ctx)
{
    unsigned int status = 0;
    mariadb_get_infov(ctx->conn, MARIADB_CONNECTION_SERVER_STATUS, &status);
    return (status & SERVER_PS_OUT_PARAMS) != 0;
}

/* A CALL answers with its result sets and then a final status of its own;
 * read everything up to that, so the connection is in step for the next
 * statement (ours or the application's).  Result sets shaped like the
 * first are read into the result after it. */
static int drain_more(rsv_ctx *ctx, MYSQL_STMT *st, const char *spec)
{
    while (mysql_stmt_more_results(st)) {
        int r = mysql_stmt_next_result(st);
        if (r > 0)
            return stmt_fail(ctx, st, "next result");
        if (r < 0)
            break;
        if (out_params(ctx)) {
            /* the OUT arguments' values (b_call_reserve): not read */
            mysql_stmt_store_result(st);
            mysql_stmt_free_result(st);
            continue;
        }
        /* a procedure answers a variable number of rows as one result
         * set each (RSV_PROC_RESERVE): they add to the result */
        if (spec && mysql_stmt_field_count(st) == ctx->res.ncols) {
            int rc = fetch_all(ctx, st, spec);
            if (rc)
                return rc;
        } else if (mysql_stmt_field_count(st) != 0) {
            if (mysql_stmt_store_result(st) != 0) {
                int rc = stmt_fail(ctx, st, "read result");
                mysql_stmt_free_result(st);
                return rc;
            }
            mysql_stmt_free_result(st);
        }
    }
    return RSV_OK;
}

int sql_proc_unusable(unsigned int err)
{
    return err == ER_SP_DOES_NOT_EXIST || err == ER_PROCACCESS_DENIED_ERROR ||
           err == ER_SP_WRONG_NO_OF_ARGS || err == ER_NO_SUCH_USER;
}

static int run_stmt(rsv_ctx *ctx, sql_builder build, uint32_t shape,
                    const char *text, const char *spec, uint64_t *affected)
{
    if (ctx->args.oom)
        return ctx_fail(ctx, RSV_ENOMEM, "out of memory binding parameters");
    check_connection(ctx);
    for (int attempt = 0;; attempt++) {
        int rc;
        stmt_slot *slot = cache_get(ctx, build, shape, text, &rc);
        if (!slot)
            return rc;
        MYSQL_STMT *st = slot->stmt;
        if (mysql_stmt_param_count(st) != ctx->args.n) {
            return ctx_fail(ctx, RSV_EDB,
                            "internal: statement takes %lu parameters, %zu "
                            "given", mysql_stmt_param_count(st), ctx->args.n);
        }
        if (args_bind(&ctx->args) != 0)
            return ctx_fail(ctx, RSV_ENOMEM, "out of memory binding");
        if (spec && res_shape(&ctx->res, spec) != 0)
            return ctx_fail(ctx, RSV_ENOMEM, "out of memory for a result");
        if (ctx->args.n && mysql_stmt_bind_param(st, ctx->args.binds) != 0)
            return stmt_fail(ctx, st, "bind");
        stats_add(ctx, RSV_STAT_STATEMENTS, 1);
        /* a handle whose socket Connector/C closed sends nothing */
        ctx->executed = mysql_get_socket(ctx->conn) != MARIADB_INVALID_SOCKET;
        if (mysql_stmt_execute(st) != 0) {
            unsigned int err = mysql_stmt_errno(st);
            /* The server forgot the handle (e.g. after a failover proxy
             * switched connections): nothing ran, prepare again once. */
            if (err == ER_UNKNOWN_STMT_HANDLER && attempt == 0) {
                cache_drop(ctx, slot);
                continue;
            }
            rc = stmt_fail(ctx, st, "execute");
            if (is_conn_errno(err))
                cache_drop(ctx, slot);
            return rc;
        }
        if (affected)
            *affected = (uint64_t)mysql_stmt_affected_rows(st);
        if (spec)
            rc = fetch_all(ctx, st, spec);
        else if (mysql_stmt_field_count(st) != 0)
            mysql_stmt_free_result(st);
        if (rc == RSV_OK)
            rc = drain_more(ctx, st, spec);
        if (rc == RSV_OK)
            rc = frame_lost(ctx, "execute");
        /* A result abandoned half-way (a deadlock or lock-wait timeout
         * arriving after the column metadata, while rows are read) leaves
         * Connector/C's statement in a state where its next execute first
         * tries to drain rows the server never sends: the client waits
         * forever while its transaction holds locks.  Never reuse such a
         * statement; prepare it again. */
        if (rc != RSV_OK)
            cache_drop(ctx, slot);
        return rc;
    }
}

static int stmt_run(rsv_ctx *ctx, sql_builder build, uint32_t shape,
                    const char *text, const char *spec, uint64_t *affected)
{
    int frc = RSV_OK;
    ctx->executed = 0;
    if (FAULT_ENTER(ctx, build, build ? shape : FAULT_FIXED_STMT, text,
                    &ctx->args.oom, &frc))
        return frc;
    read_wait w;
    read_wait_arm(ctx, &w);
    int rc = read_wait_end(ctx, &w,
                           run_stmt(ctx, build, shape, text, spec, affected));
    /* a loss the fault walk plants after the call ran */
    ctx->executed |= rc == RSV_OK;
    rc = FAULT_LEAVE(ctx, rc);
    ctx->res.answered = rc == RSV_OK && ctx->guard_dirty;
    return rc;
}

int sql_run(rsv_ctx *ctx, sql_builder build, uint32_t shape,
            const char *spec, uint64_t *affected)
{
    return stmt_run(ctx, build, shape, NULL, spec, affected);
}

int sql_fixed(rsv_ctx *ctx, const char *text, const char *spec,
              uint64_t *affected)
{
    return stmt_run(ctx, NULL, 0, text, spec, affected);
}

/* ctx->sql = the conn_tag comment + text. */
static strbuf *tagged(rsv_ctx *ctx, const char *text)
{
    strbuf *sql = &ctx->sql;
    sql->len = 0;
    sql->oom = 0;
    sql_tag(ctx, sql);
    buf_puts(sql, text);
    return sql;
}

int sql_text(rsv_ctx *ctx, const char *text)
{
    int frc = RSV_OK;
    strbuf *sql = tagged(ctx, text);
    if (FAULT_ENTER(ctx, NULL, 0, text, &sql->oom, &frc))
        return frc;
    if (sql->oom)
        return ctx_fail(ctx, RSV_ENOMEM, "out of memory");
    stats_add(ctx, RSV_STAT_STATEMENTS, 1);
    read_wait w;
    read_wait_arm(ctx, &w);
    int failed = mysql_real_query(ctx->conn, sql->p, sql->len) != 0;
    if (failed)
        return read_wait_end(ctx, &w,
                             ctx_db_fail(ctx, mysql_errno(ctx->conn),
                                         mysql_error(ctx->conn), text));
    read_wait_end(ctx, &w, RSV_OK);
    /* Transaction control returns no rows, but drain defensively. */
    MYSQL_RES *r = mysql_store_result(ctx->conn);
    if (r)
        mysql_free_result(r);
    return FAULT_LEAVE(ctx, RSV_OK);
}

int sql_text_pair(rsv_ctx *ctx, const char *first, const char *second)
{
    /* Both go out back to back and both answers are read after: one
     * round trip instead of two.  The server runs them in order; if the
     * first fails the second still runs.  The fault walk fails each on
     * its own: both hooks run before anything is sent, as if each were
     * sent alone.  mysql_send_query() has written the text out when it
     * returns, so one buffer serves both. */
    int frc = RSV_OK, oom1 = 0, oom2 = 0;
    if (FAULT_ENTER(ctx, NULL, 0, first, &oom1, &frc))
        return frc;
    int lose1 = FAULT_LEAVE_DUE(ctx);
    int skip2 = FAULT_ENTER(ctx, NULL, 0, second, &oom2, &frc);
    int lose2 = FAULT_LEAVE_DUE(ctx);

    strbuf *sql = tagged(ctx, first);
    if (sql->oom || oom1)
        return ctx_fail(ctx, RSV_ENOMEM, "out of memory");
    stats_add(ctx, RSV_STAT_STATEMENTS, 1);
    if (mysql_send_query(ctx->conn, sql->p, (unsigned long)sql->len) != 0)
        return ctx_db_fail(ctx, mysql_errno(ctx->conn), mysql_error(ctx->conn),
                           first);
    /* rc2: why the second did not go out */
    int rc2 = skip2 ? frc : RSV_OK;
    if (!skip2) {
        sql = tagged(ctx, second);
        if (sql->oom || oom2) {
            rc2 = ctx_fail(ctx, RSV_ENOMEM, "out of memory");
        } else {
            stats_add(ctx, RSV_STAT_STATEMENTS, 1);
            if (mysql_send_query(ctx->conn, sql->p,
                                 (unsigned long)sql->len) != 0) {
                rc2 = ctx_db_fail(ctx, mysql_errno(ctx->conn),
                                  mysql_error(ctx->conn), second);
                if (is_conn_errno(ctx->db_errno))
                    return rc2;
            }
        }
    }
    /* the first went out: read its answer to stay in step */
    int rc = RSV_OK;
    if (mysql_read_query_result(ctx->conn) != 0) {
        rc = ctx_db_fail(ctx, mysql_errno(ctx->conn), mysql_error(ctx->conn),
                         first);
        if (is_conn_errno(ctx->db_errno))
            return rc;
    } else if (lose1) {
        return FAULT_LOSE(ctx, rc);
    }
    if (rc2 != RSV_OK)
        return rc != RSV_OK ? rc : rc2;
    if (mysql_read_query_result(ctx->conn) != 0) {
        if (rc == RSV_OK)
            rc = ctx_db_fail(ctx, mysql_errno(ctx->conn),
                             mysql_error(ctx->conn), second);
    } else if (lose2) {
        rc = FAULT_LOSE(ctx, rc);
    }
    return rc;
}

/* ---- one-row text queries: the checks of rsv_open and rsv_reconnect ---- */

/* The checks of rsv_open and rsv_reconnect have no retry frame: a lock
 * conflict is answered, never the internal RSV__RETRY. */
static int open_code(rsv_ctx *ctx, int rc)
{
    return rc == RSV__RETRY ? ctx_fail(ctx, RSV_EBUSY, "%s", ctx->msg) : rc;
}

int sql_query_row(rsv_ctx *ctx, const char *q, char *out, size_t outlen,
                  char *out2, size_t out2len)
{
    int frc = RSV_OK;
    if (FAULT_ENTER(ctx, NULL, 0, NULL, NULL, &frc))
        return open_code(ctx, frc);
    if (mysql_real_query(ctx->conn, q, strlen(q)) != 0)
        return open_code(ctx, ctx_db_fail(ctx, mysql_errno(ctx->conn),
                                          mysql_error(ctx->conn),
                                          "server check"));
    MYSQL_RES *r = mysql_store_result(ctx->conn);
    if (!r)
        return open_code(ctx, ctx_db_fail(ctx, mysql_errno(ctx->conn),
                                          mysql_error(ctx->conn),
                                          "server check"));
    MYSQL_ROW row = mysql_fetch_row(r);
    out[0] = '\0';
    if (out2)
        out2[0] = '\0';
    if (row) {
        snprintf(out, outlen, "%s", row[0] ? row[0] : "");
        if (out2 && mysql_num_fields(r) > 1)
            snprintf(out2, out2len, "%s", row[1] ? row[1] : "");
    }
    mysql_free_result(r);
    return open_code(ctx, FAULT_LEAVE(ctx, RSV_OK));
}
