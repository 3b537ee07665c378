#!/usr/bin/env bash
# tests/errors-test.sh - one error vocabulary in every language: the
# same failing situations driven through every binding (tests/errors/
# scenarios.*), each of which must raise the error docs/errors.md maps
# the library's code to (tools/error-table.py --json), carrying that
# code, and agree on failed_line and the server's error number.  (PHP
# answers out of stock and a repeated claim instead of throwing them:
# its program reports the error of the code the context answered.)  The
# situations: a wrong password, no server at the socket, out of stock
# (reserve_one: failed_line 0), already claimed, expired (a 1 ms hold,
# swept), an empty token, a server that takes no writes (read_only on,
# for an account without the right to write anyway), and a commit in
# doubt (a reserve whose COMMIT a semi-synchronous primary holds back
# for a replica that is not there, cut off by the call's budget).  A
# binding whose runtime is missing is skipped, as its own tests are.
# Runs against the server in RSV_TEST_SOCKET (make check), and starts a
# second, semi-synchronous one of its own for the commit in doubt.
#
# A binding is its column of docs/errors.md (one entry of BINDINGS in
# tools/error-table.py), its scenario program and one entry of
# run_binding: how to run that program with RSV_DSN, RSV_DSN_BADPW,
# RSV_DSN_GONE and RSV_SHOP set (mode "readonly": RSV_DSN only; mode
# "indoubt": RSV_DSN_INDOUBT, opened with a budget of RSV_BUDGET_MS).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
repo=$PWD
build=${RSV_BUILD:-build}
lib=$repo/$build/libreserve.so.0
[ -e "$lib" ] || { echo "errors-test: $lib not built (make lib)" >&2; exit 2; }
# shellcheck source=tests/testlib.sh
. tests/testlib.sh errors

