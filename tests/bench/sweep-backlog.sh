#!/usr/bin/env bash
# tests/bench/sweep-backlog.sh - records what the sweeper does to the
# journal backlog (claims not yet folded into the ledger) and to expired
# holds not yet given back, over time: a sale through the HTTP checkout
# example (examples/http_checkout.c) driven by wrk for a while, a sweeper
# (rsv-admin sweep --all) every few seconds throughout and after it, and
# `rsv-admin stats` sampled twice a second.  tests/bench/plot.py
# --backlog draws the record (make pictures).
#
# Usage (make sweep-backlog-record does this and writes
# docs/img/sweep-backlog.txt):
#   tools/mariadb.sh run tests/bench/sweep-backlog.sh OUT.txt
# BACKLOG_LOAD_S (30), BACKLOG_TAIL_S (30: sweeping after the sale),
# BACKLOG_SWEEP_EVERY_S (10), BACKLOG_CONNECTIONS (64).  Needs wrk and the
# built $B/examples/http_checkout and $B/rsv-admin (B=build).
set -u
cd "$(dirname "$0")/../.." || exit 1
out=${1:?usage: $0 OUT.txt}
# shellcheck source=tests/testlib.sh
. tests/testlib.sh sweep-backlog
build=${B:-build}
load_s=${BACKLOG_LOAD_S:-30}
tail_s=${BACKLOG_TAIL_S:-30}
every_s=${BACKLOG_SWEEP_EVERY_S:-10}
conns=${BACKLOG_CONNECTIONS:-64}
ttl_ms=5000
user=${RSV_TEST_USER:-root}
pw=()
[ -n "${RSV_TEST_PASSWORD:-}" ] && pw=(--password "$RSV_TEST_PASSWORD")
admin() {
  "$build/rsv-admin" --no-defaults -S "$RSV_TEST_SOCKET" -u"$user" \
    "${pw[@]}" -D "$DB" "$@"
}
bg=()
# shellcheck disable=SC2317  # called by testlib's EXIT trap
cleanup_extra() {
  for p in ${bg[@]+"${bg[@]}"}; do kill "$p" 2>/dev/null; done
  for p in ${bg[@]+"${bg[@]}"}; do wait "$p" 2>/dev/null; done
}

sql -e "CREATE DATABASE \`$DB\`" && sql "$DB" <sql/schema.sql || exit 1
for item in 1 2 3; do admin set-stock 1 "$item" 1 10000000 >/dev/null || exit 1; done
"$build/examples/http_checkout" --serve --socket "$RSV_TEST_SOCKET" \
  --user "$user" "${pw[@]}" --database "$DB" --port 17080 \
  --port-file "$tmp/port" --ttl-ms "$ttl_ms" >"$tmp/server.log" 2>&1 &
bg+=($!)
for _ in $(seq 1 300); do [ -s "$tmp/port" ] && break; sleep 0.1; done
[ -s "$tmp/port" ] || { cat "$tmp/server.log"; exit 1; }

t0=$(date +%s.%N)
now() { awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.2f", a - b }'; }
field() { sed -n "s/.*\"totals\":{.*\"$1\":\([0-9]*\).*/\1/p"; }
{
  echo "# sweep-backlog: $(date -u +%Y-%m-%d), $(nproc) CPUs, library $(sed -n 's/^#define RSV_VERSION "\(.*\)"/\1/p' include/reserve.h)"
  echo "# a sale of ${load_s} s through examples/http_checkout.c driven by wrk ($conns connections: reserve, then claim; one checkout in 10 released, one in 7 left to expire after ${ttl_ms} ms); rsv-admin sweep --all every ${every_s} s during the sale and ${tail_s} s after it; rsv-admin stats every 0.5 s"
} >"$out"
(
  while :; do
    admin --json stats 1 >"$tmp/stats.json" 2>/dev/null &&
      echo "sample t=$(now) journal_backlog=$(field journal_backlog <"$tmp/stats.json") expired=$(field expired <"$tmp/stats.json") held=$(field held <"$tmp/stats.json")"
    sleep 0.5
  done
) >>"$out" &
bg+=($!)
(
  while :; do
    sleep "$every_s"
    echo "sweep t=$(now)"
    admin sweep --all >/dev/null 2>&1
  done
) >>"$out" &
bg+=($!)
echo "load start t=$(now)" >>"$out"
HTTP_SHOP=1 HTTP_ITEMS=1,2,3 HTTP_ABANDON_EVERY=7 \
  wrk -t2 -c"$conns" -d"${load_s}s" --timeout 60s -s tests/http-load.lua \
  "http://127.0.0.1:$(cat "$tmp/port")/" >"$tmp/wrk.log" 2>&1
echo "load end t=$(now)" >>"$out"
grep '^load:' "$tmp/wrk.log" | sed 's/^/# wrk /' >>"$out"
sleep "$tail_s"
echo "sweep-backlog: wrote $out ($(grep -c '^sample' "$out") samples)"
