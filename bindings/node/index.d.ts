// Types of libreserve for Node.js (index.js).

/**
 * An id (shop, item, location): an unsigned 64-bit integer, as a number
 * (a safe integer) or a bigint.  Ids read back are numbers when they are
 * safe integers, bigints otherwise.
 */
export type Id = number | bigint;
/** A signed 64-bit quantity or duration: a number (a safe integer) or a bigint. */
export type Int64 = number | bigint;
/** A checkout token: a string (sent as UTF-8) or bytes (at most 128). */
export type Token = string | Uint8Array;

/** Context options; anything left out keeps the library's default (defaultOptions()). */
export interface Options {
  /** OPT.* flags */
  flags?: number;
  /** max units kept as rows per item and location (1..10000, default 1000) */
  poolCap?: Int64;
  /** refill ahead of demand below this many rows (-1: poolCap * 3 / 4) */
  refillLowWater?: Int64;
  /** default hold lifetime (1 ms..30 days, default 600000) */
  holdTtlMs?: Int64;
  /** deadlock / lock-wait retries (0..100, default 8) */
  maxRetries?: number;
  /** first backoff in microseconds, doubled per retry (default 2000) */
  retryBaseUs?: number;
  /** innodb_lock_wait_timeout for the library's statements (0: the connection's own) */
  lockWaitTimeoutS?: number;
  /** statement comment prefix (default "conn_tag:") */
  connTagPrefix?: string | null;
  /** how long settled checkouts are kept for idempotent retries (default 604800) */
  settledRetentionS?: Int64;
  /** sweep() drains pools idle this long (0: never, default 3600) */
  poolIdleS?: Int64;
  /** time budget of one call (0: none, default 5000) */
  callTimeoutMs?: Int64;
  /** prepared statements kept per context (1..48, default 48) */
  stmtCacheMax?: number;
}

export type DefaultOptions = Required<{ [K in keyof Options]: Exclude<Options[K], undefined> }>;

/** The parts of a connection string; see makeDsn(). */
export interface DsnParts {
  database: string;
  user?: string | null;
  password?: string | null;
  host?: string | null;
  port?: number | null;
  /** a Unix socket path */
  socket?: string | null;
  connectTimeout?: number | null;
  readTimeout?: number | null;
  writeTimeout?: number | null;
  ssl?: boolean | null;
  sslCa?: string | null;
  sslCapath?: string | null;
  sslCert?: string | null;
  sslKey?: string | null;
  sslVerify?: boolean | null;
}

/** One cart line: quantity units of itemId from its locations, in order of preference. */
export interface CartLine {
  itemId: Id;
  /** the locations, in order of preference (or one location) */
  locations?: Id[] | Id;
  /** one location (when locations is not given) */
  locationId?: Id;
  quantity: Int64;
  /** let several of its locations serve the line, in the given order */
  split?: boolean;
}

export interface Allocation {
  locationId: Id;
  quantity: Int64;
}

/** How one cart line was held, after reserve(). */
export interface LineAllocation {
  itemId: Id;
  allocations: Allocation[];
}

export type StatusName = 'held' | 'claimed' | 'released' | 'expired';

export interface CheckoutStatus {
  status: StatusName;
  /** the RSV_STATUS_* number (1..4) */
  statusCode: 1 | 2 | 3 | 4;
  /** units the checkout holds now */
  units: Int64;
  /** time to the deadline; negative once passed */
  expiresInMs: Int64;
}

export interface Stock {
  onHand: Int64;
  held: Int64;
  pooled: Int64;
  available: Int64;
}

export interface Violation {
  shopId: Id;
  itemId: Id;
  locationId: Id;
  problem: string;
}

export type OpName = 'all' | 'reserve' | 'claim' | 'release' | 'extend' | 'status' |
  'replenish' | 'sweep' | 'stock' | 'audit';

export type StatName = 'calls' | 'ok' | 'expected' | 'failed' | 'retries' | 'deadlocks' |
  'lockWaitTimeouts' | 'inlineRefills' | 'slowPaths' | 'shortReads' | 'statements' |
  'latencyUs' | 'latencyMaxUs' | 'oneTrip' | 'backToFast' | 'ledgerTakes' |
  'poolDrained' | 'stmtEvictions';

export type Stats = Record<StatName, number | bigint>;

/** One checkout of reserveBatch(): quantity units of itemId at locationId. */
export interface BatchReserve {
  shopId: Id;
  token: Token;
  itemId: Id;
  locationId: Id;
  quantity: Int64;
}

