#!/usr/bin/env bash
# Runs the fault-injection stress: starts a throwaway MariaDB in a fresh
# temporary directory (tools/mariadb.sh start; the stress program kills it
# and restarts it on the same data directory with tools/mariadb.sh resume),
# loads the schema, runs the stress program, stops and removes the server.
# The directory (server error log, client logs) is kept when the run fails.
#
# Usage: tests/stress/run-stress.sh MODE [stress options...]
#   full      the self-test of the checks, then the default run
#   quick     the self-test, then the short run (CI)
#   selftest  the self-test only: a short run, then each check is made to
#             fire by tampering behind the library's back (and must)
#   diskfull  the data directory on a small tmpfs (or loop) file system of
#             its own, filled during the run, the binary log elsewhere
#   repro     the reproducer of a library bug the stress found
#             (repro_eintxn) instead of the stress
# Stress options go to the main run (full, quick, diskfull).
#
# Environment:
#   STRESS_BUILD_DIR  the build directory (default build; make passes $(B))
#   STRESS_BINLOG=0   no binary log (default: log-bin in the data directory,
#                     binlog_format=ROW, sync_binlog=1; diskfull puts it
#                     outside the data directory)
#   STRESS_DATADIR_MB size of the diskfull data file system (default 160)
#   STRESS_KEEP=1     keep the directory after a pass
#   RSV_MARIADB_OPTS  more server options, after the ones set here
# Always uses its own server: it SIGKILLs it, so RSV_TEST_SOCKET is ignored.
set -euo pipefail
cd "$(dirname "$0")/../.."
mode=${1:-quick}
shift || true
case "$mode" in
  full) mode_args=() ;;
  quick | selftest | diskfull) mode_args=(--quick) ;;
  repro) mode_args=() ;;
  *) echo "usage: $0 full|quick|selftest|diskfull|repro [stress options...]" >&2; exit 2 ;;
esac
bin=${STRESS_BUILD_DIR:-build}/stress
for f in "$bin/stress" "$bin/cutproxy"; do
  [ -x "$f" ] || { echo "run-stress.sh: $f missing: run 'make B=${STRESS_BUILD_DIR:-build} stress-build'" >&2; exit 2; }
done
client=$(command -v mariadb || command -v mysql) || { echo "run-stress.sh: mariadb client not found" >&2; exit 2; }
if [ "$mode" = diskfull ] && [ "$(id -u)" != 0 ]; then
  # mounting the small file system needs root; CI runs as root
  echo "run-stress.sh: diskfull needs root to mount a file system: skipped"
  exit 0
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/libreserve-stress.XXXXXX")
status=1
mounted=
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  tools/mariadb.sh stop "$dir" || true
  if [ -n "$mounted" ]; then
    # the data file system goes with its data
    umount "$dir/data" 2>/dev/null || { sleep 1; umount -l "$dir/data" || true; }
  fi
  if [ "$status" -eq 0 ] && [ -z "${STRESS_KEEP:-}" ]; then
    rm -rf "$dir"
  else
    rm -rf "$dir/data/ib"* "$dir/data/undo"* "$dir/data/stress" \
      "$dir/data/binlog."* "$dir/binlog" "$dir/datafs.img" "$dir/tmp"
    echo "run-stress.sh: logs kept in $dir" >&2
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
case "$dir" in
  *[[:space:]]*)
    # tools/mariadb.sh splits RSV_MARIADB_OPTS on blanks
    echo "run-stress.sh: TMPDIR must not contain blanks" >&2
    exit 2 ;;
esac

# Production primaries run with a binary log: then every commit is a
# two-phase commit between the binlog and InnoDB, and crash recovery goes
# through the binlog.  The data directory holds it by default (a relative
# name is taken there); the disk-full run puts it elsewhere, so that only
# the data directory fills up.
opts=
if [ "${STRESS_BINLOG:-1}" != 0 ]; then
  binlog=binlog
  if [ "$mode" = diskfull ]; then
    mkdir -p "$dir/binlog"
    binlog=$dir/binlog/binlog
  fi
  opts="--log-bin=$binlog --binlog-format=ROW --sync-binlog=1"
