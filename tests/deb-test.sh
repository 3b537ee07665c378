#!/usr/bin/env bash
# Debian package test: the packages `make deb` builds, installed on this
# machine and used the way another project would use them.
#   - `make deb` builds libreserve0, libreserve-dev and rsv-admin (and
#     lintian finds nothing);
#   - `dpkg -i` installs the three; the files are where Debian puts them;
#   - a small C program, written here into a temp dir, builds with nothing
#     but `pkg-config --cflags --libs reserve` (and, with --static, against
#     libreserve.a) and runs against a throwaway MariaDB: a database with
#     /usr/share/libreserve/schema.sql loaded by the mariadb client, then
#     stock_set / reserve / claim; no rpath anywhere, the loader finds the
#     installed library;
#   - the installed rsv-admin runs (--version, and levels/audit on that
#     database) and `man -w rsv-admin` finds its page;
#   - the sweeper service's units and option file are installed, nothing
#     enabled, and the unit's ExecStart= lines, run exactly as written
#     (tests/sweeper-unit-test.sh), sweep a database with work to do;
#   - `dpkg --purge` removes the three again (also when a check fails or
#     the test is interrupted: trap), and nothing they installed is left.
# Needs root (it installs packages); without root it says so and skips.
# It refuses to run when one of the packages is installed already or when
# a file they would install exists (a `make install PREFIX=/usr`): the
# removal at the end would take those away.  Uses the server in
# RSV_TEST_SOCKET if set, else starts one with tools/mariadb.sh.  Takes
# about half a minute, most of it the package build.  Not part of
# `make check` (it changes the system): run `make check-deb`.
# Last line: "deb: N passed, M failed"; exits non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

PKGS=(rsv-admin libreserve-dev libreserve0)   # in removal order
passed=0; failed=0
pass() { passed=$((passed + 1)); echo "ok   $*"; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }
check() { # check DESCRIPTION CMD...
  local what=$1; shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}
# /lib is /usr/lib on a merged-/usr system: ldd may name either.
# shellcheck disable=SC2317  # called through check
same_file() { [ -n "$1" ] && [ "$(readlink -f "$1")" = "$(readlink -f "$2")" ]; }
indent() { sed 's/^/     /'; }
finish() {
  echo
  echo "deb: $passed passed, $failed failed"
  if [ "$failed" -eq 0 ]; then exit 0; fi
  exit 1
}

if [ "$(id -u)" != 0 ]; then
  echo "deb-test: SKIP: installing the packages (dpkg -i) needs root; run it as root: make check-deb"
  echo
  echo "deb: 0 passed, 0 failed"
  exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/libreserve-deb.XXXXXX")
installed=0
dbdir=
startpid=
# shellcheck disable=SC2317  # called by the trap
cleanup() {
  if [ "$installed" = 1 ]; then
    echo "deb-test: removing the packages (dpkg --purge ${PKGS[*]})"
    dpkg --purge "${PKGS[@]}" >"$tmp/purge-trap.log" 2>&1 || cat "$tmp/purge-trap.log"
  fi
  if [ -n "$dbdir" ]; then
    if [ -n "$startpid" ]; then wait "$startpid" 2>/dev/null; fi
    tools/mariadb.sh stop "$dbdir" || true
    rm -rf "$dbdir"
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

is_installed() { # any trace in dpkg's database, config files included
  local s
  s=$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null) && [ -n "$s" ] && [ "$s" != not-installed ]
}

# ---- the machine as found ----
for p in "${PKGS[@]}"; do
  if is_installed "$p"; then
    echo "deb-test: $p is installed already; this test installs and purges it. Remove it first (dpkg --purge $p)."
    fail "$p not installed before the test"
    finish
  fi
done

# ---- build ----
echo "== make deb"
start=$SECONDS
if make --no-print-directory deb >"$tmp/build.log" 2>&1; then
  pass "make deb: packages built, lintian clean ($((SECONDS - start)) s)"
else
  tail -40 "$tmp/build.log"
  fail "make deb"
  finish
fi
version=$(dpkg-parsechangelog -l debian/changelog -S Version)
arch=$(dpkg --print-architecture)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
libdir=/usr/lib/$ma
debs=()
for p in libreserve0 libreserve-dev rsv-admin; do
  debs+=("build/deb/${p}_${version}_${arch}.deb")
done
check "three packages in build/deb: ${debs[*]##*/}" test -f "${debs[0]}" -a -f "${debs[1]}" -a -f "${debs[2]}"
# Files in the packages that exist already would be overwritten now and
# deleted by the purge.
clash=()
for d in "${debs[@]}"; do
  while IFS= read -r path; do
    if [ -e "$path" ] || [ -L "$path" ]; then clash+=("$path"); fi
  done < <(dpkg-deb --fsys-tarfile "$d" | tar -t | grep -v '/$' | sed 's|^\./|/|')
