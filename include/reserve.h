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
 *  - The connection.  The library never closes the connection and never
 *    changes its session variables: the isolation level and access mode
 *    are set per transaction (SET TRANSACTION ... READ COMMITTED, then
 *    START TRANSACTION READ WRITE), COMMIT and ROLLBACK say AND NO CHAIN
 *    NO RELEASE, every result is drained before a function returns, and
 *    on return no transaction the library opened is left open.  So every
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
 *    itself.  Reconnect the same MYSQL handle and keep the context: it
 *    notices the new session and prepares its statements again.  With
 *    Connector/C either switch MYSQL_OPT_RECONNECT on just for a call to
 *    mariadb_reconnect() (and off again), or, for a MYSQL the application
 *    allocated itself, mysql_close() it and mysql_init() +
 *    mysql_real_connect() it in place.  A different MYSQL handle needs a
 *    new context.  After RSV_ENOTPRIMARY the server takes no writes (a
 *    replica, a Galera node outside the primary component): connect to
 *    the one that does; a context from rsv_open_dsn() with several hosts
 *    finds it in rsv_reconnect().
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

#include <mysql.h>

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
#define RSV_SCHEMA_VERSION 2

/* The version of the library actually loaded, e.g. "0.1.0".  Static
 * string, never freed.  Compare with RSV_VERSION to detect a header/library
 * mismatch. */
RSV_EXTERN const char *rsv_version(void);

/* The loaded library's version as MAJOR * 10000 + MINOR * 100 + PATCH. */
RSV_EXTERN int rsv_version_number(void);

/* The schema version the loaded library works on (RSV_SCHEMA_VERSION of
 * the header it was built with). */
RSV_EXTERN int rsv_schema_version(void);

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
                                   least one lock wait after it began,
                                   waits no longer: it stalls on
                                   replication (a Galera cluster evicting
                                   a silent node, a semi-synchronous
                                   replica gone), and answers RSV_EINDOUBT,
                                   the connection closed (reconnect).  Any
                                   other statement the server has not
                                   answered a second after the lock wait
                                   that follows the budget answers
                                   RSV_ECONN.  Not over TLS (some
                                   Connector/C versions keep their own
                                   timeout there: set read_timeout) */
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
RSV_EXTERN int rsv_open(rsv_ctx **out, MYSQL *conn, const rsv_options *opts);

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
RSV_EXTERN MYSQL *rsv_connection(const rsv_ctx *ctx);

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
 * *expires_in_ms_out the time to its deadline (negative once passed; NULL
 * to skip).  A held checkout whose deadline passed reports
 * RSV_STATUS_EXPIRED.  Returns RSV_OK, RSV_ENOTFOUND, and the failures of
 * rsv_claim.
 */
RSV_EXTERN int rsv_checkout_status(rsv_ctx *ctx, uint64_t shop_id,
                                   const void *token, size_t token_len,
                                   int32_t *status_out, int64_t *units_out,
                                   int64_t *expires_in_ms_out);

/* ------------------------------------------------------------------ */
/* The non-blocking interface                                         */
/* ------------------------------------------------------------------ */

/*
 * For event-loop servers, which must never wait on the database.  Each
 * rsv_*_start function takes the arguments of its blocking counterpart
 * and returns at once: RSV_PENDING when the call was handed to the
 * context's worker thread, or the call's final code when the blocking
 * function answers without a statement (a NULL or bad token, an empty
 * cart, a bad quantity or ttl_ms, NULL status_out, the kill switch: the
 * blocking function itself then ran, on the calling thread).  Wait until
 * rsv_async_fd(ctx) is readable (poll, epoll, a uv_poll_t, a struct
 * event: include/reserve/libuv.h and reserve/libevent.h do it), then call
 * rsv_cont(ctx): it returns the call's final code, or RSV_PENDING if it
 * has not finished.  No callback and no thread of the caller's is needed.
 *
 *   int rc = rsv_claim_start(ctx, shop, token, len);
 *   while (rc == RSV_PENDING) {
 *       struct pollfd p = {rsv_async_fd(ctx), POLLIN, 0};
 *       poll(&p, 1, -1);          (in a loop: register the fd once)
 *       rc = rsv_cont(ctx);
 *   }
 *
 * The worker runs exactly the blocking function on the context, so the
 * codes, retries, the time budget (call_timeout_ms), the in-doubt rules,
 * the statistics and the completion callback are the blocking call's;
 * the callback then runs on the worker thread.  When rsv_cont has
 * returned the final code, rsv_errmsg() and rsv_errcode() say what the
 * blocking call would have said, and the out-pointers given to the start
 * function (rsv_checkout_status_start) are written.
 *
 * Ownership.  The token is copied.  The cart of rsv_reserve_start, and
 * the out-pointers of rsv_checkout_status_start, are used in place: do
 * not touch or free them until rsv_cont has returned the final code.
 *
 * While a call is pending (from the start that returned RSV_PENDING until
 * rsv_cont returns something else), only the worker uses the context and
 * its connection: do not use the connection either.  Every other
 * function on the context then refuses with RSV_EINVAL without touching
 * it (not counted, no callback), except rsv_cont, rsv_async_fd,
 * rsv_pending, rsv_cancel, rsv_close and rsv_connection;
 * rsv_errcode() answers RSV_PENDING and rsv_errmsg() "a non-blocking
 * call is in progress on this context ...".  One call at a time per
 * context: use several contexts (connections) for concurrency.
 *
 * Cost: the first start makes one worker thread for the context, which
 * sleeps between calls and ends in rsv_close(); and one pipe (two
 * descriptors) made by the first start or rsv_async_fd().
 */

