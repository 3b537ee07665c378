#!/usr/bin/env bash
# tests/migrate-admin-test.sh - rsv-admin migrate against the server in
# RSV_TEST_SOCKET: show (text, --json, --prometheus), set by shop list
# with the refusals of unsafe steps (skipping shadow, primary before the
# shadow outlasted the longest hold, leaving complete; a refused list
# changes none of its shops), the versions each change takes (the
# handles read rows above the last version they saw), percent (a fixed
# order: raising keeps every shop in, lowering removes the newest), and
# mismatches read back from the sample ring; two rsv-admin processes
# changing stages at once (percent and set, several rounds) wait for each
# other: each change sees the other's rows, every changed row takes a
# version of its own; a change without the row it locks says what to do;
# and migrate show --prometheus against a real handle's
# rsv_migrate_prometheus(): the same families, types, labels and classes
# per shop (the handle's queue depth and failed stage reads are its
# process's and not stored).
#
# Creates its own database (sql/schema.sql) and drops it at the end.  Run
# by `make check`, or by hand:
#   make lib build/rsv-admin && tools/mariadb.sh run tests/migrate-admin-test.sh
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=tests/testlib.sh
. tests/testlib.sh migrate-admin-test
# shellcheck source=tests/admintest.sh
. tests/admintest.sh
load_schema || exit 1
stage() { q "SELECT COALESCE((SELECT stage FROM rsv_migration_stage WHERE shop_id = $1), 0)"; }

# ---- show, empty ----
run migrate show --json
expect "show: no shop yet" 0 'd["shops"] == []'

# ---- set by list; the refusals ----
run migrate set primary 11 --reason "too early"
expect_text "old -> primary refused (skips shadow)" 4 'skips shadow'
check "refused: nothing written" "$(q 'SELECT COUNT(*) FROM rsv_migration_stage')" 0
run migrate set shadow 11,12,13 --reason "first three"
expect_text "old -> shadow for three shops" 0 '3 shop\(s\) changed'
check "three versions, one each, in order" "$(q 'SELECT GROUP_CONCAT(version ORDER BY shop_id) FROM rsv_migration_stage')" "1,2,3"
check "reason kept" "$(q 'SELECT reason FROM rsv_migration_stage WHERE shop_id = 12')" "first three"
check "shadow_since set" "$(q 'SELECT COUNT(*) FROM rsv_migration_stage WHERE shadow_since IS NOT NULL')" 3
run migrate set shadow 11
expect_text "setting the same stage changes nothing" 0 'already shadow'
check "no new version" "$(q 'SELECT MAX(version) FROM rsv_migration_stage')" 3
run migrate set complete 11
expect_text "shadow -> complete refused (skips primary)" 4 'skips primary'
run migrate set primary 11
expect_text "primary before the longest TTL refused" 4 'longest hold.s TTL \(600 s\)'
# a hold longer than 600 s seen in the shop raises the bar
q "INSERT INTO rsv_holds VALUES (11, 'long', 1, 1, 1, 1, NOW(6) + INTERVAL 2 HOUR, NOW(6))"
run migrate set primary 11 --max-ttl 0
expect_text "the longest hold alive in libreserve counts" 4 'TTL \(7200 s\)'
q "DELETE FROM rsv_holds WHERE shop_id = 11"
# shadow began long enough ago for --max-ttl 5
q "UPDATE rsv_migration_stage SET shadow_since = NOW(6) - INTERVAL 10 SECOND WHERE shop_id IN (11, 12)"
run migrate set primary 11,13 --max-ttl 5
expect_text "one unsafe shop in a list refuses the list" 4 'shop 13 has been in shadow'
check "refused list: shop 11 still shadow" "$(stage 11)" 1
run migrate set primary 11,12 --max-ttl 5 --json
expect "shadow -> primary after the TTL" 0 'd["changed"] == 2 and all(s["to"] == "primary" for s in d["shops"])'
check "shadow_since kept across the step" "$(q 'SELECT COUNT(*) FROM rsv_migration_stage WHERE shop_id IN (11,12) AND shadow_since < NOW(6) - INTERVAL 9 SECOND')" 2
run migrate set shadow 12 --reason "kill switch"
expect_text "primary -> shadow (going back) allowed" 0 'primary -> shadow'
run migrate set complete 11
expect_text "primary -> complete" 0 'primary -> complete'
run migrate set shadow 11
expect_text "complete -> anything refused" 4 'no longer kept current'
run migrate set sideways 11
expect_text "unknown stage: usage" 2 'unknown stage'
run migrate set shadow 1,x
expect_text "bad shop list: usage" 2 'bad shop id'
run stock 1 1 1 --reason x
expect_text "--reason only with migrate" 2 'only apply to migrate'

