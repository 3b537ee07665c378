#!/usr/bin/env bash
# tests/upgrade-test.sh - upgrading a live database from each earlier
# schema: version 2 (commit $FROM_V2: pool rows of one unit each), version
# 1 (the release of commit $FROM_V1) and the unversioned one before it
# (commit $FROM_V0), whose tables had unprefixed names.  For each,
# installs that release's schema, fills it through that release's own
# library (pools, held, claimed, released and expired checkouts, carts),
# stops it, then:
#   - today's library refuses it with RSV_ESCHEMAVER naming the command;
#   - rsv-admin schema status says upgrade-needed (install refuses it);
#   - loading today's sql/schema.sql (the mariadb client, or rsv-admin
#     schema upgrade) renames the tables where they had the old names,
#     gives every pool row its one unit, and keeps every row of every
#     table (compared column by column), and loading it again changes
#     nothing;
#   - the audit is clean, and a context of today's library claims and
#     releases old holds, reserves anew and sweeps;
#   - the old library's rsv_open fails (RSV_ESCHEMA: its tables are gone;
#     RSV_ESCHEMAVER for version 2, which needs a newer library) and
#     changes nothing.
# For version 1 also: its file loaded again by mistake lowers nothing, its
# library still refuses (RSV_ESCHEMAVER), and today's library keeps working
# (the procedures' names changed with their bodies).
# Against the server in RSV_TEST_SOCKET (make check, or make lib admin &&
#   tools/mariadb.sh run tests/upgrade-test.sh).  Needs the git history of
# the checkout (a clone has it) to build the old releases; without it the
# test says so and passes nothing.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
FROM_V2=${RSV_UPGRADE_FROM_V2:-bc33a51}
FROM_V1=${RSV_UPGRADE_FROM_V1:-5fd48c0}
FROM_V0=${RSV_UPGRADE_FROM_V0:-ad76e84}
build=${RSV_BUILD:-build}
# shellcheck source=tests/testlib.sh
. tests/testlib.sh upgrade
new_lib=$PWD/$build/libreserve.so
SV=$(sed -n 's/^#define RSV_SCHEMA_VERSION \([0-9]*\).*/\1/p' include/reserve.h)
ADMIN=${RSV_ADMIN_BIN:-$build/rsv-admin}
cleanup_extra() {
  sql -e "DROP DATABASE IF EXISTS \`${DB}_v2\`; DROP DATABASE IF EXISTS \`${DB}_v1\`; DROP DATABASE IF EXISTS \`${DB}_v0\`" >/dev/null 2>&1 || true
}

# py LIBRARY BINDING_DIR DATABASE SCRIPT: Python with that binding and
# library, the database connection in `conn`.
py() {
  local lib=$1 dir=$2 db=$3 script=$4
  LIBRESERVE_PATH=$lib PYTHONDONTWRITEBYTECODE=1 python3 - "$RSV_TEST_SOCKET" "${RSV_TEST_USER:-root}" "${RSV_TEST_PASSWORD:-}" "$db" "$dir" <<PY
import sys, time
sock, user, pw, db, bdir = sys.argv[1:]
sys.path.insert(0, bdir)
import libreserve as rsv
conn = rsv.Connection(unix_socket=sock, user=user, password=pw or None, db=db)
$script
conn.close()
PY
}

OLD_TABLES="inventory_levels reservation_units reservation_checkouts reserved_quantities reservation_settlements"
NEW_TABLES="rsv_ledger rsv_pool rsv_checkouts rsv_holds rsv_journal"

# dump DB TABLE...: every row of every table, sorted; the tables are
# numbered, not named, so that the old and new names compare.  Columns
# keep their order through the upgrade; the pool's units column, which
# the upgrade adds, is left out (pool_units checks it).
dump() {
  local db=$1 t n=0; shift
  for t in "$@"; do
    n=$((n + 1))
    echo "== table $n"
    if [ "$t" = rsv_pool ]; then
      sql -N "$db" -e "SELECT shop_id, item_id, location_id, id FROM $t"
    else
      sql -N "$db" -e "SELECT * FROM $t"
    fi | LC_ALL=C sort
  done
}

# admin DB ARGS...: today's rsv-admin on that database.
admin() {
  local db=$1; shift
  RSV_ADMIN_PASSWORD=${RSV_TEST_PASSWORD:-} "$ADMIN" --no-defaults --socket "$RSV_TEST_SOCKET" --user "${RSV_TEST_USER:-root}" --database "$db" "$@"
}

