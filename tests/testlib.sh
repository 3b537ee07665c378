# tests/testlib.sh - sourced by the shell tests that run against the server
# in RSV_TEST_SOCKET: `. tests/testlib.sh NAME` (NAME names the test in its
# messages and its closing line).  Gives
#   client, sql ARGS...    the mariadb client as the test account
#   tmp, DB                a temporary directory and a database name of the
#                          test's own; both removed on exit (the database
#                          only if the test created it), then the test's
#                          own cleanup_extra function runs if it has one
#   ok/bad DESC, finish    count checks; finish prints "NAME: N passed, N
#                          failed" and returns non-zero if any failed
# shellcheck shell=bash disable=SC2034
: "${RSV_TEST_SOCKET:?RSV_TEST_SOCKET is not set: run via tools/mariadb.sh run}"
tl_name=$1
client=$(command -v mariadb || command -v mysql) || { echo "$tl_name: no mariadb client" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rsv-$tl_name.XXXXXX")
DB=rsv_${tl_name//-/_}_$$
sql() { MYSQL_PWD=${RSV_TEST_PASSWORD:-} "$client" --no-defaults --socket="$RSV_TEST_SOCKET" -u"${RSV_TEST_USER:-root}" "$@"; }
tl_cleanup() {
  sql -e "DROP DATABASE IF EXISTS \`$DB\`" >/dev/null 2>&1
  if [ "$(type -t cleanup_extra)" = function ]; then cleanup_extra; fi
  rm -rf "$tmp"
}
trap tl_cleanup EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
finish() { echo "$tl_name: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; }
