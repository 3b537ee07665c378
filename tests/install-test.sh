#!/usr/bin/env bash
# Install test: `make install` into a staging DESTDIR, then use the library
# the way another project would, from outside the source tree:
#   - the installed files are all there (header, libreserve.so.0 SONAME link,
#     libreserve.a, reserve.pc, share/libreserve/schema.sql, man pages);
#   - a small C program, written here into a temp dir, builds with nothing
#     but `pkg-config --cflags --libs reserve libmariadb`, against the shared
#     and (with --static) the static library, and runs stock_set / reserve /
#     claim against the server in RSV_TEST_SOCKET;
#   - RSV_VERSION in the installed header == rsv_version() ==
#     `pkg-config --modversion reserve`;
#   - reserve.pc names libdir and includedir relative to ${prefix};
#   - `make install` runs ldconfig when it installs for this machine as
#     root into a LIBDIR the loader searches, never into a DESTDIR or
#     another LIBDIR, for which it says what to do instead;
#   - the sweeper's systemd units and option file, with the installed
#     paths; reserve.pc names no placeholder home;
#   - the CMake package: a C++ program whose CMakeLists.txt says only
#     find_package(libreserve) and links libreserve::reserve (and another
#     libreserve::reserve_static), configured with CMAKE_PREFIX_PATH at the
#     staging dir, builds and runs reserve -> claim;
#   - the Python binding's tests pass against the installed library
#     (LIBRESERVE_PATH in the staging dir), run from a copy outside the tree.
# Usage: tools/mariadb.sh run tests/install-test.sh [--cmake-only]  (the
# build is done by `make lib`; `make install` builds what is missing).
# Keep the staging dir with RSV_KEEP_STAGING=1.  Exits non-zero on any
# failure.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

if [ -z "${RSV_TEST_SOCKET:-}" ]; then
  echo "install-test: RSV_TEST_SOCKET is not set; run: tools/mariadb.sh run $0" >&2
  echo "install-test: FAIL (no test server)"
  exit 2
fi

