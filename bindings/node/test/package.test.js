'use strict';
// The package installs the way its README says, from a fresh clone: the
// README's `npm install` command, as printed (only /path/to/libreserve
// replaced), run in a new project against a copy of the source tree that
// holds only the files git tracks (no node_modules: koffi must come with
// the install, from the registry or npm's cache).  Then the README's
// example runs there as printed, against the server in RSV_TEST_SOCKET,
// with its connection string replaced by the test server's.
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

// The tree as a clone has it: the files git tracks (and new ones not
// ignored), or, outside a git checkout, everything but installed modules.
function copyTree(to) {
  let files = null;
  try {
    files = run('git', ['-C', h.REPO, 'ls-files', '-z', '-c', '-o', '--exclude-standard'])
      .split('\0').filter(Boolean);
  } catch { /* not a git checkout */ }
  if (files === null) {
    fs.cpSync(h.REPO, to, { recursive: true,
      filter: (f) => !/(^|\/)(node_modules|build[^/]*|\.git)$/.test(path.relative(h.REPO, f)) });
    return;
  }
  for (const f of files) {
    const src = path.join(h.REPO, f);
    if (!fs.existsSync(src) || fs.lstatSync(src).isDirectory()) continue;
    fs.mkdirSync(path.dirname(path.join(to, f)), { recursive: true });
    fs.cpSync(src, path.join(to, f), { verbatimSymlinks: true });
  }
}

// The `npm install` line of a README that names /path/to/libreserve.
function installCommand(file) {
  const text = fs.readFileSync(file, 'utf8');
  const lines = [...text.matchAll(/^\s*(npm install [^\n#]*\/path\/to\/libreserve\/bindings\/node)\b/gm)];
  assert.equal(lines.length, 1, `${file}: one npm install of /path/to/libreserve/bindings/node`);
  return lines[0][1].trim();
}

test('the README\'s npm install from a fresh clone, then its example', { skip: missing || false, timeout: 300000 }, async (t) => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rsv-npm-'));
  try {
    const clone = path.join(tmp, 'libreserve');
    copyTree(clone);
    const pkg = path.join(clone, 'bindings', 'node');
    assert.ok(!fs.existsSync(path.join(pkg, 'node_modules')), 'the copy has no node_modules');
    // the package holds its files and nothing else
    const packed = JSON.parse(run('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: pkg }));
    const files = packed[0].files.map((f) => f.path).sort();
    assert.deepEqual(files, ['LICENSE', 'README.md', 'index.d.ts', 'index.js', 'native.js', 'package.json', 'runner.js']);

    // the same command in both READMEs, run as printed
    const cmd = installCommand(path.join(pkg, 'README.md'));
    assert.equal(installCommand(path.join(clone, 'README.md')), cmd);
    const app = path.join(tmp, 'app');
    fs.mkdirSync(app);
    fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', private: true }));
    const env = { ...process.env, npm_config_prefer_offline: 'true', npm_config_audit: 'false',
      npm_config_fund: 'false', npm_config_update_notifier: 'false' };
    try {
      run('sh', ['-c', cmd.replace('/path/to/libreserve', clone)], { cwd: app, env, timeout: 240000 });
    } catch (e) {
      const why = String(e.stderr).trim().split('\n').slice(-4).join(' / ');
      if (/ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|network/i.test(why)) {
        t.skip(`no npm registry or cache to fetch koffi from: ${why}`);
        return;
      }
      assert.fail(`${cmd}: ${why}`);
    }
    t.diagnostic(`ran: ${cmd}`);
    const installed = path.join(app, 'node_modules', 'libreserve');
    assert.ok(fs.existsSync(path.join(installed, 'index.js')));
    assert.ok(!fs.lstatSync(installed).isSymbolicLink(), 'a copy, not a link to the source');
    assert.ok(fs.existsSync(path.join(app, 'node_modules', 'koffi')), 'koffi installed into the project');

    // The README's example, as printed, with RSV_DSN naming the database.
    const readme = fs.readFileSync(path.join(installed, 'README.md'), 'utf8');
    const example = /```js\n([\s\S]*?)```/.exec(readme)[1];
    const lines = example.split('\n').filter((l) => l.trim() !== '');
    assert.ok(lines.length <= 12, `the README's example has ${lines.length} lines`);
    assert.match(example, /process\.env\.RSV_DSN \|\| 'mariadb:\/\//, 'the example reads RSV_DSN');
    fs.writeFileSync(path.join(app, 'checkout.mjs'), example);

    h.createDb(DB);
    try {
      const env = { ...process.env, LIBRESERVE_PATH: process.env.LIBRESERVE_PATH || '', RSV_DSN: h.dsn(DB) };
      const first = run(process.execPath, ['checkout.mjs'], { cwd: app, env });
      assert.equal(first.trim(), 'sold 2 hoodies');
      // again, as the README says: the claimed checkout is refused, and
      // the example handles it
      const second = run(process.execPath, ['checkout.mjs'], { cwd: app, env });
      assert.equal(second.trim(), 'checkout-9001 was already claimed');
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
