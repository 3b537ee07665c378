'use strict';
// What needs no server: the library, codes, errors, arguments, options,
// connection strings, the types.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { PKG, REPO } = require('./helpers');
const rsv = require('..');

test('version: the library, package.json and reserve.h agree', () => {
  const v = rsv.version();
  assert.match(v, /^\d+\.\d+\.\d+$/);
  const [a, b, c] = v.split('.').map(Number);
  assert.equal(rsv.versionNumber(), a * 10000 + b * 100 + c);
  assert.equal(JSON.parse(fs.readFileSync(path.join(PKG, 'package.json'), 'utf8')).version, v);
  const header = path.join(REPO, 'include', 'reserve.h');
  if (fs.existsSync(header)) {
    assert.equal(/^#define RSV_VERSION "([^"]+)"$/m.exec(fs.readFileSync(header, 'utf8'))[1], v);
  }
  assert.ok(rsv.schemaVersion() >= 1);
  assert.ok(fs.existsSync(rsv.libraryPath()), rsv.libraryPath());
  assert.match(path.basename(rsv.libraryPath()), /^libreserve\.so/);
  assert.ok(fs.existsSync(rsv.findSchema()));
});

test('codes: names, texts and error classes', () => {
  const names = new Set();
  for (const [k, code] of Object.entries(rsv.codes)) {
    assert.equal(rsv.codeName(code), 'RSV_' + k);
    names.add(rsv.codeName(code));
    assert.notEqual(rsv.strerror(code), 'unknown error code');
    if (code === 0) continue;
    const Cls = rsv.errorClass(code);
    assert.ok(Cls.prototype instanceof rsv.ReserveError);
    assert.ok(code >= -7 ? Cls.prototype instanceof rsv.ExpectedOutcome
      : Cls.prototype instanceof rsv.Failure, k);
    const e = new Cls(code, 'detail', 'rsv_x');
    assert.ok(e instanceof Error);
    assert.equal(e.code, code);
    assert.equal(e.codeName, 'RSV_' + k);
    assert.equal(e.message, 'detail');
    assert.equal(e.function, 'rsv_x');
    assert.equal(e.strerror, rsv.strerror(code));
    assert.equal(e.name, Cls.name);
    assert.match(String(e), new RegExp(`^${Cls.name}: detail$`));
  }
  assert.equal(names.size, Object.keys(rsv.codes).length);
  assert.equal(rsv.errorClass(rsv.codes.EOUTOFSTOCK), rsv.OutOfStock);
  assert.equal(rsv.errorClass(rsv.codes.ECLAIMED), rsv.AlreadyClaimed);
  assert.equal(rsv.errorClass(rsv.codes.ERANGE), rsv.OutOfRange);
  for (const unknown of [2, -9, -28, 12345]) {
    assert.equal(rsv.codeName(unknown), null);
    assert.equal(rsv.strerror(unknown), 'unknown error code');
  }
  const e = new rsv.ReserveError(-99);
  assert.equal(e.codeName, 'RSV_UNKNOWN(-99)');
  assert.equal(e.message, 'unknown error code');
  assert.equal(new (rsv.errorClass(-99))(-99).constructor, rsv.Failure);
});

test('makeDsn escapes every part', () => {
  assert.equal(rsv.makeDsn({ database: 'shop' }), 'mariadb:///shop');
  assert.equal(rsv.makeDsn({ database: 'shop', host: 'db', port: 3306, user: 'app' }),
    'mariadb://app@db:3306/shop');
  assert.equal(rsv.makeDsn({
    database: 's/1', user: 'a@b', password: 'p:w/%', socket: '/tmp/x y.sock',
    ssl: true, sslCa: null, connectTimeout: 5,
  }), 'mariadb://a%40b:p%3Aw%2F%25@/s%2F1?socket=%2Ftmp%2Fx%20y.sock&connect_timeout=5&ssl=1');
  assert.throws(() => rsv.makeDsn({ database: 'x', nope: 1 }), rsv.InvalidArgument);
  assert.throws(() => rsv.makeDsn({}), rsv.InvalidArgument);
});

test('defaultOptions are the library\'s', () => {
  const o = rsv.defaultOptions();
  assert.equal(o.poolCap, 1000);
  assert.equal(o.holdTtlMs, 600000);
  assert.equal(o.maxRetries, 8);
  assert.equal(o.callTimeoutMs, 5000);
  assert.equal(o.connTagPrefix, null);
});

test('arguments are checked before anything is sent', async () => {
  const dsn = 'mariadb://nobody@/nodb?socket=/nonexistent';
  await assert.rejects(rsv.open(42), rsv.InvalidArgument);
  await assert.rejects(rsv.open(dsn, { poolKap: 1 }), (e) =>
    e instanceof rsv.InvalidArgument && /unknown option "poolKap"/.test(e.message));
  await assert.rejects(rsv.open(dsn, { maxRetries: 2 ** 40 }), (e) =>
    e instanceof rsv.InvalidArgument && /maxRetries is out of range/.test(e.message));
  await assert.rejects(rsv.open(dsn, { holdTtlMs: 1.5 }), rsv.InvalidArgument);
  await assert.rejects(rsv.open(dsn, { connTagPrefix: 7 }), rsv.InvalidArgument);
  // the library's own checks: a dsn key it does not know, an unreachable server
  await assert.rejects(rsv.open('mariadb://nobody@/db?no_such_key=1'), (e) =>
    e instanceof rsv.InvalidArgument && e.code === rsv.codes.EINVAL &&
    e.function === 'rsv_open_dsn' && /no_such_key/.test(e.message));
  await assert.rejects(rsv.open(dsn), (e) =>
    e instanceof rsv.ConnectionLost && e.codeName === 'RSV_ECONN' && /cannot connect/.test(e.message));
  // the batcher: the same checks, and the message of a context on its dsn
  await assert.rejects(rsv.Batcher.open(42), rsv.InvalidArgument);
  for (const n of [0, rsv.BATCHER_MAX_CONNECTIONS + 1, 1.5, '2']) {
    await assert.rejects(rsv.Batcher.open(dsn, {}, n), (e) =>
      e instanceof rsv.InvalidArgument && /connections must be an integer in 1\.\.64/.test(e.message));
  }
  await assert.rejects(rsv.Batcher.open(dsn, { poolKap: 1 }), rsv.InvalidArgument);
  await assert.rejects(rsv.Batcher.open(dsn, {}, 2), (e) =>
    e instanceof rsv.ConnectionLost && e.function === 'rsv_batcher_open' && /cannot connect/.test(e.message));
});

test('index.d.ts declares every export of index.js', () => {
  const dts = fs.readFileSync(path.join(PKG, 'index.d.ts'), 'utf8');
  const declared = new Set([...dts.matchAll(/^export (?:declare )?(?:function|class|const|let) (\w+)/gm)]
    .map((m) => m[1]));
  assert.deepEqual([...Object.keys(rsv)].filter((k) => !declared.has(k)), []);
  assert.deepEqual([...declared].filter((k) => !(k in rsv)), []);
});

test('the types compile against a strict TypeScript program', (t) => {
  const tsc = path.join(PKG, 'node_modules', '.bin', 'tsc');
  if (!fs.existsSync(tsc)) {
    t.skip('typescript is not installed (npm install in bindings/node)');
    return;
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rsv-ts-'));
  try {
    fs.mkdirSync(path.join(dir, 'node_modules'));
    fs.symlinkSync(PKG, path.join(dir, 'node_modules', 'libreserve'));
    fs.writeFileSync(path.join(dir, 'app.ts'), `
import * as rsv from 'libreserve';

async function main(): Promise<void> {
  const dsn: string = rsv.makeDsn({ database: 'shop', socket: '/run/mysqld/mysqld.sock', connectTimeout: 5 });
  const ctx: rsv.Context = await rsv.open(dsn, { holdTtlMs: 300000, poolCap: 50n });
  await ctx.stockSet(1, 42n, 7, 10);
  const lines: rsv.LineAllocation[] = await ctx.reserve(1, 'c-1', [
    { itemId: 42, locations: [7, 8], quantity: 3, split: true },
    { itemId: 43, locationId: 7, quantity: 1 },
  ]);
  const loc: rsv.Id = lines[0].allocations[0].locationId;
  await ctx.reserveOne(1, Buffer.from('c-2'), 42, loc, 2, 60000);
  try {
    await ctx.claim(1, 'c-1');
  } catch (e) {
    if (e instanceof rsv.AlreadyClaimed) console.log(e.code, e.codeName, e.message, e.function);
    else if (e instanceof rsv.OutOfStock) console.log(e.failedLine);
    else throw e;
  }
  await ctx.release(1, 'c-2');
  await ctx.extend(1, 'c-1', 1000);
  const st: rsv.CheckoutStatus = await ctx.checkoutStatus(1, 'c-1');
  const name: 'held' | 'claimed' | 'released' | 'expired' = st.status;
  const stock: rsv.Stock = await ctx.stockGet(1, 42, 7);
  const onHand: rsv.Int64 = await ctx.stockAdjust(1, 42, 7, -1);
  const swept: rsv.Int64 = await ctx.sweep(1);
  const v: rsv.Violation[] = await ctx.audit(1, { allShops: true });
  const s: rsv.Stats = await ctx.stats('reserve');
  const text: string = await ctx.statsPrometheus({ instance: 'a' });
  await ctx.replenish(1, 42, 7);
  await ctx.poolDrain(1, 42, 7);
  await ctx.setEnabled(false);
  await ctx.reconnect();
  const results: number[] = await ctx.reserveBatch([
    { shopId: 1, token: 'b-1', itemId: 42n, locationId: 7, quantity: 1 },
  ], 60000);
  await ctx.claimBatch([{ shopId: 1, token: Buffer.from('b-1') }]);
  await ctx.releaseBatch([{ shopId: 1n, token: 'b-1' }]);
  await ctx.close();
  const b: rsv.Batcher = await rsv.Batcher.open(dsn, { holdTtlMs: 60000 }, 8);
  await Promise.all([b.reserveOne(1, 'b-2', 42, 7, 1, 1000), b.claim(1, 'b-2'), b.release(1, 'b-3')]);
  const bs: rsv.Stats = await b.stats('reserve');
  await b.close();
  const m: rsv.Migration = await rsv.Migration.open(dsn, { refreshMs: 100, queueMax: 64 });
  m.setLegacy(async (op: rsv.LegacyOp, shop: rsv.Id, tok: Uint8Array, item: rsv.Id) => {
    if (op === 'reserve' && item === 42) throw new rsv.OutOfStock(rsv.codes.EOUTOFSTOCK, 'none');
  });
  await m.reserveOne(1, 'm-1', 42, 7, 1);
  await m.claim(1, Buffer.from('m-1'));
  await m.release(1n, 'm-1');
  const stage: rsv.StageName = await m.stage(1);
  const ms: rsv.MigrationStats = await m.stats(null);
  const offered: rsv.Id = await m.stat(1, 'offered');
  const drained: boolean = await m.drain(1000);
  console.log(stage, ms.dropped, offered, drained, await m.prometheus(), rsv.STAGES[0],
    rsv.MIGRATION_STATS.length, m.legacyErrors.length, m.closed);
  await m.close();
  const closed: boolean = ctx.closed;
  const code: number = rsv.codes.EOUTOFSTOCK;
  const version: string = rsv.version();
  console.log(name, stock.available, onHand, swept, v.length, s.calls, text, closed, code, version,
    rsv.versionNumber(), rsv.schemaVersion(), rsv.strerror(-1), rsv.codeName(-1), rsv.libraryPath(),
    rsv.findSchema(), rsv.defaultOptions().poolCap, rsv.OPT.NO_PROACTIVE_REFILL, rsv.STATUS[1],
    rsv.errorClass(-1) === rsv.OutOfStock, rsv.TOKEN_MAX, results[0] === rsv.codes.OK, bs.statements,
    b.closed, rsv.BATCH_MAX, rsv.BATCHER_MAX_CONNECTIONS);
}
main();
`);
    fs.writeFileSync(path.join(dir, 'bad.ts'), `
import * as rsv from 'libreserve';
async function f(ctx: rsv.Context) { await ctx.reserveOne(1, 42, 1, 1, 1); }
async function g(b: rsv.Batcher) { await b.claim(1, 42); }
async function k(m: rsv.Migration) { await m.stat(1, 'offerd'); }
`);
    // No @types/node needed: the two globals the program uses.
    fs.writeFileSync(path.join(dir, 'globals.d.ts'),
      'declare const Buffer: { from(s: string): Uint8Array };\n' +
      'declare const console: { log(...a: unknown[]): void };\n');
    const args = ['--noEmit', '--strict', '--target', 'es2020', '--lib', 'es2020',
      '--module', 'commonjs', '--moduleResolution', 'node', 'globals.d.ts'];
    const run = (file) => {
      try {
        execFileSync(tsc, [...args, file], { cwd: dir, encoding: 'utf8' });
        return '';
      } catch (e) {
        return String(e.stdout) + String(e.stderr) || 'failed';
      }
    };
    assert.equal(run('app.ts'), '');
    const bad = run('bad.ts');
    // a number is not a token; a counter's name is checked
    assert.equal((bad.match(/TS2345/g) || []).length, 3, bad);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