only=
[ "${1:-}" = --cmake-only ] && only=cmake
PREFIX_=/usr/local
tmp=$(mktemp -d "${TMPDIR:-/tmp}/libreserve-install.XXXXXX")
stage=$tmp/stage
root=$stage$PREFIX_
libdir=$root/lib
cleanup() {
  if [ -n "${RSV_KEEP_STAGING:-}" ]; then echo "install-test: staging kept in $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

checks=0; failures=()
pass() { checks=$((checks + 1)); echo "ok   $*"; }
fail() { checks=$((checks + 1)); failures+=("$*"); echo "FAIL $*"; }
check() { # check DESCRIPTION CMD...
  local what=$1; shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}
finish() {
  echo
  if [ ${#failures[@]} -eq 0 ]; then
    echo "install-test: PASS ($checks checks)"
    exit 0
  fi
  echo "install-test: FAIL (${#failures[@]} of $checks checks failed: ${failures[*]})"
  exit 1
}

# ---- install ----
echo "== make install DESTDIR=$stage PREFIX=$PREFIX_"
if ! make --no-print-directory install DESTDIR="$stage" PREFIX="$PREFIX_" LDCONFIG="touch $tmp/ldconfig-ran" >"$tmp/install.log" 2>&1; then
  cat "$tmp/install.log"
  fail "make install"
  finish
fi
pass "make install"

# ---- installed files ----
echo "== installed files"
hdr=$root/include/reserve.h
version=$(sed -n 's/^#define RSV_VERSION "\(.*\)"/\1/p' "$hdr" 2>/dev/null)
major=${version%%.*}
check "header installed" test -f "$hdr"
check "installed header == include/reserve.h" cmp -s "$hdr" include/reserve.h
for a in async batch stats libuv libevent; do
  check "installed reserve/$a.h == include/reserve/$a.h" cmp -s "$root/include/reserve/$a.h" "include/reserve/$a.h"
done
# every header of include/reserve/, whatever the folder holds
missing=$(cd include/reserve && for h in *.h; do cmp -s "$h" "$root/include/reserve/$h" || echo "$h"; done)
check "every include/reserve/*.h installed as it is${missing:+ (not: $missing)}" test -z "$missing"
check "RSV_VERSION found in the header ($version)" test -n "$version"
check "libreserve.so.$version is a regular file" test -f "$libdir/libreserve.so.$version" -a ! -L "$libdir/libreserve.so.$version"
check "libreserve.so.$major -> libreserve.so.$version" \
  test "$(readlink "$libdir/libreserve.so.$major" 2>/dev/null)" = "libreserve.so.$version"
check "libreserve.so -> libreserve.so.$major" \
  test "$(readlink "$libdir/libreserve.so" 2>/dev/null)" = "libreserve.so.$major"
soname=$(readelf -d "$libdir/libreserve.so.$version" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
check "SONAME is libreserve.so.$major (got '$soname')" test "$soname" = "libreserve.so.$major"
check "libreserve.a installed with objects" \
  bash -c "ar t '$libdir/libreserve.a' | grep -q '\\.o\$'"
check "reserve.pc installed" test -f "$libdir/pkgconfig/reserve.pc"
check "reserve.pc does not mention the staging dir" bash -c "! grep -qF '$stage' '$libdir/pkgconfig/reserve.pc'"
check "reserve.pc prefix=$PREFIX_" grep -qx "prefix=$PREFIX_" "$libdir/pkgconfig/reserve.pc"
check "reserve.pc libdir=\${prefix}/lib" grep -qxF 'libdir=${prefix}/lib' "$libdir/pkgconfig/reserve.pc"
check "reserve.pc includedir=\${prefix}/include" grep -qxF 'includedir=${prefix}/include' "$libdir/pkgconfig/reserve.pc"
for f in libreserve-config.cmake libreserve-config-version.cmake; do
  check "lib/cmake/libreserve/$f installed" test -f "$libdir/cmake/libreserve/$f"
done
check "the CMake files do not mention the staging dir" bash -c "! grep -rqF '$stage' '$libdir/cmake/libreserve'"
# ldconfig: only for an install onto this machine, by root (LDCONFIG
# stands in for it here; the staging install above ran it too).
check "make install DESTDIR=... leaves ldconfig alone" test ! -e "$tmp/ldconfig-ran"
# Without DESTDIR: ldconfig only for a LIBDIR the loader searches (the
# stand-in lists the directories as `ldconfig -v -N` does), else what to
# do instead, and no ldconfig.
printf '#!/bin/sh\nif [ "$1" = -v ]; then echo "$RSV_FAKE_LOADER_DIR: (from the test)"; echo "	libc.so.6 -> libc.so.6"; exit 0; fi\ntouch %s/ldconfig-ran\n' "$tmp" >"$tmp/ldconfig"
chmod +x "$tmp/ldconfig"
if RSV_FAKE_LOADER_DIR=/nonexistent-dir make --no-print-directory install PREFIX="$tmp/direct" LDCONFIG="$tmp/ldconfig" >"$tmp/install-direct.log" 2>&1; then
  check "make install to a LIBDIR the loader does not search leaves ldconfig alone" test ! -e "$tmp/ldconfig-ran"
  check "... and says what to do (rpath, LD_LIBRARY_PATH, ld.so.conf.d, PKG_CONFIG_PATH for the bindings)" \
    bash -c "grep -q 'is not a directory the dynamic loader searches' '$tmp/install-direct.log' &&
             grep -qF -- '-Wl,-rpath,$tmp/direct/lib' '$tmp/install-direct.log' &&
             grep -qF 'PKG_CONFIG_PATH=$tmp/direct/lib/pkgconfig' '$tmp/install-direct.log'"
else
  cat "$tmp/install-direct.log"; fail "make install PREFIX=$tmp/direct"
fi
if RSV_FAKE_LOADER_DIR=$tmp/direct2/lib make --no-print-directory install PREFIX="$tmp/direct2" LDCONFIG="$tmp/ldconfig" >"$tmp/install-direct2.log" 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    check "make install to a LIBDIR the loader searches, as root, runs ldconfig" test -e "$tmp/ldconfig-ran"
  else
    check "make install to a LIBDIR the loader searches, not root, says to run ldconfig" grep -q "run ldconfig as root" "$tmp/install-direct2.log"
  fi
else
  cat "$tmp/install-direct2.log"; fail "make install PREFIX=$tmp/direct2"
fi
# The sweeper's units and option file, with the installed paths.
unitdir=$root/lib/systemd/system
check "the sweeper's units installed" test -f "$unitdir/rsv-admin-sweep@.service" -a -f "$unitdir/rsv-admin-sweep@.timer"
check "the service runs the installed rsv-admin with SYSCONFDIR's option file" \
  bash -c "grep -q '^ExecStart=$PREFIX_/bin/rsv-admin --defaults-file=$PREFIX_/etc/rsv-admin/%i.cnf sweep' '$unitdir/rsv-admin-sweep@.service' &&
           grep -qx 'ConditionPathExists=$PREFIX_/etc/rsv-admin/%i.cnf' '$unitdir/rsv-admin-sweep@.service' &&
           ! grep -qE '/usr/bin/rsv-admin|(=| )/etc/rsv-admin' '$unitdir/rsv-admin-sweep@.service' &&
           ! grep -qF '$stage' '$unitdir/rsv-admin-sweep@.service'"
check "the timer is the package's" cmp -s "$unitdir/rsv-admin-sweep@.timer" debian/rsv-admin.rsv-admin-sweep@.timer
check "the option file installed" test -f "$root/etc/rsv-admin/default.cnf"
check "reserve.pc names no placeholder home" bash -c "! grep -q 'example.invalid' '$libdir/pkgconfig/reserve.pc'"
check "share/libreserve/schema.sql == sql/schema.sql" cmp -s "$root/share/libreserve/schema.sql" sql/schema.sql
nman=0
for m in man/*.3; do
  [ -e "$m" ] || continue
  nman=$((nman + 1))
  [ -f "$root/share/man/man3/$(basename "$m")" ] || fail "man page $(basename "$m") installed"
done
[ $nman -gt 0 ] && pass "$nman man pages installed in share/man/man3" || echo "skip man pages (no man/*.3 in the tree)"
# Every page reads, from the source tree and installed (an alias is a
# symbolic link to its page, not a ".so" that only resolves installed).
if command -v man >/dev/null 2>&1; then
  unread=()
  for m in man/*.3 "$root"/share/man/man3/*.3; do
    [ -e "$m" ] || continue
    out=$(MANWIDTH=80 man -l "$m" 2>&1) && [ -n "$out" ] || unread+=("$m")
  done
  if [ ${#unread[@]} -eq 0 ]; then pass "man -l reads every page, in the tree and installed"; else fail "man -l cannot read: ${unread[*]}"; fi
else
  echo "skip man -l (no man here)"
fi
if [ -x tests/exports.sh ]; then
  out=$(tests/exports.sh "$libdir/libreserve.so.$major" 2>&1); rc=$?
  check "installed library: ${out##*$'\n'}" test $rc -eq 0
  [ $rc -eq 0 ] || echo "$out"
fi

# ---- the CMake package: a C++ program ----
echo "== CMake: find_package(libreserve) from a C++ project"
have_cmake() { command -v cmake >/dev/null 2>&1 && command -v "${CXX:-c++}" >/dev/null 2>&1; }
have_cmake || tools/deps.sh packages cmake g++ >"$tmp/apt-cmake.log" 2>&1 || tail -3 "$tmp/apt-cmake.log"
if ! have_cmake; then
  echo "skip CMake package (no cmake here, and it could not be installed: apt-get install cmake)"
else
  cm=$tmp/cmake-app
  mkdir -p "$cm"
  cat >"$cm/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.13)
project(shop_app CXX)
find_package(libreserve 0.1 REQUIRED)
add_executable(app app.cpp)
target_link_libraries(app PRIVATE libreserve::reserve)
add_executable(app_static app.cpp)
target_link_libraries(app_static PRIVATE libreserve::reserve_static)
EOF
  cat >"$cm/app.cpp" <<'EOF'
// A C++ service's checkout against the installed libreserve: reserve ->
// claim on a connection of its own.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <reserve.h>

int main()
{
    const char *dsn = std::getenv("APP_DSN");
    rsv_ctx *raw = nullptr;
    int rc = rsv_open_dsn(&raw, dsn ? dsn : "", nullptr);
    std::unique_ptr<rsv_ctx, void (*)(rsv_ctx *)> ctx(raw, rsv_close);
    if (rc != RSV_OK) {
        std::fprintf(stderr, "rsv_open_dsn: %s\n", rsv_errmsg(raw));
        return 1;
    }
    const std::string token = "cmake-checkout";
    if ((rc = rsv_stock_set(ctx.get(), 1, 42, 7, 10)) != RSV_OK ||
        (rc = rsv_reserve_one(ctx.get(), 1, token.data(), token.size(), 42, 7, 2, 0)) != RSV_OK ||
        (rc = rsv_claim(ctx.get(), 1, token.data(), token.size())) != RSV_OK) {
        std::fprintf(stderr, "%s: %s\n", rsv_code_name(rc), rsv_errmsg(ctx.get()));
        return 1;
    }
    int64_t on_hand = -1;
    rsv_stock_get(ctx.get(), 1, 42, 7, &on_hand, nullptr, nullptr, nullptr);
    std::printf("library %s, on hand %lld\n", rsv_version(), (long long)on_hand);
    return on_hand == 8 ? 0 : 1;
}
EOF
  cmdb=rsvcmake_$$
  cmsql() { MYSQL_PWD=${RSV_TEST_PASSWORD:-} mariadb --no-defaults --socket="$RSV_TEST_SOCKET" -u"${RSV_TEST_USER:-root}" "$@"; }
  urlq() { python3 -c 'import sys, urllib.parse as u; print(u.quote(sys.argv[1], safe=""))' "$1"; }
  if cmake -S "$cm" -B "$cm/build" -DCMAKE_PREFIX_PATH="$root" >"$tmp/cmake.log" 2>&1 &&
     cmake --build "$cm/build" >>"$tmp/cmake.log" 2>&1; then
    pass "cmake: find_package(libreserve 0.1); libreserve::reserve and libreserve::reserve_static build"
    found=$(sed -n 's/^libreserve_DIR:PATH=//p' "$cm/build/CMakeCache.txt")
    check "cmake found the staged package ($found)" test "$found" = "$libdir/cmake/libreserve"
    loaded=$(ldd "$cm/build/app" | awk '/libreserve/ {print $3}')
    check "app finds the staged libreserve.so.$major without LD_LIBRARY_PATH ($loaded)" test "$loaded" = "$libdir/libreserve.so.$major"
    if readelf -d "$cm/build/app_static" | grep 'NEEDED.*libreserve' >/dev/null; then
      fail "app_static does not need libreserve.so"
    else
      pass "app_static does not need libreserve.so"
    fi
    pw=${RSV_TEST_PASSWORD:+:$(urlq "$RSV_TEST_PASSWORD")}
    for prog in app app_static; do
      cmsql -e "CREATE DATABASE $cmdb" && cmsql "$cmdb" <"$root/share/libreserve/schema.sql"
      out=$(APP_DSN="mariadb://$(urlq "${RSV_TEST_USER:-root}")$pw@/$cmdb?socket=$(urlq "$RSV_TEST_SOCKET")" "$cm/build/$prog" 2>&1); rc=$?
      echo "     $out"
      check "$prog runs reserve -> claim" test $rc -eq 0
      cmsql -e "DROP DATABASE IF EXISTS $cmdb"
    done
  else
    tail -30 "$tmp/cmake.log"; fail "cmake: configure and build against the staged package"
  fi
  # A version the package cannot serve is refused.
  printf 'cmake_minimum_required(VERSION 3.13)\nproject(p NONE)\nfind_package(libreserve 1.0 REQUIRED)\n' >"$cm/CMakeLists.txt"
  if cmake -S "$cm" -B "$cm/build1" -DCMAKE_PREFIX_PATH="$root" >"$tmp/cmake1.log" 2>&1; then
    fail "find_package(libreserve 1.0) is refused"
  else
    check "find_package(libreserve 1.0) is refused (version $version)" grep -q "version: $version" "$tmp/cmake1.log"
  fi
fi
[ "$only" = cmake ] && finish

# ---- pkg-config against the staging dir ----
# reserve.pc carries the real PREFIX (never DESTDIR); PKG_CONFIG_SYSROOT_DIR
# maps its paths into the staging dir.  pkg-config applies the sysroot to
# every package, so libmariadb's own directories are linked into the
# staging "sysroot" too (as a real sysroot would contain them).
echo "== pkg-config"
for var in includedir libdir; do
  d=$(pkg-config --variable=$var libmariadb 2>/dev/null) || d=
  d=${d%/}
  if [ -n "$d" ] && [ ! -e "$stage$d" ]; then
    mkdir -p "$(dirname "$stage$d")" && ln -s "$d" "$stage$d"
  fi
done
export PKG_CONFIG_PATH=$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export PKG_CONFIG_SYSROOT_DIR=$stage
pc_version=$(pkg-config --modversion reserve 2>&1)
check "pkg-config --modversion reserve ($pc_version) == RSV_VERSION ($version)" test "$pc_version" = "$version"
# An application that includes mysql.h beside reserve.h: naming reserve
# alone must be enough (Requires: libmariadb).
cflags_libs=$(pkg-config --cflags --libs reserve 2>&1)
check "pkg-config --cflags --libs reserve" test $? -eq 0
echo "     $cflags_libs"
static_flags=$(pkg-config --static --cflags --libs reserve 2>&1)
check "pkg-config --static --cflags --libs reserve" test $? -eq 0
echo "     $static_flags"
case " $cflags_libs " in
  *" -I$root/include "*) pass "cflags point into the staging dir" ;;
  *) fail "cflags point into the staging dir" ;;
esac

# ---- a program outside the tree ----
src=$tmp/app
mkdir -p "$src"
# The application's own functions, named like internals of the library:
# only rsv_ names may come out of libreserve.a, or linking fails with
# "multiple definition".
cat >"$src/own.c" <<'EOF'
/* An application's own helpers that happen to share names with
 * libreserve's internals. */
int buf_free(int x);
int check_token(int x);
int op_begin(int x);
int ctx_fail(int x);
int buf_free(int x) { return x + 1; }
int check_token(int x) { return x + 2; }
int op_begin(int x) { return x + 3; }
int ctx_fail(int x) { return x + 4; }
EOF
cp tools/rsv-admin/sqlscript.h "$src/"
cat >"$src/app.c" <<'EOF'
/* An application using the installed libreserve. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mysql.h>
#include <reserve.h>

#include "sqlscript.h" /* the schema's DELIMITER, as the mariadb client reads it */

static int failures;
#define EXPECT(cond) do { if (!(cond)) { failures++; \
    fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); } } while (0)

static void run_sql(MYSQL *c, const char *sql)
{
    if (mysql_query(c, sql) != 0) {
        fprintf(stderr, "%s: %s\n", sql, mysql_error(c));
        exit(2);
    }
    do {
        MYSQL_RES *r = mysql_store_result(c);
        if (r)
            mysql_free_result(r);
    } while (mysql_next_result(c) == 0);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: app SCHEMA.sql NAME\n");
        return 2;
    }
    printf("header %s library %s\n", RSV_VERSION, rsv_version());
    EXPECT(strcmp(RSV_VERSION, rsv_version()) == 0);
    EXPECT(rsv_version_number() == RSV_VERSION_NUMBER);
    EXPECT(rsv_options_size() == sizeof(rsv_options));

    const char *sock = getenv("RSV_TEST_SOCKET");
    const char *user = getenv("RSV_TEST_USER");
    MYSQL *c = mysql_init(NULL);
    if (!sock || !mysql_real_connect(c, NULL, user ? user : "root",
                                     getenv("RSV_TEST_PASSWORD"), NULL, 0,
                                     sock, CLIENT_MULTI_STATEMENTS)) {
        fprintf(stderr, "connect: %s\n", mysql_error(c));
        return 2;
    }
    char db[96], q[160];
    snprintf(db, sizeof db, "rsvinst_%s_%d", argv[2], (int)getpid());
    snprintf(q, sizeof q, "CREATE DATABASE %s", db);
    run_sql(c, q);
    snprintf(q, sizeof q, "USE %s", db);
    run_sql(c, q);
    const char *schema = slurp(argv[1]);
    if (!schema) {
        fprintf(stderr, "cannot read %s\n", argv[1]);
        return 2;
    }
    char err[512];
    if (sqlscript_run(c, schema, err, sizeof err) != 0) {
        fprintf(stderr, "loading %s: %s\n", argv[1], err);
        return 2;
    }

    rsv_options o;
    EXPECT(rsv_options_init(&o, RSV_OPTIONS_VERSION) == RSV_OK);
    o.pool_cap = 10;
    rsv_ctx *ctx = NULL;
    int rc = rsv_open(&ctx, c, &o);
    if (rc != RSV_OK) {
        fprintf(stderr, "rsv_open: %s: %s\n", rsv_code_name(rc), rsv_errmsg(ctx));
        return 1;
    }
    const uint64_t shop = 7, item = 42, loc = 1;
    EXPECT(rsv_stock_set(ctx, shop, item, loc, 3) == RSV_OK);
    EXPECT(rsv_reserve_one(ctx, shop, "order-1", 7, item, loc, 2, 0) == RSV_OK);

    rsv_cart *cart = NULL;
    EXPECT(rsv_cart_new(&cart) == RSV_OK);
    EXPECT(rsv_cart_add(cart, item, &loc, 1, 2, 0) == RSV_OK);
    rc = rsv_reserve(ctx, shop, "order-2", 7, cart, 0);
    EXPECT(rc == RSV_EOUTOFSTOCK);
    EXPECT(rsv_cart_failed_line(cart) == 0);
    rsv_cart_free(cart);

    EXPECT(rsv_claim(ctx, shop, "order-1", 7) == RSV_OK);
    EXPECT(rsv_claim(ctx, shop, "order-1", 7) == RSV_ECLAIMED);
    int64_t on_hand = -1, held = -1, available = -1;
    EXPECT(rsv_stock_get(ctx, shop, item, loc, &on_hand, &held, NULL,
                         &available) == RSV_OK);
    printf("on_hand %lld held %lld available %lld\n", (long long)on_hand,
           (long long)held, (long long)available);
    EXPECT(on_hand == 1 && held == 0 && available == 1);
    int64_t violations = -1;
    EXPECT(rsv_audit(ctx, shop, 0, NULL, NULL, &violations) == RSV_OK);
    EXPECT(violations == 0);
    if (failures)
        fprintf(stderr, "last message: %s\n", rsv_errmsg(ctx));
    rsv_close(ctx);

    snprintf(q, sizeof q, "DROP DATABASE %s", db);
    run_sql(c, q);
    mysql_close(c);
    printf("%s\n", failures ? "FAILED" : "OK");
    return failures ? 1 : 0;
}
EOF

