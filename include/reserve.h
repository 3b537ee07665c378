/*
 * reserve.h - libreserve public API.
 *
 * libreserve keeps a shop from selling the same unit twice. It holds the
 * units of a cart while the buyer pays (reserve), takes them off the stock
 * ledger when payment succeeds (claim), puts them back when it fails
 * (release), and lets unclaimed holds expire. Every step is one local
 * transaction on the application's own MariaDB/MySQL connection, so a crash
 * at any point leaves either the old state or the new one, never a mix.
 *
 * Conventions (the same for every function below):
 *
 *  - Return codes.  Functions return an int: RSV_OK (0) on success, a
 *    negative RSV_E* code otherwise.  Some negative codes are *expected
 *    outcomes* a checkout handles as business logic (RSV_EOUTOFSTOCK,
 *    RSV_EEXPIRED, RSV_ECLAIMED, ...); the others are failures.
 *    rsv_strerror() names any code; rsv_errmsg() gives the detailed message
 *    of the last failing call on a context.  While a context is switched
 *    off with rsv_set_enabled(), every function that writes returns
 *    RSV_EDISABLED instead (the lists of codes below leave it out).
 *
 *  - Ownership.  Every object the library returns (rsv_ctx, rsv_cart) is
 *    freed by its matching function (rsv_close, rsv_cart_free); passing NULL
 *    to those is a no-op.  Strings and buffers passed in are copied if kept;
 *    the caller keeps ownership.  Strings returned are owned by the library
 *    (see each function for how long they stay valid).
 *
 *  - Threads.  There is no global state and no global initialisation.  A
 *    context is bound to one MYSQL connection; use one context per
 *    connection, and never use a context (or its connection) from two
 *    threads at the same time.  Different contexts may be used concurrently
 *    from different threads.  A cart belongs to one thread at a time.  A
 *    context that has used the non-blocking interface (rsv_*_start) keeps
 *    one worker thread of its own, asleep between calls, until
 *    rsv_close().
 *
 *  - The connection.  A connection is MariaDB Connector/C's MYSQL handle
 *    (struct st_mysql); this header only names the struct, so a program
 *    that opens its connections with rsv_open_dsn() needs no <mysql.h>.
 *    The library never closes the connection and never changes its
 *    session variables or leaves a user variable in it: the isolation
 *    level and access mode are set per transaction (SET TRANSACTION ...
 *    READ COMMITTED, then START TRANSACTION READ WRITE), COMMIT and
 *    ROLLBACK say AND NO CHAIN NO RELEASE, every result is drained before
 *    a function returns, and on return no transaction the library opened
 *    is left open.  So every
 *    function behaves the same whatever autocommit, isolation level,
 *    completion_type, sql_mode, lock wait or read-only mode the session
 *    has.  Close the context before closing the connection.
 *
 *  - The caller's transaction.  A function called while the session is
 *    inside a transaction (@@in_transaction = 1: after START TRANSACTION
 *    or BEGIN, or, with autocommit off, after any statement that read or
 *    wrote a table since the last COMMIT or ROLLBACK) does one of two
 *    things.  rsv_claim(), rsv_release() and rsv_extend() join it: their
 *    changes commit or roll back with the caller's, who must COMMIT.  The
 *    reads rsv_checkout_status() and rsv_stock_get() read inside it, with
 *    its snapshot and isolation.  Every other function refuses with
 *    RSV_EINTXN and changes nothing.  Outside a transaction every function
 *    commits its own work before it returns.
 *
 *  - Reconnecting.  After RSV_ECONN or RSV_EINDOUBT the connection is gone;
 *    the library never reconnects and never sends a statement again by
 *    itself.  Call rsv_reconnect(ctx) and keep the context: it reconnects
 *    the same MYSQL handle in place (or, for a context of rsv_open_dsn,
 *    opens its own connection again), checks the schema again and
 *    prepares its statements again on first use.  Then repeat the call:
 *    every call is idempotent by its token.  An application may instead
 *    reconnect the handle itself (mysql_close() + mysql_init() +
 *    mysql_real_connect() in place): the context notices the new session.
 *    A different MYSQL handle needs a new context.  After RSV_ENOTPRIMARY
 *    the server takes no writes (a replica, a Galera node outside the
 *    primary component): connect to the one that does; a context from
 *    rsv_open_dsn() with several hosts finds it in rsv_reconnect().
 *
 *  - Interfaces by audience.  This header is the core alone: contexts,
 *    carts, the hold lifecycle, stock, audit, the callback.  Include what
 *    else you use: <reserve/async.h> (non-blocking calls for event
 *    loops), <reserve/batch.h> (many checkouts per call, and the batcher
 *    for multi-threaded servers), <reserve/stats.h> (counters, snapshots,
 *    Prometheus text); each includes this one.  reserve(3) has the table
 *    of which operation has which entry point.

 *
 *  - Identifiers.  shop_id, item_id (inventory item) and location_id
 *    (inventory group) are unsigned 64-bit integers chosen by the
 *    application.  A checkout token is an opaque byte string of
 *    1..RSV_TOKEN_MAX bytes; it is stored byte-exact (VARBINARY), so quotes,
 *    backslashes and NUL bytes are all fine and no collation can make two
 *    different tokens equal.
 *
 *  - FFI.  Only fixed-width integers, size_t, pointers and plain functions:
 *    no varargs, no struct passed by value, nothing reachable only through a
 *    macro.  The version and options constants also have functions.
 *
 * See reserve(3) and the per-function man pages for a longer description,
 * and sql/schema.sql for the tables the library works on.
 */