done
if [ ${#clash[@]} -gt 0 ]; then
  echo "deb-test: these files exist already (a make install PREFIX=/usr?); the packages would replace them and the purge delete them:"
  printf '  %s\n' "${clash[@]}"
  fail "no file of the packages exists before the test"
  finish
fi
pass "no file of the packages exists before the test"

# ---- install ----
echo "== dpkg -i"
installed=1
if dpkg -i "${debs[@]}" >"$tmp/install.log" 2>&1; then
  pass "dpkg -i ${debs[*]##*/}"
else
  cat "$tmp/install.log"
  fail "dpkg -i"
  finish
fi
for p in "${PKGS[@]}"; do
  v=$(dpkg-query -W -f='${db:Status-Status} ${Version}' "$p" 2>/dev/null)
  check "$p installed: $v" test "$v" = "installed $version"
  dpkg -L "$p" >"$tmp/$p.list" 2>/dev/null
done
upstream=${version%-*}
major=${upstream%%.*}
check "$libdir/libreserve.so.$major -> libreserve.so.$upstream" \
  test "$(readlink "$libdir/libreserve.so.$major")" = "libreserve.so.$upstream" -a -f "$libdir/libreserve.so.$upstream"
check "$libdir/libreserve.so -> libreserve.so.$major (libreserve-dev)" \
  grep -qx "$libdir/libreserve.so" "$tmp/libreserve-dev.list"
check "ldconfig knows libreserve.so.$major" bash -c "ldconfig -p | grep -q 'libreserve.so.$major '"
check "/usr/include/reserve.h == include/reserve.h" cmp -s /usr/include/reserve.h include/reserve.h
for a in async batch stats libuv libevent; do
  check "/usr/include/reserve/$a.h == include/reserve/$a.h (libreserve-dev)" cmp -s "/usr/include/reserve/$a.h" "include/reserve/$a.h"
done
check "$libdir/libreserve.a" test -f "$libdir/libreserve.a"
check "/usr/share/libreserve/schema.sql == sql/schema.sql" cmp -s /usr/share/libreserve/schema.sql sql/schema.sql
check "/usr/bin/rsv-admin" test -x /usr/bin/rsv-admin

# ---- pkg-config ----
echo "== pkg-config"
pc_version=$(pkg-config --modversion reserve 2>&1)
check "pkg-config --modversion reserve: $pc_version" test "$pc_version" = "$upstream"
pc_libdir=$(pkg-config --variable=libdir reserve 2>&1)
check "reserve.pc libdir: $pc_libdir" test "$pc_libdir" = "$libdir"
flags=$(pkg-config --cflags --libs reserve 2>&1)
check "pkg-config --cflags --libs reserve: $flags" test $? -eq 0
static_flags=$(pkg-config --static --cflags --libs reserve 2>&1)

# ---- a program outside the tree ----
cat >"$tmp/app.c" <<'EOF'
/* An application using the packaged libreserve. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mysql.h>
#include <reserve.h>

static int failures;
#define EXPECT(cond) do { if (!(cond)) { failures++; \
    fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); } } while (0)

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: app DATABASE TOKEN\n");
        return 2;
    }
    printf("header %s library %s\n", RSV_VERSION, rsv_version());
    EXPECT(strcmp(RSV_VERSION, rsv_version()) == 0);

    MYSQL *c = mysql_init(NULL);
    if (!mysql_real_connect(c, NULL, "root", NULL, argv[1], 0,
                            getenv("RSV_TEST_SOCKET"), 0)) {
        fprintf(stderr, "connect: %s\n", mysql_error(c));
        return 2;
    }
    rsv_options o;
    EXPECT(rsv_options_init(&o, RSV_OPTIONS_VERSION) == RSV_OK);
    rsv_ctx *ctx = NULL;
    int rc = rsv_open(&ctx, c, &o);
    if (rc != RSV_OK) {
        fprintf(stderr, "rsv_open: %s: %s\n", rsv_code_name(rc), rsv_errmsg(ctx));
        return 1;
    }
    const uint64_t shop = 7, item = 42, loc = 1;
    const char *token = argv[2];
    EXPECT(rsv_stock_set(ctx, shop, item, loc, 3) == RSV_OK);
    EXPECT(rsv_reserve_one(ctx, shop, token, strlen(token), item, loc, 2, 0) == RSV_OK);
    EXPECT(rsv_claim(ctx, shop, token, strlen(token)) == RSV_OK);
    EXPECT(rsv_claim(ctx, shop, token, strlen(token)) == RSV_ECLAIMED);
    int64_t on_hand = -1, held = -1, available = -1;
    EXPECT(rsv_stock_get(ctx, shop, item, loc, &on_hand, &held, NULL,
                         &available) == RSV_OK);
    printf("on_hand %lld held %lld available %lld\n", (long long)on_hand,
           (long long)held, (long long)available);
    EXPECT(on_hand == 1 && held == 0 && available == 1);
    if (failures)
        fprintf(stderr, "last message: %s\n", rsv_errmsg(ctx));
    rsv_close(ctx);
    mysql_close(c);
    printf("%s\n", failures ? "FAILED" : "OK");
    return failures ? 1 : 0;
}
EOF
CC=${CC:-cc}
echo "== build against the installed packages"
# shellcheck disable=SC2086
if (cd "$tmp" && $CC -Wall -Wextra -Werror app.c -o app-shared $flags) 2>"$tmp/cc-shared.log"; then
  pass "cc app.c \$(pkg-config --cflags --libs reserve)"
  check "app-shared has no rpath" bash -c "! readelf -d '$tmp/app-shared' | grep -qE 'RPATH|RUNPATH'"
  loaded=$(ldd "$tmp/app-shared" | awk '/libreserve/ {print $3}')
  check "app-shared loads $loaded" same_file "$loaded" "$libdir/libreserve.so.$major"
else
  cat "$tmp/cc-shared.log"
  fail "cc app.c \$(pkg-config --cflags --libs reserve)"
fi
# Only libreserve is linked statically; libmariadb and libc stay shared.
static_link=()
read -ra words <<<"$static_flags"
for w in "${words[@]}"; do
  if [ "$w" = -lreserve ]; then static_link+=("-Wl,-Bstatic" -lreserve "-Wl,-Bdynamic"); else static_link+=("$w"); fi
done
if (cd "$tmp" && $CC -Wall -Wextra -Werror app.c -o app-static "${static_link[@]}") 2>"$tmp/cc-static.log"; then
  pass "cc app.c against $libdir/libreserve.a (pkg-config --static)"
  check "app-static does not need libreserve.so" bash -c "! readelf -d '$tmp/app-static' | grep -q 'NEEDED.*libreserve'"
else
  cat "$tmp/cc-static.log"
  fail "cc app.c against $libdir/libreserve.a (pkg-config --static)"
fi

# ---- against a server ----
echo "== throwaway MariaDB"
if [ -z "${RSV_TEST_SOCKET:-}" ]; then
  dbdir=$(mktemp -d "${TMPDIR:-/tmp}/libreserve-db.XXXXXX")
  # In the background, so that a signal meanwhile runs the trap at once and
  # the trap can let the start finish before it stops the server.
  tools/mariadb.sh start "$dbdir" >"$tmp/socket" &
  startpid=$!
  if wait "$startpid"; then
    startpid=
    RSV_TEST_SOCKET=$(cat "$tmp/socket")
    export RSV_TEST_SOCKET
  else
    startpid=
    fail "start a throwaway MariaDB (tools/mariadb.sh start)"
    finish
  fi
fi
db=rsvdeb_$$
client=(mariadb --no-defaults -S "$RSV_TEST_SOCKET" -u "${RSV_TEST_USER:-root}")
[ -n "${RSV_TEST_PASSWORD:-}" ] && client+=(-p"$RSV_TEST_PASSWORD")
sql() { "${client[@]}" "$@"; }
check "CREATE DATABASE $db" sql -e "CREATE DATABASE $db"
check "mariadb $db < /usr/share/libreserve/schema.sql" sql "$db" </usr/share/libreserve/schema.sql
for kind in shared static; do
  [ -x "$tmp/app-$kind" ] || continue
  out=$("$tmp/app-$kind" "$db" "order-$kind" 2>&1); rc=$?
  indent <<<"$out"
  check "app-$kind: stock_set / reserve / claim" test $rc -eq 0
  check "app-$kind: rsv_version() == RSV_VERSION == $upstream" grep -qx "header $upstream library $upstream" <<<"$out"
done

# ---- rsv-admin ----
echo "== rsv-admin"
out=$(rsv-admin --version 2>&1)
check "rsv-admin --version: $out" test "$out" = "rsv-admin (libreserve $upstream)"
check "/usr/bin/rsv-admin has no rpath" bash -c "! readelf -d /usr/bin/rsv-admin | grep -qE 'RPATH|RUNPATH'"
loaded=$(ldd /usr/bin/rsv-admin | awk '/libreserve/ {print $3}')
check "rsv-admin loads $loaded" same_file "$loaded" "$libdir/libreserve.so.$major"
admin=(rsv-admin --no-defaults -S "$RSV_TEST_SOCKET" -u "${RSV_TEST_USER:-root}" -D "$db")
[ -n "${RSV_TEST_PASSWORD:-}" ] && admin+=(--password "$RSV_TEST_PASSWORD")
out=$("${admin[@]}" levels 7 2>&1); rc=$?
indent <<<"$out"
check "rsv-admin levels 7 (exit $rc)" test $rc -eq 0
check "rsv-admin audit --all" "${admin[@]}" audit --all
sql -e "DROP DATABASE $db" || true

# ---- the sweeper service ----
echo "== rsv-admin-sweep@.service"
for f in /lib/systemd/system/rsv-admin-sweep@.service /lib/systemd/system/rsv-admin-sweep@.timer; do
  check "$f" test -f "$f"
done
check "/etc/rsv-admin/default.cnf, a conffile" grep -qx /etc/rsv-admin/default.cnf /var/lib/dpkg/info/rsv-admin.conffiles
check "the timer is not enabled by the install (a template)" bash -c "! ls /etc/systemd/system/timers.target.wants/rsv-admin-sweep@* >/dev/null 2>&1"
check "examples: alert rules and dashboard" test -f /usr/share/doc/rsv-admin/examples/libreserve-alerts.yml -a -f /usr/share/doc/rsv-admin/examples/libreserve-dashboard.json
# The installed unit's command lines, exactly as written, against a
# throwaway database (tests/sweeper-unit-test.sh with the installed paths).
if RSV_UNIT_INSTALLED=1 RSV_ADMIN_BIN=/usr/bin/rsv-admin RSV_BUILD=$libdir tests/sweeper-unit-test.sh >"$tmp/unit.log" 2>&1; then
  pass "the installed sweeper service's ExecStart= lines sweep: $(tail -1 "$tmp/unit.log")"
else
  indent <"$tmp/unit.log"
  fail "the installed sweeper service's ExecStart= lines"
fi

# ---- manual pages ----
echo "== man"
# A minimised system (path-exclude in dpkg's configuration) or one without
# man-db installs no manual pages: say so instead of failing.
if ! command -v man >/dev/null 2>&1; then
  echo "skip man pages: man is not installed (apt-get install man-db)"
elif grep -qs '^path-exclude.*/usr/share/man' /etc/dpkg/dpkg.cfg /etc/dpkg/dpkg.cfg.d/*; then
  echo "skip man pages: dpkg is configured not to install /usr/share/man (path-exclude in /etc/dpkg/dpkg.cfg.d)"
else
  out=$(man -w rsv-admin 2>&1)
  check "man -w rsv-admin: $out" test "$out" = /usr/share/man/man1/rsv-admin.1.gz
  out=$(man -w 3 reserve 2>&1)
  check "man -w 3 reserve: $out" test "$out" = /usr/share/man/man3/reserve.3.gz
  # An alias page is a link to its page; it reads installed and compressed.
  alias_target=$(readlink man/rsv_cart_clear.3)
  check "man 3 rsv_cart_clear shows ${alias_target%.3}(3)" \
    bash -c "MANWIDTH=80 man 3 rsv_cart_clear 2>/dev/null | grep -q '${alias_target%.3}'"
fi

# ---- remove ----
echo "== dpkg --purge ${PKGS[*]}"
if dpkg --purge "${PKGS[@]}" >"$tmp/purge.log" 2>&1; then
  installed=0
  pass "dpkg --purge ${PKGS[*]}"
else
  cat "$tmp/purge.log"
  fail "dpkg --purge ${PKGS[*]}"
fi
for p in "${PKGS[@]}"; do
  check "$p gone from dpkg's database (dpkg -L fails)" bash -c "! dpkg -L '$p' >/dev/null 2>&1 && ! dpkg-query -W '$p' >/dev/null 2>&1"
done
left=()
for p in "${PKGS[@]}"; do
  while IFS= read -r path; do
    if [ -z "$path" ] || [ "$path" = /. ]; then continue; fi
    # /lib of the sweeper's units is, on a merged-/usr system, the
    # system's link to usr/lib: not the packages'
    if [ -L "$path" ] && [ -d "$path" ]; then continue; fi
    if [ -L "$path" ] || [ -f "$path" ]; then
      left+=("$path")
    elif [ -d "$path" ]; then
      # A directory stays only while another package owns it too.
      dpkg -S "$path" >/dev/null 2>&1 || left+=("$path/")
    fi
  done <"$tmp/$p.list"
done
check "no file or directory of the packages left (${#left[@]}: ${left[*]})" test ${#left[@]} -eq 0
check "ldconfig no longer knows libreserve" bash -c "! ldconfig -p | grep -q libreserve"
check "pkg-config no longer finds reserve" bash -c "! pkg-config --exists reserve"
finish
