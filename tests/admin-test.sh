#!/usr/bin/env bash
# tests/admin-test.sh - exercises every rsv-admin command and option
# against the server in RSV_TEST_SOCKET: output, --json documents,
# Prometheus text (read back with the Prometheus project's Python parser,
# python3-prometheus-client, installed here when missing and run as root),
# exit codes, the short connection options, the schema commands (status
# of every state, install, upgrade, their refusals, a file that fails part
# way), and the man page (it renders; install-admin installs it and
# uninstall-admin removes it).
#
# Creates its own databases (one with sql/schema.sql, an empty one, one
# the schema commands install into, upgrade and break, one for a failing
# file) and drops them at the end, and users without DELETE (to see a
# sweep fail) and without EXECUTE (procedures it cannot execute), dropped
# too.
# Holds are made through the library itself (tests/rsvctl.py, Python
# ctypes calling $RSV_BUILD/libreserve.so), so the tool is tested on
# states the library really produces.  Run by `make
# check`, or by hand:
#   make lib build/rsv-admin && tools/mariadb.sh run tests/admin-test.sh
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

ADMIN=${RSV_ADMIN_BIN:-${RSV_BUILD:-build}/rsv-admin}
: "${RSV_TEST_SOCKET:?RSV_TEST_SOCKET is not set: run via tools/mariadb.sh run}"
[ -x "$ADMIN" ] || { echo "admin-test: $ADMIN is not built (make $ADMIN)" >&2; exit 1; }
USER_=${RSV_TEST_USER:-root}
PASS_=${RSV_TEST_PASSWORD:-}
client=$(command -v mariadb || command -v mysql) || { echo "admin-test: no mariadb client" >&2; exit 1; }

DB=rsv_admin_test_$$
EMPTY_DB=rsv_admin_empty_$$
NODEL_USER=rsv_admin_nodel_$$
SCH_DB=rsv_admin_schema_$$
BAD_DB=rsv_admin_bad_$$
NOEXEC_USER=rsv_admin_noexec_$$
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rsv-admin-test.XXXXXX")
sql() { MYSQL_PWD=$PASS_ "$client" --no-defaults --socket="$RSV_TEST_SOCKET" -u"$USER_" "$@"; }
cleanup() {
  sql -e "DROP DATABASE IF EXISTS \`$DB\`; DROP DATABASE IF EXISTS \`$EMPTY_DB\`; DROP DATABASE IF EXISTS \`$SCH_DB\`; DROP DATABASE IF EXISTS \`$BAD_DB\`; DROP USER IF EXISTS '$NODEL_USER'@'localhost'; DROP USER IF EXISTS '$NOEXEC_USER'@'localhost'" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
sql -e "DROP DATABASE IF EXISTS \`$DB\`; CREATE DATABASE \`$DB\`; CREATE DATABASE \`$EMPTY_DB\`" || exit 1
sql "$DB" <sql/schema.sql || exit 1

conn=(--no-defaults --socket "$RSV_TEST_SOCKET" --user "$USER_" --database "$DB")
export RSV_ADMIN_PASSWORD=$PASS_

pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; echo "     stdout: $out"; echo "     stderr: $err"; }

# run ARGS...: rsv-admin with the connection flags; sets out, err, rc.
run() {
  out=$("$ADMIN" "${conn[@]}" "$@" 2>"$tmp/err"); rc=$?
  err=$(cat "$tmp/err")
}
# run_raw ARGS...: without the connection flags.
run_raw() {
  out=$("$ADMIN" "$@" 2>"$tmp/err"); rc=$?
  err=$(cat "$tmp/err")
}
# expect DESC RC [PYTHON-EXPR [REF]]: the expression sees d, the parsed
# JSON stdout, and r, the parsed JSON document REF (default null).
expect() {
  local desc=$1 want=$2 expr=${3:-} ref=${4:-null}
  if [ "$rc" != "$want" ]; then bad "$desc: exit $rc, want $want"; return; fi
  if [ -n "$expr" ]; then
    if ! python3 -c 'import json,sys; d=json.loads(sys.argv[1]); r=json.loads(sys.argv[2]); sys.exit(0 if ('"$expr"') else 1)' "$out" "$ref" 2>"$tmp/py"; then
      bad "$desc: JSON check failed: $expr $(cat "$tmp/py")"; return
    fi
  fi
  ok "$desc"
}
# expect_text DESC RC REGEX (matched against stdout + stderr)
expect_text() {
  local desc=$1 want=$2 re=$3
  if [ "$rc" != "$want" ]; then bad "$desc: exit $rc, want $want"; return; fi
  # A here-string, not a pipe: grep -q stops reading at the first match,
  # and under pipefail a writer cut short by it would count as a failure.
  if ! grep -Eq -- "$re" <<<"$out"$'\n'"$err"; then bad "$desc: no match for /$re/"; return; fi
  ok "$desc"
}

# lib CMD ARGS: reserve/claim/release through libreserve itself.
lib() { python3 tests/rsvctl.py "$@"; }
export DB

# ---- usage and exit code 2 ----
run_raw --help
expect_text "--help" 0 "Exit status"
run_raw --version
expect_text "--version" 0 "libreserve [0-9]+\.[0-9]+"
run_raw
expect "no command" 2
run frobnicate 1
expect_text "unknown command" 2 "unknown command 'frobnicate'"
run stock 1 2
expect_text "missing argument" 2 "takes 3 argument"
run stock x 1 1
expect_text "bad shop id" 2 "bad shop id 'x'"
run stock 1 -2 1
expect_text "negative item id" 2 "bad item id"
run --frob stock 1 1 1
expect_text "unknown option" 2 "unknown option '--frob'"
run levels 1 --max 5
expect_text "--max outside sweep" 2 "--max only applies to sweep"
run audit 1 --all
expect "audit with SHOP and --all" 2
run audit
expect "audit without SHOP" 2
run set-stock 1 10 1 lots
expect_text "bad stock value" 2 "bad stock value"
run checkout 1 zz --hex
expect_text "bad hex token" 2 "bad hexadecimal token"
run release 1 zz --hex
expect_text "release: bad hex token" 2 "bad hexadecimal token"
run release 1
expect_text "release without TOKEN" 2 "release takes 2 argument"
run claim x tok
expect_text "claim: bad shop id" 2 "bad shop id 'x'"
run levels 1 --hex
expect_text "--hex outside checkout/release/claim" 2 "--hex only applies to checkout, release and claim"
run stock 1 1 1 --all
expect_text "--all outside audit/sweep/stats" 2 "--all only applies to audit, sweep and stats"
run sweep
expect_text "sweep without SHOP" 2 "sweep needs a SHOP or --all"
run sweep 1 --all
expect_text "sweep with SHOP and --all" 2 "give a SHOP or --all, not both"
run stats
expect_text "stats without SHOP" 2 "stats needs a SHOP or --all"
run stats 1 --all
expect "stats with SHOP and --all" 2
run stats x
expect_text "stats: bad shop id" 2 "bad shop id 'x'"
run stock 1 1 1 --prometheus
expect_text "--prometheus outside stats" 2 "--prometheus only applies to stats"
run stats 1 --json --prometheus
expect_text "--json with --prometheus" 2 "not both"
# short options (those of the mariadb client)
run_raw -x stock 1 1 1
expect_text "unknown short option" 2 "unknown option '-x'"
run_raw --no-defaults -S
expect_text "-S without a value" 2 "a value is missing for '-S'"
run_raw -h
expect_text "-h alone: the host, and where help is" 2 "help is --help"
run_raw --no-defaults -p stock 1 1 1
expect_text "a lone -p is refused, never prompts" 2 "-p takes the password attached"
run_raw --no-defaults -P 0 stock 1 1 1
expect_text "-P 0" 2 "bad port '0'"
run_raw --no-defaults -Pabc stock 1 1 1
expect_text "-Pabc (attached)" 2 "bad port 'abc'"

