#!/usr/bin/env bash
# tests/admin-test.sh - exercises every rsv-admin command against the
# server in RSV_TEST_SOCKET: output, --json documents and exit codes.
#
# Creates its own database with sql/schema.sql and drops it at the end.
# Holds are made through the library itself (a few lines of Python ctypes
# calling $RSV_BUILD/libreserve.so, RSV_BUILD defaulting to build), so the
# tool is tested on states the library really produces.  Run by `make
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
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rsv-admin-test.XXXXXX")
sql() { MYSQL_PWD=$PASS_ "$client" --no-defaults --socket="$RSV_TEST_SOCKET" -u"$USER_" "$@"; }
cleanup() {
  sql -e "DROP DATABASE IF EXISTS \`$DB\`; DROP DATABASE IF EXISTS \`$EMPTY_DB\`" >/dev/null 2>&1 || true
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
# expect DESC RC [PYTHON-EXPR over d = the parsed JSON stdout]
expect() {
  local desc=$1 want=$2 expr=${3:-}
  if [ "$rc" != "$want" ]; then bad "$desc: exit $rc, want $want"; return; fi
  if [ -n "$expr" ]; then
    if ! python3 -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if ('"$expr"') else 1)' "$out" 2>"$tmp/py"; then
      bad "$desc: JSON check failed: $expr $(cat "$tmp/py")"; return
    fi
  fi
  ok "$desc"
}
# expect_text DESC RC REGEX (matched against stdout + stderr)
expect_text() {
  local desc=$1 want=$2 re=$3
  if [ "$rc" != "$want" ]; then bad "$desc: exit $rc, want $want"; return; fi
  if ! printf '%s\n%s\n' "$out" "$err" | grep -Eq -- "$re"; then bad "$desc: no match for /$re/"; return; fi
  ok "$desc"
}

# lib CMD ARGS: reserve/claim/release through libreserve itself.
lib() {
  python3 - "$@" <<'PY'
import ctypes, ctypes.util, os, sys
from ctypes import c_void_p, c_char_p, c_uint, c_ulong, c_uint64, c_int64, c_size_t, c_int, POINTER, byref
m = ctypes.CDLL(ctypes.util.find_library("mariadb") or "libmariadb.so.3")
r = ctypes.CDLL(os.path.abspath(os.path.join(os.environ.get("RSV_BUILD", "build"), "libreserve.so")))
m.mysql_init.restype = c_void_p; m.mysql_init.argtypes = [c_void_p]
m.mysql_real_connect.restype = c_void_p
m.mysql_real_connect.argtypes = [c_void_p, c_char_p, c_char_p, c_char_p, c_char_p, c_uint, c_char_p, c_ulong]
m.mysql_error.restype = c_char_p; m.mysql_error.argtypes = [c_void_p]
m.mysql_close.argtypes = [c_void_p]
r.rsv_open.argtypes = [POINTER(c_void_p), c_void_p, c_void_p]
r.rsv_close.argtypes = [c_void_p]
r.rsv_errmsg.restype = c_char_p; r.rsv_errmsg.argtypes = [c_void_p]
r.rsv_code_name.restype = c_char_p; r.rsv_code_name.argtypes = [c_int]
r.rsv_reserve_one.argtypes = [c_void_p, c_uint64, c_char_p, c_size_t, c_uint64, c_uint64, c_int64, c_int64]
for f in (r.rsv_claim, r.rsv_release):
    f.argtypes = [c_void_p, c_uint64, c_char_p, c_size_t]
conn = m.mysql_init(None)
if not m.mysql_real_connect(conn, None, os.environ.get("RSV_TEST_USER", "root").encode(),
                            os.environ.get("RSV_TEST_PASSWORD", "").encode(),
                            os.environ["DB"].encode(), 0, os.environ["RSV_TEST_SOCKET"].encode(), 0):
    sys.exit("connect: %s" % m.mysql_error(conn))
ctx = c_void_p()
rc = r.rsv_open(byref(ctx), conn, None)
if rc != 0:
    sys.exit("rsv_open: %s" % r.rsv_errmsg(ctx))
cmd, shop, tok = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
if cmd == "reserve":
    item, loc, qty, ttl = (int(x) for x in sys.argv[4:8])
    rc = r.rsv_reserve_one(ctx, shop, tok, len(tok), item, loc, qty, ttl)
elif cmd == "claim":
    rc = r.rsv_claim(ctx, shop, tok, len(tok))
elif cmd == "release":
    rc = r.rsv_release(ctx, shop, tok, len(tok))
else:
    sys.exit("unknown helper command " + cmd)
if rc != 0:
    sys.exit("%s: %s: %s" % (cmd, r.rsv_code_name(rc).decode(), r.rsv_errmsg(ctx).decode()))
r.rsv_close(ctx)
m.mysql_close(conn)
PY
}
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

