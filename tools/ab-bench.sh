#!/usr/bin/env bash
# A/B benchmark of the library in this tree against an earlier revision.
#
# Runs on this machine are noisy (the same build's throughput moves by
# 10-20 % from one run to the next), so one run each of two versions says
# little.  This script builds REV in a temporary git worktree, then runs the
# benchmark (libreserve only, unless the options say otherwise) for the two
# versions in turns, ROUNDS times each, each run on a fresh throwaway
# MariaDB with its own version's sql/schema.sql, and prints for every
# measurement the median throughput and p99 of each version and their
# ratio.  The same bench binary (this tree's) runs both: the old library is
# swapped in with LD_LIBRARY_PATH.  The servers run in the benchmark's
# headline configuration (binary log on, synced at every commit;
# tests/bench/servers.sh) unless BINLOG=0.
#
# Usage: tools/ab-bench.sh REV [ROUNDS] [-- bench options]
#   default bench options: --workloads flash1 --clients 16,64,128
#                          --rtt-us 0,500 --designs libreserve
#   e.g. tools/ab-bench.sh HEAD~1 5 -- --workloads flash1 --clients 64
# Environment: B (this tree's build directory, default build), BINLOG (1
# or 0), RSV_MARIADB_OPTS (extra server options).
#
# Output: the raw "bench ..." lines (prefixed base1/new1 ...) and a table;
# logs are kept in $TMPDIR/rsv-ab.*/ (printed at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n '2,26p' "$0" >&2; exit 2; }
# shellcheck source=tests/bench/servers.sh
. tests/bench/servers.sh
B=${B:-build}
case "${BINLOG:-1}" in
  1) config=binlog1 ;;
  0) config=binlog0 ;;
  *) echo "ab-bench: BINLOG is 1 or 0" >&2; exit 2 ;;
esac
rev=$1; shift
rounds=3
if [ $# -gt 0 ] && [ "$1" != -- ]; then rounds=$1; shift; fi
[ "${1:-}" = -- ] && shift
opts=("$@")
[ ${#opts[@]} -gt 0 ] || opts=(--workloads flash1 --clients "16,64,128"
                               --rtt-us "0,500" --designs libreserve)
# one round per run: this script alternates the versions itself
opts+=(--rounds 1 --no-profile --no-stmts --no-cold)

work=$(mktemp -d "${TMPDIR:-/tmp}/rsv-ab.XXXXXX")
base=$work/base
git worktree add --detach -q "$base" "$rev"
cleanup() {
  bench_stop_all
  git worktree remove --force "$base" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
make -s B="$B" lib bench-build >/dev/null
make -s -C "$base" lib >/dev/null

here=$PWD
# (no pipe after the loop: it runs in this shell, so the trap knows every
# server it started)
: >"$work/lines.txt"
for i in $(seq 1 "$rounds"); do
  for v in base new; do
    if [ $v = base ]; then dir=$base; lib=$base/build; else dir=$here; lib=$here/$B; fi
    log=$work/$v$i.log
    mkdir -p "$work/$v$i"
    bench_start "$config" "$work/srv-$v$i"
    RSV_TEST_SOCKET=$work/srv-$v$i/mysqld.sock LD_LIBRARY_PATH=$lib \
        "$here/$B/bench/bench" --proxy "$here/$B/bench/proxy" \
        --schema "$dir/sql/schema.sql" --outdir "$work/$v$i" "${opts[@]}" \
        >"$log" 2>&1 ||
      { echo "ab-bench: run $v$i failed, see $log" >&2; exit 1; }
    bench_stop_all
    grep '^bench ' "$log" | sed "s/^/$v$i /" | tee -a "$work/lines.txt"
  done
done

python3 - "$work/lines.txt" "$rev" <<'EOF'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r'(base|new)\d+ bench design=(\S+) workload=(\S+) clients=(\d+) '
                 r'rtt_us=(\d+) (?:binlog=\d (?:semisync=1 )?)?ops_per_s=(\d+) '
                 r'p50_us=\d+ p99_us=(\d+)', line)
    if m:
        v, d, w, c, r, ops, p99 = m.groups()
        runs.setdefault((d, w, int(c), int(r)), {}).setdefault(v, []).append(
            (int(ops), int(p99)))
print("\n# medians over the rounds: base = %s, new = this tree" % sys.argv[2])
print("%-10s %-9s %7s %6s | %17s %17s %6s | %11s %11s" % (
    "design", "workload", "clients", "rtt_us", "base ops/s", "new ops/s",
    "new/base", "base p99", "new p99"))
for k in sorted(runs):
    b, n = runs[k].get("base", []), runs[k].get("new", [])
    if not b or not n:
        continue
    def med(xs, i): return statistics.median(x[i] for x in xs)
    def rng(xs): return "%d-%d" % (min(x[0] for x in xs), max(x[0] for x in xs))
    print("%-10s %-9s %7d %6d | %6d (%9s) %6d (%9s) %6.2f | %9.1fms %9.1fms" % (
        k[0], k[1], k[2], k[3], med(b, 0), rng(b), med(n, 0), rng(n),
        med(n, 0) / max(med(b, 0), 1), med(b, 1) / 1000, med(n, 1) / 1000))
EOF
echo "# logs: $work"
