#!/usr/bin/env bash
# tests/connections-test.sh - rsv-admin connections names who holds the
# server's connections.  A client tagged checkout.payment opens a
# transaction, locks a ledger row and goes idle inside it (it reads its
# statements from a pipe that stays open); a client tagged reserve waits
# for that row.  rsv-admin connections (text, --json, --prometheus) must
# show the reserve session waiting for a lock held by the idle one, and
# name it checkout.payment where the server keeps a statement history:
#   - on the server in RSV_TEST_SOCKET as it is (the make check server has
#     performance_schema off: the idle session is "(unknown)", the waiter
#     is still named from its running statement, and the output says why);
#   - on a second throwaway server started here with performance_schema
#     and its statement consumers on (tools/mariadb.sh, RSV_MARIADB_OPTS),
#     where the idle session is named from its last tagged statement.
# Also: --tag-prefix names statements of another prefix.  Every session
# it opened is ended and its databases dropped, also on failure.
# Run by `make check`, or: make build/rsv-admin && tools/mariadb.sh run
# tests/connections-test.sh
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

ADMIN=${RSV_ADMIN_BIN:-${RSV_BUILD:-build}/rsv-admin}
# shellcheck source=tests/testlib.sh
. tests/testlib.sh connections
USER_=${RSV_TEST_USER:-root}
export MYSQL_PWD=${RSV_TEST_PASSWORD:-} RSV_ADMIN_PASSWORD=${RSV_TEST_PASSWORD:-}
bad() { fail=$((fail + 1)); echo "FAIL $*"; [ -n "${out:-}" ] && echo "     output: ${out:0:2000}"; }
# the statements go to the server of the scenario running
sock=$RSV_TEST_SOCKET
sql() { "$client" --no-defaults --socket="$sock" -u"$USER_" "$@"; }
kill_tagged() { # end the sessions whose statement carries one of the tags
  local id
  for id in $(sql -N -e "SELECT ID FROM information_schema.PROCESSLIST WHERE (INFO LIKE '%conn_tag:reserve %' OR INFO LIKE '%app:report %') AND ID <> CONNECTION_ID()" 2>/dev/null); do
    sql -e "KILL $id" >/dev/null 2>&1
  done
}
holder= waiter= other= second=
end_clients() {
  [ -n "$holder" ] && { exec 7>&- 2>/dev/null; wait "$holder" 2>/dev/null; holder=; }
  [ -n "$sock" ] && kill_tagged
  for p in $waiter $other; do wait "$p" 2>/dev/null; done
  waiter= other=
}
cleanup_extra() {
  end_clients
  if [ -n "$second" ]; then tools/mariadb.sh stop "$second"; rm -rf "$second"; fi
  sock=$RSV_TEST_SOCKET
  sql -e "DROP DATABASE IF EXISTS \`$DB\`" >/dev/null 2>&1
}
trap 'exit 130' INT TERM

# check DESC PYTHON-EXPR: the expression sees d, the parsed JSON of $out
check() {
  if python3 -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if ('"$2"') else 1)' "$out" 2>"$tmp/py"; then
    ok "$1"
  else
    bad "$1: $2 $(cat "$tmp/py")"
  fi
}
# has DESC REGEX: $out matches
has() { if grep -Eq -- "$2" <<<"$out"; then ok "$1"; else bad "$1: no /$2/"; fi; }

