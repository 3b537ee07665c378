#!/usr/bin/env bash
# libreserve on a real 3-node MariaDB Galera cluster on 127.0.0.1.
#
# Installs what it needs (tools/deps.sh: as root with apt-get, no system
# service started), starts a throwaway cluster in a temporary
# directory (tests/galera/cluster.sh), and then, per run (one seed each):
# creates a database, loads sql/schema.sql on node 1, and runs
# galera_load: clients on all three nodes doing reserve / claim / release /
# sweep on a hot item and a few others while one node is SIGKILLed and
# rejoins; every acknowledged outcome is then checked, and rsv_audit() run
# on every node.  Before the runs (quick, long), the late-apply check
# (galera_load --late-apply: a node that has not applied a checkout yet
# answers about it as if it had) and rsv-admin migrate driven on the
# cluster (tests/galera/migrate-galera.sh).  Every server it started is stopped when it ends, also on
# failure or Ctrl-C.  The last line is "galera: N passed, M failed".
#
# Usage: tests/galera/run-galera.sh quick|long|partition|soak|repro|migrate
#   quick   3 runs of 30 s, 9 clients (make check-galera): node 1 and
#           then node 2 killed and brought back, then node 3 partitioned
#           away from the others for 8 s while alive, and healed
#   long    6 runs of 90 s, 12 clients (make check-galera-long), each
#           killing a node
#   partition  4 runs of 40 s, 9 clients (make check-galera-partition):
#           a node partitioned away for 12 s, a flapping partition, a
#           lossy link (30 % of the packets dropped) and a slow one
#           (64 kbytes/s), each for 12 s
#   soak    one run of 600 s (GALERA_DURATION), 9 clients (make
#           soak-galera): every kind of link failure on every node in
#           turn, 12 s each and 10 s apart, and every 15 s the load's
#           resident memory, open descriptors and its sessions on the
#           servers printed; they must end no higher than in the first
#           third of the run (allowing a quarter more memory)
# In the runs where a node's links fail the clients' call budget is 1 s
# (call_timeout_ms), shorter than the cluster takes to evict a silent
# node: a commit waiting for it must answer when the budget is spent.
#   repro   the minimal reproduction (repro_bf_abort) in its five modes
#           (make galera-repro); fails only if a mode libreserve relies on
#           (checked: its statements; proc, proc-checked: its procedures)
#           is not all or nothing
#   migrate the migration's stages set and changed through rsv-admin on
#           every node, two nodes at once (make check-galera-migrate;
#           also part of quick)
# Environment:
#   GALERA_BUILD     build directory with galera/galera_load (build)
#   GALERA_LIB       a directory whose libreserve.so.0 is loaded instead
#                    of the build's (e.g. another tree's build/)
#   GALERA_SCHEMA    the schema file to load (sql/schema.sql)
#   GALERA_RUNS, GALERA_DURATION, GALERA_CLIENTS, GALERA_SEED (first seed)
#   GALERA_FAULTS    the faults of the runs, in turn (e.g. "cut:3 flap:1")
#   GALERA_CALL_TIMEOUT_MS  the clients' call budget (call_timeout_ms)
#   GALERA_REPRO_MODES  the repro's modes to run (all five)
#   GALERA_RTT_US    clients reach the nodes through a delay proxy with
#                    this round trip (GALERA_PROXY: build/bench/proxy)
#   GALERA_KEEP=1    keep the directory (logs, data) after a pass; it is
#                    always kept after a failure
#   GALERA_PORT_BASE ports BASE+1..BASE+33 (14000), on the nodes' own
#                    loopback addresses GALERA_ADDR_PREFIX1..3 (127.0.14.)
set -euo pipefail
cd "$(dirname "$0")/../.."
mode=${1:-quick}
# The fault of each run, in turn: kill:N (SIGKILL node N, restart it),
# cut:N, flap:N, lossy:N, slow:N (node N's links to the others; N alive)
case "$mode" in
  quick) runs=3 duration=30 clients=9 faults=(kill:1 kill:2 cut:3) ;;
  long) runs=6 duration=90 clients=12 faults=(kill:1 kill:2 kill:3) ;;
  partition) runs=4 duration=40 clients=9
    faults=(cut:3 flap:1 lossy:2 slow:3) ;;
  soak) runs=1 duration=600 clients=9 faults=(soak:0) ;;
  repro) runs=0 duration=20 clients=3 faults=() ;;
  migrate) runs=0 duration=0 clients=0 faults=() ;;
  *) echo "usage: $0 quick|long|partition|soak|repro|migrate" >&2; exit 2 ;;
