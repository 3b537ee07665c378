'use strict';
// Against the server in RSV_TEST_SOCKET: a database rsvjs_<pid> of its own
// with the schema loaded, dropped at the end (kept with RSV_TEST_KEEP_DB=1).
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { spawn } = require('node:child_process');
const { setTimeout: sleep } = require('node:timers/promises');
const h = require('./helpers');
const rsv = require('..');

const DB = `rsvjs_${process.pid}`;
const missing = h.serverMissing();
const U64_MAX = (1n << 64n) - 1n;

test.before(() => {
  if (missing) return;
  h.createDb(DB);
  h.sql(`CREATE DATABASE \`${DB}_empty\``);
});

test.after(() => {
  if (missing || process.env.RSV_TEST_KEEP_DB) return;
  h.dropDb(DB);
  h.dropDb(`${DB}_empty`);
});

// A test with a fresh shop and a context on it; the shop must audit clean.
function serverTest(name, fn, options = {}) {
  test(name, { skip: missing || false }, async () => {
    const ctx = await rsv.open(h.dsn(DB), options);
    const shop = h.newShop();
    try {
      await fn(ctx, shop);
    } finally {
      if (!ctx.closed) await ctx.close();
      const check = await rsv.open(h.dsn(DB));
      try {
        assert.deepEqual(await check.audit(shop), [], `audit of shop ${shop}`);
      } finally {
        await check.close();
      }
    }
  });
}

// The error a promise rejects with, checked against its class and code.
async function rejection(promise, Cls, code) {
  let err = null;
  await promise.catch((e) => { err = e; });
  assert.ok(err, `expected ${Cls.name}, got a result`);
  assert.ok(err instanceof Cls, `expected ${Cls.name}, got ${err.stack}`);
  assert.equal(err.code, code);
  assert.equal(err.codeName, rsv.codeName(code));
  assert.ok(err.message.length > 0);
  return err;
}

serverTest('open, stockSet / stockGet, reserveOne -> claim', async (ctx, s) => {
  assert.equal(ctx.closed, false);
  assert.equal(await ctx.stockSet(s, 42, 7, 10), undefined);
  assert.deepEqual(await ctx.stockGet(s, 42, 7), { onHand: 10, held: 0, pooled: 0, available: 10 });
  await ctx.reserveOne(s, 'checkout-1', 42, 7, 2);
  assert.deepEqual(await ctx.stockGet(s, 42, 7), { onHand: 10, held: 2, pooled: 0, available: 8 });
  await ctx.claim(s, 'checkout-1');
  const e = await rejection(ctx.claim(s, 'checkout-1'), rsv.AlreadyClaimed, rsv.codes.ECLAIMED);
  assert.ok(e instanceof rsv.ExpectedOutcome);
  assert.equal(e.function, 'rsv_claim');
  assert.equal(e.message, 'the checkout was already claimed');
  // a reserve again under the claimed token is refused too
  await rejection(ctx.reserveOne(s, 'checkout-1', 42, 7, 1), rsv.AlreadyClaimed, rsv.codes.ECLAIMED);
  const st = await ctx.stockGet(s, 42, 7);
  assert.equal(st.onHand, 8);
  assert.equal(st.held, 0);
  assert.equal(await ctx.stockAdjust(s, 42, 7, 5), 13);
  assert.equal(await ctx.stockAdjust(s, 42, 7, -13), 0);
});

serverTest('errors carry code, codeName, the function and rsv_errmsg', async (ctx, s) => {
  let e = await rejection(ctx.stockGet(s, 9, 9), rsv.NoItem, rsv.codes.ENOITEM);
  assert.match(e.message, /no stock ledger row for shop \d+ item 9 location 9/);
  assert.equal(e.function, 'rsv_stock_get');
  assert.ok(e instanceof rsv.Failure);
  assert.match(e.stack, /^NoItem: no stock ledger row/);
  assert.match(e.stack, /server\.test\.js/); // the caller's frames, not only the library's
  e = await rejection(ctx.stockSet(s, 1, 1, -1), rsv.InvalidQuantity, rsv.codes.EQUANTITY);
  assert.match(e.message, /stock on hand must be/);
  await rejection(ctx.claim(s, 'nope'), rsv.NotFound, rsv.codes.ENOTFOUND);
  await rejection(ctx.claim(s, ''), rsv.InvalidToken, rsv.codes.ETOKEN);
  await rejection(ctx.claim(s, 'x'.repeat(rsv.TOKEN_MAX + 1)), rsv.InvalidToken, rsv.codes.ETOKEN);
  await ctx.stockSet(s, 1, 1, 3);
  await ctx.reserveOne(s, 'a', 1, 1, 2);
  e = await rejection(ctx.stockSet(s, 1, 1, 1), rsv.StockError, rsv.codes.ESTOCK);
  assert.match(e.message, /held/);
  await rejection(ctx.reserveOne(s, 'b', 1, 1, 2), rsv.OutOfStock, rsv.codes.EOUTOFSTOCK);
  await rejection(ctx.reserveOne(s, 'b', 1, 1, 0), rsv.InvalidQuantity, rsv.codes.EQUANTITY);
  await ctx.release(s, 'a');
  // checked here, before C: ids, quantities, tokens
  for (const bad of [-1, 1.5, 2 ** 53, U64_MAX + 1n, -1n, '1', null]) {
    e = await rejection(ctx.stockGet(bad, 1, 1), rsv.InvalidArgument, rsv.codes.EINVAL);
    assert.match(e.message, /shopId must be an integer/);
  }
  await rejection(ctx.stockSet(s, 1, 1, 1n << 63n), rsv.InvalidArgument, rsv.codes.EINVAL);
  await rejection(ctx.claim(s, 42), rsv.InvalidArgument, rsv.codes.EINVAL);
  await rejection(ctx.stats('nothing'), rsv.InvalidArgument, rsv.codes.EINVAL);
  // the context still works after all that
  assert.equal((await ctx.stockGet(s, 1, 1)).onHand, 3);
});