#ifndef RESERVE_H
#define RESERVE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define RSV_EXTERN __declspec(dllimport)
#elif defined(__GNUC__) || defined(__clang__)
#define RSV_EXTERN __attribute__((visibility("default")))
#else
#define RSV_EXTERN
#endif

/* ------------------------------------------------------------------ */
/* Version                                                            */
/* ------------------------------------------------------------------ */

#define RSV_VERSION_MAJOR 0
#define RSV_VERSION_MINOR 1
#define RSV_VERSION_PATCH 0
#define RSV_VERSION "0.1.0"
/* MAJOR * 10000 + MINOR * 100 + PATCH */
#define RSV_VERSION_NUMBER 100
/* The version of the database schema (sql/schema.sql, table rsv_schema)
 * this library works on; see rsv_open() and RSV_ESCHEMAVER. */
#define RSV_SCHEMA_VERSION 3

/* The version of the library actually loaded, e.g. "0.1.0".  Static
 * string, never freed.  Compare with RSV_VERSION to detect a header/library
 * mismatch. */
RSV_EXTERN const char *rsv_version(void);

/* The loaded library's version as MAJOR * 10000 + MINOR * 100 + PATCH. */
RSV_EXTERN int rsv_version_number(void);

/* The schema version the loaded library works on (RSV_SCHEMA_VERSION of
 * the header it was built with). */
RSV_EXTERN int rsv_schema_version(void);

/* The stored procedures of that schema version which the loaded library
 * calls, directly or through each other: index 0, 1, ... name one each
 * (static strings), and the first index past the last gives NULL.  A
 * database without them works the same, with more round trips per call
 * (see rsv_open); `rsv-admin schema status` reports which are missing. */
RSV_EXTERN const char *rsv_schema_procedure(size_t index);

/* ------------------------------------------------------------------ */
/* Return codes                                                       */
/* ------------------------------------------------------------------ */

enum rsv_code {
    RSV_OK = 0,
    RSV_PENDING = 1,       /* not an error: a non-blocking call is in
                              progress (rsv_*_start, rsv_cont; see "The
                              non-blocking interface") */

    /* Expected outcomes. */
    RSV_EOUTOFSTOCK = -1,  /* a cart line cannot be covered: the committed
                              state has fewer reservable units than asked
                              (rsv_cart_failed_line() says which line) */
    RSV_ENOTFOUND = -2,    /* no such checkout */
    RSV_EEXPIRED = -3,     /* the checkout's hold expired and (part of) its
                              units were given back; nothing was claimed */
    RSV_ECLAIMED = -4,     /* the checkout was already claimed: a retried
                              claim lands here and takes nothing again */
    RSV_ERELEASED = -5,    /* the checkout was released; nothing claimed */
    RSV_EBUSY = -6,        /* deadlocks or lock-wait timeouts persisted
                              through every retry, or the call's time
                              budget (call_timeout_ms) was spent; nothing
                              was applied */
    RSV_EINDOUBT = -7,     /* the connection was lost during COMMIT, or
                              COMMIT did not answer within the call's
                              budget (the library closed the connection),
                              or, on a Galera node, COMMIT or a procedure
                              that commits failed with an error other
                              than a conflict: the outcome is unknown.
                              Reconnect and repeat the same call; every
                              call is idempotent for the same token (a
                              repeated claim then returns RSV_OK or
                              RSV_ECLAIMED, never takes twice) */

    /* Failures. */
    RSV_ECONN = -8,        /* no connection, or it was lost before COMMIT
                              was sent: nothing was applied */
    RSV_EINVAL = -10,      /* a NULL pointer or an invalid argument */
    RSV_EQUANTITY = -11,   /* a quantity is zero, negative or too large */
    RSV_EEMPTY = -12,      /* the cart has no lines */
    RSV_ETOKEN = -13,      /* the checkout token is empty or longer than
                              RSV_TOKEN_MAX bytes */
    RSV_ENOITEM = -14,     /* an item/location has no stock ledger row
                              (set its stock first with rsv_stock_set) */
    RSV_ESCHEMA = -15,     /* the libreserve tables are missing or wrong;
                              the message names the table */
    RSV_ESERVER = -16,     /* the server is unsupported: no SKIP LOCKED
                              (MariaDB < 10.6, MySQL < 8.0.16) or binary
                              logging with binlog_format=STATEMENT */
    RSV_EINTXN = -17,      /* the caller is inside a transaction and this
                              function needs its own */
    RSV_ENOMEM = -18,      /* out of memory */
    RSV_EDB = -19,         /* any other database error (message has the
                              server's errno and text) */
    RSV_ETOOBIG = -20,     /* the cart has more than RSV_CART_MAX_LINES lines
                              or a line more than RSV_LINE_MAX_LOCATIONS
                              locations, or (rsv_reserve) it names more
                              than 1000 distinct item/location pairs */
    RSV_ESTOCK = -21,      /* the stock change would leave less stock than
                              is held by active checkouts, or below zero */
    RSV_ECONFIG = -22,     /* the connection is configured in a way the
                              library cannot use safely (auto-reconnect),
                              or an option the server cannot honour */
    RSV_ERANGE = -23,      /* index out of range / buffer too small */
    RSV_EDISABLED = -24,   /* the context is switched off with
                              rsv_set_enabled(ctx, 0): the call did nothing
                              and sent nothing to the server */
    RSV_ESCHEMAVER = -25,  /* rsv_open: the database's schema version is
                              older than this library needs (upgrade the
                              schema first) or newer than it knows
                              (upgrade the library); the message names the
                              command */
    RSV_ECANCELED = -26,   /* a non-blocking call was stopped by
                              rsv_cancel() before or between its attempts:
                              nothing was applied */
    RSV_ENOTPRIMARY = -27  /* the server does not take writes now: it is
                              read-only (a replica), or a Galera node
                              outside the primary component (partitioned
                              away, joining).  It refused the call before
                              anything was applied.  Reconnect to the
                              writable server and repeat the call: with a
                              dsn of several hosts rsv_reconnect() finds
                              it */
};