# scenario NAME: the holder and the waiter on the server at $sock.
# history=1 when the server keeps a statement history.
scenario() {
  local name=$1 history=$2
  local conn=(--no-defaults --socket "$sock" --user "$USER_")
  echo "== $name"
  sql -e "DROP DATABASE IF EXISTS \`$DB\`; CREATE DATABASE \`$DB\`" && sql "$DB" <sql/schema.sql ||
    { bad "$name: create the database"; return; }
  "$ADMIN" "${conn[@]}" --database "$DB" set-stock 1 1 1 10 >/dev/null || { bad "$name: set-stock"; return; }
  # The pipe stays open on descriptor 7 of this shell only (the other
  # clients start without it): closing it ends the holder.
  mkfifo "$tmp/fifo"
  "$client" --no-defaults --comments --socket="$sock" -u"$USER_" "$DB" <"$tmp/fifo" >"$tmp/holder.out" 2>&1 &
  holder=$!
  exec 7>"$tmp/fifo"
  rm -f "$tmp/fifo"
  echo "/* conn_tag:checkout.payment */ START TRANSACTION;
/* conn_tag:checkout.payment */ SELECT on_hand FROM rsv_ledger WHERE shop_id = 1 FOR UPDATE;" >&7
  # the waiter starts once the holder has the row (a slow start of the
  # holder would otherwise let the waiter pass first)
  local i
  for i in $(seq 1 300); do
    [ "$(sql -N -e "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_rows_locked > 0")" = 1 ] && break
    sleep 0.1
  done
  "$client" --no-defaults --comments --socket="$sock" -u"$USER_" "$DB" -e "SET SESSION innodb_lock_wait_timeout = 300;
/* conn_tag:reserve */ UPDATE rsv_ledger SET on_hand = on_hand WHERE shop_id = 1" >/dev/null 2>&1 7>&- &
  waiter=$!
  "$client" --no-defaults --comments --socket="$sock" -u"$USER_" -e "/* app:report */ SELECT SLEEP(300)" >/dev/null 2>&1 7>&- &
  other=$!
  # until the server shows the wait (and the other session), or 30 s
  for i in $(seq 1 300); do
    out=$("$ADMIN" "${conn[@]}" --json connections 2>&1)
    python3 -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if d["lock_waits"] and any("app:report" in (s["statement"] or "") for s in d["sessions"]) else 1)' "$out" 2>/dev/null && break
    sleep 0.1
  done
  check "$name: --json: one lock wait, reserve waiting" 'len(d["lock_waits"]) == 1 and d["lock_waits"][0]["waiting_tag"] == "reserve" and d["lock_waits"][0]["blocking_state"] == "idle_in_transaction" and d["lock_waits"][0]["wait_s"] >= 0'
  check "$name: --json: the waiting session, named from its running statement" '[s for s in d["sessions"] if s["state"] == "lock_wait"][0]["tag"] == "reserve" and [s for s in d["sessions"] if s["state"] == "lock_wait"][0]["tag_from"] == "statement"'
  check "$name: --json: the untagged statement is (untagged)" '[s["tag"] for s in d["sessions"] if "app:report" in (s["statement"] or "")] == ["(untagged)"]'
  if [ "$history" = 1 ]; then
    check "$name: --json: the idle session holding the lock is named checkout.payment" 'd["statement_history"] is True and d["lock_waits"][0]["blocking_tag"] == "checkout.payment" and [s["tag_from"] for s in d["sessions"] if s["id"] == d["lock_waits"][0]["blocking"]] == ["history"]'
    check "$name: --json: checkout.payment holds one transaction open, idle" '[(t["idle_in_transaction"], t["running"], t["oldest_transaction_s"] is not None) for t in d["tags"] if t["tag"] == "checkout.payment"] == [(1, 0, True)]'
  else
    check "$name: --json: no statement history, and why; the idle holder is (unknown)" 'd["statement_history"] is False and "performance_schema" in d["statement_history_off"] and d["lock_waits"][0]["blocking_tag"] == "(unknown)"'
    check "$name: --json: (unknown) holds one transaction open, idle" '[t["idle_in_transaction"] for t in d["tags"] if t["tag"] == "(unknown)"] == [1]'
  fi
  local holder_tag=checkout.payment
  [ "$history" = 1 ] || holder_tag='\(unknown\)'
  out=$("$ADMIN" "${conn[@]}" connections 2>&1)
  has "$name: text: who blocks whom" "connection [0-9]+ \(reserve\) has waited [0-9.]+ s for a lock held by connection [0-9]+ \($holder_tag, idle in a transaction, transaction open [0-9.]+ s\)"
  has "$name: text: the waiting statement" "waiting: /\* conn_tag:reserve \*/ UPDATE rsv_ledger"
  has "$name: text: the tag table" "^reserve +0 +1 +0 +0 +[0-9.]+$"
  if [ "$history" = 1 ]; then
    has "$name: text: statement history on" "named by their last tagged statement"
  else
    has "$name: text: statement history off, and why" "idle sessions cannot be named: performance_schema"
  fi
  local prom_tag=checkout.payment
  [ "$history" = 1 ] || prom_tag='\(unknown\)'
  out=$("$ADMIN" "${conn[@]}" connections --prometheus 2>&1)
  has "$name: --prometheus: the idle transaction" "^libreserve_connections\{tag=\"$prom_tag\",state=\"idle_in_transaction\"\} 1$"
  has "$name: --prometheus: the lock wait" "^libreserve_lock_waits\{waiting_tag=\"reserve\",blocking_tag=\"$prom_tag\"\} 1$"
  has "$name: --prometheus: statement history" "^libreserve_connections_statement_history $history$"
  out=$("$ADMIN" "${conn[@]}" --json --tag-prefix app: connections 2>&1)
  check "$name: --tag-prefix app: names /* app:report */" '[s["tag"] for s in d["sessions"] if "app:report" in (s["statement"] or "")] == ["report"]'
  echo "ROLLBACK;" >&7
  end_clients
  out=$("$ADMIN" "${conn[@]}" --json connections 2>&1)
  check "$name: afterwards: no lock wait, no open transaction" 'd["lock_waits"] == [] and all(s["transaction_s"] is None for s in d["sessions"])'
  out=
}

sock=$RSV_TEST_SOCKET
h=$(sql -N -e "SELECT @@performance_schema AND (SELECT COUNT(*) FROM performance_schema.setup_consumers WHERE NAME IN ('events_statements_current', 'events_statements_history') AND ENABLED = 'YES') = 2" 2>/dev/null)
scenario "server of RSV_TEST_SOCKET" "${h:-0}"
if [ "${h:-0}" != 1 ]; then
  # The same on a server that keeps each session's last statements.
  second=$(mktemp -d "${TMPDIR:-/tmp}/rsv-connections-db.XXXXXX")
  if RSV_MARIADB_OPTS="--performance-schema=ON --performance-schema-consumer-events-statements-current=ON --performance-schema-consumer-events-statements-history=ON" \
      tools/mariadb.sh start "$second" >"$tmp/start.log" 2>&1; then
    sock=$second/mysqld.sock
    USER_=root MYSQL_PWD= RSV_ADMIN_PASSWORD= scenario "server with performance_schema" 1
    sock=$RSV_TEST_SOCKET
  else
    cat "$tmp/start.log"; bad "start a server with performance_schema"
  fi
fi

echo
finish
