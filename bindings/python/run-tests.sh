#!/usr/bin/env bash
# Runs the Python binding's tests (python3 -m unittest -v) against the
# server in RSV_TEST_SOCKET: test_libreserve, then test_mysqldb (joining a
# mysqlclient transaction) with a python3 that has MySQLdb.  Start it
# under a throwaway server:
#   tools/mariadb.sh run bindings/python/run-tests.sh [unittest args...]
# (with arguments, only those, under python3).
# Library: $LIBRESERVE_PATH if set (e.g. an installed libreserve.so.0),
# otherwise the in-tree build/libreserve.so.  Schema: $RSV_SCHEMA if set,
# otherwise the one installed next to the library, else sql/schema.sql.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [ -z "${RSV_TEST_SOCKET:-}" ]; then
  echo "run-tests.sh: RSV_TEST_SOCKET is not set; use: tools/mariadb.sh run $0" >&2
  exit 2
fi
if [ -z "${LIBRESERVE_PATH:-}" ]; then
  # the test build: one test needs a test-only option flag
  lib=$repo/build/test/libreserve.so
  if [ ! -e "$lib" ]; then
    echo "run-tests.sh: $lib not built (make check builds it) and LIBRESERVE_PATH not set" >&2
    exit 2
  fi
  export LIBRESERVE_PATH="$lib"
fi
cd "$here"
# No bytecode cache in the source tree.
export PYTHONDONTWRITEBYTECODE=1
if [ $# -gt 0 ]; then exec python3 -m unittest -v "$@"; fi
python3 -m unittest -v test_libreserve || exit 1
python3 -m unittest -v test_migrate || exit 1

# The recipe for joining a mysqlclient (Django) transaction needs MySQLdb
# built against MariaDB Connector/C: Debian's python3-mysqldb, installed
# here as root when missing, for Debian's own python3.
# An ASan-instrumented library (make check-asan) needs the python3 on
# PATH, which preloads the sanitizer's runtime: no other interpreter then.
# (ldd's output is read whole: grep -q could stop early and, under
# pipefail, ldd's SIGPIPE would count as "no libasan".)
cands=python3
case "$(ldd "$LIBRESERVE_PATH" 2>/dev/null || true)" in
  *libasan*) ;;
  *) cands="$cands /usr/bin/python3" ;;
esac
pick() {
  local p
  for p in $cands; do
    command -v "$p" >/dev/null 2>&1 && "$p" -c 'import MySQLdb' >/dev/null 2>&1 &&
      { echo "$p"; return 0; }
  done
  return 1
}
if ! py=$(pick); then
  "$repo/tools/deps.sh" packages python3-mysqldb >/dev/null 2>&1
  py=$(pick) || py=
fi
if [ -z "$py" ]; then
  echo "skip test_mysqldb: no python3 with MySQLdb (apt-get install python3-mysqldb)"
  exit 0
fi
echo "== test_mysqldb with $py ($("$py" -c 'import MySQLdb; print("mysqlclient", MySQLdb.__version__)'))"
exec "$py" -m unittest -v test_mysqldb