# upgrade_from LABEL COMMIT BINDING_DIR_IN_TREE OLD_VERSION LOADER
upgrade_from() {
  local label=$1 from=$2 bdir=$3 oldv=$4 loader=$5
  local db=${DB}_$label old=$tmp/$label
  if ! git rev-parse --verify -q "$from^{commit}" >/dev/null 2>&1; then
    echo "upgrade-test: commit $from is not in this checkout's history: no upgrade from it tested"
    return
  fi
  mkdir -p "$old"
  git archive "$from" | tar -x -C "$old" || { bad "$label: extract $from"; return; }
  if make -s -C "$old" lib >"$old/build.log" 2>&1; then
    ok "$label: built the release library ($from)"
  else
    tail -20 "$old/build.log"; bad "$label: build the release library ($from)"; return
  fi
  local old_lib=$old/build/libreserve.so old_py=$old/$bdir
  if ! { sql -e "CREATE DATABASE \`$db\`" && sql "$db" <"$old/sql/schema.sql"; }; then
    bad "$label: install the release schema"; return
  fi

  # Fill it through the release's library.
  if py "$old_lib" "$old_py" "$db" '
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
'; then ok "$label: filled through the release library"; else bad "$label: fill through the release library"; fi
  local before_tables=$OLD_TABLES
  [ "$oldv" -ge 2 ] && before_tables=$NEW_TABLES
  # shellcheck disable=SC2086
  dump "$db" $before_tables >"$old/before.txt"
  if awk '/^==/ { if (NR > 1 && !c) e = 1; c = 0; next } { c++ } END { exit e || !c }' "$old/before.txt"; then
    ok "$label: $(grep -vc '^==' "$old/before.txt") rows in all five tables"
  else
    bad "$label: too few rows to compare"; cat "$old/before.txt"
  fi

  # Today's library refuses it, naming the command.
  local out
  out=$(py "$new_lib" bindings/python "$db" '
try:
    rsv.Context(conn)
    print("opened")
except rsv.SchemaVersionError as e:
    print(e.message)
' 2>&1)
  if grep -q "schema version $oldv; this library needs version $SV" <<<"$out" && grep -q "mariadb $db < .*schema.sql" <<<"$out"; then
    ok "$label: today's library refuses it: $out"
  else
    bad "$label: today's library refuses it: $out"
  fi

  # rsv-admin sees it as a schema to upgrade, not to install.
  out=$(admin "$db" --json schema status)
  if python3 -c 'import json, sys; d = json.loads(sys.argv[1]); sys.exit(not (d["state"] == "upgrade-needed" and d["installed"] and d["schema_version"] == int(sys.argv[2])))' "$out" "$oldv"; then
    ok "$label: rsv-admin schema status: upgrade-needed, version $oldv"
  else
    bad "$label: rsv-admin schema status: $out"
  fi

  # The upgrade: today's file, on the data the release left, loaded by
  # the mariadb client or by rsv-admin.
  if [ "$loader" = rsv-admin ]; then
    admin "$db" schema install >/dev/null 2>&1
    if [ $? = 4 ]; then ok "$label: rsv-admin schema install refuses it"; else bad "$label: rsv-admin schema install does not refuse it"; fi
    if out=$(admin "$db" schema upgrade 2>&1); then ok "$label: rsv-admin schema upgrade"; else bad "$label: rsv-admin schema upgrade: $out"; fi
  elif sql "$db" <sql/schema.sql; then
    ok "$label: loaded today's sql/schema.sql"
  else
    bad "$label: load today's sql/schema.sql"
  fi
  # shellcheck disable=SC2086
  dump "$db" $NEW_TABLES >"$old/after.txt"
  if cmp -s "$old/before.txt" "$old/after.txt"; then
    ok "$label: every row of every table kept under the new names"
  else
    bad "$label: rows changed by the upgrade"; diff "$old/before.txt" "$old/after.txt" | head -20
  fi
  local units
  units=$(sql -N "$db" -e "SELECT COUNT(*), COALESCE(SUM(units = 1), 0) FROM rsv_pool")
  if [ "${units%%	*}" -gt 0 ] && [ "${units%%	*}" = "${units##*	}" ]; then
    ok "$label: every pool row carries its one unit"
  else
    bad "$label: pool rows and rows of one unit: $units"
  fi
  local left
  left=$(sql -N "$db" -e "SELECT GROUP_CONCAT(table_name) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name IN ('inventory_levels', 'reservation_units', 'reservation_checkouts', 'reserved_quantities', 'reservation_settlements', 'inventory_stock')")
  if [ "$left" = NULL ]; then ok "$label: no table or view of the old names left"; else bad "$label: left under the old names: $left"; fi
  local cols
  cols=$(sql -N "$db" -e "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND column_name IN ('item_id', 'location_id') AND table_name IN ('rsv_ledger', 'rsv_pool', 'rsv_holds', 'rsv_journal', 'rsv_stock')")
  if [ "$cols" = 10 ]; then ok "$label: columns item_id and location_id everywhere"; else bad "$label: columns renamed: $cols of 10"; fi
  local v
  v=$(sql -N "$db" -e "SELECT CONCAT(version, '/', oldest_library) FROM rsv_schema")
  if [ "$v" = "$SV/$SV" ]; then ok "$label: schema version $SV recorded"; else bad "$label: schema version: $v"; fi
  sql "$db" <sql/schema.sql
  # shellcheck disable=SC2086
  dump "$db" $NEW_TABLES >"$old/again.txt"
  if cmp -s "$old/after.txt" "$old/again.txt"; then ok "$label: loading it again changes nothing"; else bad "$label: loading it again changed rows"; fi

  # The old library no longer opens it, and touches nothing trying.
  out=$(py "$old_lib" "$old_py" "$db" '
try:
    rsv.Context(conn)
    print("opened")
except rsv.ReserveError as e:
    print(e.code, e.message)
' 2>&1)
  # shellcheck disable=SC2086
  dump "$db" $NEW_TABLES >"$old/old-open.txt"
  if { grep -q "^-15 .*inventory_levels is missing" <<<"$out" ||
       { [ "$oldv" -ge 2 ] && grep -q "^-25 .*upgrade the library" <<<"$out"; }; } &&
     cmp -s "$old/after.txt" "$old/old-open.txt"; then
    ok "$label: the release library's rsv_open fails and changes nothing"
  else
    bad "$label: the release library on the upgraded database: $out"
  fi

  # Today's library on the old data: the whole lifecycle.
  if py "$new_lib" bindings/python "$db" '
with rsv.Context(conn) as c:
    assert not c.audit(9)
    assert c.stock_get(9, 2, 1).on_hand == 50 - 6 * 2 - 3, c.stock_get(9, 2, 1)
    c.claim(9, b"held-0")
    c.release(9, b"held-1")
    c.claim(9, b"cart-1")
    c.reserve_one(9, b"new-1", 1, 1, 2)
    c.claim(9, b"new-1")
    c.reserve_one(9, b"new-2", 3, 2, 1)
    c.release(9, b"new-2")
    c.replenish(9, 3, 1)
    c.sweep(9)
    assert c.checkout_status(9, b"claimed-0").status == rsv.STATUS_CLAIMED
    assert c.checkout_status(9, b"held-1").status == rsv.STATUS_RELEASED
    assert c.checkout_status(9, b"held-2").status == rsv.STATUS_HELD
    assert c.checkout_status(9, b"expired-1").status == rsv.STATUS_EXPIRED
    assert c.stats(rsv.STAT_ONE_TRIP, rsv.OP_RESERVE) == 2, c.stats_dict()
    assert not c.audit(9)
assert conn.scalar_int("SELECT SUM(held) FROM rsv_stock WHERE shop_id = 9") > 0
'; then ok "$label: today's library works through the lifecycle on the old data"; else bad "$label: today's library on the upgraded data"; fi

  [ "$oldv" = 1 ] || return
  # The release's file loaded again by mistake: the version stays, its
  # library still refuses; today's library keeps its own procedures.
  sql "$db" <"$old/sql/schema.sql"
  v=$(sql -N "$db" -e "SELECT CONCAT(version, '/', oldest_library) FROM rsv_schema")
  out=$(py "$old_lib" "$old_py" "$db" '
try:
    rsv.Context(conn)
    print("opened")
except rsv.ReserveError as e:
    print(e.code, e.message)
' 2>&1)
  if [ "$v" = "$SV/$SV" ] && grep -q "^-25 .*upgrade the library" <<<"$out"; then
    ok "$label: its file loaded again lowers nothing; its library refuses (RSV_ESCHEMAVER)"
  else
    bad "$label: its file loaded again: version $v: $out"
  fi
  if py "$new_lib" bindings/python "$db" '
with rsv.Context(conn) as c:
    c.reserve_one(9, b"new-3", 1, 1, 1)
    c.claim(9, b"new-3")
    assert c.stats(rsv.STAT_ONE_TRIP, rsv.OP_RESERVE) == 1, c.stats_dict()
    assert not c.audit(9)
assert conn.scalar_int("SELECT COUNT(*) FROM rsv_checkouts WHERE checkout_token = %s" % "0x6e65772d33") == 1
'; then ok "$label: today's library still works in one round trip (its procedures have names of their own)"; else bad "$label: today's library after the release's file"; fi
}

upgrade_from v2 "$FROM_V2" bindings/python 2 mariadb
upgrade_from v1 "$FROM_V1" bindings/python 1 mariadb
upgrade_from v0 "$FROM_V0" examples/python 0 rsv-admin

finish
