/*
 * libreserve.h - the declarations PHP's FFI reads (FFI::cdef, or FFI::load
 * when preloaded): the functions of include/reserve.h and its sub-headers
 * this package calls, copied exactly (tests/HeaderTest.php compares every
 * prototype and struct with the installed headers), with the connection
 * type left opaque.  FFI has no preprocessor: no includes, no macros;
 * the constants the package needs are PHP enums and class constants.
 */

typedef struct rsv_ctx rsv_ctx;
typedef struct rsv_cart rsv_cart;
typedef struct rsv_stats_snapshot rsv_stats_snapshot;

typedef struct rsv_options {
    unsigned int version;
    uint32_t flags;
    int64_t pool_cap;
    int64_t refill_low_water;
    int64_t hold_ttl_ms;
    int32_t max_retries;
    int32_t retry_base_us;
    int32_t lock_wait_timeout_s;
    const char *conn_tag_prefix;
    int64_t settled_retention_s;
    int64_t pool_idle_s;
    int64_t call_timeout_ms;
    int32_t stmt_cache_max;
} rsv_options;

typedef struct rsv_sweep_result {
    uint32_t version;
    int64_t holds_released;
    int64_t units_released;
    int64_t journal_folded;
    int64_t pool_rows_drained;
    int64_t checkouts_purged;
} rsv_sweep_result;

typedef void (*rsv_audit_fn)(void *arg, uint64_t shop_id, uint64_t item_id,
                             uint64_t location_id, const char *problem);

const char *rsv_version(void);
int rsv_version_number(void);
int rsv_schema_version(void);
const char *rsv_schema_procedure(size_t index);
const char *rsv_strerror(int code);
const char *rsv_code_name(int code);

int rsv_options_init(rsv_options *opts, unsigned int version);
size_t rsv_options_size(void);

int rsv_open_dsn(rsv_ctx **out, const char *dsn, const rsv_options *opts);
int rsv_reconnect(rsv_ctx *ctx);
void rsv_close(rsv_ctx *ctx);
const char *rsv_errmsg(const rsv_ctx *ctx);
int rsv_errcode(const rsv_ctx *ctx);

int rsv_cart_new(rsv_cart **out);
void rsv_cart_free(rsv_cart *cart);
void rsv_cart_clear(rsv_cart *cart);
int rsv_cart_add(rsv_cart *cart, uint64_t item_id,
                 const uint64_t *location_ids, size_t n_locations,
                 int64_t quantity, uint32_t flags);
size_t rsv_cart_lines(const rsv_cart *cart);
int rsv_cart_allocation_count(const rsv_cart *cart, size_t line,
                              size_t *count_out);
int rsv_cart_allocation(const rsv_cart *cart, size_t line, size_t idx,
                        uint64_t *location_out, int64_t *quantity_out);
size_t rsv_cart_failed_line(const rsv_cart *cart);

int rsv_reserve(rsv_ctx *ctx, uint64_t shop_id, const void *token,
                size_t token_len, rsv_cart *cart, int64_t ttl_ms);
int rsv_reserve_one(rsv_ctx *ctx, uint64_t shop_id, const void *token,
                    size_t token_len, uint64_t item_id, uint64_t location_id,
                    int64_t quantity, int64_t ttl_ms);
int rsv_claim(rsv_ctx *ctx, uint64_t shop_id, const void *token,
              size_t token_len);
int rsv_release(rsv_ctx *ctx, uint64_t shop_id, const void *token,
                size_t token_len);
int rsv_extend(rsv_ctx *ctx, uint64_t shop_id, const void *token,
               size_t token_len, int64_t ttl_ms);
int rsv_checkout_status(rsv_ctx *ctx, uint64_t shop_id, const void *token,
                        size_t token_len, int32_t *status_out,
                        int64_t *units_out, int64_t *expires_in_ms_out);

int rsv_replenish(rsv_ctx *ctx, uint64_t shop_id, uint64_t item_id,
                  uint64_t location_id, int64_t *added_out);
int rsv_pool_drain(rsv_ctx *ctx, uint64_t shop_id, uint64_t item_id,
                   uint64_t location_id, int64_t *units_out);
int rsv_sweep(rsv_ctx *ctx, uint64_t shop_id, int64_t max_holds,
              int64_t *released_out);
int rsv_sweep_report(rsv_ctx *ctx, uint64_t shop_id, int64_t max_holds,
                     rsv_sweep_result *result);
int rsv_stock_set(rsv_ctx *ctx, uint64_t shop_id, uint64_t item_id,
                  uint64_t location_id, int64_t on_hand);
int rsv_stock_adjust(rsv_ctx *ctx, uint64_t shop_id, uint64_t item_id,
                     uint64_t location_id, int64_t delta,
                     int64_t *on_hand_out);
