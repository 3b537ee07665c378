#!/usr/bin/env bash
# The shared library exports exactly the functions in tests/exports.txt
# (every one prefixed rsv_), and every function declared in the public
# header is in that list.
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
bad=$(echo "$actual" | grep -v '^rsv_' || true)
[ -z "$bad" ] || { echo "non-rsv_ exports: $bad"; status=1; }
[ $status = 0 ] && echo "exports: $(echo "$actual" | wc -l) symbols, all rsv_, all declared"
exit $status