# ---- show ----
q "INSERT INTO rsv_migration_counts VALUES (12, 'both_accepted', 40, NOW(6)), (12, 'unknown', 2, NOW(6))"
run migrate show 12,13 --json
expect "show --json: the shops asked, stage, counts" 0 '[s["shop_id"] for s in d["shops"]] == [12, 13] and d["shops"][0]["stage"] == "shadow" and d["shops"][0]["counts"] == {"both_accepted": 40, "unknown": 2} and d["shops"][0]["reason"] == "kill switch"'
run migrate show
expect_text "show: text" 0 '^11 +complete'
run migrate show --prometheus
expect_text "show --prometheus: stage gauge" 0 'libreserve_migration_stage\{shop="11"\} 3'
expect_text "show --prometheus: counts" 0 'libreserve_migration_calls_total\{shop="12",class="unknown"\} 2'
if python3 -c 'import prometheus_client' 2>/dev/null; then
  if python3 -c 'import sys
from prometheus_client.parser import text_string_to_metric_families
list(text_string_to_metric_families(sys.stdin.read()))' <<<"$out"; then ok "show --prometheus parses"; else bad "show --prometheus does not parse"; fi
fi

# ---- percent ----
q "INSERT INTO rsv_ledger (shop_id, item_id, location_id, on_hand) SELECT seq, 1, 1, 5 FROM seq_100_to_119"
# 23 shops: 20 with a ledger row, 11..13 with a stage row
run migrate percent 50 --json
expect "percent 50 of 23 shops" 0 'd["shops"] == 23 and d["in"] == 12'
in50=$(q "SELECT GROUP_CONCAT(shop_id ORDER BY shop_id) FROM rsv_migration_stage WHERE stage > 0")
run migrate percent 75 --json
expect "percent 75: more shops" 0 'd["in"] == 18'
in75=$(q "SELECT GROUP_CONCAT(shop_id ORDER BY shop_id) FROM rsv_migration_stage WHERE stage > 0")
kept=$(python3 -c 'import sys; a=set(sys.argv[1].split(",")); b=set(sys.argv[2].split(",")); print(int(a <= b))' "$in50" "$in75")
check "raising keeps every shop already in" "$kept" 1
run migrate percent 50 --json
expect "percent 50 again" 0 'd["in"] == 12'
check "lowering removes the newest: back to the same shops" "$(q "SELECT GROUP_CONCAT(shop_id ORDER BY shop_id) FROM rsv_migration_stage WHERE stage > 0")" "$in50"
check "lowering never touched the shops set by list" "$(q 'SELECT GROUP_CONCAT(stage ORDER BY shop_id) FROM rsv_migration_stage WHERE shop_id IN (11,12,13)')" "3,1,1"
vmax=$(q 'SELECT MAX(version) FROM rsv_migration_stage'); vn=$(q 'SELECT COUNT(DISTINCT version) FROM rsv_migration_stage')
check "every row's version distinct" "$vn" "$(q 'SELECT COUNT(*) FROM rsv_migration_stage')"
run migrate percent 50 --json
expect "percent 50 once more: nothing to do" 0 'd["changed"] == 0'
check "no new version" "$(q 'SELECT MAX(version) FROM rsv_migration_stage')" "$vmax"
run migrate percent 0
expect_text "percent 0: the set-by-list shops stay" 0 'set by list or are complete'
run migrate percent 101
expect_text "percent 101: usage" 2 '0 to 100'

