#!/usr/bin/env bash
# The network suite (tests/network/check_network.c) needs a primary whose
# commits wait for a semi-synchronous replica that is not there, which
# the shared test server is not: so this starts a throwaway server of its
# own (binary log, semi-synchronous replication with AFTER_SYNC and a 5 s
# timeout, which the suite switches on).  Run by make check.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${RSV_BUILD:-build}
unset RSV_TEST_SOCKET
RSV_MARIADB_OPTS="--log-bin=binlog --server-id=1 --binlog-format=ROW \
--rpl-semi-sync-master-wait-point=AFTER_SYNC \
--rpl-semi-sync-master-timeout=5000" \
  exec tools/mariadb.sh run "$build/tests/network/check_network"