int rsv_stock_get(rsv_ctx *ctx, uint64_t shop_id, uint64_t item_id,
                  uint64_t location_id, int64_t *on_hand_out,
                  int64_t *held_out, int64_t *pooled_out,
                  int64_t *available_out);

int rsv_audit(rsv_ctx *ctx, uint64_t shop_id, int all_shops,
              rsv_audit_fn fn, void *arg, int64_t *violations_out);
int rsv_set_enabled(rsv_ctx *ctx, int enabled);

int rsv_reserve_batch(rsv_ctx *ctx, size_t n, const uint64_t *shop_ids,
                      const void *const *tokens, const size_t *token_lens,
                      const uint64_t *item_ids, const uint64_t *location_ids,
                      const int64_t *quantities, int64_t ttl_ms,
                      int *results);
int rsv_reserve_cart_batch(rsv_ctx *ctx, size_t n, const uint64_t *shop_ids,
                           const void *const *tokens,
                           const size_t *token_lens, rsv_cart *const *carts,
                           int64_t ttl_ms, int *results);
int rsv_claim_batch(rsv_ctx *ctx, size_t n, const uint64_t *shop_ids,
                    const void *const *tokens, const size_t *token_lens,
                    int *results);
int rsv_release_batch(rsv_ctx *ctx, size_t n, const uint64_t *shop_ids,
                      const void *const *tokens, const size_t *token_lens,
                      int *results);

int rsv_stats_get(const rsv_ctx *ctx, uint32_t stat, uint32_t op,
                  uint64_t *out);
int rsv_stats_outcome(const rsv_ctx *ctx, uint32_t op, int code,
                      uint64_t *out);
int rsv_stats_percentile(const rsv_ctx *ctx, uint32_t op, double p,
                         uint64_t *us_out);
int rsv_stats_reset(rsv_ctx *ctx);
int rsv_stats_snapshot_new(rsv_stats_snapshot **out);
void rsv_stats_snapshot_free(rsv_stats_snapshot *snap);
int rsv_stats_snapshot_add(rsv_stats_snapshot *snap, const rsv_ctx *ctx);
int rsv_stats_prometheus(const rsv_stats_snapshot *snap, const char *labels,
                         char *buf, size_t len, size_t *needed_out);

/* reserve/migrate.h: the migration handle through its handover calls
 * only (PHP cannot take a call on the handle's thread). */
typedef struct rsv_migration rsv_migration;

int rsv_migrate_open(rsv_migration **out, rsv_ctx *ctx,
                     const char *shadow_dsn, uint32_t queue_max);
void rsv_migrate_close(rsv_migration *m);
int rsv_migrate_set_refresh_ms(rsv_migration *m, uint32_t ms);
int rsv_migrate_route(rsv_migration *m, uint64_t shop_id, uint32_t flags,
                      int32_t *stage);
int rsv_migrate_reserve_one_answered(
    rsv_migration *m, int32_t stage, uint64_t shop_id, const void *token,
    size_t token_len, uint64_t item_id, uint64_t location_id,
    int64_t quantity, int64_t ttl_ms, int32_t old_answer);
int rsv_migrate_claim_answered(rsv_migration *m, int32_t stage,
                               uint64_t shop_id, const void *token,
                               size_t token_len, int32_t old_answer);
int rsv_migrate_release_answered(rsv_migration *m, int32_t stage,
                                 uint64_t shop_id, const void *token,
                                 size_t token_len, int32_t old_answer);
int rsv_migrate_mirror_next(rsv_migration *m, uint32_t timeout_ms,
                            uint64_t *ticket, uint32_t *op,
                            uint64_t *shop_id, void *token,
                            size_t token_cap, size_t *token_len,
                            uint64_t *item_id, uint64_t *location_id,
                            int64_t *quantity, int64_t *ttl_ms);
int rsv_migrate_mirror_done(rsv_migration *m, uint64_t ticket,
                            int32_t old_answer);
int rsv_migrate_stage(rsv_migration *m, uint64_t shop_id, int32_t *stage);
int rsv_migrate_stat(rsv_migration *m, uint64_t shop_id, int32_t all_shops,
                     uint32_t stat, uint64_t *out);
int rsv_migrate_drain(rsv_migration *m, uint32_t timeout_ms);
int rsv_migrate_prometheus(rsv_migration *m, char *buf, size_t cap,
                           size_t *needed);

/* The C library's environment, where Context::persistent() keeps the
 * address of a worker's context across requests: plain PHP has no other
 * memory of its own that outlives a request. */
char *getenv(const char *name);
int setenv(const char *name, const char *value, int overwrite);
int unsetenv(const char *name);