esac
runs=${GALERA_RUNS:-$runs}
duration=${GALERA_DURATION:-$duration}
clients=${GALERA_CLIENTS:-$clients}
seed=${GALERA_SEED:-$(( $(date +%s) % 100000 ))}
build=${GALERA_BUILD:-build}
schema=${GALERA_SCHEMA:-sql/schema.sql}

# ---- what the cluster needs, on top of tools/deps.sh test ----
tools/deps.sh test
tools/deps.sh packages galera-4 rsync iproute2 nftables
if [ -n "${GALERA_FAULTS:-}" ]; then
  read -r -a faults <<<"$GALERA_FAULTS"
fi

load=$build/galera/galera_load
# clients behind a delay proxy per node (tests/bench/proxy.c), ports
# BASE+41..43
proxy_args=()
if [ -n "${GALERA_RTT_US:-}" ]; then
  proxy=${GALERA_PROXY:-$build/bench/proxy}
  [ -x "$proxy" ] || { echo "run-galera.sh: $proxy missing: run 'make bench-build'" >&2; exit 2; }
  proxy_args=(--proxy "$proxy" --rtt-us "$GALERA_RTT_US" --proxy-port "$(( ${GALERA_PORT_BASE:-14000} + 41 ))")
fi
repro=$build/galera/repro_bf_abort
for f in "$load" "$repro" "$build/rsv-admin"; do
  [ -x "$f" ] || { echo "run-galera.sh: $f missing: run 'make galera-build'" >&2; exit 2; }
done
client=$(command -v mariadb || command -v mysql)
if [ -n "${GALERA_LIB:-}" ]; then
  [ -e "$GALERA_LIB/libreserve.so.0" ] || { echo "run-galera.sh: no libreserve.so.0 in $GALERA_LIB" >&2; exit 2; }
  export LD_LIBRARY_PATH="$GALERA_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/libreserve-galera.XXXXXX")
failed=0
cleanup() {
  local status=$?
  tests/galera/cluster.sh stop "$dir" || true
  if [ "$status" = 0 ] && [ "$failed" = 0 ] && [ -z "${GALERA_KEEP:-}" ]; then
    rm -rf "$dir"
  else
    rm -rf "$dir"/n*/data/ib* "$dir"/n*/data/galera.cache "$dir"/n*/tmp
    echo "run-galera.sh: logs kept in $dir" >&2
  fi
}
trap cleanup EXIT
trap 'failed=1; exit 130' INT TERM

start=$SECONDS
echo "# $(uname -srm), $(nproc) cpu(s), load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $("$client" --version)"
tests/galera/cluster.sh start "$dir"
echo "# cluster of 3 nodes up in $((SECONDS - start)) s ($dir)"

sql() {
  local n=$1
  shift
  "$client" --defaults-file="$dir/n$n/my.cnf" -N -B "$@"
}

if [ "$mode" = repro ]; then
  status=0
  for m in ${GALERA_REPRO_MODES:-binary text checked proc proc-checked}; do
    out=$("$repro" "$dir" "$m" "$duration" "$clients") || true
    echo "$out"
    if [ "$m" != binary ] && [ "$m" != text ] && ! echo "$out" | tail -1 | grep -q "all or nothing$"; then
      status=1
    fi
  done
  [ $status = 0 ] || failed=1
  echo "# wall time: $((SECONDS - start)) s"
  exit $status
