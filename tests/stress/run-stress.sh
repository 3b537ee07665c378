#!/usr/bin/env bash
# Runs the fault-injection stress: starts a throwaway MariaDB in a fresh
# temporary directory (tools/mariadb.sh start; the stress program kills it
# and restarts it on the same data directory with tools/mariadb.sh resume),
# loads the schema, runs build/stress/stress, stops and removes the server.
# The directory (server error log, client logs) is kept when the run fails.
#
# Usage: tests/stress/run-stress.sh full|quick|repro [stress options...]
# Always uses its own server: it SIGKILLs it, so RSV_TEST_SOCKET is ignored.
# repro runs build/stress/repro_eintxn (a library bug the stress found)
# instead of the stress.  STRESS_KEEP=1 keeps the directory after a pass.
set -euo pipefail
cd "$(dirname "$0")/../.."
mode=${1:-quick}
shift || true
case "$mode" in
  full) mode_args=() ;;
  quick) mode_args=(--quick) ;;
  repro) mode_args=() ;;
  *) echo "usage: $0 full|quick|repro [stress options...]" >&2; exit 2 ;;
esac
for f in build/stress/stress build/stress/cutproxy; do
  [ -x "$f" ] || { echo "run-stress.sh: $f missing: run 'make stress-build'" >&2; exit 2; }
done
client=$(command -v mariadb || command -v mysql) || { echo "run-stress.sh: mariadb client not found" >&2; exit 2; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/libreserve-stress.XXXXXX")
status=1
cleanup() {
  tools/mariadb.sh stop "$dir" || true
  if [ "$status" -eq 0 ] && [ -z "${STRESS_KEEP:-}" ]; then
    rm -rf "$dir"
  else
    rm -rf "$dir/data/ib"* "$dir/data/stress" "$dir/tmp"
    echo "run-stress.sh: logs kept in $dir" >&2
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
tools/mariadb.sh start "$dir" >/dev/null
sock="$dir/mysqld.sock"
"$client" --no-defaults --socket="$sock" -uroot -e "CREATE DATABASE stress"
"$client" --no-defaults --socket="$sock" -uroot stress <sql/schema.sql
if [ "$mode" = repro ]; then
  set +e
  build/stress/repro_eintxn "$sock" build/stress/cutproxy
  status=$?
  exit $status
fi
start=$SECONDS
echo "# $(uname -srm), $(nproc) cpu(s), load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
set +e
build/stress/stress "${mode_args[@]}" --socket "$sock" --server-dir "$dir" \
  --logdir "$dir/logs" --proxy build/stress/cutproxy \
  --mariadb-sh tools/mariadb.sh "$@"
status=$?
set -e
echo "# wall time: $((SECONDS - start)) s; load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