# ---- connection and library errors: exit 3 ----
run_raw --no-defaults --socket "$tmp/no-such.sock" --user "$USER_" --database "$DB" stock 1 1 1
expect_text "no server" 3 "cannot connect"
run_raw --no-defaults --socket "$tmp/no-such.sock" --database "$DB" --json stock 1 1 1
expect "no server, --json error document" 3 'd["error"]["name"] == "RSV_ECONN"'
RSV_ADMIN_PASSWORD=wrong-password run stock 1 1 1
expect_text "wrong password from RSV_ADMIN_PASSWORD" 3 "Access denied"
run_raw --no-defaults --socket "$RSV_TEST_SOCKET" --user "$USER_" --database "$EMPTY_DB" stock 1 1 1
expect_text "schema not loaded" 3 "RSV_ESCHEMA.*inventory_levels"
run_raw --no-defaults --socket "$RSV_TEST_SOCKET" --user "$USER_" --database "$EMPTY_DB" --json levels 1
expect "schema not loaded, --json" 3 'd["error"]["name"] == "RSV_ESCHEMA"'

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

# ---- expiry and sweep ----
if lib reserve 1 "tok-2" 10 1 2 200 && lib reserve 1 "tok-3" 11 2 1 200; then ok "helper: short holds"; else out=; err=; bad "helper: short holds"; fi
sleep 0.5
run --json checkout 1 tok-2
expect "checkout expired" 0 'd["status"] == "expired" and d["expires_in_ms"] < 0'
run --json sweep 1 --max 1
expect "sweep --max 1" 0 'd == {"shop_id":1,"released":1}'
run sweep 1
expect_text "sweep the rest" 0 "gave back 1 expired hold"
run --json sweep 1
expect "sweep again: nothing" 0 'd["released"] == 0'
run --json checkout 1 tok-2
expect "swept checkout still reads expired" 0 'd["status"] == "expired" and d["units"] == 0'
run sweep 1 --max -1
expect "sweep --max negative" 2

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
sql "$DB" -e "UPDATE inventory_levels SET issued = issued + 2 WHERE shop_id = 2"
run audit 2
expect_text "audit finds the broken shop" 1 "shop 2 item 1 location 1: issued 2"
run --json audit 2
expect "audit --json lists the problem" 1 'd["violations"] >= 1 and d["problems"][0]["shop_id"] == 2 and d["problems"][0]["item_id"] == 1 and "issued" in d["problems"][0]["problem"]'
run --json audit --all
expect "audit --all sees it too" 1 'd["violations"] >= 1 and all(p["shop_id"] == 2 for p in d["problems"])'
run audit 1
expect "audit of shop 1 is still clean" 0
sql "$DB" -e "UPDATE inventory_levels SET issued = issued - 2 WHERE shop_id = 2"
run audit --all
expect "audit --all clean again" 0

# ---- database from the environment ----
out=$(RSV_ADMIN_DATABASE=$DB "$ADMIN" --no-defaults --socket "$RSV_TEST_SOCKET" --user "$USER_" --json stock 1 11 2 2>"$tmp/err"); rc=$?; err=$(cat "$tmp/err")
expect "RSV_ADMIN_DATABASE" 0 'd["on_hand"] == 7'

echo "admin-test: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
