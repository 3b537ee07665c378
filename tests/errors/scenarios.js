'use strict';
// The failing situations of tests/errors-test.sh through the Node.js
// binding: one line per situation, "SITUATION ERROR CODE FAILED_LINE ERRNO".
const rsv = require('libreserve');

const SHOP = Number(process.env.RSV_SHOP);

async function show(situation, call) {
  try {
    await call();
    console.log(situation, 'no-error', 0, '-', '-');
  } catch (e) {
    if (!(e instanceof rsv.ReserveError)) throw e;
    const line = e.failedLine === null || e.failedLine === undefined ? '-' : e.failedLine;
    console.log(situation, e.constructor.name, e.code, line, e.errno === null || e.errno === undefined ? '-' : e.errno);
  }
}

async function main() {
  if (process.argv[2] === 'readonly') {
    await show('not_primary', async () => (await rsv.open(process.env.RSV_DSN)).close());
    return;
  }
  if (process.argv[2] === 'indoubt') {
    const c = await rsv.open(process.env.RSV_DSN_INDOUBT, { callTimeoutMs: Number(process.env.RSV_BUDGET_MS) });
    try {
      await show('in_doubt', () => c.reserveOne(SHOP, 'js-indoubt', 1, 1, 1));
    } finally {
      await c.close();
    }
    return;
  }
  await show('wrong_password', () => rsv.open(process.env.RSV_DSN_BADPW));
  await show('no_server', () => rsv.open(process.env.RSV_DSN_GONE));
  const ctx = await rsv.open(process.env.RSV_DSN);
  try {
    await ctx.stockSet(SHOP, 1, 1, 3);
    await show('out_of_stock', () => ctx.reserveOne(SHOP, 'js-oos', 1, 1, 5));
    await ctx.reserveOne(SHOP, 'js-claimed', 1, 1, 1);
    await ctx.claim(SHOP, 'js-claimed');
    await show('already_claimed', () => ctx.claim(SHOP, 'js-claimed'));
    await show('expired', async () => {
      await ctx.reserveOne(SHOP, 'js-expired', 1, 1, 1, 1);
      await new Promise((r) => setTimeout(r, 50)); // past its deadline; the sweep gives the units back
      await ctx.sweep(SHOP);
      await ctx.claim(SHOP, 'js-expired');
    });
    await show('bad_token', () => ctx.reserveOne(SHOP, '', 1, 1, 1));
  } finally {
    await ctx.close();
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
