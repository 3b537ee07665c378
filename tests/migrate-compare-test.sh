#!/usr/bin/env bash
# tests/migrate-compare-test.sh - rsv-admin migrate compare against the
# server in RSV_TEST_SOCKET and a throwaway redis-server (a loopback port
# below 32768, removed afterwards): Redis counters found by a key pattern,
# a CSV file and a query; clean stores exit 0, drift exits 1 naming
# exactly the keys (a key missing on either side too); a difference that
# is only in flight (mended before the check again) is not drift; a
# compare killed with SIGKILL part way resumes after its last chunk; a
# clean compare clears the shop's needs_compare mark.
#
# Creates its own database and drops it.  Run by `make check`, or:
#   make lib build/rsv-admin && tools/mariadb.sh run tests/migrate-compare-test.sh
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

# shellcheck source=tests/testlib.sh
. tests/testlib.sh migrate-compare-test
# shellcheck source=tests/admintest.sh
. tests/admintest.sh
bg=
cleanup_extra() { [ -n "$bg" ] && kill -9 "$bg" 2>/dev/null; redis_stop; }
# shellcheck source=tests/redislib.sh
. tests/redislib.sh
load_schema || exit 1

# The same levels in both stores: 3 shops x 2000 items.
python3 - "$tmp/levels.csv" "$tmp/redis.txt" <<'PY'
import sys
with open(sys.argv[1], "w") as f, open(sys.argv[2], "w") as r:
    for shop in (1, 2, 3):
        for item in range(1, 2001):
            n = (shop * 31 + item * 7) % 90
            f.write("%d,%d,1,%d\n" % (shop, item, n))
            r.write("SET stock:%d:%d:1 %d\n" % (shop, item, n))
PY
rcli --pipe <"$tmp/redis.txt" >/dev/null
"$ADMIN" "${conn[@]}" import --csv "$tmp/levels.csv" --chunk 2000 >/dev/null 2>&1 || { echo "import failed"; exit 1; }
# a hold in libreserve: available falls with it, as the old store's did
python3 - "$RSV_TEST_SOCKET" <<PY || exit 1
import os, sys
sys.path.insert(0, "bindings/python")
os.environ.setdefault("LIBRESERVE_PATH", os.path.abspath("${RSV_BUILD:-build}/libreserve.so"))
import libreserve as rsv
with rsv.connect(rsv.make_dsn("$DB", user="$USER_", password="$PASS_" or None, socket=sys.argv[1])) as ctx:
    ctx.reserve_one(1, b"h1", 5, 1, 3, 600000)
PY
rcli DECRBY stock:1:5:1 3 >/dev/null
q "INSERT INTO rsv_migration_stage (shop_id, stage, version, changed_at, needs_compare) VALUES (2, 1, 1, NOW(6), 1)"
pat='stock:{shop}:{item}:{location}'

run migrate compare --redis "127.0.0.1:$port" --pattern "$pat" --json
expect "redis: the same levels (a hold on both sides)" 0 'd["keys"] == 6000 and d["drift"] == []'
check "a clean compare clears the shop's compare mark" "$(q 'SELECT needs_compare FROM rsv_migration_stage WHERE shop_id = 2')" 0

# ---- drift, named exactly ----
rcli SET stock:2:17:1 999 >/dev/null          # differs
rcli SET stock:3:9999:1 4 >/dev/null          # only in the old store
q "UPDATE rsv_migration_stage SET needs_compare = 1 WHERE shop_id = 2"
run migrate compare --redis "127.0.0.1:$port" --pattern "$pat" --settle 0 --json
expect "redis: drift exits 1 and names the keys" 1 '[(x["shop_id"], x["item_id"], x["old"], x["new"]) for x in d["drift"]] == [(2, 17, 999, (2 * 31 + 17 * 7) % 90), (3, 9999, 4, None)]'
check "a drifted shop keeps its mark" "$(q 'SELECT needs_compare FROM rsv_migration_stage WHERE shop_id = 2')" 1
run migrate compare --redis "127.0.0.1:$port" --pattern "$pat" --settle 0
if [ "$rc" = 1 ] && grep -q 'drift: shop 3 item 9999 location 1: old store 4, libreserve (no ledger row)' <<<"$out"; then ok "text: the drift line"; else bad "text: the drift line"; fi
rcli SET stock:2:17:1 "$(( (2 * 31 + 17 * 7) % 90 ))" >/dev/null
rcli DEL stock:3:9999:1 >/dev/null