# ---- mismatches ----
q "INSERT INTO rsv_migration_mismatch VALUES (12, 3, NOW(6), 'old_refused_new_accepted', 1, 1, 'tok-1', 7, 8, 2, -1, 0), (13, 0, NOW(6) - INTERVAL 1 SECOND, 'unknown', 2, 1, X'00FF', 0, 0, 0, 0, -2)"
run migrate mismatches --json
expect "mismatches --json: newest first, codes named" 0 'len(d["mismatches"]) == 2 and d["mismatches"][0]["token"] == "tok-1" and d["mismatches"][0]["old"] == "RSV_EOUTOFSTOCK" and d["mismatches"][0]["new"] == "RSV_OK" and d["mismatches"][1]["new"] == "RSV_ENOTFOUND"'
run migrate mismatches 13
expect_text "mismatches SHOP: a binary token in hex" 0 '0x00ff'
run migrate mismatches 12
expect_text "mismatches SHOP: only that shop" 0 '^1 mismatch'
# ---- compared ----
q "UPDATE rsv_migration_stage SET needs_compare = 1 WHERE shop_id IN (12, 13)"
run migrate show 12 --json
expect "show: needs_compare" 0 'd["shops"][0]["needs_compare"] is True'
run migrate compared 12,13,14 --json
expect "compared clears the marks" 0 'd["cleared"] == 2'
check "no shop marked" "$(q 'SELECT SUM(needs_compare) FROM rsv_migration_stage')" 0
run migrate
expect_text "migrate alone: usage" 2 'show, set, percent, mismatches, compare or compared'


# ---- two admins at once ----
# 400 shops of their own; each round starts two commands together.  They
# wait for each other on the row of rsv_migration_change, so the second
# sees what the first wrote: the work is done once, and every changed row
# took the next version (no version handed out twice).
q "DELETE FROM rsv_migration_stage; DELETE FROM rsv_ledger"
q "INSERT INTO rsv_ledger (shop_id, item_id, location_id, on_hand) SELECT seq, 1, 1, 5 FROM seq_1000_to_1399"
race() {
  "$ADMIN" "${conn[@]}" "$@" --json >"$tmp/race1" 2>&1 & local p1=$!
  "$ADMIN" "${conn[@]}" "$@" --json >"$tmp/race2" 2>&1 & local p2=$!
  wait "$p1"; rc1=$?; wait "$p2"; rc2=$?
  out="$(cat "$tmp/race1") / $(cat "$tmp/race2")"; err=
  changed=$(python3 -c 'import json,sys; print(sum(json.load(open(f)).get("changed", 0) for f in sys.argv[1:]))' "$tmp/race1" "$tmp/race2" 2>/dev/null)
}
raced_ok=1
for round in 1 2 3 4 5; do
  v0=$(q 'SELECT COALESCE(MAX(version), 0) FROM rsv_migration_stage')
  race migrate percent 50
  v1=$(q 'SELECT COALESCE(MAX(version), 0) FROM rsv_migration_stage')
  n_in=$(q 'SELECT COUNT(*) FROM rsv_migration_stage WHERE stage > 0')
  if [ "$rc1$rc2" != 00 ] || [ "$changed" != 200 ] || [ "$n_in" != 200 ] || [ $((v1 - v0)) != 200 ]; then
    raced_ok=0; bad "round $round: two percent 50 at once: exits $rc1 $rc2, changed $changed, in $n_in, versions +$((v1 - v0)) (want 0 0, 200, 200, +200)"; break
  fi
  race migrate percent 0
  v2=$(q 'SELECT COALESCE(MAX(version), 0) FROM rsv_migration_stage')
  n_in=$(q 'SELECT COUNT(*) FROM rsv_migration_stage WHERE stage > 0')
  if [ "$rc1$rc2" != 00 ] || [ "$changed" != 200 ] || [ "$n_in" != 0 ] || [ $((v2 - v1)) != 200 ]; then
    raced_ok=0; bad "round $round: two percent 0 at once: exits $rc1 $rc2, changed $changed, in $n_in, versions +$((v2 - v1)) (want 0 0, 200, 0, +200)"; break
  fi