/* Limits of a single call. */
#define RSV_TOKEN_MAX 128
#define RSV_QUANTITY_MAX 1000000000
#define RSV_CART_MAX_LINES 1000
#define RSV_LINE_MAX_LOCATIONS 16

/* A short static description of a code ("out of stock", ...).  Never NULL:
 * unknown codes give "unknown error code". */
RSV_EXTERN const char *rsv_strerror(int code);

/* The symbolic name of a code ("RSV_EOUTOFSTOCK", ...); NULL if unknown. */
RSV_EXTERN const char *rsv_code_name(int code);

/* ------------------------------------------------------------------ */
/* Options                                                            */
/* ------------------------------------------------------------------ */

#define RSV_OPTIONS_VERSION 1

/* Flags for rsv_options.flags. */
#define RSV_OPT_NO_PROACTIVE_REFILL 0x2u /* only refill a pool when a
                                            reserve finds it short */
/* Never acknowledge what only the primary has.  On a primary whose
 * semi-synchronous replication is enabled but has fallen back to
 * asynchronous (no replica acknowledged within
 * rpl_semi_sync_master_timeout: Rpl_semi_sync_master_status OFF), a
 * failover loses what it commits.  With this flag every call that writes
 * reads that status after its transaction, one more round trip, and
 * answers RSV_EINDOUBT instead of its outcome while it is OFF: repeat the
 * call (it is idempotent), after a failover on the new primary, where the
 * outcome is then either found or applied again.  A server with
 * semi-synchronous replication switched off (a primary promoted with no
 * replica yet) is taken as the operator's choice and passes.  rsv_open
 * answers RSV_ECONFIG on a server without these variables (MariaDB has
 * them). */
#define RSV_OPT_REPLICA_ACK 0x10u

/*
 * Context options.  Always initialise with rsv_options_init() and then
 * change the fields you need: new fields are only ever appended, and the
 * version field tells the library which of them the caller knows about,
 * so a program built with an older header keeps working with a newer
 * library (which then uses the defaults for the fields it lacks).
 */
typedef struct rsv_options {
    unsigned int version;       /* RSV_OPTIONS_VERSION */
    uint32_t flags;             /* RSV_OPT_* */
    int64_t pool_cap;           /* max units kept as rows per item and
                                   location (1..10000, default 1000); a
                                   ledger row's own pool_cap wins */
    int64_t refill_low_water;   /* refill a pool ahead of demand once fewer
                                   than this many rows are left (0..pool_cap,
                                   or -1 = pool_cap * 3 / 4, the
                                   default) */
    int64_t hold_ttl_ms;        /* default hold lifetime (1 ms..30 days,
                                   default 600000) */
    int32_t max_retries;        /* deadlock / lock-wait retries (0..100,
                                   default 8) */
    int32_t retry_base_us;      /* first backoff, doubled per retry, with
                                   jitter (1..1000000, default 2000) */
    int32_t lock_wait_timeout_s;/* innodb_lock_wait_timeout for the
                                   library's own statements on MariaDB
                                   (1..3600); 0 = the session's value (the
                                   default), or with call_timeout_ms set a
                                   quarter of it (whole seconds, at least
                                   1), whichever is less */
    const char *conn_tag_prefix;/* statement comment prefix, copied; NULL =
                                   "conn_tag:" (gives "/" "* conn_tag:reserve
                                   *" "/"); at most 32 characters of
                                   [A-Za-z0-9_:.-] */
    int64_t settled_retention_s;/* how long claimed/released checkouts are
                                   kept for idempotent retries before
                                   rsv_sweep() purges them (>= 0, default
                                   604800) */
    int64_t pool_idle_s;        /* rsv_sweep() gives a pool's rows back to
                                   its ledger row once that row has not
                                   changed for this many seconds (no
                                   reserve took units from it, no refill,
                                   no stock change), so a pool made for a
                                   sale does not outlive it (0 = never,
                                   0..30 days, default 3600); see also
                                   rsv_pool_drain() */
    int64_t call_timeout_ms;    /* the time budget of one call (0 = none,
                                   0..3600000, default 5000): no attempt
                                   of a transaction starts after it, so a
                                   call stuck behind another session's row
                                   locks answers RSV_EBUSY, having applied
                                   nothing, once it is spent (plus at most
                                   the statement's lock wait, see
                                   lock_wait_timeout_s) instead of after
                                   (max_retries + 1) lock waits.  A COMMIT
                                   (or a procedure that commits) still
                                   unanswered when it is spent, and at
                                   least one lock wait and a second after
                                   it was sent (a procedure's own lock
                                   waits end first), waits no longer: it stalls on
                                   replication (a Galera cluster evicting
                                   a silent node, a semi-synchronous
                                   replica gone), and answers RSV_EINDOUBT,
                                   the connection closed (reconnect).  Any
                                   other statement the server has not
                                   answered a second after the lock wait
                                   that follows the budget answers
                                   RSV_ECONN.  Not over TLS (some
                                   Connector/C versions keep their own
                                   timeout there: set read_timeout).
                                   rsv_audit() has no budget */
    int32_t stmt_cache_max;     /* prepared statements one context keeps
                                   on the server (1..48, default 48):
                                   max_prepared_stmt_count must allow
                                   contexts x this; a context that finds
                                   the server full closes its own least
                                   recently used ones and goes on */
} rsv_options;

