/*
 * internal.h - private types shared by the library's source files, and
 * the functions each file offers the others, in layer order.
 *
 * Owns the layout of the context, the cart, the statement cache and the
 * parameter/result buffers.  Nothing here is visible to applications.
 *
 * LAYERS.  lib/ is flat; this table is where a file's layer is written.
 * A file calls only files of its own layer or a lower one, and no two
 * files call each other, directly or round a circle.  tests/layers.sh
 * reads this table and checks both on the built objects (which hidden
 * symbol each object takes from which).
 *
 *   layer      files (lib/NAME.c)
 *   1 base     clock threads errors guard stats key_stats cart argcheck
 *   2 wire     sql fault
 *   3 frame    txn op
 *   4 storage  schema ledger ledger_seen pool_cursor
 *   5 engine   reserve_job reserve_next sold_out reserve_proc reserve
 *              checkout stock pool_drain sweep audit
 *   6 batch    batch_call batch
 *   7 surface  connect context nonblock stats_export batcher
 *   8 migrate  migrate_stage migrate_apply migrate
 *
 * base: time, threads, errors, the guard of a call in flight, counters;
 * wire: statements on the connection; frame: transactions and
 * operations; storage: the schema's contract and what is known of its
 * rows; engine: the operations; batch: many operations in one call;
 * surface: contexts, connections, the non-blocking interface, exports;
 * migrate: a handle over contexts that sends a shop's calls to the store
 * its stage names (it uses contexts as an application does).
 * fault.c has code only in the fault-injection test build, which
 * tests/layers.sh checks too.
 *
 * LOCK ORDER.  Every path takes row locks in this order:
 *
 *   1 checkout row -> 2 ledger rows (ascending key) -> 3 pool rows
 *   (primary-key order) -> 4 holds -> 5 journal
 *
 * A path that must take a level out of order takes that part with SKIP
 * LOCKED, so it never waits for it.  Locks are taken by primary key only;
 * a blocking locking read is never a range that can run short; every
 * transaction that locks runs at READ COMMITTED, set per transaction.
 * docs/internals.md section 3 has which path takes which locks and why each
 * part of the rule exists: change the code and that table together.
 */
#ifndef RSV_INTERNAL_H
#define RSV_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <mysql.h>

#include "reserve.h"
#include "reserve/async.h"
#include "reserve/batch.h"
#include "reserve/stats.h"
#include "test_flags.h"

#define RSV_HIDDEN __attribute__((visibility("hidden")))

/* The stored procedures (sql/schema.sql) the library calls, and those
 * they call (schema.c has the list); the version in a name changes only
 * when its arguments or its answer do. */
#define RSV_PROC_RESERVE "rsv_reserve_key_v3" /* and each batch entry */
#define RSV_PROC_CART "rsv_fast_cart_v5" /* and each cart batch entry */
#define RSV_PROC_TOP_UP "rsv_pool_top_up_v3" /* called by both */
/* the units it mints at most per call; the statements' waited ledger take
 * mints the same (reserve.c) */
#define PROC_TOP_UP_MAX 1000
/* the top-up after a pool take: called by every reserve procedure */
#define RSV_PROC_TOP_UP_HELD "rsv_pool_top_up_held_v1"
/* a key's units off its pool: called by every reserve procedure */
#define RSV_PROC_TAKE_UNITS "rsv_pool_take_units_v1"
#define RSV_PROC_SETTLE "rsv_settle_v2"     /* claim and release */
/* one checkout's claim or release: called by ..._SETTLE and
 * ..._SETTLE_BATCH */
#define RSV_PROC_SETTLE_CHECKOUT "rsv_settle_checkout_v1"
/* Many checkouts in one CALL (batch.c): reserves of one line, of carts,
 * and claims or releases. */
#define RSV_PROC_RESERVE_BATCH "rsv_reserve_batch_v1"
#define RSV_PROC_CART_BATCH "rsv_reserve_cart_batch_v1"
#define RSV_PROC_SETTLE_BATCH "rsv_settle_batch_v1"

/* Where make install puts the schema (for messages). */
#ifndef RSV_DATADIR
#define RSV_DATADIR "/usr/local/share"
#endif

/* The largest pool_cap option a context accepts (rsv_options). */
#define POOL_CAP_MAX 10000

/* Internal codes: passed between the library's functions, never returned
 * to the application, and far from every public code (RSV_PENDING and
 * RSV_OK .. RSV_ECANCELED). */
/* A deadlock or lock-wait timeout; the transaction must be rolled back and
 * may be retried. */
#define RSV__RETRY (-1000)
/* op_begin refused the call because a non-blocking call is in progress on
 * the context (nb_busy); op_end answers RSV_EINVAL for it and touches
 * nothing. */
#define RSV__REFUSED (-1002)
/* A procedure cannot be called here (proc_unusable): nothing ran, and the
 * same work goes by statements. */
#define RSV__NO_PROC (-1003)
/* A pass of a reserve ended without a final code: how is in its job
 * (reserve_job.h, rend). */
#define RSV__PASS_ENDED (-1004)

/* Transaction control.  The explicit AND NO CHAIN NO RELEASE keep a
 * session's completion_type out of it: CHAIN would open a new transaction
 * after ours (the application's next claim would silently join it and be
 * lost with the connection), RELEASE would close the connection. */
#define SQL_COMMIT "COMMIT AND NO CHAIN NO RELEASE"
#define SQL_ROLLBACK "ROLLBACK AND NO CHAIN NO RELEASE"

/* Checkout states, as stored in rsv_checkouts.status and (claimed,
 * released) rsv_journal.kind: the public RSV_STATUS_* values.  SQL text
 * writes them as SQLV(ST_HELD) ..., so each value is defined once (the
 * stored procedures in sql/schema.sql spell them out; tests compare).  A
 * new state must also join the status list of rsv_sweep's purge. */