schema=$root/share/libreserve/schema.sql
CC=${CC:-cc}
echo "== shared build"
# shellcheck disable=SC2086
if (cd "$src" && $CC -Wall -Wextra -Werror app.c own.c -o app-shared $cflags_libs) 2>"$tmp/cc-shared.log"; then
  pass "build against the shared library"
  needed=$(readelf -d "$src/app-shared" | sed -n 's/.*(NEEDED).*\[\(.*\)\].*/\1/p' | tr '\n' ' ')
  case " $needed " in
    *" libreserve.so.$major "*) pass "app-shared needs libreserve.so.$major ($needed)" ;;
    *) fail "app-shared needs libreserve.so.$major ($needed)" ;;
  esac
  loaded=$(LD_LIBRARY_PATH=$libdir ldd "$src/app-shared" | awk '/libreserve/ {print $3}')
  check "app-shared loads the staged library ($loaded)" test "$loaded" = "$libdir/libreserve.so.$major"
  out=$(cd "$tmp" && LD_LIBRARY_PATH=$libdir "$src/app-shared" "$schema" shared 2>&1)
  rc=$?
  echo "$out" | sed 's/^/     /'
  check "app-shared runs: stock_set/reserve/claim" test $rc -eq 0
  check "rsv_version() == RSV_VERSION ($version) [shared]" \
    grep -qx "header $version library $version" <<<"$out"
