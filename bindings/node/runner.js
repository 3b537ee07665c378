'use strict';
// A thread of the package's own (a worker_threads Worker) that runs the
// library's blocking calls without a non-blocking form (open, close,
// reconnect, stock, pools, sweep, audit, batches), one at a time, so that
// none of them waits on a lock in libuv's shared thread pool.  index.js
// sends {fn, args}; the answer is {rc, args} with the out-arguments filled
// in, or {error}.  Pointers cross as the BigInt addresses koffi uses.

const { parentPort } = require('node:worker_threads');
const { C } = require('./native');

// rsv_audit calls back once per violation, on this thread, during the call.
function audit(ptr, shop, allShops) {
  const found = [];
  const n = [0];
  const rc = C.rsv_audit(ptr, shop, allShops, (_arg, s, i, l, problem) => {
    found.push([s, i, l, problem]);
  }, null, n);
  return { rc, found, n: n[0] };
}

parentPort.on('message', ({ fn, args }) => {
  let answer;
  try {
    if (fn === 'audit') answer = audit(...args);
    else answer = { rc: C[fn](...args), args };
  } catch (e) {
    answer = { error: String((e && e.stack) || e) };
  }
  parentPort.postMessage(answer);
});
