'use strict';
// libreserve for Node.js: the libreserve C library through koffi (FFI).
//
// Every call returns a promise; none occupies libuv's thread pool, which
// Node.js shares with files, DNS and compression.  The calls of a checkout
// (reserve, reserveOne, claim, release, extend, checkoutStatus) use the
// library's non-blocking interface: the call is handed to the context's own
// worker thread (rsv_*_start) and the event loop watches the context's
// descriptor (rsv_async_fd) until rsv_cont gives the answer.  The calls
// without a non-blocking form (open, close, reconnect, stock, pools,
// sweep, audit, batches) run on threads of this package's own (runner.js),
// one per call in flight.  A context is single-threaded, so its calls are
// queued and run one at a time, in the order they were made.  A Batcher's
// calls are queued at once in the C batcher, which coalesces them; its
// descriptor is watched the same way.  A Migration asks the application's
// old store itself (an async function on the main thread) and hands the
// library its answer (the handover calls of reserve/migrate.h).

const fs = require('node:fs');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const { koffi, C, LIB_NAME, SOURCE_TREE, LibraryNotFound } = require('./native');

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
    // the server's (or Connector/C's) error number behind it: 1045 for a
    // wrong password, 1205 for a lock wait timeout; null when none
    const found = [...String(message || '').matchAll(/\(MySQL error (\d+)\)/g)];
    this.errno = found.length ? Number(found[found.length - 1][1]) : null;
    // the cart line that could not be served (OutOfStock, NoItem of a
    // reserve; 0 for reserveOne, whose one line is line 0), else null
    this.failedLine = null;
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
// RSV_ECONN because the server refused the account (errno 1045, 1044,
// ...): reconnecting will not help, so it is no ConnectionLost, which a
// retry loop repeats.
class AuthenticationError extends Failure {}

// Server error numbers that mean the account was refused: access denied
// (1044, 1045, 1698), password expired (1820, 1862), unknown
// authentication plugin (1251, 2059).
const AUTH_ERRNOS = new Set([1044, 1045, 1251, 1698, 1820, 1862, 2059]);
// The calls of one line, whose line is line 0 ("line 0 (item 42, ...").
const ONE_LINE = new Set(['rsv_reserve_one', 'rsv_reserve_one_start',
  'rsv_batcher_reserve_one', 'rsv_batcher_reserve_one_start', 'rsv_migrate_reserve_one']);

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
  let e = new (errorClass(code))(code, message, fn);
  if (code === codes.ECONN && AUTH_ERRNOS.has(e.errno)) e = new AuthenticationError(code, message, fn);
  if (ONE_LINE.has(fn) && (code === codes.EOUTOFSTOCK || code === codes.ENOITEM)) e.failedLine = 0;
  return e;
}

function invalid(message, fn) {
  return new InvalidArgument(codes.EINVAL, message, fn);
}

// ---------------------------------------------------------------------------
// Waiting without libuv's thread pool
// ---------------------------------------------------------------------------

// The library's descriptor of one context (or batcher), watched by the
// event loop (a uv_poll_t through koffi) while a call is pending, so that
// a waiting call costs no thread here.  It refers to no context, so that a
// context dropped without close() can still be collected (see finalizer).
class FdWait {
  constructor(fd) {
    this.fd = fd;
    this.handle = null;
    this.done = null;
  }

  // Resolves once the descriptor is readable (then call rsv_cont).
  wait() {
    return new Promise((resolve, reject) => {
      const ready = (status) => {
        this.handle.stop();
        this.done = null;
        if (status < 0) reject(new Error(`libreserve: waiting on descriptor ${this.fd} failed (libuv ${status})`));
        else resolve();
      };
      this.done = ready;
      if (this.handle) this.handle.start({ readable: true }, ready);
      else this.handle = koffi.node.poll(this.fd, { readable: true }, ready);
    });
  }

  // Before the library closes the descriptor (rsv_close, rsv_batcher_close).
  close() {
    if (this.handle) this.handle.close();
    this.handle = null;
  }
}

// koffi's uv_poll_t is young (koffi 2.15 and later, not yet documented):
// say so at require() rather than at the first call.
if (!koffi.node || typeof koffi.node.poll !== 'function') {
  throw new Error(`libreserve: koffi ${koffi.version} has no node.poll (this package needs koffi 3.3 or later)`);
}

