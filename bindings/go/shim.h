/*
 * shim.h - the libreserve functions the Go package calls, reached through
 * dlopen() so that the library is chosen when the program starts
 * (LIBRESERVE_PATH, the in-tree build, the installed libreserve.so.0), as
 * the other bindings choose it, instead of when it is linked.  Each
 * rsvgo_NAME calls NAME of the loaded library; rsvgo_load() must have
 * succeeded first.
 */
#ifndef RSVGO_SHIM_H
#define RSVGO_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <reserve.h>
#include <reserve/async.h>
#include <reserve/batch.h>
#include <reserve/migrate.h>
#include <reserve/stats.h>

/* X(return type, name, parameters, arguments) */
#define RSVGO_FUNCS(X) \
    X(const char *, rsv_version, (void), ()) \
    X(int, rsv_version_number, (void), ()) \
    X(const char *, rsv_strerror, (int code), (code)) \
    X(const char *, rsv_code_name, (int code), (code)) \
    X(int, rsv_options_init, (rsv_options *o, unsigned int v), (o, v)) \
    X(int, rsv_open_dsn, (rsv_ctx **out, const char *dsn, const rsv_options *o), (out, dsn, o)) \
    X(int, rsv_reconnect, (rsv_ctx *c), (c)) \
    X(const char *, rsv_errmsg, (const rsv_ctx *c), (c)) \
    X(int, rsv_cart_new, (rsv_cart **out), (out)) \
    X(int, rsv_cart_add, (rsv_cart *cart, uint64_t item, const uint64_t *locs, size_t n, int64_t q, uint32_t flags), (cart, item, locs, n, q, flags)) \
    X(int, rsv_cart_allocation_count, (const rsv_cart *cart, size_t line, size_t *out), (cart, line, out)) \
    X(int, rsv_cart_allocation, (const rsv_cart *cart, size_t line, size_t i, uint64_t *loc, int64_t *q), (cart, line, i, loc, q)) \
    X(size_t, rsv_cart_failed_line, (const rsv_cart *cart), (cart)) \
    X(int, rsv_reserve_start, (rsv_ctx *c, uint64_t shop, const void *t, size_t tl, rsv_cart *cart, int64_t ttl), (c, shop, t, tl, cart, ttl)) \
    X(int, rsv_reserve_one_start, (rsv_ctx *c, uint64_t shop, const void *t, size_t tl, uint64_t item, uint64_t loc, int64_t q, int64_t ttl), (c, shop, t, tl, item, loc, q, ttl)) \
    X(int, rsv_claim_start, (rsv_ctx *c, uint64_t shop, const void *t, size_t tl), (c, shop, t, tl)) \
    X(int, rsv_release_start, (rsv_ctx *c, uint64_t shop, const void *t, size_t tl), (c, shop, t, tl)) \
    X(int, rsv_extend_start, (rsv_ctx *c, uint64_t shop, const void *t, size_t tl, int64_t ttl), (c, shop, t, tl, ttl)) \
    X(int, rsv_checkout_status_start, (rsv_ctx *c, uint64_t shop, const void *t, size_t tl, int32_t *st, int64_t *units, int64_t *exp), (c, shop, t, tl, st, units, exp)) \
    X(int, rsv_cont, (rsv_ctx *c), (c)) \
    X(int, rsv_async_fd, (rsv_ctx *c), (c)) \
    X(int, rsv_cancel, (rsv_ctx *c), (c)) \
    X(int, rsv_reserve_cart_batch, (rsv_ctx *c, size_t n, const uint64_t *shops, const void *const *t, const size_t *tl, rsv_cart *const *carts, int64_t ttl, int *res), (c, n, shops, t, tl, carts, ttl, res)) \
    X(int, rsv_reserve_batch, (rsv_ctx *c, size_t n, const uint64_t *shops, const void *const *t, const size_t *tl, const uint64_t *items, const uint64_t *locs, const int64_t *q, int64_t ttl, int *res), (c, n, shops, t, tl, items, locs, q, ttl, res)) \
    X(int, rsv_claim_batch, (rsv_ctx *c, size_t n, const uint64_t *shops, const void *const *t, const size_t *tl, int *res), (c, n, shops, t, tl, res)) \
    X(int, rsv_release_batch, (rsv_ctx *c, size_t n, const uint64_t *shops, const void *const *t, const size_t *tl, int *res), (c, n, shops, t, tl, res)) \
    X(int, rsv_batcher_open, (rsv_batcher **out, const char *dsn, const rsv_options *o, uint32_t n), (out, dsn, o, n)) \
    X(int, rsv_batcher_reserve_one_start, (rsv_batcher *b, uint64_t shop, const void *t, size_t tl, uint64_t item, uint64_t loc, int64_t q, int64_t ttl, rsv_batcher_call **out), (b, shop, t, tl, item, loc, q, ttl, out)) \
    X(int, rsv_batcher_reserve_start, (rsv_batcher *b, uint64_t shop, const void *t, size_t tl, rsv_cart *cart, int64_t ttl, rsv_batcher_call **out), (b, shop, t, tl, cart, ttl, out)) \
    X(int, rsv_batcher_claim_start, (rsv_batcher *b, uint64_t shop, const void *t, size_t tl, rsv_batcher_call **out), (b, shop, t, tl, out)) \
    X(int, rsv_batcher_release_start, (rsv_batcher *b, uint64_t shop, const void *t, size_t tl, rsv_batcher_call **out), (b, shop, t, tl, out)) \
    X(int, rsv_batcher_fd, (const rsv_batcher *b), (b)) \
    X(int, rsv_batcher_next_done, (rsv_batcher *b, rsv_batcher_call **done, int *code), (b, done, code)) \
    X(int, rsv_batcher_stats_get, (const rsv_batcher *b, uint32_t s, uint32_t op, uint64_t *out), (b, s, op, out)) \
    X(int, rsv_replenish, (rsv_ctx *c, uint64_t shop, uint64_t item, uint64_t loc, int64_t *out), (c, shop, item, loc, out)) \
    X(int, rsv_pool_drain, (rsv_ctx *c, uint64_t shop, uint64_t item, uint64_t loc, int64_t *out), (c, shop, item, loc, out)) \
    X(int, rsv_sweep, (rsv_ctx *c, uint64_t shop, int64_t max, int64_t *out), (c, shop, max, out)) \
    X(int, rsv_stock_set, (rsv_ctx *c, uint64_t shop, uint64_t item, uint64_t loc, int64_t on_hand), (c, shop, item, loc, on_hand)) \
    X(int, rsv_stock_adjust, (rsv_ctx *c, uint64_t shop, uint64_t item, uint64_t loc, int64_t delta, int64_t *out), (c, shop, item, loc, delta, out)) \
    X(int, rsv_stock_get, (rsv_ctx *c, uint64_t shop, uint64_t item, uint64_t loc, int64_t *on_hand, int64_t *held, int64_t *pooled, int64_t *avail), (c, shop, item, loc, on_hand, held, pooled, avail)) \
    X(int, rsv_audit, (rsv_ctx *c, uint64_t shop, int all, rsv_audit_fn fn, void *arg, int64_t *out), (c, shop, all, fn, arg, out)) \
    X(int, rsv_stats_get, (const rsv_ctx *c, uint32_t s, uint32_t op, uint64_t *out), (c, s, op, out)) \
    X(int, rsv_set_enabled, (rsv_ctx *c, int on), (c, on)) \
    X(int, rsv_stats_snapshot_new, (rsv_stats_snapshot **out), (out)) \
    X(int, rsv_stats_snapshot_add, (rsv_stats_snapshot *s, const rsv_ctx *c), (s, c)) \
    X(int, rsv_batcher_stats_snapshot_add, (rsv_stats_snapshot *s, const rsv_batcher *b), (s, b)) \
    X(int, rsv_stats_prometheus, (const rsv_stats_snapshot *s, const char *labels, char *buf, size_t len, size_t *needed), (s, labels, buf, len, needed))

