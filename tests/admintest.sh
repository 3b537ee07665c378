# tests/admintest.sh - sourced by the shell tests of rsv-admin commands,
# after tests/testlib.sh: `. tests/admintest.sh`.  Gives, besides what
# testlib.sh gives (and with a bad that also prints the command's output)
#   ADMIN, conn            the rsv-admin binary and the options that point
#                          it at the test database as the test account
#   q SQL                  one statement in the test database, no headers
#   run ARGS...            rsv-admin ARGS: out, err and rc
#   expect DESC RC [EXPR]  rc is RC and EXPR (Python, on d: the JSON out)
#   expect_text DESC RC RE rc is RC and out or err matches RE
#   check DESC ACTUAL WANT the two are equal
# The caller creates the database (load_schema does, with the schema).
# shellcheck shell=bash disable=SC2034,SC2154
ADMIN=${RSV_ADMIN_BIN:-${RSV_BUILD:-build}/rsv-admin}
[ -x "$ADMIN" ] || { echo "$tl_name: $ADMIN is not built (make $ADMIN)" >&2; exit 1; }
USER_=${RSV_TEST_USER:-root}
PASS_=${RSV_TEST_PASSWORD:-}
conn=(--no-defaults --socket "$RSV_TEST_SOCKET" --user "$USER_" --database "$DB")
export RSV_ADMIN_PASSWORD=$PASS_
out="" err="" rc=0
bad() { fail=$((fail + 1)); echo "FAIL $*"; echo "     stdout: $out"; echo "     stderr: $err"; }
q() { sql -N "$DB" -e "$1"; }
load_schema() { sql -e "CREATE DATABASE \`$DB\`" && sql "$DB" <sql/schema.sql; }
run() { out=$("$ADMIN" "${conn[@]}" "$@" 2>"$tmp/err"); rc=$?; err=$(cat "$tmp/err"); }
expect() {
  local desc=$1 want=$2 expr=${3:-}
  if [ "$rc" != "$want" ]; then bad "$desc: exit $rc, want $want"; return; fi
  if [ -n "$expr" ] && ! python3 -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if ('"$expr"') else 1)' "$out" 2>"$tmp/py"; then
    bad "$desc: JSON check failed: $expr $(cat "$tmp/py")"; return
  fi
  ok "$desc"
}
expect_text() {
  local desc=$1 want=$2 re=$3
  if [ "$rc" != "$want" ]; then bad "$desc: exit $rc, want $want"; return; fi
  if ! grep -Eq -- "$re" <<<"$out$err"; then bad "$desc: no match for /$re/"; return; fi
  ok "$desc"
}
check() { if [ "$2" = "$3" ]; then ok "$1"; else out=$2; err="want $3"; bad "$1"; fi; }
