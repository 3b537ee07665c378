'use strict';
// The libreserve C library as koffi sees it: which libreserve.so is loaded,
// its types and the prototypes of the functions this package calls.  Shared
// by the main thread (index.js) and the binding's own threads (runner.js),
// which load the same file.
//
// Which libreserve.so is loaded (first match wins):
//   1. $LIBRESERVE_PATH: the library file, or a directory holding
//      libreserve.so.0 / libreserve.so (nothing else is tried then);
//   2. the directory `pkg-config --variable=libdir reserve` reports;
//   3. libreserve.so.0 as the system's dynamic loader finds it
//      (LD_LIBRARY_PATH, the ldconfig cache);
//   4. the in-tree build: build/libreserve.so of the source tree holding
//      this package (when it is used from a checkout).
// When none loads, require() throws LibraryNotFound naming each place.

const fs = require('node:fs');
const path = require('node:path');

let koffi;
try {
  koffi = require('koffi');
} catch (e) {
  throw new Error('libreserve: cannot load the koffi package (npm install koffi): ' + e.message);
}

// ---------------------------------------------------------------------------
// Loading the library
// ---------------------------------------------------------------------------

function sourceTree() {
  // bindings/node/ in a checkout: the tree has include/reserve.h.
  let d = __dirname;
  for (let i = 0; i < 4; i++) {
    d = path.dirname(d);
    if (fs.existsSync(path.join(d, 'include', 'reserve.h')) &&
        fs.existsSync(path.join(d, 'sql', 'schema.sql')))
      return d;
  }
  return null;
}

const SOURCE_TREE = sourceTree();

// The library could not be loaded: tried lists each place looked in and
// why it failed, in order.
class LibraryNotFound extends Error {
  constructor(tried) {
    super('libreserve: cannot load the C library libreserve.so.0; tried ' + tried.join('; ') +
      '.  Install it (make install), or set LIBRESERVE_PATH to the library or its directory, ' +
      'or PKG_CONFIG_PATH to the directory of reserve.pc');
    this.tried = tried;
    this.code = 'RSV_LIBRARY_NOT_FOUND';
  }

  get name() {
    return 'LibraryNotFound';
  }
}

function inDir(d) {
  for (const n of ['libreserve.so.0', 'libreserve.so']) {
    const p = path.join(d, n);
    if (fs.existsSync(p)) return p;
  }
  return null;
}

function pkgConfigLibdir(tried) {
  const { spawnSync } = require('node:child_process');
  const r = spawnSync(process.env.PKG_CONFIG || 'pkg-config', ['--variable=libdir', 'reserve'],
    { encoding: 'utf8', timeout: 30000 });
  if (r.error) {
    tried.push(`pkg-config (${r.error.message})`);
    return null;
  }
  const libdir = (r.stdout || '').trim();
  if (r.status !== 0 || !libdir) {
    tried.push('pkg-config --variable=libdir reserve (no reserve.pc in its search path)');
    return null;
  }
  return libdir;
}

function tryLoad(file, where, tried) {
  try {
    return { lib: koffi.load(file), name: file };
  } catch (e) {
    tried.push(`${where}: ${file} (${e.message})`);
    return null;
  }
}

function loadLibrary() {
  const tried = [];
  const env = process.env.LIBRESERVE_PATH;
  if (env) {
    let st = null;
    try { st = fs.statSync(env); } catch { /* a file name the loader reports on */ }
    const file = st && st.isDirectory() ? inDir(env) : env;
    if (!file) throw new LibraryNotFound([`LIBRESERVE_PATH=${env} (no libreserve.so.0 or libreserve.so in that directory)`]);
    const got = tryLoad(file, 'LIBRESERVE_PATH', tried); // explicit: nothing else is tried
    if (got) return got;
    throw new LibraryNotFound(tried);
  }
  tried.push('LIBRESERVE_PATH (not set)');
  const libdir = pkgConfigLibdir(tried);
  if (libdir) {
    const file = inDir(libdir);
    const got = file ? tryLoad(file, "pkg-config's libdir", tried) : null;
    if (got) return got;
    if (!file) tried.push(`pkg-config's libdir ${libdir} (no libreserve.so.0 there)`);
  }
  let got = tryLoad('libreserve.so.0', 'the system loader', tried);
  if (got) return got;
  if (SOURCE_TREE) {
    const file = path.join(SOURCE_TREE, 'build', 'libreserve.so');
    if (fs.existsSync(file)) {
      got = tryLoad(file, "the source tree's build", tried);
      if (got) return got;
    }
  }
  throw new LibraryNotFound(tried);
}