// Threads of the package's own (runner.js) for the calls that have no
// non-blocking form: one per call in flight, kept for the next call while
// idle (at most IDLE_RUNNERS of them), never holding the process open
// while idle.
const IDLE_RUNNERS = 2;
const idleRunners = [];

class Runner {
  constructor() {
    // The same library file as this thread's, whatever found it here.
    this.worker = new Worker(path.join(__dirname, 'runner.js'),
      { env: { ...process.env, LIBRESERVE_PATH: libraryPath() }, stdout: false, stderr: false });
    this.worker.unref();
    this.pending = null;
    this.dead = false;
    const settle = (fn, v) => {
      const p = this.pending;
      this.pending = null;
      this.worker.unref();
      if (p) p[fn](v);
    };
    this.worker.on('message', (m) => settle(m.error ? 'reject' : 'resolve',
      m.error ? new Error(`libreserve: ${m.error}`) : m));
    this.worker.on('error', (e) => { this.dead = true; settle('reject', e); });
    this.worker.on('exit', (code) => {
      this.dead = true;
      settle('reject', new Error(`libreserve: a thread of the package ended (exit code ${code})`));
    });
  }

  // keepAlive false: a call that waits for work (a Migration's outbox)
  // does not hold the process open.
  run(fn, args, keepAlive = true) {
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject };
      if (keepAlive) this.worker.ref();
      this.worker.postMessage({ fn, args });
    });
  }
}

// Run C function fn(...args) on a runner; resolves to {rc, args} (the
// out-arguments filled in) or, for 'audit', to its own answer.
async function blocking(fn, args) {
  let r = idleRunners.pop();
  while (r && r.dead) r = idleRunners.pop();
  if (!r) r = new Runner();
  try {
    return await r.run(fn, args);
  } finally {
    if (!r.dead) {
      if (idleRunners.length < IDLE_RUNNERS) idleRunners.push(r);
      else r.worker.terminate();
    }
  }
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
function asI64(v) {
  return typeof v === 'bigint' && v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER)
    ? Number(v) : v;
}

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
// closed) when it is collected.  held: {ptr, fdWait}, never the context.
const finalizer = new FinalizationRegistry((held) => {
  if (held.fdWait) held.fdWait.close();
  C.rsv_close(held.ptr);
});

// A native cart of parsed lines (cartLines); the caller frees it.
function newCart(parsed) {
  const out = [null];
  let rc = C.rsv_cart_new(out);
  if (rc !== 0) throw makeError(rc, strerror(rc), 'rsv_cart_new');
  const cart = out[0];
  parsed.forEach((l, i) => {
    rc = C.rsv_cart_add(cart, l.item, l.locs, l.locs.length, l.qty, l.flags);
    if (rc !== 0) {
      C.rsv_cart_free(cart);
      const e = makeError(rc, `line ${i}: ${strerror(rc)}`, 'rsv_cart_add');
      e.failedLine = i;
      throw e;
    }
  });
  return cart;
}

// A reserve's error, with the line the cart could not serve.
function cartFailure(cart, e) {
  if (e instanceof ReserveError) {
    const failed = C.rsv_cart_failed_line(cart);
    e.failedLine = BigInt(failed) === SIZE_MAX ? null : Number(failed);
  }
  return e;
}