/* Non-blocking rsv_reserve(): same arguments; the cart is used in place
 * until the call completes (its allocation functions then answer).
 * Returns RSV_PENDING, or a final code as rsv_reserve() (RSV_EINVAL also
 * while another call is pending on ctx). */
RSV_EXTERN int rsv_reserve_start(rsv_ctx *ctx, uint64_t shop_id,
                                 const void *token, size_t token_len,
                                 rsv_cart *cart, int64_t ttl_ms);

/* Non-blocking rsv_reserve_one().  Returns as rsv_reserve_start(). */
RSV_EXTERN int rsv_reserve_one_start(rsv_ctx *ctx, uint64_t shop_id,
                                     const void *token, size_t token_len,
                                     uint64_t item_id, uint64_t location_id,
                                     int64_t quantity, int64_t ttl_ms);

/* Non-blocking rsv_claim().  Returns RSV_PENDING, or a final code as
 * rsv_claim(). */
RSV_EXTERN int rsv_claim_start(rsv_ctx *ctx, uint64_t shop_id,
                               const void *token, size_t token_len);

/* Non-blocking rsv_release().  Returns as rsv_claim_start(). */
RSV_EXTERN int rsv_release_start(rsv_ctx *ctx, uint64_t shop_id,
                                 const void *token, size_t token_len);

/* Non-blocking rsv_extend().  Returns as rsv_claim_start(). */
RSV_EXTERN int rsv_extend_start(rsv_ctx *ctx, uint64_t shop_id,
                                const void *token, size_t token_len,
                                int64_t ttl_ms);

/* Non-blocking rsv_checkout_status(): the out-pointers are written by the
 * worker, before completion is signalled, and must stay valid until then.
 * Returns as rsv_claim_start(). */
RSV_EXTERN int rsv_checkout_status_start(rsv_ctx *ctx, uint64_t shop_id,
                                         const void *token, size_t token_len,
                                         int32_t *status_out,
                                         int64_t *units_out,
                                         int64_t *expires_in_ms_out);

/*
 * Continue the pending call: never blocks.  Returns RSV_PENDING while it
 * runs; once it has finished, its final code (the first time only:
 * the context is then free for the next call), and consumes the
 * readiness of rsv_async_fd().  RSV_EINVAL for NULL ctx, or when no call
 * was started (or its result was already returned; the message says so).
 */
RSV_EXTERN int rsv_cont(rsv_ctx *ctx);

/*
 * The descriptor to wait on: readable once the pending call has finished
 * (then call rsv_cont), not readable otherwise.  Made on the first call
 * of this function or of a start function, so a loop may register it once
 * up front; the same descriptor until rsv_close(), which closes it.  Only
 * wait on it for readability; never read, write or close it.
 * Returns the descriptor (>= 0), RSV_EINVAL for NULL ctx, or RSV_ENOMEM
 * when no descriptor could be made (the message says why).
 */
RSV_EXTERN int rsv_async_fd(rsv_ctx *ctx);

/* 1 while a non-blocking call is pending on ctx (started, its final code
 * not yet returned by rsv_cont), else 0 (also for NULL). */
RSV_EXTERN int rsv_pending(const rsv_ctx *ctx);

/*
 * Ask the pending call to stop; never waits for it.  What the call then
 * completes with (rsv_cont):
 *
 *  - it had not begun: RSV_ECANCELED; nothing was sent, the connection
 *    is untouched.
 *  - it was running: the worker stops before its next attempt or during
 *    a backoff pause (RSV_ECANCELED, nothing applied), and a statement in
 *    flight is cut at once by shutting the connection's socket down:
 *    RSV_ECONN (nothing applied) or, if its COMMIT (or the one-statement
 *    procedure) had been sent, RSV_EINDOUBT (repeat the call with the
 *    same token to settle it: every call is idempotent by token).  After
 *    any of these the connection is cut: call rsv_reconnect() before the
 *    next call (the message of RSV_ECANCELED says whether it was cut).
 *  - it had already finished: its own result.  If it finished just as
 *    the cancel came, the connection may have been cut all the same: the
 *    next call then answers RSV_ECONN having sent nothing; reconnect.
 *
 * Returns RSV_OK (the call will complete soon; keep waiting for the
 * descriptor), or RSV_EINVAL for NULL ctx or no call pending.
 * rsv_close() with a call pending cancels it the same way, waits for the
 * worker and frees everything.
 */
RSV_EXTERN int rsv_cancel(rsv_ctx *ctx);

/* ------------------------------------------------------------------ */
/* Batches                                                            */
/* ------------------------------------------------------------------ */

/* The most entries one batch call takes. */
#define RSV_BATCH_MAX 256

