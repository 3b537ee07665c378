#!/usr/bin/env bash
# Runs every test program given (built Check suites, the C++ caller, and
# the extra scripts after "--"), against the server in RSV_TEST_SOCKET.
# Prints each program's output and a closing "N passed, N failed" line;
# exits non-zero if anything failed.  RSV_BUILD names the build directory
# of the library under test (default build; build-asan for make check-asan).
# A failing program's last lines are printed again at the end, so a CI log
# that keeps only its tail still shows why.
#
# RSV_TESTS (make check TESTS=...) runs only the suites it names, by the
# name make check prints after "===" (check_lifecycle, go-test.sh ...) or
# a shorter form: without check_, without .sh/.py, without -test, or the
# directory it lives in (lifecycle, faults, go, python, layers ...).
# RSV_TESTS=list prints every suite's names instead of running any.
set -u
cd "$(dirname "$0")/.."
passed=0; failed=0; failed_names=()
logs=$(mktemp -d "${TMPDIR:-/tmp}/rsv-run.XXXXXX")
trap 'rm -rf "$logs"' EXIT
# The names a suite answers to in RSV_TESTS: name, then its path.
names_of() {
  local base=$1 path=${2:-$1} stem
  stem=${base%.sh}; stem=${stem%.py}
  local dir
  dir=$(basename "$(dirname "$path")")
  case $dir in .|tests) dir= ;; esac
  echo "$base" "$stem" "${stem%-test}" "${stem#check_}" $dir
}
wanted=()
matched=()
[ -n "${RSV_TESTS:-}" ] && [ "$RSV_TESTS" != list ] && read -r -a wanted <<<"$RSV_TESTS"
is_wanted() {
  [ -z "${RSV_TESTS:-}" ] && return 0
  if [ "$RSV_TESTS" = list ]; then echo "  $(names_of "$@" | tr ' ' '\n' | awk '!s[$0]++' | paste -sd' ')"; return 1; fi
  local n w
  for n in $(names_of "$@"); do
    for w in "${wanted[@]}"; do
      if [ "$n" = "$w" ]; then matched+=("$w"); return 0; fi
    done
  done
  return 1
}
run_one() {
  local name=$1; shift
  local path=$1
  case $name in exports|layers|headers) path=$name ;; esac
  is_wanted "$name" "$path" || return 0
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
if [ "${RSV_TESTS:-}" = list ]; then exit 0; fi
for w in ${wanted[@]+"${wanted[@]}"}; do
  case " ${matched[*]-} " in
    *" $w "*) ;;
    *) echo "no suite answers to \"$w\" (RSV_TESTS=list names them)"; failed=$((failed + 1)); failed_names+=("$w") ;;
  esac
done
echo "suites: $passed passed, $failed failed"
[ $failed -eq 0 ]