/** One checkout of claimBatch() / releaseBatch(). */
export interface BatchCheckout {
  shopId: Id;
  token: Token;
}

/**
 * A context on a connection of its own (open()).  Every method returns a
 * promise and none takes a thread of libuv's pool (the checkout calls wait
 * on the library's descriptor, the others run on threads of the package's
 * own); the calls on one context run one at a time in the order made.
 */
export class Context {
  private constructor();
  /** true once close() was called */
  readonly closed: boolean;

  /** Hold quantity units of itemId at locationId for the checkout token (ttlMs 0: the default). */
  reserveOne(shopId: Id, token: Token, itemId: Id, locationId: Id, quantity: Int64,
    ttlMs?: Int64): Promise<void>;
  /** Hold every line, all or nothing; OutOfStock / NoItem carry failedLine. */
  reserve(shopId: Id, token: Token, lines: CartLine[], ttlMs?: Int64): Promise<LineAllocation[]>;
  /** Payment succeeded: take the held units for good (AlreadyClaimed on a repeat). */
  claim(shopId: Id, token: Token): Promise<void>;
  /** Payment failed or the buyer left: give the units back (idempotent). */
  release(shopId: Id, token: Token): Promise<void>;
  /** Push the deadline to now + ttlMs (0: the default). */
  extend(shopId: Id, token: Token, ttlMs?: Int64): Promise<void>;
  checkoutStatus(shopId: Id, token: Token): Promise<CheckoutStatus>;

  /**
   * Up to BATCH_MAX checkouts in one call.  Resolves to one code per entry
   * (codes.OK or the code the single call would reject with); rejects only
   * when the batch fails as a whole.
   */
  reserveBatch(entries: BatchReserve[], ttlMs?: Int64): Promise<number[]>;
  /** Checkouts of carts at once: per entry {code: 0, lines} or {code, failedLine}. */
  reserveCartBatch(entries: { shopId: Id; token: Token; lines: CartLine[] }[], ttlMs?: Int64):
    Promise<({ code: 0; lines: LineAllocation[] } | { code: number; failedLine: number | null })[]>;
  claimBatch(entries: BatchCheckout[]): Promise<number[]>;
  releaseBatch(entries: BatchCheckout[]): Promise<number[]>;

  /** Top the pool up from the ledger; resolves to the rows added. */
  replenish(shopId: Id, itemId: Id, locationId: Id): Promise<Int64>;
  /** Give the pool back to its ledger row; resolves to the rows given back. */
  poolDrain(shopId: Id, itemId: Id, locationId: Id): Promise<Int64>;
  /** Give back expired holds (maxHolds 0: 10000); resolves to how many. */
  sweep(shopId: Id, maxHolds?: Int64): Promise<Int64>;
  stockSet(shopId: Id, itemId: Id, locationId: Id, onHand: Int64): Promise<void>;
  /** Resolves to the new stock on hand.  Not idempotent: after InDoubt read the stock first. */
  stockAdjust(shopId: Id, itemId: Id, locationId: Id, delta: Int64): Promise<Int64>;
  stockGet(shopId: Id, itemId: Id, locationId: Id): Promise<Stock>;

  /** The invariants of one shop (or of every shop); resolves to the violations (empty: clean). */
  audit(shopId?: Id, options?: { allShops?: boolean }): Promise<Violation[]>;

  /** Connect again after ConnectionLost or InDoubt, then repeat the call. */
  reconnect(): Promise<void>;
  /** Free the context and close its connection, after the calls already made. */
  close(): Promise<void>;

  /** Every counter of an operation kind. */
  stats(op?: OpName): Promise<Stats>;
  /** This context's statistics as Prometheus text (labels: {name: value} or 'name="value",...'). */
  statsPrometheus(labels?: Record<string, string | number> | string | null): Promise<string>;
  /** The kill switch: false makes every call that writes fail with Disabled. */
  setEnabled(enabled: boolean): Promise<void>;
}

/**
 * Coalesces concurrent reserves, claims and releases into batches on
 * connections of its own (rsv_batcher_*).  Any number of calls may be in
 * flight; each settles as the same Context call would, with the code's
 * short text as message.
 */