/*
 * Reserve n independent one-line checkouts at once: for each i, quantity
 * quantities[i] of item_ids[i] at location_ids[i] for the checkout
 * tokens[i] (token_lens[i] bytes) of shop shop_ids[i], all for ttl_ms
 * milliseconds (0 = the context default).  For a server that serves many
 * buyers at once (a flash sale): the new checkouts that the one-round-trip
 * path of rsv_reserve_one() can decide are reserved by one statement and
 * one COMMIT (one flush of the server's logs) for the whole batch.
 *
 * results[i] receives exactly the code rsv_reserve_one() would have
 * returned for entry i (RSV_OK, RSV_EOUTOFSTOCK, RSV_ECLAIMED,
 * RSV_ENOITEM, RSV_ETOKEN, RSV_EQUANTITY, RSV_EINVAL for a NULL token,
 * ...); one entry's outcome never changes another's, and an entry refused
 * by its arguments writes nothing.  The entries the batch cannot decide
 * (a checkout that exists, a pool short of units, an unknown item, a
 * quantity above 64, an item this context saw sold out) are then run one
 * by one, as rsv_reserve_one() runs them, inside this call: extra round
 * trips for those entries only.  A batch left with one entry to send
 * sends it as rsv_reserve_one() does: for one checkout the single call's
 * procedure is cheaper; the batch statement pays from two entries on.
 * Without the schema's batch procedure (an older schema) every entry runs
 * one by one, with the same outcomes.  Entries are decided as if each
 * were a call of its own made in some order: the batch's entries before the
 * others, so a later entry of the same token re-reserves that checkout,
 * as a second rsv_reserve_one() would.  Each entry counts as one
 * RSV_OP_RESERVE call in the statistics and is reported to the
 * completion callback with its own token and code (a batch refused as a
 * whole counts as one call); RSV_STAT_ONE_TRIP counts the entries the
 * batch statement reserved, and RSV_STAT_STATEMENTS its one CALL.
 *
 * Runs its own transactions, like rsv_reserve(): refused with RSV_EINTXN
 * inside the caller's transaction.  The arrays are the caller's, read
 * only during the call.
 *
 * Returns RSV_OK when every results[i] holds its entry's outcome (which
 * may be a failure: an entry run on its own after the connection was lost
 * gets RSV_ECONN).  Otherwise a code for the whole batch, also written to
 * every results[i]: RSV_EINVAL (NULL ctx, array or results, n == 0 or n >
 * RSV_BATCH_MAX; results, if not NULL, is still written: n entries),
 * RSV_EQUANTITY (ttl_ms negative or above 30 days), RSV_EINTXN,
 * RSV_EDISABLED, and for the batch statement RSV_EBUSY, RSV_ECONN (nothing applied),
 * RSV_EINDOUBT (the batch may have committed: reconnect and repeat the
 * same batch; each entry is idempotent by its token, so a repeat answers
 * RSV_OK for the checkouts it holds), RSV_EDB, RSV_ENOMEM.
 */
RSV_EXTERN int rsv_reserve_batch(rsv_ctx *ctx, size_t n,
                                 const uint64_t *shop_ids,
                                 const void *const *tokens,
                                 const size_t *token_lens,
                                 const uint64_t *item_ids,
                                 const uint64_t *location_ids,
                                 const int64_t *quantities, int64_t ttl_ms,
                                 int *results);

/*
 * Claim n checkouts at once: results[i] receives exactly the code
 * rsv_claim() would have returned for checkout tokens[i] of shop
 * shop_ids[i] (RSV_OK, RSV_ECLAIMED, RSV_EEXPIRED, RSV_ERELEASED,
 * RSV_ENOTFOUND, RSV_ETOKEN, RSV_EINVAL for a NULL token).  In one
 * statement and one COMMIT with the schema's batch procedure, else one by
 * one.  Unlike rsv_claim(), a batch never joins the caller's transaction:
 * inside one it is refused with RSV_EINTXN (claim one by one to commit
 * claims with the application's own rows).  A token listed twice is
 * claimed once; its second entry answers what a repeated rsv_claim()
 * would (RSV_ECLAIMED).  Each entry counts as one RSV_OP_CLAIM call and
 * is reported to the completion callback.
 * Returns RSV_OK when every results[i] is set; else the whole batch's code
 * as for rsv_reserve_batch() (without RSV_EQUANTITY), also in every
 * results[i]; after RSV_EINDOUBT repeat the same batch: a claim that
 * committed answers RSV_ECLAIMED, never takes twice.
 */
RSV_EXTERN int rsv_claim_batch(rsv_ctx *ctx, size_t n,
                               const uint64_t *shop_ids,
                               const void *const *tokens,
                               const size_t *token_lens, int *results);

/*
 * Release n checkouts at once: results[i] receives exactly the code
 * rsv_release() would have returned (RSV_OK, also for a checkout already
 * released or expired; RSV_ECLAIMED, RSV_ENOTFOUND, RSV_ETOKEN,
 * RSV_EINVAL for a NULL token).  Otherwise as rsv_claim_batch(), each
 * entry counted as one RSV_OP_RELEASE call.
 */