# ---- connection and library errors: exit 3 ----
run_raw --no-defaults --socket "$tmp/no-such.sock" --user "$USER_" --database "$DB" stock 1 1 1
expect_text "no server" 3 "cannot connect"
run_raw --no-defaults --socket "$tmp/no-such.sock" --database "$DB" --json stock 1 1 1
expect "no server, --json error document" 3 'd["error"]["name"] == "RSV_ECONN"'
RSV_ADMIN_PASSWORD=wrong-password run stock 1 1 1
expect_text "wrong password from RSV_ADMIN_PASSWORD" 3 "Access denied"
run_raw --no-defaults --socket "$RSV_TEST_SOCKET" --user "$USER_" --database "$EMPTY_DB" stock 1 1 1
expect_text "schema not loaded" 3 "RSV_ESCHEMA.*rsv_ledger"
run_raw --no-defaults --socket "$RSV_TEST_SOCKET" --user "$USER_" --database "$EMPTY_DB" --json levels 1
expect "schema not loaded, --json" 3 'd["error"]["name"] == "RSV_ESCHEMA"'
run_raw --no-defaults -S "$RSV_TEST_SOCKET" -u "$USER_" -D "$EMPTY_DB" stock 1 1 1
expect_text "-S -u -D reach the server (schema not loaded there)" 3 "RSV_ESCHEMA"
run_raw --no-defaults -S "$RSV_TEST_SOCKET" -u "$USER_" -pwrong-password -D "$DB" stock 1 1 1
expect_text "-pPASSWORD is used (a wrong one is refused)" 3 "Access denied"

# ---- set-stock / stock / adjust-stock ----
run set-stock 1 10 1 20
expect_text "set-stock" 0 "on hand +20"
run --json stock 1 10 1
expect "stock --json" 0 'd == {"shop_id":1,"item_id":10,"location_id":1,"on_hand":20,"held":0,"pooled":0,"available":20}'
run stock 1 10 1
expect_text "stock, human" 0 "available +20"
run stock 1 99 1
expect_text "stock of an unknown item" 1 "RSV_ENOITEM"
run --json stock 1 99 1
expect "stock of an unknown item, --json" 1 'd["error"]["name"] == "RSV_ENOITEM" and d["error"]["code"] == -14'
run adjust-stock 1 10 1 -5 --json
expect "adjust-stock by a negative delta" 0 'd["on_hand"] == 15 and d["delta"] == -5 and d["available"] == 15'
run adjust-stock 1 10 1 +2
expect_text "adjust-stock +2, human" 0 "adjusted by \+2 to 17"
run adjust-stock 1 10 1 -2
expect "adjust-stock back" 0
run adjust-stock 1 99 1 5
expect_text "adjust-stock of an unknown item" 1 "RSV_ENOITEM"
run adjust-stock 1 10 1 -100
expect_text "adjust-stock below zero refused" 3 "RSV_ESTOCK"
run set-stock 1 10 1 -1
expect_text "set-stock negative" 2 "RSV_EQUANTITY"
run set-stock 1 11 2 7 --json
expect "set-stock creates a ledger row" 0 'd["on_hand"] == 7 and d["item_id"] == 11 and d["location_id"] == 2'

# ---- short connection options that connect ----
run_raw --no-defaults -S "$RSV_TEST_SOCKET" -u "$USER_" -D "$DB" --json stock 1 11 2
expect "-S PATH -u NAME -D NAME" 0 'd["on_hand"] == 7'
run_raw --no-defaults -S"$RSV_TEST_SOCKET" -u"$USER_" -D"$DB" --json stock 1 11 2
expect "-SPATH -uNAME -DNAME (attached)" 0 'd["on_hand"] == 7'
run_raw --no-defaults -h localhost -P 3306 -S "$RSV_TEST_SOCKET" -u "$USER_" -D "$DB" --json stock 1 11 2
expect "-h localhost -P 3306: the socket" 0 'd["on_hand"] == 7'
if [ -n "$PASS_" ]; then
  out=$(RSV_ADMIN_PASSWORD=wrong-password "$ADMIN" --no-defaults -S "$RSV_TEST_SOCKET" -u "$USER_" -p"$PASS_" -D "$DB" --json stock 1 11 2 2>"$tmp/err"); rc=$?; err=$(cat "$tmp/err")
  expect "-pPASSWORD wins over RSV_ADMIN_PASSWORD" 0 'd["on_hand"] == 7'
else
  echo "skip -pPASSWORD that connects with the test account (it has no password; the sweep test below connects with one)"
fi
run adjust-stock 1 11 2 -1 --json
expect "a negative DELTA is an argument, not an option" 0 'd["on_hand"] == 6 and d["delta"] == -1'
run adjust-stock 1 11 2 1
expect "adjust back" 0

# ---- replenish ----
run --json replenish 1 10 1
expect "replenish fills the pool" 0 'd["added"] == 15 and d["pooled"] == 15'
run replenish 1 10 1
expect_text "replenish again adds nothing" 0 "added 0 pool row"
run replenish 1 98 1
expect_text "replenish an unknown item" 1 "RSV_ENOITEM"

# ---- drain ----
run --json drain 1 10 1
expect "drain gives the pool back" 0 'd["drained"] == 15 and d["pooled"] == 0 and d["available"] == 15'
run drain 1 10 1
expect_text "drain again gives nothing back" 0 "gave back 0 pool row"
run drain 1 98 1
expect_text "drain an unknown item" 1 "RSV_ENOITEM"
run --json replenish 1 10 1
expect "replenish after a drain" 0 'd["added"] == 15 and d["pooled"] == 15'

# ---- holds made by the library: stock, checkout ----
if lib reserve 1 "tok-1" 10 1 3 600000; then ok "helper: reserve tok-1"; else out=; err=; bad "helper: reserve tok-1"; fi
run --json stock 1 10 1
expect "stock sees the hold" 0 'd["on_hand"] == 15 and d["held"] == 3 and d["available"] == 12'
run --json checkout 1 tok-1
expect "checkout held" 0 'd["status"] == "held" and d["status_code"] == 1 and d["units"] == 3 and 0 < d["expires_in_ms"] <= 600000 and d["token"] == "tok-1"'
run checkout 1 tok-1
expect_text "checkout held, human" 0 "status +held"
run --json --hex checkout 1 746f6b2d31
expect "checkout by hex token" 0 'd["status"] == "held" and d["token_hex"] == "746f6b2d31"'
run checkout 1 no-such-token
expect_text "checkout not found" 1 "RSV_ENOTFOUND"
run --json checkout 1 no-such-token
expect "checkout not found, --json" 1 'd["error"]["name"] == "RSV_ENOTFOUND"'
run checkout 1 "$(printf 'x%.0s' $(seq 1 129))"
expect_text "checkout token too long" 2 "RSV_ETOKEN"
if lib claim 1 "tok-1"; then ok "helper: claim tok-1"; else out=; err=; bad "helper: claim tok-1"; fi
run --json checkout 1 tok-1
expect "checkout claimed" 0 'd["status"] == "claimed" and d["units"] == 0'
run --json stock 1 10 1
expect "claim left the stock" 0 'd["on_hand"] == 12 and d["held"] == 0'
qtok='it'"'"'s "q" \ x'
if lib reserve 1 "$qtok" 11 2 1 600000 && lib release 1 "$qtok"; then ok "helper: quoted token"; else out=; err=; bad "helper: quoted token"; fi
run --json checkout 1 "$qtok"
expect "checkout with quotes and backslash, valid JSON" 0 'd["status"] == "released"'
if python3 -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if d["token"] == sys.argv[2] else 1)' "$out" "$qtok"; then ok "token round-trips through JSON"; else bad "token round-trips through JSON"; fi

