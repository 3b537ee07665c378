# shellcheck shell=bash
# The server configurations of the benchmark, sourced by
# tests/bench/run-bench.sh, tools/ab-bench.sh and tools/cpu-per-op.sh.
#
#   binlog1   production durability, the headline: the binary log on
#             (ROW format, in the server's temp dir), synced at every
#             commit (sync_binlog=1), the redo log flushed at every commit
#             (innodb_flush_log_at_trx_commit=1)
#   binlog0   the binary log off; the redo log still flushed at every
#             commit
#   semisync  binlog1, and every commit waits until a semi-synchronous
#             replica has the transaction (AFTER_SYNC); the replica is a
#             second throwaway server, BENCH_REPLICA_RTT_US away (default
#             500) through the delay proxy on 127.0.0.1
#
# Every server is a tools/mariadb.sh server in a directory of its own; the
# options of RSV_MARIADB_OPTS (as the caller had it) are added after the
# configuration's own, so they win.  The caller sets a trap that calls
# bench_stop_all.

bench_user_opts=${RSV_MARIADB_OPTS:-}
bench_servers=()
bench_repl_proxy_pid=
bench_repl_proxy_fd=
# shellcheck disable=SC2034  # read by the scripts that source this file
bench_repl_port=
# Far above any acknowledgement time, so the primary never gives up on
# the replica during a run (Rpl_semi_sync_master_no_tx would count it).
BENCH_SEMISYNC_TIMEOUT_MS=${BENCH_SEMISYNC_TIMEOUT_MS:-60000}
BENCH_REPLICA_RTT_US=${BENCH_REPLICA_RTT_US:-500}

# bench_server_opts CONFIG DIR: the options of CONFIG (or "replica") for
# a server in DIR.  (tools/mariadb.sh splits them on blanks: DIR must have
# none.)
bench_server_opts() {
  local config=$1 dir=$2
  local binlog="--server-id=1 --log-bin=$dir/tmp/binlog --binlog-format=ROW"
  binlog+=" --sync-binlog=1 --innodb-flush-log-at-trx-commit=1"
  case $config in
    binlog1) echo "$binlog" ;;
    binlog0) echo "--skip-log-bin --innodb-flush-log-at-trx-commit=1" ;;
    semisync)
      echo "$binlog --rpl-semi-sync-master-enabled=ON" \
           "--rpl-semi-sync-master-wait-point=AFTER_SYNC" \
           "--rpl-semi-sync-master-timeout=$BENCH_SEMISYNC_TIMEOUT_MS" ;;
    replica) echo "--server-id=2 --rpl-semi-sync-slave-enabled=ON --skip-slave-start" ;;
    *) echo "servers.sh: unknown configuration $config" >&2; return 2 ;;
  esac
}

# bench_start CONFIG DIR: start a server of CONFIG in DIR (created).
bench_start() {
  local config=$1 dir=$2 opts
  opts=$(bench_server_opts "$config" "$dir") || return 2
  mkdir -p "$dir"
  bench_servers+=("$dir")
  RSV_MARIADB_OPTS="$opts $bench_user_opts" tools/mariadb.sh start "$dir" >/dev/null
}

# bench_restart CONFIG DIR: the server in DIR replaced by a freshly
# started one of CONFIG (the old one stopped, its directory removed).
bench_restart() {
  tools/mariadb.sh stop "$2" && rm -rf "$2" && bench_start "$1" "$2"
}

# bench_sql DIR SQL: run SQL on the server in DIR, rows tab-separated.
bench_sql() {
  mariadb --no-defaults -uroot -S "$1/mysqld.sock" -N -B -e "$2"
}

# bench_slave_field DIR FIELD: one field of SHOW SLAVE STATUS.
bench_slave_field() {
  mariadb --no-defaults -uroot -S "$1/mysqld.sock" -e "SHOW SLAVE STATUS\G" |
    awk -v f="$2" '{ sub(/^ +/, "") } index($0, f ": ") == 1 { print substr($0, length(f) + 3) }'
}

bench_status() {
  bench_sql "$1" "SHOW GLOBAL STATUS LIKE '$2'" | cut -f2
}

