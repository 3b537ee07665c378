#!/usr/bin/env bash
# Runs the Ruby gem's tests (minitest, no rake: test/test_*.rb) against
# the server in RSV_TEST_SOCKET.  Start it under a throwaway server:
#   tools/mariadb.sh run bindings/ruby/ruby-test.sh [test files] [minitest args]
# (make check-ruby, and make check, install Debian's ruby and ruby-ffi
# first: mk/ruby.mk.)  Library: $LIBRESERVE_PATH if set, otherwise the
# in-tree build.  Without ruby, ffi or minitest it says why and skips
# (exit 0).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [ -z "${RSV_TEST_SOCKET:-}" ]; then
  echo "ruby-test.sh: RSV_TEST_SOCKET is not set; use: tools/mariadb.sh run $0" >&2
  exit 2
fi
skip() {
  echo "skip ruby: $*"
  echo "ruby: 0 passed, 0 failed, 1 skipped"
  exit 0
}
command -v ruby >/dev/null 2>&1 || skip "ruby is not installed (make ruby-deps installs it as root: apt-get install ruby ruby-ffi)"
ruby -e 'require "ffi"' >/dev/null 2>&1 || skip "the ffi gem is missing (apt-get install ruby-ffi)"
ruby -e 'require "minitest"' >/dev/null 2>&1 || skip "minitest is missing (apt-get install ruby-minitest)"
build=$repo/${RSV_BUILD:-build}
if [ -z "${LIBRESERVE_PATH:-}" ]; then
  [ -e "$build/libreserve.so.0" ] || { echo "ruby-test.sh: $build/libreserve.so.0 not built (make lib) and LIBRESERVE_PATH not set" >&2; exit 2; }
  export LIBRESERVE_PATH=$build/libreserve.so.0
fi
cd "$here" || exit 2
echo "$(ruby --version), ffi $(ruby -rffi -e 'print FFI::VERSION'), $LIBRESERVE_PATH"
# Arguments ending in .rb are test files (default: all); the others go
# to minitest (-v, -n NAME, --seed N).
case " $* " in *.rb\ *) ;; *) set -- test/test_*.rb "$@" ;; esac
exec ruby -w -Ilib -Itest -e '
  files = ARGV.select { |a| a.end_with?(".rb") }
  ARGV.replace(ARGV - files)
  files.each { |f| require File.expand_path(f) }' "$@"