const { lib, name: LIB_NAME } = loadLibrary();

// ---- types and prototypes ----
koffi.opaque('rsv_ctx');
koffi.opaque('rsv_cart');
koffi.opaque('rsv_stats_snapshot');
koffi.opaque('rsv_batcher');
koffi.opaque('rsv_batcher_call');
koffi.opaque('rsv_migration');
const Options = koffi.struct('rsv_options', {
  version: 'uint',
  flags: 'uint32_t',
  pool_cap: 'int64_t',
  refill_low_water: 'int64_t',
  hold_ttl_ms: 'int64_t',
  max_retries: 'int32_t',
  retry_base_us: 'int32_t',
  lock_wait_timeout_s: 'int32_t',
  conn_tag_prefix: 'const char *',
  settled_retention_s: 'int64_t',
  pool_idle_s: 'int64_t',
  call_timeout_ms: 'int64_t',
  stmt_cache_max: 'int32_t',
});
koffi.proto('void rsv_audit_fn(void *arg, uint64_t shop_id, uint64_t item_id, ' +
  'uint64_t location_id, const char *problem)');

const PROTOS = [
  'const char *rsv_version(void)',
  'int rsv_version_number(void)',
  'int rsv_schema_version(void)',
  'const char *rsv_strerror(int code)',
  'const char *rsv_code_name(int code)',
  'int rsv_options_init(_Out_ rsv_options *opts, unsigned int version)',
  'size_t rsv_options_size(void)',
  'int rsv_open_dsn(_Out_ rsv_ctx **out, const char *dsn, const rsv_options *opts)',
  'int rsv_reconnect(rsv_ctx *ctx)',
  'void rsv_close(rsv_ctx *ctx)',
  'const char *rsv_errmsg(const rsv_ctx *ctx)',
  'int rsv_cart_new(_Out_ rsv_cart **out)',
  'void rsv_cart_free(rsv_cart *cart)',
  'int rsv_cart_add(rsv_cart *cart, uint64_t item_id, const uint64_t *location_ids, ' +
    'size_t n_locations, int64_t quantity, uint32_t flags)',
  'int rsv_cart_allocation_count(const rsv_cart *cart, size_t line, _Out_ size_t *count)',
  'int rsv_cart_allocation(const rsv_cart *cart, size_t line, size_t idx, ' +
    '_Out_ uint64_t *location, _Out_ int64_t *quantity)',
  'size_t rsv_cart_failed_line(const rsv_cart *cart)',
  'int rsv_reserve(rsv_ctx *ctx, uint64_t shop_id, const void *token, size_t token_len, ' +
    'rsv_cart *cart, int64_t ttl_ms)',
  'int rsv_reserve_one(rsv_ctx *ctx, uint64_t shop_id, const void *token, size_t token_len, ' +
    'uint64_t item_id, uint64_t location_id, int64_t quantity, int64_t ttl_ms)',
  'int rsv_claim(rsv_ctx *ctx, uint64_t shop_id, const void *token, size_t token_len)',
  'int rsv_release(rsv_ctx *ctx, uint64_t shop_id, const void *token, size_t token_len)',
  'int rsv_extend(rsv_ctx *ctx, uint64_t shop_id, const void *token, size_t token_len, ' +
    'int64_t ttl_ms)',
  'int rsv_checkout_status(rsv_ctx *ctx, uint64_t shop_id, const void *token, ' +
    'size_t token_len, _Out_ int32_t *status, _Out_ int64_t *units, _Out_ int64_t *expires_in_ms)',
  'int rsv_replenish(rsv_ctx *ctx, uint64_t shop_id, uint64_t item_id, uint64_t location_id, ' +
    '_Out_ int64_t *added)',
  'int rsv_pool_drain(rsv_ctx *ctx, uint64_t shop_id, uint64_t item_id, uint64_t location_id, ' +
    '_Out_ int64_t *units)',
  'int rsv_sweep(rsv_ctx *ctx, uint64_t shop_id, int64_t max_holds, _Out_ int64_t *released)',
  'int rsv_stock_set(rsv_ctx *ctx, uint64_t shop_id, uint64_t item_id, uint64_t location_id, ' +
    'int64_t on_hand)',
  'int rsv_stock_adjust(rsv_ctx *ctx, uint64_t shop_id, uint64_t item_id, ' +
    'uint64_t location_id, int64_t delta, _Out_ int64_t *on_hand)',
  'int rsv_stock_get(rsv_ctx *ctx, uint64_t shop_id, uint64_t item_id, uint64_t location_id, ' +
    '_Out_ int64_t *on_hand, _Out_ int64_t *held, _Out_ int64_t *pooled, _Out_ int64_t *available)',
  'int rsv_audit(rsv_ctx *ctx, uint64_t shop_id, int all_shops, rsv_audit_fn *fn, void *arg, ' +
    '_Out_ int64_t *violations)',
  'int rsv_stats_get(const rsv_ctx *ctx, uint32_t stat, uint32_t op, _Out_ uint64_t *out)',
  'int rsv_stats_snapshot_new(_Out_ rsv_stats_snapshot **out)',
  'void rsv_stats_snapshot_free(rsv_stats_snapshot *snap)',
  'int rsv_stats_snapshot_add(rsv_stats_snapshot *snap, const rsv_ctx *ctx)',
  'int rsv_stats_prometheus(const rsv_stats_snapshot *snap, const char *labels, ' +
    'uint8_t *buf, size_t len, _Out_ size_t *needed)',
  'int rsv_set_enabled(rsv_ctx *ctx, int enabled)',
  'int rsv_reserve_batch(rsv_ctx *ctx, size_t n, const uint64_t *shop_ids, ' +
    'const void **tokens, const size_t *token_lens, const uint64_t *item_ids, ' +
    'const uint64_t *location_ids, const int64_t *quantities, int64_t ttl_ms, int *results)',
  // the carts cross to the runner thread as their addresses (runner.js)
  'int rsv_reserve_cart_batch(rsv_ctx *ctx, size_t n, const uint64_t *shop_ids, ' +
    'const void **tokens, const size_t *token_lens, const uint64_t *carts, int64_t ttl_ms, ' +
    'int *results)',
  'int rsv_claim_batch(rsv_ctx *ctx, size_t n, const uint64_t *shop_ids, ' +
    'const void **tokens, const size_t *token_lens, int *results)',
  'int rsv_release_batch(rsv_ctx *ctx, size_t n, const uint64_t *shop_ids, ' +
    'const void **tokens, const size_t *token_lens, int *results)',
  'int rsv_batcher_open(_Out_ rsv_batcher **out, const char *dsn, const rsv_options *opts, ' +
    'uint32_t connections)',
  'void rsv_batcher_close(rsv_batcher *b)',
  'int rsv_batcher_reserve_one_start(rsv_batcher *b, uint64_t shop_id, const void *token, ' +
    'size_t token_len, uint64_t item_id, uint64_t location_id, int64_t quantity, ' +
    'int64_t ttl_ms, _Out_ rsv_batcher_call **out)',
  'int rsv_batcher_reserve_start(rsv_batcher *b, uint64_t shop_id, const void *token, ' +
    'size_t token_len, rsv_cart *cart, int64_t ttl_ms, _Out_ rsv_batcher_call **out)',
  'int rsv_batcher_claim_start(rsv_batcher *b, uint64_t shop_id, const void *token, ' +
    'size_t token_len, _Out_ rsv_batcher_call **out)',
  'int rsv_batcher_release_start(rsv_batcher *b, uint64_t shop_id, const void *token, ' +
    'size_t token_len, _Out_ rsv_batcher_call **out)',
  'int rsv_batcher_fd(const rsv_batcher *b)',
  'int rsv_batcher_next_done(rsv_batcher *b, _Out_ rsv_batcher_call **done, _Out_ int *code)',
  'void rsv_batcher_call_free(rsv_batcher_call *call)',
  'int rsv_batcher_stats_get(const rsv_batcher *b, uint32_t stat, uint32_t op, ' +
    '_Out_ uint64_t *out)',
  // The non-blocking interface: the context's calls that wait on the
  // server start here and finish when its descriptor is readable.  The
  // out-pointers of rsv_checkout_status_start are written later, so they
  // are typed arrays the caller keeps (never copied by koffi).
  'int rsv_reserve_start(rsv_ctx *ctx, uint64_t shop_id, const void *token, ' +
    'size_t token_len, rsv_cart *cart, int64_t ttl_ms)',
  'int rsv_reserve_one_start(rsv_ctx *ctx, uint64_t shop_id, const void *token, ' +
    'size_t token_len, uint64_t item_id, uint64_t location_id, int64_t quantity, int64_t ttl_ms)',
  'int rsv_claim_start(rsv_ctx *ctx, uint64_t shop_id, const void *token, size_t token_len)',
  'int rsv_release_start(rsv_ctx *ctx, uint64_t shop_id, const void *token, size_t token_len)',
  'int rsv_extend_start(rsv_ctx *ctx, uint64_t shop_id, const void *token, size_t token_len, ' +
    'int64_t ttl_ms)',
  'int rsv_checkout_status_start(rsv_ctx *ctx, uint64_t shop_id, const void *token, ' +
    'size_t token_len, int32_t *status, int64_t *units, int64_t *expires_in_ms)',
  'int rsv_cont(rsv_ctx *ctx)',
  'int rsv_async_fd(rsv_ctx *ctx)',
  // The migration handle (reserve/migrate.h), through its handover
  // calls: the old store is asked by the package, never called from C.
  'int rsv_migrate_open(_Out_ rsv_migration **out, rsv_ctx *ctx, const char *shadow_dsn, ' +
    'uint32_t queue_max)',
  'void rsv_migrate_close(rsv_migration *m)',
  'int rsv_migrate_set_refresh_ms(rsv_migration *m, uint32_t ms)',
  'int rsv_migrate_route(rsv_migration *m, uint64_t shop_id, uint32_t flags, _Out_ int32_t *stage)',
  'int rsv_migrate_reserve_one_answered(rsv_migration *m, int32_t stage, uint64_t shop_id, ' +
    'const void *token, size_t token_len, uint64_t item_id, uint64_t location_id, ' +
    'int64_t quantity, int64_t ttl_ms, int32_t old_answer)',
  'int rsv_migrate_claim_answered(rsv_migration *m, int32_t stage, uint64_t shop_id, ' +
    'const void *token, size_t token_len, int32_t old_answer)',
  'int rsv_migrate_release_answered(rsv_migration *m, int32_t stage, uint64_t shop_id, ' +
    'const void *token, size_t token_len, int32_t old_answer)',
  'int rsv_migrate_mirror_next(rsv_migration *m, uint32_t timeout_ms, _Out_ uint64_t *ticket, ' +
    '_Out_ uint32_t *op, _Out_ uint64_t *shop_id, void *token, size_t token_cap, ' +
    '_Out_ size_t *token_len, _Out_ uint64_t *item_id, _Out_ uint64_t *location_id, ' +
    '_Out_ int64_t *quantity, _Out_ int64_t *ttl_ms)',
  'int rsv_migrate_mirror_done(rsv_migration *m, uint64_t ticket, int32_t old_answer)',
  'int rsv_migrate_stage(rsv_migration *m, uint64_t shop_id, _Out_ int32_t *stage)',
  'int rsv_migrate_stat(rsv_migration *m, uint64_t shop_id, int32_t all_shops, uint32_t stat, ' +
    '_Out_ uint64_t *out)',
  'int rsv_migrate_drain(rsv_migration *m, uint32_t timeout_ms)',
  'int rsv_migrate_prometheus(rsv_migration *m, uint8_t *buf, size_t cap, _Out_ size_t *needed)',
];

const C = {};
for (const proto of PROTOS) {
  const fn = lib.func(proto);
  C[/(\w+)\(/.exec(proto)[1]] = fn;
}

if (Number(C.rsv_options_size()) < koffi.sizeof(Options)) {
  throw new Error(`libreserve: ${LIB_NAME} has a smaller rsv_options ` +
    `(${C.rsv_options_size()} bytes) than this package expects (${koffi.sizeof(Options)})`);
}

module.exports = { koffi, C, Options, LIB_NAME, SOURCE_TREE, LibraryNotFound };
