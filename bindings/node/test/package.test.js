'use strict';
// The package installs the usual way: `npm pack`, then `npm install` of the
// tarball into a new project (koffi comes from the registry, or npm's cache),
// and the example of README.md runs there as printed, against the server in
// RSV_TEST_SOCKET, with its connection string replaced by the test server's.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const h = require('./helpers');

const missing = h.serverMissing() || (h.which('npm') ? null : 'npm is not installed');
const DB = `rsvjsreadme_${process.pid}`;

function run(cmd, args, opts) {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...opts });
}

test('npm pack, npm install into a new project, the README example runs', { skip: missing || false, timeout: 300000 }, async (t) => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rsv-npm-'));
  try {
    // the tarball holds the package's files and nothing else
    const packed = JSON.parse(run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', tmp],
      { cwd: h.PKG }));
    const files = packed[0].files.map((f) => f.path).sort();
    assert.deepEqual(files, ['LICENSE', 'README.md', 'index.d.ts', 'index.js', 'package.json']);
    const tarball = path.join(tmp, packed[0].filename);

    const app = path.join(tmp, 'app');
    fs.mkdirSync(app);
    fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', private: true }));
    try {
      run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--ignore-scripts',
        '--no-package-lock', tarball], { cwd: app, timeout: 240000 });
    } catch (e) {
      t.skip(`npm install of the packed package failed (no registry or cache for koffi?): ${String(e.stderr).trim().split('\n').slice(-3).join(' / ')}`);
      return;
    }
    const installed = path.join(app, 'node_modules', 'libreserve');
    assert.ok(fs.existsSync(path.join(installed, 'index.js')));
    assert.ok(!fs.lstatSync(installed).isSymbolicLink(), 'a copy, not a link to the source');

    // The README's example, as printed but for the connection string.
    const readme = fs.readFileSync(path.join(installed, 'README.md'), 'utf8');
    const example = /```js\n([\s\S]*?)```/.exec(readme)[1];
    const lines = example.split('\n').filter((l) => l.trim() !== '');
    assert.ok(lines.length <= 10, `the README's example has ${lines.length} lines`);
    const strings = example.match(/'mariadb:\/\/[^']*'/g) || [];
    assert.equal(strings.length, 1, 'one connection string in the example');
    fs.writeFileSync(path.join(app, 'checkout.mjs'), example.replace(strings[0], () => JSON.stringify(h.dsn(DB))));

    h.createDb(DB);
    try {
      const env = { ...process.env, LIBRESERVE_PATH: process.env.LIBRESERVE_PATH || '' };
      const first = run(process.execPath, ['checkout.mjs'], { cwd: app, env });
      assert.match(first, /onHand: 8/);
      assert.match(first, /held: 0/);
      // again, as the README says: the claimed checkout is refused
      let second = null;
      try {
        run(process.execPath, ['checkout.mjs'], { cwd: app, env });
      } catch (e) {
        second = String(e.stderr);
      }
      assert.match(second || 'it ran', /AlreadyClaimed: the checkout was already claimed/);
      // CommonJS and named ES imports work from the installed package too
      const cjs = run(process.execPath, ['-e',
        "const r = require('libreserve'); console.log(require.resolve('libreserve'), r.version())"],
      { cwd: app, env });
      assert.equal(cjs.trim(), `${path.join(installed, 'index.js')} ${require('..').version()}`);
      const esm = run(process.execPath, ['--input-type=module', '-e',
        "import { open, AlreadyClaimed, version } from 'libreserve'; console.log(typeof open, typeof AlreadyClaimed, version())"],
      { cwd: app, env });
      assert.equal(esm.trim(), `function function ${require('..').version()}`);
    } finally {
      h.dropDb(DB);
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