fi

passed=0
fails=0
# A node that has not applied a checkout yet answers as if it had (the
# calls wait for it there), before the load runs.
if [ "$mode" = quick ] || [ "$mode" = long ]; then
  db=rsvgalera_late
  sql 1 -e "DROP DATABASE IF EXISTS $db; CREATE DATABASE $db"
  sql 1 "$db" <"$schema"
  for n in 1 2 3; do
    sql "$n" "$db" -e "SET SESSION wsrep_sync_wait = 15; SELECT COUNT(*) FROM rsv_ledger" >/dev/null
  done
  echo "== the late-apply check"
  if "$load" --dir "$dir" --db "$db" --late-apply; then
    passed=$((passed + 1))
    sql 1 -e "DROP DATABASE $db" || true
  else
    fails=$((fails + 1))
    failed=1
  fi
fi
# rsv-admin migrate on the cluster (its own database), before the load
if [ "$mode" = quick ] || [ "$mode" = migrate ]; then
  echo "== rsv-admin migrate on the cluster"
  if tests/galera/migrate-galera.sh "$dir" "$build"; then
    passed=$((passed + 1))
  else
    fails=$((fails + 1))
    failed=1
  fi
fi
for i in $(seq 1 "$runs"); do
  s=$((seed + i - 1))
  db="rsvgalera_$s"
  fault=${faults[$(( (i - 1) % ${#faults[@]} ))]}
  node=${fault#*:}
  case "${fault%%:*}" in
    kill) fault_args=(--kill-node "$node") what="node $node killed and brought back" ;;
    soak) fault_args=(--soak 15 --fault-seconds 12) what="faults on every node in turn" ;;
    cut|flap|lossy|slow)
      fault_args=("--${fault%%:*}-node" "$node" --fault-seconds "${GALERA_FAULT_SECONDS:-$([ "$mode" = quick ] && echo 8 || echo 12)}")
      what="node $node's links: ${fault%%:*}" ;;
    *) echo "run-galera.sh: unknown fault $fault" >&2; exit 2 ;;
  esac
  budget=${GALERA_CALL_TIMEOUT_MS:-$([ "${fault%%:*}" = kill ] || echo 1000)}
  if [ -n "$budget" ]; then fault_args+=(--call-timeout-ms "$budget"); fi
  echo "== run $i of $runs: seed $s, $clients clients, $duration s, $what"
  sql 1 -e "CREATE DATABASE $db"
  sql 1 "$db" <"$schema"
  # every node has the schema before a client starts
  for n in 1 2 3; do
    sql "$n" "$db" -e "SET SESSION wsrep_sync_wait = 15; SELECT COUNT(*) FROM rsv_ledger" >/dev/null
  done
  set +e
  "$load" --dir "$dir" --cluster-sh tests/galera/cluster.sh --db "$db" \
    --seed "$s" --clients "$clients" --duration "$duration" "${fault_args[@]}" \
    --addr-prefix "${GALERA_ADDR_PREFIX:-127.0.14.}" --port-base "${GALERA_PORT_BASE:-14000}" \
    "${proxy_args[@]}"
  rc=$?
  set -e
  if [ $rc = 0 ]; then
    passed=$((passed + 1))
    sql 1 -e "DROP DATABASE $db" || true
  else
    fails=$((fails + 1))
    failed=1
    echo "run-galera.sh: run $i (seed $s) failed; its database $db is kept" >&2
  fi
  # the next run starts on a whole cluster
  for n in 1 2 3; do
    if ! tests/galera/cluster.sh wait-synced "$dir" "$n" 240; then
      echo "run-galera.sh: node $n did not come back; no further runs" >&2
      fails=$((fails + runs - i))
      failed=1
      break 2
    fi
  done
done
echo "# wall time: $((SECONDS - start)) s; load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "galera: $passed passed, $fails failed"
[ "$fails" = 0 ]