# ---- release and claim (shop 5, so the figures of shop 1 stay put) ----
run set-stock 5 1 1 10
expect "set-stock shop 5" 0
if lib reserve 5 rel-1 1 1 2 600000 && lib reserve 5 clm-1 1 1 3 600000 && lib reserve 5 -dash 1 1 1 600000; then ok "helper: holds in shop 5"; else out=; err=; bad "helper: holds in shop 5"; fi
run --json release 5 rel-1
expect "release a held checkout" 0 'd["action"] == "release" and d["outcome"] == "RSV_OK" and d["outcome_code"] == 0 and d["previous_status"] == "held" and d["status"] == "released" and d["units"] == 0 and d["token"] == "rel-1"'
run --json stock 5 1 1
expect "release gave the units back" 0 'd["held"] == 4 and d["available"] == 6'
run release 5 rel-1
expect_text "release again: idempotent" 0 "^released \(it was released\)"
run --json claim 5 rel-1
expect "claim a released checkout: refused" 4 'd["action"] == "claim" and d["outcome"] == "RSV_ERELEASED" and d["status"] == "released"'
expect_text "claim a released checkout, stderr" 4 "RSV_ERELEASED"
run claim 5 clm-1
expect_text "claim a held checkout" 0 "^claimed \(it was held\)"
expect_text "claim prints the state" 0 "status +claimed"
run --json stock 5 1 1
expect "the claim took the units" 0 'd["on_hand"] == 7 and d["held"] == 1'
run --json claim 5 clm-1
expect "claim again: RSV_ECLAIMED, nothing taken twice" 4 'd["outcome"] == "RSV_ECLAIMED" and d["previous_status"] == "claimed" and d["status"] == "claimed"'
run --json stock 5 1 1
expect "a repeated claim took nothing" 0 'd["on_hand"] == 7'
run release 5 clm-1
expect_text "release a claimed checkout: refused" 4 "not released: the checkout was already claimed"
run release 5 no-such-token
expect_text "release an unknown checkout" 1 "RSV_ENOTFOUND"
run --json claim 5 no-such-token
expect "claim an unknown checkout, --json" 1 'd["error"]["name"] == "RSV_ENOTFOUND"'
run --json release 4242 rel-1
expect "release in an unknown shop" 1 'd["error"]["name"] == "RSV_ENOTFOUND"'
run release 5 "$(printf 'x%.0s' $(seq 1 129))"
expect_text "release: token too long" 2 "RSV_ETOKEN"
run checkout 5 -dash
expect_text "a TOKEN starting with - and a letter is an option" 2 "unknown option '-dash'"
run --json checkout 5 -- -dash
expect "-- before a TOKEN starting with -" 0 'd["status"] == "held" and d["token"] == "-dash"'
run --json --hex release 5 2d64617368
expect "release by hex token" 0 'd["outcome"] == "RSV_OK" and d["token"] == "-dash" and d["status"] == "released"'
# Two keys: a reserve's refill gives back the expired holds of its own key,
# and exp-1 must still hold its units when it is claimed.
run set-stock 5 2 1 5
expect "set-stock shop 5, second key" 0
if lib reserve 5 exp-1 1 1 1 300 && lib reserve 5 exp-2 2 1 1 300; then ok "helper: short holds in shop 5"; else out=; err=; bad "helper: short holds in shop 5"; fi
sleep 0.6
run --json claim 5 exp-1
expect "claim a hold past its deadline, units still held: claimed" 0 'd["outcome"] == "RSV_OK" and d["previous_status"] == "expired" and d["status"] == "claimed"'
run --json sweep 5
expect "sweep shop 5 gives exp-2 back" 0 'd["released"] == 1'
run --json claim 5 exp-2
expect "claim a hold given back: RSV_EEXPIRED" 4 'd["outcome"] == "RSV_EEXPIRED" and d["status"] == "expired"'
run --json release 5 exp-2
expect "release a hold given back: idempotent" 0 'd["outcome"] == "RSV_OK" and d["previous_status"] == "expired"'
run audit 5
expect "shop 5 audits clean" 0

# ---- expiry and sweep ----
if lib reserve 1 "tok-2" 10 1 2 200 && lib reserve 1 "tok-3" 11 2 1 200; then ok "helper: short holds"; else out=; err=; bad "helper: short holds"; fi
sleep 0.5
run --json checkout 1 tok-2
expect "checkout expired" 0 'd["status"] == "expired" and d["expires_in_ms"] < 0'
run --json sweep 1 --max 1
expect "sweep --max 1" 0 'd["shop_id"] == 1 and d["released"] == 1 and d["units_released"] >= 1 and set(d) == {"shop_id","released","units_released","journal_folded","pool_rows_drained","checkouts_purged"}'
run sweep 1
expect_text "sweep the rest" 0 "gave back 1 expired hold"
run --json sweep 1
expect "sweep again: nothing" 0 'd["released"] == 0'
run --json checkout 1 tok-2
expect "swept checkout still reads expired" 0 'd["status"] == "expired" and d["units"] == 0'
run sweep 1 --max -1
expect "sweep --max negative" 2
run --json sweep 4242
expect "sweep of an unknown shop: nothing to do" 0 'd == {"shop_id":4242,"released":0,"units_released":0,"journal_folded":0,"pool_rows_drained":0,"checkouts_purged":0}'

# ---- levels ----
run --json levels 1
expect "levels --json" 0 'd["shop_id"] == 1 and [(l["item_id"], l["location_id"]) for l in d["levels"]] == [(10, 1), (11, 2)] and d["levels"][0]["on_hand"] == 12 and d["levels"][0]["available"] == 12 and d["levels"][1]["on_hand"] == 7 and all(set(l) == {"item_id","location_id","on_hand","held","available","pooled"} for l in d["levels"])'
run levels 1
expect_text "levels, human" 0 "^ITEM +LOCATION +ON_HAND +HELD +AVAILABLE +POOLED"
run --json levels 4242
expect "levels of an empty shop" 1 'd == {"shop_id":4242,"levels":[]}'

