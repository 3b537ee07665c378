#!/usr/bin/env bash
# tests/fuzz/run.sh BUILD_DIR TARGET [libFuzzer options...]
#
# Runs one libFuzzer target of tests/fuzz (used by mk/fuzz.mk): the working
# corpus BUILD_DIR/corpus/TARGET starts as a copy of the committed seeds in
# tests/fuzz/corpus/TARGET (new inputs go there, never into the seeds), a
# crash is saved as BUILD_DIR/crashes/TARGET-*, the full log is
# BUILD_DIR/TARGET.log.  Prints the number of inputs run, the time and the
# peak RSS; exits non-zero on a crash, a leak or a failed check.
set -u
cd "$(dirname "$0")/../.."
b=$1 t=$2; shift 2
mkdir -p "$b/corpus/$t" "$b/crashes"
cp -n tests/fuzz/corpus/"$t"/* "$b/corpus/$t/" 2>/dev/null || true
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
echo "== $t $*"
start=$(date +%s%N)
"$b/$t" "$@" -print_final_stats=1 -artifact_prefix="$b/crashes/$t-" \
  "$b/corpus/$t" >"$b/$t.log" 2>&1
st=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$b/$t.log")
rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$b/$t.log")
cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$b/$t.log" | tail -1)
printf -- '-- %s: exit %d, %s inputs in %d.%d s, %s, peak RSS %s MB (log %s)\n' \
  "$t" "$st" "${runs:-?}" $((ms / 1000)) $((ms % 1000 / 100)) "${cov:-cov ?}" "${rss:-?}" "$b/$t.log"
if [ $st != 0 ]; then
  grep -E 'check failed|ERROR|SUMMARY|AUDIT|Test unit written' "$b/$t.log" | head -20
  exit 1
fi
