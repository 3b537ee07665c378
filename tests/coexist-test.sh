#!/usr/bin/env bash
# tests/coexist-test.sh - the schema beside an application's own tables of
# the names libreserve used before version 2 (inventory_levels as Shopify
# names it, reservation_units, reservation_checkouts, reserved_quantities,
# reservation_settlements, and a table inventory_stock), with rows:
#   - rsv-admin schema install loads sql/schema.sql there, and a checkout's
#     whole life runs (stock, reserve, claim, release, expiry and sweep);
#   - the file loaded again (the mariadb client) changes nothing of theirs;
#   - the application's tables are unchanged, definition, rows and
#     checksum, and rsv-admin schema status reports the header's schema
#     version, ok;
#   - the check can fail: the unversioned release's file (commit $OLD,
#     from the git history; skipped without it) in the same place fails or
#     changes the application's tables.
# Against the server in RSV_TEST_SOCKET (make check, or
#   tools/mariadb.sh run tests/coexist-test.sh).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OLD=${RSV_COEXIST_OLD:-ad76e84}
build=${RSV_BUILD:-build}
ADMIN=${RSV_ADMIN_BIN:-$build/rsv-admin}
# shellcheck source=tests/testlib.sh
. tests/testlib.sh coexist
cleanup_extra() { sql -e "DROP DATABASE IF EXISTS \`${DB}_old\`" >/dev/null 2>&1 || true; }

APP_TABLES="inventory_levels reservation_units reservation_checkouts reserved_quantities reservation_settlements inventory_stock"

# app_tables DB: the application's tables and rows.  Its reserved_quantities
# shares some of libreserve's old columns, so that only all of them together
# mark a table as libreserve's.
app_tables() {
  sql "$1" <<'SQL'
CREATE TABLE inventory_levels (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  inventory_item_id BIGINT UNSIGNED NOT NULL,
  location_id BIGINT UNSIGNED NOT NULL,
  available INT NOT NULL,
  updated_at DATETIME NOT NULL,
  UNIQUE KEY item_location (inventory_item_id, location_id)
) ENGINE=InnoDB;
INSERT INTO inventory_levels (inventory_item_id, location_id, available, updated_at)
  VALUES (808950810, 905684977, 6, '2024-01-02 10:00:00'),
         (808950810, 487838322, 3, '2024-01-02 10:00:00'),
         (39072856, 905684977, 0, '2024-01-03 11:30:00');
CREATE TABLE reservation_units (id INT PRIMARY KEY, name VARCHAR(40)) ENGINE=InnoDB;
INSERT INTO reservation_units VALUES (1, 'table for two'), (2, 'terrace');
CREATE TABLE reservation_checkouts (
  id INT PRIMARY KEY, checkout_token VARCHAR(64), guest VARCHAR(40)) ENGINE=InnoDB;
INSERT INTO reservation_checkouts VALUES (1, 'tok-a', 'Ada'), (2, 'tok-b', 'Grace');
CREATE TABLE reserved_quantities (
  id INT PRIMARY KEY, inventory_item_id BIGINT, inventory_group_id BIGINT,
  generation INT, quantity INT) ENGINE=InnoDB;
INSERT INTO reserved_quantities VALUES (1, 808950810, 905684977, 1, 2);
CREATE TABLE reservation_settlements (id INT PRIMARY KEY, amount DECIMAL(10,2)) ENGINE=InnoDB;
INSERT INTO reservation_settlements VALUES (1, 19.90), (2, 5.00);
CREATE TABLE inventory_stock (sku VARCHAR(20) PRIMARY KEY, qty INT) ENGINE=InnoDB;
INSERT INTO inventory_stock VALUES ('HOODIE-M', 12), ('MUG', 40);
SQL
}

# app_state DB: definition, row count and checksum of each of them.
app_state() {
  local t
  for t in $APP_TABLES; do
    sql -N "$1" -e "SHOW CREATE TABLE $t" 2>&1
    sql -N "$1" -e "SELECT COUNT(*) FROM $t; CHECKSUM TABLE $t EXTENDED" 2>&1
  done
}

