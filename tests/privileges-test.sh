#!/usr/bin/env bash
# tests/privileges-test.sh - the documented grants, exactly (README,
# "Privileges"): an installing account with only its grants loads the
# schema, loads it again, and upgrades a database of schema version 1
# (renaming its tables), each of those grants is needed (ALTER for that
# upgrade), a runtime account with only its grants runs a checkout's whole
# life through the library in one round trip per reserve and claim, and
# nothing depends on the installing account once it is dropped (the
# procedures and the view run with the caller's rights).
#
# Against the server in RSV_TEST_SOCKET (make check, or
#   tools/mariadb.sh run tests/privileges-test.sh); the library is
# $RSV_BUILD/libreserve.so (default build), through the Python binding.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=tests/testlib.sh
. tests/testlib.sh privileges
build=${RSV_BUILD:-build}

INST=rsv_inst_$$
RUN=rsv_run_$$
PW=pw-$$
# The grants of README "Privileges", word for word.
INSTALL_PRIVS=(SELECT INSERT UPDATE CREATE DROP ALTER "CREATE VIEW" "CREATE ROUTINE" "ALTER ROUTINE")
RUNTIME_GRANT="SELECT, INSERT, UPDATE, DELETE, EXECUTE"

as() { local u=$1; shift; MYSQL_PWD=$PW "$client" --no-defaults --socket="$RSV_TEST_SOCKET" -u"$u" "$@"; }
cleanup_extra() {
  sql -e "DROP DATABASE IF EXISTS \`${DB}x\`; DROP DATABASE IF EXISTS \`${DB}v\`; DROP USER IF EXISTS '$INST'@'localhost', '$RUN'@'localhost', '${INST}x'@'localhost'" >/dev/null 2>&1 || true
}

join() { local IFS=,; echo "$*"; }

sql -e "CREATE DATABASE \`$DB\`; CREATE USER '$INST'@'localhost' IDENTIFIED BY '$PW'; CREATE USER '$RUN'@'localhost' IDENTIFIED BY '$PW'; GRANT $(join "${INSTALL_PRIVS[@]}") ON \`$DB\`.* TO '$INST'@'localhost'; GRANT $RUNTIME_GRANT ON \`$DB\`.* TO '$RUN'@'localhost'" || exit 1

# version1 DB: a database as schema version 1 left it, made from today's
# file (the same tables and rows under the names of version 1), so that
# this test needs no older release.
version1() {
  sql "$1" <sql/schema.sql &&
  sql "$1" -e "INSERT INTO rsv_ledger (shop_id, item_id, location_id, on_hand) VALUES (1, 1, 1, 5);
    RENAME TABLE rsv_ledger TO inventory_levels, rsv_pool TO reservation_units,
      rsv_checkouts TO reservation_checkouts, rsv_holds TO reserved_quantities,
      rsv_journal TO reservation_settlements;
    ALTER TABLE inventory_levels RENAME COLUMN item_id TO inventory_item_id, RENAME COLUMN location_id TO inventory_group_id;
    ALTER TABLE reservation_units RENAME COLUMN item_id TO inventory_item_id, RENAME COLUMN location_id TO inventory_group_id, DROP COLUMN units;
    ALTER TABLE reservation_checkouts RENAME INDEX rsv_checkouts_settled TO reservation_checkouts_settled;
    ALTER TABLE reserved_quantities RENAME COLUMN item_id TO inventory_item_id, RENAME COLUMN location_id TO inventory_group_id, RENAME INDEX rsv_holds_expiry TO reserved_quantities_expiry;
    ALTER TABLE reservation_settlements RENAME COLUMN item_id TO inventory_item_id, RENAME COLUMN location_id TO inventory_group_id;
    DROP VIEW rsv_stock; UPDATE rsv_schema SET version = 1, oldest_library = 1"
}

if as "$INST" "$DB" <sql/schema.sql; then ok "installing account loads the schema"; else bad "installing account loads the schema"; fi
if as "$INST" "$DB" <sql/schema.sql; then ok "installing account loads it again (upgrade path)"; else bad "installing account loads it again"; fi
sql -e "CREATE DATABASE \`${DB}v\`; GRANT $(join "${INSTALL_PRIVS[@]}") ON \`${DB}v\`.* TO '$INST'@'localhost'" && version1 "${DB}v" || exit 1
if as "$INST" "${DB}v" <sql/schema.sql &&
   [ "$(sql -N "${DB}v" -e "SELECT CONCAT(version, ' ', (SELECT on_hand FROM rsv_ledger)) FROM rsv_schema")" = "3 5" ]; then
  ok "installing account upgrades a database of version 1"
