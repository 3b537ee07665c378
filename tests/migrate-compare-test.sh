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

ADMIN=${RSV_ADMIN_BIN:-${RSV_BUILD:-build}/rsv-admin}
: "${RSV_TEST_SOCKET:?RSV_TEST_SOCKET is not set: run via tools/mariadb.sh run}"
[ -x "$ADMIN" ] || { echo "migrate-compare-test: $ADMIN is not built (make $ADMIN)" >&2; exit 1; }
redis_server=$(command -v redis-server || echo /usr/bin/redis-server)
[ -x "$redis_server" ] || { echo "migrate-compare-test: no redis-server (tools/deps.sh packages redis-server)" >&2; exit 1; }
USER_=${RSV_TEST_USER:-root}
PASS_=${RSV_TEST_PASSWORD:-}
client=$(command -v mariadb || command -v mysql) || { echo "migrate-compare-test: no mariadb client" >&2; exit 1; }

DB=rsv_migrate_compare_$$
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rsv-migrate-compare.XXXXXX")
redis_pid=
bg=
sql() { MYSQL_PWD=$PASS_ "$client" --no-defaults --socket="$RSV_TEST_SOCKET" -u"$USER_" "$@"; }
cleanup() {
  [ -n "$bg" ] && kill -9 "$bg" 2>/dev/null
  [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
  sql -e "DROP DATABASE IF EXISTS \`$DB\`" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
q() { sql -N "$DB" -e "$1"; }
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; echo "     stdout: $out"; echo "     stderr: $err"; }
conn=(--no-defaults --socket "$RSV_TEST_SOCKET" --user "$USER_" --database "$DB")
export RSV_ADMIN_PASSWORD=$PASS_
run() { out=$("$ADMIN" "${conn[@]}" "$@" 2>"$tmp/err"); rc=$?; err=$(cat "$tmp/err"); }
expect() {
  local desc=$1 want=$2 expr=${3:-}
  if [ "$rc" != "$want" ]; then bad "$desc: exit $rc, want $want"; return; fi
  if [ -n "$expr" ] && ! python3 -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if ('"$expr"') else 1)' "$out" 2>"$tmp/py"; then
    bad "$desc: JSON check failed: $expr $(cat "$tmp/py")"; return
  fi
  ok "$desc"
}
check() { if [ "$2" = "$3" ]; then ok "$1"; else out=$2; err="want $3"; bad "$1"; fi; }

# ---- a throwaway Redis ----
port=
for try in 1 2 3 4 5 6 7 8 9 10; do
  p=$((20000 + (RANDOM + $$ + try * 1013) % 12000))
  "$redis_server" --bind 127.0.0.1 --port "$p" --save '' --appendonly no \
    --dir "$tmp" --logfile "$tmp/redis.log" --daemonize no &
  redis_pid=$!
  for _ in $(seq 50); do
    if grep -q 'Ready to accept' "$tmp/redis.log" 2>/dev/null; then port=$p; break; fi
    kill -0 "$redis_pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$port" ] && break
  kill "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null; redis_pid=
  : >"$tmp/redis.log"
done
[ -n "$port" ] || { echo "migrate-compare-test: redis-server did not start"; exit 1; }
rcli() { redis-cli -h 127.0.0.1 -p "$port" "$@"; }

sql -e "CREATE DATABASE \`$DB\`" || exit 1
sql "$DB" <sql/schema.sql || exit 1

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

echo "migrate-compare-test: $pass passed, $fail failed"
[ "$fail" = 0 ]