/* Fill *opts with the defaults for the given version (pass
 * RSV_OPTIONS_VERSION); only that version's fields are written.  Returns
 * RSV_OK, or RSV_EINVAL for NULL or an unknown version. */
RSV_EXTERN int rsv_options_init(rsv_options *opts, unsigned int version);

/* sizeof(rsv_options) of the loaded library, for bindings. */
RSV_EXTERN size_t rsv_options_size(void);

/* ------------------------------------------------------------------ */
/* Context                                                            */
/* ------------------------------------------------------------------ */

typedef struct rsv_ctx rsv_ctx;

/* MYSQL of <mysql.h> (MariaDB Connector/C). */
struct st_mysql;

/* The batcher (reserve/batch.h): many threads' calls on a few
 * connections. */
typedef struct rsv_batcher rsv_batcher;

/*
 * Open a context on an established connection.
 *
 * Checks the server (SKIP LOCKED support, binlog format), that the schema
 * is loaded in the connection's current database at the version this
 * library needs (RSV_ESCHEMAVER), whether it has the procedures (without
 * them every call works, with more round trips), and that the connection
 * does not auto-reconnect.  On a Galera node (wsrep_on) the library checks
 * after each statement it sends inside its transactions that the server
 * has not rolled the transaction back for a conflicting write set without
 * saying so (it then runs it again); the procedures, whose statements the
 * server keeps all or nothing, are used there as everywhere.  On success
 * *out owns a new context; the connection stays owned by the caller and
 * must outlive the context.
 * On failure *out is NULL unless the failure was detected after the
 * context was allocated, in which case *out is still set so rsv_errmsg()
 * can explain; close it with rsv_close() either way.
 *
 * opts may be NULL for defaults; it is copied.
 *
 * Returns RSV_OK, RSV_EINVAL (NULL out/conn, bad option), RSV_ENOMEM,
 * RSV_ECONN (not connected), RSV_EBUSY (a lock conflict in the checks; no
 * retry), RSV_ESERVER, RSV_ESCHEMA, RSV_ESCHEMAVER, RSV_ECONFIG, RSV_EDB.
 */
RSV_EXTERN int rsv_open(rsv_ctx **out, struct st_mysql *conn,
                         const rsv_options *opts);

/*
 * Open a context on a connection of its own, for callers that have no
 * MYSQL* to lend (bindings over FFI; a claim that must join the
 * application's own transaction needs rsv_open on that connection).  dsn:
 *
 *   mariadb://[USER[:PASSWORD]@][HOST[:PORT][,HOST[:PORT]...]][/DATABASE]
 *             [?KEY=VALUE&...]
 *
 * ("mysql://" is the same), with %XX escapes in every part.  Keys: socket
 * (a Unix socket path; also the way to name one without a HOST),
 * connect_timeout, read_timeout, write_timeout (seconds; a read timeout
 * bounds a call to a server that stopped answering: the connection is
 * then lost, RSV_ECONN or RSV_EINDOUBT), ssl (1: require TLS), ssl_ca,
 * ssl_capath, ssl_cert, ssl_key, ssl_verify (1: verify the server's
 * certificate and name), target (below).  Unknown keys are refused.
 *
 * Several hosts (up to 16; a replicated pair, a Galera cluster's nodes)
 * are tried in the order given, as libpq does, and the context connects
 * to the first that answers and is what target asks for: "writable" (the
 * default) is a server that is not read-only and, on a Galera node, is
 * ready, synced and in the primary component; "any" takes the first that
 * answers (to read a replica).  rsv_reconnect() goes through the list
 * again from its start, so after a failover, or a node's loss or
 * partition, the same dsn finds the server that now takes writes.  With
 * several hosts connect_timeout defaults to 5 s per host.
 *
 * The connection belongs to the context: rsv_close() closes it and
 * rsv_reconnect() opens it again.  Codes and *out as rsv_open(), plus
 * RSV_EINVAL for a malformed dsn (a bad host or port in the list names
 * it; a socket with several hosts), RSV_ECONN when no host can be
 * reached and RSV_ENOTPRIMARY when a host answered but none takes writes
 * (the message names every host and why it was passed over).
 */
RSV_EXTERN int rsv_open_dsn(rsv_ctx **out, const char *dsn,
                            const rsv_options *opts);

