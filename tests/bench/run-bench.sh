#!/usr/bin/env bash
# Runs the benchmark against the server in RSV_TEST_SOCKET and draws the
# plots.  Usage: tests/bench/run-bench.sh full|quick [bench options...]
# Normally started by 'make bench' / 'make bench-quick' under
# tools/mariadb.sh run; started by hand without RSV_TEST_SOCKET it starts
# its own throwaway server the same way.
#
# Writes build/bench/results-MODE.txt (the bench output, also on stdout);
# a full run also build/bench/results.txt, results.md and the plots
# build/bench/*.svg, a quick run its plot and table under build/bench/quick/.
set -euo pipefail
cd "$(dirname "$0")/../.."
mode=${1:-quick}
shift || true
case "$mode" in
  full) mode_args=() ;;
  quick) mode_args=(--quick) ;;
  *) echo "usage: $0 full|quick [bench options...]" >&2; exit 2 ;;
esac
if [ -z "${RSV_TEST_SOCKET:-}" ]; then
  exec tools/mariadb.sh run "$0" "$mode" "$@"
fi
out=build/bench
mkdir -p "$out"
for f in "$out/bench" "$out/proxy"; do
  [ -x "$f" ] || { echo "run-bench.sh: $f missing: run 'make bench-build'" >&2; exit 2; }
done
results="$out/results-$mode.txt"
start=$SECONDS
{
  echo "# machine: $(uname -srm), $(nproc) cpu(s), $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM"
  if [ -n "${RSV_TEST_SERVER_DIR:-}" ]; then
    echo "# server data directory: filesystem $(df -P -T "$RSV_TEST_SERVER_DIR" | awk 'NR==2 {print $2 " on " $1}')"
  fi
  echo "# load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$results"
cat "$results"
set +e
"$out/bench" "${mode_args[@]}" --proxy "$out/proxy" --outdir "$out" "$@" | tee -a "$results"
status=${PIPESTATUS[0]}
set -e
echo "# wall time: $((SECONDS - start)) s; load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$results"
[ "$status" -eq 0 ] || { echo "run-bench.sh: bench failed ($status)" >&2; exit "$status"; }
if [ "$mode" = full ]; then
  cp "$results" "$out/results.txt"
  python3 tests/bench/plot.py "$results" "$out"
else
  # a quick run never overwrites the plots of the last full run
  python3 tests/bench/plot.py "$results" "$out/quick"
fi
