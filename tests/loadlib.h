/*
 * loadlib.h - the client plumbing that the test programs share: the load
 * programs (stress, Galera, replication failover, benchmark), the
 * stateful fuzzer and the Check suites' tests/testutil.c.
 *
 * Owns: reaching a server (socket or TCP, credentials, timeouts),
 * running a statement and reading one integer, loading the schema, time
 * and pseudo-random numbers for pacing and backoff, sending one
 * reserve / claim / release by kind, and writing down what a reserve
 * allocated.  It reports and never exits or prints: each program keeps
 * its own way of failing (ck_assert, exit codes, a problem counter) and
 * its own messages, as it keeps its workload, its fault injection, its
 * retry policy and its checks.
 */
#ifndef RSV_TESTS_LOADLIB_H
#define RSV_TESTS_LOADLIB_H

#include <stddef.h>
#include <stdint.h>

#include <mysql.h>

#include "reserve.h"

/* ---- time and pseudo-random numbers ---- */

/* Milliseconds on CLOCK_MONOTONIC. */
uint64_t ll_now_ms(void);
/* Sleep ms milliseconds, through signals; ms <= 0 returns at once. */
void ll_sleep_ms(long ms);
/* xorshift64*: a fast generator per client, reproducible from a seed;
 * *s must not be 0. */
uint64_t ll_rng_next(uint64_t *s);
/* 0..n-1 (0 when n is 0). */
unsigned ll_rnd(uint64_t *s, unsigned n);
/* Sleep before reconnect attempt `tries` (0, 1, ...): base_ms doubled per
 * attempt up to max_shift doublings, half of it fixed and half random, so
 * clients cut off together do not come back together. */
void ll_backoff(uint64_t *rng, int tries, long base_ms, int max_shift);

/* ---- connections ---- */

/* Where and how to connect.  socket set: the Unix socket; otherwise host
 * and port.  A timeout of 0 keeps Connector/C's default. */
typedef struct ll_server {
    const char *host;
    unsigned port;
    const char *socket;
    const char *user;     /* NULL: root */
    const char *password; /* NULL: none */
    unsigned connect_timeout_s;
    unsigned rw_timeout_s; /* read and write */
    unsigned long flags;   /* mysql_real_connect client flags */
} ll_server;

/* The throwaway server of make check / tools/mariadb.sh run:
 * RSV_TEST_SOCKET, RSV_TEST_USER, RSV_TEST_PASSWORD, with multiple
 * statements allowed (the schema script needs them).  -1 when
 * RSV_TEST_SOCKET is not set. */
int ll_server_from_env(ll_server *s);

/* A connection to s with db selected (NULL: none).  into: a handle to
 * initialise in place (the caller's storage), or NULL to allocate one.
 * NULL on failure, with the reason in err (when err is not NULL) and the
 * handle closed. */
MYSQL *ll_connect(MYSQL *into, const ll_server *s, const char *db,
                  char *err, size_t errlen);

/* ---- statements ---- */

/* Run sql (several statements when the connection allows them) and read
 * every result.  0, or the server's error number (mysql_error(m) says
 * more). */
unsigned ll_exec(MYSQL *m, const char *sql);
/* The first column of the first row of sql as an integer: 0 with *out
 * set (if_null when the value is NULL); 1 when there is no row (*out =
 * if_null); -1 on an error (mysql_error(m)). */
int ll_i64(MYSQL *m, const char *sql, int64_t if_null, int64_t *out);

/* ---- files and the schema ---- */

/* The whole file, NUL-terminated, in memory the caller frees; NULL when
 * it cannot be read. */
char *ll_slurp(const char *path);
/* The schema path: $RSV_SCHEMA, or sql/schema.sql (run from the source
 * tree). */
const char *ll_schema_path(void);
/* Load the schema script at path (NULL: ll_schema_path()) into m's
 * current database, DELIMITER lines honoured; m needs
 * CLIENT_MULTI_STATEMENTS.  0; -1 when the file cannot be read; -2 when
 * the server refused a statement (its message in err). */
int ll_load_schema(MYSQL *m, const char *path, char *err, size_t errlen);

/* ---- one library call by kind ---- */

/* Kinds start at 1 so that 0 can mean "no call" where a program records
 * what a client is doing. */
enum { LL_RESERVE = 1, LL_CLAIM, LL_RELEASE };

/* A reserve (cart, ttl_ms), claim or release of one token: every one is
 * idempotent per token, so a program settles an answer in doubt by
 * sending the same call again. */
typedef struct ll_call {
    int kind;
    uint64_t shop;
    const char *tok;
    rsv_cart *cart;
    int64_t ttl_ms;
} ll_call;

/* Send k once on ctx; the library's answer. */
int ll_call_once(rsv_ctx *ctx, const ll_call *k);

/* ---- what a reserve allocated, for the clients' outcome logs ---- */

typedef struct ll_alloc {
    uint64_t item, loc;
    int64_t qty;
} ll_alloc;

/* The allocations of a reserved cart, line by line (items[l]: the item of
 * line l), at most max of them.  merge: one entry per item and location,
 * the quantities added up (a cart may name an item on several lines).
 * Returns how many were written to out. */
int ll_cart_allocations(const rsv_cart *cart, const uint64_t *items,
                        int merge, ll_alloc *out, int max);
/* " item:loc:qty" for each allocation, NUL-terminated in buf; stops
 * early rather than cut an entry short. */
void ll_format_allocations(const ll_alloc *a, int n, char *buf, size_t len);

/* s with every byte outside [A-Za-z0-9] written as %XX, for a dsn (any
 * path, user or password fits); at most n bytes with the NUL. */
void ll_dsn_escape(char *out, size_t n, const char *s);

#endif
