#!/usr/bin/env bash
# tests/migrate-compare-test.sh - rsv-admin migrate compare against the
# server in RSV_TEST_SOCKET and a throwaway redis-server (a loopback port
# below 32768, removed afterwards): Redis counters found by a key pattern,
# a CSV file and a query; clean stores exit 0, drift exits 1 naming
# exactly the keys and their class (differ, not in libreserve, not in the
# old store: a key libreserve has with units available in a compared shop,
# before, between and after the source's keys; a key at 0 and a shop the
# source lacks are not drift); a difference that
# is only in flight (mended before the check again) is not drift; many
# differences, over more than one chunk of the checks again, some mended
# and the rest changed again after pass 1, end as last seen; a compare
# killed with SIGKILL part way resumes after its last chunk; a
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
# only in libreserve: before shop 1's first key, right after a chunk's last
# key (chunks of 1000: shop 1's item 2000 closes the second), between two
# keys, after the source's last key; not drift: nothing available, a shop
# the source does not have
q "INSERT INTO rsv_ledger (shop_id, item_id, location_id, on_hand) VALUES (1, 1, 0, 2), (1, 2000, 5, 3), (2, 1500, 2, 4), (3, 5000, 1, 7), (3, 5001, 1, 0), (4, 1, 1, 9)"
newonly='(1, 1, 0, None, 2, "not_in_old_store"), (1, 2000, 5, None, 3, "not_in_old_store")'
newonly3='(3, 5000, 1, None, 7, "not_in_old_store")'
keys='[(x["shop_id"], x["item_id"], x["location_id"], x["old"], x["new"], x["class"]) for x in d["drift"]]'
q "UPDATE rsv_migration_stage SET needs_compare = 1 WHERE shop_id = 2"
run migrate compare --redis "127.0.0.1:$port" --pattern "$pat" --settle 0 --json
expect "redis: drift exits 1 and names the keys and their class" 1 "$keys == [$newonly, (2, 17, 1, 999, (2 * 31 + 17 * 7) % 90, 'differ'), (2, 1500, 2, None, 4, 'not_in_old_store'), $newonly3, (3, 9999, 1, 4, None, 'not_in_libreserve')] and d['classes'] == {'differ': 1, 'not_in_libreserve': 1, 'not_in_old_store': 4}"
check "a drifted shop keeps its mark" "$(q 'SELECT needs_compare FROM rsv_migration_stage WHERE shop_id = 2')" 1
run migrate compare --redis "127.0.0.1:$port" --pattern "$pat" --settle 0
if [ "$rc" = 1 ] && grep -q 'drift: shop 3 item 9999 location 1: old store 4, libreserve (no ledger row)' <<<"$out"; then ok "text: the drift line"; else bad "text: the drift line"; fi
if [ "$rc" = 1 ] && grep -q 'drift: shop 3 item 5000 location 1: old store (no such key), libreserve 7' <<<"$out" &&
   grep -Eq '6 drifted.*: 1 differ, 1 not in libreserve, 4 not in the old store' <<<"$out"; then ok "text: a key only libreserve has, and the classes counted"; else bad "text: a key only libreserve has, and the classes counted"; fi
rcli SET stock:2:17:1 "$(( (2 * 31 + 17 * 7) % 90 ))" >/dev/null
rcli DEL stock:3:9999:1 >/dev/null
run migrate compare --csv "$tmp/levels.csv" --settle 0 --json
expect "csv: the keys only libreserve has" 1 "$keys == [(1, 1, 0, None, 2, 'not_in_old_store'), (1, 5, 1, (1 * 31 + 5 * 7) % 90, (1 * 31 + 5 * 7) % 90 - 3, 'differ'), (1, 2000, 5, None, 3, 'not_in_old_store'), (2, 1500, 2, None, 4, 'not_in_old_store'), $newonly3]"
q "DELETE FROM rsv_ledger WHERE (shop_id, item_id, location_id) IN ((1, 1, 0), (1, 2000, 5), (2, 1500, 2), (3, 5000, 1), (3, 5001, 1), (4, 1, 1))"

# ---- in flight: mended before the check again ----
rcli SET stock:1:100:1 12345 >/dev/null
( sleep 1; rcli SET stock:1:100:1 "$(( (1 * 31 + 100 * 7) % 90 ))" >/dev/null ) &
mend=$!
run migrate compare --redis "127.0.0.1:$port" --pattern "$pat" --settle 2 --json
wait "$mend"
expect "a difference in flight is checked again and is not drift" 0 'd["drift"] == [] and d["rechecks"] == 1'

