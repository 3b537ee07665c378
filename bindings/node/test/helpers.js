'use strict';
// Shared by the tests: the server in RSV_TEST_SOCKET (as RSV_TEST_USER,
// default root, with RSV_TEST_PASSWORD), reached for SQL of the tests' own
// through the mariadb command-line client.

const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const SOCK = process.env.RSV_TEST_SOCKET || null;
const USER = process.env.RSV_TEST_USER || 'root';
const PASSWORD = process.env.RSV_TEST_PASSWORD || '';
const PKG = path.resolve(__dirname, '..');
const REPO = path.resolve(PKG, '..', '..');

function which(name) {
  for (const d of (process.env.PATH || '').split(':')) {
    const p = path.join(d || '.', name);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch { /* next */ }
  }
  return null;
}

const CLIENT = which('mariadb') || which('mysql');

function clientArgs(db) {
  return ['--no-defaults', `--socket=${SOCK}`, `-u${USER}`, '-N', '-B', ...(db ? [db] : [])];
}

/** Run SQL with the command-line client; returns its output (tab-separated rows). */
function sql(text, db = null, input = undefined) {
  return execFileSync(CLIENT, [...clientArgs(db), ...(text ? ['-e', text] : [])], {
    env: { ...process.env, MYSQL_PWD: PASSWORD },
    encoding: 'utf8',
    input,
  });
}

function schemaFile() {
  return process.env.RSV_SCHEMA || path.join(REPO, 'sql', 'schema.sql');
}

/** A new database with the schema loaded (refuses one that exists). */
function createDb(name) {
  sql(`CREATE DATABASE \`${name}\``);
  sql(null, name, fs.readFileSync(schemaFile()));
}

function dropDb(name) {
  sql(`DROP DATABASE IF EXISTS \`${name}\``);
}

function dsn(db, extra = '') {
  const q = encodeURIComponent;
  const auth = q(USER) + (PASSWORD ? ':' + q(PASSWORD) : '');
  return `mariadb://${auth}@/${q(db)}?socket=${q(SOCK)}${extra}`;
}

let shopSeq = 0;
/** A shop id no other test (or run) uses. */
function newShop() {
  shopSeq += 1;
  return process.pid * 4096 + shopSeq;
}

/** Why the server tests cannot run here, or null. */
function serverMissing() {
  if (!SOCK) return 'RSV_TEST_SOCKET is not set (run bindings/node/node-test.sh under tools/mariadb.sh run)';
  if (!CLIENT) return 'no mariadb command-line client';
  return null;
}

module.exports = { SOCK, USER, PASSWORD, PKG, REPO, CLIENT, sql, createDb, dropDb, dsn, newShop, serverMissing, which, schemaFile };