fi
if [ "$mode" = diskfull ]; then
  # The redo log is written in place, but must fit the small file system.
  opts="$opts --innodb-log-file-size=32M"
  mb=${STRESS_DATADIR_MB:-160}
  mkdir -p "$dir/data"
  if mount -t tmpfs -o "size=${mb}m,mode=0750" tmpfs "$dir/data" 2>"$dir/mount.err"; then
    mounted=tmpfs
  elif truncate -s "${mb}M" "$dir/datafs.img" &&
      mkfs.ext4 -q -F "$dir/datafs.img" >>"$dir/mount.err" 2>&1 &&
      mount -o loop "$dir/datafs.img" "$dir/data" 2>>"$dir/mount.err"; then
    mounted=loop
    rmdir "$dir/data/lost+found" # not a database
  else
    echo "run-stress.sh: cannot mount a small file system for the data directory:" >&2
    cat "$dir/mount.err" >&2
    exit 2
  fi
fi
export RSV_MARIADB_OPTS="$opts ${RSV_MARIADB_OPTS:-}"

tools/mariadb.sh start "$dir" >/dev/null
sock="$dir/mysqld.sock"
sql() { "$client" --no-defaults --socket="$sock" -uroot "$@"; }
load_schema() {
  sql -e "DROP DATABASE IF EXISTS stress; CREATE DATABASE stress"
  sql stress <sql/schema.sql
}
load_schema
if [ "$mode" = repro ]; then
  set +e
  "$bin/repro_eintxn" "$sock" "$bin/cutproxy"
  status=$?
  exit $status
fi
echo "# $(uname -srm), $(nproc) cpu(s), load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# server: $(sql -N -e "SELECT CONCAT(VERSION(), ', log_bin=', @@log_bin, ', binlog_format=', @@binlog_format, ', sync_binlog=', @@sync_binlog, ', innodb_flush_log_at_trx_commit=', @@innodb_flush_log_at_trx_commit, IF(@@log_bin, CONCAT(', binlog ', @@log_bin_basename), ''))")${mounted:+, data directory on a ${mb} MiB $mounted file system}"
start=$SECONDS
common=(--socket "$sock" --server-dir "$dir" --proxy "$bin/cutproxy"
  --mariadb-sh tools/mariadb.sh)

# The self-test of the checks: a short run, then the checks made to fire.
# Its tamperings make the checker complain on standard error, on purpose:
# that goes to a file, shown only if the self-test fails.
if [ "$mode" != diskfull ]; then
  echo "# self-test of the checks"
  set +e
  "$bin/stress" --quick --selftest --clients 8 --duration 8 --ops 0 \
    --logdir "$dir/selftest-logs" "${common[@]}" \
    >"$dir/selftest.out" 2>"$dir/selftest.err"
  st=$?
  set -e
  grep '^stress: selftest:' "$dir/selftest.out" || true
  if [ "$st" -ne 0 ]; then
    echo "run-stress.sh: the self-test of the checks failed ($st):" >&2
    tail -40 "$dir/selftest.err" >&2
    exit 1
  fi
  if [ "$mode" = selftest ]; then
    echo "# wall time: $((SECONDS - start)) s"
    status=0
    exit 0
  fi
  load_schema
fi

fill_args=()
if [ "$mode" = diskfull ]; then
  # No server kills here: the point is what a full disk does.
  export STRESS_NO_SERVER_KILL=1
  fill_args=(--clients 12 --duration 50 --fill "$dir/data/stress-filler")
fi
set +e
"$bin/stress" "${mode_args[@]}" "${fill_args[@]}" --logdir "$dir/logs" \
  "${common[@]}" "$@"
status=$?
set -e
recoveries=$(grep -c 'Recovering after a crash using' "$dir/error.log" || true)
prepared=$(sed -n 's/.*Found \([0-9]*\) prepared transaction.*/\1/p' "$dir/error.log" |
  awk '{s += $1} END {printf "%d", s}')
binlog_mb=$(sql -N -e "SHOW BINARY LOGS" 2>/dev/null |
  awk '{s += $2} END {printf "%d", s / 1048576}' || true)
echo "# crash recoveries through the binary log: $recoveries (transactions found prepared and settled by it: $prepared); binary log: ${binlog_mb:-?} MiB"
echo "# wall time: $((SECONDS - start)) s; load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
