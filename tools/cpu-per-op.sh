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
#        tools/cpu-per-op.sh libreserve spread10k 64 500 --warm-spread
# Needs: make lib bench-build.  SAMPLE_S (default 10) is the window; the
# script sets the measurement's --duration-ms from it.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 4 ] || { sed -n '2,17p' "$0" >&2; exit 2; }
design=$1 workload=$2 clients=$3 rtt=$4; shift 4
sample=${SAMPLE_S:-10}
[ -x build/bench/bench ] || { echo "cpu-per-op: run make lib bench-build first" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/rsv-cpu.XXXXXX")
trap 'tools/mariadb.sh stop "$work/srv" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
tools/mariadb.sh start "$work/srv" >/dev/null
export RSV_TEST_SOCKET=$work/srv/mysqld.sock
# The measurement lasts long enough for the window, after a 1 s warm-up.
build/bench/bench --proxy build/bench/proxy --outdir "$work/out" \
    --designs "$design" --workloads "$workload" --clients "$clients" \
    --rtt-us "$rtt" --duration-ms $(( (sample + 6) * 1000 )) \
    --no-stmts --no-cold "$@" >"$work/result.txt" 2>"$work/progress.txt" &
bench=$!
# Wait for the measurement to start (setup loads the items first).
until grep -q "^bench: run " "$work/progress.txt" 2>/dev/null; do
  kill -0 "$bench" 2>/dev/null || { cat "$work/progress.txt" >&2; exit 1; }
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
wait "$bench" || { cat "$work/progress.txt" "$work/result.txt" >&2; exit 1; }
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