else
  cat "$tmp/cc-shared.log"
  fail "build against the shared library"
fi

echo "== static build"
# Only libreserve is linked statically; libmariadb and libc stay shared.
static_link=$(sed -e 's/\(^\| \)-lreserve\( \|$\)/ -Wl,-Bstatic -lreserve -Wl,-Bdynamic /' <<<"$static_flags")
# shellcheck disable=SC2086
if (cd "$src" && $CC -Wall -Wextra -Werror app.c own.c -o app-static $static_link) 2>"$tmp/cc-static.log"; then
  pass "build against the static library"
  if readelf -d "$src/app-static" | grep 'NEEDED.*libreserve' >/dev/null; then
    fail "app-static does not need libreserve.so"
  else
    pass "app-static does not need libreserve.so"
  fi
  check "app-static contains rsv_reserve" bash -c "nm '$src/app-static' | grep -q ' T rsv_reserve\$'"
  out=$(cd "$tmp" && "$src/app-static" "$schema" static 2>&1)
  rc=$?
  echo "$out" | sed 's/^/     /'
  check "app-static runs: stock_set/reserve/claim" test $rc -eq 0
  check "rsv_version() == RSV_VERSION ($version) [static]" \
    grep -qx "header $version library $version" <<<"$out"
else
  cat "$tmp/cc-static.log"
  fail "build against the static library"
