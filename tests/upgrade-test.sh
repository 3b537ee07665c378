#!/usr/bin/env bash
# tests/upgrade-test.sh - upgrading a live database.  Installs the schema
# of the last release without a schema version (commit $FROM), fills it
# through that release's own library (pools, held, claimed, released and
# expired checkouts, carts), then:
#   - today's library refuses it with RSV_ESCHEMAVER naming the command;
#   - loading today's sql/schema.sql keeps every row of every table;
#   - the audit is clean, and contexts of both libraries work on it (a
#     rolling deploy: old processes still running after the upgrade);
#   - loading the old file again (an older copy last) lowers nothing.
# Against the server in RSV_TEST_SOCKET (make check, or
#   tools/mariadb.sh run tests/upgrade-test.sh).  Needs the git history of
# the checkout (a clone has it) to build the old release; without it the
# test says so and passes nothing.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
FROM=${RSV_UPGRADE_FROM:-ad76e84}
build=${RSV_BUILD:-build}
# shellcheck source=tests/testlib.sh
. tests/testlib.sh upgrade

if ! git rev-parse --verify -q "$FROM^{commit}" >/dev/null 2>&1; then
  echo "upgrade-test: commit $FROM is not in this checkout's history: nothing to upgrade from"
  finish
  exit
fi
mkdir -p "$tmp/old"
git archive "$FROM" | tar -x -C "$tmp/old" || exit 1
if make -s -C "$tmp/old" lib >"$tmp/old-build.log" 2>&1; then
  ok "built the release library ($FROM)"
else
  tail -20 "$tmp/old-build.log"; bad "build the release library"; exit 1
fi
old_lib=$tmp/old/build/libreserve.so
new_lib=$PWD/$build/libreserve.so

# py LIBRARY BINDING_DIR SCRIPT: Python with that binding and library, the
# database connection in `conn`.
py() {
  local lib=$1 dir=$2 script=$3
  LIBRESERVE_PATH=$lib PYTHONDONTWRITEBYTECODE=1 python3 - "$RSV_TEST_SOCKET" "${RSV_TEST_USER:-root}" "${RSV_TEST_PASSWORD:-}" "$DB" "$dir" <<PY
import sys, time
sock, user, pw, db, bdir = sys.argv[1:]
sys.path.insert(0, bdir)
import libreserve as rsv
conn = rsv.Connection(unix_socket=sock, user=user, password=pw or None, db=db)
$script
conn.close()
PY
}

# dump: every row of every table, in key order.
dump() {
  local t
  for t in inventory_levels reservation_units reservation_checkouts reserved_quantities reservation_settlements; do
    echo "== $t"
    sql -N "$DB" -e "SELECT * FROM $t ORDER BY 1, 2, 3, 4"
  done
}

sql -e "CREATE DATABASE \`$DB\`" && sql "$DB" <"$tmp/old/sql/schema.sql" || exit 1

# Fill it through the release's library.
if py "$old_lib" "$tmp/old/examples/python" '
with rsv.Context(conn, pool_cap=20) as c:
    for item in (1, 2, 3):
        for loc in (1, 2):
            c.stock_set(9, item, loc, 50)
    c.replenish(9, 1, 1)
    c.replenish(9, 2, 1)
    for i in range(8):
        c.reserve_one(9, b"held-%d" % i, 1, 1, 1 + i % 3)
    for i in range(6):
        c.reserve_one(9, b"claimed-%d" % i, 2, 1, 2)
        c.claim(9, b"claimed-%d" % i)
    for i in range(4):
        c.reserve_one(9, b"released-%d" % i, 3, 2, 1)
        c.release(9, b"released-%d" % i)
    cart = rsv.Cart([(1, [2], 2), (2, [1, 2], 3), (3, [1], 1)])
    c.reserve(9, b"cart-1", cart)
    c.reserve(9, b"cart-2", cart)
    c.claim(9, b"cart-2")
    c.reserve_one(9, b"expired-1", 3, 1, 2, ttl_ms=1)
    time.sleep(0.05)
    assert not c.audit(9)
'; then ok "filled through the release library"; else bad "fill through the release library"; fi
dump >"$tmp/before.txt"

# Today's library refuses the unversioned database, naming the command.
out=$(py "$new_lib" bindings/python '
try:
    rsv.Context(conn)
    print("opened")
except rsv.SchemaVersionError as e:
    print(e.message)
' 2>&1)
if grep -q "schema version 0; this library needs version" <<<"$out" && grep -q "mariadb $DB < .*schema.sql" <<<"$out"; then
  ok "today's library refuses it: $out"
else
  bad "today's library refuses it: $out"
fi

# The upgrade: today's file, on the live data.
if sql "$DB" <sql/schema.sql; then ok "loaded today's sql/schema.sql"; else bad "load today's sql/schema.sql"; fi
dump >"$tmp/after.txt"
if cmp -s "$tmp/before.txt" "$tmp/after.txt"; then
  ok "every row of every table kept ($(grep -vc '^==' "$tmp/after.txt") rows)"
else
  bad "rows changed by the upgrade"; diff "$tmp/before.txt" "$tmp/after.txt" | head -20
fi
v=$(sql -N "$DB" -e "SELECT CONCAT(version, '/', oldest_library) FROM rsv_schema")
if [ "$v" = "1/1" ]; then ok "schema version 1 recorded"; else bad "schema version: $v"; fi

# Both libraries on the upgraded database.
if py "$new_lib" bindings/python '
with rsv.Context(conn) as c:
    assert not c.audit(9)
    c.claim(9, b"held-0")
    c.release(9, b"held-1")
    c.claim(9, b"cart-1")
    c.reserve_one(9, b"new-1", 1, 1, 2)
    c.claim(9, b"new-1")
    c.sweep(9)
    assert c.checkout_status(9, b"claimed-0").status == rsv.STATUS_CLAIMED
    assert c.checkout_status(9, b"expired-1").status == rsv.STATUS_EXPIRED
    assert not c.audit(9)
'; then ok "today's library works on the upgraded data"; else bad "today's library on the upgraded data"; fi
if py "$old_lib" "$tmp/old/examples/python" '
with rsv.Context(conn) as c:
    c.claim(9, b"held-2")
    c.reserve_one(9, b"old-1", 2, 2, 1)
    c.release(9, b"old-1")
    assert c.stats(rsv.STAT_ONE_TRIP, rsv.OP_RESERVE) == 1
    assert not c.audit(9)
'; then ok "the release library still works after the upgrade (rolling deploy)"; else bad "the release library after the upgrade"; fi

# An older copy of the file loaded last lowers nothing.
sql "$DB" <"$tmp/old/sql/schema.sql"
v=$(sql -N "$DB" -e "SELECT CONCAT(version, '/', oldest_library) FROM rsv_schema")
if [ "$v" = "1/1" ] && py "$new_lib" bindings/python '
with rsv.Context(conn) as c:
    assert not c.audit(9)
'; then ok "the release file loaded again lowers nothing"; else bad "the release file loaded again: version $v"; fi

finish