#define RSVGO_VOIDS(X) \
    X(rsv_close, (rsv_ctx *c), (c)) \
    X(rsv_cart_free, (rsv_cart *cart), (cart)) \
    X(rsv_batcher_close, (rsv_batcher *b), (b)) \
    X(rsv_batcher_call_free, (rsv_batcher_call *call), (call)) \
    X(rsv_stats_snapshot_free, (rsv_stats_snapshot *s), (s))

/* The migration handle (reserve/migrate.h), resolved apart: a library
 * without it still loads, and only OpenMigration says what is missing. */
#define RSVGO_MIGRATE_FUNCS(X) \
    X(int, rsv_migrate_open, (rsv_migration **out, rsv_ctx *c, const char *dsn, uint32_t qmax), (out, c, dsn, qmax)) \
    X(int, rsv_migrate_set_legacy, (rsv_migration *m, rsv_legacy_fn fn, void *user), (m, fn, user)) \
    X(int, rsv_migrate_reserve_one, (rsv_migration *m, uint64_t shop, const void *t, size_t tl, uint64_t item, uint64_t loc, int64_t q, int64_t ttl), (m, shop, t, tl, item, loc, q, ttl)) \
    X(int, rsv_migrate_claim, (rsv_migration *m, uint64_t shop, const void *t, size_t tl), (m, shop, t, tl)) \
    X(int, rsv_migrate_release, (rsv_migration *m, uint64_t shop, const void *t, size_t tl), (m, shop, t, tl)) \
    X(int, rsv_migrate_set_refresh_ms, (rsv_migration *m, uint32_t ms), (m, ms)) \
    X(int, rsv_migrate_stage, (rsv_migration *m, uint64_t shop, int32_t *st), (m, shop, st)) \
    X(int, rsv_migrate_stat, (rsv_migration *m, uint64_t shop, int32_t all, uint32_t s, uint64_t *out), (m, shop, all, s, out)) \
    X(int, rsv_migrate_drain, (rsv_migration *m, uint32_t ms), (m, ms)) \
    X(int, rsv_migrate_prometheus, (rsv_migration *m, char *buf, size_t cap, size_t *needed), (m, buf, cap, needed))