# ---- in flight: mended before the check again ----
rcli SET stock:1:100:1 12345 >/dev/null
( sleep 1; rcli SET stock:1:100:1 "$(( (1 * 31 + 100 * 7) % 90 ))" >/dev/null ) &
mend=$!
run migrate compare --redis "127.0.0.1:$port" --pattern "$pat" --settle 2 --json
wait "$mend"
expect "a difference in flight is checked again and is not drift" 0 'd["drift"] == [] and d["rechecks"] == 1'

# ---- CSV and query ----
run migrate compare --csv "$tmp/levels.csv" --json
expect "csv: only the hold differs" 1 '[(x["shop_id"], x["item_id"], x["old"] - x["new"]) for x in d["drift"]] == [(1, 5, 3)]'
q "CREATE TABLE app_stock AS SELECT shop_id AS s, item_id AS i, location_id AS l, on_hand - held AS n FROM rsv_stock"
run migrate compare --query "SELECT s, i, l, n FROM app_stock ORDER BY s, i, l" --json
expect "query: the same" 0 'd["keys"] == 6000 and d["drift"] == []'

# ---- killed part way, resumed ----
python3 - "$tmp/big.txt" <<'PY'
import sys
with open(sys.argv[1], "w") as r:
    for item in range(1, 60001):
        r.write("SET big:9:%d:1 %d\n" % (item, item % 50))
PY
rcli --pipe <"$tmp/big.txt" >/dev/null
sed -n 's/^SET big:\([0-9]*\):\([0-9]*\):\([0-9]*\) \([0-9]*\)$/\1,\2,\3,\4/p' "$tmp/big.txt" >"$tmp/big.csv"
"$ADMIN" "${conn[@]}" import --csv "$tmp/big.csv" --chunk 5000 >/dev/null 2>&1 || { echo "import failed"; exit 1; }
"$ADMIN" "${conn[@]}" migrate compare --redis "127.0.0.1:$port" --pattern "big:{shop}:{item}:{location}" --rate 6000 >"$tmp/bg.out" 2>&1 &
bg=$!
src="compare:redis:127.0.0.1:$port/big:{shop}:{item}:{location}"
done_=0
for _ in $(seq 300); do
  done_=$(q "SELECT COALESCE(MAX(rows_done), 0) FROM rsv_import_progress WHERE source = '$src'")
  [ "${done_:-0}" -ge 1000 ] && break
  sleep 0.1
done
kill -9 "$bg" 2>/dev/null; wait "$bg" 2>/dev/null; bg=
done_=$(q "SELECT rows_done FROM rsv_import_progress WHERE source = '$src' AND finished_at IS NULL")
if [ -n "$done_" ] && [ "$done_" -gt 0 ] && [ "$done_" -lt 60000 ]; then ok "killed part way: $done_ of 60000 keys recorded"; else out=$done_; err=; bad "killed part way"; done_=0; fi
run migrate compare --redis "127.0.0.1:$port" --pattern "big:{shop}:{item}:{location}" --json
expect "resumed after the last chunk" 0 "d['resumed_after'] == $done_ and d['keys'] == 60000 and d['drift'] == []"
expect_text() { if [ "$rc" = "$2" ] && grep -Eq -- "$3" <<<"$out$err"; then ok "$1"; else bad "$1"; fi; }
expect_text "resume said so" 0 "resuming after key 9:$done_:1"
run migrate compare
expect "compare without a source: usage" 2
run migrate compare --redis "127.0.0.1:$port" --pattern 'stock:{shop}'
expect "a pattern without the three ids: usage" 2

finish