export class Batcher {
  private constructor();
  /** Open connections (1..BATCHER_MAX_CONNECTIONS, default 4) contexts on dsn. */
  static open(dsn: string, options?: Options, connections?: number): Promise<Batcher>;
  /** true once close() was called */
  readonly closed: boolean;
  reserveOne(shopId: Id, token: Token, itemId: Id, locationId: Id, quantity: Int64,
    ttlMs?: Int64): Promise<void>;
  /** A cart through the batcher; settles as Context.reserve. */
  reserve(shopId: Id, token: Token, lines: CartLine[], ttlMs?: Int64): Promise<LineAllocation[]>;
  claim(shopId: Id, token: Token): Promise<void>;
  release(shopId: Id, token: Token): Promise<void>;
  /** Every counter of an operation kind, summed over the connections. */
  stats(op?: OpName): Promise<Stats>;
  /** Close once the calls already made are answered; later calls are refused. */
  close(): Promise<void>;
}

/** A shop's stage in a migration (RSV_STAGE_*). */
export type StageName = 'old' | 'shadow' | 'primary' | 'complete';
/** A migration handle's counters (RSV_MIG_*). */
export type MigrationStatName = 'bothAccepted' | 'bothRefused' | 'oldRefusedNewAccepted' |
  'oldAcceptedNewRefused' | 'newFailed' | 'unknown' | 'oldFailed' | 'offered' | 'applied' |
  'dropped' | 'stageReadFailed';
export type MigrationStats = { [K in MigrationStatName]: Id };
/** An operation the old store is asked to do. */
export type LegacyOp = 'reserve' | 'claim' | 'release';
/**
 * The old store's operation: resolves to accept; rejects with an
 * ExpectedOutcome (OutOfStock, NotFound, AlreadyClaimed, Expired,
 * AlreadyReleased) to refuse; anything else is the old store failing.
 * itemId, locationId, quantity and ttlMs are 0 but for a reserve.
 */
export type LegacyFn = (op: LegacyOp, shopId: Id, token: Uint8Array, itemId: Id, locationId: Id,
  quantity: Int64, ttlMs: Int64) => unknown;
export interface MigrationOpenOptions {
  /** the connection of the handle's own thread (default: the dsn given to open) */
  shadowDsn?: string;
  /** bound of the work waiting (0: 4096) */
  queueMax?: number;
  /** how often the stages are read, 50..60000 ms (default 1000) */
  refreshMs?: number;
  /** the options of the context opened on a dsn */
  options?: Options;
}

/**
 * A migration handle (reserve/migrate.h): each reserve, claim and release
 * sent to the old store, to libreserve or both by the shop's stage.  The
 * old store's function is called here, on the main thread, and may be
 * async; calls on one handle run one at a time in the order made.
 */
export class Migration {
  private constructor();
  /** Over a Context (shadowDsn required) or a dsn (a context of its own, closed with the handle). */
  static open(ctxOrDsn: Context | string, options?: MigrationOpenOptions): Promise<Migration>;
  /** true once close() was called */
  readonly closed: boolean;
  /** Errors the old store's function threw that were no ReserveError. */
  readonly legacyErrors: unknown[];
  setLegacy(fn: LegacyFn | null): void;
  reserveOne(shopId: Id, token: Token, itemId: Id, locationId: Id, quantity: Int64,
    ttlMs?: Int64): Promise<void>;
  claim(shopId: Id, token: Token): Promise<void>;
  release(shopId: Id, token: Token): Promise<void>;
  /** The shop's stage as the handle follows it now. */
  stage(shopId: Id): Promise<StageName>;
  /** A counter of one shop, or of every shop (shopId null). */
  stat(shopId: Id | null, kind: MigrationStatName): Promise<Id>;
  /** Every counter of one shop, or of every shop (shopId null). */
  stats(shopId?: Id | null): Promise<MigrationStats>;
  /** The counters and stages in the Prometheus text format. */
  prometheus(): Promise<string>;
  /** Wait until the work offered is done, at most ms: true, or false if some is left. */
  drain(ms?: number): Promise<boolean>;
  /** After the calls made: the work offered done (at most 5 s more), then closed. */
  close(): Promise<void>;
}

