#!/usr/bin/env bash
# The PHP package installs as the README prints it, against the server in
# RSV_TEST_SOCKET:
#   - the library: make install into a temp prefix (PREFIX=..., no
#     ldconfig), found by the package through pkg-config (PKG_CONFIG_PATH),
#     LIBRESERVE_PATH unset;
#   - the package: the README's install lines (the block after "## Install"
#     that runs composer), run as printed in a new application directory
#     outside the tree, /path/to/libreserve standing for a copy of the
#     files git tracks under bindings/php (what a fresh clone has), with
#     composer offline: the application's composer.json switches
#     Packagist off and COMPOSER_DISABLE_NETWORK=1, so nothing is fetched;
#   - the README's quick start, run in that application with RSV_DSN
#     naming a database of the test server, sells, and run again, answers
#     the already-claimed checkout.
# Usage: tools/mariadb.sh run bindings/php/composer-install-test.sh (make
# check-php-install; make check runs it).  Skips (exit 0) without php,
# composer or pkg-config.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [ -z "${RSV_TEST_SOCKET:-}" ]; then
  echo "composer-install-test.sh: RSV_TEST_SOCKET is not set; use: tools/mariadb.sh run $0" >&2
  exit 2
fi
skip() { echo "skip php-install: $*"; exit 0; }
command -v php >/dev/null 2>&1 || skip "php is not installed (apt-get install php8.2-cli)"
command -v composer >/dev/null 2>&1 || skip "composer is not installed (apt-get install composer)"
command -v pkg-config >/dev/null 2>&1 || skip "pkg-config is not installed"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rsv-php-install.XXXXXX")
db=rsvtest_phpinst_$$
sql() { mariadb --no-defaults -uroot --socket="$RSV_TEST_SOCKET" -N -B "$@"; }
cleanup() { sql -e "DROP DATABASE IF EXISTS \`$db\`" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# The library, installed where only pkg-config knows it.
if ! make -C "$repo" --no-print-directory install PREFIX="$tmp/prefix" LDCONFIG=true >"$tmp/make-install.log" 2>&1; then
  tail -20 "$tmp/make-install.log"; echo "FAIL: make install"; exit 1
fi
unset LIBRESERVE_PATH
export PKG_CONFIG_PATH=$tmp/prefix/lib/pkgconfig
[ "$(pkg-config --variable=libdir reserve)" = "$tmp/prefix/lib" ] || bad "pkg-config does not see the temp prefix"

# What a clone has of the package: the files git tracks.
clone=$tmp/libreserve
mkdir -p "$clone"
(cd "$repo" && git ls-files -z bindings/php | xargs -0 cp --parents -t "$clone") || { echo "FAIL: copying the package"; exit 1; }
[ -f "$clone/bindings/php/composer.json" ] || { echo "FAIL: composer.json is not tracked"; exit 1; }

# The README's install block, and its quick start.
block() { # heading, fence language, line the block must contain
  awk -v head="$1" -v lang="$2" -v need="$3" '
    $0 == head { inside = 1; next }
    inside && /^## / { exit }
    inside && $0 == "```" lang { code = 1; buf = ""; next }
    inside && code && $0 == "```" { code = 0; if (index(buf, need)) { printf "%s", buf; exit } next }
    code { buf = buf $0 "\n" }' "$here/README.md"
}
block "## Install" sh "composer require" >"$tmp/install.sh"
block "## Quick start" php "Context::open" >"$tmp/quickstart.php"
[ -s "$tmp/install.sh" ] || { echo "FAIL: no install block in README.md"; exit 1; }
[ -s "$tmp/quickstart.php" ] || { echo "FAIL: no quick start in README.md"; exit 1; }
echo "== the README's install lines:"; cat "$tmp/install.sh"

app=$tmp/app
mkdir -p "$app" "$tmp/composer-home"
# An application of its own, offline (its other dependencies would come
# from Packagist).
echo '{"name": "example/shop", "repositories": {"packagist.org": false}}' >"$app/composer.json"
export COMPOSER_HOME=$tmp/composer-home COMPOSER_CACHE_DIR=$tmp/composer-cache
export COMPOSER_DISABLE_NETWORK=1 COMPOSER_NO_INTERACTION=1 COMPOSER_ALLOW_SUPERUSER=1
sed "s|/path/to/libreserve|$clone|g" "$tmp/install.sh" >"$tmp/install-here.sh"
if (cd "$app" && bash -e "$tmp/install-here.sh") >"$tmp/composer.log" 2>&1; then
  echo "ok: composer installed the package"
else
  cat "$tmp/composer.log"; bad "the install lines failed"
fi
[ -f "$app/vendor/autoload.php" ] || bad "no vendor/autoload.php in the application"
[ -e "$app/vendor/libreserve/libreserve/composer.json" ] || bad "the package is not in vendor/"
[ -x "$app/vendor/bin/libreserve-ffi-preload" ] || bad "vendor/bin/libreserve-ffi-preload is missing"

# The quick start, in the application, on a database of its own.
sql -e "CREATE DATABASE \`$db\`" && sql "$db" <"$repo/sql/schema.sql" || { echo "FAIL: test database"; exit 1; }
cp "$tmp/quickstart.php" "$app/quickstart.php"
export RSV_DSN="mariadb://root@/$db?socket=$(php -r 'echo rawurlencode($argv[1]);' "$RSV_TEST_SOCKET")"
out=$(cd "$app" && php quickstart.php 2>&1)
echo "== quickstart.php: $out"
[ "$out" = "sold 2 hoodies" ] || bad "the quick start printed: $out"
out=$(cd "$app" && php quickstart.php 2>&1)
echo "== quickstart.php again: $out"
[ "$out" = "checkout-9001 was already claimed" ] || bad "the quick start, run again, printed: $out"
out=$(cd "$app" && php -r 'require "vendor/autoload.php"; echo Libreserve\Library::path();')
[ "$out" = "$tmp/prefix/lib/libreserve.so.0" ] || bad "the library came from $out, not from pkg-config's libdir"
out=$(cd "$app" && php vendor/bin/libreserve-ffi-preload | sed -n 2p)
[ "$out" = "#define FFI_LIB \"$tmp/prefix/lib/libreserve.so.0\"" ] || bad "libreserve-ffi-preload wrote: $out"

if [ $fail = 0 ]; then echo "php-install: passed"; else echo "php-install: FAILED"; fi
exit $fail
