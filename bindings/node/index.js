'use strict';
// libreserve for Node.js: the libreserve C library through koffi (FFI).
//
// Every call on a context returns a promise and runs the C function on a
// worker thread (koffi's func.async), so the event loop never waits for
// the database.  A context is single-threaded, so calls on one context are
// queued and run one at a time, in the order they were made; different
// contexts run in parallel (up to the size of libuv's thread pool,
// UV_THREADPOOL_SIZE, default 4).  A Batcher's calls are not bound by that
// pool: each is queued at once in the C batcher, which coalesces them.
//
// Which libreserve.so is loaded (first match wins):
//   1. $LIBRESERVE_PATH: the library file, or a directory holding
//      libreserve.so.0 / libreserve.so;
//   2. the installed one: libreserve.so.0 as the dynamic loader finds it
//      (LD_LIBRARY_PATH, the ldconfig cache), then /usr/local/lib,
//      /usr/local/lib/<multiarch>, /usr/lib/<multiarch>, /usr/lib;
//   3. the in-tree build: build/libreserve.so of the source tree holding
//      this package (when it is used from a checkout).

const fs = require('node:fs');
const path = require('node:path');

let koffi;
try {
  koffi = require('koffi');
} catch (e) {
  throw new Error('libreserve: cannot load the koffi package (npm install koffi): ' + e.message);
}

// ---------------------------------------------------------------------------
// Constants (mirroring reserve.h)
// ---------------------------------------------------------------------------

const codes = Object.freeze({
  OK: 0,
  EOUTOFSTOCK: -1, ENOTFOUND: -2, EEXPIRED: -3, ECLAIMED: -4, ERELEASED: -5,
  EBUSY: -6, EINDOUBT: -7, ECONN: -8, EINVAL: -10, EQUANTITY: -11,
  EEMPTY: -12, ETOKEN: -13, ENOITEM: -14, ESCHEMA: -15, ESERVER: -16,
  EINTXN: -17, ENOMEM: -18, EDB: -19, ETOOBIG: -20, ESTOCK: -21,
  ECONFIG: -22, ERANGE: -23, EDISABLED: -24, ESCHEMAVER: -25, ECANCELED: -26,
  ENOTPRIMARY: -27,
});

const TOKEN_MAX = 128;
const QUANTITY_MAX = 1000000000;
const CART_MAX_LINES = 1000;
const LINE_MAX_LOCATIONS = 16;
const BATCH_MAX = 256;
const BATCHER_MAX_CONNECTIONS = 64;
const LINE_SPLIT = 0x1;
const OPTIONS_VERSION = 1;
const PENDING = 1; // RSV_PENDING: a non-blocking call was started

const OPT = Object.freeze({
  NO_PROACTIVE_REFILL: 0x2,
});

const STATUS = Object.freeze({ 1: 'held', 2: 'claimed', 3: 'released', 4: 'expired' });

// enum rsv_op_kind and enum rsv_stat, by name
const OPS = Object.freeze(['all', 'reserve', 'claim', 'release', 'extend', 'status',
  'replenish', 'sweep', 'stock', 'audit']);
const STATS = Object.freeze(['calls', 'ok', 'expected', 'failed', 'retries', 'deadlocks',
  'lockWaitTimeouts', 'inlineRefills', 'slowPaths', 'shortReads', 'statements',
  'latencyUs', 'latencyMaxUs', 'oneTrip', 'backToFast', 'ledgerTakes', 'poolDrained',
  'stmtEvictions']);

const U64_MAX = (1n << 64n) - 1n;
const I64_MIN = -(1n << 63n);
const I64_MAX = (1n << 63n) - 1n;
const SIZE_MAX = U64_MAX;

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/** A short text for any code ("out of stock"). */
function strerror(code) {
  return C.rsv_strerror(code);
}

/** The name of a code ("RSV_EOUTOFSTOCK"); null if unknown. */
function codeName(code) {
  return C.rsv_code_name(code);
}

class ReserveError extends Error {
  // code: the RSV_E* number; codeName: 'RSV_EOUTOFSTOCK'; message: the
  // context's rsv_errmsg() (or the code's short text); fn: the C function.
  constructor(code, message, fn) {
    super(message || strerror(code));
    this.code = code;
    this.codeName = codeName(code) || `RSV_UNKNOWN(${code})`;
    this.strerror = strerror(code);
    this.function = fn || null;
  }

  get name() {
    return this.constructor.name;
  }
}

class ExpectedOutcome extends ReserveError {}
class Failure extends ReserveError {}
class OutOfStock extends ExpectedOutcome {}
class NotFound extends ExpectedOutcome {}
class Expired extends ExpectedOutcome {}
class AlreadyClaimed extends ExpectedOutcome {}
class AlreadyReleased extends ExpectedOutcome {}
class Busy extends ExpectedOutcome {}
class InDoubt extends ExpectedOutcome {}
class ConnectionLost extends Failure {}
class InvalidArgument extends Failure {}
class InvalidQuantity extends Failure {}
class EmptyCart extends Failure {}
class InvalidToken extends Failure {}
class NoItem extends Failure {}
class SchemaError extends Failure {}
class UnsupportedServer extends Failure {}
class InTransaction extends Failure {}
class OutOfMemory extends Failure {}
class DatabaseError extends Failure {}
class CartTooBig extends Failure {}
class StockError extends Failure {}
class ConfigError extends Failure {}
class OutOfRange extends Failure {}
class Disabled extends Failure {}
class SchemaVersionError extends Failure {}
class Canceled extends Failure {}
class NotPrimary extends ConnectionLost {}