# ---- audit ----
run audit 1
expect_text "audit clean shop" 0 "audit of shop 1: 0 violation"
run --json audit 1
expect "audit --json" 0 'd == {"scope":"shop","shop_id":1,"violations":0,"problems":[]}'
run --json audit --all
expect "audit --all clean" 0 'd["scope"] == "all" and d["violations"] == 0'
# Break shop 2 by hand: units issued that exist nowhere.
run set-stock 2 1 1 5
expect "set-stock shop 2" 0
sql "$DB" -e "UPDATE rsv_ledger SET issued = issued + 2 WHERE shop_id = 2"
run audit 2
expect_text "audit finds the broken shop" 1 "shop 2 item 1 location 1: issued 2"
run --json audit 2
expect "audit --json lists the problem" 1 'd["violations"] >= 1 and d["problems"][0]["shop_id"] == 2 and d["problems"][0]["item_id"] == 1 and "issued" in d["problems"][0]["problem"]'
run --json audit --all
expect "audit --all sees it too" 1 'd["violations"] >= 1 and all(p["shop_id"] == 2 for p in d["problems"])'
run audit 1
expect "audit of shop 1 is still clean" 0
sql "$DB" -e "UPDATE rsv_ledger SET issued = issued - 2 WHERE shop_id = 2"
run audit --all
expect "audit --all clean again" 0

# ---- database from the environment ----
out=$(RSV_ADMIN_DATABASE=$DB "$ADMIN" --no-defaults --socket "$RSV_TEST_SOCKET" --user "$USER_" --json stock 1 11 2 2>"$tmp/err"); rc=$?; err=$(cat "$tmp/err")
expect "RSV_ADMIN_DATABASE" 0 'd["on_hand"] == 7'

# ---- stats: shop 6 (one figure per key) and shop 7 ----
# Each figure on its own key: a reserve refills its key's pool, which
# folds that key's journal and gives back its expired holds.
for k in "6 1 1 10" "6 2 1 5" "6 3 1 4" "6 4 1 2" "7 1 1 3" "7 2 1 3"; do
  # shellcheck disable=SC2086
  run set-stock $k
  expect "set-stock $k" 0
done
if lib reserve 6 s6-held 1 1 3 600000 && lib reserve 6 s6-exp 2 1 2 300 &&
   lib reserve 6 s6-claim 3 1 1 600000 && lib claim 6 s6-claim &&
   lib reserve 7 s7-a 1 1 1 300 && lib reserve 7 s7-b 2 1 1 300; then
  ok "helper: holds in shops 6 and 7"
else
  out=; err=; bad "helper: holds in shops 6 and 7"
fi
run --json replenish 6 4 1
expect "replenish (6, 4, 1)" 0 'd["pooled"] == 2'
sleep 0.6
run --json stats 6
expect "stats --json" 0 'd["scope"] == "shop" and d["shop_id"] == 6 and [(k["item_id"], k["location_id"]) for k in d["keys"]] == [(1, 1), (2, 1), (3, 1), (4, 1)] and all(set(k) == {"shop_id","item_id","location_id","on_hand","held","available","pooled","expired","journal_backlog","ledger_waiters"} and k["shop_id"] == 6 and k["ledger_waiters"] == 0 for k in d["keys"])'
stats6=$out
expect "stats: held" 0 'd["keys"][0]["held"] == 3 and d["keys"][0]["available"] == 7 and d["keys"][0]["expired"] == 0 and d["keys"][0]["on_hand"] == 10'
expect "stats: expired units not given back" 0 'd["keys"][1]["expired"] == 2 and d["keys"][1]["held"] == 0 and d["keys"][1]["available"] == 5'
expect "stats: journal backlog" 0 'd["keys"][2]["journal_backlog"] == 1 and d["keys"][2]["on_hand"] == 3 and d["keys"][2]["held"] == 0'
expect "stats: pool depth" 0 'd["keys"][3]["pooled"] == 2 and d["keys"][3]["on_hand"] == 2'
expect "stats: totals" 0 'd["totals"]["shops"] == 1 and d["totals"]["keys"] == 4 and all(d["totals"][f] == sum(k[f] for k in d["keys"]) for f in ("on_hand","held","available","pooled","expired","journal_backlog"))'
# The same figures counted straight from the tables.
sql "$DB" -N -e "SELECT l.item_id, l.location_id,
    (SELECT COALESCE(SUM(units), 0) FROM rsv_pool u WHERE u.shop_id = l.shop_id AND u.item_id = l.item_id AND u.location_id = l.location_id),
    (SELECT COALESCE(SUM(quantity), 0) FROM rsv_holds h WHERE h.shop_id = l.shop_id AND h.item_id = l.item_id AND h.location_id = l.location_id AND h.expires_at <= NOW(6)),
    (SELECT COUNT(*) FROM rsv_journal x WHERE x.shop_id = l.shop_id AND x.item_id = l.item_id AND x.location_id = l.location_id)
  FROM rsv_ledger l WHERE l.shop_id = 6 ORDER BY 1, 2" >"$tmp/direct" 2>&1
if python3 -c '
import json, sys
d = json.loads(sys.argv[1])
rows = [[int(x) for x in line.split()] for line in open(sys.argv[2]) if line.strip()]
got = [[k["item_id"], k["location_id"], k["pooled"], k["expired"], k["journal_backlog"]] for k in d["keys"]]
sys.exit(0 if rows == got else "%s != %s" % (got, rows))' "$stats6" "$tmp/direct"; then
  ok "stats: pooled, expired, backlog as counted from the tables"
else
  bad "stats: pooled, expired, backlog as counted from the tables"
fi
run stats 6
expect_text "stats, text: header" 0 "^SHOP +ITEM +LOCATION +ON_HAND +HELD +AVAILABLE +POOLED +EXPIRED +BACKLOG +WAITING$"
expect_text "stats, text: a row" 0 "^6 +2 +1 +5 +0 +5 +[0-9]+ +2 +0 +0$"
expect_text "stats, text: totals" 0 "^total: 1 shop\(s\), 4 item/location key\(s\)"
run --json stats --all
expect "stats --all --json" 0 'd["scope"] == "all" and {6, 7, 1, 5} <= {k["shop_id"] for k in d["keys"]} and d["totals"]["shops"] == len({k["shop_id"] for k in d["keys"]}) and d["totals"]["keys"] == len(d["keys"]) and [k for k in d["keys"] if k["shop_id"] == 6] == r["keys"]' "$stats6"
statsall=$out
run stats 4242
expect_text "stats of an unknown shop" 1 "shop 4242 has no stock ledger rows"
run --json stats 4242
expect "stats of an unknown shop, --json" 1 'd["keys"] == [] and d["totals"]["keys"] == 0'

# Plain reads: stats answers while another connection holds the rows locked.
sql "$DB" -e "START TRANSACTION; SELECT COUNT(*) FROM rsv_ledger WHERE shop_id = 6 FOR UPDATE; SELECT COUNT(*) FROM rsv_holds WHERE shop_id = 6 FOR UPDATE; SELECT COUNT(*) FROM rsv_pool WHERE shop_id = 6 FOR UPDATE; DO SLEEP(3); COMMIT" >/dev/null 2>&1 &
locker=$!
sleep 0.7
out=$(timeout 2 "$ADMIN" "${conn[@]}" --json stats 6 2>"$tmp/err"); rc=$?; err=$(cat "$tmp/err")
expect "stats takes no lock (rows locked elsewhere)" 0 'd["keys"] == r["keys"] and d["totals"] == r["totals"] and [x["checkouts"] for x in d["shops"]] == [x["checkouts"] for x in r["shops"]]' "$stats6"
wait "$locker"

# Buyers queued for a key's ledger row (behind a refill in flight) are
# counted on that key: one session holds (6, 1, 1), two wait for it.
sql "$DB" -e "START TRANSACTION; SELECT COUNT(*) FROM rsv_ledger WHERE shop_id = 6 AND item_id = 1 FOR UPDATE; DO SLEEP(5); COMMIT" >/dev/null 2>&1 &
locker=$!
sleep 0.5
for w in 1 2; do
  sql "$DB" -e "SET innodb_lock_wait_timeout = 10; SELECT COUNT(*) FROM rsv_ledger WHERE shop_id = 6 AND item_id = 1 AND location_id = 1 LOCK IN SHARE MODE" >/dev/null 2>&1 &