sql -e "CREATE DATABASE \`$DB\`" && app_tables "$DB" || exit 1
app_state "$DB" >"$tmp/before.txt"

if out=$("$ADMIN" --no-defaults --socket "$RSV_TEST_SOCKET" --user "${RSV_TEST_USER:-root}" --database "$DB" schema install 2>&1); then
  ok "rsv-admin schema install beside the application's tables"
else
  bad "rsv-admin schema install beside the application's tables: $out"
fi

if LIBRESERVE_PATH=$PWD/$build/libreserve.so PYTHONDONTWRITEBYTECODE=1 python3 - "$RSV_TEST_SOCKET" "${RSV_TEST_USER:-root}" "${RSV_TEST_PASSWORD:-}" "$DB" <<'PY'
import sys, time
sock, user, pw, db = sys.argv[1:]
sys.path.insert(0, "bindings/python")
import libreserve as rsv
conn = rsv.Connection(unix_socket=sock, user=user, password=pw or None, db=db)
with rsv.Context(conn) as c:
    c.stock_set(1, 808950810, 905684977, 10)
    c.reserve_one(1, b"paid", 808950810, 905684977, 2)
    c.reserve_one(1, b"failed", 808950810, 905684977, 1)
    c.reserve_one(1, b"abandoned", 808950810, 905684977, 3, ttl_ms=1)
    c.claim(1, b"paid")
    c.release(1, b"failed")
    time.sleep(0.05)
    c.sweep(1)
    assert c.checkout_status(1, b"abandoned").status == rsv.STATUS_EXPIRED
    s = c.stock_get(1, 808950810, 905684977)
    assert (s.on_hand, s.held) == (8, 0), s
    assert c.stats(rsv.STAT_ONE_TRIP, rsv.OP_RESERVE) == 3, c.stats_dict()
    assert not c.audit(1)
conn.close()
PY
then ok "a checkout's whole life (stock, reserve, claim, release, expiry, sweep)"; else bad "a checkout's whole life"; fi

if sql "$DB" <sql/schema.sql; then ok "sql/schema.sql loaded again"; else bad "sql/schema.sql loaded again"; fi
app_state "$DB" >"$tmp/after.txt"
if cmp -s "$tmp/before.txt" "$tmp/after.txt"; then
  ok "the application's tables unchanged: definitions, row counts, checksums"
else
  bad "the application's tables changed"; diff "$tmp/before.txt" "$tmp/after.txt" | head -20
fi
out=$("$ADMIN" --no-defaults --socket "$RSV_TEST_SOCKET" --user "${RSV_TEST_USER:-root}" --database "$DB" --json schema status 2>&1)
sv=$(sed -n 's/^#define RSV_SCHEMA_VERSION \([0-9]*\).*/\1/p' include/reserve.h)
if python3 -c 'import json, sys; d = json.loads(sys.argv[1]); v = int(sys.argv[2]); sys.exit(not (d["state"] == "ok" and d["schema_version"] == v and d["oldest_library"] == v))' "$out" "$sv"; then
  ok "rsv-admin schema status: version $sv, ok"
else
  bad "rsv-admin schema status: $out"
fi

# The check can fail: the unversioned release's file, whose tables had
# these names, in the same place.
if git rev-parse --verify -q "$OLD^{commit}" >/dev/null 2>&1; then
  sql -e "CREATE DATABASE \`${DB}_old\`" && app_tables "${DB}_old" || exit 1
  if git show "$OLD:sql/schema.sql" | sql "${DB}_old" >"$tmp/old.log" 2>&1; then loaded=loaded; else loaded=failed; fi
  app_state "${DB}_old" >"$tmp/old.txt"
  if [ $loaded = failed ] || ! cmp -s "$tmp/before.txt" "$tmp/old.txt"; then
    ok "the release's file ($OLD) there fails or changes them ($loaded: $(grep -m1 "^ERROR" "$tmp/old.log"))"
  else
    bad "the release's file ($OLD) loaded beside the application's tables without a trace: the check cannot fail"
  fi
else
  echo "coexist-test: commit $OLD is not in this checkout's history: the failing case is not shown"
fi

finish