RSV_EXTERN int rsv_release_batch(rsv_ctx *ctx, size_t n,
                                 const uint64_t *shop_ids,
                                 const void *const *tokens,
                                 const size_t *token_lens, int *results);

/* ------------------------------------------------------------------ */
/* The batcher                                                        */
/* ------------------------------------------------------------------ */

/*
 * For a multi-threaded checkout server: any number of threads call the
 * batcher at once, and it coalesces their reserves, claims and releases
 * onto a few connections of its own, as batches (rsv_reserve_batch,
 * rsv_claim_batch, rsv_release_batch).  It owns `connections` contexts
 * opened with rsv_open_dsn(), each with one worker thread.
 *
 * Coalescing.  A call joins one shared queue and its thread waits for
 * its own answer only.  A worker that is free takes the oldest waiting
 * request and, with it, every other waiting request of the same kind
 * (reserves with the same ttl_ms, claims, or releases), oldest first, up
 * to RSV_BATCH_MAX, and runs them as one batch call on its context; the
 * others keep their places for the next free worker.  Whatever arrives
 * while batches are in flight goes into the next ones, so batches grow
 * with the load by themselves.  A lone request goes at once, as a batch
 * of one (which rsv_reserve_batch sends as rsv_reserve_one does): at low
 * load a call costs its single call plus a hand-over between threads.
 *
 * Answers.  Each call returns exactly what its single call (rsv_reserve_one,
 * rsv_claim, rsv_release) would have returned, made on its own context
 * at its place in the queue, with one difference: a worker whose batch
 * lost its connection (RSV_ECONN, RSV_EINDOUBT, for the whole batch or
 * for entries run on their own) reconnects (rsv_reconnect) and sends
 * those entries once more, and their callers get what that repeat says.
 * Every entry is idempotent by its token (a repeated reserve holds the
 * checkout once, a claim that had committed answers RSV_ECLAIMED), so a
 * caller only sees RSV_ECONN or RSV_EINDOUBT when the repeat also failed
 * or the worker could not reconnect; then reconnecting is the batcher's
 * business (the next batch tries again), and repeating the call with the
 * same token settles it, as for the single call.  Arguments the single
 * call refuses before it reaches the server (a NULL or bad token, a bad
 * quantity or ttl_ms) are answered at once on the calling thread, in the
 * single call's order, and are not counted in the statistics.
 *
 * Messages.  There is no per-call message (a message kept in the batcher
 * would belong to whichever call failed last, on any thread):
 * rsv_strerror() names each code.  To see why the server cannot be
 * reached, open one context with rsv_open_dsn() and read rsv_errmsg().
 *
 * Threads.  Every rsv_batcher_* function but rsv_batcher_open and
 * rsv_batcher_close may be called from any thread at any time; the
 * token of a blocking call is the caller's, read while the call runs
 * (the non-blocking form below copies it).  The workers start with
 * every signal blocked.
 */
typedef struct rsv_batcher rsv_batcher;

/* The most connections one batcher opens. */
#define RSV_BATCHER_MAX_CONNECTIONS 64

/*
 * Open `connections` (1..RSV_BATCHER_MAX_CONNECTIONS) contexts with
 * rsv_open_dsn(dsn, opts) and start one worker thread for each.  opts
 * may be NULL for defaults; it is copied.  On success *out owns the
 * batcher; on failure *out is NULL and nothing stays open.
 * Returns RSV_OK; RSV_EINVAL (NULL out or dsn, connections out of range,
 * a malformed dsn or bad option), RSV_ENOMEM (also when a thread cannot
 * be started), or the first failing rsv_open_dsn()'s code (RSV_ECONN,
 * RSV_ESCHEMA, RSV_ESCHEMAVER, RSV_ESERVER, ...).
 */
RSV_EXTERN int rsv_batcher_open(rsv_batcher **out, const char *dsn,
                                const rsv_options *opts,
                                uint32_t connections);

/*
 * Stop the batcher and free it.  Calls made from the moment it begins
 * answer RSV_EDISABLED at once; requests already queued are still run
 * and their callers answered; then the workers end and the contexts and
 * their connections are closed.  Returns once every caller inside the
 * batcher has left it; no call may be made once it has returned.  NULL is
 * a no-op.
 */
RSV_EXTERN void rsv_batcher_close(rsv_batcher *b);

/*
 * rsv_reserve_one() through the batcher: blocks until this request's
 * batch has run.  Returns what rsv_reserve_one() would (see "Answers"
 * above), RSV_EINVAL for a NULL b, or RSV_EDISABLED once
 * rsv_batcher_close() has begun.
 */
RSV_EXTERN int rsv_batcher_reserve_one(rsv_batcher *b, uint64_t shop_id,
                                       const void *token, size_t token_len,
                                       uint64_t item_id,
                                       uint64_t location_id,
                                       int64_t quantity, int64_t ttl_ms);

/* rsv_claim() through the batcher, never joining a transaction (the
 * batcher's connections are its own).  Returns as
 * rsv_batcher_reserve_one() does for rsv_claim(). */
RSV_EXTERN int rsv_batcher_claim(rsv_batcher *b, uint64_t shop_id,
                                 const void *token, size_t token_len);

