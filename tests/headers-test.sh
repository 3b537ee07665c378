#!/usr/bin/env bash
# Each public header compiles alone, in C (C99 and C11) and in C++, with
# warnings as errors: include/reserve.h, and each of include/reserve/
# (the loop adapters when their libraries' headers are installed).
# reserve.h is the core alone: it brings neither the sub-headers nor
# <mysql.h> (the core and the three sub-headers compile without
# Connector/C's include path), and a MYSQL handle from <mysql.h> passes
# where it names struct st_mysql.
#
# Usage: tests/headers-test.sh   (make lint and make check run it; no
# server).  Prints one line per failure and "headers: N passed, N failed".
set -u
cd "$(dirname "$0")/.."
CC=${CC:-cc}
CXX=${CXX:-c++}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
work=$(mktemp -d "${TMPDIR:-/tmp}/rsv-headers.XXXXXX")
trap 'rm -rf "$work"' EXIT
passed=0; failed=0

try() { # what, compiler and flags..., then the source on stdin
  local what=$1; shift
  if "$@" -x "$LANG_X" -c - -o "$work/out.o" >"$work/err" 2>&1; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); echo "FAIL headers: $what"; sed 's/^/    /' "$work/err" | head -20
  fi
}

C_FLAGS=(-Wall -Wextra -Werror -pedantic -Iinclude)
CXX_FLAGS=(-Wall -Wextra -Werror -pedantic -Iinclude)
mariadb=$($PKG_CONFIG --cflags libmariadb 2>/dev/null)

headers=(reserve.h reserve/async.h reserve/batch.h reserve/stats.h)
extra_flags=()
if $PKG_CONFIG --exists libuv 2>/dev/null; then
  headers+=(reserve/libuv.h); fi
if $PKG_CONFIG --exists libevent 2>/dev/null; then
  headers+=(reserve/libevent.h); fi

for h in "${headers[@]}"; do
  flags=()
  case $h in
    # (uv.h itself needs the POSIX names under a strict -std)
    reserve/libuv.h) flags=(-D_POSIX_C_SOURCE=200809L $($PKG_CONFIG --cflags libuv)) ;;
    reserve/libevent.h) flags=($($PKG_CONFIG --cflags libevent)) ;;
  esac
  for std in c99 c11; do
    LANG_X=c try "$h alone, $std" $CC -std=$std "${C_FLAGS[@]}" "${flags[@]}" <<EOF
#include <$h>
#include <$h>
int rsv_headers_test_$std(void);
int rsv_headers_test_$std(void) { return RSV_OK; }
EOF
  done
  LANG_X=c++ try "$h alone, C++11" $CXX -std=c++11 "${CXX_FLAGS[@]}" "${flags[@]}" <<EOF
#include <$h>
int rsv_headers_test_cxx() { return RSV_OK; }
EOF
done

# The core alone: no sub-header, no Connector/C.
LANG_X=c try "reserve.h is the core alone" $CC -std=c11 "${C_FLAGS[@]}" <<'EOF'
#include <reserve.h>
#if defined(RESERVE_ASYNC_H) || defined(RESERVE_BATCH_H) || defined(RESERVE_STATS_H)
#error "reserve.h includes a sub-header"
#endif
#ifdef MYSQL_CLIENT
#error "reserve.h includes <mysql.h>"
#endif
int rsv_headers_core(void);
int rsv_headers_core(void) { return RSV_OK; }
EOF

# A MYSQL handle goes where the header names struct st_mysql, in C and C++.
for lang in c c++; do
  if [ $lang = c ]; then cc=($CC -std=c11 "${C_FLAGS[@]}"); else cc=($CXX -std=c++11 "${CXX_FLAGS[@]}"); fi
  LANG_X=$lang try "MYSQL from <mysql.h> with reserve.h ($lang)" "${cc[@]}" $mariadb <<'EOF'
#include <mysql.h>
#include <reserve.h>
int rsv_headers_mysql(MYSQL *conn, rsv_ctx **ctx);
int rsv_headers_mysql(MYSQL *conn, rsv_ctx **ctx)
{
    MYSQL *back;
    int rc = rsv_open(ctx, conn, 0);
    back = rsv_connection(*ctx);
    return rc == RSV_OK && back == conn;
}
EOF
done

echo "headers: $passed passed, $failed failed"
[ $failed = 0 ]