#define ST_HELD RSV_STATUS_HELD
#define ST_CLAIMED RSV_STATUS_CLAIMED
#define ST_RELEASED RSV_STATUS_RELEASED
#define ST_EXPIRED RSV_STATUS_EXPIRED
#define SQLV_(x) #x
#define SQLV(x) SQLV_(x) /* a number's digits, as SQL text */

/* The operation in progress, for conn_tag comments and counters: a public
 * RSV_OP_* kind, or OP_OPEN for rsv_open's checks, in slot 0, which the
 * statistics getters read as RSV_OP_ALL (rsv_open is never counted). */
#define OP_OPEN RSV_OP_ALL
#define OP__COUNT (RSV_OP_AUDIT + 1)

/* ---- growable byte buffer (SQL text) ---- */
typedef struct strbuf {
    char *p;
    size_t len, cap;
    int oom;
} strbuf;

/* Index hints for reads of one key's rows in a correlated subquery: the
 * statistics of a schema loaded empty (or of tables that grew fast since)
 * made the optimizer read holds through the primary key on shop_id alone
 * and settlements by a full scan, once per ledger row. */
#define BY_KEY " FORCE INDEX (PRIMARY)"
#define HOLDS_BY_KEY " FORCE INDEX (rsv_holds_expiry)"

/* ---- statement parameters ---- */
enum { V_I64, V_U64, V_BIN };
typedef struct sql_val {
    int type;
    union { int64_t i; uint64_t u; } v;
    const void *p;
    unsigned long len;
} sql_val;

typedef struct sql_args {
    sql_val *v;
    size_t n, cap;
    int oom;
    MYSQL_BIND *binds;
    size_t binds_cap;
} sql_args;

/* ---- statement results: integer, binary and text columns ---- */
#define COL_I 'i'
#define COL_B 'b'
#define COL_T 't' /* at most one per result, read into text (the cart
                     procedure's answer); its ints read as 0 */
#define RES_TEXT_MAX 4096
#define RES_COLS_MAX 16 /* columns of one result, the isolation column
                           (ctx->guard_dirty) left out */
typedef struct sql_res {
    const char *spec;     /* one COL_* per column */
    size_t ncols, rows, cap_rows;
    int64_t *ints;        /* rows * ncols; NULL reads as 0 */
    unsigned char *nulls; /* rows * ncols */
    unsigned char *bins;  /* rows * ncols * (RSV_TOKEN_MAX + 1); byte 0 = len */
    char text[RES_TEXT_MAX + 1]; /* the COL_T column of the last row read,
                                    NUL-terminated (kept in the context so
                                    that reading it allocates nothing after
                                    a commit) */
    int answered;         /* a guarded read (ctx->guard_dirty) answered */
    int dirty;            /* and ran at READ UNCOMMITTED: its rows may show
                             uncommitted changes */
} sql_res;

#define RES_I(r, row, col) ((r)->ints[(row) * (r)->ncols + (col)])
#define RES_NULL(r, row, col) ((r)->nulls[(row) * (r)->ncols + (col)])
#define RES_BLEN(r, row, col) \
    ((r)->bins[((row) * (r)->ncols + (col)) * (RSV_TOKEN_MAX + 1)])
#define RES_B(r, row, col) \
    (&(r)->bins[((row) * (r)->ncols + (col)) * (RSV_TOKEN_MAX + 1) + 1])

/* ---- the statement cache ---- */
typedef int (*sql_builder)(strbuf *sql, uint32_t shape);
/* A built statement's shape: its size (lines, tuples, keys ...) in the low
 * bits, and at most two flags above them for a builder's variants (each
 * builder names its own: LOCK_SKIP, SLOW_BIT ...). */
#define SHAPE_FLAG_A 0x80000000u
#define SHAPE_FLAG_B 0x40000000u
#define SHAPE_SIZE(shape) ((shape) & ~(SHAPE_FLAG_A | SHAPE_FLAG_B))

typedef struct stmt_slot {
    sql_builder build; /* identifies the statement kind ... */
    uint32_t shape;        /* kind-specific size (lines, tuples ...) */
    const char *text;      /* ... or its fixed text (build NULL) */
    int guard;             /* built with the isolation check (guard_dirty) */
    int op;                /* tag the text was built with */
    MYSQL_STMT *stmt;
    uint64_t last_used;
} stmt_slot;

/* The cache never holds more prepared statements than this per context,
 * which (with the result and parameter buffers) bounds a context's memory;
 * see README "Memory". */
#define RSV_STMT_CACHE 48

/* ---- cart ---- */
typedef struct cart_line {
    uint64_t item;
    uint64_t *locs;     /* n_locs, owned */
    size_t n_locs;
    int64_t qty;
    uint32_t flags;
    int64_t *alloc;     /* n_locs: units held per location after reserve */
} cart_line;

struct rsv_cart {
    cart_line *lines;
    size_t n, cap;
    size_t failed_line;
};

/* ---- statistics (stats.c) ---- */
/* The last (most negative) return code. */
#define RSV__LAST_CODE RSV_ENOTPRIMARY
/* One outcome slot per code RSV_OK (0) .. RSV__LAST_CODE, indexed by
 * -code, and a last slot for anything else; grow with the codes. */
#define STATS_CODES (-RSV__LAST_CODE + 2)
#define STATS_COUNTERS (RSV_STAT_STMT_EVICTIONS + 1)
/* One key's crowd counters (RSV_KEY_*; key_stats.c). */
typedef struct key_stat {
    uint64_t shop, item, loc;
    uint64_t n[RSV_KEY_STAT_COUNT];
} key_stat;
typedef struct ctx_stats {
    uint64_t outcome[OP__COUNT][STATS_CODES];
    uint64_t counter[OP__COUNT][STATS_COUNTERS]; /* RSV_STAT_RETRIES.. */
    uint64_t hist[OP__COUNT][RSV_STATS_BUCKETS];
    key_stat keys[RSV_KEY_STATS_MAX]; /* the first nkeys are in use */
    uint32_t nkeys;
} ctx_stats;