/*
 * Connect again after RSV_ECONN, RSV_EINDOUBT or RSV_ENOTPRIMARY (then
 * repeat the call: it is idempotent for the same token).  A context from
 * rsv_open_dsn() closes its connection and opens a new one with the same
 * dsn, to the first of its hosts that takes writes (rsv_connection() then
 * returns the new handle); one from rsv_open() asks Connector/C to
 * reconnect the application's handle in place (mariadb_reconnect, with
 * auto-reconnect switched on only for that call), to the same server.
 * The prepared statements are prepared again on first use.  Returns
 * RSV_OK, RSV_EINVAL (NULL), or RSV_ECONN or RSV_ENOTPRIMARY with the
 * reason, as rsv_open_dsn().
 */
RSV_EXTERN int rsv_reconnect(rsv_ctx *ctx);

/* Free a context and its prepared statements.  Closes the connection only
 * if the context opened it (rsv_open_dsn).  A non-blocking call still
 * pending is canceled first (see rsv_cancel) and its worker thread
 * joined.  NULL is a no-op. */
RSV_EXTERN void rsv_close(rsv_ctx *ctx);

/* The message of the last failing call on ctx ("" after a success).  The
 * string is owned by ctx and valid until the next call on it.  NULL ctx
 * gives a static message. */
RSV_EXTERN const char *rsv_errmsg(const rsv_ctx *ctx);

/* The code of the last call on ctx (RSV_OK after a success). */
RSV_EXTERN int rsv_errcode(const rsv_ctx *ctx);

/* The connection the context is bound to. */
RSV_EXTERN struct st_mysql *rsv_connection(const rsv_ctx *ctx);

/* ------------------------------------------------------------------ */
/* Carts                                                              */
/* ------------------------------------------------------------------ */

typedef struct rsv_cart rsv_cart;

/* Flags for rsv_cart_add(). */
#define RSV_LINE_SPLIT 0x1u  /* the line may be served by several of its
                                locations, taken in the given order */

/* A new empty cart.  Returns RSV_OK or RSV_EINVAL / RSV_ENOMEM. */
RSV_EXTERN int rsv_cart_new(rsv_cart **out);

/* Free a cart.  NULL is a no-op. */
RSV_EXTERN void rsv_cart_free(rsv_cart *cart);

/* Remove all lines (keeps the allocated memory). */
RSV_EXTERN void rsv_cart_clear(rsv_cart *cart);

/*
 * Append a line: quantity units of item_id from the locations listed in
 * location_ids, in order of preference (copied).  Without RSV_LINE_SPLIT
 * the whole line is held at the first location that can cover it; with it,
 * units are taken from the locations in order until the line is covered.
 * The same item may appear on several lines.
 *
 * Returns RSV_OK, RSV_EINVAL (NULL cart/locations, no location, a
 * location listed twice, unknown flag), RSV_EQUANTITY (quantity < 1 or >
 * RSV_QUANTITY_MAX), RSV_ETOOBIG, RSV_ENOMEM.  A failed add leaves the cart
 * unchanged.
 */
RSV_EXTERN int rsv_cart_add(rsv_cart *cart, uint64_t item_id,
                            const uint64_t *location_ids, size_t n_locations,
                            int64_t quantity, uint32_t flags);

/* Number of lines in the cart. */
RSV_EXTERN size_t rsv_cart_lines(const rsv_cart *cart);

/*
 * After a successful rsv_reserve(): how line `line` was allocated.
 * *count_out receives the number of locations holding units for the line.
 * Returns RSV_OK or RSV_ERANGE / RSV_EINVAL.
 */
RSV_EXTERN int rsv_cart_allocation_count(const rsv_cart *cart, size_t line,
                                         size_t *count_out);

/* The idx-th (location, quantity) pair holding units for `line`, in the
 * line's order of preference.  Returns RSV_OK or RSV_ERANGE / RSV_EINVAL. */
RSV_EXTERN int rsv_cart_allocation(const rsv_cart *cart, size_t line,
                                   size_t idx, uint64_t *location_out,
                                   int64_t *quantity_out);

/* After rsv_reserve() returned RSV_EOUTOFSTOCK or RSV_ENOITEM: the index of
 * the line that could not be served; (size_t)-1 otherwise. */
RSV_EXTERN size_t rsv_cart_failed_line(const rsv_cart *cart);

/* ------------------------------------------------------------------ */
/* The hold lifecycle                                                 */
/* ------------------------------------------------------------------ */

/*
 * Hold every line of the cart for the checkout `token` of shop `shop_id`,
 * all or nothing, for ttl_ms milliseconds (0 = the context default).
 *
 * If the checkout already holds units (the cart changed), its old holds are
 * released and the new cart held in the same transaction.  Runs its own
 * READ COMMITTED transaction and retries deadlocks/lock waits; the caller
 * must not be inside a transaction.  "Out of stock" is only answered when
 * the committed state has fewer reservable units than the line asks for:
 * units held by checkouts still in flight are waited for, and an empty pool
 * is refilled from the ledger first.  On success the cart's allocation
 * functions say where each line is held.
 *
 * A new checkout is reserved in one round trip when the schema's
 * procedures are loaded (sql/schema.sql; RSV_STAT_ONE_TRIP counts these)
 * and every line can be held at the first location it names, for up to
 * 32 (item, location) pairs and 64 units: the same statements and
 * transaction, run by the server.  There a key's units come straight
 * from its ledger row when no other transaction holds that row and it
 * covers the key (RSV_STAT_LEDGER_TAKES), else from the pool, without
 * waiting for the row.  Since that one statement also commits, a
 * connection lost after it was sent gives RSV_EINDOUBT (repeat the
 * call), never RSV_ECONN.  Everything else (re-reserves, a line whose
 * first location is short, bigger carts), or a schema without the
 * procedures, sends the statements one by one.
 *
 * Returns RSV_OK; expected: RSV_EOUTOFSTOCK, RSV_ECLAIMED (the token was
 * already claimed), RSV_EBUSY, RSV_EINDOUBT; failures: RSV_EINVAL,
 * RSV_ETOKEN, RSV_EEMPTY, RSV_EQUANTITY (ttl_ms negative or above 30
 * days), RSV_ETOOBIG (the cart names more than 1000 distinct
 * item/location pairs), RSV_ENOITEM, RSV_EINTXN, RSV_ESCHEMA, RSV_ECONN, RSV_EDB,
 * RSV_ENOMEM.  On any code but RSV_OK and RSV_EINDOUBT nothing changed in
 * the database.
 */
