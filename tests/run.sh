#!/usr/bin/env bash
# Runs every test program given (built Check suites, the C++ caller, and
# the extra scripts after "--"), against the server in RSV_TEST_SOCKET.
# Prints each program's output and a closing "N passed, N failed" line;
# exits non-zero if anything failed.  RSV_BUILD names the build directory
# of the library under test (default build; build-asan for make check-asan).
# A failing program's last lines are printed again at the end, so a CI log
# that keeps only its tail still shows why.
set -u
cd "$(dirname "$0")/.."
passed=0; failed=0; failed_names=()
logs=$(mktemp -d "${TMPDIR:-/tmp}/rsv-run.XXXXXX")
trap 'rm -rf "$logs"' EXIT
run_one() {
  local name=$1; shift
  echo "=== $name"
  local start=$SECONDS rc
  "$@" 2>&1 | tee "$logs/$name.log"
  rc=${PIPESTATUS[0]}
  if [ $rc = 0 ]; then
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
layer_builds=("${RSV_BUILD:-build}")
[ -d "${RSV_BUILD:-build}/fault/lib" ] && layer_builds+=("${RSV_BUILD:-build}/fault")
run_one layers tests/layers.sh "${layer_builds[@]}"
run_one headers tests/headers-test.sh
for p in "${progs[@]}"; do
  run_one "$(basename "$p")" "$p"
done
for e in "${extras[@]}"; do
  [ -n "$e" ] && run_one "$(basename "$e")" $e
done
echo
for n in ${failed_names[@]+"${failed_names[@]}"}; do
  echo "--- last lines of $n:"
  tail -n 40 "$logs/$n.log"
done
[ $failed -gt 0 ] && echo "failed: ${failed_names[*]}"
echo "suites: $passed passed, $failed failed"
[ $failed -eq 0 ]