/* ---- what a context last saw of a pool (pool_cursor.c) ---- */
typedef struct pool_seen {
    uint64_t shop, item, loc;
    uint64_t hi;               /* next_unit_id as last read */
    int64_t avail;             /* on_hand - issued as last read */
    uint64_t cursor;           /* where the next read starts */
    uint64_t refill_after_us;  /* no refill attempt after a read from the
                                  bottom before (monotonic) */
    int64_t taken_since_probe; /* units taken by reads from the cursor
                                  since the pool was last counted (starts
                                  at a random point of the share) */
    int refill_pending;        /* a due top-up found the ledger row held:
                                  the next reserve procedure does it if it
                                  gets the row (pool_cursor.c) */
    int sold_out;              /* the last answer for this pool was sold
                                  out (see sold_out_unlocked, sold_out.c) */
} pool_seen;
#define RSV_POOL_SEEN 16       /* pools remembered per context */
#define RSV_LEDGER_SEEN 1024   /* ledger rows remembered (ledger_seen.c) */

/* ---- a call in flight (guard.c; the worker is nonblock.c's) ---- */
enum { NB_IDLE, NB_QUEUED, NB_RUNNING, NB_DONE };
enum { JOB_RESERVE, JOB_RESERVE_ONE, JOB_CLAIM, JOB_RELEASE, JOB_EXTEND,
       JOB_STATUS };

/* One call's arguments: the token copied, the cart and out-pointers the
 * caller's (untouched by the caller until completion). */
struct nb_job {
    int kind;
    uint64_t shop;
    unsigned char token[RSV_TOKEN_MAX];
    size_t token_len;
    rsv_cart *cart;
    uint64_t item, loc;
    int64_t quantity, ttl_ms;
    int32_t *status_out;
    int64_t *units_out, *expires_out;
};

struct nb_state {
    pthread_mutex_t mu;
    pthread_cond_t cv;  /* the worker waits on it for a job, and in its
                           backoff pauses for a cancel */
    pthread_t thread;
    int has_thread;
    int fd[2];          /* completion descriptor (threads.c): [0] is
                           rsv_async_fd, readable once the call finished */
    int pending;        /* from a start that said RSV_PENDING until
                           rsv_cont gives the result; read and written by
                           the caller's thread only */
    /* under mu: */
    int state;          /* NB_* */
    int cancel;         /* rsv_cancel asked the call to stop */
    int cut;            /* and shut its connection's socket down */
    int quit;           /* rsv_close: the worker ends */
    int sock;           /* while NB_RUNNING, a duplicate of the
                           connection's socket (or -1), for rsv_cancel: a
                           descriptor of our own cannot be closed and
                           reused under us by Connector/C */
    int result;         /* the call's code, once NB_DONE */
    struct nb_job job;
};

/* ---- context ---- */
struct dsn_parts;
struct rsv_ctx {
    MYSQL *conn;
    struct dsn_parts *dsn;       /* how to connect again, when the context
                                  opened conn itself (rsv_open_dsn) */
    rsv_options opts;
    char tag_prefix[40];
    int is_mariadb;
    unsigned long thread_id;   /* connection the statements belong to */

    int op;                    /* current operation (RSV_OP_*, OP_OPEN) */
    int code;                  /* last result code */
    char msg[512];             /* last error message */
    unsigned int db_errno;     /* last server/client error number */
    int commit_anyway;         /* body asks to commit despite its code */
    int executed;              /* the last sql_run reached the server's
                                  execute (a prepare that failed did not):
                                  a loss after that may have run it */

    stmt_slot stmts[RSV_STMT_CACHE];
    uint64_t use_clock;
    sql_args args;
    sql_res res;
    strbuf sql;
    uint64_t rng;              /* backoff jitter, per context */
    pool_seen seen[RSV_POOL_SEEN];
    uint64_t ledger_seen[RSV_LEDGER_SEEN]; /* fingerprints, 0 = empty */

    /* the operation in progress, for op_end() (op.c) */
    int op_open;
    uint64_t op_start_us;
    uint64_t op_shop;
    const void *op_token;
    size_t op_token_len;

    uint32_t procs;            /* PROC_BIT(id) for each procedure the
                                  context calls: it is in the schema with
                                  all it calls (schema_check, at rsv_open
                                  and rsv_reconnect; cleared when a CALL
                                  shows it gone or not allowed) */
    int galera;                /* the server is a Galera cluster node
                                  (wsrep_on at rsv_open): every statement
                                  of a transaction is checked to have run
                                  inside it (sql.c), and a failed CALL is
                                  in doubt (txn.c) */
    int in_frame;              /* a transaction of ours (or the caller's
                                  we joined) is open: each statement's
                                  answer must say so (txn.c, sql.c) */
    int guard_dirty;           /* the read in flight runs at the session's
                                  isolation: it also answers whether that
                                  is READ UNCOMMITTED (txn.c, sql.c) */
    int32_t stmt_lock_wait_s;  /* innodb_lock_wait_timeout of each of our
                                  statements (SET STATEMENT; 0 = the
                                  session's) */
    uint64_t deadline_us;      /* the call's time budget ends (monotonic;
                                  0 = none): no attempt starts after it */
    int ack_checked;           /* RSV_OPT_REPLICA_ACK: this operation has
                                  read the replication status (txn.c) */
    int commit_point;          /* the statement in flight commits (COMMIT,
                                  a procedure that commits): its answer
                                  is waited for until the budget is spent
                                  (sql.c) */
    const char *isolation_var; /* the server's name for the session's
                                  isolation level (rsv_open) */
    int disabled;              /* rsv_set_enabled(ctx, 0) */
    rsv_op_fn callback;
    void *callback_user;
    int in_callback;
    struct nb_state *nb;       /* the call in flight and the worker of the
                                  non-blocking interface, once used
                                  (guard.c, nonblock.c) */
    ctx_stats stats;
};