serverTest('reserve a cart: allocations, split lines, failedLine, a changed cart', async (ctx, s) => {
  await ctx.stockSet(s, 1, 10, 2);
  await ctx.stockSet(s, 1, 11, 5);
  await ctx.stockSet(s, 2, 10, 4);
  await ctx.stockSet(s, 2, 11, 4);
  const lines = await ctx.reserve(s, 'cart-1', [
    { itemId: 1, locations: [10, 11], quantity: 4, split: true },
    { itemId: 2, locationId: 10, quantity: 1 },
  ]);
  assert.deepEqual(lines, [
    { itemId: 1, allocations: [{ locationId: 10, quantity: 2 }, { locationId: 11, quantity: 2 }] },
    { itemId: 2, allocations: [{ locationId: 10, quantity: 1 }] },
  ]);
  // not split: the whole line at the first location that covers it
  assert.deepEqual(await ctx.reserve(s, 'cart-2', [{ itemId: 2, locations: [10, 11], quantity: 3 }]),
    [{ itemId: 2, allocations: [{ locationId: 10, quantity: 3 }] }]);
  let e = await rejection(ctx.reserve(s, 'cart-3', [
    { itemId: 2, locations: [10], quantity: 1 },
    { itemId: 1, locations: [10, 11], quantity: 9, split: true },
  ]), rsv.OutOfStock, rsv.codes.EOUTOFSTOCK);
  assert.equal(e.failedLine, 0); // item 2 at 10 is all held now
  e = await rejection(ctx.reserve(s, 'cart-3', [
    { itemId: 1, locations: [11], quantity: 1 },
    { itemId: 3, locations: [10], quantity: 1 },
  ]), rsv.NoItem, rsv.codes.ENOITEM);
  assert.equal(e.failedLine, 1);
  e = await rejection(ctx.reserve(s, 'cart-3', [{ itemId: 1, locations: [10, 10], quantity: 1 }]),
    rsv.InvalidArgument, rsv.codes.EINVAL);
  assert.equal(e.function, 'rsv_cart_add');
  assert.equal(e.failedLine, 0);
  await rejection(ctx.reserve(s, 'cart-3', []), rsv.EmptyCart, rsv.codes.EEMPTY);
  await rejection(ctx.reserve(s, 'cart-3', [{ itemId: 1, locations: [10], quantity: 0 }]),
    rsv.InvalidQuantity, rsv.codes.EQUANTITY);
  await rejection(ctx.reserve(s, 'cart-3', 'no'), rsv.InvalidArgument, rsv.codes.EINVAL);
  // the cart changed: the checkout's old holds are released in the same transaction
  assert.deepEqual(await ctx.reserve(s, 'cart-1', [{ itemId: 1, locations: [11], quantity: 1 }]),
    [{ itemId: 1, allocations: [{ locationId: 11, quantity: 1 }] }]);
  assert.equal((await ctx.stockGet(s, 1, 10)).held, 0);
  assert.equal((await ctx.stockGet(s, 2, 10)).held, 3);
  await ctx.claim(s, 'cart-1');
  await ctx.release(s, 'cart-2');
  assert.equal((await ctx.stockGet(s, 1, 11)).onHand, 4);
});

serverTest('release, extend, checkoutStatus, expiry and sweep', async (ctx, s) => {
  await ctx.stockSet(s, 1, 1, 10);
  await ctx.reserveOne(s, 'r', 1, 1, 2);
  let st = await ctx.checkoutStatus(s, 'r');
  assert.equal(st.status, 'held');
  assert.equal(st.statusCode, 1);
  assert.equal(st.units, 2);
  assert.ok(st.expiresInMs > 25000 && st.expiresInMs <= 30000, st.expiresInMs);
  await ctx.extend(s, 'r', 120000);
  assert.ok((await ctx.checkoutStatus(s, 'r')).expiresInMs > 100000);
  await ctx.release(s, 'r');
  await ctx.release(s, 'r'); // idempotent
  st = await ctx.checkoutStatus(s, 'r');
  assert.deepEqual([st.status, st.units], ['released', 0]);
  await rejection(ctx.claim(s, 'r'), rsv.AlreadyReleased, rsv.codes.ERELEASED);
  await rejection(ctx.extend(s, 'r'), rsv.AlreadyReleased, rsv.codes.ERELEASED);
  await rejection(ctx.checkoutStatus(s, 'nope'), rsv.NotFound, rsv.codes.ENOTFOUND);

  // a hold that runs out: expired, given back by the sweep, not claimable
  await ctx.reserveOne(s, Buffer.from('e\0x'), 1, 1, 3, 1);
  await sleep(50);
  st = await ctx.checkoutStatus(s, Buffer.from('e\0x'));
  assert.equal(st.status, 'expired');
  assert.ok(st.expiresInMs < 0);
  assert.equal(await ctx.sweep(s), 1);
  assert.equal(await ctx.sweep(s, 10), 0);
  assert.equal((await ctx.stockGet(s, 1, 1)).held, 0);
  await rejection(ctx.claim(s, Buffer.from('e\0x')), rsv.Expired, rsv.codes.EEXPIRED);
  // the pool
  assert.ok(await ctx.replenish(s, 1, 1) > 0);
  assert.ok((await ctx.stockGet(s, 1, 1)).pooled > 0);
  assert.ok(await ctx.poolDrain(s, 1, 1) > 0);
  assert.equal((await ctx.stockGet(s, 1, 1)).pooled, 0);
}, { holdTtlMs: 30000 });

