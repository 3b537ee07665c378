#!/usr/bin/env bash
# Runs the PHP package's PHPUnit suite (tests/*Test.php) against the server
# in RSV_TEST_SOCKET.  Start it under a throwaway server:
#   tools/mariadb.sh run bindings/php/php-test.sh [phpunit args]
# (make check-php; make check installs php8.2-cli and phpunit first:
# mk/php.mk.)  Library: $LIBRESERVE_PATH if set, otherwise the in-tree
# build.  Without PHP, its FFI extension or PHPUnit it says why and skips
# (exit 0).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [ -z "${RSV_TEST_SOCKET:-}" ]; then
  echo "php-test.sh: RSV_TEST_SOCKET is not set; use: tools/mariadb.sh run $0" >&2
  exit 2
fi
skip() {
  echo "skip php: $*"
  echo "php: 0 passed, 0 failed, 1 skipped"
  exit 0
}
command -v php >/dev/null 2>&1 || skip "php is not installed (make php-deps installs it as root: apt-get install php8.2-cli phpunit)"
php -r 'exit(extension_loaded("ffi") ? 0 : 1);' || skip "this PHP has no FFI extension (Debian's php8.2-cli has it)"
command -v phpunit >/dev/null 2>&1 || skip "phpunit is not installed (apt-get install phpunit)"
build=$repo/${RSV_BUILD:-build}
if [ -z "${LIBRESERVE_PATH:-}" ]; then
  [ -e "$build/libreserve.so.0" ] || { echo "php-test.sh: $build/libreserve.so.0 not built (make lib) and LIBRESERVE_PATH not set" >&2; exit 2; }
  export LIBRESERVE_PATH=$build/libreserve.so.0
fi
cd "$here" || exit 2
for f in $(git ls-files '*.php' 2>/dev/null || find . -name '*.php'); do
  php -l "$f" >/dev/null || { echo "php-test.sh: $f does not parse"; exit 1; }
done
echo "$(php -r 'echo "PHP ", PHP_VERSION;'), $(phpunit --version | head -1), $LIBRESERVE_PATH"
exec phpunit --configuration phpunit.xml "$@"