/* ================= layer 1: base ================= */

/* ---- clock.c: time and jitter ---- */
/* Microseconds on the monotonic clock. */
RSV_HIDDEN uint64_t now_us(void);
RSV_HIDDEN void ctx_rand_seed(rsv_ctx *ctx);
/* Uniform-ish random number from the context's generator. */
RSV_HIDDEN uint64_t ctx_rand(rsv_ctx *ctx);

/* ---- threads.c: the library's own threads, completion descriptors ---- */
/* pthread_create with every signal blocked in the new thread; returns
 * pthread_create's error. */
RSV_HIDDEN int thread_start(pthread_t *t, void *(*fn)(void *), void *arg);
/* A completion descriptor: fd[0] readable while an answer waits.  open
 * returns 0 or an errno (fds then -1); set makes it readable (call once
 * per waiting state), clear consumes that. */
RSV_HIDDEN int wakeup_open(int fd[2]);
RSV_HIDDEN void wakeup_set(const int fd[2]);
RSV_HIDDEN void wakeup_clear(const int fd[2]);
RSV_HIDDEN void wakeup_close(int fd[2]);
/* A non-blocking call is in progress on ctx and this thread is not its
 * worker: the function must refuse (RSV_EINVAL) without writing to ctx. */
RSV_HIDDEN int nb_busy(const rsv_ctx *ctx);
/* What rsv_errmsg says while a call is in progress. */
RSV_HIDDEN const char *nb_busy_msg(void);
/* This thread is ctx's worker from now on (nonblock.c); and whether the
 * calling thread is it. */
RSV_HIDDEN void nb_become_worker(const rsv_ctx *ctx);
RSV_HIDDEN int nb_is_worker(const rsv_ctx *ctx);

