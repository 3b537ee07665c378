#!/usr/bin/env bash
# A throwaway 3-node MariaDB Galera cluster on loopback, for the Galera
# test (tests/galera/run-galera.sh).
#
# Owns the life of the nodes: one directory per node under DIR (data
# directory, socket, option file, error log), the ports they listen on,
# bootstrapping node 1 and joining the others, killing a node with SIGKILL
# and bringing it back (wsrep recovery first, so it can rejoin by IST),
# and stopping every node it started.  Never touches the system service.
#
#   cluster.sh start DIR          create and start nodes 1-3 (node 1
#                                 bootstraps, 2 and 3 join by SST)
#   cluster.sh stop DIR           stop every node of DIR (SIGTERM, then
#                                 SIGKILL after 30 s)
#   cluster.sh kill DIR N         SIGKILL node N
#   cluster.sh restart DIR N      start node N again on its data directory
#                                 and wait until it is synced
#   cluster.sh wait-synced DIR N  wait until node N is synced
#   cluster.sh socket DIR N       print node N's socket
#   cluster.sh cut DIR N [PCT]    partition node N away from the others,
#                                 both alive: every packet between them
#                                 dropped, or with PCT only that share of
#                                 them, at random (a lossy link)
#   cluster.sh slow DIR N KBPS    limit the links between node N and the
#                                 others to KBPS kbytes/s each way (the
#                                 excess dropped)
#   cluster.sh heal DIR           remove every rule cut or slow made
#
# The rules live in an nftables table of their own (libreserve_galera_BASE,
# on the output hook, matching only the nodes' addresses), so healing, and
# stop, delete exactly what was added; no qdisc is touched (a shaper on lo
# would slow every other program on the machine).
#
# Ports (all below 32768): node N listens for clients on BASE+N, for Galera
# on BASE+10+N, receives IST on BASE+20+N and SST on BASE+30+N, with BASE =
# GALERA_PORT_BASE (default 14000).  Extra server options for every node
# can be given in GALERA_MARIADB_OPTS (e.g. --wsrep-retry-autocommit=0).
set -euo pipefail

NODES=3
BASE=${GALERA_PORT_BASE:-14000}
# Node N's own loopback address: PREFIX.N, so that the links between
# nodes can be cut one by one (cluster.sh cut); clients use the sockets.
PREFIX=${GALERA_ADDR_PREFIX:-127.0.14.}
node_addr() { echo "$PREFIX$1"; }

find_bin() {
  local b d
  for b in "$@"; do
    for d in /usr/sbin /usr/bin /usr/local/sbin /usr/local/bin; do
      [ -x "$d/$b" ] && { echo "$d/$b"; return 0; }
    done
    command -v "$b" 2>/dev/null && return 0
  done
  return 1
}

provider() {
  local p
  for p in /usr/lib/galera/libgalera_smm.so /usr/lib/libgalera_smm.so \
           /usr/lib64/galera-4/libgalera_smm.so \
           /usr/lib64/galera/libgalera_smm.so; do
    [ -e "$p" ] && { echo "$p"; return 0; }
  done
  echo "cluster.sh: libgalera_smm.so not found (apt-get install galera-4)" >&2
  return 1
}

node_dir() { echo "$1/n$2"; }

# The account the servers run as.  Not root: the joiner's rsync daemon
# (SST) started by root switches to "nobody", which cannot write the data
# directory; as the mysql account (the Debian package creates it) it
# stays that account, as it does for the system service.
run_user() {
  if [ "$(id -u)" = 0 ] && id mysql >/dev/null 2>&1; then
    echo mysql
  else
    id -un
  fi
}