user=rsv_err_$$ pw=pw$$
indoubt_dir=
cleanup_extra() {
  sql -e "SET GLOBAL read_only = 0; DROP USER IF EXISTS '$user'@'localhost'" >/dev/null 2>&1
  if [ -n "$indoubt_dir" ]; then tools/mariadb.sh stop "$indoubt_dir"; fi
}
trap 'exit 130' INT TERM
sql -e "CREATE DATABASE \`$DB\`" && sql "$DB" <sql/schema.sql &&
  sql -e "CREATE USER '$user'@'localhost' IDENTIFIED BY '$pw';
          GRANT SELECT, INSERT, UPDATE, DELETE, EXECUTE ON \`$DB\`.* TO '$user'@'localhost'" ||
  { bad "create the test database and account"; finish; exit; }
export RSV_DSN="mariadb://$user:$pw@localhost/$DB?socket=$RSV_TEST_SOCKET"
export RSV_DSN_BADPW="mariadb://$user:wrong@localhost/$DB?socket=$RSV_TEST_SOCKET"
export RSV_DSN_GONE="mariadb://$user:$pw@localhost/$DB?socket=$tmp/no-server.sock"
export LIBRESERVE_PATH=$lib
tools/error-table.py --json >"$tmp/map.json" || { bad "tools/error-table.py --json"; finish; exit; }
names=$(python3 -c 'import json, sys; print(" ".join(json.load(open(sys.argv[1]))))' "$tmp/map.json")

# run_binding NAME MODE: the scenario program's lines, or exit 77 to skip.
run_binding() {
  local name=$1 mode=$2
  case $name in
    Python)
      PYTHONPATH=$repo/bindings/python PYTHONDONTWRITEBYTECODE=1 python3 tests/errors/scenarios.py $mode ;;
    Node.js)
      command -v node >/dev/null && [ -d bindings/node/node_modules/koffi ] || return 77
      mkdir -p "$tmp/node/node_modules"
      ln -sfn "$repo/bindings/node" "$tmp/node/node_modules/libreserve"
      cp tests/errors/scenarios.js "$tmp/node/"
      (cd "$tmp/node" && node scenarios.js $mode) ;;
    Ruby)
      command -v ruby >/dev/null && ruby -e 'require "ffi"' 2>/dev/null || return 77
      ruby -I bindings/ruby/lib tests/errors/scenarios.rb $mode ;;
    Go)
      command -v go >/dev/null || return 77
      mkdir -p "$tmp/go"
      cp tests/errors/go/main.go "$tmp/go/"
      printf 'module errorsapp\n\ngo 1.19\n\nrequire libreserve/reserve v0.0.0\n\nreplace libreserve/reserve => %s/bindings/go\n' "$repo" >"$tmp/go/go.mod"
      (cd "$tmp/go" && GOPROXY=off GOTOOLCHAIN=local GOFLAGS=-mod=mod GOCACHE=$repo/build/go/cache \
         GOPATH=$repo/build/go/path go run . $mode) ;;
    PHP)
      command -v php >/dev/null && php -r 'exit(extension_loaded("ffi") ? 0 : 1);' || return 77
      php tests/errors/scenarios.php $mode ;;
    *) echo "errors-test: no scenario program for $name" >&2; return 2 ;;
  esac
}

# What each situation must give: the library's code, failed_line, and
# the server's (or Connector/C's) error number: 1045 access denied, 2002
# no server at the socket, 2013 the connection lost during the query
# (the library closed it when the budget ran out).
expect() {
  case $1 in
    wrong_password) echo "auth -8 - 1045" ;;
    no_server) echo "RSV_ECONN -8 - 2002" ;;
    out_of_stock) echo "RSV_EOUTOFSTOCK -1 0 -" ;;
    already_claimed) echo "RSV_ECLAIMED -4 - -" ;;
    expired) echo "RSV_EEXPIRED -3 - -" ;;
    bad_token) echo "RSV_ETOKEN -13 - -" ;;
    not_primary) echo "RSV_ENOTPRIMARY -27 - -" ;;
    in_doubt) echo "RSV_EINDOUBT -7 - 2013" ;;
  esac
}

check_lines() {
  local name=$1 out=$2 situations=$3 s line got want_key want_code want_line want_errno want_err
  for s in $situations; do
    line=$(grep "^$s " <<<"$out")
    read -r want_key want_code want_line want_errno <<<"$(expect "$s")"
    want_err=$(python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))[sys.argv[2]]
print(m["auth"] if sys.argv[3] == "auth" else m["errors"][sys.argv[3]])' "$tmp/map.json" "$name" "$want_key")
    got="$s $want_err $want_code $want_line $want_errno"
    if [ "$line" = "$got" ]; then ok "$name: $line"; else bad "$name: $s: got '${line:-nothing}', want '$got'"; fi
  done
}

shop=100
for name in $names; do
  shop=$((shop + 1))
  out=$(RSV_SHOP=$shop run_binding "$name" "" 2>"$tmp/err.log"); rc=$?
  if [ $rc -eq 77 ]; then echo "skip $name: its runtime is missing"; continue; fi
  [ $rc -eq 0 ] || { cat "$tmp/err.log"; bad "$name: the scenario program failed ($rc)"; }
  check_lines "$name" "$out" "wrong_password no_server out_of_stock already_claimed expired bad_token"
done

# A server that takes no writes: read_only on (the account has no right
# to write through it), each binding's open answers it.
if sql -e "SET GLOBAL read_only = 1"; then
  for name in $names; do
    out=$(RSV_SHOP=0 run_binding "$name" readonly 2>"$tmp/err.log"); rc=$?
    [ $rc -eq 77 ] && continue
    [ $rc -eq 0 ] || { cat "$tmp/err.log"; bad "$name: the read-only scenario failed ($rc)"; }
    check_lines "$name" "$out" "not_primary"
  done
  sql -e "SET GLOBAL read_only = 0"
else
  bad "SET GLOBAL read_only = 1"
fi

# A commit whose answer never comes within the call's budget: a server of
# the test's own (tools/mariadb.sh start, under $tmp) whose commits wait
# for a semi-synchronous replica that is not there.  Its timeout (30 s)
# is far beyond the budget (and the library's default one), so the
# primary does not give up waiting (and fall back to asynchronous) while
# a binding waits, yet a context without any budget would see its commit
# go through (no error) rather than hang the test.
# Semi-synchronous replication is switched on once the schema and the
# stock are in (they commit too; the stock is the library's to write,
# through the Python binding this test needs anyway), and off again
# after each binding, which lets its held-back commit through and its
# row locks go.  Each binding opens the server with a budget of
# RSV_BUDGET_MS and reserves a new checkout: the commit is cut off.
indoubt_dir=$tmp/indoubt
indoubt_sql() { "$client" --no-defaults --socket="$indoubt_dir/mysqld.sock" -uroot "$@"; }
semi_sync() { indoubt_sql -e "SET GLOBAL rpl_semi_sync_master_enabled = $1"; }
export RSV_DSN_INDOUBT="mariadb://$user:$pw@localhost/$DB?socket=$indoubt_dir/mysqld.sock"
export RSV_BUDGET_MS=1000
if RSV_MARIADB_OPTS="--log-bin=binlog --server-id=1 --binlog-format=ROW \
--rpl-semi-sync-master-wait-point=AFTER_SYNC --rpl-semi-sync-master-timeout=30000" \
     tools/mariadb.sh start "$indoubt_dir" >/dev/null &&
   indoubt_sql -e "CREATE DATABASE \`$DB\`" && indoubt_sql "$DB" <sql/schema.sql &&
   indoubt_sql -e "CREATE USER '$user'@'localhost' IDENTIFIED BY '$pw';
                   GRANT SELECT, INSERT, UPDATE, DELETE, EXECUTE ON \`$DB\`.* TO '$user'@'localhost'" &&
   PYTHONPATH=$repo/bindings/python PYTHONDONTWRITEBYTECODE=1 python3 -c '
import os, sys, libreserve
with libreserve.connect(os.environ["RSV_DSN_INDOUBT"]) as ctx:
    for shop in sys.argv[1:]:
        ctx.stock_set(int(shop), 1, 1, 3)' $(seq 201 $((200 + $(wc -w <<<"$names")))); then
  shop=200
  for name in $names; do
    shop=$((shop + 1))
    semi_sync ON || { bad "$name: switch semi-synchronous replication on"; continue; }
    out=$(RSV_SHOP=$shop run_binding "$name" indoubt 2>"$tmp/err.log"); rc=$?
    semi_sync OFF || bad "$name: switch semi-synchronous replication off"
    [ $rc -eq 77 ] && continue
    [ $rc -eq 0 ] || { cat "$tmp/err.log"; bad "$name: the in-doubt scenario failed ($rc)"; }
    check_lines "$name" "$out" "in_doubt"
  done
else
  bad "start a semi-synchronous server with the test database and stock"
fi
finish