const ERROR_CLASSES = new Map([
  [codes.EOUTOFSTOCK, OutOfStock], [codes.ENOTFOUND, NotFound], [codes.EEXPIRED, Expired],
  [codes.ECLAIMED, AlreadyClaimed], [codes.ERELEASED, AlreadyReleased], [codes.EBUSY, Busy],
  [codes.EINDOUBT, InDoubt], [codes.ECONN, ConnectionLost], [codes.EINVAL, InvalidArgument],
  [codes.EQUANTITY, InvalidQuantity], [codes.EEMPTY, EmptyCart], [codes.ETOKEN, InvalidToken],
  [codes.ENOITEM, NoItem], [codes.ESCHEMA, SchemaError], [codes.ESERVER, UnsupportedServer],
  [codes.EINTXN, InTransaction], [codes.ENOMEM, OutOfMemory], [codes.EDB, DatabaseError],
  [codes.ETOOBIG, CartTooBig], [codes.ESTOCK, StockError], [codes.ECONFIG, ConfigError],
  [codes.ERANGE, OutOfRange], [codes.EDISABLED, Disabled], [codes.ESCHEMAVER, SchemaVersionError],
  [codes.ECANCELED, Canceled], [codes.ENOTPRIMARY, NotPrimary],
]);

function errorClass(code) {
  return ERROR_CLASSES.get(code) || (code < 0 && code >= -7 ? ExpectedOutcome : Failure);
}

function makeError(code, message, fn) {
  const Cls = errorClass(code);
  return new Cls(code, message, fn);
}