# The option file of node N: every setting the node runs with, so that the
# SST scripts, which read it, see the same ones.
write_cnf() {
  local dir=$1 n=$2 nd addr="" i
  nd=$(node_dir "$dir" "$n")
  for i in $(seq 1 $NODES); do
    addr="${addr:+$addr,}$(node_addr "$i"):$((BASE + 10 + i))"
  done
  mkdir -p "$nd/data" "$nd/tmp"
  cat >"$nd/my.cnf" <<EOF
[mysqld]
user=$(run_user)
datadir=$nd/data
tmpdir=$nd/tmp
socket=$nd/mysqld.sock
pid-file=$nd/mysqld.pid
log-error=$nd/error.log
port=$((BASE + n))
bind-address=$(node_addr "$n")
skip-name-resolve
max-connections=300
max-prepared-stmt-count=100000
innodb-buffer-pool-size=128M
innodb-log-file-size=64M
innodb-flush-log-at-trx-commit=2
innodb-lock-wait-timeout=20
character-set-server=utf8mb4
collation-server=utf8mb4_general_ci
binlog-format=ROW
innodb-autoinc-lock-mode=2
wsrep-on=ON
wsrep-provider=$(provider)
wsrep-cluster-name=libreserve-galera-test
wsrep-cluster-address=gcomm://$addr
wsrep-node-name=node$n
wsrep-node-address=$(node_addr "$n"):$((BASE + 10 + n))
wsrep-provider-options="gmcast.listen_addr=tcp://$(node_addr "$n"):$((BASE + 10 + n));ist.recv_addr=$(node_addr "$n"):$((BASE + 20 + n));gcache.size=256M;evs.suspect_timeout=PT3S;evs.inactive_timeout=PT10S;pc.wait_prim_timeout=PT30S"
wsrep-sst-method=rsync
wsrep-sst-receive-address=$(node_addr "$n"):$((BASE + 30 + n))
wsrep-slave-threads=2
[client]
socket=$nd/mysqld.sock
user=root
EOF
}

client() {
  local dir=$1 n=$2
  shift 2
  "$(find_bin mariadb mysql)" --defaults-file="$(node_dir "$dir" "$n")/my.cnf" \
    --connect-timeout=5 -N -B "$@"
}

status_var() {
  client "$1" "$2" -e "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = '$3'" 2>/dev/null || true
}

node_pid() {
  local nd
  nd=$(node_dir "$1" "$2")
  [ -f "$nd/launcher.pid" ] && cat "$nd/launcher.pid"
}