done
sleep 0.7
run --json stats 6
expect "stats: buyers waiting for a ledger row" 0 '[k["ledger_waiters"] for k in d["keys"]] == [2, 0, 0, 0] and d["totals"]["ledger_waiters"] == 2'
run stats 6
expect_text "stats, text: the waiters" 0 "^6 +1 +1 +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +2$"
wait

# ---- stats --prometheus, read back by the Prometheus client's parser ----
# The Debian package installs into the system interpreter's dist-packages,
# which a python3 found first on PATH (a virtualenv, pyenv) may not see.
prom_py=
have_parser() {
  local py
  for py in python3 /usr/bin/python3; do
    if "$py" -c 'import prometheus_client.parser' 2>/dev/null; then prom_py=$py; return 0; fi
  done
  return 1
}
if ! have_parser; then
  tools/deps.sh packages python3-prometheus-client >"$tmp/apt.log" 2>&1 || tail -5 "$tmp/apt.log"
fi
# prom_check DESC JSON: stdout ($out) parses, and says what JSON says.
prom_check() {
  if "$prom_py" - "$out" "$2" 2>"$tmp/py" <<'PY'
import json, sys
from prometheus_client.parser import text_string_to_metric_families
text, want = sys.argv[1], json.loads(sys.argv[2])
names = {"on_hand": "libreserve_on_hand_units", "held": "libreserve_held_units",
         "available": "libreserve_available_units", "pooled": "libreserve_pooled_units",
         "expired": "libreserve_expired_units", "journal_backlog": "libreserve_journal_backlog",
         "ledger_waiters": "libreserve_ledger_waiters"}
allfams = list(text_string_to_metric_families(text))
assert len({f.name for f in allfams}) == len(allfams), "a family twice"
fams = [f for f in allfams if not f.name.startswith("libreserve_shop_")]
by = {f.name: f for f in fams}
assert len(fams) == len(by) == 7 and set(by) == set(names.values()), sorted(by)
# per shop: every figure of --json's "shops", the ages to the millisecond
shop_fams = {f.name: f for f in allfams if f.name.startswith("libreserve_shop_")}
for sh in want["shops"]:
    sid = {"shop_id": str(sh["shop_id"])}
    for field in ("keys", "held", "expired", "expired_holds", "pool_rows", "pools_dry", "journal_rows"):
        vals = [x.value for x in shop_fams["libreserve_shop_" + {"held": "held_units", "expired": "expired_units"}.get(field, field)].samples if x.labels == sid]
        assert vals == [sh[field]], (field, vals, sh[field])
    for state, n in sh["checkouts"].items():
        vals = [x.value for x in shop_fams["libreserve_shop_checkouts"].samples if x.labels == dict(sid, state=state)]
        assert vals == [n], (state, vals, n)
    for age in ("sweep_lag", "journal_oldest", "settled_oldest"):
        vals = [x.value for x in shop_fams["libreserve_shop_%s_seconds" % age].samples if x.labels == sid]
        assert len(vals) == 1 and vals[0] >= sh[age + "_s"], (age, vals, sh[age + "_s"])
for f in fams:
    assert f.type == "gauge" and f.documentation, (f.name, f.type, f.documentation)
    assert len(f.samples) == len(want["keys"]), (f.name, len(f.samples))
    assert all(s.name == f.name for s in f.samples), f.name
for k in want["keys"]:
    labels = {"shop_id": str(k["shop_id"]), "item_id": str(k["item_id"]),
              "location_id": str(k["location_id"])}
    for field, metric in names.items():
        vals = [s.value for s in by[metric].samples if s.labels == labels]
        assert vals == [k[field]], (metric, labels, vals, k[field])
for line in text.splitlines():
    assert line.startswith("# HELP ") or line.startswith("# TYPE ") or not line.startswith("#"), line
PY
  then ok "$1"; else bad "$1: $(cat "$tmp/py")"; fi
}
if have_parser; then
  run --prometheus stats 6
  if [ "$rc" = 0 ]; then prom_check "stats --prometheus parses and matches --json" "$stats6"; else bad "stats --prometheus: exit $rc"; fi
  run stats --all --prometheus
  if [ "$rc" = 0 ]; then prom_check "stats --all --prometheus parses and matches --json" "$statsall"; else bad "stats --all --prometheus: exit $rc"; fi
  run --prometheus stats 4242
  expect_text "stats --prometheus of an unknown shop" 1 "^# TYPE libreserve_held_units gauge$"
else
  echo "skip stats --prometheus parser checks (python3-prometheus-client is not installed and could not be)"
fi

# ---- sweep --all ----
# Shop 6 has one expired hold (s6-exp), shop 7 two (on two keys); with
# --max 1 each shop gives back one.
run --json sweep --all --max 1
expect "sweep --all --max 1 --json" 0 'd["scope"] == "all" and {s["shop_id"]: s["released"] for s in d["shops"]}[6] == 1 and {s["shop_id"]: s["released"] for s in d["shops"]}[7] == 1 and d["released"] == 2 and d["shops_swept"] == len(d["shops"]) and d["shops_failed"] == 0 and d["shops_not_reached"] == 0 and [s["shop_id"] for s in d["shops"]] == sorted(s["shop_id"] for s in d["shops"]) and {1, 2, 5, 6, 7} <= {s["shop_id"] for s in d["shops"]} and all("error" not in s for s in d["shops"])'
# A shop that fails is reported, and the others are still swept: an
# account without DELETE cannot give shop 7's last expired hold back.
if sql -e "CREATE USER '$NODEL_USER'@'localhost' IDENTIFIED BY 'nodel-pw'; GRANT SELECT, INSERT, UPDATE, EXECUTE ON \`$DB\`.* TO '$NODEL_USER'@'localhost'" >"$tmp/grant" 2>&1; then
  out=$("$ADMIN" --no-defaults -S "$RSV_TEST_SOCKET" -u "$NODEL_USER" -pnodel-pw -D "$DB" --json sweep --all 2>"$tmp/err"); rc=$?; err=$(cat "$tmp/err")
  expect "sweep --all: a failing shop is reported, the others tried" 3 '{s["shop_id"]: s.get("error", {}).get("name") for s in d["shops"]}[7] == "RSV_EDB" and d["shops_failed"] >= 1 and d["shops_swept"] + d["shops_failed"] == len(d["shops"]) and d["shops_not_reached"] == 0 and len(d["shops"]) >= 5'
  expect_text "sweep --all: the failure on stderr" 3 "rsv_sweep_report of shop 7: RSV_EDB"
  # without the PROCESS privilege the ledger's waiters are unknown, not 0
  out=$("$ADMIN" --no-defaults -S "$RSV_TEST_SOCKET" -u "$NODEL_USER" -pnodel-pw -D "$DB" --json stats 6 2>"$tmp/err"); rc=$?; err=$(cat "$tmp/err")
  expect "stats without PROCESS: the waiters unknown" 0 'all(k["ledger_waiters"] is None for k in d["keys"]) and "ledger_waiters" not in d["totals"] and len(d["keys"]) == 4'
  expect_text "stats without PROCESS: said on stderr" 0 "the buyers waiting for ledger rows are not shown: .*PROCESS"