# bench_replica_up PRIMARY_DIR REPLICA_DIR PROXY_BIN WORK_DIR: start the
# replica of the semisync configuration, the delay proxy in front of the
# primary's socket (127.0.0.1, a port in 16000-16099), replicate with GTIDs
# through it, and wait until the primary counts the replica as a
# semi-synchronous client.  Sets bench_repl_port (call it in this shell,
# not in a command substitution: the proxy lives as long as this shell).
bench_replica_up() {
  local primary=$1 replica=$2 proxy=$3 work=$4
  bench_start replica "$replica" || return 1
  local fifo=$work/repl-proxy.in port="" i p
  rm -f "$fifo"
  mkfifo "$fifo"
  # The proxy stops when its standard input ends: this shell holds the
  # FIFO's write end, so the proxy ends with it whatever happens.
  for i in $(seq 0 99); do
    p=$((16000 + ($$ + i) % 100))
    "$proxy" --unix "$primary/mysqld.sock" --rtt-us "$BENCH_REPLICA_RTT_US" \
        --port "$p" <"$fifo" >"$work/repl-proxy.port" 2>"$work/repl-proxy.err" &
    bench_repl_proxy_pid=$!
    exec {bench_repl_proxy_fd}>"$fifo"
    local _
    for _ in $(seq 1 50); do
      [ -s "$work/repl-proxy.port" ] && break
      kill -0 "$bench_repl_proxy_pid" 2>/dev/null || break
      sleep 0.1
    done
    if [ -s "$work/repl-proxy.port" ]; then
      port=$(head -1 "$work/repl-proxy.port")
      break
    fi
    # the port is taken (or the proxy failed): the next one
    exec {bench_repl_proxy_fd}>&-
    kill "$bench_repl_proxy_pid" 2>/dev/null || true
    wait "$bench_repl_proxy_pid" 2>/dev/null || true
    bench_repl_proxy_pid=
  done
  if [ -z "$port" ]; then
    echo "servers.sh: no free port for the replication proxy in 16000-16099:" >&2
    cat "$work/repl-proxy.err" >&2
    return 1
  fi
  bench_sql "$replica" "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=$port,
      MASTER_USER='root', MASTER_PASSWORD='', MASTER_USE_GTID=slave_pos;
      START SLAVE" || return 1
  for i in $(seq 1 300); do
    if [ "$(bench_status "$primary" Rpl_semi_sync_master_clients)" = 1 ] &&
       [ "$(bench_status "$primary" Rpl_semi_sync_master_status)" = ON ]; then
      # shellcheck disable=SC2034  # read by the caller
      bench_repl_port=$port
      return 0
    fi
    sleep 0.1
  done
  echo "servers.sh: the replica did not connect as a semi-synchronous client in 30 s:" >&2
  echo "IO thread running: $(bench_slave_field "$replica" Slave_IO_Running)," \
       "last IO error: $(bench_slave_field "$replica" Last_IO_Error)" >&2
  tail -5 "$replica/error.log" >&2 || true
  return 1
}

# bench_replica_report PRIMARY_DIR REPLICA_DIR LABEL: after a run, the
# primary's semi-sync counters and whether the replica applied everything
# (waits at most 120 s for it).
bench_replica_report() {
  local primary=$1 replica=$2 label=$3 i want got="" sql_run err
  want=$(bench_sql "$primary" "SELECT @@gtid_binlog_pos")
  for i in $(seq 1 1200); do
    got=$(bench_sql "$replica" "SELECT @@gtid_slave_pos")
    [ "$got" = "$want" ] && break
    sleep 0.1
  done
  sql_run=$(bench_slave_field "$replica" Slave_SQL_Running)
  err=$(bench_slave_field "$replica" Last_SQL_Error)
  echo "# semisync $label: whole run: Rpl_semi_sync_master_yes_tx=$(bench_status "$primary" Rpl_semi_sync_master_yes_tx)" \
       "Rpl_semi_sync_master_no_tx=$(bench_status "$primary" Rpl_semi_sync_master_no_tx) (must stay 0)"
  if [ "$got" = "$want" ]; then
    echo "# semisync $label: the replica applied every transaction (gtid $want), SQL thread running=$sql_run"
  else
    echo "# semisync $label: the replica had not applied every transaction after 120 s" \
         "(primary $want, replica $got, SQL thread running=$sql_run, last error: ${err:-none})"
  fi
}

# bench_stop_all: the replication proxy and every server started here.
bench_stop_all() {
  if [ -n "$bench_repl_proxy_fd" ]; then
    exec {bench_repl_proxy_fd}>&- 2>/dev/null || true
    bench_repl_proxy_fd=
  fi
  if [ -n "$bench_repl_proxy_pid" ]; then
    kill "$bench_repl_proxy_pid" 2>/dev/null || true
    wait "$bench_repl_proxy_pid" 2>/dev/null || true
    bench_repl_proxy_pid=
  fi
  local d
  for d in "${bench_servers[@]}"; do
    tools/mariadb.sh stop "$d" || true
  done
  bench_servers=()
}
