#!/usr/bin/env bash
# tests/readme-test.sh - the README's minimal program is examples/minimal.c
# word for word, and it runs as the README says against the server in
# RSV_TEST_SOCKET, named by RSV_DSN: "sold 2 hoodies", then the
# refused reserve handled the second time, and a clear message when it
# cannot connect.  Its libuv fragment
# (non-blocking calls) compiles.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
build=${RSV_BUILD:-build}
# shellcheck source=tests/testlib.sh
. tests/testlib.sh readme

# The fenced C block under "## A complete minimal program".
awk '/^## A complete minimal program/ { s = 1 } s && /^```c$/ { c = 1; next }
     c && /^```$/ { exit } c { print }' README.md >"$tmp/readme.c"
if cmp -s "$tmp/readme.c" examples/minimal.c; then ok "README's program is examples/minimal.c"; else bad "README's program differs from examples/minimal.c"; diff "$tmp/readme.c" examples/minimal.c | head -20; fi

# shellcheck disable=SC2046
if cc -Wall -Wextra -Werror -Iinclude $(pkg-config --cflags libmariadb) examples/minimal.c -o "$tmp/minimal" -L"$build" -Wl,-rpath,"$PWD/$build" -lreserve $(pkg-config --libs libmariadb) 2>"$tmp/cc.log"; then
  ok "it compiles with -Wall -Wextra -Werror"
else
  cat "$tmp/cc.log"; bad "it compiles"
fi
# The libuv fragment under "### Non-blocking calls" compiles with the
# installed-layout headers.
awk '/^### Non-blocking calls/ { s = 1 } s && /^```c$/ { c = 1; next }
     c && /^```$/ { exit } c { print }' README.md >"$tmp/readme_uv.c"
# shellcheck disable=SC2046
if [ ! -s "$tmp/readme_uv.c" ]; then
  bad "the README has its libuv fragment"
elif ! pkg-config --exists libuv 2>/dev/null; then
  echo "skip: the libuv fragment (libuv1-dev is missing)"
elif cc -Wall -Wextra -Werror -c -Iinclude $(pkg-config --cflags libmariadb libuv) "$tmp/readme_uv.c" -o "$tmp/readme_uv.o" 2>"$tmp/cc.log"; then
  ok "the libuv fragment compiles with -Wall -Wextra -Werror"
else
  cat "$tmp/cc.log"; bad "the libuv fragment compiles"
fi
sql -e "CREATE DATABASE \`$DB\`" && sql "$DB" <sql/schema.sql
dsn_for() { echo "mariadb://${RSV_TEST_USER:-root}${RSV_TEST_PASSWORD:+:$RSV_TEST_PASSWORD}@localhost/$1?socket=$RSV_TEST_SOCKET"; }
run() { RSV_DSN=$(dsn_for "$1") "$tmp/minimal" 2>&1; }
out=$(run "$DB"); rc=$?
if [ $rc -eq 0 ] && [ "$out" = "sold 2 hoodies" ]; then ok "first run: sold 2 hoodies"; else bad "first run: rc $rc: $out"; fi
out=$(run "$DB"); rc=$?
if [ $rc -eq 0 ] && [ "$out" = "checkout-9001 was already claimed" ]; then ok "second run: the reserve is refused ($out)"; else bad "second run: rc $rc: $out"; fi
out=$(RSV_DSN="mariadb://root@localhost/$DB?socket=$tmp/no-such.sock" "$tmp/minimal" 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -q "^connect: " <<<"$out"; then ok "no server: says so ($out)"; else bad "no server: rc $rc: $out"; fi
finish
