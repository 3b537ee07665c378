#!/usr/bin/env bash
# Prototype measurement (issue 4): one-round-trip reserve through a stored
# procedure (sp_reserve.sql) against the library's rsv_reserve_one, same
# pool, same clients, through the delay proxy.  Not a design the library
# uses yet; see docs/performance.md "What would close the gap".
# Usage (make bench-sp): tools/mariadb.sh run tests/bench/sp/run.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
: "${RSV_TEST_SOCKET:?run under tools/mariadb.sh run}"
db=rsvsp_$$
my() { mariadb --no-defaults -S "$RSV_TEST_SOCKET" -u"${RSV_TEST_USER:-root}" "$@"; }
my -e "CREATE DATABASE $db"
trap 'my -e "DROP DATABASE IF EXISTS $db"' EXIT
my "$db" < sql/schema.sql
my "$db" < tests/bench/sp/sp_reserve.sql
# 200,000 pool rows straight into the pool (no refill during the run)
my "$db" -e "INSERT INTO inventory_levels (shop_id, inventory_item_id, inventory_group_id, on_hand, issued, next_unit_id, updated_at) VALUES (77,1,1,10000000,200000,200001,NOW(6)); INSERT INTO reservation_units (shop_id, inventory_item_id, inventory_group_id, id) SELECT 77,1,1,seq FROM seq_1_to_200000"
for clients in 16 64; do
  for mode in sp lib; do
    build/bench/sp_bench --socket "$RSV_TEST_SOCKET" --db "$db" --mode "$mode" --clients "$clients" --rtt-us 0
  done
done
coproc PROXY { build/bench/proxy --unix "$RSV_TEST_SOCKET" --rtt-us 500; }
read -r port <&"${PROXY[0]}"
for clients in 16 64; do
  for mode in sp lib; do
    build/bench/sp_bench --port "$port" --db "$db" --mode "$mode" --clients "$clients" --rtt-us 500
  done
done
kill "$PROXY_PID" 2>/dev/null || true
