/*
 * testutil.h - helpers shared by the Check suites: connecting to the
 * throwaway server, a private database per test binary with the schema
 * loaded, unique shop ids, and the invariant checker run after every test.
 */
#ifndef RSV_TESTUTIL_H
#define RSV_TESTUTIL_H

#include <stdint.h>

#include <check.h>
#include <mysql.h>

#include "reserve.h"
#include "nonblock_shim.h"

/* Create the suite's database (fresh, with the schema) before running;
 * drop it afterwards.  Called from main(). */
void tu_db_create(const char *suite);
void tu_db_drop(void);
const char *tu_db_name(void);

/* The suite database on the test server, as a dsn for the test user
 * (RSV_TEST_USER / RSV_TEST_PASSWORD, root without a password by
 * default), for rsv_open_dsn and rsv_batcher_open. */
void tu_dsn(char *out, size_t n);
/* A new connection to the suite database (ck_assert on failure). */
MYSQL *tu_connect(void);
/* Connection without selecting a database (for schema tests). */
MYSQL *tu_connect_nodb(void);
/* (Re)load sql/schema.sql (or $RSV_SCHEMA) into c's database; idempotent. */
void tu_load_schema(MYSQL *c);
/* A context on a new connection. */
rsv_ctx *tu_open(MYSQL **conn_out);
/* The same, waiting at most 1 s for a row lock and retrying max_retries
 * times: for tests that provoke lock conflicts. */
rsv_ctx *tu_open_impatient(MYSQL **conn_out, int32_t max_retries);
/* A context on a new connection with these option flags and pool cap
 * (0: the default). */
rsv_ctx *tu_open_with(MYSQL **conn_out, uint32_t flags, int64_t pool_cap);
/* A new connection inside a READ COMMITTED transaction, as a library
 * transaction runs: for tests that play another checkout holding locks. */
MYSQL *tu_connect_in_txn(void);
/* A shop id no other test uses. */
uint64_t tu_shop(void);

/* The start most tests share: a context on a connection of its own and a
 * shop of its own, so that no test sees another's rows.  adm is a second
 * session for what the context must not do itself (replace a procedure,
 * hold a lock); it is connected on first use only, so that a test which
 * counts sessions finds none it did not ask for. */
typedef struct tu_fix {
    rsv_ctx *ctx;
    MYSQL *conn;
    uint64_t shop;
    MYSQL *adm;
} tu_fix;

/* Open f as tu_open_with() / tu_open_impatient() open a context. */
void tu_fix_open(tu_fix *f, uint32_t flags, int64_t pool_cap);
void tu_fix_open_impatient(tu_fix *f, int32_t max_retries);
/* on_hand units of (item, loc) in f's shop, its pool left empty as
 * rsv_stock_set leaves it; tu_fix_pooled also fills the pool, for tests
 * that count statements or take pool rows from the first reserve on. */
void tu_fix_stock(tu_fix *f, uint64_t item, uint64_t loc, int64_t on_hand);
void tu_fix_pooled(tu_fix *f, uint64_t item, uint64_t loc, int64_t on_hand);
/* f's second session (see tu_fix), connected now if it is not yet. */
MYSQL *tu_fix_admin(tu_fix *f);
/* Close the context, then whichever sessions f opened. */
void tu_fix_close(tu_fix *f);

void tu_exec(MYSQL *c, const char *sql);
int64_t tu_i64(MYSQL *c, const char *sql);

/* ck_assert that rc == want, printing the context's message otherwise. */
#define TU_RC(ctx, rc, want)                                                \
    ck_assert_msg((rc) == (want), "got %d (%s), want %d (%s): %s", (rc),    \
                  rsv_code_name(rc), (want), rsv_code_name(want),           \
                  rsv_errmsg(ctx))
#define TU_OK(ctx, expr) do { int tu_rc_ = (expr); TU_RC(ctx, tu_rc_, RSV_OK); } while (0)

/* Audit every shop; ck_assert that no invariant is violated. */
void tu_audit_clean(void);

/* Stock on hand / held / pool for a key, through the API. */
int64_t tu_on_hand(rsv_ctx *ctx, uint64_t shop, uint64_t item, uint64_t loc);
int64_t tu_held(rsv_ctx *ctx, uint64_t shop, uint64_t item, uint64_t loc);

/* Add a test case whose teardown runs the audit. */
void tu_add(Suite *s, const char *name, const TTest *t);
/* The same with a timeout of its own (a test whose failure mode is a
 * hang should fail quickly). */
void tu_add_timeout(Suite *s, const char *name, const TTest *t, double seconds);
/* A test run once for each _i in start..end-1, each with the audit. */
void tu_add_loop(Suite *s, const char *name, const TTest *t, int start,
                 int end);
/* Run a suite, return the process exit status. */
int tu_run(Suite *s);

#endif
