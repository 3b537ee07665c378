#!/usr/bin/env bash
# tests/pictures-test.sh - the pictures committed in docs/img/ are what
# tests/bench/plot.py draws from the records committed beside them (make
# pictures draws them again).  Needs no database.
set -u
cd "$(dirname "$0")/.." || exit 1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rsv-pictures.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
check() { # WHAT RECORD PICTURE
  if python3 tests/bench/plot.py "$1" "$2" "$tmp/out.svg" >/dev/null &&
     cmp -s "$tmp/out.svg" "$3"; then
    pass=$((pass + 1)); echo "ok   $3 drawn from $2"
  else
    fail=$((fail + 1)); echo "FAIL $3 is not what plot.py $1 draws from $2 (make pictures)"
  fi
}
check --headline docs/img/bench-quick.txt docs/img/bench-headline.svg
check --backlog docs/img/sweep-backlog.txt docs/img/sweep-backlog.svg
check --crowd docs/img/bench-crowd.txt docs/img/bench-crowd.svg
echo "pictures-test: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
