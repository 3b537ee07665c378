#!/usr/bin/env bash
# The replication failover test (make check-replication).
#
# Owns a primary and a replica of MariaDB on 127.0.0.1 (ports picked in
# 15000-15099, private data directories under one mktemp directory, GTID
# replication, row-based binary log, durable commits on both), the load
# that runs against them (failover_load run), the failover (SIGKILL of the
# primary, the replica's relay log applied, the replica promoted) and the
# checks on the new primary (failover_load check, rsv-admin).
#
# Scenarios:
#   semisync   semi-synchronous replication, wait point AFTER_SYNC, a
#              timeout long enough that it never falls back to
#              asynchronous: passes when nothing acknowledged is missing,
#              the stock on hand is what the acknowledged claims leave, the
#              audit is clean and the primary never committed without the
#              replica (Rpl_semi_sync_master_no_tx = 0).
#   async-lag  asynchronous replication with the replica behind: its SQL
#              thread stopped 8 s before the crash, and its link to the
#              primary (through a relay, failover_load relay) stalled 4 s
#              before it.
#              A measurement: prints what a promotion without waiting for
#              the relay log would lose, what is lost after waiting, what
#              rsv_audit and rsv-admin say, and reconciles the lost claims
#              and releases from the clients' logs.  Passes when the
#              checker does find acknowledged work missing (it must: this
#              shows the semisync check can fail) and the reconciliation
#              leaves nothing acknowledged missing and the audit clean.
#   semisync-fallback
#              semi-synchronous replication (AFTER_SYNC) that gives up
#              waiting after 1 s (rpl_semi_sync_master_timeout), its link
#              to the replica stalled 8 s before the crash: the primary
#              falls back to asynchronous replication and goes on
#              acknowledging.  Passes when it did fall back and the
#              checker finds acknowledged work missing on the promoted
#              replica, as with async-lag.
#   semisync-fallback-ack
#              the same, the clients' contexts opened with
#              RSV_OPT_REPLICA_ACK: while the primary commits without the
#              replica they answer RSV_EINDOUBT and the clients repeat;
#              passes when it fell back and nothing acknowledged is
#              missing on the promoted replica, the audit clean.
#   async      asynchronous replication, replica keeping up (measurement
#              only; not run by default).
#
# Usage: tests/replication/run.sh [--runs N] [--keep] [SCENARIO...]
#   default scenarios: semisync async-lag semisync-fallback
#   semisync-fallback-ack.  RSV_BUILD names the build
#   directory (default build) holding replication/failover_load and
#   rsv-admin.  The last line is "replication: N passed, M failed"; the
#   exit status is non-zero when anything failed.  --keep keeps the
#   directory (logs, data) of every run; a failed run's logs are kept
#   anyway.  RSV_REPL_REPLICA_OPTS adds server options to the replica
#   (e.g. "--slave-parallel-threads=4"), RSV_REPL_CLIENTS sets the number
#   of clients (12), RSV_REPL_SEED the first run's seed.
set -euo pipefail
cd "$(dirname "$0")/../.."

build=${RSV_BUILD:-build}
load_bin=$build/replication/failover_load
admin_bin=$build/rsv-admin
runs=1
keep=0
scenarios=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    semisync|async-lag|async|semisync-fallback|semisync-fallback-ack) scenarios+=("$1"); shift ;;
    *) echo "usage: $0 [--runs N] [--keep] [semisync|async-lag|async|semisync-fallback|semisync-fallback-ack]..." >&2; exit 2 ;;
  esac