else
  echo "skip sweep --all with a failing shop (cannot create a user: $(head -1 "$tmp/grant"))"
fi
run sweep --all
expect_text "sweep --all, text: a shop" 0 "^shop 7: gave back 1 expired hold\(s\) \(1 units\), folded 0 journal row\(s\), drained 0 pool row\(s\), purged 0 checkout\(s\)$"
expect_text "sweep --all, text: totals" 0 "^every shop: gave back 1 expired hold\(s\) \(1 units\), folded [0-9]+ journal row\(s\), drained 0 pool row\(s\), purged 0 checkout\(s\) in [0-9]+ shop\(s\), [0-9]+ ms$"
if grep -q "^shop 1:" <<<"$out"; then bad "sweep --all, text: a shop with nothing to do is not logged"; else ok "sweep --all, text: a shop with nothing to do is not logged"; fi
run --json sweep --all
expect "sweep --all again: nothing" 0 'd["released"] == 0 and d["shops_failed"] == 0'
run --json stats 6
expect "after the sweep: nothing expired, journal folded" 0 'all(k["expired"] == 0 and k["journal_backlog"] == 0 for k in d["keys"])'
run audit --all
expect "audit --all clean after the sweeps" 0

# ---- schema status | install | upgrade ----
# The library's side of it: the schema version it needs (from the
# header) and the procedures it calls (asked of the library itself).
lib_sv=$(sed -n 's/^#define RSV_SCHEMA_VERSION \([0-9]*\).*/\1/p' include/reserve.h)
procs=$(python3 -c '
import ctypes, json, os, sys
r = ctypes.CDLL(os.path.abspath(os.path.join(os.environ.get("RSV_BUILD", "build"), "libreserve.so")))
r.rsv_schema_procedure.restype = ctypes.c_char_p
r.rsv_schema_procedure.argtypes = [ctypes.c_size_t]
names = []
while r.rsv_schema_procedure(len(names)):
    names.append(r.rsv_schema_procedure(len(names)).decode())
print(json.dumps(names))')
[ "$procs" != "[]" ] || { echo "FAIL the library names no procedure"; exit 1; }
# on DATABASE ARGS...: rsv-admin connected to that database.
on() { local d=$1; shift; run_raw --no-defaults --socket "$RSV_TEST_SOCKET" --user "$USER_" --database "$d" "$@"; }
# dump_rows DATABASE: every row of every table, in key order.
dump_rows() {
  local t
  for t in rsv_ledger rsv_pool rsv_checkouts rsv_holds rsv_journal; do
    echo "== $t"
    sql -N "$1" -e "SELECT * FROM $t ORDER BY 1, 2, 3, 4"
  done
}

run schema
expect_text "schema without a subcommand" 2 "schema takes one of status, install, upgrade"
run schema frob
expect_text "schema frob" 2 "schema takes one of"
run schema status now
expect_text "schema status with an argument" 2 "schema takes one of"
run --schema sql/schema.sql schema status
expect_text "--schema with schema status" 2 "--schema only applies to schema install and schema upgrade"
run --schema sql/schema.sql stock 1 1 1
expect_text "--schema outside schema" 2 "--schema only applies"
run_raw --no-defaults --socket "$tmp/no-such.sock" --database "$DB" schema status
expect_text "schema status, no server" 3 "cannot connect"
run_raw --no-defaults --socket "$tmp/no-such.sock" --database "$DB" --json schema status
expect "schema status, no server, --json" 3 'd["error"]["name"] == "RSV_ECONN"'
run_raw --no-defaults --socket "$RSV_TEST_SOCKET" --user "$USER_" schema status
expect_text "schema status without a database" 3 "no database selected"

# An empty database: nothing installed.
on "$EMPTY_DB" schema status
expect_text "status, empty database: state" 1 "^state +not-installed$"
expect_text "status, empty database: version" 1 "^schema version +not installed$"
expect_text "status, empty database: next step" 1 "^next step +rsv-admin schema install$"
on "$EMPTY_DB" --json schema status
expect "status --json, empty database" 1 'd["state"] == "not-installed" and d["installed"] is False and d["schema_version"] is None and d["oldest_library"] is None and not any(d["tables"].values()) and [p["name"] for p in d["procedures"]] == r and not any(p["exists"] or p["executable"] for p in d["procedures"]) and d["library_schema_version"] == '"$lib_sv"' and d["next_step"] == "rsv-admin schema install"' "$procs"
on "$EMPTY_DB" schema upgrade
expect_text "upgrade with nothing installed: refused" 4 "holds no libreserve schema to upgrade: use rsv-admin schema install"
on "$EMPTY_DB" --json schema upgrade
expect "upgrade --json with nothing installed: refused" 4 '"schema install" in d["refused"] and d["ran"] == 0 and d["before"]["installed"] is False and "after" not in d'

# The schema loaded with the mariadb client: ok, every procedure the
# library looks for there and executable.
run schema status
expect_text "status, fresh install: state" 0 "^state +ok$"
expect_text "status, fresh install: versions" 0 "^schema version +$lib_sv "
nprocs=$(python3 -c 'import json, sys; print(len(json.loads(sys.argv[1])))' "$procs")
expect_text "status, fresh install: procedures" 0 "^procedures +$nprocs of $nprocs executable"
run --json schema status
expect "status --json, fresh install" 0 'd["state"] == "ok" and d["database"] == "'"$DB"'" and d["installed"] and d["versioned"] and d["schema_version"] == d["library_schema_version"] == '"$lib_sv"' and d["oldest_library"] <= d["library_schema_version"] and d["updated_at"] and all(d["tables"].values()) and len(d["tables"]) == 6 and [p["name"] for p in d["procedures"]] == r and all(p["exists"] and p["executable"] for p in d["procedures"]) and d["next_step"] is None and d["library_version"]' "$procs"

# install into an empty database, then status; the tool built in the
# tree loads the tree's file.
sql -e "CREATE DATABASE \`$SCH_DB\`" || exit 1
on "$SCH_DB" schema install
expect_text "install: the tree's schema file" 0 "^schema file +$PWD/sql/schema.sql \(version $lib_sv, [0-9]+ statements\)$"
expect_text "install: before" 0 "^before +not installed$"
expect_text "install: after" 0 "^after +version $lib_sv, oldest library [0-9]+$"
expect_text "install: state" 0 "^state +ok$"
on "$SCH_DB" schema status
expect_text "status after install" 0 "^state +ok$"
on "$SCH_DB" schema install
expect_text "install again: refused" 4 "already holds the libreserve schema \(version $lib_sv.*use rsv-admin schema upgrade"
on "$SCH_DB" --json schema install
expect "install --json again: refused" 4 '"schema upgrade" in d["refused"] and d["ran"] == 0 and d["before"]["schema_version"] == '"$lib_sv"
sql -e "DROP DATABASE \`$SCH_DB\`; CREATE DATABASE \`$SCH_DB\`" || exit 1
on "$SCH_DB" --json schema install
expect "install --json into an empty database" 0 'd["command"] == "install" and d["file"].endswith("/sql/schema.sql") and d["file_version"] == '"$lib_sv"' and d["before"]["installed"] is False and d["after"]["schema_version"] == '"$lib_sv"' and d["after"]["versioned"] and d["ran"] == d["statements"] > 10 and d["state"] == "ok" and "failed" not in d'
on "$SCH_DB" --json schema status
expect "status --json after install" 0 'd["state"] == "ok" and d["schema_version"] == '"$lib_sv"

# Rows, made by the library, for the upgrade to keep.
on "$SCH_DB" set-stock 3 1 1 20
expect "set-stock in the installed schema" 0
on "$SCH_DB" set-stock 3 2 1 5
expect "set-stock in the installed schema, second key" 0
if DB=$SCH_DB lib reserve 3 u-held 1 1 2 600000 && DB=$SCH_DB lib reserve 3 u-claim 1 1 3 600000 &&
   DB=$SCH_DB lib claim 3 u-claim && DB=$SCH_DB lib reserve 3 u-rel 2 1 1 600000 && DB=$SCH_DB lib release 3 u-rel; then
  ok "helper: rows in the installed schema"
else
  out=; err=; bad "helper: rows in the installed schema"
fi
dump_rows "$SCH_DB" >"$tmp/rows-before"

# A schema from before versions: no rsv_schema table.
sql "$SCH_DB" -e "DROP TABLE rsv_schema"
on "$SCH_DB" schema status
expect_text "status, unversioned: state" 1 "^state +upgrade-needed$"
expect_text "status, unversioned: version 0" 1 "^schema version +0 \(no rsv_schema table: a schema from before versions\)$"
expect_text "status, unversioned: oldest library none" 1 "^oldest library +none$"
expect_text "status, unversioned: next step" 1 "^next step +rsv-admin schema upgrade"
on "$SCH_DB" --json schema status
expect "status --json, unversioned" 1 'd["state"] == "upgrade-needed" and d["installed"] and not d["versioned"] and d["schema_version"] == 0 and d["oldest_library"] is None and d["tables"]["rsv_schema"] is False and all(v for k, v in d["tables"].items() if k != "rsv_schema") and "schema upgrade" in d["next_step"]'
on "$SCH_DB" stock 3 1 1
expect_text "the library refuses the unversioned schema too" 3 "RSV_ESCHEMAVER"
on "$SCH_DB" schema install
expect_text "install over an unversioned schema: refused" 4 "already holds the libreserve schema \(version 0 .*schema upgrade"
on "$SCH_DB" schema upgrade
expect_text "upgrade, unversioned: before" 0 "^before +version 0 \(no rsv_schema table"
expect_text "upgrade, unversioned: after" 0 "^after +version $lib_sv, oldest library [0-9]+$"
expect_text "upgrade, unversioned: state" 0 "^state +ok$"
dump_rows "$SCH_DB" >"$tmp/rows-after"
if cmp -s "$tmp/rows-before" "$tmp/rows-after" && [ "$(grep -vc '^==' "$tmp/rows-after")" -ge 5 ]; then
  ok "upgrade keeps every row ($(grep -vc '^==' "$tmp/rows-after") rows)"
else
  out=$(diff "$tmp/rows-before" "$tmp/rows-after" | head -20); err=; bad "upgrade keeps every row"
fi
on "$SCH_DB" schema status
expect_text "status after the upgrade" 0 "^state +ok$"
on "$SCH_DB" --json stock 3 1 1
expect "the library opens the upgraded schema" 0 'd["held"] == 2'
sql "$SCH_DB" -e "DROP TABLE rsv_schema"
on "$SCH_DB" --json schema upgrade
expect "upgrade --json, unversioned" 0 'd["command"] == "upgrade" and d["before"]["installed"] and d["before"]["versioned"] is False and d["before"]["schema_version"] == 0 and d["after"]["schema_version"] == '"$lib_sv"' and d["state"] == "ok" and d["ran"] == d["statements"]'
dump_rows "$SCH_DB" >"$tmp/rows-after"
if cmp -s "$tmp/rows-before" "$tmp/rows-after"; then ok "upgrade --json keeps every row"; else out=; err=; bad "upgrade --json keeps every row"; fi

# A database newer than the library (and than the file).
sql "$SCH_DB" -e "UPDATE rsv_schema SET version = 99, oldest_library = 99"
on "$SCH_DB" schema status
expect_text "status, newer database: state" 1 "^state +library-too-old$"
expect_text "status, newer database: versions" 1 "^oldest library +99$"
expect_text "status, newer database: next step" 1 "^next step +upgrade the library.* 99 or later"
on "$SCH_DB" --json schema status
expect "status --json, newer database" 1 'd["state"] == "library-too-old" and d["schema_version"] == 99 and d["oldest_library"] == 99 and d["library_schema_version"] == '"$lib_sv"
on "$SCH_DB" schema upgrade
expect_text "upgrade of a newer database: refused" 4 "holds schema version 99, newer than .*never downgraded"
on "$SCH_DB" --json schema upgrade
expect "upgrade --json of a newer database: refused" 4 '"never downgraded" in d["refused"] and d["before"]["schema_version"] == 99 and d["ran"] == 0'
sql -N "$SCH_DB" -e "SELECT version, oldest_library FROM rsv_schema" >"$tmp/v"
if [ "$(cat "$tmp/v")" = $'99\t99' ]; then ok "the refused upgrade changed nothing"; else out=$(cat "$tmp/v"); err=; bad "the refused upgrade changed nothing"; fi
# Newer, but still fine for this library.
sql "$SCH_DB" -e "UPDATE rsv_schema SET oldest_library = $lib_sv"
on "$SCH_DB" --json schema status
expect "status, newer database that this library still works on" 0 'd["state"] == "ok" and d["schema_version"] == 99'
sql "$SCH_DB" -e "UPDATE rsv_schema SET version = $lib_sv, oldest_library = $lib_sv"
# A file older than the database: never loaded by upgrade.
printf 'SELECT 1;\n' >"$tmp/unversioned.sql"
on "$SCH_DB" --schema "$tmp/unversioned.sql" schema upgrade
expect_text "upgrade from an older file: refused" 4 "version $lib_sv, newer than .*unversioned.sql \(version 0\)"

# Procedures dropped.
sql "$SCH_DB" -e "DROP PROCEDURE rsv_settle_v2; DROP PROCEDURE rsv_fast_cart_v5"
on "$SCH_DB" schema status
expect_text "status, procedures dropped: state" 1 "^state +no-procedures$"
expect_text "status, procedures dropped: which" 1 "^  rsv_settle_v2 +missing$"
on "$SCH_DB" --json schema status
expect "status --json, procedures dropped" 1 'd["state"] == "no-procedures" and {p["name"] for p in d["procedures"] if not p["exists"]} == {"rsv_settle_v2", "rsv_fast_cart_v5"} and all(p["executable"] for p in d["procedures"] if p["exists"]) and "schema upgrade" in d["next_step"]'
on "$SCH_DB" schema upgrade
expect_text "upgrade restores the procedures" 0 "^state +ok$"
# Procedures present, but not executable by the account: it sees them
# (ALTER ROUTINE), without EXECUTE.  The probe runs nothing.
if sql -e "CREATE USER '$NOEXEC_USER'@'localhost' IDENTIFIED BY 'noexec-pw'; GRANT SELECT, ALTER ROUTINE ON \`$SCH_DB\`.* TO '$NOEXEC_USER'@'localhost'" >"$tmp/grant" 2>&1; then
  out=$("$ADMIN" --no-defaults -S "$RSV_TEST_SOCKET" -u "$NOEXEC_USER" -pnoexec-pw -D "$SCH_DB" schema status 2>"$tmp/err"); rc=$?; err=$(cat "$tmp/err")
  expect_text "status without EXECUTE: state" 1 "^state +no-procedures$"
  expect_text "status without EXECUTE: which" 1 "^  rsv_settle_v2 +not executable \(no EXECUTE\)$"
  out=$("$ADMIN" --no-defaults -S "$RSV_TEST_SOCKET" -u "$NOEXEC_USER" -pnoexec-pw -D "$SCH_DB" --json schema status 2>"$tmp/err"); rc=$?; err=$(cat "$tmp/err")
  expect "status --json without EXECUTE" 1 'd["state"] == "no-procedures" and all(p["exists"] and not p["executable"] for p in d["procedures"]) and d["next_step"] == "GRANT EXECUTE ON `'"$SCH_DB"'`.* TO '"'$NOEXEC_USER'@'localhost'"'"'
  sql -e "GRANT EXECUTE ON \`$SCH_DB\`.* TO '$NOEXEC_USER'@'localhost'"
  out=$("$ADMIN" --no-defaults -S "$RSV_TEST_SOCKET" -u "$NOEXEC_USER" -pnoexec-pw -D "$SCH_DB" --json schema status 2>"$tmp/err"); rc=$?; err=$(cat "$tmp/err")
  expect "status --json once EXECUTE is granted" 0 'd["state"] == "ok"'
else
  echo "skip status without EXECUTE (cannot create a user: $(head -1 "$tmp/grant"))"
fi
dump_rows "$SCH_DB" >"$tmp/rows-after"
if cmp -s "$tmp/rows-before" "$tmp/rows-after"; then ok "status probes changed no row"; else out=; err=; bad "status probes changed no row"; fi

# A file that fails part way: statements one by one, split as the
# mariadb client splits them (quotes, comments, DELIMITER).
cat >"$tmp/failing.sql" <<'SQL'
-- it's a comment; with a semicolon
CREATE TABLE t1 (a INT, s VARCHAR(20));
INSERT INTO t1 VALUES (1, 'a;b'), (2, "c'd;");  # a comment; it's here
/* block; comment */ INSERT INTO t1 VALUES (3, 'x//y\';');
DELIMITER //
CREATE PROCEDURE p1(IN x INT)
BEGIN
  -- body comment; it's fine
  INSERT INTO t1 VALUES (x, ';'); -- and //
END //
DELIMITER ;
CALL p1(4);
SELECT COUNT(*) FROM t1;
SELEC oops
  FROM nowhere;
CREATE TABLE never_created (a INT);
SQL
sql -e "CREATE DATABASE \`$BAD_DB\`" || exit 1
on "$BAD_DB" --schema "$tmp/failing.sql" schema install
expect_text "a failing statement: number, line, first line" 3 "statement 7 of 8 \(line 14 of .*failing.sql\) failed: SELEC oops$"
expect_text "a failing statement: the server's error" 3 "ERROR 1064 \(42000\): You have an error in your SQL syntax"
expect_text "a failing statement: before and after" 3 "^after +not installed$"
got=$(sql -N "$BAD_DB" -e "SELECT GROUP_CONCAT(s ORDER BY a SEPARATOR '|') FROM t1; SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = '$BAD_DB'")
if [ "$got" = $'a;b|c\'d;|x//y\';|;\n1' ]; then ok "statements split at delimiters only, those after the failure not run"; else out=$got; err=; bad "statements split at delimiters only"; fi
sql -e "DROP DATABASE \`$BAD_DB\`; CREATE DATABASE \`$BAD_DB\`" || exit 1
on "$BAD_DB" --json --schema="$tmp/failing.sql" schema install
expect "a failing statement, --json" 3 'd["ran"] == 6 and d["statements"] == 8 and d["failed"]["statement"] == 7 and d["failed"]["line"] == 14 and d["failed"]["first_line"] == "SELEC oops" and d["failed"]["errno"] == 1064 and d["error"]["name"] == "RSV_EDB" and d["after"]["installed"] is False'
on "$BAD_DB" --schema "$tmp/no-such.sql" schema install
expect_text "a schema file that cannot be read" 3 "cannot open .*no-such.sql"
printf 'INSERT INTO rsv_schema (id, version) VALUES (one, 2);\n' >"$tmp/badversion.sql"
on "$BAD_DB" --schema "$tmp/badversion.sql" schema install
expect_text "a version row that cannot be read" 3 "line 1: cannot read the version"

# ---- the man page ----
if command -v man >/dev/null 2>&1; then
  page=$(MANWIDTH=80 man -l man/rsv-admin.1 2>"$tmp/man"); rc=$?
  if [ $rc = 0 ] && [ -n "$page" ] && grep -q '^EXIT STATUS' <<<"$page"; then ok "man -l man/rsv-admin.1 renders"; else out=$page; err=$(cat "$tmp/man"); bad "man -l man/rsv-admin.1 renders"; fi
  if command -v groff >/dev/null 2>&1; then
    out=; err=$(groff -man -ww -z -Tutf8 man/rsv-admin.1 2>&1)
    if [ -z "$err" ]; then ok "groff: no warnings in man/rsv-admin.1"; else bad "groff: warnings in man/rsv-admin.1"; fi
  fi
  # Every command and option of --help is in the page.
  missing=()
  usage_text=$("$ADMIN" --help)
  for w in $(printf '%s\n' "$usage_text" | sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p') \
           $(printf '%s\n' "$usage_text" | grep -oE -- '(^| )--?[a-zA-Z][a-z-]*' | tr -d ' ' | sort -u); do
    grep -qF -- "$w" <<<"$page" || missing+=("$w")
  done
  if [ ${#missing[@]} -eq 0 ]; then ok "the man page names every command and option of --help"; else out=; err=; bad "not in the man page: ${missing[*]}"; fi
else
  echo "skip man page checks (no man here)"
fi
# install-admin installs the page, uninstall-admin removes it (for the
# default build directory only: install-admin builds there).
if [ "${RSV_BUILD:-build}" = build ] && [ -z "${RSV_ADMIN_BIN:-}" ] && command -v make >/dev/null 2>&1; then
  stage=$tmp/stage
  if env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory install-admin DESTDIR="$stage" PREFIX=/usr/local >"$tmp/install.log" 2>&1 &&
     [ -x "$stage/usr/local/bin/rsv-admin" ] && cmp -s man/rsv-admin.1 "$stage/usr/local/share/man/man1/rsv-admin.1"; then
    ok "install-admin installs rsv-admin and rsv-admin(1)"
    if command -v man >/dev/null 2>&1; then
      installed=$(MANWIDTH=80 man -l "$stage/usr/local/share/man/man1/rsv-admin.1" 2>/dev/null)
      if grep -q 'sweep --all' <<<"$installed"; then ok "the installed page renders"; else out=; err=; bad "the installed page renders"; fi
    fi
    if env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory uninstall-admin DESTDIR="$stage" PREFIX=/usr/local >>"$tmp/install.log" 2>&1 &&
       [ ! -e "$stage/usr/local/bin/rsv-admin" ] && [ ! -e "$stage/usr/local/share/man/man1/rsv-admin.1" ]; then
      ok "uninstall-admin removes both"
    else
      out=; err=$(tail -5 "$tmp/install.log"); bad "uninstall-admin removes both"
    fi
  else
    out=; err=$(tail -5 "$tmp/install.log"); bad "install-admin installs rsv-admin and rsv-admin(1)"
  fi
else
  echo "skip install-admin check (not the default build directory)"
fi

echo "admin-test: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
