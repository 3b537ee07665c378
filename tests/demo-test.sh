#!/usr/bin/env bash
# tests/demo-test.sh - examples/checkout_demo.c names its database the way
# every example does: RSV_DSN (empty counts as unset) when no connection
# option is given on the command line, the options when they are (as
# make demo gives them).  The demo runs its walkthrough and a short sale
# against a database of the server in RSV_TEST_SOCKET named only by
# RSV_DSN, and must pass its own checks there.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
build=${RSV_BUILD:-build}
# shellcheck source=tests/testlib.sh
. tests/testlib.sh demo

# shellcheck disable=SC2046
if ! cc -Wall -Wextra -Werror -pthread -Iinclude $(pkg-config --cflags libmariadb) examples/checkout_demo.c \
     -o "$tmp/demo" -L"$build" -Wl,-rpath,"$PWD/$build" -lreserve $(pkg-config --libs libmariadb) 2>"$tmp/cc.log"; then
  cat "$tmp/cc.log"; bad "examples/checkout_demo.c compiles"; finish; exit
fi
sql -e "CREATE DATABASE \`$DB\`" && sql "$DB" <sql/schema.sql || { bad "the test database"; finish; exit; }
dsn="mariadb://${RSV_TEST_USER:-root}${RSV_TEST_PASSWORD:+:$RSV_TEST_PASSWORD}@localhost/$DB?socket=$RSV_TEST_SOCKET"
demo() { env -u RSV_DEMO_DATABASE -u RSV_TEST_SOCKET "$tmp/demo" --no-progress "$@" 2>&1; }

out=$(RSV_DSN=$dsn demo --duration 1 --buyers 4); rc=$?
n=$(sql -N -e "SELECT COUNT(*) FROM \`$DB\`.rsv_checkouts")
if [ $rc -eq 0 ] && grep -q "^demo: all checks passed" <<<"$out" && [ "${n:-0}" -gt 0 ]; then
  ok "RSV_DSN alone names the database: the demo passes its checks there ($n checkouts)"
else
  echo "$out" | tail -15; bad "the demo with RSV_DSN (rc $rc, $n checkouts)"
fi
out=$(RSV_DSN=$dsn demo --no-sale --socket "$tmp/no-such.sock" --database "$DB"); rc=$?
if [ $rc -ne 0 ] && grep -q "connect to $tmp/no-such.sock" <<<"$out"; then
  ok "a connection option given wins over RSV_DSN"
else
  echo "$out" | tail -5; bad "--socket with RSV_DSN set (rc $rc)"
fi
out=$(RSV_DSN='' demo --no-sale); rc=$?
if [ $rc -eq 2 ] && grep -q "no database" <<<"$out"; then
  ok "an empty RSV_DSN counts as unset"
else
  echo "$out" | tail -5; bad "RSV_DSN empty (rc $rc)"
fi
finish