RSV_EXTERN int rsv_reserve(rsv_ctx *ctx, uint64_t shop_id, const void *token,
                           size_t token_len, rsv_cart *cart, int64_t ttl_ms);

/* One-line convenience for rsv_reserve(): quantity units of item_id at one
 * location.  Same codes. */
RSV_EXTERN int rsv_reserve_one(rsv_ctx *ctx, uint64_t shop_id,
                               const void *token, size_t token_len,
                               uint64_t item_id, uint64_t location_id,
                               int64_t quantity, int64_t ttl_ms);

/*
 * Payment succeeded: take the checkout's held units off the ledger for
 * good.  Idempotent: a claim repeated after it committed (e.g. after
 * RSV_EINDOUBT) returns RSV_ECLAIMED and takes nothing.  A hold whose
 * deadline passed but whose units were not yet given back is still claimed.
 *
 * If the caller is inside its own transaction the claim joins it (so an
 * order row and the claim commit or roll back together): the library then
 * neither commits nor rolls back, and does not retry; on RSV_EBUSY the
 * caller must roll back.  Otherwise it runs its own READ COMMITTED
 * transaction: in one round trip (a procedure of the schema, which
 * commits on the server) when the schema has it, else
 * by statements.
 *
 * Returns RSV_OK; expected: RSV_ECLAIMED, RSV_EEXPIRED (the units were
 * given back; any remaining lines are released in the same transaction),
 * RSV_ERELEASED, RSV_ENOTFOUND, RSV_EBUSY, RSV_EINDOUBT; failures:
 * RSV_EINVAL, RSV_ETOKEN, RSV_ESCHEMA, RSV_ECONN, RSV_EDB.
 */
RSV_EXTERN int rsv_claim(rsv_ctx *ctx, uint64_t shop_id, const void *token,
                         size_t token_len);

/*
 * Payment failed or the buyer left: give the checkout's units back.
 * Idempotent: releasing a released or expired checkout returns RSV_OK.
 * Joins the caller's transaction like rsv_claim().
 *
 * Returns RSV_OK; expected: RSV_ECLAIMED (cannot release a claimed
 * checkout), RSV_ENOTFOUND, RSV_EBUSY, RSV_EINDOUBT; failures as rsv_claim.
 */
RSV_EXTERN int rsv_release(rsv_ctx *ctx, uint64_t shop_id, const void *token,
                           size_t token_len);

/*
 * Push the checkout's deadline to now + ttl_ms (0 = context default).
 * Returns RSV_OK; RSV_EEXPIRED if units were already given back,
 * RSV_ECLAIMED, RSV_ERELEASED, RSV_ENOTFOUND, and the failures of
 * rsv_claim (plus RSV_EQUANTITY for a bad ttl_ms).
 */
RSV_EXTERN int rsv_extend(rsv_ctx *ctx, uint64_t shop_id, const void *token,
                          size_t token_len, int64_t ttl_ms);

/* Status values for rsv_checkout_status(). */
#define RSV_STATUS_HELD 1
#define RSV_STATUS_CLAIMED 2
#define RSV_STATUS_RELEASED 3
#define RSV_STATUS_EXPIRED 4

/*
 * Read a checkout's state without locking: *status_out is one of
 * RSV_STATUS_*, *units_out the units it holds now (NULL to skip), and
 * *expires_in_ms_out the time to its deadline (negative once passed, 0
 * for a claimed or released checkout; NULL to skip).  A held checkout
 * whose deadline passed reports RSV_STATUS_EXPIRED.  Returns RSV_OK, RSV_ENOTFOUND, and the failures of
 * rsv_claim.
 */
RSV_EXTERN int rsv_checkout_status(rsv_ctx *ctx, uint64_t shop_id,
                                   const void *token, size_t token_len,
                                   int32_t *status_out, int64_t *units_out,
                                   int64_t *expires_in_ms_out);

/* ------------------------------------------------------------------ */
/* Pools, expiry and stock                                            */
/* ------------------------------------------------------------------ */

/*
 * Top the pool of (item, location) up from the ledger to its cap, after
 * folding settled checkouts into the ledger and giving back the units of
 * expired holds.  Concurrent replenishers serialize on the ledger row, so
 * together they never add more than the ledger allows.  *added_out (may be
 * NULL) receives the number of units added.
 * Returns RSV_OK, RSV_ENOITEM, RSV_EINTXN, RSV_EBUSY, RSV_EINDOUBT and the
 * usual failures.
 */