fi
unset PKG_CONFIG_SYSROOT_DIR

# ---- the Python binding against the installed library ----
echo "== Python binding tests against $libdir/libreserve.so.$major"
if [ -f bindings/python/libreserve/__init__.py ] && command -v python3 >/dev/null; then
  py=$tmp/python
  mkdir -p "$py"
  cp -r bindings/python/libreserve bindings/python/test_libreserve.py "$py/"
  got=$(cd "$py" && LIBRESERVE_PATH=$libdir/libreserve.so.$major PYTHONDONTWRITEBYTECODE=1 \
        python3 -c 'import libreserve as r; print(r.library_path()); print(r.find_schema()); print(r.version())' 2>&1)
  echo "$got" | sed 's/^/     /'
  check "binding loads the staged library" test "$(sed -n 1p <<<"$got")" = "$libdir/libreserve.so.$version"
  check "binding finds the staged schema" test "$(sed -n 2p <<<"$got")" = "$schema"
  check "binding version() == $version" test "$(sed -n 3p <<<"$got")" = "$version"
  if (cd "$py" && LIBRESERVE_PATH=$libdir/libreserve.so.$major PYTHONDONTWRITEBYTECODE=1 \
      python3 -m unittest -v test_libreserve); then
    pass "Python binding tests against the installed library"
  else
    fail "Python binding tests against the installed library"
  fi
else
  echo "skip Python binding (bindings/python/libreserve or python3 missing)"
fi

finish