alive() {
  local pid
  pid=$(node_pid "$1" "$2" || true)
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# Wait (at most $3 s, default 180) until node N answers and is synced.
wait_synced() {
  local dir=$1 n=$2 limit=${3:-180} i
  for i in $(seq 1 $((limit * 2))); do
    if ! alive "$dir" "$n"; then
      echo "cluster.sh: node $n exited; the end of its error log:" >&2
      tail -30 "$(node_dir "$dir" "$n")/error.log" >&2 || true
      return 1
    fi
    if [ "$(status_var "$dir" "$n" wsrep_local_state_comment)" = Synced ] &&
       [ "$(status_var "$dir" "$n" wsrep_ready)" = ON ]; then
      return 0
    fi
    [ $((i % 20)) = 0 ] && echo "cluster.sh: waiting for node $n ($(status_var "$dir" "$n" wsrep_local_state_comment))" >&2
    sleep 0.5
  done
  echo "cluster.sh: node $n not synced after $limit s; the end of its error log:" >&2
  tail -30 "$(node_dir "$dir" "$n")/error.log" >&2 || true
  return 1
}

launch() {
  local dir=$1 n=$2 nd
  shift 2
  nd=$(node_dir "$dir" "$n")
  # shellcheck disable=SC2086
  "$(find_bin mariadbd mysqld)" --defaults-file="$nd/my.cnf" "$@" \
    ${GALERA_MARIADB_OPTS:-} >>"$nd/stdout.log" 2>&1 &
  echo $! >"$nd/launcher.pid"
}

# The position a node killed mid-run recovers to: with it the node asks
# its peers for the write sets it missed (IST) instead of a full copy.
recovered_position() {
  local dir=$1 n=$2 nd log
  nd=$(node_dir "$dir" "$n")
  log="$nd/recover.log"
  rm -f "$log"
  "$(find_bin mariadbd mysqld)" --defaults-file="$nd/my.cnf" --wsrep-recover \
    --log-error="$log" >/dev/null 2>&1 || true
  sed -n 's/.*WSREP: Recovered position: *\([^ ]*\).*/\1/p' "$log" | tail -1
}

start_cluster() {
  local dir=$1 n nd port
  local a
  for port in $(seq $((BASE + 1)) $((BASE + 33))); do
    for a in 127.0.0.1 $(for n in $(seq 1 $NODES); do node_addr "$n"; done); do
      if (exec 3<>"/dev/tcp/$a/$port") 2>/dev/null; then
        echo "cluster.sh: port $port on $a is in use (set GALERA_PORT_BASE)" >&2
        return 1
      fi
    done
  done
  for n in $(seq 1 $NODES); do write_cnf "$dir" "$n"; done
  if [ "$(run_user)" != "$(id -un)" ]; then
    chmod 755 "$dir"
    chown -R "$(run_user)" "$dir"/n*
  fi
  nd=$(node_dir "$dir" 1)
  "$(find_bin mariadb-install-db mysql_install_db)" --defaults-file="$nd/my.cnf" \
    --auth-root-authentication-method=normal --skip-test-db \
    >"$nd/install.log" 2>&1 || { cat "$nd/install.log" >&2; return 1; }
  launch "$dir" 1 --wsrep-new-cluster
  wait_synced "$dir" 1 120
  # one joiner at a time: each takes a full copy (SST) from a donor
  for n in $(seq 2 $NODES); do
    launch "$dir" "$n"
    wait_synced "$dir" "$n" 180
  done
}

stop_node() {
  local dir=$1 n=$2 pid i
  pid=$(node_pid "$dir" "$n" || true)
  [ -n "$pid" ] || return 0
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$(node_dir "$dir" "$n")/launcher.pid"
}

stop_cluster() {
  local dir=$1 n
  for n in $(seq $NODES -1 1); do stop_node "$dir" "$n"; done
  # an SST helper (the rsync daemon of a joiner) left behind
  local f
  for n in $(seq 1 $NODES); do
    f="$(node_dir "$dir" "$n")/data/rsync_sst.pid"
    if [ -f "$f" ]; then
      kill -KILL "$(cat "$f")" 2>/dev/null || true
    fi
  done
  return 0
}

kill_node() {
  local dir=$1 n=$2 pid
  pid=$(node_pid "$dir" "$n")
  kill -KILL "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
}

restart_node() {
  local dir=$1 n=$2 pos
  pos=$(recovered_position "$dir" "$n")
  if [ -n "$pos" ]; then
    echo "cluster.sh: node $n recovered to $pos" >&2
    launch "$dir" "$n" --wsrep-start-position="$pos"
  else
    launch "$dir" "$n"
  fi
  wait_synced "$dir" "$n" 180
}

nft_table() { echo "libreserve_galera_$BASE"; }

# The other nodes' addresses, as an nftables set.
others_set() {
  local n=$1 i set=""
  for i in $(seq 1 $NODES); do
    [ "$i" = "$n" ] || set="${set:+$set, }$(node_addr "$i")"
  done
  echo "{ $set }"
}

# Replace the rules with one pair (node N to the others and back) ending
# in the given statement.
set_rules() {
  local n=$1 what=$2 t a o
  t=$(nft_table)
  a=$(node_addr "$n")
  o=$(others_set "$n")
  command -v nft >/dev/null || { echo "cluster.sh: nft not found (apt-get install nftables)" >&2; return 1; }
  nft -f - <<EOF
table inet $t {}
delete table inet $t
table inet $t {
  chain out {
    type filter hook output priority 0; policy accept;
    ip saddr $a ip daddr $o $what
    ip saddr $o ip daddr $a $what
  }
}
EOF
}

heal() {
  local t
  t=$(nft_table)
  command -v nft >/dev/null || return 0
  if nft list table inet "$t" >/dev/null 2>&1; then
    nft delete table inet "$t"
  fi
}

cut_node() {
  local n=$1 pct=${2:-100}
  if [ "$pct" -ge 100 ]; then
    set_rules "$n" drop
  else
    set_rules "$n" "numgen random mod 100 < $pct drop"
  fi
}

slow_node() {
  set_rules "$1" "limit rate over $2 kbytes/second drop"
}

cmd=${1:-}
dir=${2:-}
[ -n "$dir" ] || { echo "usage: $0 start|stop|kill|restart|wait-synced|socket|cut|slow|heal DIR [N]" >&2; exit 2; }
case "$cmd" in
  start) start_cluster "$dir" ;;
  stop) heal; stop_cluster "$dir" ;;
  cut) cut_node "$3" "${4:-100}" ;;
  slow) slow_node "$3" "$4" ;;
  heal) heal ;;
  kill) kill_node "$dir" "$3" ;;
  restart) restart_node "$dir" "$3" ;;
  wait-synced) wait_synced "$dir" "$3" "${4:-180}" ;;
  socket) echo "$(node_dir "$dir" "$3")/mysqld.sock" ;;
  *) echo "usage: $0 start|stop|kill|restart|wait-synced|socket|cut|slow|heal DIR [N]" >&2; exit 2 ;;
esac