/* rsv_release() through the batcher.  Returns as rsv_batcher_claim(). */
RSV_EXTERN int rsv_batcher_release(rsv_batcher *b, uint64_t shop_id,
                                   const void *token, size_t token_len);

/*
 * The non-blocking form, for event loops: the same requests, started
 * without waiting, their answers collected from a descriptor.
 *
 *   rsv_batcher_call *c;
 *   int rc = rsv_batcher_claim_start(b, shop, token, len, &c);
 *   if (rc != RSV_PENDING)
 *       answer(rc);                  (decided at once; c is NULL)
 *   ... when rsv_batcher_fd(b) is readable:
 *   rsv_batcher_call *done;
 *   int code;
 *   while (rsv_batcher_next_done(b, &done, &code) == RSV_OK) {
 *       answer_the_request_of(done, code);
 *       rsv_batcher_call_free(done);
 *   }
 *
 * A start copies the token and queues the request as the blocking call
 * would; the answer is the blocking call's.  It returns RSV_PENDING with
 * *out set to a new call, which the batcher owns until
 * rsv_batcher_next_done() hands it back; then the caller frees it with
 * rsv_batcher_call_free().  Or it returns the final code at once with
 * *out NULL: the argument checks of the single call, RSV_EINVAL (NULL b
 * or out), RSV_EDISABLED (close has begun), RSV_ENOMEM.  Calls started
 * on one batcher complete in any order, from any of its workers;
 * compare the handles to tell them apart.  rsv_batcher_close() still
 * runs every queued call, and frees the calls nobody collected.
 */
typedef struct rsv_batcher_call rsv_batcher_call;

/* Non-blocking rsv_batcher_reserve_one(). */
RSV_EXTERN int rsv_batcher_reserve_one_start(rsv_batcher *b,
                                             uint64_t shop_id,
                                             const void *token,
                                             size_t token_len,
                                             uint64_t item_id,
                                             uint64_t location_id,
                                             int64_t quantity,
                                             int64_t ttl_ms,
                                             rsv_batcher_call **out);

/* Non-blocking rsv_batcher_claim(). */
RSV_EXTERN int rsv_batcher_claim_start(rsv_batcher *b, uint64_t shop_id,
                                       const void *token, size_t token_len,
                                       rsv_batcher_call **out);

/* Non-blocking rsv_batcher_release(). */
RSV_EXTERN int rsv_batcher_release_start(rsv_batcher *b, uint64_t shop_id,
                                         const void *token, size_t token_len,
                                         rsv_batcher_call **out);

/*
 * The descriptor to wait on: readable while some started call has
 * completed and not yet been collected with rsv_batcher_next_done().
 * The same descriptor for the batcher's life; only wait on it for
 * readability, never read, write or close it.  Returns it (>= 0), or
 * RSV_EINVAL for NULL.
 */
RSV_EXTERN int rsv_batcher_fd(const rsv_batcher *b);

/*
 * Collect one completed call, oldest answer first, never waiting:
 * RSV_OK with *done the call (now the caller's, to free) and *code its
 * final code; RSV_PENDING with *done NULL when none has completed;
 * RSV_EINVAL for a NULL argument.
 */
RSV_EXTERN int rsv_batcher_next_done(rsv_batcher *b, rsv_batcher_call **done,
                                     int *code);

/* Free a call rsv_batcher_next_done() returned.  NULL is a no-op. */
RSV_EXTERN void rsv_batcher_call_free(rsv_batcher_call *call);

/*
 * A counter as rsv_stats_get() reads it, summed over the batcher's
 * contexts (RSV_STAT_LATENCY_MAX_US: the maximum), as of the last batch
 * each worker finished.  Each batch entry counts as one call of its
 * kind, so RSV_STAT_STATEMENTS per RSV_STAT_CALLS of RSV_OP_RESERVE shows
 * how well reserves coalesce (1 or more: one by one).  Latencies are
 * those of the batch calls on the connections, without the time spent
 * queued.  Returns RSV_OK, or RSV_EINVAL (NULL b or out, unknown stat or
 * op).
 */
RSV_EXTERN int rsv_batcher_stats_get(const rsv_batcher *b, uint32_t stat,
                                     uint32_t op, uint64_t *out);

/* ------------------------------------------------------------------ */
/* Pools, expiry and stock                                            */
/* ------------------------------------------------------------------ */

/*
 * Top the pool of (item, location) up from the ledger to its cap, after
 * folding settled checkouts into the ledger and giving back the units of
 * expired holds.  Concurrent replenishers serialize on the ledger row, so
 * together they never add more than the ledger allows.  *added_out (may be
 * NULL) receives the number of rows added.
 * Returns RSV_OK, RSV_ENOITEM, RSV_EINTXN, RSV_EBUSY, RSV_EINDOUBT and the
 * usual failures.
 */
RSV_EXTERN int rsv_replenish(rsv_ctx *ctx, uint64_t shop_id, uint64_t item_id,
                             uint64_t location_id, int64_t *added_out);