# ---- in flight behind a lagging queue: the check again waits for the
# handles' books (offered 10, done 4) to show the work done, and the key is
# mended with them, well after --settle ----
rcli SET stock:1:101:1 12345 >/dev/null
q "INSERT INTO rsv_migration_counts (shop_id, class, n, updated_at) VALUES (1, 'offered', 10, NOW(6)), (1, 'applied', 3, NOW(6)), (1, 'dropped', 1, NOW(6))"
( sleep 3; rcli SET stock:1:101:1 "$(( (1 * 31 + 101 * 7) % 90 ))" >/dev/null
  q "UPDATE rsv_migration_counts SET n = 9 WHERE shop_id = 1 AND class = 'applied'" ) &
mend=$!
run migrate compare --redis "127.0.0.1:$port" --pattern "$pat" --settle 0 --json
wait "$mend"
expect "a difference behind a lagging queue waits for its books and is not drift" 0 'd["drift"] == [] and d["rechecks"] == 1'
if grep -q "recheck 1: waiting for the handles' queues (6 calls behind)" <<<"$err"; then ok "the wait for the queues is said on stderr"; else bad "the wait for the queues is said on stderr: $err"; fi
q "DELETE FROM rsv_migration_counts WHERE shop_id = 1"

# ---- many differences, over two chunks of the checks again: a third
# mended, the rest changed again after pass 1; each recorded as last seen ----
python3 - "$tmp/many" <<'PY'
import sys
with open(sys.argv[1] + ".before", "w") as b, open(sys.argv[1] + ".after", "w") as a, open(sys.argv[1] + ".restore", "w") as r:
    for item in range(1, 1501):
        n = (3 * 31 + item * 7) % 90
        b.write("SET stock:3:%d:1 999\n" % item)
        a.write("SET stock:3:%d:1 %d\n" % (item, n if item % 3 == 0 else 998))
        r.write("SET stock:3:%d:1 %d\n" % (item, n))
PY
rcli --pipe <"$tmp/many.before" >/dev/null
"$ADMIN" "${conn[@]}" migrate compare --redis "127.0.0.1:$port" --pattern "$pat" --settle 3 --json >"$tmp/many.out" 2>"$tmp/many.err" &
bg=$!
src="compare:redis:127.0.0.1:$port/$pat"
for _ in $(seq 300); do
  [ "$(q "SELECT rows_done FROM rsv_import_progress WHERE source = '$src' AND finished_at IS NULL")" = 6000 ] && break
  sleep 0.05
done
rcli --pipe <"$tmp/many.after" >/dev/null
wait "$bg"; rc=$?; bg=; out=$(cat "$tmp/many.out"); err=$(cat "$tmp/many.err")
expect "many differences: the mended ones dropped, the rest with the values seen last" 1 "$keys == [(3, i, 1, 998, (3 * 31 + i * 7) % 90, 'differ') for i in range(1, 1501) if i % 3] and d['rechecks'] == 3"
rcli --pipe <"$tmp/many.restore" >/dev/null

# ---- CSV and query ----
run migrate compare --csv "$tmp/levels.csv" --json
expect "csv: only the hold differs" 1 '[(x["shop_id"], x["item_id"], x["old"] - x["new"]) for x in d["drift"]] == [(1, 5, 3)]'
q "CREATE TABLE app_stock AS SELECT shop_id AS s, item_id AS i, location_id AS l, on_hand - held AS n FROM rsv_stock"
run migrate compare --query "SELECT s, i, l, n FROM app_stock ORDER BY s, i, l" --json
expect "query: the same" 0 'd["keys"] == 6000 and d["drift"] == []'
q "INSERT INTO rsv_ledger (shop_id, item_id, location_id, on_hand) VALUES (2, 7777, 1, 5)"
run migrate compare --query "SELECT s, i, l, n FROM app_stock ORDER BY s, i, l" --settle 0 --json
expect "query: a key only libreserve has" 1 "$keys == [(2, 7777, 1, None, 5, 'not_in_old_store')]"
q "DELETE FROM rsv_ledger WHERE shop_id = 2 AND item_id = 7777"

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
# only in libreserve: one in the first chunk (done before the kill), one
# after the last key (done after the resume)
q "INSERT INTO rsv_ledger (shop_id, item_id, location_id, on_hand) VALUES (9, 500, 2, 5), (9, 70000, 1, 6)"
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
expect "resumed after the last chunk: the keys only libreserve has found once" 1 "d['resumed_after'] == $done_ and d['keys'] == 60000 and $keys == [(9, 500, 2, None, 5, 'not_in_old_store'), (9, 70000, 1, None, 6, 'not_in_old_store')]"
expect_text() { if [ "$rc" = "$2" ] && grep -Eq -- "$3" <<<"$out$err"; then ok "$1"; else bad "$1"; fi; }
expect_text "resume said so" 1 "resuming after key 9:$done_:1"
run migrate compare
expect "compare without a source: usage" 2
run migrate compare --redis "127.0.0.1:$port" --pattern 'stock:{shop}'
expect "a pattern without the three ids: usage" 2

finish