RSV_EXTERN int rsv_replenish(rsv_ctx *ctx, uint64_t shop_id, uint64_t item_id,
                             uint64_t location_id, int64_t *added_out);

/*
 * Give the pool of (item, location) back to its ledger row: delete its
 * rows and lower the units issued by their units, in one transaction.  For
 * an item whose sale is over, or one that should not be pooled until
 * buyers contend for it again (the next refill makes a new pool; the
 * stock a buyer can reserve does not change).  Rows that reserves in
 * flight are taking are left to them.  rsv_sweep() does the same for
 * pools left idle for rsv_options.pool_idle_s.  *units_out (may be NULL)
 * receives the units given back; they are also counted in
 * RSV_STAT_POOL_DRAINED.  Waits for the ledger row like rsv_replenish().
 * Returns RSV_OK, RSV_ENOITEM, RSV_EINTXN, RSV_EBUSY, RSV_EINDOUBT,
 * RSV_EDISABLED and the usual failures.
 */
RSV_EXTERN int rsv_pool_drain(rsv_ctx *ctx, uint64_t shop_id, uint64_t item_id,
                              uint64_t location_id, int64_t *units_out);

/*
 * Give back the units of expired holds of one shop, up to max_holds holds
 * (0 = 10000) in batches, drain the pools whose ledger row has not changed
 * for rsv_options.pool_idle_s (as rsv_pool_drain() does; up to 1,024 keys
 * per call), and purge claimed/released checkouts older than the
 * retention.  Uses SKIP LOCKED throughout: safe to run from many
 * processes at once, and never waits for a checkout in progress.
 * *released_out (may be NULL) receives the number of holds given back.
 * Expired capacity also comes back without any sweeper, at the next refill
 * of the pool.  Returns RSV_OK, RSV_EINVAL (NULL ctx, max_holds negative),
 * RSV_EINTXN, RSV_EBUSY, RSV_EDISABLED and the usual failures (RSV_ECONN:
 * the keys finished before the loss stay given back).
 */
RSV_EXTERN int rsv_sweep(rsv_ctx *ctx, uint64_t shop_id, int64_t max_holds,
                         int64_t *released_out);

/* What one rsv_sweep_report() did.  Output only: set version, leave the
 * rest; the library writes every field of that version.  New fields are
 * only ever appended, under a new version number. */
#define RSV_SWEEP_RESULT_VERSION 1
typedef struct rsv_sweep_result {
    uint32_t version;          /* set by the caller to
                                  RSV_SWEEP_RESULT_VERSION */
    int64_t holds_released;    /* expired holds given back (rsv_sweep's
                                  *released_out) */
    int64_t units_released;    /* their units, reservable again */
    int64_t journal_folded;    /* journal rows (claims and releases
                                  settled since) folded into the ledger */
    int64_t pool_rows_drained; /* rows of idle pools given back to their
                                  ledger rows (see rsv_options.pool_idle_s) */
    int64_t checkouts_purged;  /* checkout records deleted after the
                                  retention (settled_retention_s) */
} rsv_sweep_result;

/*
 * rsv_sweep(), saying what each of its passes did: *result (version set
 * by the caller) receives the counts of the work that committed, also
 * when the call fails part way (as rsv_sweep's *released_out does).  For
 * a sweeper's log and metrics.  Returns what rsv_sweep() returns, and
 * RSV_EINVAL (nothing done, nothing written) for a NULL result or a
 * version this library does not know.
 */
RSV_EXTERN int rsv_sweep_report(rsv_ctx *ctx, uint64_t shop_id,
                                int64_t max_holds, rsv_sweep_result *result);

/*
 * Set the stock on hand of (item, location) to on_hand, creating the
 * ledger row if needed.  Lowering it below what is pooled shrinks the pool
 * in the same transaction.  Returns RSV_ESTOCK if on_hand would be below
 * the units held by active checkouts (nothing changes), RSV_EQUANTITY if
 * negative or above 2^62.
 */
RSV_EXTERN int rsv_stock_set(rsv_ctx *ctx, uint64_t shop_id, uint64_t item_id,
                             uint64_t location_id, int64_t on_hand);

/* Add delta (may be negative) to the stock on hand; *on_hand_out (may be
 * NULL) receives the new value.  Same rules and codes as rsv_stock_set,
 * plus RSV_ENOITEM when the ledger row does not exist.  Unlike the other
 * calls it is not idempotent: after RSV_EINDOUBT read the stock
 * (rsv_stock_get) before deciding to repeat it. */
RSV_EXTERN int rsv_stock_adjust(rsv_ctx *ctx, uint64_t shop_id,
                                uint64_t item_id, uint64_t location_id,
                                int64_t delta, int64_t *on_hand_out);

/*
 * Read the stock of (item, location) from one consistent snapshot without
 * locking: stock on hand after every committed claim, units held by active
 * (unexpired) checkouts, units in the pool, and units a new checkout could
 * still reserve (on hand - held).  Any out pointer may be NULL.
 * Returns RSV_OK, RSV_ENOITEM, and the usual failures.
 */
RSV_EXTERN int rsv_stock_get(rsv_ctx *ctx, uint64_t shop_id, uint64_t item_id,
                             uint64_t location_id, int64_t *on_hand_out,
                             int64_t *held_out, int64_t *pooled_out,
                             int64_t *available_out);