/*
 * Give the pool of (item, location) back to its ledger row: delete its
 * rows and lower the units issued by as many, in one transaction.  For
 * an item whose sale is over, or one that should not be pooled until
 * buyers contend for it again (the next refill makes a new pool; the
 * stock a buyer can reserve does not change).  Rows that reserves in
 * flight are taking are left to them.  rsv_sweep() does the same for
 * pools left idle for rsv_options.pool_idle_s.  *units_out (may be NULL)
 * receives the rows given back; they are also counted in
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
 * (unexpired) checkouts, rows in the pool, and units a new checkout could
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
 *   units issued to the pool and holds == pool rows + held + unfolded
 *   settlements; pool rows + active holds <= stock on hand; no pool above
 *   its cap; no negative stock; no hold, pool row or settlement without a
 *   ledger row; every hold quantity positive.
 * Each violation is passed to fn (may be NULL); *violations_out (may be
 * NULL) receives the count.  Returns RSV_OK when the audit ran, whatever it
 * found; a failure code only when it could not run.
 */
RSV_EXTERN int rsv_audit(rsv_ctx *ctx, uint64_t shop_id, int all_shops,
                         rsv_audit_fn fn, void *arg, int64_t *violations_out);

/* ------------------------------------------------------------------ */
/* Observability and the kill switch                                  */
/* ------------------------------------------------------------------ */

/*
 * Every context counts what its calls did, in fixed arrays inside the
 * context (about 6 KiB; nothing grows).  The counters are per context like
 * everything else: read them from the thread that uses the context, or
 * while no call on it is running.  To add several contexts up, or to read
 * them from another thread, copy them into a snapshot (see
 * rsv_stats_snapshot_add below).
 *
 * Operation kinds, for the statistics and the completion callback; each
 * matches the conn_tag of the statements the operation sends.
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

/* Counters for rsv_stats_get().  A call is counted once it returns, under
 * its kind, whatever it returned (also RSV_EINVAL or RSV_EDISABLED); a
 * call with a NULL context is not counted anywhere.  rsv_open() and the
 * cart, option and code functions are not operations and are not
 * counted.
 *
 * Contract and diagnostics.  CALLS, OK, EXPECTED, FAILED, RETRIES,
 * DEADLOCKS, LOCK_WAIT_TIMEOUTS, LATENCY_US, LATENCY_MAX_US,
 * POOL_DRAINED and STMT_EVICTIONS mean exactly what they say in every
 * release: alert and graph on them.  INLINE_REFILLS, SLOW_PATHS,
 * SHORT_READS, STATEMENTS, ONE_TRIP, BACK_TO_FAST and LEDGER_TAKES
 * describe how the engine served the calls; they are kept (the numbers
 * never change meaning or get reused) but what they count follows the
 * engine and may change between releases: read them to understand, not
 * to alert. */
enum rsv_stat {
    RSV_STAT_CALLS = 0,       /* calls returned (any code) */
    RSV_STAT_OK = 1,          /* calls that returned RSV_OK */
    RSV_STAT_EXPECTED = 2,    /* calls that returned an expected outcome:
                                 RSV_EOUTOFSTOCK .. RSV_EINDOUBT (-1..-7) */
    RSV_STAT_FAILED = 3,      /* calls that returned any other code
                                 (failures, including RSV_EDISABLED) */
    RSV_STAT_RETRIES = 4,     /* transaction attempts beyond the first
                                 (after a deadlock or lock-wait timeout) */
    RSV_STAT_DEADLOCKS = 5,   /* deadlocks the server reported to the
                                 library (ER_LOCK_DEADLOCK, 1213) */
    RSV_STAT_LOCK_WAIT_TIMEOUTS = 6, /* lock-wait timeouts reported to the
                                 library (ER_LOCK_WAIT_TIMEOUT, 1205) */
    RSV_STAT_INLINE_REFILLS = 7, /* pool refills a reserve did itself: a
                                 top-up transaction after its commit (pool
                                 running low; also one that found the
                                 ledger row held and did nothing), such a
                                 top-up left pending and done inside a
                                 later reserve procedure that got the row,
                                 or a slow-path run (pool short: ledger
                                 rows locked, pool refilled from the
                                 ledger) */
    RSV_STAT_SLOW_PATHS = 8,  /* the slow-path runs alone (included in
                                 RSV_STAT_INLINE_REFILLS) */
    RSV_STAT_SHORT_READS = 9, /* fast-path pool reads (one per item and
                                 location of a cart, per attempt) that
                                 returned fewer rows than asked: the pool
                                 was short, or SKIP LOCKED passed over rows
                                 other checkouts hold */
    RSV_STAT_STATEMENTS = 10, /* statements executed on the server,
                                 transaction control included (prepares
                                 and rsv_open's checks are not counted) */
    RSV_STAT_LATENCY_US = 11, /* sum of the calls' latencies, in
                                 microseconds (divide by RSV_STAT_CALLS for
                                 the mean) */
    RSV_STAT_LATENCY_MAX_US = 12, /* the slowest call, in microseconds */
    RSV_STAT_ONE_TRIP = 13,   /* reserves done in one round trip by the
                                 schema's reserve procedures (a new checkout
                                 whose lines could all be held at their
                                 first location, up to 32 of them; see
                                 rsv_reserve); the others sent their
                                 statements one by one.  0 with a schema
                                 loaded without the procedures */
    RSV_STAT_BACK_TO_FAST = 14, /* slow paths that found, once they had the
                                 ledger row, that another reserve had
                                 refilled the short pools since, and went
                                 back to the fast path (a hot pool that ran
                                 dry); not in RSV_STAT_SLOW_PATHS */
    RSV_STAT_LEDGER_TAKES = 15 /* item/location keys of one-trip reserves
                                 (RSV_STAT_ONE_TRIP) whose units came
                                 straight from the ledger row instead of
                                 the pool: the procedures do that when no
                                 other transaction holds the row and it
                                 has enough units not yet issued */,
    RSV_STAT_POOL_DRAINED = 16 /* pool rows given back to their ledger row:
                                 by rsv_pool_drain (counted under
                                 RSV_OP_REPLENISH) and by rsv_sweep's pass
                                 over idle pools (RSV_OP_SWEEP; see
                                 rsv_options.pool_idle_s) */,
    RSV_STAT_STMT_EVICTIONS = 17 /* prepared statements this context closed
                                 because the server held
                                 max_prepared_stmt_count of them (see
                                 rsv_options.stmt_cache_max) */
};