serverTest('audit: clean, and every violation reaches the caller', async (ctx, s) => {
  await ctx.stockSet(s, 1, 1, 10);
  await ctx.stockSet(s, U64_MAX, U64_MAX - 1n, 10);
  await ctx.reserveOne(s, 'a', 1, 1, 2);
  assert.deepEqual(await ctx.audit(s), []);
  const fix = (op) => h.sql(`UPDATE rsv_ledger SET issued = issued ${op} 1 WHERE shop_id = ${s}`, DB);
  fix('+');
  try {
    const v = await ctx.audit(s);
    assert.equal(v.length, 2);
    v.sort((a, b) => (typeof a.itemId === 'bigint' ? 1 : -1));
    assert.deepEqual(v.map((x) => [x.shopId, x.itemId, x.locationId]),
      [[s, 1, 1], [s, U64_MAX, U64_MAX - 1n]]);
    assert.match(v[0].problem, /lost/);
    const all = await ctx.audit(0, { allShops: true });
    assert.ok(all.filter((x) => x.shopId === s).length === 2);
    assert.deepEqual(await ctx.audit(s + 1), []);
  } finally {
    fix('-');
  }
  await ctx.claim(s, 'a');
  assert.deepEqual(await ctx.audit(s), []);
});

serverTest('ids over 2^53 go in and come back as bigints', async (ctx, s) => {
  const item = U64_MAX;
  const loc = (1n << 60n) + 3n;
  await ctx.stockSet(s, item, loc, 5);
  assert.equal((await ctx.stockGet(s, item, loc)).onHand, 5);
  const lines = await ctx.reserve(s, 'big', [{ itemId: item, locations: [loc], quantity: 2 }]);
  assert.deepEqual(lines, [{ itemId: item, allocations: [{ locationId: loc, quantity: 2 }] }]);
  await ctx.claim(s, 'big');
  assert.equal((await ctx.stockGet(s, item, loc)).onHand, 3);
});

serverTest('calls on one context run one at a time, in the order made', async (ctx, s) => {
  await ctx.stockSet(s, 1, 1, 100);
  const done = [];
  const calls = [];
  for (let i = 0; i < 30; i++) {
    calls.push(ctx.reserveOne(s, `t${i}`, 1, 1, 1).then(() => done.push(i)));
    if (i % 10 === 9) calls.push(ctx.stockGet(s, 1, 1).then((st) => done.push(`held ${st.held}`)));
  }
  calls.push(ctx.claim(s, 'nope').catch((e) => done.push(e.codeName)));
  await Promise.all(calls);
  const want = [];
  for (let i = 0; i < 30; i++) {
    want.push(i);
    if (i % 10 === 9) want.push(`held ${i + 1}`);
  }
  want.push('RSV_ENOTFOUND');
  assert.deepEqual(done, want);
  // and several contexts at once
  const others = await Promise.all([1, 2, 3].map(() => rsv.open(h.dsn(DB))));
  await Promise.all(others.map((c, k) => Promise.all(
    Array.from({ length: 5 }, (_, i) => c.reserveOne(s, `o${k}-${i}`, 1, 1, 1)))));
  await Promise.all(others.map((c) => c.close()));
  assert.equal((await ctx.stockGet(s, 1, 1)).held, 45);
  for (let i = 0; i < 30; i++) await ctx.release(s, `t${i}`);
  for (let k = 0; k < 3; k++) for (let i = 0; i < 5; i++) await ctx.claim(s, `o${k}-${i}`);
  const st = await ctx.stockGet(s, 1, 1);
  assert.deepEqual([st.onHand, st.held, st.available], [85, 0, 85]);
});

