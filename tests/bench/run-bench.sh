#!/usr/bin/env bash
# Runs the benchmark in each server configuration asked for, each on fresh
# throwaway servers that it starts and stops, and draws the plots.
#
# Usage: tests/bench/run-bench.sh full|quick|stampede|crowd [--binlog 1|0|both]
#                                 [--semisync] [bench options...]
#   stampede       the refill stampede alone (bench --stampede): each
#                  fresh-server measurement on a server this script's
#                  configuration starts anew (RSV_BENCH_RESTART); not with
#                  --semisync
#   crowd          the crowd: the flash sale at 16, 64, 256 and 512
#                  buyers, each on a connection of its own, as threads of
#                  one process and again as processes of their own; the
#                  5-unit flash sale at 256; libreserve, the one-trip hot
#                  row and the one-trip floor; then the refill stampede
#                  with pool caps 50 and 1,000 (on fresh servers as in
#                  stampede).  Bench options given apply to every part
#                  (--rounds N).
#   --binlog 1     production durability, the headline (the default): the
#                  binary log on (ROW), sync_binlog=1,
#                  innodb_flush_log_at_trx_commit=1
#   --binlog 0     the binary log off (the redo log still flushed at every
#                  commit); both: 1, then 0
#   --semisync     also the semi-synchronous replica: binary log on, and a
#                  second server, 0.5 ms away through the delay proxy,
#                  acknowledges every commit (AFTER_SYNC).  A full run
#                  measures flash1, flash1q5 and claim1 at 64 clients there;
#                  a quick run the flash sale.
# Environment: B (build directory, default build; make bench-build first),
# RSV_MARIADB_OPTS (extra options for every server, after the
# configuration's own), RSV_TEST_SOCKET (use that server as it is, once,
# labelled from its own settings; --binlog and --semisync do not apply).
#
# Writes $B/bench/results-MODE.txt (every configuration's output, also on
# stdout); a full run also $B/bench/results.txt, results.md and the plots
# $B/bench/*.svg, a quick run its plots and table under $B/bench/quick/
# (a stampede run draws none).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=tests/bench/servers.sh
. tests/bench/servers.sh
B=${B:-build}
mode=${1:-quick}
shift || true
case "$mode" in
  full) mode_args=() ;;
  quick) mode_args=(--quick) ;;
  stampede) mode_args=(--stampede) ;;
  crowd) mode_args=(--quick) ;;
  *) sed -n '5,36p' "$0" >&2; exit 2 ;;
esac
binlog=1 semisync=0
while [ $# -gt 0 ]; do
  case "$1" in
    --binlog) [ $# -ge 2 ] || { echo "run-bench.sh: --binlog needs 1, 0 or both" >&2; exit 2; }
              binlog=$2; shift 2 ;;
    --semisync) semisync=1; shift ;;
    *) break ;;
  esac
done
configs=()
case "$binlog" in
  1) configs+=(binlog1) ;;
  0) configs+=(binlog0) ;;
  both) configs+=(binlog1 binlog0) ;;
  *) echo "run-bench.sh: --binlog takes 1, 0 or both" >&2; exit 2 ;;
esac
[ "$semisync" = 1 ] && configs+=(semisync)
if { [ "$mode" = stampede ] || [ "$mode" = crowd ]; } && [ "$semisync" = 1 ]; then
  echo "run-bench.sh: the stampede replaces its server, which a replica cannot follow: no --semisync" >&2
  exit 2
fi

out=$B/bench
mkdir -p "$out"
for f in "$out/bench" "$out/proxy"; do
  [ -x "$f" ] || { echo "run-bench.sh: $f missing: run 'make B=$B bench-build'" >&2; exit 2; }