/* Latency histogram buckets per operation kind: bucket 0 counts calls
 * under 1 microsecond, bucket b (1..30) calls of [2^(b-1), 2^b)
 * microseconds, bucket 31 calls of 2^30 microseconds (about 18 minutes) or
 * more. */
#define RSV_STATS_BUCKETS 32

/*
 * Read one counter (RSV_STAT_*) for one operation kind (RSV_OP_*, or
 * RSV_OP_ALL for the sum over every kind; for RSV_STAT_LATENCY_MAX_US the
 * maximum) into *out.  Counters start at zero when the context is opened
 * and wrap around at 2^64.
 * Returns RSV_OK, or RSV_EINVAL (NULL ctx or out, unknown stat or op).
 */
RSV_EXTERN int rsv_stats_get(const rsv_ctx *ctx, uint32_t stat, uint32_t op,
                             uint64_t *out);

/*
 * How many calls of kind op (RSV_OP_*, or RSV_OP_ALL) returned `code`:
 * RSV_OK or any RSV_E* code (an unused number in that range gives 0).
 * Returns RSV_OK, or RSV_EINVAL (NULL ctx or out, unknown op, a code
 * outside RSV_ENOTPRIMARY..RSV_OK).
 */
RSV_EXTERN int rsv_stats_outcome(const rsv_ctx *ctx, uint32_t op, int code,
                                 uint64_t *out);

/*
 * Copy the latency histogram of kind op (RSV_OP_*, or RSV_OP_ALL) into
 * buckets[0..n-1]: min(n, RSV_STATS_BUCKETS) buckets are written (see
 * RSV_STATS_BUCKETS for their bounds) and any further entries set to 0.
 * The buckets of a kind add up to its RSV_STAT_CALLS.
 * Returns RSV_OK, or RSV_EINVAL (NULL ctx, NULL buckets with n > 0,
 * unknown op).
 */
RSV_EXTERN int rsv_stats_histogram(const rsv_ctx *ctx, uint32_t op,
                                   uint64_t *buckets, size_t n);

/*
 * Estimate the p-th percentile (0 <= p <= 100; 50 is the median, 99 the
 * p99) of the latency of kind op (RSV_OP_*, or RSV_OP_ALL) into *us_out,
 * in microseconds: interpolated inside the histogram bucket that holds it,
 * so within a factor of two of the true value, and never above the
 * slowest call.  0 when no call of that kind was counted.
 * Returns RSV_OK, or RSV_EINVAL (NULL ctx or us_out, unknown op, p outside
 * 0..100 or NaN).
 */
RSV_EXTERN int rsv_stats_percentile(const rsv_ctx *ctx, uint32_t op,
                                    double p, uint64_t *us_out);

/* Set every counter, outcome and histogram of ctx back to zero.  Returns
 * RSV_OK, or RSV_EINVAL for NULL. */
RSV_EXTERN int rsv_stats_reset(rsv_ctx *ctx);

/*
 * Snapshots: the statistics of one or more contexts added up, in memory
 * the caller owns (about 6 KiB, tied to no context or connection).  They
 * are how counters leave the thread that owns a context, and how several
 * contexts become one set of metrics.  Adding sums every counter, outcome
 * and histogram bucket; RSV_STAT_LATENCY_MAX_US keeps the maximum.
 *
 * Threads.  rsv_stats_snapshot_add() is the only one of these functions
 * that reads a context: call it where rsv_stats_get() may be called (on
 * the thread that uses the context, or while no call on it is running).
 * A snapshot belongs to one thread at a time, like a cart: the library
 * takes no lock, so calls on the same snapshot must not overlap.  When
 * threads share snapshots, hold the application's own mutex around every
 * call on them.  For a server whose threads each own a context:
 *
 *   each worker, every second or so, between two of its own calls:
 *     lock(m); rsv_stats_snapshot_clear(mine);
 *              rsv_stats_snapshot_add(mine, ctx); unlock(m);
 *   the exporter, on each scrape (total is its own):
 *     rsv_stats_snapshot_clear(total);
 *     lock(m); for each worker: rsv_stats_snapshot_merge(total, its mine);
 *     unlock(m);
 *     rsv_stats_prometheus(total, "instance=\"a\"", buf, len, &needed);
 *
 * A worker's snapshot keeps its last figures after its context is
 * closed, so the exported counters never go down (unless a context's
 * counters are reset with rsv_stats_reset()).
 */