/* ---- errors.c: codes, messages and the server's errors ---- */
RSV_HIDDEN int ctx_fail(rsv_ctx *ctx, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
RSV_HIDDEN int ctx_ok(rsv_ctx *ctx);
RSV_HIDDEN int ctx_db_fail(rsv_ctx *ctx, unsigned int err, const char *text,
                           const char *what);
RSV_HIDDEN int is_conn_errno(unsigned int err);
/* A call's code says its context's connection is gone or no longer the
 * writable server's (RSV_ECONN, RSV_EINDOUBT, RSV_ENOTPRIMARY): a worker
 * that owns the context reconnects it (with a dsn of several hosts the
 * reconnect finds the writable one). */
RSV_HIDDEN int rc_needs_reconnect(int rc);
/* A context's code, server error and message, kept across work whose own
 * failure must not replace them (a rollback after a failure, a best-effort
 * refill after a commit, the completion callback). */
typedef struct ctx_error {
    int code;
    unsigned int db_errno;
    char msg[512];
} ctx_error;
RSV_HIDDEN void ctx_error_save(const rsv_ctx *ctx, ctx_error *e);
RSV_HIDDEN void ctx_error_restore(rsv_ctx *ctx, const ctx_error *e);

/* ---- guard.c: a call in flight (nb_busy is threads.c's) ---- */
/* On the worker, when rsv_cancel asked the call to stop: RSV_ECANCELED
 * with its message; else 0.  txn_run asks before each attempt. */
RSV_HIDDEN int nb_canceled(rsv_ctx *ctx);
/* The backoff pause between attempts; on the worker a cancel ends it. */
RSV_HIDDEN void nb_sleep(rsv_ctx *ctx, uint64_t us);
/* Make ctx->nb and its descriptor once; RSV_OK or RSV_ENOMEM. */
RSV_HIDDEN int nb_ensure(rsv_ctx *ctx);
/* Stop the call in flight (nb->mu held): no attempt starts after this,
 * the backoff wait ends, and a statement in flight ends at once (the
 * server sees the session go and rolls back what was not committed). */
RSV_HIDDEN void nb_stop_locked(struct nb_state *nb);
/* rsv_close: cancel the call in flight, join the worker, free. */
RSV_HIDDEN void nb_free(rsv_ctx *ctx);

/* ---- stats.c: the counters of each context ---- */
/* Add n to a counter (RSV_STAT_RETRIES ..) of the current operation. */
RSV_HIDDEN void stats_add(rsv_ctx *ctx, int stat, uint64_t n);
/* Count a finished call: its outcome and latency. */
RSV_HIDDEN void stats_call(rsv_ctx *ctx, int op, int rc, uint64_t us);
/* A counter as rsv_stats_get() reports it (stat and op already checked),
 * for a context's statistics or a snapshot's (stats_export.c). */
RSV_HIDDEN uint64_t stats_value(const ctx_stats *s, uint32_t stat,
                                uint32_t op);

/* ---- key_stats.c: what a crowd does to a key ---- */
/* Add n to a key's counter (RSV_KEY_*), making room for the key if it is
 * new (see RSV_KEY_STATS_MAX). */
RSV_HIDDEN void key_stats_add(ctx_stats *s, uint64_t shop, uint64_t item,
                              uint64_t loc, int stat, uint64_t n);
/* Add b's keys into a (for stats_merge). */
RSV_HIDDEN void key_stats_merge(ctx_stats *a, const ctx_stats *b);

/* ---- argcheck.c: a call's arguments, checked before anything is sent ---- */
/* The longest hold a reserve or an extension asks for, and the longest
 * default (rsv_options.hold_ttl_ms): 30 days. */
#define RSV_TTL_MAX_MS (30LL * 24 * 3600 * 1000)
/* The kinds of call whose arguments are checked alike in every form. */
enum { CALL_RESERVE_ONE, CALL_RESERVE, CALL_CLAIM, CALL_RELEASE, CALL_EXTEND,
       CALL_STATUS };
typedef struct call_args {
    int kind;                 /* CALL_* */
    const void *token;
    size_t token_len;
    int64_t quantity;         /* CALL_RESERVE_ONE */
    const struct rsv_cart *cart; /* CALL_RESERVE */
    int64_t ttl_ms;           /* the reserves and CALL_EXTEND; 0: default */
    const void *out;          /* CALL_STATUS: status_out */
} call_args;
/* The longest message of a check, its NUL included. */
#define ARG_MSG_MAX 96
/* The code of a call's arguments (RSV_OK or the first thing wrong, in the
 * single call's order), and its message into msg (ARG_MSG_MAX bytes). */
RSV_HIDDEN int call_check(const call_args *a, char *msg);
RSV_HIDDEN int token_check(const void *token, size_t len, char *msg);
/* ttl_ms 0 (the default) passes. */
RSV_HIDDEN int ttl_check(int64_t ttl_ms, char *msg);
/* A cart of one line at one location, in the caller's storage (no
 * allocation): what rsv_reserve_one and a batch entry reserve. */
RSV_HIDDEN void cart_one_line(struct rsv_cart *cart, struct cart_line *line,
                              uint64_t item, uint64_t *loc, int64_t quantity,
                              int64_t *alloc);
/* The checks above on a context: the code, with its message set. */
static inline int check_call(rsv_ctx *ctx, const call_args *a)
{
    char msg[ARG_MSG_MAX];
    int rc = call_check(a, msg);
    return rc ? ctx_fail(ctx, rc, "%s", msg) : RSV_OK;
}
static inline int check_token(rsv_ctx *ctx, const void *token, size_t len)
{
    char msg[ARG_MSG_MAX];
    int rc = token_check(token, len, msg);
    return rc ? ctx_fail(ctx, rc, "%s", msg) : RSV_OK;
}
/* A checked ttl_ms, 0 replaced by the context's default. */
static inline int64_t ttl_or_default(const rsv_ctx *ctx, int64_t ttl_ms)
{
    return ttl_ms == 0 ? ctx->opts.hold_ttl_ms : ttl_ms;
}
/* And ttl_ms 0 replaced by the context's default. */
static inline int check_ttl(rsv_ctx *ctx, int64_t *ttl_ms)
{
    char msg[ARG_MSG_MAX];
    int rc = ttl_check(*ttl_ms, msg);
    if (rc)
        return ctx_fail(ctx, rc, "%s", msg);
    *ttl_ms = ttl_or_default(ctx, *ttl_ms);
    return RSV_OK;
}

/* ================= layer 2: wire ================= */

/* ---- sql.c: statements, their cache, buffers and results ---- */
RSV_HIDDEN void buf_puts(strbuf *b, const char *s);
RSV_HIDDEN void buf_putn(strbuf *b, const char *s, size_t n);
RSV_HIDDEN void buf_printf_u(strbuf *b, const char *before, uint64_t v,
                             const char *after);
RSV_HIDDEN void buf_free(strbuf *b);

RSV_HIDDEN void args_reset(sql_args *a);
RSV_HIDDEN void arg_i64(sql_args *a, int64_t x);
RSV_HIDDEN void arg_u64(sql_args *a, uint64_t x);
RSV_HIDDEN void arg_bin(sql_args *a, const void *p, size_t len);
/* n placeholders for a procedure's OUT arguments (never read). */
RSV_HIDDEN void arg_outs(sql_args *a, size_t n);
RSV_HIDDEN void args_free(sql_args *a);
RSV_HIDDEN void res_free(sql_res *r);

/* Prepare (or take from the cache) the statement built by `build` for
 * `shape`, bind ctx->args, execute, and if spec is non-NULL fetch every row
 * into ctx->res.  *affected (may be NULL) gets the affected-row count.
 * Returns RSV_OK, RSV__RETRY, or a failure code with the message set. */
RSV_HIDDEN int sql_run(rsv_ctx *ctx, sql_builder build, uint32_t shape,
                       const char *spec, uint64_t *affected);
/* The same for a statement whose text never changes: text (a static
 * string; its address identifies the statement in the cache). */
RSV_HIDDEN int sql_fixed(rsv_ctx *ctx, const char *text, const char *spec,
                         uint64_t *affected);
/* Run a fixed text statement (transaction control); same returns. */
RSV_HIDDEN int sql_text(rsv_ctx *ctx, const char *text);
/* Two fixed text statements in one round trip, run in order (the second
 * runs even if the first fails).  Returns the first failure in statement
 * order, or RSV_OK if both ran. */
RSV_HIDDEN int sql_text_pair(rsv_ctx *ctx, const char *first,
                             const char *second);
RSV_HIDDEN void sql_cache_clear(rsv_ctx *ctx);
/* Append the /" "* conn_tag *" "/ comment for the current operation. */
RSV_HIDDEN void sql_tag(rsv_ctx *ctx, strbuf *b);
/* Append "(SELECT ? AS k0, ? AS k1 UNION ALL SELECT ?, ? ...) AS k
 * STRAIGHT_JOIN " for n tuples of ncols columns; the caller names the
 * table next and joins it ON its key columns = k.k0, k.k1 ...  The
 * tuples' parameters come first, before any other of the statement. */
RSV_HIDDEN void sql_key_rows(strbuf *b, size_t ncols, uint32_t n);
/* Power-of-two bucket >= n (n >= 1), for statements whose size varies. */
RSV_HIDDEN uint32_t sql_bucket(size_t n);
/* A batch of checkout tokens copied out of a result: ctx->res is reused by
 * the statement that acts on them (the fold's and the purge's DELETEs). */
#define TOKEN_BATCH 256
typedef struct token_list {
    unsigned char tok[TOKEN_BATCH][RSV_TOKEN_MAX];
    size_t len[TOKEN_BATCH];
    int64_t gen[TOKEN_BATCH]; /* a second key column, for statements that
                                 take (token, generation) */
    size_t n;
} token_list;
/* Copy column col of every row of r (at most TOKEN_BATCH rows). */
RSV_HIDDEN void tokens_read(token_list *t, const sql_res *r, size_t col);
/* Append t's tokens (each followed by its gen when with_gen) to a, padded
 * to a power of two with the empty token, which no checkout has (few
 * distinct statements to prepare); returns the padded count, the shape to
 * build the statement for. */
RSV_HIDDEN uint32_t args_tokens(sql_args *a, const token_list *t,
                                int with_gen);
/* Errors of a CALL that mean the procedure cannot be called here (dropped
 * after rsv_open, no EXECUTE privilege, a different version under the
 * name): nothing ran, and the statements still work. */
RSV_HIDDEN int sql_proc_unusable(unsigned int err);
/* Make room in ctx->res for a result of this shape with `rows` rows,
 * before a statement that commits and answers that many (nothing may be
 * allocated after the commit).  Returns RSV_OK or RSV_ENOMEM. */
RSV_HIDDEN int sql_res_room(rsv_ctx *ctx, const char *spec, size_t rows);
/* A one-row text query for the checks of rsv_open and rsv_reconnect
 * (not prepared: they run once per connection): the first column into
 * out, the second (if out2 is not NULL) into out2; "" for no row or NULL.
 * A lock conflict answers RSV_EBUSY: these checks have no retry frame. */
RSV_HIDDEN int sql_query_row(rsv_ctx *ctx, const char *q, char *out,
                             size_t outlen, char *out2, size_t out2len);

/* ================= layer 3: frame ================= */

/* ---- txn.c: the transaction frame ---- */
#define TXN_MAY_JOIN 0x1 /* join the caller's open transaction if any */
#define TXN_SELF_COMMIT 0x2 /* the body is one statement that begins,
                               commits or rolls back its own transaction
                               (the reserve procedure): no BEGIN/COMMIT
                               around it, and a connection lost while it
                               runs leaves the outcome unknown */
#define TXN_ONE_READ 0x4 /* the body is one plain (consistent) read: with
                            autocommit on and no transaction open it is
                            sent alone (MariaDB), its own transaction, in
                            one round trip, at the session's isolation;
                            else in a READ ONLY frame */
#define TXN_NO_DIRTY 0x8 /* with TXN_ONE_READ: the answer must not show
                            uncommitted changes.  Sent alone, the read also
                            tells whether the session is at READ
                            UNCOMMITTED; if it is (or no row came back, which
                            cannot tell), it is read again in a READ
                            COMMITTED frame */
#define TXN_READS_AFTER_COMMIT 0x10 /* with TXN_SELF_COMMIT: the procedure
                            reads a table after its COMMIT (the batch
                            procedures' answers), which a Galera node that
                            has just left the primary component refuses:
                            its refusal may come after the commit */
typedef int (*txn_body)(rsv_ctx *ctx, void *arg);
RSV_HIDDEN int txn_run(rsv_ctx *ctx, int flags, txn_body body, void *arg);
RSV_HIDDEN int txn_caller_open(rsv_ctx *ctx);
/* Whether the server commits without a replica's acknowledgement now
 * (semi-synchronous replication enabled, fallen back to asynchronous):
 * 1, 0, or -1 when it cannot be read (code and message set). */
RSV_HIDDEN int replica_ack_lost(rsv_ctx *ctx);
/* ROLLBACK, keeping the code and message of what made it necessary. */
RSV_HIDDEN void txn_rollback_quietly(rsv_ctx *ctx);
/* ---- op.c: the frame of every public operation ---- */
/* Start a public operation: sets the tag, the clock and the shop/token the
 * completion callback gets.  `writes`: the operation changes the database,
 * so the kill switch refuses it; then returns RSV_EDISABLED (message set),
 * otherwise RSV_OK. */
RSV_HIDDEN int op_begin(rsv_ctx *ctx, int op, int writes, uint64_t shop,
                        const void *token, size_t token_len);
/* Every public operation that called op_begin returns through this: it
 * counts the call and its latency and runs the completion callback.
 * Returns rc; NULL ctx is fine. */
RSV_HIDDEN int op_end(rsv_ctx *ctx, int rc);
/* Count one entry of a batch as a call of its own of kind op (begun at
 * start_us, op_begin's clock) and run the completion callback for it, as
 * op_end does.  Returns rc. */
RSV_HIDDEN int op_end_entry(rsv_ctx *ctx, int op, int rc, uint64_t shop,
                            const void *token, size_t token_len,
                            uint64_t start_us);

/* ================= layer 4: storage ================= */

/* ---- schema.c: the procedures and tables the library needs ---- */
/* The procedures, by id: those the library calls first, then those only
 * they call.  rsv_schema_procedure(id) names them. */
enum {
    PROC_RESERVE, PROC_CART, PROC_RESERVE_BATCH, PROC_SETTLE,
    PROC_SETTLE_BATCH, PROC_CART_BATCH,
    PROC_TAKE_UNITS, PROC_TOP_UP, PROC_TOP_UP_HELD,
    PROC_SETTLE_CHECKOUT,
    PROC__COUNT
};
#define PROC_BIT(id) (1u << (id))
static inline int proc_usable(const rsv_ctx *ctx, int id)
{
    return (ctx->procs & PROC_BIT(id)) != 0;
}
/* After a failed CALL of procedure id: whether it cannot be called here
 * (dropped since, no EXECUTE, another version under the name); then the
 * context stops trying it and nothing ran. */
RSV_HIDDEN int proc_unusable(rsv_ctx *ctx, int id);
/* The tables, the schema version and the procedures of the connection's
 * database (one round trip): RSV_ESCHEMA / RSV_ESCHEMAVER with the
 * command that mends it, or RSV_OK with ctx->procs set. */
RSV_HIDDEN int schema_check(rsv_ctx *ctx);
/* The CALL statement of each procedure the library calls (their
 * arguments are listed there).  The reserve procedures' OUT arguments are
 * placeholders the caller binds with arg_outs: this many. */
#define CALL_RESERVE_OUTS 8
#define CALL_CART_OUTS 2
RSV_HIDDEN int b_call_reserve(strbuf *s, uint32_t shape);
RSV_HIDDEN int b_call_cart(strbuf *s, uint32_t shape);
RSV_HIDDEN int b_call_settle(strbuf *s, uint32_t shape);
RSV_HIDDEN int b_call_reserve_batch(strbuf *s, uint32_t shape);
RSV_HIDDEN int b_call_cart_batch(strbuf *s, uint32_t shape);
RSV_HIDDEN int b_call_settle_batch(strbuf *s, uint32_t shape);

/* ---- ledger.c: the ledger rows, and the pool rows under them ---- */
typedef struct ledger_row {
    uint64_t item, loc;
    int64_t on_hand, issued;
    uint64_t next_id;
    int64_t cap;
} ledger_row;
/* How ledger_lock locks: FOR UPDATE (waiting), FOR UPDATE SKIP LOCKED, or
 * LOCK IN SHARE MODE (waiting; shared waiters are granted together). */
enum { LEDGER_WAIT = 0, LEDGER_SKIP = 1, LEDGER_SHARE = 2 };
/* Lock the ledger rows of the given keys (sorted, unique) in the given mode
 * (LEDGER_*); fills rows[] in key order and returns how many rows were
 * found in *found. */
RSV_HIDDEN int ledger_lock(rsv_ctx *ctx, uint64_t shop, const uint64_t *keys,
                           size_t nkeys, int mode, ledger_row *rows,
                           size_t *found);
/* Lock one key's ledger row, waiting for its holder or (skip) passing over
 * it; *held says whether it is locked now.  Without skip a missing row is
 * RSV_ENOITEM; with skip it is *held 0, like a row held elsewhere. */
RSV_HIDDEN int ledger_lock_key(rsv_ctx *ctx, uint64_t shop,
                               const uint64_t key[2], int skip,
                               ledger_row *lv, int *held);
/* What one fold did, for rsv_sweep_report: expired holds given back,
 * their units, and journal rows folded. */
typedef struct fold_counts {
    int64_t holds, hold_units, settled;
} fold_counts;
/* With the ledger row locked: give back up to max_reap expired holds
 * (INT64_MAX: as many as one fold takes, 2,048) and fold settlements into
 * on_hand/issued (lv is updated); *out (may be NULL) says how much.
 * Never waits for other rows. */
RSV_HIDDEN int ledger_fold(rsv_ctx *ctx, uint64_t shop, ledger_row *lv,
                           int64_t max_reap, fold_counts *out);
/* With the ledger row locked: on_hand -= taken, issued += issue - returned,
 * next_unit_id += minted (lv is updated). */
RSV_HIDDEN int ledger_update(rsv_ctx *ctx, uint64_t shop, ledger_row *lv,
                             int64_t taken, int64_t returned, int64_t issue,
                             int64_t minted);
/* DELETE pool rows given as n (item, location, id) keys followed by the
 * shop (reserve's taken rows, stock's shrink); pad with id 0, which no
 * pool row has. */
RSV_HIDDEN int b_pool_delete(strbuf *s, uint32_t n);
/* With the ledger row locked: take up to `want` pool units, from the top,
 * from rows no one else holds (SKIP LOCKED: rows in-flight reserves are
 * taking are theirs): rows whole, and the last maybe in part; *done gets
 * how many units.  The caller subtracts them from the ledger row's
 * issued. */
RSV_HIDDEN int ledger_pool_shrink(rsv_ctx *ctx, uint64_t shop,
                                  const ledger_row *lv, int64_t want,
                                  int64_t *done);
/* With the ledger row locked: count the pool's units. */
RSV_HIDDEN int ledger_pool_count(rsv_ctx *ctx, uint64_t shop,
                                 const ledger_row *lv, int64_t *count);
/* With the ledger row locked: the units its pool has room for, up to its
 * cap (the `taken` units this transaction took from it still count as
 * there, so they are subtracted), within `left`, what the ledger may still
 * issue; 0 without a read when that is nothing. */
RSV_HIDDEN int ledger_pool_room(rsv_ctx *ctx, uint64_t shop,
                                const ledger_row *lv, int64_t taken,
                                int64_t left, int64_t *room);
/* With the ledger row locked: mint `units` pool units (in rows of
 * ledger_cap / 100 units, at least 1) and issue `direct` units straight to
 * holds (lv is updated). */
RSV_HIDDEN int ledger_issue(rsv_ctx *ctx, uint64_t shop, ledger_row *lv,
                            int64_t units, int64_t direct);
/* Refill a pool in its own transaction; skip: do not wait for another
 * transaction holding the ledger row (a refiller already at work, or a
 * reserve procedure taking units from it), and then set *skipped (if not
 * NULL).  *added gets the units added. */
RSV_HIDDEN int ledger_refill(rsv_ctx *ctx, uint64_t shop, uint64_t item,
                             uint64_t loc, int skip, int64_t *added,
                             int *skipped);
RSV_HIDDEN int64_t ledger_cap(const rsv_ctx *ctx, const ledger_row *lv);
/* RSV_ENOITEM with the one message for a key that has no ledger row. */
RSV_HIDDEN int ledger_no_row(rsv_ctx *ctx, uint64_t shop, uint64_t item,
                             uint64_t loc);

/* ---- ledger_seen.c: ledger rows this context has seen exist ---- */
RSV_HIDDEN void ledger_seen_note(rsv_ctx *ctx, uint64_t shop, uint64_t item,
                                 uint64_t loc);
RSV_HIDDEN int ledger_seen(const rsv_ctx *ctx, uint64_t shop, uint64_t item,
                           uint64_t loc);

/* ---- pool_cursor.c: what this context last saw of each pool ---- */
/* Where this context's next fast-path read of the pool starts (0: the
 * bottom). */
RSV_HIDDEN uint64_t pool_cursor_start(rsv_ctx *ctx, uint64_t shop,
                                      uint64_t item, uint64_t loc);
/* After a fast-path read from start that returned ids first..last (0 if
 * none) and saw next_unit_id next_id and on_hand - issued avail (next_id
 * 0: the ledger row was not read): move the cursor. */
RSV_HIDDEN void pool_cursor_note(rsv_ctx *ctx, uint64_t shop, uint64_t item,
                                 uint64_t loc, uint64_t next_id, int64_t avail,
                                 uint64_t start, uint64_t first_id,
                                 uint64_t last_id);
/* Whether the ledger had units left to refill this pool with, when this
 * context last read it (1 if it does not know). */
RSV_HIDDEN int pool_cursor_may_refill(rsv_ctx *ctx, uint64_t shop,
                                      uint64_t item, uint64_t loc);
/* Remember whether a consistent read last found this pool sold out, and
 * ask (a hint only: the read decides). */
RSV_HIDDEN void pool_cursor_sold_out(rsv_ctx *ctx, uint64_t shop,
                                     uint64_t item, uint64_t loc, int yes);
RSV_HIDDEN int pool_cursor_was_sold_out(rsv_ctx *ctx, uint64_t shop,
                                        uint64_t item, uint64_t loc);
/* After a committed reserve: whether to top this pool up now (REFILL_YES),
 * not (REFILL_NO), or if a count of its rows finds fewer than
 * refill_low_water (REFILL_COUNT: the caller counts). */
enum { REFILL_NO, REFILL_YES, REFILL_COUNT };
RSV_HIDDEN int pool_refill_due(rsv_ctx *ctx, uint64_t shop, uint64_t item,
                               uint64_t loc, uint64_t start, uint64_t next_id,
                               uint64_t first_id, int64_t taken,
                               int was_short);
/* Whether a top-up that found the ledger row held is still to be done
 * (see pool_refill_done): the next reserve procedure does it if it gets
 * the row. */
RSV_HIDDEN int pool_refill_pending(rsv_ctx *ctx, uint64_t shop, uint64_t item,
                                   uint64_t loc);
/* After a top-up (a transaction of its own, or inside a reserve
 * procedure): whether it found the ledger row held by another transaction
 * and did nothing, so that it is still pending. */
RSV_HIDDEN void pool_refill_done(rsv_ctx *ctx, uint64_t shop, uint64_t item,
                                 uint64_t loc, int skipped);

/* ================= layer 5: engine ================= */
/* (the reserve's own files share reserve_job.h) */

/* ---- checkout.c: claims, releases, extensions, status ---- */
/* Move the checkout's remaining holds to the settlement journal as `kind`
 * and delete them.  Checkout row must be locked. */
RSV_HIDDEN int holds_settle(rsv_ctx *ctx, uint64_t shop, const void *token,
                            size_t len, uint32_t generation, int kind);
/* The code (and message) of a claim (kind ST_CLAIMED) or release
 * (ST_RELEASED) from what a settle procedure answered: found, the status
 * before, hold_count, the holds still there, what it did. */
RSV_HIDDEN int settle_answer_code(rsv_ctx *ctx, int kind, uint64_t shop,
                                  int found, int status, int64_t hold_count,
                                  int64_t holds, int64_t done);

/* ---- pool_drain.c: giving pools back to the ledger ---- */
/* rsv_sweep's pass over idle pools: drain the pools of the shop's keys
 * whose ledger row has not changed for opts.pool_idle_s seconds (up to
 * 1,024 keys per call), counting the rows in RSV_STAT_POOL_DRAINED. */
RSV_HIDDEN int pool_drain_idle(rsv_ctx *ctx, uint64_t shop);

/* ================= layer 6: batch (batch_call.h) ================= */

/* ================= layer 7: surface ================= */

/* ---- connect.c: connections a context opens itself ---- */
/* Parse dsn, keep it in ctx for rsv_reconnect, connect: RSV_OK with *out
 * the new connection, or the code (message set). */
RSV_HIDDEN int conn_open_dsn(rsv_ctx *ctx, const char *dsn, MYSQL **out);
/* Close the connection if the context opened it, and forget how. */
RSV_HIDDEN void conn_release(rsv_ctx *ctx);

/* ---- stats_export.c: snapshots and Prometheus text ---- */
/* Add b into a as snapshots add up: sums, the slowest call a maximum
 */
RSV_HIDDEN void stats_merge(ctx_stats *a, const ctx_stats *b);
/* Add one context's statistics, copied earlier, to a snapshot (for the
 * batcher, whose contexts belong to its workers). */
RSV_HIDDEN void stats_snapshot_add_copy(rsv_stats_snapshot *snap,
                                        const ctx_stats *s);

#endif /* RSV_INTERNAL_H */
