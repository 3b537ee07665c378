#!/usr/bin/env bash
# What the Node.js package needs for its tests (mk/node.mk runs this before
# make check and make check-node): node and npm, installed with apt-get as
# root when node is missing, and `npm install` here (koffi, and typescript
# for the type test) when node_modules is missing or older than
# package.json.  Never fails: when something cannot be had it says so, and
# node-test.sh then skips.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
have() { command -v "$1" >/dev/null 2>&1; }
if ! have node; then
  "$here/../../tools/deps.sh" packages nodejs npm ||
    echo "node deps: node is missing: the Node.js tests will be skipped"
fi
have node || exit 0
if ! have npm; then
  echo "node deps: npm is missing (apt-get install npm): the Node.js tests will be skipped"
  exit 0
fi
stamp=$here/node_modules/.libreserve-installed
if [ -f "$stamp" ] && [ "$stamp" -nt "$here/package.json" ] && [ -d "$here/node_modules/koffi" ]; then
  exit 0
fi
echo "node deps: npm install in bindings/node"
log=$(mktemp "${TMPDIR:-/tmp}/rsv-npm.XXXXXX")
if (cd "$here" && npm install --no-audit --no-fund --ignore-scripts --no-package-lock) >"$log" 2>&1; then
  touch "$stamp"
else
  tail -10 "$log"
  echo "node deps: npm install failed in bindings/node: the Node.js tests will be skipped"
fi
rm -f "$log"
exit 0
