#!/usr/bin/env bash
# Throwaway MariaDB for tests, benchmarks and the demo.
#
# Owns the life of a private server: a fresh data directory under a temp dir,
# a private Unix socket, no TCP port, durable commits. Never touches the
# system service. Usage:
#   tools/mariadb.sh run CMD [ARGS...]   start a server, run CMD with
#                                        RSV_TEST_SOCKET set, stop and remove
#                                        the server afterwards (also on
#                                        failure or Ctrl-C); exits with CMD's
#                                        status
#   tools/mariadb.sh start DIR           start a server in DIR (for manual use)
#   tools/mariadb.sh stop DIR            stop the server in DIR
#   tools/mariadb.sh resume DIR          start the server again on the data
#                                        directory already in DIR (after a
#                                        crash: the fault-injection stress)
#
# If RSV_TEST_SOCKET is already set, "run" uses that server instead of
# starting one (the caller owns it; RSV_TEST_USER / RSV_TEST_PASSWORD apply).
# Extra server options can be passed in RSV_MARIADB_OPTS.
set -euo pipefail

find_bin() {
  for b in "$@"; do
    for d in /usr/sbin /usr/bin /usr/local/sbin /usr/local/bin; do
      [ -x "$d/$b" ] && { echo "$d/$b"; return 0; }
    done
    command -v "$b" 2>/dev/null && return 0
  done
  return 1
}

start_server() {
  local dir=$1 resume=${2:-}
  local mariadbd install_db
  mariadbd=$(find_bin mariadbd mysqld) || { echo "mariadb.sh: mariadbd not found (apt-get install mariadb-server)" >&2; return 1; }
  install_db=$(find_bin mariadb-install-db mysql_install_db) || { echo "mariadb.sh: mariadb-install-db not found" >&2; return 1; }
  mkdir -p "$dir/data" "$dir/tmp"
  local user_opt=()
  [ "$(id -u)" = 0 ] && user_opt=(--user=root)
  if [ "$resume" != resume ]; then
    "$install_db" --no-defaults "${user_opt[@]}" --datadir="$dir/data" \
        --auth-root-authentication-method=normal --skip-test-db \
        >"$dir/install.log" 2>&1 || { cat "$dir/install.log" >&2; return 1; }
  fi
  # Durable settings: flush the redo log at every commit, doublewrite on.
  # skip-networking: clients (and the test proxy) use the private socket.
  # shellcheck disable=SC2086
  "$mariadbd" --no-defaults "${user_opt[@]}" --datadir="$dir/data" \
      --socket="$dir/mysqld.sock" --pid-file="$dir/mysqld.pid" \
      --tmpdir="$dir/tmp" --skip-networking --log-error="$dir/error.log" \
      --innodb-flush-log-at-trx-commit=1 --sync-binlog=0 \
      --innodb-buffer-pool-size=256M --innodb-log-file-size=256M \
      --max-connections=1000 --max-prepared-stmt-count=200000 \
      --innodb-lock-wait-timeout=20 \
      --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
      ${RSV_MARIADB_OPTS:-} >/dev/null 2>&1 &
  echo $! >"$dir/mariadbd.pid.launcher"
  local i
  for i in $(seq 1 300); do
    if [ -S "$dir/mysqld.sock" ] && "$(find_bin mariadb-admin mysqladmin)" --no-defaults \
        --socket="$dir/mysqld.sock" -uroot ping >/dev/null 2>&1; then
      return 0
    fi
    if ! kill -0 "$(cat "$dir/mariadbd.pid.launcher")" 2>/dev/null; then
      echo "mariadb.sh: server exited during start-up:" >&2
      tail -20 "$dir/error.log" >&2 || true
      return 1
    fi
    sleep 0.1
  done
  echo "mariadb.sh: server did not answer within 30 s" >&2
  tail -20 "$dir/error.log" >&2 || true
  return 1
}

stop_server() {
  local dir=$1 pid=""
  [ -f "$dir/mysqld.pid" ] && pid=$(cat "$dir/mysqld.pid" 2>/dev/null || true)
  [ -z "$pid" ] && [ -f "$dir/mariadbd.pid.launcher" ] && pid=$(cat "$dir/mariadbd.pid.launcher")
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    local i
    for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
}

cmd=${1:-}
shift || true
case "$cmd" in
  start) start_server "$1"; echo "$1/mysqld.sock" ;;
  stop)  stop_server "$1" ;;
  resume) start_server "$1" resume; echo "$1/mysqld.sock" ;;
  run)
    if [ -n "${RSV_TEST_SOCKET:-}" ]; then
      exec "$@"
    fi
    dir=$(mktemp -d "${TMPDIR:-/tmp}/libreserve-db.XXXXXX")
    cleanup() { stop_server "$dir"; rm -rf "$dir"; }
    trap cleanup EXIT
    trap 'exit 130' INT TERM
    start_server "$dir"
    export RSV_TEST_SOCKET="$dir/mysqld.sock" RSV_TEST_SERVER_DIR="$dir"
    set +e
    "$@"
    status=$?
    set -e
    exit $status
    ;;
  *) echo "usage: $0 run CMD... | start DIR | stop DIR | resume DIR" >&2; exit 2 ;;
esac
