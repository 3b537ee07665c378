'use strict';
// Migration (reserve/migrate.h) against the server in RSV_TEST_SOCKET, with
// an old store kept in a JS Map whose every operation is async: the shop's
// stage set in rsv_migration_stage as rsv-admin migrate sets it, shadow
// with a planted mismatch, primary mirrored into the Map through the
// outbox, a flip back and forth.  A database rsvjs_mig_<pid> of its own.
const test = require('node:test');
const assert = require('node:assert/strict');
const { setTimeout: sleep } = require('node:timers/promises');
const h = require('./helpers');
const rsv = require('..');

const DB = `rsvjs_mig_${process.pid}`;
const missing = h.serverMissing();

test.before(() => {
  if (missing) return;
  h.createDb(DB);
});

test.after(() => {
  if (missing || process.env.RSV_TEST_KEEP_DB) return;
  h.dropDb(DB);
});

// The old store: units per item, holds by token; async like a Redis client.
class OldStore {
  constructor(stock) {
    this.stock = stock;
    this.holds = new Map(); // token -> {qty, state: 'held' | 'claimed' | 'released'}
    this.calls = [];
  }

  async op(op, shopId, token, itemId, locationId, quantity, ttlMs) {
    await sleep(1);
    const tok = token.toString();
    this.calls.push([op, tok]);
    const hold = this.holds.get(tok);
    if (op === 'reserve') {
      assert.ok(itemId === 1 && locationId === 1 && ttlMs === 0, `reserve of ${itemId}/${locationId}`);
      if (hold) return;
      if (this.stock < quantity) throw new rsv.OutOfStock(rsv.codes.EOUTOFSTOCK, 'old store: out of stock');
      this.stock -= quantity;
      this.holds.set(tok, { qty: quantity, state: 'held' });
      return;
    }
    assert.deepEqual([itemId, locationId, quantity, ttlMs], [0, 0, 0, 0]);
    if (!hold) throw new rsv.NotFound(rsv.codes.ENOTFOUND, 'old store: no such hold');
    if (hold.state === 'claimed') {
      if (op === 'claim' || op === 'release') throw new rsv.AlreadyClaimed(rsv.codes.ECLAIMED, 'old store: claimed');
    }
    if (op === 'claim') {
      if (hold.state === 'released') throw new rsv.AlreadyReleased(rsv.codes.ERELEASED, 'old store: released');
      hold.state = 'claimed';
    } else if (hold.state === 'held') {
      hold.state = 'released';
      this.stock += hold.qty;
    }
  }

  state(tok) {
    const hold = this.holds.get(tok);
    return hold ? hold.state : null;
  }
}

const STAGE = { old: 0, shadow: 1, primary: 2, complete: 3 };

// As rsv-admin migrate sets a stage (the change row locked, the next version).
function setStage(shop, stage) {
  h.sql('START TRANSACTION; UPDATE rsv_migration_change SET changes = changes + 1, changed_at = NOW(6) WHERE id = 1; ' +
    'INSERT INTO rsv_migration_stage (shop_id, stage, version, changed_at, reason) ' +
    `SELECT ${shop}, ${STAGE[stage]}, COALESCE(MAX(version), 0) + 1, NOW(6), 'node test' ` +
    'FROM rsv_migration_stage ON DUPLICATE KEY UPDATE stage = VALUES(stage), ' +
    'version = VALUES(version), changed_at = VALUES(changed_at); ' +
    'COMMIT', DB);
}

async function moveTo(m, shop, stage) {
  setStage(shop, stage);
  for (let i = 0; i < 3000; i++) {
    if (await m.stage(shop) === stage) return;
    await sleep(10);
  }
  assert.fail(`stage ${stage} never followed`);
}

// A handle over a context with shop's item 1 at location 1 holding
// libStock units in libreserve, and an old store with oldStock.
async function scene(libStock, oldStock) {
  const ctx = await rsv.open(h.dsn(DB));
  const shop = h.newShop();
  await ctx.stockSet(shop, 1, 1, libStock);
  const m = await rsv.Migration.open(ctx, { shadowDsn: h.dsn(DB), refreshMs: 100 });
  const old = new OldStore(oldStock);
  m.setLegacy((...a) => old.op(...a));
  return { ctx, shop, m, old };
}

async function rejection(promise, Cls) {
  let err = null;
  await promise.catch((e) => { err = e; });
  assert.ok(err instanceof Cls, `expected ${Cls.name}, got ${err && err.stack}`);
  return err;
}