serverTest('the event loop runs while a call waits on the server', async (ctx, s) => {
  await ctx.stockSet(s, 1, 1, 5);
  await ctx.reserveOne(s, 'slow', 1, 1, 1);
  // Another connection locks the checkout row for a second.
  const holder = spawn(h.CLIENT, [...['--no-defaults', `--socket=${h.SOCK}`, `-u${h.USER}`, DB],
    '-e', `START TRANSACTION; SELECT status FROM rsv_checkouts WHERE shop_id = ${s} ` +
    'FOR UPDATE; DO SLEEP(1.2); ROLLBACK;'],
  { env: { ...process.env, MYSQL_PWD: h.PASSWORD }, stdio: 'ignore' });
  const exited = new Promise((resolve) => holder.on('exit', resolve));
  for (let i = 0; ; i++) {
    const n = h.sql("SELECT COUNT(*) FROM information_schema.processlist WHERE " +
      `info LIKE 'DO SLEEP(1.2)%' AND db = '${DB}'`);
    if (Number(n) > 0) break;
    assert.ok(i < 200, 'the lock holder did not start');
    await sleep(10);
  }
  const other = await rsv.open(h.dsn(DB));
  let ticks = 0;
  const timer = setInterval(() => { ticks += 1; }, 10);
  const t0 = Date.now();
  const order = [];
  const claim = ctx.claim(s, 'slow').then(() => order.push('claim'));
  // a call on another context is not held up by the waiting one
  await other.stockGet(s, 1, 1).then(() => order.push('other'));
  await claim;
  clearInterval(timer);
  const ms = Date.now() - t0;
  await other.close();
  await exited;
  assert.deepEqual(order, ['other', 'claim']);
  assert.ok(ms >= 500, `the claim waited ${ms} ms`);
  assert.ok(ticks >= ms / 10 / 3, `${ticks} timer ticks in ${ms} ms`);
  assert.equal((await ctx.checkoutStatus(s, 'slow')).status, 'claimed');
}, { lockWaitTimeoutS: 10, callTimeoutMs: 20000 });