typedef struct rsv_stats_snapshot rsv_stats_snapshot;

/* A new snapshot, every statistic zero and no context added; free it with
 * rsv_stats_snapshot_free().  Returns RSV_OK, RSV_EINVAL (NULL out) or
 * RSV_ENOMEM (then *out is NULL). */
RSV_EXTERN int rsv_stats_snapshot_new(rsv_stats_snapshot **out);

/* Free a snapshot.  NULL is a no-op. */
RSV_EXTERN void rsv_stats_snapshot_free(rsv_stats_snapshot *snap);

/* Set every statistic of snap, and its count of contexts, back to zero.
 * NULL is a no-op. */
RSV_EXTERN void rsv_stats_snapshot_clear(rsv_stats_snapshot *snap);

/* Add the statistics of ctx, as rsv_stats_get() would read them now, to
 * snap, and count one context more; ctx is not changed.  Adding the same
 * context again counts its calls again: clear snap first to replace them.
 * Returns RSV_OK, or RSV_EINVAL (NULL snap or ctx). */
RSV_EXTERN int rsv_stats_snapshot_add(rsv_stats_snapshot *snap,
                                      const rsv_ctx *ctx);

/* Add the statistics of src, and its count of contexts, to dst.
 * Returns RSV_OK, or RSV_EINVAL (NULL dst or src). */
RSV_EXTERN int rsv_stats_snapshot_merge(rsv_stats_snapshot *dst,
                                        const rsv_stats_snapshot *src);

/* Add the statistics of every context of the batcher, as
 * rsv_batcher_stats_get() reads them, to snap (one context each), for
 * rsv_stats_prometheus().  Returns RSV_OK, or RSV_EINVAL (NULL snap or
 * b). */
RSV_EXTERN int rsv_batcher_stats_snapshot_add(rsv_stats_snapshot *snap,
                                              const rsv_batcher *b);

/*
 * Write snap into buf as Prometheus text (exposition format 0.0.4: serve
 * it as "text/plain; version=0.0.4"), NUL-terminated.  Every family has
 * one # HELP and one # TYPE line:
 *
 *   libreserve_contexts                        gauge: contexts added up
 *   libreserve_calls_total{op,result,class}    counter: calls returned
 *   libreserve_<stat>_total{op}                counter: RSV_STAT_<STAT>,
 *       one family for each counter but those of calls and latencies:
 *       retries, deadlocks, lock_wait_timeouts, inline_refills,
 *       slow_paths, short_reads, statements, one_trip, back_to_fast,
 *       ledger_takes, pool_drained, stmt_evictions
 *   libreserve_call_duration_seconds{op}       histogram: _bucket{le}
 *       cumulative over the RSV_STATS_BUCKETS buckets (le = 2^b
 *       microseconds for b = 0..30, then "+Inf"), _sum, _count (the
 *       kind's RSV_STAT_CALLS)
 *   libreserve_call_duration_max_seconds{op}   gauge: the slowest call
 *
 * op names the kind: "reserve", "claim", "release", "extend", "status",
 * "replenish", "sweep", "stock" or "audit"; a kind's series appear once a
 * call of it was counted.  result is the code's rsv_code_name() in lower
 * case without "rsv_" ("ok", "eoutofstock", ...; "other" for a code
 * without a name), and appears once counted ("ok" always); class is "ok",
 * "expected" or "failed", as RSV_STAT_OK, RSV_STAT_EXPECTED and
 * RSV_STAT_FAILED count them.
 *
 * labels (NULL or "" for none) comes first in the labels of every series,
 * e.g. "instance=\"a\",shard=\"3\"": name="value" pairs separated by
 * commas, without spaces, exactly as they appear in the output.  Names
 * match [a-zA-Z_][a-zA-Z0-9_]*, do not begin with "__", are not op,
 * result, class or le, and appear once; a value is UTF-8 in which a
 * backslash, a double quote and a newline are written \\, \" and \n.
 *
 * *needed_out (may be NULL) receives the size of buffer the text needs,
 * its terminating NUL included (after RSV_OK, strlen(buf) + 1).  Pass
 * len 0 (buf may then be NULL) to learn it: the same snapshot gives the
 * same text again.  Numbers are written without floating point, so the
 * process's locale cannot change them.  Reads snap only.
 * Returns RSV_OK; RSV_ERANGE when len is less than *needed_out (buf then
 * holds "" if len > 0, never a truncated text); RSV_EINVAL (NULL snap,
 * NULL buf with len > 0, labels not as above).
 */
RSV_EXTERN int rsv_stats_prometheus(const rsv_stats_snapshot *snap,
                                    const char *labels, char *buf,
                                    size_t len, size_t *needed_out);

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
