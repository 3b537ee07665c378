#!/usr/bin/env bash
# tests/migrate-import-test.sh - rsv-admin import against the server in
# RSV_TEST_SOCKET: stock levels from a CSV file and from a query on the
# application's own table; a second run changes nothing; levels that
# differ are set through the library (a pool there shrinks; the audit
# clean after); bad rows are refused with their line and reason and
# nothing is applied; an import killed with SIGKILL part way resumes
# where its last chunk committed and ends with every level right.
#
# Creates its own database (sql/schema.sql) and drops it at the end.  Run
# by `make check`, or by hand:
#   make lib build/rsv-admin && tools/mariadb.sh run tests/migrate-import-test.sh
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=tests/testlib.sh
. tests/testlib.sh migrate-import-test
# shellcheck source=tests/admintest.sh
. tests/admintest.sh
bg=
cleanup_extra() { [ -n "$bg" ] && kill -9 "$bg" 2>/dev/null; }
load_schema || exit 1
# the levels as a checksum: shop, item, location, on hand of every row
levels() { q "SELECT COUNT(*), COALESCE(SUM(shop_id * 1000003 + item_id * 1009 + location_id * 17 + on_hand), 0) FROM rsv_stock"; }

# ---- a CSV file ----
python3 - "$tmp/stock.csv" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("shop_id,item_id,location_id,on_hand\n")
    for shop in (1, 2):
        for item in range(1, 1501):
            f.write("%d,%d,%d,%d\n" % (shop, item, 1 + item % 3, (item * 7) % 50))
PY
run import --csv "$tmp/stock.csv" --chunk 400 --json
expect "csv: 3000 new levels" 0 'd["rows"] == 3000 and d["new"] == 3000 and d["changed"] == 0'
check "csv: the levels are in the ledger" "$(q 'SELECT COUNT(*), SUM(on_hand) FROM rsv_stock')" "$(python3 -c 'print("3000\t%d" % (2 * sum((i * 7) % 50 for i in range(1, 1501))))')"
expect_text "csv: progress printed" 0 'import: 3000/3000 rows \(100%\)'
before=$(levels)
run import --csv "$tmp/stock.csv" --json
expect "csv again: nothing changes" 0 'd["new"] == 0 and d["changed"] == 0 and d["unchanged"] == 3000'
check "csv again: the same levels" "$(levels)" "$before"

# ---- a level that differs goes through the library: pool and hold ----
"$ADMIN" "${conn[@]}" replenish 1 10 2 >/dev/null
python3 - "$tmp/changed.csv" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("1,10,2,3\n1,11,3,49\n9,1,1,5\n")
PY
run import --csv "$tmp/changed.csv" --json
expect "changed levels through rsv_stock_set, one new" 0 'd["changed"] == 2 and d["new"] == 1'
check "changed level" "$(q 'SELECT on_hand FROM rsv_stock WHERE shop_id = 1 AND item_id = 10 AND location_id = 2')" 3
check "the pool shrank with it" "$(q 'SELECT pooled <= 3 FROM rsv_stock WHERE shop_id = 1 AND item_id = 10 AND location_id = 2')" 1
if "$ADMIN" "${conn[@]}" audit --all >"$tmp/audit" 2>&1; then ok "audit clean after the import"; else out=$(cat "$tmp/audit"); err=; bad "audit after the import"; fi

# ---- bad rows: refused with line and reason, nothing applied ----
before=$(levels)
printf '5,1,1,10\n5,2,1,-3\n5,x,1,4\n5,3,1\n5,1,1,11\n' >"$tmp/bad.csv"
run import --csv "$tmp/bad.csv"
expect_text "bad rows: refused" 2 '4 bad row\(s\); nothing imported'
expect_text "bad rows: a negative level named by its line" 2 'line 2: on_hand is negative'
expect_text "bad rows: a bad id" 2 'line 3: item_id is not an unsigned integer'
expect_text "bad rows: a short row" 2 'line 4: 3 fields'
expect_text "bad rows: a key twice" 2 'line 5: the key is also on line 1'
check "bad rows: nothing applied" "$(levels)" "$before"

# ---- a query on the application's own table ----
q "CREATE TABLE app_stock (shop INT, sku INT, warehouse INT, qty INT, PRIMARY KEY (shop, sku, warehouse))"
q "INSERT INTO app_stock SELECT 3, seq, 1, seq % 20 FROM seq_1_to_500"
run import --query "SELECT shop, sku, warehouse, qty FROM app_stock ORDER BY shop, sku, warehouse" --json
expect "query: 500 new levels" 0 'd["new"] == 500'
check "query: the levels" "$(q 'SELECT COUNT(*), SUM(on_hand) FROM rsv_stock WHERE shop_id = 3')" "$(q 'SELECT COUNT(*), SUM(qty) FROM app_stock')"
run import --query "SELECT shop, sku, qty FROM app_stock"
expect_text "query: a row of 3 columns refused" 2 'line 1: 3 fields'

# ---- killed part way, resumed ----
python3 - "$tmp/big.csv" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    for item in range(1, 20001):
        f.write("7,%d,1,%d\n" % (item, item % 100))
PY
"$ADMIN" "${conn[@]}" import --csv "$tmp/big.csv" --chunk 200 --rate 4000 >"$tmp/bg.out" 2>&1 &
bg=$!
for _ in $(seq 100); do
  done_=$(q "SELECT COALESCE(MAX(rows_done), 0) FROM rsv_import_progress WHERE source LIKE '%big.csv'")
  [ "${done_:-0}" -ge 2000 ] && break
  sleep 0.1
done
kill -9 "$bg"; wait "$bg" 2>/dev/null; bg=
done_=$(q "SELECT rows_done FROM rsv_import_progress WHERE source LIKE '%big.csv'")
inled=$(q "SELECT COUNT(*) FROM rsv_ledger WHERE shop_id = 7")
if [ "$done_" -gt 0 ] && [ "$done_" -lt 20000 ]; then ok "killed part way: $done_ of 20000 rows recorded"; else out=$done_; err=; bad "killed part way"; fi
check "what was recorded is what is in the ledger" "$inled" "$done_"
run import --csv "$tmp/big.csv" --chunk 200 --json
expect "resumed where it stopped" 0 "d['resumed_at'] == $done_ and d['new'] == 20000 - $done_"
expect_text "resume said so" 0 "resuming .* at row $done_"
check "every level right after the resume" "$(q 'SELECT COUNT(*), SUM(on_hand) FROM rsv_stock WHERE shop_id = 7')" "$(python3 -c 'print("20000\t%d" % sum(i % 100 for i in range(1, 20001)))')"
check "progress: finished" "$(q "SELECT rows_done = rows_total AND finished_at IS NOT NULL FROM rsv_import_progress WHERE source LIKE '%big.csv'")" 1
run import --csv "$tmp/big.csv" --json
expect "a finished import run again checks every row, changes nothing" 0 'd["resumed_at"] == 0 and d["new"] == 0 and d["changed"] == 0'

run import
expect_text "import without a source: usage" 2 'needs --csv FILE or --query SQL'
run stock 1 1 1 --csv x
expect_text "--csv only with import" 2 'only apply to import and migrate compare'

finish