/* ------------------------------------------------------------------ */
/* Audit                                                              */
/* ------------------------------------------------------------------ */

/* Called once per violation found by rsv_audit().  `problem` is a
 * human-readable sentence valid only during the call. */
typedef void (*rsv_audit_fn)(void *arg, uint64_t shop_id, uint64_t item_id,
                             uint64_t location_id, const char *problem);

/*
 * Check the invariants on one consistent snapshot, for one shop or (with
 * all_shops non-zero) for every shop:
 *   units issued to the pool and holds == pool units + held + unfolded
 *   settlements; pool units + active holds <= stock on hand; no pool above
 *   its cap; no negative stock; no hold, pool row or settlement without a
 *   ledger row; every hold quantity positive.
 * Each violation is passed to fn (may be NULL); *violations_out (may be
 * NULL) receives the count.  Returns RSV_OK when the audit ran, whatever it
 * found; a failure code only when it could not run.
 * It reads every row of the shop (of every shop), seconds on a large one,
 * and is not bounded by call_timeout_ms: it holds no row lock and commits
 * nothing.  Bound it with the connection's read timeout if need be.
 */
RSV_EXTERN int rsv_audit(rsv_ctx *ctx, uint64_t shop_id, int all_shops,
                         rsv_audit_fn fn, void *arg, int64_t *violations_out);

/* ------------------------------------------------------------------ */
/* Operation kinds, the completion callback and the kill switch       */
/* ------------------------------------------------------------------ */

/*
 * Operation kinds, for the completion callback and the statistics
 * (reserve/stats.h); each matches the conn_tag of the statements the
 * operation sends.
 */
enum rsv_op_kind {
    RSV_OP_ALL = 0,        /* statistics getters only: every kind summed */
    RSV_OP_RESERVE = 1,    /* rsv_reserve, rsv_reserve_one, and each
                              entry of rsv_reserve_batch */
    RSV_OP_CLAIM = 2,      /* rsv_claim, each entry of rsv_claim_batch */
    RSV_OP_RELEASE = 3,    /* rsv_release, each entry of
                              rsv_release_batch */
    RSV_OP_EXTEND = 4,     /* rsv_extend */
    RSV_OP_STATUS = 5,     /* rsv_checkout_status */
    RSV_OP_REPLENISH = 6,  /* rsv_replenish, rsv_pool_drain */
    RSV_OP_SWEEP = 7,      /* rsv_sweep */
    RSV_OP_STOCK = 8,      /* rsv_stock_set, rsv_stock_adjust, rsv_stock_get */
    RSV_OP_AUDIT = 9       /* rsv_audit */
};

/*
 * Called after every counted call on the context returns (see
 * rsv_stat), with the operation kind (RSV_OP_*, never RSV_OP_ALL), the
 * code the call returns, the shop_id it was given (0 for none), the
 * checkout token it was given (token/token_len exactly as passed, NULL/0
 * for operations without a token or when token was NULL; the bytes are the
 * caller's and valid only during the callback), and its latency in
 * microseconds.  For rsv_claim/rsv_release joined to the caller's
 * transaction, RSV_OK means "done if the caller commits".
 */
typedef void (*rsv_op_fn)(void *user, uint32_t op, int code,
                          uint64_t shop_id, const void *token,
                          size_t token_len, uint64_t latency_us);

/*
 * Register fn (NULL to remove it) to be called after every completed
 * operation on ctx, with `user` passed through; e.g. to shadow-write each
 * checkout to another system during a migration.  It runs on the calling
 * thread (for a non-blocking call, on the context's worker thread), after the operation's transaction has ended and its counters
 * were updated, and before the function returns to its caller.  Inside
 * it, rsv_errmsg(ctx) and rsv_errcode(ctx) describe the call, and other
 * contexts may be used freely.  A call on the same ctx made from inside
 * the callback works but does not invoke the callback again; rsv_errmsg
 * and rsv_errcode are restored when the callback returns.  Do not close
 * ctx from the callback.  Returns RSV_OK, or RSV_EINVAL for NULL ctx.
 */
RSV_EXTERN int rsv_set_callback(rsv_ctx *ctx, rsv_op_fn fn, void *user);

/*
 * The kill switch.  With enabled == 0, every function that changes the
 * database returns RSV_EDISABLED at once, before looking at its other
 * arguments, and sends nothing to the server: rsv_reserve,
 * rsv_reserve_one, rsv_claim, rsv_release, the three batch functions
 * (every results[i] then RSV_EDISABLED), rsv_extend, rsv_replenish,
 * rsv_pool_drain, rsv_sweep, rsv_stock_set and rsv_stock_adjust.  The reads keep working:
 * rsv_checkout_status, rsv_stock_get and rsv_audit, as do the statistics
 * and everything that does not take a context.  Refused calls are
 * counted (RSV_STAT_FAILED, outcome RSV_EDISABLED) and reported to the
 * callback.  Any non-zero `enabled` switches the context back on.
 * Contexts start enabled; the switch is per context.
 * Returns RSV_OK, or RSV_EINVAL for NULL ctx.
 */
RSV_EXTERN int rsv_set_enabled(rsv_ctx *ctx, int enabled);

#ifdef __cplusplus
}
#endif

#endif /* RESERVE_H */