done
[ ${#scenarios[@]} -gt 0 ] || scenarios=(semisync async-lag semisync-fallback semisync-fallback-ack)
for f in "$load_bin" "$admin_bin"; do
  [ -x "$f" ] || { echo "replication: $f missing: run 'make B=$build replication-build'" >&2; exit 2; }
done
mariadbd=/usr/sbin/mariadbd
[ -x "$mariadbd" ] || mariadbd=$(command -v mariadbd) || { echo "replication: mariadbd not found (apt-get install mariadb-server)" >&2; exit 2; }
install_db=$(command -v mariadb-install-db) || { echo "replication: mariadb-install-db not found" >&2; exit 2; }
client=$(command -v mariadb) || { echo "replication: mariadb client not found" >&2; exit 2; }

# Timeline of a run, in seconds after the load starts.
kill_at=12        # SIGKILL the primary
sql_stop_at=4     # async-lag: the replica's SQL thread stops here
stall_at=8        # async-lag: and its link to the primary stalls here
after_failover=8  # the load goes on this long on the new primary
clients=${RSV_REPL_CLIENTS:-12}

work=""
load_pid=""
relay_pid=""
server_pids=()

# alive PID: running (an exited child of this shell stays a zombie until
# it is waited for; that does not count)
alive() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

stop_pid() { # stop_pid PID: SIGTERM, SIGKILL after 10 s, then reap it
  local pid=$1
  if alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do alive "$pid" || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

cleanup_run() {
  local ok=$1 p
  if [ -n "$load_pid" ]; then stop_pid "$load_pid"; load_pid=""; fi
  if [ -n "$relay_pid" ]; then
    kill -KILL "$relay_pid" 2>/dev/null || true # it may be stopped
    wait "$relay_pid" 2>/dev/null || true
    relay_pid=""
  fi
  for p in "${server_pids[@]}"; do stop_pid "$p"; done
  server_pids=()
  if [ -n "$work" ] && [ -d "$work" ]; then
    if [ "$ok" = 1 ] && [ "$keep" = 0 ]; then
      rm -rf "$work"
    else
      [ "$keep" = 1 ] || rm -rf "$work"/*/data
      echo "replication: logs kept in $work" >&2
    fi
  fi
  work=""
}
# nap S: sleep, interruptibly (a signal's trap runs at once, not after a
# foreground sleep ends)
nap() { sleep "$1" & wait $!; }

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Three free ports in 15000-15099: $p_port (primary), $r_port (replica),
# $l_port (the relay of the replica's link, async-lag only).
pick_ports() {
  local p found=()
  for p in $(shuf -i 15000-15099); do
    port_busy "$p" || found+=("$p")
    [ ${#found[@]} -eq 3 ] && break
  done
  [ ${#found[@]} -eq 3 ] || { echo "replication: no free ports in 15000-15099" >&2; return 1; }
  p_port=${found[0]}
  r_port=${found[1]}
  l_port=${found[2]}
}

sql() { # sql NAME QUERY: one query as root over NAME's socket, tab-separated
  "$client" --no-defaults --socket="$work/$1/mysqld.sock" -uroot -N -B -e "$2"
}

status_var() { # status_var NAME VARIABLE
  sql "$1" "SELECT variable_value FROM information_schema.global_status WHERE variable_name = '$2'"
}

slave_field() { # slave_field FIELD: one field of the replica's SHOW SLAVE STATUS
  # (not through sql: without column names, \G prints no field names)
  "$client" --no-defaults --socket="$work/r/mysqld.sock" -uroot -B \
      -e "SHOW SLAVE STATUS\G" | sed -n "s/^ *$1: //p"
}

start_server() { # start_server NAME PORT SERVER_ID [OPTION...]
  local name=$1 port=$2 id=$3 pid
  shift 3
  local dir=$work/$name user_opt=()
  [ "$(id -u)" = 0 ] && user_opt=(--user=root)
  mkdir -p "$dir/tmp"
  "$install_db" --no-defaults "${user_opt[@]}" --datadir="$dir/data" \
      --auth-root-authentication-method=normal --skip-test-db \
      >"$dir/install.log" 2>&1 || { cat "$dir/install.log" >&2; return 1; }
  # Durable on both servers: the redo log and the binary log are flushed at
  # every commit.  log-slave-updates: the replica, once promoted, has every
  # transaction in its own binary log.
  "$mariadbd" --no-defaults "${user_opt[@]}" --datadir="$dir/data" \
      --socket="$dir/mysqld.sock" --pid-file="$dir/mysqld.pid" \
      --tmpdir="$dir/tmp" --log-error="$dir/error.log" \
      --port="$port" --bind-address=127.0.0.1 --skip-name-resolve \
      --server-id="$id" --log-bin=binlog --binlog-format=ROW \
      --sync-binlog=1 --innodb-flush-log-at-trx-commit=1 \
      --log-slave-updates --gtid-strict-mode=ON --relay-log=relay \
      --skip-slave-start --innodb-buffer-pool-size=128M \
      --innodb-log-file-size=64M --max-connections=300 \
      --innodb-lock-wait-timeout=20 --character-set-server=utf8mb4 \
      --collation-server=utf8mb4_general_ci "$@" >/dev/null 2>&1 &
  pid=$!
  server_pids+=("$pid")
  echo "$pid" >"$dir/launcher.pid"
  for _ in $(seq 1 300); do
    if [ -S "$dir/mysqld.sock" ] && sql "$name" "SELECT 1" >/dev/null 2>&1; then
      return 0
    fi
    if ! alive "$pid"; then
      echo "replication: $name exited during start-up:" >&2
      tail -20 "$dir/error.log" >&2 || true
      return 1
    fi
    sleep 0.1
  done
  echo "replication: $name did not answer within 30 s" >&2
  return 1
}

# figure LINE KEY: the value of KEY=... in a "check[...]:" or "load:" line
figure() { sed -n "s/.*[ :]$2=\([-0-9.]*\).*/\1/p" <<<"$1" | head -1; }

# One run of one scenario.  Prints its figures; returns 0 on a pass.
run_scenario() {
  local scen=$1 seed=$2 t_start fail=()
  work=$(mktemp -d "${TMPDIR:-/tmp}/libreserve-repl.XXXXXX")
  pick_ports
  echo "== $scen (seed $seed, primary 127.0.0.1:$p_port, replica 127.0.0.1:$r_port)"
  local p_opts=() r_opts=(--read-only=ON) load_opts=() semi=0 fallback=0
  case "$scen" in
    semisync) semi=1 ;;
    semisync-fallback) semi=1 fallback=1 ;;
    semisync-fallback-ack) semi=1 fallback=1 load_opts=(--replica-ack) ;;
  esac
  # shellcheck disable=SC2206 # options, split on spaces on purpose
  r_opts+=(${RSV_REPL_REPLICA_OPTS:-})
  if [ $semi = 1 ]; then
    # A timeout far longer than the run: it must never fall back (in the
    # fallback scenarios 1 s: it must).  The primary turns semi-sync on
    # once the replica is attached (below): with nobody to acknowledge,
    # its first commit would wait out the timeout and switch it off.
    p_opts+=(--rpl-semi-sync-master-wait-point=AFTER_SYNC
             --rpl-semi-sync-master-timeout=$([ $fallback = 1 ] && echo 1000 || echo 60000))
    r_opts+=(--rpl-semi-sync-slave-enabled=ON)
  fi
  start_server p "$p_port" 1 "${p_opts[@]}"
  start_server r "$r_port" 2 "${r_opts[@]}"

  sql p "CREATE USER repl@'127.0.0.1' IDENTIFIED BY 'replpw';
         GRANT REPLICATION SLAVE ON *.* TO repl@'127.0.0.1';
         CREATE DATABASE shop;
         CREATE USER app@'127.0.0.1' IDENTIFIED BY 'apppw';
         GRANT SELECT, INSERT, UPDATE, DELETE, EXECUTE ON shop.* TO app@'127.0.0.1';"
  "$client" --no-defaults --socket="$work/p/mysqld.sock" -uroot shop <sql/schema.sql
  local link_port=$p_port
  if [ "$scen" = async-lag ] || [ $fallback = 1 ]; then
    "$load_bin" relay --listen "$l_port" --endpoints "127.0.0.1:$p_port" \
        >"$work/relay.out" 2>&1 &
    relay_pid=$!
    for _ in $(seq 1 50); do port_busy "$l_port" && break; sleep 0.1; done
    link_port=$l_port
  fi
  sql r "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=$link_port,
           MASTER_USER='repl', MASTER_PASSWORD='replpw',
           MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1;
         START SLAVE;"
  local pos
  pos=$(sql p "SELECT @@gtid_binlog_pos")
  [ "$(sql r "SELECT MASTER_GTID_WAIT('$pos', 30)")" = 0 ] ||
    { echo "replication: the replica did not catch up with the schema" >&2; return 1; }
  if [ $semi = 1 ]; then
    # the replica's receiver asks for semi-sync when it connects
    sql p "SET GLOBAL rpl_semi_sync_master_enabled = ON"
    sql r "STOP SLAVE IO_THREAD; START SLAVE IO_THREAD"
    for _ in $(seq 1 100); do
      [ "$(status_var p RPL_SEMI_SYNC_MASTER_CLIENTS)" = 1 ] && break
      sleep 0.1
    done
    [ "$(status_var p RPL_SEMI_SYNC_MASTER_STATUS)" = ON ] ||
      { echo "replication: semi-synchronous replication is not on" >&2; return 1; }
    [ "$(status_var p RPL_SEMI_SYNC_MASTER_NO_TX)" = 0 ] ||
      { echo "replication: commits without the replica before the load" >&2; return 1; }
  fi

  mkdir -p "$work/logs"
  t_start=$SECONDS
  "$load_bin" run --endpoints "127.0.0.1:$p_port,127.0.0.1:$r_port" \
      --user app --password apppw --database shop --logdir "$work/logs" \
      --clients "$clients" --after-failover "$after_failover" \
      --max-seconds 90 --setup --seed "$seed" "${load_opts[@]}" \
      >"$work/load.out" 2>"$work/load.err" &
  load_pid=$!
  local t0=$SECONDS
  if [ "$scen" = async-lag ]; then
    # The applier stops; then the link stalls while the IO thread still
    # runs (were both threads stopped, the next START SLAVE would delete
    # the relay log: MariaDB treats it as disposable with GTID).
    nap "$sql_stop_at"
    sql r "STOP SLAVE SQL_THREAD"
    nap $((stall_at - sql_stop_at))
    kill -STOP "$relay_pid"
    echo "replica: SQL thread stopped $((kill_at - sql_stop_at)) s and link stalled $((kill_at - stall_at)) s before the crash"
  elif [ $fallback = 1 ]; then
    # The link stalls: no acknowledgement comes, and after the timeout
    # the primary commits without one.
    nap "$sql_stop_at"
    kill -STOP "$relay_pid"
    echo "replica: link stalled $((kill_at - sql_stop_at)) s before the crash"
  fi
  local left=$((kill_at - (SECONDS - t0)))
  [ $left -gt 0 ] && nap "$left"
  alive "$load_pid" || { echo "replication: the load stopped before the crash:" >&2; cat "$work/load.err" >&2; return 1; }

  local no_tx="" yes_tx="" ss_status=""
  if [ $semi = 1 ]; then
    no_tx=$(status_var p RPL_SEMI_SYNC_MASTER_NO_TX)
    yes_tx=$(status_var p RPL_SEMI_SYNC_MASTER_YES_TX)
    ss_status=$(status_var p RPL_SEMI_SYNC_MASTER_STATUS)
  fi
  local committed
  committed=$(sql p "SELECT @@gtid_binlog_pos")
  local p_pid t_kill=$SECONDS
  p_pid=$(cat "$work/p/launcher.pid")
  kill -KILL "$p_pid"
  wait "$p_pid" 2>/dev/null || true # a child of this shell: reaped, gone
  echo "primary SIGKILLed at $kill_at s (its binary log a moment before: $committed)"

  # The stalled link goes with the primary.
  if [ -n "$relay_pid" ]; then
    kill -KILL "$relay_pid"
    wait "$relay_pid" 2>/dev/null || true
    relay_pid=""
  fi

  # What a promotion that does not wait for the relay log would have
  # (RESET SLAVE ALL deletes what was not applied): the replica as it is
  # at the crash, its SQL thread stopped there.  The IO thread keeps
  # trying to reconnect: with one of the two threads running, the relay
  # log is kept.
  [ "$(slave_field Slave_IO_Running)" != No ] ||
    { echo "replication: the IO thread stopped: the relay log would be deleted" >&2; return 1; }
  sql r "STOP SLAVE SQL_THREAD" 2>/dev/null || true
  local applied_pos out
  applied_pos=$(sql r "SELECT @@gtid_slave_pos")
  out=$("$load_bin" check --socket "$work/r/mysqld.sock" --database shop \
        --logdir "$work/logs" --label "promoted at once" 2>&1) || true
  echo "had the replica been promoted at the crash, without applying its relay log (not the verdict):"
  grep '^check\[' <<<"$out" | sed 's/^/  /' || { echo "$out" >&2; return 1; }

  # Failover: the old primary is dead (fenced); the replica applies what
  # it received, then is promoted.  The SQL thread is started before the
  # IO thread is stopped: never both stopped before the relay log is
  # applied.
  local t_f=$SECONDS io_pos
  sql r "START SLAVE SQL_THREAD"
  sql r "STOP SLAVE IO_THREAD"
  io_pos=$(slave_field Gtid_IO_Pos)
  [ -n "$io_pos" ] || { echo "replication: no Gtid_IO_Pos from the replica" >&2; return 1; }
  [ "$(sql r "SELECT MASTER_GTID_WAIT('$io_pos', 120)")" = 0 ] ||
    { echo "replication: the replica did not apply its relay log" >&2; return 1; }
  local t_applied=$SECONDS
  sql r "STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = OFF"
  [ $semi = 1 ] && sql r "SET GLOBAL rpl_semi_sync_slave_enabled = OFF"
  echo "replica: received up to $io_pos, applied up to $applied_pos at the crash; relay log applied in $((t_applied - t_f)) s; promoted $((SECONDS - t_kill)) s after the crash"

  local load_rc=0 waited=0
  while alive "$load_pid" && [ $waited -lt 1200 ]; do sleep 0.1; waited=$((waited + 1)); done
  if alive "$load_pid"; then
    echo "replication: the load did not stop" >&2
    stop_pid "$load_pid"
  fi
  wait "$load_pid" || load_rc=$?
  load_pid=""
  local load_line
  load_line=$(grep '^load:' "$work/load.out" || true)
  echo "$load_line"
  sed -n '1,20s/^/  /p' "$work/load.err"
  [ "$load_rc" = 0 ] || fail+=("the load failed (exit $load_rc)")
  [ "$(figure "$load_line" acked_others)" -gt 0 ] 2>/dev/null || fail+=("no outcome acknowledged by the new primary")
  [ "$(figure "$load_line" eintxn)" = 0 ] || fail+=("RSV_EINTXN on connections without a transaction of the client's (library bug)")

  # On the new primary: the acknowledged outcomes, the stock, the audit.
  # Where the replica was behind, the checker must find lost work.
  local check_rc=0 expect=()
  [ "$scen" = async-lag ] || [ "$scen" = semisync-fallback ] && expect=(--expect-loss)
  out=$("$load_bin" check --socket "$work/r/mysqld.sock" --database shop \
        --logdir "$work/logs" --label "new primary" "${expect[@]}" 2>&1) || check_rc=$?
  echo "$out"
  local line
  line=$(grep '^check\[new primary\]' <<<"$out" || true)
  [ -n "$line" ] || { fail+=("the check did not run (exit $check_rc)"); }
  local audit_rc=0
  echo "\$ rsv-admin audit 1"
  "$admin_bin" --no-defaults --socket "$work/r/mysqld.sock" --user root \
      --database shop audit 1 || audit_rc=$?

  case "$scen" in
    semisync)
      echo "semi-sync before the crash: status=$ss_status yes_tx=$yes_tx no_tx=$no_tx"
      [ "$check_rc" = 0 ] || fail+=("acknowledged outcomes missing or stock wrong on the new primary")
      [ "$audit_rc" = 0 ] || fail+=("rsv-admin audit found violations")
      [ "$no_tx" = 0 ] || fail+=("the primary committed without the replica (no_tx=$no_tx)")
      [ "${yes_tx:-0}" -gt 0 ] || fail+=("no semi-synchronous commit counted")
      if grep -qi 'semi-sync.*switch.*off\|timeout waiting for reply' "$work/p/error.log"; then
        fail+=("the primary's error log says semi-sync was switched off")
      fi
      ;;
    semisync-fallback-ack)
      echo "semi-sync before the crash: status=$ss_status yes_tx=$yes_tx no_tx=$no_tx (fell back)"
      [ "${no_tx:-0}" -gt 0 ] || fail+=("the primary never committed without the replica: the scenario did not fall back")
      [ "$check_rc" = 0 ] || fail+=("acknowledged outcomes missing or stock wrong on the new primary (RSV_OPT_REPLICA_ACK)")
      [ "$audit_rc" = 0 ] || fail+=("rsv-admin audit found violations")
      [ "$(figure "$load_line" indoubt)" -gt 0 ] 2>/dev/null || fail+=("no call answered in doubt while the primary committed alone")
      ;;
    async-lag|async|semisync-fallback)
      [ "$scen" = semisync-fallback ] && echo "semi-sync before the crash: status=$ss_status yes_tx=$yes_tx no_tx=$no_tx (fell back)"
      [ "$scen" != semisync-fallback ] || [ "${no_tx:-0}" -gt 0 ] || fail+=("the primary never committed without the replica: the scenario did not fall back")
      local tok
      tok=$(sed -n 's/^  missing: \([^ ]*\) (acknowledged claim.*/\1/p' <<<"$out" | head -1)
      [ -n "$tok" ] || tok=$(sed -n 's/^  missing: \([^ ]*\) .*/\1/p' <<<"$out" | head -1)
      if [ -n "$tok" ]; then
        echo "\$ rsv-admin checkout 1 $tok   (acknowledged to its buyer before the crash)"
        "$admin_bin" --no-defaults --socket "$work/r/mysqld.sock" --user root \
            --database shop checkout 1 "$tok" || true
      fi
      echo "\$ rsv-admin levels 1"
      "$admin_bin" --no-defaults --socket "$work/r/mysqld.sock" --user root \
          --database shop levels 1 || true
      local rec_rc=0 rec
      rec=$("$load_bin" check --socket "$work/r/mysqld.sock" --database shop \
            --logdir "$work/logs" --label "new primary" --reconcile 2>&1) || rec_rc=$?
      grep '^reconcile\|after reconciling\|^  reconcile' <<<"$rec" || true
      if [ "$scen" = async-lag ] || [ "$scen" = semisync-fallback ]; then
        # the same check that passes semisync must fail here
        [ "$check_rc" = 0 ] || fail+=("--expect-loss: the checker found no acknowledged hold or claim missing")
        [ "$rec_rc" = 0 ] || fail+=("reconciling from the logs left acknowledged claims missing or the audit unclean")
      fi
      ;;
  esac
  echo "time: $((SECONDS - t_start)) s"
  if [ ${#fail[@]} -eq 0 ]; then
    echo "$scen: PASS"
    return 0
  fi
  local f
  for f in "${fail[@]}"; do echo "$scen: FAIL: $f"; done
  return 1
}

passed=0
failed=0
base_seed=${RSV_REPL_SEED:-$(date +%s)}
n=0
for scen in "${scenarios[@]}"; do
  for _ in $(seq 1 "$runs"); do
    n=$((n + 1))
    # Each run in a subshell of its own: its servers and its load are
    # stopped by its EXIT trap whatever happens in it, also when this
    # script is interrupted (the signal is passed on to it).
    set +e
    (
      trap 'rc=$?; if [ $rc = 0 ]; then cleanup_run 1; else cleanup_run 0; fi' EXIT
      trap 'exit 130' INT TERM
      set -e
      run_scenario "$scen" $((base_seed + n))
    ) &
    sub=$!
    trap 'kill -TERM "$sub" 2>/dev/null; wait "$sub"; exit 130' INT TERM
    wait "$sub"
    rc=$?
    trap - INT TERM
    set -e
    if [ $rc = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  done
done
echo "replication: $passed passed, $failed failed"
[ "$failed" = 0 ]