/** Open a context on a connection of its own (rsv_open_dsn). */
export function open(dsn: string, options?: Options): Promise<Context>;
/** A connection string with every part %XX-escaped. */
export function makeDsn(parts: DsnParts): string;
/** The library's defaults for every option. */
export function defaultOptions(): DefaultOptions;
/** The loaded library's version ("0.1.0"). */
export function version(): string;
/** MAJOR * 10000 + MINOR * 100 + PATCH */
export function versionNumber(): number;
/** The schema version the loaded library works on. */
export function schemaVersion(): number;
/** A short text for any code ("out of stock"). */
export function strerror(code: number): string;
/** "RSV_EOUTOFSTOCK", ...; null for an unknown code. */
export function codeName(code: number): string | null;
/** The file the C library was loaded from. */
export function libraryPath(): string;
/** Where schema.sql is: $RSV_SCHEMA, next to the library, the source tree, the usual paths. */
export function findSchema(): string;
/** The error class for a code. */
export function errorClass(code: number): typeof ReserveError;

/** A failing libreserve call. */
export class ReserveError extends Error {
  constructor(code: number, message?: string, fn?: string);
  /** the RSV_E* code (negative) */
  readonly code: number;
  /** its name, "RSV_EOUTOFSTOCK" */
  readonly codeName: string;
  /** the code's short text */
  readonly strerror: string;
  /** the C function that failed */
  readonly function: string | null;
  /** the server's (or Connector/C's) error number behind it (1045: access denied), else null */
  readonly errno: number | null;
  /** the line that could not be served (OutOfStock, NoItem and cart errors of reserve(); 0 for reserveOne), else null */
  failedLine: number | null;
}
/** Outcomes a checkout handles as business logic (codes -1..-7). */
export class ExpectedOutcome extends ReserveError {}
/** Bad arguments, schema, server or connection problems. */
export class Failure extends ReserveError {}
export class OutOfStock extends ExpectedOutcome {}
export class NotFound extends ExpectedOutcome {}
export class Expired extends ExpectedOutcome {}
export class AlreadyClaimed extends ExpectedOutcome {}
export class AlreadyReleased extends ExpectedOutcome {}
export class Busy extends ExpectedOutcome {}
export class InDoubt extends ExpectedOutcome {}
export class ConnectionLost extends Failure {}
export class InvalidArgument extends Failure {}
export class InvalidQuantity extends Failure {}
export class EmptyCart extends Failure {}
export class InvalidToken extends Failure {}
export class NoItem extends Failure {}
export class SchemaError extends Failure {}
export class UnsupportedServer extends Failure {}
export class InTransaction extends Failure {}
export class OutOfMemory extends Failure {}
export class DatabaseError extends Failure {}
export class CartTooBig extends Failure {}
export class StockError extends Failure {}
export class ConfigError extends Failure {}
export class OutOfRange extends Failure {}
export class Disabled extends Failure {}
export class SchemaVersionError extends Failure {}
export class Canceled extends Failure {}
export class NotPrimary extends ConnectionLost {}
/** RSV_ECONN because the server refused the account (errno 1045, ...): no ConnectionLost, as reconnecting will not help. */
export class AuthenticationError extends Failure {}
/** Thrown by require('libreserve') when the C library cannot be loaded; tried names each place looked in. */
export class LibraryNotFound extends Error {
  readonly tried: string[];
  readonly code: 'RSV_LIBRARY_NOT_FOUND';
}

export const codes: Readonly<{
  OK: 0; EOUTOFSTOCK: -1; ENOTFOUND: -2; EEXPIRED: -3; ECLAIMED: -4; ERELEASED: -5;
  EBUSY: -6; EINDOUBT: -7; ECONN: -8; EINVAL: -10; EQUANTITY: -11; EEMPTY: -12;
  ETOKEN: -13; ENOITEM: -14; ESCHEMA: -15; ESERVER: -16; EINTXN: -17; ENOMEM: -18;
  EDB: -19; ETOOBIG: -20; ESTOCK: -21; ECONFIG: -22; ERANGE: -23; EDISABLED: -24;
  ESCHEMAVER: -25; ECANCELED: -26; ENOTPRIMARY: -27;
}>;
export const OPT: Readonly<{
  NO_PROACTIVE_REFILL: 0x2;
}>;
export const STATUS: Readonly<{ 1: 'held'; 2: 'claimed'; 3: 'released'; 4: 'expired' }>;
export const OPS: readonly OpName[];
export const STATS: readonly StatName[];
export const TOKEN_MAX: 128;
export const QUANTITY_MAX: 1000000000;
export const CART_MAX_LINES: 1000;
export const LINE_MAX_LOCATIONS: 16;
export const BATCH_MAX: 256;
export const BATCHER_MAX_CONNECTIONS: 64;
export const STAGES: readonly StageName[];
export const MIGRATION_STATS: readonly MigrationStatName[];
