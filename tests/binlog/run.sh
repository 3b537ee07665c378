#!/usr/bin/env bash
# The binary-log check (tests/binlog/check_binlog.py) needs a server with
# --log-bin, which the shared test server does not have (the binary log
# changes commit cost, and the benchmarks use the same server script): so
# this starts a second throwaway server of its own.  Run by make check.
set -euo pipefail
cd "$(dirname "$0")/../.."
export LIBRESERVE_PATH=${LIBRESERVE_PATH:-$PWD/build/libreserve.so}
export PYTHONDONTWRITEBYTECODE=1
unset RSV_TEST_SOCKET
RSV_MARIADB_OPTS="--log-bin=binlog --server-id=1 --binlog-format=MIXED" \
  exec tools/mariadb.sh run python3 tests/binlog/check_binlog.py
