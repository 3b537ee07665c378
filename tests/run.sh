#!/usr/bin/env bash
# Runs every test program given (built Check suites, the C++ caller, and
# the extra scripts after "--"), against the server in RSV_TEST_SOCKET.
# Prints each program's output and a closing "N passed, N failed" line;
# exits non-zero if anything failed.  RSV_BUILD names the build directory
# of the library under test (default build; build-asan for make check-asan).
set -u
cd "$(dirname "$0")/.."
passed=0; failed=0; failed_names=()
run_one() {
  local name=$1; shift
  echo "=== $name"
  local start=$SECONDS
  if "$@"; then
    passed=$((passed + 1)); echo "--- ok   $name ($((SECONDS - start)) s)"
  else
    failed=$((failed + 1)); failed_names+=("$name"); echo "--- FAIL $name ($((SECONDS - start)) s)"
  fi
}
progs=(); extras=(); seen_sep=0
for a in "$@"; do
  if [ "$a" = "--" ]; then seen_sep=1; continue; fi
  if [ $seen_sep = 1 ]; then extras+=("$a"); else progs+=("$a"); fi
done
run_one exports tests/exports.sh "${RSV_BUILD:-build}/libreserve.so"
for p in "${progs[@]}"; do
  run_one "$(basename "$p")" "$p"
done
for e in "${extras[@]}"; do
  [ -n "$e" ] && run_one "$(basename "$e")" $e
done
echo
[ $failed -gt 0 ] && echo "failed: ${failed_names[*]}"
echo "suites: $passed passed, $failed failed"
[ $failed -eq 0 ]
