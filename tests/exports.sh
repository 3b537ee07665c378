#!/usr/bin/env bash
# The shared library exports exactly the functions in tests/exports.txt
# (every one prefixed rsv_), every function declared in the public header
# is in that list, and so is every symbol of the Debian package's symbols
# file (dpkg-gensymbols fails the package build on a difference).
set -eu
cd "$(dirname "$0")/.."
lib=${1:-build/libreserve.so}
actual=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBR]$/ {sub(/@.*/, "", $3); print $3}' | sort)
expected=$(grep -v '^#' tests/exports.txt | sort)
declared=$(cat include/reserve.h include/reserve/*.h | grep -oE '^RSV_EXTERN [^(]*\b(rsv_[a-z_0-9]+)\(' | grep -oE 'rsv_[a-z_0-9]+\($' | tr -d '(' | sort)
status=0
if [ "$actual" != "$expected" ]; then
  echo "exported symbols differ from tests/exports.txt:"; diff <(echo "$expected") <(echo "$actual") || true; status=1
fi
if [ "$declared" != "$expected" ]; then
  echo "header declarations differ from tests/exports.txt:"; diff <(echo "$expected") <(echo "$declared") || true; status=1
fi
packaged=$(grep -oE '^ rsv_[a-z_0-9]+@' debian/libreserve0.symbols | tr -d ' @' | sort)
if [ "$packaged" != "$expected" ]; then
  echo "debian/libreserve0.symbols differs from tests/exports.txt:"; diff <(echo "$expected") <(echo "$packaged") || true; status=1
fi
bad=$(echo "$actual" | grep -v '^rsv_' || true)
[ -z "$bad" ] || { echo "non-rsv_ exports: $bad"; status=1; }
[ $status = 0 ] && echo "exports: $(echo "$actual" | wc -l) symbols, all rsv_, all declared"
exit $status