// Where each line of a reserved cart is held.
function cartAllocations(cart, parsed) {
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
}

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
    this._held = { ptr, fdWait: null };
    finalizer.register(this, this._held, this);
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

  // A call without a non-blocking form, on a thread of the package's own;
  // after(out) reads the out-arguments from the copy of args it filled.
  _call(fn, args, after) {
    return this._run(fn, async (ptr) => {
      const { rc, args: out } = await blocking(fn, [ptr, ...args]);
      this._check(ptr, rc, fn);
      return after ? after(out.slice(1)) : undefined;
    });
  }

  // A call of the non-blocking interface: fn_start hands it to the
  // context's worker thread, the event loop waits for the descriptor, and
  // rsv_cont gives the final code.  Bad arguments answer at once.
  async _nonblocking(ptr, fn, args) {
    let rc = C[fn + '_start'](ptr, ...args);
    while (rc === PENDING) {
      await this._fdWait(ptr).wait();
      rc = C.rsv_cont(ptr);
    }
    this._check(ptr, rc, fn);
  }

  _nb(fn, args, after) {
    return this._run(fn, async (ptr) => {
      await this._nonblocking(ptr, fn, args);
      return after ? after() : undefined;
    });
  }

  _fdWait(ptr) {
    if (!this._held.fdWait) {
      const fd = C.rsv_async_fd(ptr);
      if (fd < 0) throw makeError(fd, C.rsv_errmsg(ptr) || strerror(fd), 'rsv_async_fd');
      this._held.fdWait = new FdWait(fd);
    }
    return this._held.fdWait;
  }

  // ---- the hold lifecycle ----

  /** Hold quantity units of itemId at locationId for the checkout token. */
  async reserveOne(shopId, tok, itemId, locationId, quantity, ttlMs = 0) {
    const t = tokenArgs(tok);
    return this._nb('rsv_reserve_one', [u64(shopId, 'shopId'), ...t,
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
      const cart = newCart(parsed);
      try {
        try {
          // the cart is used in place until the call has finished
          await this._nonblocking(ptr, 'rsv_reserve', [shop, ...t, cart, ttl]);
        } catch (e) {
          throw cartFailure(cart, e);
        }
        return cartAllocations(cart, parsed);
      } finally {
        C.rsv_cart_free(cart);
      }
    });
  }

  /** Payment succeeded: take the held units for good (AlreadyClaimed on a repeat). */
  async claim(shopId, tok) {
    const t = tokenArgs(tok);
    return this._nb('rsv_claim', [u64(shopId, 'shopId'), ...t]);
  }

  /** Payment failed: give the units back (idempotent). */
  async release(shopId, tok) {
    const t = tokenArgs(tok);
    return this._nb('rsv_release', [u64(shopId, 'shopId'), ...t]);
  }

  /** Push the checkout's deadline to now + ttlMs (0: the context's default). */
  async extend(shopId, tok, ttlMs = 0) {
    const t = tokenArgs(tok);
    return this._nb('rsv_extend', [u64(shopId, 'shopId'), ...t, i64(ttlMs, 'ttlMs')]);
  }

  /** {status: 'held' | 'claimed' | 'released' | 'expired', statusCode, units, expiresInMs} */
  async checkoutStatus(shopId, tok) {
    const t = tokenArgs(tok);
    // written by the worker thread after the start returned: memory of
    // their own, kept until the call has finished
    const st = new Int32Array(1);
    const units = new BigInt64Array(1);
    const ms = new BigInt64Array(1);
    return this._nb('rsv_checkout_status', [u64(shopId, 'shopId'), ...t, st, units, ms],
      () => ({ status: STATUS[st[0]], statusCode: st[0], units: asI64(units[0]), expiresInMs: asI64(ms[0]) }));
  }

  // ---- batches ----

  // One batch call; resolves to its per-entry codes, rejects only when
  // the call fails as a whole (then every entry holds that code).
  _batch(fn, a, args) {
    return this._run(fn, async (ptr) => {
      // (never empty: koffi passes an empty array as NULL, and the
      // library's message would then be about that, not about n)
      const res = new Int32Array(Math.max(a.n, 1));
      const { rc, args: out } = await blocking(fn, [ptr, a.n, a.shops, a.toks, a.lens, ...args, res]);
      this._check(ptr, rc, fn);
      return Array.from(out[out.length - 1].subarray(0, a.n));
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

  /**
   * Reserve up to BATCH_MAX checkouts of carts at once: entries [{shopId,
   * token, lines}] (lines as for reserve), all for ttlMs.  Resolves to one
   * result per entry: {code: codes.OK, lines} (as reserve resolves) or
   * {code, failedLine} (what reserve would have rejected with); rejects
   * only for the batch as a whole.
   */
  async reserveCartBatch(entries, ttlMs = 0) {
    const fn = 'rsv_reserve_cart_batch';
    const a = batchArgs(entries, fn, false);
    const parsed = entries.map((e, i) => {
      try {
        return cartLines(e.lines);
      } catch (err) {
        throw invalid(`entry ${i}: ${err.message}`, fn);
      }
    });
    const ttl = i64(ttlMs, 'ttlMs');
    return this._run(fn, async (ptr) => {
      const carts = [];
      try {
        for (const p of parsed) carts.push(newCart(p));
        const res = new Int32Array(Math.max(a.n, 1));
        const { rc, args: out } = await blocking(fn, [ptr, a.n, a.shops, a.toks, a.lens,
          carts.map((c) => koffi.address(c)), ttl, res]);
        this._check(ptr, rc, fn);
        const codes = out[out.length - 1];
        return parsed.map((p, i) => {
          if (codes[i] === 0) return { code: 0, lines: cartAllocations(carts[i], p) };
          const failed = C.rsv_cart_failed_line(carts[i]);
          return { code: codes[i], failedLine: BigInt(failed) === SIZE_MAX ? null : Number(failed) };
        });
      } finally {
        for (const c of carts) C.rsv_cart_free(c);
      }
    });
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
    return this._call('rsv_replenish', [u64(shopId, 'shopId'), u64(itemId, 'itemId'),
      u64(locationId, 'locationId'), [0]], (out) => out[3][0]);
  }

  /** Give the pool back to its ledger row; resolves to the rows given back. */
  async poolDrain(shopId, itemId, locationId) {
    return this._call('rsv_pool_drain', [u64(shopId, 'shopId'), u64(itemId, 'itemId'),
      u64(locationId, 'locationId'), [0]], (out) => out[3][0]);
  }

  /** Give back expired holds (up to maxHolds, 0: 10000); resolves to their number. */
  async sweep(shopId, maxHolds = 0) {
    return this._call('rsv_sweep', [u64(shopId, 'shopId'), i64(maxHolds, 'maxHolds'), [0]],
      (out) => out[2][0]);
  }

  async stockSet(shopId, itemId, locationId, onHand) {
    return this._call('rsv_stock_set', [u64(shopId, 'shopId'), u64(itemId, 'itemId'),
      u64(locationId, 'locationId'), i64(onHand, 'onHand')]);
  }

  /** Add delta (may be negative) to the stock on hand; resolves to the new value. */
  async stockAdjust(shopId, itemId, locationId, delta) {
    return this._call('rsv_stock_adjust', [u64(shopId, 'shopId'), u64(itemId, 'itemId'),
      u64(locationId, 'locationId'), i64(delta, 'delta'), [0]], (out) => out[4][0]);
  }

  /** {onHand, held, pooled, available} from one consistent snapshot. */
  async stockGet(shopId, itemId, locationId) {
    return this._call('rsv_stock_get', [u64(shopId, 'shopId'), u64(itemId, 'itemId'),
      u64(locationId, 'locationId'), [0], [0], [0], [0]],
    (out) => ({ onHand: out[3][0], held: out[4][0], pooled: out[5][0], available: out[6][0] }));
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
      const { rc, found, n } = await blocking('audit', [ptr, shop, allShops ? 1 : 0]);
      this._check(ptr, rc, 'rsv_audit');
      if (Number(n) !== found.length)
        throw new Error(`rsv_audit reported ${n} violations but called back ${found.length} times`);
      return found.map(([s, i, l, problem]) =>
        ({ shopId: asU64(s), itemId: asU64(i), locationId: asU64(l), problem }));
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
      // the descriptor is closed by rsv_close: stop watching it first
      if (this._held.fdWait) this._held.fdWait.close();
      await blocking('rsv_close', [ptr]);
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
  const { rc, args: [[ptr]] } = await blocking('rsv_open_dsn', [[null], dsn, o]);
  if (rc !== 0) {
    const msg = ptr ? C.rsv_errmsg(ptr) : null;
    if (ptr) await blocking('rsv_close', [ptr]);
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

// A batcher the program dropped without close(): closed when collected.
// Calls in flight keep it reachable, so none is lost this way.
const batcherFinalizer = new FinalizationRegistry((held) => {
  held.fdWait.close();
  C.rsv_batcher_close(held.ptr);
});

class Batcher {
  // Every call starts the request at once on the main thread (the
  // rsv_batcher_*_start forms only queue it) and returns a promise, so
  // any number of calls can be in flight: the batcher's workers coalesce
  // them into batches.  While any is in flight the event loop watches the
  // batcher's completion descriptor, and the main thread collects the
  // answers.  Made by Batcher.open().
  constructor(ptr) {
    this._ptr = ptr;
    this._fdWait = new FdWait(C.rsv_batcher_fd(ptr));
    this._calls = new Map(); // a call's address -> {resolve, reject, fn, site}
    this._collector = null; // the loop collecting answers while calls are out
    this._closing = null; // close()'s promise
    batcherFinalizer.register(this, { ptr, fdWait: this._fdWait }, this);
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
    const { rc, args: [[ptr]] } = await blocking('rsv_batcher_open', [[null], dsn, o, connections]);
    if (rc !== 0) {
      // The batcher keeps no message: one context on the same dsn says
      // what went wrong (rsv_errmsg), if it fails the same way.
      let msg = null;
      const { rc: prc, args: [[probe]] } = await blocking('rsv_open_dsn', [[null], dsn, o]);
      if (probe) {
        if (prc === rc) msg = C.rsv_errmsg(probe);
        await blocking('rsv_close', [probe]);
      }
      throw makeError(rc, msg || strerror(rc), fn);
    }
    return new Batcher(ptr);
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

  // While calls are out: wait for the descriptor, then collect; a failing
  // wait fails the calls rather than strand them.
  async _collect() {
    try {
      while (this._calls.size > 0) {
        await this._fdWait.wait();
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

  /**
   * reserve (a cart) through the batcher: the carts of calls made at the
   * same time go to the server as one batch.  Resolves and rejects as
   * Context.reserve.
   */
  async reserve(shopId, tok, lines, ttlMs = 0) {
    const t = tokenArgs(tok);
    const shop = u64(shopId, 'shopId');
    const ttl = i64(ttlMs, 'ttlMs');
    const parsed = cartLines(lines);
    const cart = newCart(parsed);
    let answered = true;
    try {
      // the cart is used in place until the batcher has answered
      await this._start('rsv_batcher_reserve', 'rsv_batcher_reserve_start', [shop, ...t, cart, ttl]);
      return cartAllocations(cart, parsed);
    } catch (e) {
      // (a wait that failed leaves the request out: the cart stays its)
      answered = e instanceof ReserveError;
      throw cartFailure(cart, e);
    } finally {
      if (answered) C.rsv_cart_free(cart);
    }
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
        this._fdWait.close();
        await blocking('rsv_batcher_close', [ptr]);
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
// Moving a live shop from its old store (reserve/migrate.h)
// ---------------------------------------------------------------------------

// A shop's stage (RSV_STAGE_*), by name.
const STAGES = Object.freeze(['old', 'shadow', 'primary', 'complete']);
const STAGE_SHADOW = 1;
// enum rsv_migrate_stat_kind, by name
const MIGRATION_STATS = Object.freeze(['bothAccepted', 'bothRefused', 'oldRefusedNewAccepted',
  'oldAcceptedNewRefused', 'newFailed', 'unknown', 'oldFailed', 'offered', 'applied', 'dropped',
  'stageReadFailed']);
const ROUTE_NOWAIT = 0x1;
// How long one wait of the outbox lasts: the longest close() waits for
// the mirroring loop to notice it should stop.
const MIRROR_WAIT_MS = 200;
// close() first waits this long for the work offered to be done.
const CLOSE_DRAIN_MS = 5000;

class Migration {
  // Made by Migration.open().  The library's handle is used through its
  // handover calls only: no C callback is registered, so the old store's
  // function (setLegacy) is always called here, on the main thread, and
  // may be async.  At stages old and shadow a call asks it and hands its
  // answer over (rsv_migrate_*_answered); at primary the library's
  // outbox gives the calls that keep it current, taken by a loop of this
  // object's (rsv_migrate_mirror_next on a thread of the package's own,
  // the function here, rsv_migrate_mirror_done).
  constructor(ptr, ctx, ownsCtx) {
    this._ptr = ptr;
    this._ctx = ctx;
    this._ownsCtx = ownsCtx;
    this._legacy = null;
    this._tail = Promise.resolve();
    this._closing = null;
    this._stopping = false;
    /** Errors the old store's function threw that were no ReserveError (each counted oldFailed). */
    this.legacyErrors = [];
    this._mirrorRunner = new Runner();
    this._mirroring = this._mirrorLoop();
  }

  /**
   * Open a migration handle (rsv_migrate_open) over ctx, a Context (it
   * answers at primary and complete; its calls and this handle's queue
   * behind each other), or a dsn string (a Context of its own is opened
   * with options, and closed with the handle).  shadowDsn: the connection
   * of the handle's own thread (default: the dsn given); queueMax bounds
   * the work waiting (0: 4096); refreshMs: how often the stages are read
   * (50..60000, default 1000).
   */
  static async open(ctxOrDsn, { shadowDsn, queueMax = 0, refreshMs, options } = {}) {
    const fn = 'rsv_migrate_open';
    let ctx = ctxOrDsn;
    const owns = typeof ctxOrDsn === 'string';
    if (owns) {
      if (shadowDsn === undefined) shadowDsn = ctxOrDsn;
    } else if (!(ctxOrDsn instanceof Context)) {
      throw invalid('Migration.open takes a Context or a dsn string', fn);
    } else if (options !== undefined) {
      throw invalid('options are for a dsn; a Context has its own', fn);
    }
    if (typeof shadowDsn !== 'string') throw invalid('shadowDsn must be a string', fn);
    if (!Number.isInteger(queueMax) || queueMax < 0 || queueMax > 0xffffffff)
      throw invalid(`queueMax must be an integer in 0..2**32-1, not ${show(queueMax)}`, fn);
    if (refreshMs !== undefined && (!Number.isInteger(refreshMs) || refreshMs < 50 || refreshMs > 60000))
      throw invalid(`refreshMs must be an integer in 50..60000, not ${show(refreshMs)}`, fn);
    if (owns) ctx = await open(ctxOrDsn, options);
    try {
      const ptr = await ctx._run(fn, async (cptr) => {
        const { rc, args: [[out]] } = await blocking(fn, [[null], cptr, shadowDsn, queueMax]);
        ctx._check(cptr, rc, fn);
        return out;
      });
      if (refreshMs !== undefined) C.rsv_migrate_set_refresh_ms(ptr, refreshMs);
      return new Migration(ptr, ctx, owns);
    } catch (e) {
      if (owns) await ctx.close();
      throw e;
    }
  }

  /** true once close() was called. */
  get closed() {
    return this._closing !== null;
  }

  /**
   * The old store's operation: fn(op, shopId, token, itemId, locationId,
   * quantity, ttlMs), op 'reserve', 'claim' or 'release' (the last four
   * 0 but for a reserve), token a Buffer.  It resolves to accept, and
   * throws (rejects with) an ExpectedOutcome (OutOfStock, NotFound,
   * AlreadyClaimed, Expired, AlreadyReleased) to refuse; anything else it
   * throws is the old store failing (kept in legacyErrors).  null removes
   * it: calls of shops at stages old and shadow then reject with
   * InvalidArgument, and the outbox waits for one.
   */
  setLegacy(fn) {
    if (fn !== null && typeof fn !== 'function') throw invalid('setLegacy takes a function or null');
    this._legacy = fn;
  }

  // The old store's answer as a library code, and the error behind a
  // failure.
  async _askOld(op, shopId, tok, itemId, locationId, quantity, ttlMs) {
    const fn = this._legacy;
    if (!fn) return { code: codes.EINVAL, error: null };
    try {
      await fn(OPS[op], asU64(shopId), tok, asU64(itemId), asU64(locationId), asI64(quantity),
        asI64(ttlMs));
      return { code: codes.OK, error: null };
    } catch (e) {
      if (e instanceof ReserveError) return { code: e.code, error: e };
      this.legacyErrors.push(e);
      return { code: codes.EDB, error: e };
    }
  }

  // One call after the ones made before it on this handle.
  _run(fn, work) {
    const site = {};
    Error.captureStackTrace(site, Migration.prototype._run);
    if (this._closing) return Promise.reject(atSite(invalid('the migration handle is closed', fn), site));
    const p = this._tail.then(() => work(this._ptr)).catch((e) => {
      throw e instanceof ReserveError ? atSite(e, site) : e;
    });
    this._tail = p.then(noop, noop);
    return p;
  }

  // A call of the checkout: the stage to act at (without waiting when
  // nothing is pending, else on a thread that may wait), the old store
  // asked where that stage asks it, then the answer handed over.
  _checkout(fn, op, answered, shopId, tok, item = 0, loc = 0, qty = 0, ttl = 0) {
    const shop = u64(shopId, 'shopId');
    const t = tokenArgs(tok);
    const rest = op === 1 ? [u64(item, 'itemId'), u64(loc, 'locationId'), i64(qty, 'quantity'),
      i64(ttl, 'ttlMs')] : [];
    return this._run(fn, async (ptr) => {
      // the library's own token check, before the old store is asked: at
      // stage old the call does nothing else
      let rc = C[answered](ptr, 0, shop, ...t, ...rest, 0);
      if (rc !== 0) throw makeError(rc, strerror(rc), fn);
      const st = [0];
      rc = C.rsv_migrate_route(ptr, shop, ROUTE_NOWAIT, st);
      if (rc === codes.EBUSY) {
        const r = await blocking('rsv_migrate_route', [ptr, shop, 0, [0]]);
        rc = r.rc;
        st[0] = r.args[3][0];
      }
      if (rc !== 0) throw makeError(rc, strerror(rc), fn);
      const stage = st[0];
      if (stage <= STAGE_SHADOW) {
        const bytes = Buffer.from(t[0].subarray(0, t[1]));
        const old = await this._askOld(op, shop, bytes, ...(op === 1 ? rest : [0, 0, 0, 0]));
        // at shadow this only queues libreserve's side: no waiting here
        rc = C[answered](ptr, stage, shop, ...t, ...rest, old.code);
        if (rc === 0) return;
        if (rc === old.code && old.error) {
          if (old.error instanceof ReserveError) throw makeError(rc, old.error.message, fn);
          const e = makeError(rc, `the old store failed: ${old.error.message || old.error}`, fn);
          e.cause = old.error;
          throw e;
        }
        if (rc === codes.EINVAL && !this._legacy)
          throw invalid('no old store: setLegacy() first (the shop is at stage ' + STAGES[stage] + ')', fn);
        throw makeError(rc, strerror(rc), fn);
      }
      // libreserve decides, on the context (queued behind its own calls)
      await this._ctx._run(fn, async (cptr) => {
        const r = await blocking(answered, [ptr, stage, shop, ...t, ...rest, 0]);
        this._ctx._check(cptr, r.rc, fn);
      });
    });
  }

  /** Hold units for a checkout in the store the shop's stage names; rejects with what it answered. */
  async reserveOne(shopId, tok, itemId, locationId, quantity, ttlMs = 0) {
    return this._checkout('rsv_migrate_reserve_one', 1, 'rsv_migrate_reserve_one_answered',
      shopId, tok, itemId, locationId, quantity, ttlMs);
  }

  /** Claim a checkout in the store the shop's stage names. */
  async claim(shopId, tok) {
    return this._checkout('rsv_migrate_claim', 2, 'rsv_migrate_claim_answered', shopId, tok);
  }

  /** Release a checkout in the store the shop's stage names. */
  async release(shopId, tok) {
    return this._checkout('rsv_migrate_release', 3, 'rsv_migrate_release_answered', shopId, tok);
  }

  // Primary's work on the old store, one item at a time, until close().
  async _mirrorLoop() {
    while (!this._stopping) {
      const ptr = this._ptr;
      let r;
      try {
        r = await this._mirrorRunner.run('rsv_migrate_mirror_next', [ptr, MIRROR_WAIT_MS, [0], [0], [0],
          new Uint8Array(TOKEN_MAX), TOKEN_MAX, [0], [0], [0], [0], [0]], false);
      } catch (e) {
        if (this._stopping) return;
        this._mirrorRunner = new Runner(); // the thread died: a new one
        continue;
      }
      if (r.rc === codes.EBUSY) continue;
      if (r.rc !== 0) return; // ECANCELED: closing
      const [, , [ticket], [op], [shop], tok, , [len], [item], [loc], [qty], [ttl]] = r.args;
      const old = await this._askOld(op, shop, Buffer.from(tok.subarray(0, Number(len))), item, loc, qty, ttl);
      C.rsv_migrate_mirror_done(ptr, ticket, old.code);
    }
  }

  /** The shop's stage as the handle follows it now: 'old', 'shadow', 'primary' or 'complete'. */
  async stage(shopId) {
    const shop = u64(shopId, 'shopId');
    if (this._closing) throw invalid('the migration handle is closed', 'rsv_migrate_stage');
    const st = [0];
    const rc = C.rsv_migrate_stage(this._ptr, shop, st);
    if (rc !== 0) throw makeError(rc, strerror(rc), 'rsv_migrate_stage');
    return STAGES[st[0]];
  }

  /** A counter (a name of MIGRATION_STATS) of one shop, or of every shop when shopId is null. */
  async stat(shopId, kind) {
    const fn = 'rsv_migrate_stat';
    const k = MIGRATION_STATS.indexOf(kind);
    if (k < 0) throw invalid(`unknown counter ${show(kind)}; known: ${MIGRATION_STATS.join(', ')}`, fn);
    const all = shopId === null || shopId === undefined;
    const shop = all ? 0 : u64(shopId, 'shopId');
    if (this._closing) throw invalid('the migration handle is closed', fn);
    const out = [0];
    const rc = C.rsv_migrate_stat(this._ptr, shop, all ? 1 : 0, k, out);
    if (rc !== 0) throw makeError(rc, strerror(rc), fn);
    return asU64(out[0]);
  }

  /** Every counter of one shop (or of every shop, shopId null): {bothAccepted, ..., dropped}. */
  async stats(shopId = null) {
    const out = {};
    for (const k of MIGRATION_STATS) out[k] = await this.stat(shopId, k);
    return out;
  }

  /** The counters and stages in the Prometheus text format. */
  async prometheus() {
    const fn = 'rsv_migrate_prometheus';
    if (this._closing) throw invalid('the migration handle is closed', fn);
    const need = [0];
    let rc = C.rsv_migrate_prometheus(this._ptr, null, 0, need);
    while (rc === codes.ERANGE) {
      const buf = Buffer.alloc(Number(need[0]) + 1);
      rc = C.rsv_migrate_prometheus(this._ptr, buf, buf.length, need);
      if (rc === 0) return buf.toString('utf8', 0, Number(need[0]));
    }
    throw makeError(rc, strerror(rc), fn);
  }

  /**
   * Wait until the work offered is done (libreserve's side of shadow, the
   * old store's of primary), at most ms: true, or false if some is left.
   */
  async drain(ms = 10000) {
    if (!Number.isInteger(ms) || ms < 0 || ms > 0xffffffff)
      throw invalid(`ms must be an integer in 0..2**32-1, not ${show(ms)}`, 'rsv_migrate_drain');
    if (this._closing) throw invalid('the migration handle is closed', 'rsv_migrate_drain');
    const { rc } = await blocking('rsv_migrate_drain', [this._ptr, ms]);
    return rc === 0;
  }

  /**
   * After the calls already made: the work offered is done (at most 5 s
   * more), the mirroring loop stops, the handle is closed (what is left
   * is counted dropped, the shop marked for a compare), and the context
   * too when the handle opened it.
   */
  async close() {
    if (!this._closing) {
      const tail = this._tail;
      this._closing = (async () => {
        await tail;
        await blocking('rsv_migrate_drain', [this._ptr, CLOSE_DRAIN_MS]);
        this._stopping = true;
        // its last wait of the outbox must keep the process up till it ends
        this._mirrorRunner.worker.ref();
        await this._mirroring;
        this._mirrorRunner.worker.terminate();
        const ptr = this._ptr;
        this._ptr = null;
        // before a close of the context queued after it
        await this._ctx._run('rsv_migrate_close', () => blocking('rsv_migrate_close', [ptr]));
        if (this._ownsCtx) await this._ctx.close();
      })();
    }
    return this._closing;
  }
}

if (typeof Symbol.asyncDispose === 'symbol') {
  Migration.prototype[Symbol.asyncDispose] = function dispose() {
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
  Migration,
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
  AuthenticationError,
  LibraryNotFound,
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
  STAGES,
  MIGRATION_STATS,
};