else
  bad "installing account upgrades a database of version 1"
fi

# Each installing grant is needed: without it, loading into a fresh
# database fails (and says why); ALTER is needed by the upgrade of a
# database of version 1 only, which fails without it and changes nothing.
for drop in "${INSTALL_PRIVS[@]}"; do
  less=()
  for p in "${INSTALL_PRIVS[@]}"; do [ "$p" = "$drop" ] || less+=("$p"); done
  sql -e "DROP DATABASE IF EXISTS \`${DB}x\`; CREATE DATABASE \`${DB}x\`; DROP USER IF EXISTS '${INST}x'@'localhost'; CREATE USER '${INST}x'@'localhost' IDENTIFIED BY '$PW'; GRANT $(join "${less[@]}") ON \`${DB}x\`.* TO '${INST}x'@'localhost'" || exit 1
  what="loading"
  if [ "$drop" = ALTER ]; then
    if as "${INST}x" "${DB}x" <sql/schema.sql >/dev/null 2>&1; then ok "a fresh database does without ALTER"; else bad "a fresh database does without ALTER"; fi
    sql -e "DROP DATABASE \`${DB}x\`; CREATE DATABASE \`${DB}x\`" && version1 "${DB}x" || exit 1
    what="upgrading version 1"
  fi
  if as "${INST}x" "${DB}x" <sql/schema.sql >/dev/null 2>&1; then
    bad "$what without $drop fails"
  elif [ "$drop" = ALTER ] && [ "$(sql -N "${DB}x" -e "SELECT version FROM rsv_schema; SELECT COUNT(*) FROM inventory_levels")" != "$(printf '1\n1')" ]; then
    bad "$what without $drop fails and changes nothing"
  else
    ok "$what without $drop fails"
  fi
  sql -e "DROP DATABASE \`${DB}x\`; DROP USER '${INST}x'@'localhost'"
done

sql -e "DROP USER '$INST'@'localhost'" || exit 1
ok "installing account dropped"

# The runtime account: a checkout's whole life, and the view.
if python3 - "$RSV_TEST_SOCKET" "$RUN" "$PW" "$DB" "$build" <<'PY'
import os, sys
sock, user, pw, db, build = sys.argv[1:]
sys.path.insert(0, "bindings/python")
os.environ["LIBRESERVE_PATH"] = os.path.abspath(os.path.join(build, "libreserve.so"))
import libreserve as rsv
conn = rsv.Connection(unix_socket=sock, user=user, password=pw, db=db)
with rsv.Context(conn) as c:
    c.stock_set(7, 1, 1, 10)
    c.reserve_one(7, b"a", 1, 1, 2)
    c.reserve_one(7, b"b", 1, 1, 1)
    assert c.checkout_status(7, b"a").status == rsv.STATUS_HELD
    c.extend(7, b"a")
    c.claim(7, b"a")
    c.release(7, b"b")
    c.replenish(7, 1, 1)
    c.sweep(7)
    c.pool_drain(7, 1, 1)
    assert c.stock_get(7, 1, 1).on_hand == 8, c.stock_get(7, 1, 1)
    assert not c.audit(7)
    # the procedures ran (one round trip), not a silent fallback
    assert c.stats(rsv.STAT_ONE_TRIP, rsv.OP_RESERVE) == 2, c.stats_dict()
    assert c.stats(rsv.STAT_STATEMENTS, rsv.OP_CLAIM) == 1, \
        c.stats(rsv.STAT_STATEMENTS, rsv.OP_CLAIM)
assert conn.scalar_int("SELECT on_hand FROM rsv_stock "
                       "WHERE shop_id = 7") == 8
conn.close()
PY
then ok "runtime account: reserve, claim, release, sweep, audit, the view"; else bad "runtime account lifecycle"; fi

# The runtime account cannot change the schema.
if as "$RUN" "$DB" -e "DROP TABLE rsv_pool" 2>/dev/null; then bad "runtime account cannot drop tables"; else ok "runtime account cannot drop tables"; fi

finish
