#!/usr/bin/env bash
# Runs the Node.js package's tests (node --test) against the server in
# RSV_TEST_SOCKET.  Start it under a throwaway server:
#   tools/mariadb.sh run bindings/node/node-test.sh [test files...]
# (make check-node, and make check, install node and the npm dependencies
# first: mk/node.mk.)  Library: $LIBRESERVE_PATH if set, otherwise the
# in-tree build.  Without node or koffi it says why and skips (exit 0).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [ -z "${RSV_TEST_SOCKET:-}" ]; then
  echo "node-test.sh: RSV_TEST_SOCKET is not set; use: tools/mariadb.sh run $0" >&2
  exit 2
fi
skip() {
  echo "skip node: $*"
  echo "node: 0 passed, 0 failed, 1 skipped"
  exit 0
}
command -v node >/dev/null 2>&1 || skip "node is not installed (make node-deps installs it as root: apt-get install nodejs npm)"
[ -d "$here/node_modules/koffi" ] || skip "koffi is not installed in bindings/node (make node-deps runs npm install there; it failed or was not run)"
(cd "$here" && node -e 'require("koffi")') >/dev/null 2>&1 ||
  skip "koffi does not load here: $(cd "$here" && node -e 'require("koffi")' 2>&1 | grep -m1 -i error)"
if [ -z "${LIBRESERVE_PATH:-}" ]; then
  lib=$repo/${RSV_BUILD:-build}/libreserve.so.0
  [ -e "$lib" ] || { echo "node-test.sh: $lib not built (make lib) and LIBRESERVE_PATH not set" >&2; exit 2; }
  export LIBRESERVE_PATH=$lib
fi
cd "$here" || exit 2
echo "node $(node --version), koffi $(node -p 'require("koffi").version'), $LIBRESERVE_PATH"
if [ $# -eq 0 ]; then set -- test/*.test.js; fi
exec node --test "$@"