done
results="$out/results-$mode.txt"
start=$SECONDS
{
  echo "# machine: $(uname -srm), $(nproc) cpu(s), $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM"
  echo "# load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$results"
cat "$results"

work=$(mktemp -d "${TMPDIR:-/tmp}/rsv-bench.XXXXXX")
cleanup() {
  local rc=$?
  # a failed run shows how its servers ended
  if [ $rc -ne 0 ]; then
    for l in "$work"/*/*/error.log "$work"/*/error.log; do
      [ -f "$l" ] && { echo "== ${l#"$work"/}" >&2; tail -n 20 "$l" >&2; }
    done
  fi
  bench_stop_all; rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# run_one LABEL SERVER_DIR [extra bench options...]: one bench run on the
# server in SERVER_DIR (empty: the caller's RSV_TEST_SOCKET).
run_one() {
  local label=$1 dir=$2 t0=$SECONDS status
  shift 2
  if [ -n "$dir" ]; then
    echo "# server data directory: filesystem $(df -P -T "$dir" | awk 'NR==2 {print $2 " on " $1}')" | tee -a "$results"
    export RSV_TEST_SOCKET=$dir/mysqld.sock RSV_TEST_SERVER_DIR=$dir
  fi
  mkdir -p "$out/$label"
  set +e
  "$out/bench" "${mode_args[@]}" --proxy "$out/proxy" --outdir "$out/$label" \
      "$@" | tee -a "$results"
  status=${PIPESTATUS[0]}
  set -e
  echo "# configuration $label: wall time $((SECONDS - t0)) s" | tee -a "$results"
  return "$status"
}

status=0
if [ -n "${RSV_TEST_SOCKET:-}" ]; then
  echo "# configuration given: the server at $RSV_TEST_SOCKET, as it is" | tee -a "$results"
  run_one given "" "$@" || status=$?
else
  for config in "${configs[@]}"; do
    dir=$work/$config
    echo "# configuration $config: starting its server(s)" | tee -a "$results"
    bench_start "$config" "$dir/primary"
    extra=()
    # The stampede's fresh servers: this configuration's, in the same
    # directory, the old one stopped and removed.
    export RSV_BENCH_RESTART=""
    { [ "$mode" = stampede ] || [ "$mode" = crowd ]; } &&
      RSV_BENCH_RESTART="bash -c '. tests/bench/servers.sh && bench_restart $config $dir/primary'"
    if [ "$config" = semisync ]; then
      bench_replica_up "$dir/primary" "$dir/replica" "$out/proxy" "$work"
      echo "# configuration semisync: the replica is a second server replicating with GTIDs through the delay proxy on 127.0.0.1:$bench_repl_port ($BENCH_REPLICA_RTT_US us round trip); rpl_semi_sync_master_wait_point=AFTER_SYNC, timeout $BENCH_SEMISYNC_TIMEOUT_MS ms" | tee -a "$results"
      semisync_workloads=flash1,flash1q5,claim1
      [ "$mode" = full ] && extra=(--workloads "$semisync_workloads" --clients 64
                                   --no-stmts --no-cold --no-profile)
    fi
    if [ "$mode" = crowd ]; then
      crowd_designs=(--designs libreserve,hotrow-1rt,floor-1rt --rtt-us 500)
      mode_args=(--quick)
      run_one "$config" "$dir/primary" "${crowd_designs[@]}" --workloads flash1 \
          --clients 16,64,256,512 "$@" || status=$?
      [ "$status" -eq 0 ] && { run_one "$config" "$dir/primary" "${crowd_designs[@]}" \
          --workloads flash1q5 --clients 256 "$@" || status=$?; }
      [ "$status" -eq 0 ] && { run_one "$config-processes" "$dir/primary" \
          "${crowd_designs[@]}" --processes --workloads flash1 \
          --clients 16,64,256,512 "$@" || status=$?; }
      mode_args=(--stampede)
      for cap in 50 1000; do
        [ "$status" -eq 0 ] && { run_one "$config-stampede-cap$cap" "$dir/primary" \
            --stampede-cap "$cap" "$@" || status=$?; }
      done
    else
      run_one "$config" "$dir/primary" "${extra[@]}" "$@" || status=$?
    fi
    if [ "$config" = semisync ]; then
      bench_replica_report "$dir/primary" "$dir/replica" "binlog=1 semisync=1" | tee -a "$results"
    fi
    bench_stop_all
    [ "$status" -eq 0 ] || break
  done
fi
echo "# wall time: $((SECONDS - start)) s; load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$results"
[ "$status" -eq 0 ] || { echo "run-bench.sh: bench failed ($status)" >&2; exit "$status"; }
if [ "$mode" = full ]; then
  cp "$results" "$out/results.txt"
  python3 tests/bench/plot.py "$results" "$out"
elif [ "$mode" = crowd ]; then
  python3 tests/bench/plot.py "$results" "$out/crowd"
elif [ "$mode" = quick ]; then
  # a quick run never overwrites the plots of the last full run
  python3 tests/bench/plot.py "$results" "$out/quick"
fi