test('calls waiting on locked rows leave libuv\'s thread pool to fs', { skip: missing || false }, async (t) => {
  // Six claims (the non-blocking interface) and two stock changes (a
  // thread of the package's own) wait on rows another connection holds:
  // more calls than libuv's pool has threads (4).  A file read must still
  // finish while every one of them is waiting.
  const s = h.newShop();
  const opts = { lockWaitTimeoutS: 50, callTimeoutMs: 60000 };
  const ctx = await rsv.open(h.dsn(DB), opts);
  await ctx.stockSet(s, 1, 1, 10);
  await ctx.stockSet(s, 2, 1, 10);
  for (let i = 0; i < 6; i++) await ctx.reserveOne(s, `w${i}`, 1, 1, 1);
  const claimers = await Promise.all([0, 1, 2, 3, 4, 5].map(() => rsv.open(h.dsn(DB), opts)));
  const setters = await Promise.all([0, 1].map(() => rsv.open(h.dsn(DB), opts)));
  const holder = spawn(h.CLIENT, ['--no-defaults', `--socket=${h.SOCK}`, `-u${h.USER}`, '-N', '-B', '-n', DB],
    { env: { ...process.env, MYSQL_PWD: h.PASSWORD }, stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise((resolve) => holder.on('exit', resolve));
  let said = '';
  const locked = new Promise((resolve) => holder.stdout.on('data', (d) => {
    said += d;
    if (said.includes('rows locked')) resolve();
  }));
  holder.stdin.write(`START TRANSACTION;\nSELECT COUNT(*) FROM rsv_checkouts WHERE shop_id = ${s} FOR UPDATE;\n` +
    `SELECT COUNT(*) FROM rsv_ledger WHERE shop_id = ${s} AND item_id = 2 FOR UPDATE;\nSELECT 'rows locked';\n`);
  await locked;
  let settled = 0;
  const calls = [
    ...claimers.map((c, i) => c.claim(s, `w${i}`)),
    ...setters.map((c, i) => c.stockSet(s, 2, 1, 20 + i)),
  ].map((p) => p.finally(() => { settled += 1; }));
  try {
    const waiting = () => Number(h.sql('SELECT COUNT(*) FROM information_schema.innodb_trx t JOIN ' +
      'information_schema.processlist p ON p.id = t.trx_mysql_thread_id ' +
      `WHERE t.trx_state = 'LOCK WAIT' AND p.db = '${DB}'`));
    // (the server refreshes innodb_trx only once nobody has read it for
    // 0.1 s: poll slower than that)
    let n = 0;
    for (let i = 0; (n = waiting()) < calls.length; i++) {
      assert.equal(settled, 0, 'a call finished while the rows were locked');
      assert.ok(i < 150, `only ${n} of ${calls.length} calls reached the server: the others wait for a thread`);
      await sleep(200);
    }
    const t0 = process.hrtime.bigint();
    const st = await fs.promises.stat(__filename);
    const text = await fs.promises.readFile(__filename, 'utf8');
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    assert.equal(text.length > 0 && st.isFile(), true);
    assert.equal(settled, 0, 'the file was read only after a waiting call finished');
    t.diagnostic(`fs.stat + readFile with ${calls.length} calls waiting on locks: ${ms.toFixed(1)} ms`);
  } finally {
    holder.stdin.end('ROLLBACK;\n');
    await exited;
  }
  await Promise.all(calls);
  for (let i = 0; i < 6; i++) assert.equal((await ctx.checkoutStatus(s, `w${i}`)).status, 'claimed');
  assert.ok([20, 21].includes((await ctx.stockGet(s, 2, 1)).onHand));
  await Promise.all([ctx, ...claimers, ...setters].map((c) => c.close()));
});

test('reconnect after the connection was killed', { skip: missing || false }, async () => {
  const ids = () => new Set(h.sql(`SELECT id FROM information_schema.processlist WHERE db = '${DB}'`)
    .split('\n').filter(Boolean));
  const before = ids();
  const ctx = await rsv.open(h.dsn(DB));
  const mine = [...ids()].filter((id) => !before.has(id));
  assert.equal(mine.length, 1);
  const s = h.newShop();
  await ctx.stockSet(s, 1, 1, 4);
  h.sql(`KILL ${mine[0]}`);
  for (let i = 0; ids().has(mine[0]); i++) {
    assert.ok(i < 200);
    await sleep(10);
  }
  const e = await rejection(ctx.stockGet(s, 1, 1), rsv.ConnectionLost, rsv.codes.ECONN);
  assert.ok(e instanceof rsv.Failure);
  await rejection(ctx.claim(s, 'x'), rsv.ConnectionLost, rsv.codes.ECONN);
  await ctx.reconnect();
  assert.equal((await ctx.stockGet(s, 1, 1)).onHand, 4);
  await ctx.reserveOne(s, 'after', 1, 1, 1);
  await ctx.claim(s, 'after');
  await ctx.close();
});

test('close: the calls made before it finish, later ones are refused', { skip: missing || false }, async () => {
  const ctx = await rsv.open(h.dsn(DB));
  const s = h.newShop();
  const set = ctx.stockSet(s, 1, 1, 3);
  const reserve = ctx.reserveOne(s, 'c', 1, 1, 1);
  const closing = ctx.close();
  assert.equal(ctx.closed, true);
  const e = await rejection(ctx.claim(s, 'c'), rsv.InvalidArgument, rsv.codes.EINVAL);
  assert.equal(e.message, 'the context is closed');
  await set;
  await reserve;
  await closing;
  await ctx.close(); // again: nothing
  await rejection(ctx.stockGet(s, 1, 1), rsv.InvalidArgument, rsv.codes.EINVAL);
  const check = await rsv.open(h.dsn(DB));
  assert.equal((await check.checkoutStatus(s, 'c')).status, 'held');
  await check.release(s, 'c');
  await check.close();
});

test('open: options, and what the library refuses', { skip: missing || false }, async () => {
  const ctx = await rsv.open(h.dsn(DB, '&connect_timeout=5&read_timeout=30'),
    { holdTtlMs: 20000, poolCap: 10, connTagPrefix: 'nodetest:' });
  const s = h.newShop();
  await ctx.stockSet(s, 1, 1, 50);
  await ctx.reserveOne(s, 'o', 1, 1, 1);
  assert.ok((await ctx.checkoutStatus(s, 'o')).expiresInMs <= 20000);
  assert.ok((await ctx.replenish(s, 1, 1)) <= 10);
  assert.ok((await ctx.stockGet(s, 1, 1)).pooled <= 10);
  await ctx.release(s, 'o');
  await ctx.close();
  let e = await rejection(rsv.open(h.dsn(DB), { poolCap: 0 }), rsv.InvalidArgument, rsv.codes.EINVAL);
  assert.match(e.message, /pool_cap/);
  assert.equal(e.function, 'rsv_open_dsn');
  e = await rejection(rsv.open(h.dsn(DB), { connTagPrefix: 'x*/ DROP' }), rsv.InvalidArgument, rsv.codes.EINVAL);
  assert.match(e.message, /conn_tag_prefix/);
  e = await rejection(rsv.open(h.dsn(`${DB}_empty`)), rsv.SchemaError, rsv.codes.ESCHEMA);
  assert.match(e.message, /rsv_ledger/);
  e = await rejection(rsv.open(rsv.makeDsn({ database: DB, user: 'no_such_user_x', password: 'x', socket: h.SOCK })),
    rsv.AuthenticationError, rsv.codes.ECONN);
  assert.match(e.message, /1045/);
  assert.equal(e.errno, 1045);
  assert.ok(!(e instanceof rsv.ConnectionLost), 'a refused account is no ConnectionLost: retrying will not help');
  assert.ok(e instanceof rsv.Failure);
  e = await rejection(rsv.open(rsv.makeDsn({ database: '', user: h.USER, socket: h.SOCK })),
    rsv.InvalidArgument, rsv.codes.EINVAL);
  assert.match(e.message, /database/);
});

serverTest('stats, Prometheus text and the kill switch', async (ctx, s) => {
  await ctx.stockSet(s, 1, 1, 2);
  await ctx.reserveOne(s, 'k', 1, 1, 2);
  await rejection(ctx.reserveOne(s, 'k2', 1, 1, 1), rsv.OutOfStock, rsv.codes.EOUTOFSTOCK);
  const st = await ctx.stats('reserve');
  assert.deepEqual(Object.keys(st), [...rsv.STATS]);
  assert.equal(st.calls, 2);
  assert.equal(st.ok, 1);
  assert.equal(st.expected, 1);
  assert.ok(st.latencyMaxUs > 0);
  assert.equal((await ctx.stats()).calls, 3);
  const text = await ctx.statsPrometheus({ instance: 'js "1"' });
  assert.match(text, /\nlibreserve_calls_total\{instance="js \\"1\\"",op="reserve",result="eoutofstock",class="expected"\} 1\n/);
  assert.equal(await ctx.statsPrometheus('instance="a"'), await ctx.statsPrometheus({ instance: 'a' }));
  await rejection(ctx.statsPrometheus('op="x"'), rsv.InvalidArgument, rsv.codes.EINVAL);
  await ctx.setEnabled(false);
  await rejection(ctx.claim(s, 'k'), rsv.Disabled, rsv.codes.EDISABLED);
  await rejection(ctx.stockSet(s, 1, 1, 9), rsv.Disabled, rsv.codes.EDISABLED);
  assert.equal((await ctx.checkoutStatus(s, 'k')).status, 'held'); // reads keep working
  await ctx.setEnabled(true);
  await ctx.claim(s, 'k');
  assert.equal((await ctx.stockGet(s, 1, 1)).onHand, 0);
});

// ---- batches ----

const { OK, EOUTOFSTOCK, ECLAIMED, ERELEASED, ENOTFOUND, ETOKEN, ENOITEM, EQUANTITY } = rsv.codes;

serverTest('reserveBatch: each entry its own code, one sold out, a repeat changes nothing', async (ctx, s) => {
  await ctx.stockSet(s, 1, 1, 5);
  await ctx.stockSet(s, 2, 1, 10);
  await ctx.stockSet(s, U64_MAX, 1n << 60n, 2);
  const batch = [
    { shopId: s, token: 'b-1', itemId: 1, locationId: 1, quantity: 3 },
    { shopId: s, token: 'b-2', itemId: 1, locationId: 1, quantity: 3 }, // 2 left: sold out
    { shopId: s, token: Buffer.from('b-\0'), itemId: 2, locationId: 1, quantity: 4 },
    { shopId: s, token: 'b-3', itemId: 1, locationId: 1, quantity: 2 },
    { shopId: s, token: '', itemId: 1, locationId: 1, quantity: 1 },
    { shopId: s, token: 'b-4', itemId: 9, locationId: 1, quantity: 1 },
    { shopId: s, token: 'b-5', itemId: 2, locationId: 1, quantity: 0 },
    { shopId: BigInt(s), token: 'b-6', itemId: U64_MAX, locationId: 1n << 60n, quantity: 2n },
  ];
  const want = [OK, EOUTOFSTOCK, OK, OK, ETOKEN, ENOITEM, EQUANTITY, OK];
  assert.deepEqual(await ctx.reserveBatch(batch), want);
  const held = async () => [(await ctx.stockGet(s, 1, 1)).held, (await ctx.stockGet(s, 2, 1)).held,
    (await ctx.stockGet(s, U64_MAX, 1n << 60n)).held];
  assert.deepEqual(await held(), [5, 4, 2]);
  await rejection(ctx.checkoutStatus(s, 'b-2'), rsv.NotFound, rsv.codes.ENOTFOUND);
  assert.equal((await ctx.checkoutStatus(s, 'b-1')).units, 3);
  // the same batch again (a client's retry): every checkout held once
  assert.deepEqual(await ctx.reserveBatch(batch, 60000), want);
  assert.deepEqual(await held(), [5, 4, 2]);
  assert.equal((await ctx.stats('reserve')).calls, 16); // each entry one call
  assert.deepEqual(await ctx.releaseBatch(['b-1', 'b-\0', 'b-3', 'b-6'].map((token) => ({
    shopId: s, token: token === 'b-\0' ? Buffer.from(token) : token,
  }))), [OK, OK, OK, OK]);
  assert.deepEqual(await held(), [0, 0, 0]);
});

serverTest('reserveCartBatch: each cart its own result, allocations and the failed line', async (ctx, s) => {
  await ctx.stockSet(s, 1, 1, 4);
  await ctx.stockSet(s, 2, 1, 10);
  const lines = [{ itemId: 2, locations: [1], quantity: 1 }, { itemId: 1, locations: [1], quantity: 2 }];
  const got = await ctx.reserveCartBatch([
    { shopId: s, token: 'cb-1', lines },
    { shopId: s, token: 'cb-2', lines },
    { shopId: s, token: 'cb-3', lines }, // item 1 sold out
    { shopId: s, token: 'cb-4', lines: [] },
  ]);
  assert.deepEqual(got.map((r) => r.code), [OK, OK, EOUTOFSTOCK, rsv.codes.EEMPTY]);
  assert.deepEqual(got[0].lines[1].allocations.map((a) => [Number(a.locationId), Number(a.quantity)]),
    [[1, 2]]);
  assert.equal(got[2].failedLine, 1);
  assert.equal((await ctx.stockGet(s, 1, 1)).held, 4);
  await assert.rejects(ctx.reserveCartBatch([{ shopId: s, token: 'cb-5', lines: 7 }]), rsv.InvalidArgument);
});

serverTest('claimBatch / releaseBatch: per-entry codes, idempotent repeats', async (ctx, s) => {
  await ctx.stockSet(s, 1, 1, 10);
  const mk = (...tokens) => tokens.map((token) => ({ shopId: s, token }));
  assert.deepEqual(await ctx.reserveBatch(['a', 'b', 'c', 'd'].map((token) =>
    ({ shopId: s, token, itemId: 1, locationId: 1, quantity: 2 }))), [OK, OK, OK, OK]);
  // a token listed twice is claimed once
  assert.deepEqual(await ctx.claimBatch(mk('a', 'a', 'nobody', 'c', '')),
    [OK, ECLAIMED, ENOTFOUND, OK, ETOKEN]);
  assert.deepEqual(await ctx.releaseBatch(mk('b', 'a', 'b', 'nobody')), [OK, ECLAIMED, OK, ENOTFOUND]);
  // repeated: a claim that went through answers ECLAIMED, never takes twice;
  // a release stays OK
  assert.deepEqual(await ctx.claimBatch(mk('a', 'c', 'b')), [ECLAIMED, ECLAIMED, ERELEASED]);
  assert.deepEqual(await ctx.releaseBatch(mk('b', 'b')), [OK, OK]);
  let st = await ctx.stockGet(s, 1, 1);
  assert.deepEqual([st.onHand, st.held, st.available], [6, 2, 4]);
  assert.equal((await ctx.stats('claim')).calls, 8);
  await ctx.releaseBatch(mk('d'));
  st = await ctx.stockGet(s, 1, 1);
  assert.deepEqual([st.onHand, st.held, st.available], [6, 0, 6]);
});

serverTest('batches: what fails as a whole rejects, checked arguments send nothing', async (ctx, s) => {
  await ctx.stockSet(s, 1, 1, 10);
  const one = { shopId: s, token: 't', itemId: 1, locationId: 1, quantity: 1 };
  let e = await rejection(ctx.reserveBatch([]), rsv.InvalidArgument, rsv.codes.EINVAL);
  assert.equal(e.function, 'rsv_reserve_batch');
  assert.match(e.message, /1\.\.256 entries, not 0/);
  e = await rejection(ctx.claimBatch(Array.from({ length: rsv.BATCH_MAX + 1 }, () => ({ shopId: s, token: 'x' }))),
    rsv.InvalidArgument, rsv.codes.EINVAL);
  assert.match(e.message, /not 257/);
  e = await rejection(ctx.reserveBatch([one], -1), rsv.InvalidQuantity, rsv.codes.EQUANTITY);
  assert.match(e.stack, /server\.test\.js/);
  const calls = (await ctx.stats('reserve')).calls + (await ctx.stats('claim')).calls +
    (await ctx.stats('release')).calls;
  assert.equal(calls, 3); // a batch refused as a whole is one call
  e = await rejection(ctx.reserveBatch([one, { ...one, token: 7 }]), rsv.InvalidArgument, rsv.codes.EINVAL);
  assert.match(e.message, /token must be/);
  e = await rejection(ctx.releaseBatch([{ shopId: s, token: 'x' }, { shopId: -1, token: 'y' }]),
    rsv.InvalidArgument, rsv.codes.EINVAL);
  assert.match(e.message, /entry 1: shopId/);
  await rejection(ctx.claimBatch('t'), rsv.InvalidArgument, rsv.codes.EINVAL);
  await rejection(ctx.claimBatch([null]), rsv.InvalidArgument, rsv.codes.EINVAL);
  assert.equal((await ctx.stats('reserve')).calls + (await ctx.stats('claim')).calls +
    (await ctx.stats('release')).calls, 3);
  await ctx.setEnabled(false);
  await rejection(ctx.reserveBatch([one]), rsv.Disabled, rsv.codes.EDISABLED);
  await ctx.setEnabled(true);
  assert.equal((await ctx.stockGet(s, 1, 1)).held, 0);
});

// ---- the batcher ----

test('Batcher: many concurrent calls coalesce, the stock ends exactly right', { skip: missing || false }, async () => {
  const s = h.newShop();
  const ctx = await rsv.open(h.dsn(DB));
  const b = await rsv.Batcher.open(h.dsn(DB), { holdTtlMs: 60000 }, 3);
  try {
    await ctx.stockSet(s, 1, 1, 40);
    await ctx.stockSet(s, 2, 1, 1000);
    // 300 buyers at once for 40 units: 40 holds, no more
    const N = 300;
    const got = await Promise.allSettled(Array.from({ length: N }, (_, i) =>
      b.reserveOne(s, `buyer-${i}`, 1, 1, 1)));
    const won = got.flatMap((r, i) => (r.status === 'fulfilled' ? [i] : []));
    assert.equal(won.length, 40);
    for (const r of got.filter((x) => x.status === 'rejected')) {
      assert.ok(r.reason instanceof rsv.OutOfStock, r.reason.stack);
      assert.equal(r.reason.function, 'rsv_batcher_reserve_one');
      assert.equal(r.reason.message, rsv.strerror(rsv.codes.EOUTOFSTOCK));
    }
    let st = await ctx.stockGet(s, 1, 1);
    assert.deepEqual([st.onHand, st.held, st.available], [40, 40, 0]);
    let stats = await b.stats('reserve');
    assert.deepEqual([stats.calls, stats.ok, stats.expected], [N, 40, N - 40]);

    // where every reserve can be served at once (a full pool) they share
    // statements (how many depends on how fast the workers keep up)
    assert.ok(await ctx.replenish(s, 2, 1) > 0);
    const before = stats.statements;
    await Promise.all(Array.from({ length: N }, (_, i) => b.reserveOne(s, `many-${i}`, 2, 1, 1)));
    stats = await b.stats('reserve');
    assert.equal(stats.ok, 40 + N);
    assert.ok(stats.statements - before < N, `${stats.statements - before} statements for ${N} reserves`);
    assert.equal((await ctx.stockGet(s, 2, 1)).held, N);

    // carts through the batcher: 10 units of item 3, carts of 3
    await ctx.stockSet(s, 3, 1, 10);
    await ctx.stockSet(s, 4, 1, 10);
    const carts = await Promise.allSettled(Array.from({ length: 5 }, (_, i) =>
      b.reserve(s, `cart-${i}`, [{ itemId: 4, locations: [1], quantity: 1 },
        { itemId: 3, locations: [1], quantity: 3 }])));
    const held = carts.filter((r) => r.status === 'fulfilled');
    assert.equal(held.length, 3);
    assert.deepEqual(held[0].value[1].allocations.map((a) => [Number(a.locationId), Number(a.quantity)]),
      [[1, 3]]);
    for (const r of carts.filter((x) => x.status === 'rejected')) {
      assert.ok(r.reason instanceof rsv.OutOfStock, r.reason.stack);
      assert.equal(r.reason.failedLine, 1);
    }
    await assert.rejects(b.reserve(s, 'cart-empty', []), rsv.EmptyCart);

    // claims and releases, interleaved, each made twice at once: one of
    // the two claims takes the units (either: they may go to different
    // connections), the other answers AlreadyClaimed
    const half = won.length / 2;
    const twice = await Promise.all(won.map((i, k) => Promise.allSettled(k < half
      ? [b.claim(s, `buyer-${i}`), b.claim(s, `buyer-${i}`)]
      : [b.release(s, `buyer-${i}`), b.release(s, `buyer-${i}`)])));
    twice.forEach((pair, k) => {
      const codes = pair.map((r) => (r.status === 'fulfilled' ? OK : r.reason.code)).sort();
      assert.deepEqual(codes, k < half ? [ECLAIMED, OK] : [OK, OK]);
    });
    await Promise.all(Array.from({ length: N }, (_, i) => b.release(s, `many-${i}`)));
    await rejection(b.release(s, `buyer-${won[0]}`), rsv.AlreadyClaimed, rsv.codes.ECLAIMED);
    await rejection(b.claim(s, `buyer-${won[half]}`), rsv.AlreadyReleased, rsv.codes.ERELEASED);
    await rejection(b.claim(s, 'nobody'), rsv.NotFound, rsv.codes.ENOTFOUND);
    // decided before the queue: not counted
    await rejection(b.claim(s, ''), rsv.InvalidToken, rsv.codes.ETOKEN);
    await rejection(b.reserveOne(s, 'q', 1, 1, 0), rsv.InvalidQuantity, rsv.codes.EQUANTITY);
    await rejection(b.reserveOne(s, 7, 1, 1, 1), rsv.InvalidArgument, rsv.codes.EINVAL);
    await rejection(b.stats('nothing'), rsv.InvalidArgument, rsv.codes.EINVAL);
    st = await ctx.stockGet(s, 1, 1);
    assert.deepEqual([st.onHand, st.held, st.available], [20, 0, 20]);
    st = await ctx.stockGet(s, 2, 1);
    assert.deepEqual([st.onHand, st.held, st.available], [1000, 0, 1000]);
    assert.equal((await b.stats('claim')).calls, 2 * half + 2);
    assert.deepEqual(await ctx.audit(s), []);
  } finally {
    await b.close();
    await ctx.close();
  }
});

test('Batcher: close answers the calls made before it, refuses later ones', { skip: missing || false }, async () => {
  const s = h.newShop();
  const ctx = await rsv.open(h.dsn(DB));
  await ctx.stockSet(s, 1, 1, 10);
  const b = await rsv.Batcher.open(h.dsn(DB), {}, 1);
  assert.equal(b.closed, false);
  const calls = Array.from({ length: 20 }, (_, i) => b.reserveOne(s, `c-${i}`, 1, 1, 1));
  const closing = b.close();
  assert.equal(b.closed, true);
  let e = await rejection(b.claim(s, 'c-0'), rsv.InvalidArgument, rsv.codes.EINVAL);
  assert.equal(e.message, 'the batcher is closed');
  const got = await Promise.allSettled(calls);
  assert.equal(got.filter((r) => r.status === 'fulfilled').length, 10);
  await closing;
  await b.close(); // again: nothing
  await rejection(b.stats(), rsv.InvalidArgument, rsv.codes.EINVAL);
  assert.equal((await ctx.stockGet(s, 1, 1)).held, 10);
  assert.deepEqual(await ctx.releaseBatch(got.flatMap((r, i) => (r.status === 'fulfilled'
    ? [{ shopId: s, token: `c-${i}` }] : []))), Array(10).fill(OK));
  // what the library refuses, with the message a context gets
  e = await rejection(rsv.Batcher.open(h.dsn(`${DB}_empty`)), rsv.SchemaError, rsv.codes.ESCHEMA);
  assert.match(e.message, /rsv_ledger/);
  e = await rejection(rsv.Batcher.open(h.dsn(DB, '&no_such_key=1')), rsv.InvalidArgument, rsv.codes.EINVAL);
  assert.match(e.message, /no_such_key/);
  await ctx.close();
});
