#!/usr/bin/env bash
# Runs the Python binding's tests (python3 -m unittest -v) against the
# server in RSV_TEST_SOCKET.  Start it under a throwaway server:
#   tools/mariadb.sh run bindings/python/run-tests.sh [unittest args...]
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
if [ $# -eq 0 ]; then set -- test_libreserve; fi
exec python3 -m unittest -v "$@"
