#!/usr/bin/env bash
# CPU per operation of one benchmark measurement, split by process.
#
# On this kind of machine the server, the benchmark's client threads and
# the network proxy share the same cores, so a design's throughput under
# load is about (cores / CPU per operation).  This script runs ONE
# measurement (one design, one workload, one client count, one RTT) on a
# fresh throwaway MariaDB, samples the CPU time of the server, the
# benchmark process and the proxy over the middle of the measurement
# (from /proc/PID/stat), and prints the benchmark's line and the cores
# each process kept busy and its CPU per operation.  It asserts nothing.
#
# Usage: tools/cpu-per-op.sh DESIGN WORKLOAD CLIENTS RTT_US [bench options]
#   e.g. tools/cpu-per-op.sh libreserve flash1 64 500
#        tools/cpu-per-op.sh hotrow-1rt flash1 64 500
#        tools/cpu-per-op.sh libreserve spread10k 64 500 --warm-spread
# Needs: make B=... lib bench-build.  SAMPLE_S (default 10) is the window;
# the script sets the measurement's --duration-ms from it.  The server
# runs in the benchmark's headline configuration (binary log on, synced at
# every commit; tests/bench/servers.sh) unless BINLOG=0.  B is the build
# directory (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 4 ] || { sed -n '2,21p' "$0" >&2; exit 2; }
# shellcheck source=tests/bench/servers.sh
. tests/bench/servers.sh
B=${B:-build}
design=$1 workload=$2 clients=$3 rtt=$4; shift 4
sample=${SAMPLE_S:-10}
case "${BINLOG:-1}" in
  1) config=binlog1 ;;
  0) config=binlog0 ;;
  *) echo "cpu-per-op: BINLOG is 1 or 0" >&2; exit 2 ;;
esac
[ -x "$B/bench/bench" ] || { echo "cpu-per-op: run make B=$B lib bench-build first" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/rsv-cpu.XXXXXX")
bench=
cleanup() {
  [ -n "$bench" ] && kill "$bench" 2>/dev/null && wait "$bench" 2>/dev/null
  bench_stop_all >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
bench_start "$config" "$work/srv"
export RSV_TEST_SOCKET=$work/srv/mysqld.sock
# The measurement lasts long enough for the window, after a 1 s warm-up.
"$B/bench/bench" --proxy "$B/bench/proxy" --outdir "$work/out" \
    --designs "$design" --workloads "$workload" --clients "$clients" \
    --rtt-us "$rtt" --duration-ms $(( (sample + 6) * 1000 )) --rounds 1 \
    --no-stmts --no-cold --no-profile "$@" >"$work/result.txt" 2>"$work/progress.txt" &
bench=$!
# Wait for the measurement to start (setup loads the items first).
for i in $(seq 1 3000); do
  grep -q "^bench: run " "$work/progress.txt" 2>/dev/null && break
  kill -0 "$bench" 2>/dev/null || { cat "$work/progress.txt" >&2; exit 1; }
  [ "$i" -lt 3000 ] || { echo "cpu-per-op: the measurement did not start in 10 minutes" >&2; exit 1; }
  sleep 0.2
done
sleep 3
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
server=$(cat "$work/srv/mysqld.pid")
proxy=$(pgrep -x -P "$bench" proxy | head -1 || true)
s0=$(ticks "$server") b0=$(ticks "$bench") p0=0
[ -n "$proxy" ] && p0=$(ticks "$proxy")
sleep "$sample"
s1=$(ticks "$server") b1=$(ticks "$bench") p1=0
[ -n "$proxy" ] && p1=$(ticks "$proxy")
# A failed measurement says why before the trap removes its logs.
wait "$bench" || { bench=; cat "$work/progress.txt" "$work/result.txt" >&2; exit 1; }
bench=
line=$(grep "^bench design=" "$work/result.txt")
echo "$line"
grep "^# lib design=" "$work/result.txt" | head -1 || true
ops=${line##*ops_per_s=}
ops=${ops%% *}
hz=$(getconf CLK_TCK)
awk -v s=$((s1 - s0)) -v b=$((b1 - b0)) -v p=$((p1 - p0)) -v hz="$hz" \
    -v t="$sample" -v ops="$ops" 'BEGIN {
  cs = s / hz / t; cb = b / hz / t; cp = p / hz / t;
  printf "cpu cores: server=%.2f bench=%.2f proxy=%.2f total=%.2f\n",
         cs, cb, cp, cs + cb + cp;
  if (ops > 0)
    printf "cpu us/op: server=%.0f bench=%.0f proxy=%.0f total=%.0f\n",
           cs / ops * 1e6, cb / ops * 1e6, cp / ops * 1e6,
           (cs + cb + cp) / ops * 1e6;
}'