#define RSVGO_MIGRATE_VOIDS(X) \
    X(rsv_migrate_close, (rsv_migration *m), (m))

#define RSVGO_DECLARE(ret, name, params, args) ret go_##name params;
#define RSVGO_DECLARE_VOID(name, params, args) void go_##name params;
RSVGO_FUNCS(RSVGO_DECLARE)
RSVGO_VOIDS(RSVGO_DECLARE_VOID)
RSVGO_MIGRATE_FUNCS(RSVGO_DECLARE)
RSVGO_MIGRATE_VOIDS(RSVGO_DECLARE_VOID)

/* Load the library at path (a file name the dynamic loader searches for
 * when it has no slash) and resolve every function above.  Returns 0, or
 * -1 with the reason in err.  Call once; not thread-safe (the Go side
 * serialises it). */
int rsvgo_load(const char *path, char *err, size_t errlen);

/* The out-values of rsv_checkout_status_start, in C memory: the
 * library's worker writes them after the start has returned. */
typedef struct rsvgo_status {
    int32_t status;
    int64_t units, expires_in_ms;
} rsvgo_status;

/* Wait up to timeout_ms for fd to be readable: 1 readable, 0 not yet, -1
 * error (errno).  Only when the Go runtime cannot poll the descriptor. */
int rsvgo_wait(int fd, int timeout_ms);

/* rsv_audit with each violation passed to the Go side, with handle (a
 * cgo.Handle of the Go value collecting them). */
int rsvgo_audit(rsv_ctx *c, uint64_t shop, int all, uintptr_t handle);

/* The first migration function the loaded library lacks, or NULL when
 * it has them all. */
const char *rsvgo_migrate_missing(void);

/* rsv_migrate_set_legacy with the Go side's old store: handle is the
 * cgo.Handle of its state, passed back to it on every call; on 0 removes
 * it. */
int rsvgo_migrate_set_legacy(rsv_migration *m, uintptr_t handle, int on);

/* rsv_migrate_reserve_one, _claim or _release by op (RSV_OP_*).  call
 * (a cgo.Handle, non-zero) reaches the Go side with every call of the old
 * store made on this thread while it runs, so that the caller learns
 * what the old store said when it decided the answer. */
int rsvgo_migrate_call(rsv_migration *m, uint32_t op, uint64_t shop,
                       const void *t, size_t tl, uint64_t item, uint64_t loc,
                       int64_t q, int64_t ttl, uintptr_t call);

#endif