done
[ "$raced_ok" = 1 ] && ok "two percent commands at once, 5 rounds: the work done once, one version per changed row"
list_a=$(seq -s, 1000 1149); list_b=$(seq -s, 1150 1299)
v0=$(q 'SELECT MAX(version) FROM rsv_migration_stage')
"$ADMIN" "${conn[@]}" migrate set shadow "$list_a" --json >"$tmp/race1" 2>&1 & p1=$!
"$ADMIN" "${conn[@]}" migrate set shadow "$list_b" --json >"$tmp/race2" 2>&1 & p2=$!
wait "$p1"; rc1=$?; wait "$p2"; rc2=$?
out="$(cat "$tmp/race1") / $(cat "$tmp/race2")"
check "two set commands at once: both done, 300 versions, none twice" "$rc1 $rc2 $(( $(q 'SELECT MAX(version) FROM rsv_migration_stage') - v0 )) $(q 'SELECT COUNT(DISTINCT version) = COUNT(*) FROM rsv_migration_stage')" "0 0 300 1"
check "each change that wrote counted on the locked row" "$(q 'SELECT changes > 0 FROM rsv_migration_change')" 1
q "DELETE FROM rsv_migration_change"
run migrate set shadow 1300
expect_text "without the row a change locks: says what to do" 3 'load sql/schema.sql again'
check "and changes nothing" "$(stage 1300)" 0
sql "$DB" <sql/schema.sql
run migrate set shadow 1300
expect_text "the schema loaded again: the change goes through" 0 '1 shop\(s\) changed'
check "shop 1300 at shadow" "$(stage 1300)" 1

# ---- the fleet's metrics under a handle's names ----
run migrate set shadow 2000
python3 - "$RSV_TEST_SOCKET" "$tmp/handle.prom" <<PY || bad "a migration handle in Python"
import os, sys, time
sys.path.insert(0, "bindings/python")
os.environ.setdefault("LIBRESERVE_PATH", os.path.abspath("${RSV_BUILD:-build}/libreserve.so"))
import libreserve as rsv
from libreserve.migrate import Migration, Stage
dsn = rsv.make_dsn("$DB", user="$USER_", password="$PASS_" or None, socket=sys.argv[1])
with rsv.connect(dsn) as ctx:
    ctx.stock_set(2000, 1, 1, 10)
    with Migration(ctx, dsn, legacy=lambda *a: None, refresh_ms=100) as m:
        for _ in range(3000):
            if m.stage(2000) == Stage.SHADOW:
                break
            time.sleep(0.01)
        m.reserve_one(2000, b"fleet-1", 1, 1, 1, 60000)
        m.drain()
        open(sys.argv[2], "w").write(m.prometheus())
PY
run migrate show 2000 --prometheus
printf '%s\n' "$out" >"$tmp/admin.prom"
cmp_out=$(python3 - "$tmp/handle.prom" "$tmp/admin.prom" <<'PY'
import re, sys
# the handle's own, not stored: only in its text
PROCESS_ONLY = {"libreserve_migration_queue_depth",
                "libreserve_migration_stage_read_failures_total"}
def parse(path):
    types, series = {}, set()
    for line in open(path):
        line = line.strip()
        m = re.match(r"# TYPE (\S+) (\S+)$", line)
        if m:
            types[m.group(1)] = m.group(2)
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+$", line)
        if not m:
            sys.exit("unparsed line in %s: %s" % (path, line))
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if labels.get("shop", "2000") != "2000":
            continue
        series.add((m.group(1), tuple(sorted((k, v if k == "class" else "*")
                                             for k, v in labels.items()))))
    return types, series
ht, hs = parse(sys.argv[1])
at, as_ = parse(sys.argv[2])
problems = []
for f in sorted(set(ht) | set(at)):
    if f in PROCESS_ONLY:
        if f in at:
            problems.append("%s is the handle's own, not stored" % f)
        continue
    if ht.get(f) != at.get(f):
        problems.append("family %s: handle %s, rsv-admin %s" % (f, ht.get(f), at.get(f)))
hs = {x for x in hs if x[0] not in PROCESS_ONLY}
for x in sorted(hs - as_):
    problems.append("only the handle has %s %s" % x)
for x in sorted(as_ - hs):
    problems.append("only rsv-admin has %s %s" % x)
if not any(n == "libreserve_migration_calls_total" for n, _ in hs):
    problems.append("the handle counted nothing for shop 2000")
print("; ".join(problems) or "same")
PY
)
check "show --prometheus: a handle's families, types, labels and classes for the shop" "$cmp_out" same
check "the counts of the handle arrived (both_accepted)" "$(grep -c 'libreserve_migration_calls_total{shop="2000",class="both_accepted"} 1$' "$tmp/admin.prom")" 1

finish
