#!/usr/bin/env bash
# Runs the checkout demo against the server in RSV_TEST_SOCKET (started by
# `tools/mariadb.sh run`, as `make demo` does): creates a fresh database,
# loads sql/schema.sql into it, runs the README's minimal program
# (examples/minimal.c, built beside the demo), the demo binary with the
# given arguments and then the HTTP flash sale (examples/http_main.c and
# http_sale.c against the server of examples/http_checkout.c, when built
# beside the demo), and drops the database afterwards (set
# RSV_DEMO_KEEP=1 to keep it for a look).  Usage:
#   examples/run-demo.sh build/examples/checkout_demo [demo options...]
# Connects as $RSV_TEST_USER (default root) with $RSV_TEST_PASSWORD.
set -euo pipefail
cd "$(dirname "$0")/.."

demo=${1:?usage: $0 DEMO_BINARY [ARGS...]}
shift

# --help needs no server.
for a in "$@"; do
  case "$a" in --help|-h) exec "$demo" --help ;; esac
done

: "${RSV_TEST_SOCKET:?RSV_TEST_SOCKET is not set: run via 'make demo' or tools/mariadb.sh run}"
user=${RSV_TEST_USER:-root}
client=$(command -v mariadb || command -v mysql) || {
  echo "run-demo.sh: the mariadb client is missing (apt-get install mariadb-client)" >&2
  exit 1
}
export MYSQL_PWD=${RSV_TEST_PASSWORD:-}
sql() { "$client" --no-defaults --socket="$RSV_TEST_SOCKET" -u"$user" "$@"; }

db=rsv_demo_$$
sql -e "DROP DATABASE IF EXISTS \`$db\`; CREATE DATABASE \`$db\`"
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  if [ "${RSV_DEMO_KEEP:-0}" = 1 ]; then
    echo "run-demo.sh: kept database $db" >&2
  else
    sql -e "DROP DATABASE IF EXISTS \`$db\`" || true
  fi
}
trap cleanup EXIT
sql "$db" <sql/schema.sql

minimal=$(dirname "$demo")/minimal
if [ -x "$minimal" ]; then
  echo "== examples/minimal.c (the README's program)"
  RSV_DSN="mariadb://$user${MYSQL_PWD:+:$MYSQL_PWD}@localhost/$db?socket=$RSV_TEST_SOCKET" "$minimal"
  echo "== examples/checkout_demo.c"
fi
set +e
RSV_DEMO_DATABASE=$db "$demo" --socket "$RSV_TEST_SOCKET" --user "$user" "$@"
status=$?
set -e

# The same sale over HTTP, on an event loop that never waits on the
# database (built beside the demo by make demo; it stops its server at the
# end).
http=$(dirname "$demo")/http_checkout
if [ -x "$http" ]; then
  echo
  echo "== examples/http_checkout.c"
  pw=()
  [ -n "$MYSQL_PWD" ] && pw=(--password "$MYSQL_PWD")
  set +e
  RSV_DEMO_DATABASE=$db "$http" --socket "$RSV_TEST_SOCKET" --user "$user" "${pw[@]}"
  hstatus=$?
  set -e
  [ $status = 0 ] && status=$hstatus
fi
exit $status