test('shadow: the old store answers, a planted mismatch is counted', { skip: missing || false }, async () => {
  const { ctx, shop, m, old } = await scene(10, 2);
  try {
    assert.equal(await m.stage(shop), 'old');
    await m.reserveOne(shop, 'before', 1, 1, 1);
    assert.deepEqual((await m.stats(shop)).offered, 0);
    await moveTo(m, shop, 'shadow');
    await m.reserveOne(shop, 's1', 1, 1, 1);
    // planted: the old store has none left, libreserve has 9
    const e = await rejection(m.reserveOne(shop, 's2', 1, 1, 1), rsv.OutOfStock);
    assert.equal(e.function, 'rsv_migrate_reserve_one');
    assert.equal(e.failedLine, 0);
    assert.match(e.message, /old store: out of stock/);
    await m.claim(shop, 's1');
    await m.claim(shop, 'before'); // libreserve never saw it: unknown
    await rejection(m.claim(shop, 's1'), rsv.AlreadyClaimed);
    // the old store failing: its error kept, the call a DatabaseError
    m.setLegacy(async () => { throw new Error('redis down'); });
    const f = await rejection(m.release(shop, 's1'), rsv.DatabaseError);
    assert.equal(f.cause.message, 'redis down');
    assert.equal(m.legacyErrors.length, 1);
    m.setLegacy((...a) => old.op(...a));
    // a token libreserve could not take: refused before the old store is asked
    const calls = old.calls.length;
    await rejection(m.reserveOne(shop, '', 1, 1, 1), rsv.InvalidToken);
    await rejection(m.claim(shop, 'x'.repeat(rsv.TOKEN_MAX + 1)), rsv.InvalidToken);
    assert.equal(old.calls.length, calls);
    assert.equal(await m.drain(10000), true);
    const st = await m.stats(shop);
    assert.deepEqual(st, {
      bothAccepted: 2, bothRefused: 1, oldRefusedNewAccepted: 1, oldAcceptedNewRefused: 0,
      newFailed: 0, unknown: 1, oldFailed: 1, offered: 5, applied: 5, dropped: 0, stageReadFailed: 0,
    });
    assert.equal(await m.stat(null, 'oldRefusedNewAccepted') >= 1, true);
    // libreserve's side: s1 claimed, s2's hold given back
    assert.equal((await ctx.checkoutStatus(shop, 's1')).status, 'claimed');
    assert.equal((await ctx.checkoutStatus(shop, 's2')).status, 'released');
    assert.match(await m.prometheus(),
      new RegExp(`libreserve_migration_calls_total\\{shop="${shop}",class="old_refused_new_accepted"\\} 1\\n`));
  } finally {
    await m.close();
    await ctx.close();
  }
});

test('primary: libreserve answers, the outbox keeps the JS old store current', { skip: missing || false }, async () => {
  const { ctx, shop, m, old } = await scene(3, 10);
  try {
    await moveTo(m, shop, 'shadow');
    await moveTo(m, shop, 'primary');
    const before = old.calls.length;
    await m.reserveOne(shop, 'p1', 1, 1, 2);
    // libreserve has 1 left, the old store 8: refused here, held there,
    // then given back there by the follow-up release
    await rejection(m.reserveOne(shop, 'p2', 1, 1, 2), rsv.OutOfStock);
    await m.claim(shop, 'p1');
    await rejection(m.claim(shop, 'p9'), rsv.NotFound); // not sent to the old store
    // planted: a hold libreserve has and the old store never saw
    await ctx.reserveOne(shop, 'p3', 1, 1, 1);
    await m.claim(shop, 'p3');
    assert.equal(await m.drain(10000), true);
    // the outbox in the order of the calls; the follow-up release of p2 is
    // queued when the old store has answered p2's reserve, which may be
    // after the buyer's claim of p1 was queued
    const calls = old.calls.slice(before);
    assert.equal(calls.length, 5);
    assert.deepEqual(calls.slice(0, 2), [['reserve', 'p1'], ['reserve', 'p2']]);
    assert.deepEqual(calls.slice(2).filter((c) => c[0] === 'claim'), [['claim', 'p1'], ['claim', 'p3']]);
    assert.deepEqual(calls.slice(2).filter((c) => c[0] === 'release'), [['release', 'p2']]);
    assert.equal(old.state('p1'), 'claimed');
    assert.equal(old.state('p2'), 'released');
    assert.equal(old.stock, 8);
    const st = await m.stats(shop);
    assert.equal(st.bothAccepted, 2);
    assert.equal(st.oldAcceptedNewRefused, 1);
    assert.equal(st.oldRefusedNewAccepted, 1);
    assert.equal(st.offered, 4);
    assert.equal(st.applied, 4);
    assert.equal((await ctx.checkoutStatus(shop, 'p1')).status, 'claimed');
  } finally {
    await m.close();
    await ctx.close();
  }
});

test('a flip back and forth: each store has what the other decided', { skip: missing || false }, async () => {
  // a dsn: the handle opens its context and closes it
  const shop = h.newShop();
  const setup = await rsv.open(h.dsn(DB));
  await setup.stockSet(shop, 1, 1, 10);
  await setup.close();
  const m = await rsv.Migration.open(h.dsn(DB), { refreshMs: 100, queueMax: 64 });
  const old = new OldStore(10);
  m.setLegacy((...a) => old.op(...a));
  try {
    await moveTo(m, shop, 'shadow');
    await m.reserveOne(shop, 'a', 1, 1, 1);
    await moveTo(m, shop, 'primary');
    await m.claim(shop, 'a'); // reserved in shadow: libreserve has it
    await m.reserveOne(shop, 'b', 1, 1, 1);
    await moveTo(m, shop, 'shadow');
    await m.claim(shop, 'b'); // reserved in primary: the old store has it
    assert.equal(old.state('a'), 'claimed');
    assert.equal(old.state('b'), 'claimed');
    await moveTo(m, shop, 'primary');
    await m.release(shop, 'a').catch((e) => assert.ok(e instanceof rsv.AlreadyClaimed));
    await moveTo(m, shop, 'complete');
    const calls = old.calls.length;
    await m.reserveOne(shop, 'c', 1, 1, 1);
    assert.equal(await m.drain(10000), true);
    assert.equal(old.calls.length, calls);
    const st = await m.stats(shop);
    assert.equal(st.bothAccepted, 4);
    assert.equal(st.oldFailed + st.unknown + st.newFailed + st.dropped, 0);
    assert.equal(st.offered, st.applied);
  } finally {
    await m.close();
  }
  assert.equal(m.closed, true);
  await rejection(m.claim(shop, 'a'), rsv.InvalidArgument);
});