function invalid(message, fn) {
  return new InvalidArgument(codes.EINVAL, message, fn);
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
const MULTIARCH = { x64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu', ia32: 'i386-linux-gnu',
  arm: 'arm-linux-gnueabihf', riscv64: 'riscv64-linux-gnu', ppc64: 'powerpc64le-linux-gnu',
  s390x: 's390x-linux-gnu', loong64: 'loongarch64-linux-gnu' }[process.arch];

function candidates() {
  const env = process.env.LIBRESERVE_PATH;
  if (env) {
    let st = null;
    try { st = fs.statSync(env); } catch { /* a file name the loader reports on */ }
    if (st && st.isDirectory()) {
      for (const n of ['libreserve.so.0', 'libreserve.so']) {
        const p = path.join(env, n);
        if (fs.existsSync(p)) return [p];
      }
      throw new Error(`libreserve: LIBRESERVE_PATH=${env}: no libreserve.so.0 or libreserve.so in that directory`);
    }
    return [env]; // explicit: no fallback to another library
  }
  const out = ['libreserve.so.0'];
  const dirs = ['/usr/local/lib'];
  if (MULTIARCH) dirs.push('/usr/local/lib/' + MULTIARCH, '/usr/lib/' + MULTIARCH);
  dirs.push('/usr/lib');
  for (const d of dirs) {
    const p = path.join(d, 'libreserve.so.0');
    if (fs.existsSync(p)) out.push(p);
  }
  if (SOURCE_TREE) out.push(path.join(SOURCE_TREE, 'build', 'libreserve.so'));
  return out;
}

function loadLibrary() {
  const errors = [];
  for (const c of candidates()) {
    try {
      return { lib: koffi.load(c), name: c };
    } catch (e) {
      errors.push(`${c}: ${e.message}`);
    }
  }
  throw new Error('libreserve: cannot load libreserve (set LIBRESERVE_PATH): ' + errors.join('; '));
}

const { lib, name: LIB_NAME } = loadLibrary();

// ---- types and prototypes ----
koffi.opaque('rsv_ctx');
koffi.opaque('rsv_cart');
koffi.opaque('rsv_stats_snapshot');
koffi.opaque('rsv_batcher');
koffi.opaque('rsv_batcher_call');
koffi.struct('pollfd', { fd: 'int', events: 'short', revents: 'short' });
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
  'int rsv_batcher_claim_start(rsv_batcher *b, uint64_t shop_id, const void *token, ' +
    'size_t token_len, _Out_ rsv_batcher_call **out)',
  'int rsv_batcher_release_start(rsv_batcher *b, uint64_t shop_id, const void *token, ' +
    'size_t token_len, _Out_ rsv_batcher_call **out)',
  'int rsv_batcher_fd(const rsv_batcher *b)',
  'int rsv_batcher_next_done(rsv_batcher *b, _Out_ rsv_batcher_call **done, _Out_ int *code)',
  'void rsv_batcher_call_free(rsv_batcher_call *call)',
  'int rsv_batcher_stats_get(const rsv_batcher *b, uint32_t stat, uint32_t op, ' +
    '_Out_ uint64_t *out)',
  // libc's, found through libreserve.so's own dependencies: the batcher
  // waits on its completion pipe with it (see Batcher).
  'int poll(pollfd *fds, unsigned long nfds, int timeout)',
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

// fn.async as a promise: the C function runs on a worker thread.
function callAsync(fn, ...args) {
  return new Promise((resolve, reject) => {
    fn.async(...args, (err, res) => (err ? reject(err) : resolve(res)));
  });
}

// ---------------------------------------------------------------------------
// Arguments (koffi would silently wrap out-of-range integers)
// ---------------------------------------------------------------------------

function u64(v, what) {
  if (typeof v === 'number' ? Number.isSafeInteger(v) && v >= 0
    : typeof v === 'bigint' && v >= 0n && v <= U64_MAX)
    return v;
  throw invalid(`${what} must be an integer in 0..2**64-1 (a number or a bigint), not ${show(v)}`);
}

function i64(v, what) {
  if (typeof v === 'number' ? Number.isSafeInteger(v)
    : typeof v === 'bigint' && v >= I64_MIN && v <= I64_MAX)
    return v;
  throw invalid(`${what} must be a 64-bit signed integer (a number or a bigint), not ${show(v)}`);
}

function show(v) {
  return typeof v === 'bigint' ? `${v}n` : typeof v === 'string' ? JSON.stringify(v) : String(v);
}

// An unsigned 64-bit value read back from C: a number when it is a safe
// integer, a bigint otherwise (koffi hands some of them over as signed).
function asU64(v) {
  if (typeof v === 'bigint') v = BigInt.asUintN(64, v);
  else if (v < 0) v = BigInt.asUintN(64, BigInt(v));
  return typeof v === 'bigint' && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
}

// [bytes, length] of a token.  A copy (the call runs later); never a NULL
// pointer, so an empty token is the library's "empty token" (RSV_ETOKEN).
function tokenArgs(t) {
  let b;
  if (typeof t === 'string') b = Buffer.from(t, 'utf8');
  else if (t instanceof Uint8Array) b = Buffer.from(t);
  else throw invalid(`token must be a string or a Buffer/Uint8Array, not ${t === null ? 'null' : typeof t}`);
  return [b.length ? b : Buffer.alloc(1), b.length];
}

const OPTION_FIELDS = {
  flags: 'flags', poolCap: 'pool_cap', refillLowWater: 'refill_low_water',
  holdTtlMs: 'hold_ttl_ms', maxRetries: 'max_retries', retryBaseUs: 'retry_base_us',
  lockWaitTimeoutS: 'lock_wait_timeout_s', connTagPrefix: 'conn_tag_prefix',
  settledRetentionS: 'settled_retention_s', poolIdleS: 'pool_idle_s',
  callTimeoutMs: 'call_timeout_ms', stmtCacheMax: 'stmt_cache_max',
};

const INT32 = [-(1n << 31n), (1n << 31n) - 1n];
const FIELD_RANGE = {
  flags: [0n, (1n << 32n) - 1n], max_retries: INT32, retry_base_us: INT32,
  lock_wait_timeout_s: INT32, stmt_cache_max: INT32,
};

function cOptions(options) {
  const o = {};
  const rc = C.rsv_options_init(o, OPTIONS_VERSION);
  if (rc !== 0) throw makeError(rc, 'rsv_options_init failed', 'rsv_options_init');
  for (const [k, v] of Object.entries(options || {})) {
    const field = OPTION_FIELDS[k];
    if (!field) throw invalid(`unknown option ${JSON.stringify(k)}; known: ${Object.keys(OPTION_FIELDS).join(', ')}`, 'rsv_open_dsn');
    if (v === undefined) continue;
    if (field === 'conn_tag_prefix') {
      if (v !== null && typeof v !== 'string') throw invalid('connTagPrefix must be a string or null', 'rsv_open_dsn');
      o[field] = v;
    } else {
      o[field] = i64(v, k);
      const [lo, hi] = FIELD_RANGE[field] || [I64_MIN, I64_MAX];
      if (BigInt(v) < lo || BigInt(v) > hi) throw invalid(`${k} is out of range of its C type (${lo}..${hi}): ${show(v)}`, 'rsv_open_dsn');
    }
  }
  return o;
}

/** The library's default options (rsv_options_init), by their option names. */
function defaultOptions() {
  const o = cOptions({});
  const out = {};
  for (const [k, field] of Object.entries(OPTION_FIELDS)) out[k] = o[field];
  return out;
}

// ---------------------------------------------------------------------------
// Context
// ---------------------------------------------------------------------------

// A context the program dropped without close(): freed (and its connection
// closed) when it is collected.
const finalizer = new FinalizationRegistry((ptr) => C.rsv_close(ptr));

function cartLines(lines) {
  if (!Array.isArray(lines)) throw invalid('lines must be an array of {itemId, locations, quantity, split}', 'rsv_cart_add');
  return lines.map((line, i) => {
    if (line === null || typeof line !== 'object') throw invalid(`line ${i} must be an object`, 'rsv_cart_add');
    let locs = line.locations !== undefined ? line.locations : line.locationId;
    if (!Array.isArray(locs)) locs = [locs];
    return {
      item: u64(line.itemId, `line ${i}: itemId`),
      locs: locs.map((l) => u64(l, `line ${i}: location`)),
      qty: i64(line.quantity, `line ${i}: quantity`),
      flags: line.split ? LINE_SPLIT : 0,
      itemId: line.itemId,
    };
  });
}

// The arrays of a batch call, from entries [{shopId, token, ...}]: checked
// here, the tokens copied (the call runs later).
function batchArgs(entries, fn, withLines) {
  if (!Array.isArray(entries)) throw invalid('entries must be an array', fn);
  const shops = [];
  const toks = [];
  const lens = [];
  const items = [];
  const locs = [];
  const qtys = [];
  entries.forEach((e, i) => {
    if (e === null || typeof e !== 'object') throw invalid(`entry ${i} must be an object`, fn);
    shops.push(u64(e.shopId, `entry ${i}: shopId`));
    const [b, len] = tokenArgs(e.token);
    toks.push(b);
    lens.push(len);
    if (withLines) {
      items.push(u64(e.itemId, `entry ${i}: itemId`));
      locs.push(u64(e.locationId, `entry ${i}: locationId`));
      qtys.push(i64(e.quantity, `entry ${i}: quantity`));
    }
  });
  return { n: entries.length, shops, toks, lens, items, locs, qtys };
}

class Context {
  // Made by open(); not constructed directly.
  constructor(ptr) {
    this._ptr = ptr;
    this._closing = false;
    this._tail = Promise.resolve();
    finalizer.register(this, ptr, this);
  }

  /** true once close() was called. */
  get closed() {
    return this._closing;
  }

  // Queue work(ptr) behind every call made before on this context: one C
  // call at a time, in the order the calls were made.
  _run(fn, work) {
    // The caller's stack, for the error: the C call runs later.
    const site = {};
    Error.captureStackTrace(site, Context.prototype._run);
    if (this._closing) return Promise.reject(atSite(invalid('the context is closed', fn), site));
    const p = this._tail.then(() => work(this._ptr)).catch((e) => {
      throw e instanceof ReserveError ? atSite(e, site) : e;
    });
    this._tail = p.then(noop, noop);
    return p;
  }

  // A failing return code as the error, with the context's message (read
  // before the next call on the context can start).
  _check(ptr, rc, fn) {
    if (rc !== 0) throw makeError(rc, C.rsv_errmsg(ptr) || strerror(rc), fn);
  }

  _call(fn, args, after) {
    return this._run(fn, async (ptr) => {
      const rc = await callAsync(C[fn], ptr, ...args);
      this._check(ptr, rc, fn);
      return after ? after() : undefined;
    });
  }

  // ---- the hold lifecycle ----

  /** Hold quantity units of itemId at locationId for the checkout token. */
  async reserveOne(shopId, tok, itemId, locationId, quantity, ttlMs = 0) {
    const t = tokenArgs(tok);
    return this._call('rsv_reserve_one', [u64(shopId, 'shopId'), ...t,
      u64(itemId, 'itemId'), u64(locationId, 'locationId'), i64(quantity, 'quantity'),
      i64(ttlMs, 'ttlMs')]);
  }

  /**
   * Hold every line of a cart, all or nothing.  lines: [{itemId,
   * locations: [id, ...] (in order of preference) or locationId, quantity,
   * split}].  Resolves to one entry per line: {itemId, allocations:
   * [{locationId, quantity}]}.  OutOfStock and NoItem carry .failedLine.
   */
  async reserve(shopId, tok, lines, ttlMs = 0) {
    const t = tokenArgs(tok);
    const shop = u64(shopId, 'shopId');
    const ttl = i64(ttlMs, 'ttlMs');
    const parsed = cartLines(lines);
    return this._run('rsv_reserve', async (ptr) => {
      const out = [null];
      let rc = C.rsv_cart_new(out);
      if (rc !== 0) throw makeError(rc, strerror(rc), 'rsv_cart_new');
      const cart = out[0];
      try {
        parsed.forEach((l, i) => {
          rc = C.rsv_cart_add(cart, l.item, l.locs, l.locs.length, l.qty, l.flags);
          if (rc !== 0) {
            const e = makeError(rc, `line ${i}: ${strerror(rc)}`, 'rsv_cart_add');
            e.failedLine = i;
            throw e;
          }
        });
        rc = await callAsync(C.rsv_reserve, ptr, shop, ...t, cart, ttl);
        if (rc !== 0) {
          const e = makeError(rc, C.rsv_errmsg(ptr) || strerror(rc), 'rsv_reserve');
          const failed = C.rsv_cart_failed_line(cart);
          e.failedLine = BigInt(failed) === SIZE_MAX ? null : Number(failed);
          throw e;
        }
        return parsed.map((l, line) => {
          const n = [0];
          C.rsv_cart_allocation_count(cart, line, n);
          const allocations = [];
          for (let i = 0; i < Number(n[0]); i++) {
            const loc = [0];
            const qty = [0];
            C.rsv_cart_allocation(cart, line, i, loc, qty);
            allocations.push({ locationId: asU64(loc[0]), quantity: qty[0] });
          }
          return { itemId: l.itemId, allocations };
        });
      } finally {
        C.rsv_cart_free(cart);
      }
    });
  }

  /** Payment succeeded: take the held units for good (AlreadyClaimed on a repeat). */
  async claim(shopId, tok) {
    const t = tokenArgs(tok);
    return this._call('rsv_claim', [u64(shopId, 'shopId'), ...t]);
  }

  /** Payment failed: give the units back (idempotent). */
  async release(shopId, tok) {
    const t = tokenArgs(tok);
    return this._call('rsv_release', [u64(shopId, 'shopId'), ...t]);
  }

  /** Push the checkout's deadline to now + ttlMs (0: the context's default). */
  async extend(shopId, tok, ttlMs = 0) {
    const t = tokenArgs(tok);
    return this._call('rsv_extend', [u64(shopId, 'shopId'), ...t, i64(ttlMs, 'ttlMs')]);
  }

  /** {status: 'held' | 'claimed' | 'released' | 'expired', statusCode, units, expiresInMs} */
  async checkoutStatus(shopId, tok) {
    const t = tokenArgs(tok);
    const st = [0];
    const units = [0];
    const ms = [0];
    return this._call('rsv_checkout_status', [u64(shopId, 'shopId'), ...t, st, units, ms],
      () => ({ status: STATUS[st[0]], statusCode: st[0], units: units[0], expiresInMs: ms[0] }));
  }

  // ---- batches ----

  // One batch call; resolves to its per-entry codes, rejects only when
  // the call fails as a whole (then every entry holds that code).
  _batch(fn, a, args) {
    return this._run(fn, async (ptr) => {
      // (never empty: koffi passes an empty array as NULL, and the
      // library's message would then be about that, not about n)
      const res = new Int32Array(Math.max(a.n, 1));
      const rc = await callAsync(C[fn], ptr, a.n, a.shops, a.toks, a.lens, ...args, res);
      this._check(ptr, rc, fn);
      return Array.from(res.subarray(0, a.n));
    });
  }

  /**
   * Reserve up to BATCH_MAX one-line checkouts at once: entries [{shopId,
   * token, itemId, locationId, quantity}], all for ttlMs.  Resolves to one
   * code per entry, what reserveOne would have answered (codes.OK, or
   * codes.EOUTOFSTOCK, ...); rejects only for the batch as a whole.
   */
  async reserveBatch(entries, ttlMs = 0) {
    const a = batchArgs(entries, 'rsv_reserve_batch', true);
    return this._batch('rsv_reserve_batch', a,
      [a.items, a.locs, a.qtys, i64(ttlMs, 'ttlMs')]);
  }

  /** Claim checkouts [{shopId, token}] at once: one code per entry, as claim would answer. */
  async claimBatch(entries) {
    return this._batch('rsv_claim_batch', batchArgs(entries, 'rsv_claim_batch', false), []);
  }

  /** Release checkouts [{shopId, token}] at once: one code per entry, as release would answer. */
  async releaseBatch(entries) {
    return this._batch('rsv_release_batch', batchArgs(entries, 'rsv_release_batch', false), []);
  }

  // ---- pools, expiry, stock ----

  /** Top the pool up from the ledger; resolves to the rows added. */
  async replenish(shopId, itemId, locationId) {
    const n = [0];
    return this._call('rsv_replenish', [u64(shopId, 'shopId'), u64(itemId, 'itemId'),
      u64(locationId, 'locationId'), n], () => n[0]);
  }

  /** Give the pool back to its ledger row; resolves to the rows given back. */
  async poolDrain(shopId, itemId, locationId) {
    const n = [0];
    return this._call('rsv_pool_drain', [u64(shopId, 'shopId'), u64(itemId, 'itemId'),
      u64(locationId, 'locationId'), n], () => n[0]);
  }

  /** Give back expired holds (up to maxHolds, 0: 10000); resolves to their number. */
  async sweep(shopId, maxHolds = 0) {
    const n = [0];
    return this._call('rsv_sweep', [u64(shopId, 'shopId'), i64(maxHolds, 'maxHolds'), n],
      () => n[0]);
  }

  async stockSet(shopId, itemId, locationId, onHand) {
    return this._call('rsv_stock_set', [u64(shopId, 'shopId'), u64(itemId, 'itemId'),
      u64(locationId, 'locationId'), i64(onHand, 'onHand')]);
  }

  /** Add delta (may be negative) to the stock on hand; resolves to the new value. */
  async stockAdjust(shopId, itemId, locationId, delta) {
    const n = [0];
    return this._call('rsv_stock_adjust', [u64(shopId, 'shopId'), u64(itemId, 'itemId'),
      u64(locationId, 'locationId'), i64(delta, 'delta'), n], () => n[0]);
  }

  /** {onHand, held, pooled, available} from one consistent snapshot. */
  async stockGet(shopId, itemId, locationId) {
    const v = [[0], [0], [0], [0]];
    return this._call('rsv_stock_get', [u64(shopId, 'shopId'), u64(itemId, 'itemId'),
      u64(locationId, 'locationId'), ...v],
    () => ({ onHand: v[0][0], held: v[1][0], pooled: v[2][0], available: v[3][0] }));
  }

  // ---- audit ----

  /**
   * Check the invariants of one shop ({allShops: true}: of every shop);
   * resolves to the violations found, [{shopId, itemId, locationId,
   * problem}] (empty when clean).
   */
  async audit(shopId = 0, { allShops = false } = {}) {
    const shop = u64(shopId, 'shopId');
    return this._run('rsv_audit', async (ptr) => {
      const found = [];
      const n = [0];
      // Called on the main thread while the worker waits (koffi queues it).
      const cb = (_arg, s, i, l, problem) => {
        found.push({ shopId: asU64(s), itemId: asU64(i), locationId: asU64(l), problem });
      };
      const rc = await callAsync(C.rsv_audit, ptr, shop, allShops ? 1 : 0, cb, null, n);
      this._check(ptr, rc, 'rsv_audit');
      if (Number(n[0]) !== found.length)
        throw new Error(`rsv_audit reported ${n[0]} violations but called back ${found.length} times`);
      return found;
    });
  }

  // ---- connection ----

  /** Connect again after ConnectionLost or InDoubt (then repeat the call). */
  async reconnect() {
    return this._call('rsv_reconnect', []);
  }

  /** Free the context and close its connection, after the calls already queued. */
  async close() {
    if (this._closing) return this._tail;
    const p = this._tail.then(async () => {
      finalizer.unregister(this);
      const ptr = this._ptr;
      this._ptr = null;
      await callAsync(C.rsv_close, ptr);
    });
    this._closing = true;
    this._tail = p.then(noop, noop);
    return p;
  }

  // ---- observability and the kill switch ----

  /** Every counter of operation kind op ('all', 'reserve', 'claim', ...): {calls, ok, ...}. */
  async stats(op = 'all') {
    const k = opKind(op, 'rsv_stats_get');
    return this._run('rsv_stats_get', async (ptr) => readStats('rsv_stats_get', ptr, k));
  }

  /**
   * This context's statistics as Prometheus text.  labels: an object
   * ({instance: 'a'}, values escaped here) or the C string as is.
   */
  async statsPrometheus(labels = null) {
    if (labels !== null && typeof labels === 'object') {
      const esc = (v) => String(v).replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
      labels = Object.entries(labels).map(([k, v]) => `${k}="${esc(v)}"`).join(',');
    }
    if (labels !== null && typeof labels !== 'string') throw invalid('labels must be an object, a string or null', 'rsv_stats_prometheus');
    return this._run('rsv_stats_prometheus', async (ptr) => {
      const out = [null];
      let rc = C.rsv_stats_snapshot_new(out);
      if (rc !== 0) throw makeError(rc, strerror(rc), 'rsv_stats_snapshot_new');
      const snap = out[0];
      try {
        rc = C.rsv_stats_snapshot_add(snap, ptr);
        if (rc !== 0) throw makeError(rc, strerror(rc), 'rsv_stats_snapshot_add');
        const need = [0];
        rc = C.rsv_stats_prometheus(snap, labels, null, 0, need);
        while (rc === codes.ERANGE) {
          const buf = Buffer.alloc(Number(need[0]));
          rc = C.rsv_stats_prometheus(snap, labels, buf, buf.length, need);
          if (rc === 0) return buf.toString('utf8', 0, Number(need[0]) - 1);
        }
        throw makeError(rc, strerror(rc), 'rsv_stats_prometheus');
      } finally {
        C.rsv_stats_snapshot_free(snap);
      }
    });
  }

  /** The kill switch: false makes every call that writes fail with Disabled. */
  async setEnabled(enabled) {
    return this._run('rsv_set_enabled', async (ptr) => {
      const rc = C.rsv_set_enabled(ptr, enabled ? 1 : 0);
      if (rc !== 0) throw makeError(rc, strerror(rc), 'rsv_set_enabled');
    });
  }
}

if (typeof Symbol.asyncDispose === 'symbol') {
  Context.prototype[Symbol.asyncDispose] = function dispose() {
    return this.close();
  };
}

function noop() {}

// The enum rsv_op_kind number of op ('all', 'reserve', ...).
function opKind(op, fn) {
  const k = OPS.indexOf(op);
  if (k < 0) throw invalid(`unknown operation kind ${show(op)}; known: ${OPS.join(', ')}`, fn);
  return k;
}

// Every counter of operation kind k through rsv_stats_get or
// rsv_batcher_stats_get (fn), by its name in STATS.
function readStats(fn, ptr, k) {
  const out = {};
  STATS.forEach((name, stat) => {
    const v = [0];
    const rc = C[fn](ptr, stat, k, v);
    if (rc !== 0) throw makeError(rc, strerror(rc), fn);
    out[name] = asU64(v[0]);
  });
  return out;
}

function atSite(e, site) {
  const frames = String(site.stack).split('\n').slice(1);
  e.stack = `${e.name}: ${e.message}\n${frames.join('\n')}`;
  return e;
}

// ---------------------------------------------------------------------------
// Opening a context
// ---------------------------------------------------------------------------

/**
 * Open a context on a connection of its own (rsv_open_dsn):
 * dsn = 'mariadb://[USER[:PASSWORD]@][HOST][:PORT]/DATABASE[?KEY=VALUE&...]'
 * (makeDsn builds one).  options: {holdTtlMs, poolCap, ...} (see
 * defaultOptions()).
 */
async function open(dsn, options = {}) {
  if (typeof dsn !== 'string') throw invalid('dsn must be a string', 'rsv_open_dsn');
  const o = cOptions(options);
  const out = [null];
  const rc = await callAsync(C.rsv_open_dsn, out, dsn, o);
  const ptr = out[0];
  if (rc !== 0) {
    const msg = ptr ? C.rsv_errmsg(ptr) : null;
    if (ptr) await callAsync(C.rsv_close, ptr);
    throw makeError(rc, msg || strerror(rc), 'rsv_open_dsn');
  }
  return new Context(ptr);
}

const DSN_KEYS = ['socket', 'connect_timeout', 'read_timeout', 'write_timeout', 'ssl', 'ssl_ca',
  'ssl_capath', 'ssl_cert', 'ssl_key', 'ssl_verify'];

/**
 * A connection string with every part %XX-escaped:
 * makeDsn({database: 'shop', user: 'app', password: 'p@ss', socket:
 * '/run/mysqld/mysqld.sock', connectTimeout: 5}).  Other keys: host, port,
 * and the library's connect_timeout, read_timeout, write_timeout, ssl,
 * ssl_ca, ssl_capath, ssl_cert, ssl_key, ssl_verify (camelCase or as is).
 */
function makeDsn({ database, user, password, host, port, ...params } = {}) {
  if (typeof database !== 'string') throw invalid('makeDsn: database must be a string');
  const q = (v) => encodeURIComponent(String(v));
  let auth = '';
  if (user !== undefined && user !== null) {
    auth = q(user) + (password !== undefined && password !== null ? ':' + q(password) : '') + '@';
  }
  let where = host ? q(host) : '';
  if (port !== undefined && port !== null) where += ':' + Number(port);
  const query = [];
  for (const [k0, v] of Object.entries(params)) {
    const k = k0.replace(/[A-Z]/g, (c) => '_' + c.toLowerCase());
    if (!DSN_KEYS.includes(k)) throw invalid(`makeDsn: unknown key ${JSON.stringify(k0)}; known: ${DSN_KEYS.join(', ')}`);
    if (v === undefined || v === null) continue;
    query.push([k, typeof v === 'boolean' ? (v ? 1 : 0) : v]);
  }
  query.sort((a, b) => (a[0] === 'socket' ? -1 : b[0] === 'socket' ? 1 : a[0] < b[0] ? -1 : 1));
  const qs = query.map(([k, v]) => `${k}=${q(v)}`).join('&');
  return `mariadb://${auth}${where}/${q(database)}${qs ? '?' + qs : ''}`;
}

// ---------------------------------------------------------------------------
// The batcher
// ---------------------------------------------------------------------------

// How long one wait on the completion pipe lasts (ms) before it is made
// again: a bound on a missed wake-up, not a delay of the answers.
const POLL_MS = 1000;
const POLLIN = 0x1;

// A batcher the program dropped without close(): closed when collected.
// Calls in flight keep it reachable, so none is lost this way.
const batcherFinalizer = new FinalizationRegistry((ptr) => C.rsv_batcher_close(ptr));

class Batcher {
  // Every call starts the request at once on the main thread (the
  // rsv_batcher_*_start forms only queue it) and returns a promise, so
  // any number of calls can be in flight: the batcher's workers coalesce
  // them into batches.  While any is in flight one worker thread of
  // libuv's pool waits on the completion pipe (poll(2)), and the main
  // thread collects the answers.  Made by Batcher.open().
  constructor(ptr) {
    this._ptr = ptr;
    this._fd = C.rsv_batcher_fd(ptr);
    this._calls = new Map(); // a call's address -> {resolve, reject, fn, site}
    this._collector = null; // the loop collecting answers while calls are out
    this._closing = null; // close()'s promise
    batcherFinalizer.register(this, ptr, this);
  }

  /**
   * Open a batcher (rsv_batcher_open): connections (1..64) contexts on
   * dsn with options, as open() takes them.
   */
  static async open(dsn, options = {}, connections = 4) {
    const fn = 'rsv_batcher_open';
    if (typeof dsn !== 'string') throw invalid('dsn must be a string', fn);
    if (!Number.isInteger(connections) || connections < 1 || connections > BATCHER_MAX_CONNECTIONS)
      throw invalid(`connections must be an integer in 1..${BATCHER_MAX_CONNECTIONS}, not ${show(connections)}`, fn);
    const o = cOptions(options);
    const out = [null];
    const rc = await callAsync(C.rsv_batcher_open, out, dsn, o, connections);
    if (rc !== 0) {
      // The batcher keeps no message: one context on the same dsn says
      // what went wrong (rsv_errmsg), if it fails the same way.
      let msg = null;
      const probe = [null];
      const prc = await callAsync(C.rsv_open_dsn, probe, dsn, o);
      if (probe[0]) {
        if (prc === rc) msg = C.rsv_errmsg(probe[0]);
        await callAsync(C.rsv_close, probe[0]);
      }
      throw makeError(rc, msg || strerror(rc), fn);
    }
    return new Batcher(out[0]);
  }

  /** true once close() was called. */
  get closed() {
    return this._closing !== null;
  }

  // Start one request; its promise settles when the batcher answers it.
  _start(fn, start, args) {
    const site = {};
    Error.captureStackTrace(site, Batcher.prototype._start);
    if (this._closing) return Promise.reject(atSite(invalid('the batcher is closed', fn), site));
    const out = [null];
    const rc = C[start](this._ptr, ...args, out);
    if (rc !== PENDING) {
      // decided at once: the single call's argument checks
      return rc === 0 ? Promise.resolve() : Promise.reject(atSite(makeError(rc, strerror(rc), fn), site));
    }
    return new Promise((resolve, reject) => {
      this._calls.set(koffi.address(out[0]), { resolve, reject, fn, site });
      if (!this._collector) this._collector = this._collect();
    });
  }

  // While calls are out: wait for the pipe on a worker thread, then
  // collect here; a failing wait fails the calls rather than strand them.
  async _collect() {
    try {
      while (this._calls.size > 0) {
        await callAsync(C.poll, { fd: this._fd, events: POLLIN, revents: 0 }, 1, POLL_MS);
        this._answer();
      }
    } catch (e) {
      for (const call of this._calls.values()) call.reject(e);
      this._calls.clear();
    } finally {
      this._collector = null;
    }
  }

  // Hand every completed call's code to its promise, and free the call.
  _answer() {
    const done = [null];
    const code = [0];
    while (C.rsv_batcher_next_done(this._ptr, done, code) === 0) {
      const key = koffi.address(done[0]);
      C.rsv_batcher_call_free(done[0]);
      const call = this._calls.get(key);
      if (!call) continue;
      this._calls.delete(key);
      const rc = code[0];
      if (rc === 0) call.resolve();
      else call.reject(atSite(makeError(rc, strerror(rc), call.fn), call.site));
    }
  }

  /** reserveOne through the batcher (ttlMs 0: the default); rejects as Context.reserveOne. */
  async reserveOne(shopId, tok, itemId, locationId, quantity, ttlMs = 0) {
    const t = tokenArgs(tok);
    return this._start('rsv_batcher_reserve_one', 'rsv_batcher_reserve_one_start',
      [u64(shopId, 'shopId'), ...t, u64(itemId, 'itemId'), u64(locationId, 'locationId'),
        i64(quantity, 'quantity'), i64(ttlMs, 'ttlMs')]);
  }

  /** claim through the batcher; rejects as Context.claim. */
  async claim(shopId, tok) {
    const t = tokenArgs(tok);
    return this._start('rsv_batcher_claim', 'rsv_batcher_claim_start', [u64(shopId, 'shopId'), ...t]);
  }

  /** release through the batcher; rejects as Context.release. */
  async release(shopId, tok) {
    const t = tokenArgs(tok);
    return this._start('rsv_batcher_release', 'rsv_batcher_release_start', [u64(shopId, 'shopId'), ...t]);
  }

  /** Every counter of operation kind op, summed over the connections: {calls, ok, ...}. */
  async stats(op = 'all') {
    const k = opKind(op, 'rsv_batcher_stats_get');
    if (this._closing) throw invalid('the batcher is closed', 'rsv_batcher_stats_get');
    return readStats('rsv_batcher_stats_get', this._ptr, k);
  }

  /**
   * Close the batcher once the calls already made are answered (later
   * ones are refused), then its connections.
   */
  async close() {
    if (!this._closing) {
      this._closing = (async () => {
        // Collected here, not by rsv_batcher_close, which would free the
        // calls still out without answering them.
        while (this._collector) await this._collector;
        batcherFinalizer.unregister(this);
        const ptr = this._ptr;
        this._ptr = null;
        await callAsync(C.rsv_batcher_close, ptr);
      })();
    }
    return this._closing;
  }
}

if (typeof Symbol.asyncDispose === 'symbol') {
  Batcher.prototype[Symbol.asyncDispose] = function dispose() {
    return this.close();
  };
}

// ---------------------------------------------------------------------------
// Library information
// ---------------------------------------------------------------------------

/** The loaded library's version string ("0.1.0"). */
function version() {
  return C.rsv_version();
}

function versionNumber() {
  return C.rsv_version_number();
}

function schemaVersion() {
  return C.rsv_schema_version();
}

/** The file the library was loaded from. */
function libraryPath() {
  try {
    for (const line of fs.readFileSync('/proc/self/maps', 'utf8').split('\n')) {
      const f = line.slice(line.indexOf('/'));
      if (line.includes('/') && path.basename(f).startsWith('libreserve.so')) return f;
    }
  } catch { /* not Linux */ }
  return LIB_NAME;
}

/**
 * schema.sql: $RSV_SCHEMA, else share/libreserve/schema.sql next to the
 * loaded library, the source tree's sql/schema.sql, the usual install
 * paths.
 */
function findSchema() {
  if (process.env.RSV_SCHEMA) return process.env.RSV_SCHEMA;
  const cands = [];
  let d = path.dirname(libraryPath());
  for (let i = 0; i < 2; i++) { // lib/ or lib/<multiarch>/
    d = path.dirname(d);
    cands.push(path.join(d, 'share', 'libreserve', 'schema.sql'));
  }
  if (SOURCE_TREE) cands.push(path.join(SOURCE_TREE, 'sql', 'schema.sql'));
  cands.push('/usr/local/share/libreserve/schema.sql', '/usr/share/libreserve/schema.sql');
  for (const c of cands) if (fs.existsSync(c)) return c;
  throw new Error('libreserve: schema.sql not found (set RSV_SCHEMA); tried ' + cands.join(', '));
}

module.exports = {
  open,
  makeDsn,
  defaultOptions,
  version,
  versionNumber,
  schemaVersion,
  strerror,
  codeName,
  libraryPath,
  findSchema,
  errorClass,
  Context,
  Batcher,
  ReserveError,
  ExpectedOutcome,
  Failure,
  OutOfStock,
  NotFound,
  Expired,
  AlreadyClaimed,
  AlreadyReleased,
  Busy,
  InDoubt,
  ConnectionLost,
  InvalidArgument,
  InvalidQuantity,
  EmptyCart,
  InvalidToken,
  NoItem,
  SchemaError,
  UnsupportedServer,
  InTransaction,
  OutOfMemory,
  DatabaseError,
  CartTooBig,
  StockError,
  ConfigError,
  OutOfRange,
  Disabled,
  SchemaVersionError,
  Canceled,
  NotPrimary,
  codes,
  OPT,
  STATUS,
  OPS,
  STATS,
  TOKEN_MAX,
  QUANTITY_MAX,
  CART_MAX_LINES,
  LINE_MAX_LOCATIONS,
  BATCH_MAX,
  BATCHER_MAX_CONNECTIONS,
};
