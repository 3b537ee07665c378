#!/usr/bin/env bash
# tests/http-test.sh - the HTTP checkout example (examples/http_*.c, built
# as build/examples/http_checkout) against the server in RSV_TEST_SOCKET:
#
#  1. bad input with curl: every mistake a 400 (or 404/405/415) with a
#     JSON message, and nothing in the database afterwards; a token one
#     byte over RSV_TOKEN_MAX refused, never cut;
#  2. the protocol, limits and timeouts with a raw-socket client
#     (tests/http-client.py): pipelining, HEAD, 100-continue, 431, 413,
#     501, 505, a head never finished (408), an idle connection;
#  3. clients that hang up, on a second server with one context: queued
#     requests dropped unstarted, a running claim finished;
#  4. load with wrk (tests/http-load.lua: reserve -> claim, or release,
#     over kept-alive connections) in two phases, then: nothing oversold,
#     every claimed unit off the ledger, `rsv-admin audit` clean, no 5xx,
#     and the server's resident memory flat from one phase to the next;
#  5. SIGTERM: the server stops cleanly.
#
# HTTP_LOAD_SECONDS (6) and HTTP_LOAD_CONNECTIONS (64) size each load
# phase (make check-http-long: 60 s, 256); HTTP_MEMORY_CHECK=0 leaves out
# the memory check (make check-http-asan: AddressSanitizer's quarantine
# grows by design, and its leak check at exit replaces it).  RSV_BUILD
# names the build directory (build).  Ports 17080-17099 on
# 127.0.0.1.  Needs wrk, curl and python3 (make installs them; without
# them it says so and skips).
set -u
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=tests/testlib.sh
. tests/testlib.sh http-test
build=${RSV_BUILD:-build}
server=$build/examples/http_checkout
admin_bin=$build/rsv-admin
seconds=${HTTP_LOAD_SECONDS:-6}
connections=${HTTP_LOAD_CONNECTIONS:-64}
for tool in wrk curl python3; do
  if ! command -v $tool >/dev/null; then
    echo "http-test: skipped: $tool is not installed (apt-get install $tool)"
    exit 0
  fi
done
for f in "$server" "$admin_bin"; do
  [ -x "$f" ] || { echo "http-test: $f is not built (make $f)"; exit 1; }
done

user=${RSV_TEST_USER:-root}
pw=()
[ -n "${RSV_TEST_PASSWORD:-}" ] && pw=(--password "$RSV_TEST_PASSWORD")
admin() {
  "$admin_bin" --no-defaults -S "$RSV_TEST_SOCKET" -u"$user" "${pw[@]}" \
    -D "$DB" "$@"
}
sql_cmd=("$client" --no-defaults --socket="$RSV_TEST_SOCKET" -u"$user" "$DB")
q() { sql -N -B "$DB" -e "$1"; }

pids=()
# shellcheck disable=SC2317  # called by testlib's EXIT trap
cleanup_extra() {
  for p in ${pids[@]+"${pids[@]}"}; do kill "$p" 2>/dev/null; done
  for p in ${pids[@]+"${pids[@]}"}; do wait "$p" 2>/dev/null; done
}

declare -A port pid
# start NAME ARGS...: a server in the background; sets port[NAME], pid[NAME]
start() {
  local name=$1
  shift
  "$server" --serve --socket "$RSV_TEST_SOCKET" --user "$user" "${pw[@]}" \
    --database "$DB" --port 17080 --port-file "$tmp/$name.port" "$@" \
    >"$tmp/$name.log" 2>&1 &
  pid[$name]=$!
  pids+=("${pid[$name]}")
  for _ in $(seq 1 300); do
    [ -s "$tmp/$name.port" ] && break
    kill -0 "${pid[$name]}" 2>/dev/null || break
    sleep 0.1
  done
  if [ ! -s "$tmp/$name.port" ]; then
    cat "$tmp/$name.log"
    echo "http-test: the $name server did not start"
    exit 1
  fi
  port[$name]=$(cat "$tmp/$name.port")
}

# stop NAME: SIGTERM, and the server must exit 0
stop() {
  kill -TERM "${pid[$1]}"
  if wait "${pid[$1]}"; then
    ok "$1 server: stopped cleanly by SIGTERM"
  else
    bad "$1 server: exit status $? after SIGTERM"
    tail -40 "$tmp/$1.log"
  fi
}

# json_field FIELD: a number or a string of the JSON object on stdin
json_field() { sed -n "s/.*\"$1\":\"\{0,1\}\([^\",}]*\).*/\1/p"; }
stats_field() { curl -s "http://127.0.0.1:$1/stats" | json_field "$2"; } # PORT FIELD

sql -e "CREATE DATABASE \`$DB\`" || exit 1
sql "$DB" <sql/schema.sql || exit 1
# shop 1: item 1 sells out under load, items 2 and 3 never do;
# shop 2: the hang-up case; shop 3: bad input
declare -A initial=([1]=300 [2]=10000000 [3]=10000000)
for item in 1 2 3; do
  admin set-stock 1 "$item" 1 "${initial[$item]}" >/dev/null || exit 1
done
admin set-stock 2 1 1 100 >/dev/null || exit 1
admin set-stock 3 1 1 100 >/dev/null || exit 1

# Generous queue and call budgets: on a loaded machine a slow answer must
# not turn into a 503 the checks below count as a failure.
start main --request-timeout-ms 1000 --idle-timeout-ms 1000 \
  --queue-timeout-ms 60000 --call-timeout-ms 60000
url=http://127.0.0.1:${port[main]}

echo "== bad input (curl)"
# post PATH FORM: "STATUS CODE" of the answer; the body in $tmp/body
post() {
  local st
  st=$(curl -s -o "$tmp/body" -w '%{http_code}' -d "$2" "$url$1")
  echo "$st $(json_field code <"$tmp/body")"
}
same() { # WHAT WANT GOT [DETAIL]
  if [ "$3" = "$2" ]; then ok "$1: $2"; else bad "$1: got '$3', want '$2' ${4:-}"; fi
}
# expect WHAT WANT GOT: same, showing the last answer's body when not
expect() { same "$1" "$2" "$3" "($(cat "$tmp/body"))"; }
long=$(printf 'x%.0s' $(seq 1 128))
r='shop=3&item=1&location=1'
expect "reserve" "200 RSV_OK" "$(post /reserve "$r&token=good")"
expect "quantity=abc" "400 bad_request" "$(post /reserve "$r&token=b1&quantity=abc")"
expect "quantity=0" "400 bad_request" "$(post /reserve "$r&token=b2&quantity=0")"
expect "quantity=-1" "400 bad_request" "$(post /reserve "$r&token=b3&quantity=-1")"
expect "quantity too large" "400 bad_request" "$(post /reserve "$r&token=b4&quantity=1000000001")"
expect "shop=abc" "400 bad_request" "$(post /reserve "shop=abc&item=1&location=1&token=b5")"
expect "shop over 2^64" "400 bad_request" "$(post /reserve "shop=18446744073709551616&item=1&location=1&token=b6")"
expect "item missing" "400 bad_request" "$(post /reserve "shop=3&location=1&token=b7")"
expect "token missing" "400 bad_request" "$(post /reserve "$r")"
expect "empty token" "400 bad_request" "$(post /reserve "$r&token=")"
expect "bad %-escape" "400 bad_request" "$(post /reserve "$r&token=b%zz")"
expect "unknown parameter" "400 bad_request" "$(post /reserve "$r&token=b8&qty=2")"
expect "ttl_ms=0" "400 bad_request" "$(post /reserve "$r&token=b9&ttl_ms=0")"
expect "128-byte token" "200 RSV_OK" "$(post /reserve "$r&token=$long")"
expect "129-byte token" "400 bad_request" "$(post /reserve "$r&token=${long}A")"
if grep -q "longer than 128 bytes" "$tmp/body"; then
  ok "... says the token is too long"
else
  bad "... message: $(cat "$tmp/body")"
fi
expect "a claim of the 128-byte prefix of a longer token" "400 bad_request" \
  "$(post /claim "shop=3&token=${long}B")"
expect "%-escaped token of 129 bytes" "400 bad_request" "$(post /reserve "$r&token=%41$long")"
expect "unknown item" "404 RSV_ENOITEM" "$(post /reserve "shop=3&item=99&location=1&token=b10")"
expect "unknown checkout" "404 RSV_ENOTFOUND" "$(post /claim "shop=3&token=nobody")"
expect "claim" "200 RSV_OK" "$(post /claim "shop=3&token=good")"
expect "claim again" "409 RSV_ECLAIMED" "$(post /claim "shop=3&token=good")"
n=$(q "SELECT COUNT(*) FROM rsv_checkouts WHERE shop_id = 3")
if [ "$n" = 2 ]; then
  ok "shop 3 holds the two good checkouts and nothing else"
else
  bad "shop 3 has $n checkouts, want 2"
fi
if [ "$(q "SELECT COUNT(*) FROM rsv_checkouts WHERE shop_id = 3 AND checkout_token = '$long'")" = 1 ]; then
  ok "the 128-byte token was stored whole"
else
  bad "the 128-byte token is missing"
fi

for path in /reserve /claim /release; do
  st=$(curl -s -o "$tmp/body" -D "$tmp/head" -w '%{http_code}' "$url$path?shop=3&token=good")
  if [ "$st" = 405 ] && grep -qi '^Allow: POST' "$tmp/head"; then
    ok "GET $path: 405, Allow: POST"
  else
    bad "GET $path: $st $(cat "$tmp/head")"
  fi
done
st=$(curl -s -o /dev/null -D "$tmp/head" -w '%{http_code}' -d 'shop=3&token=good' "$url/status")
if [ "$st" = 405 ] && grep -qi '^Allow: GET, HEAD' "$tmp/head"; then
  ok "POST /status: 405, Allow: GET, HEAD"
else
  bad "POST /status: $st"
fi
st=$(curl -s -o "$tmp/body" -w '%{http_code}' "$url/status?shop=3&token=good")
if [ "$st" = 200 ] && grep -q '"status":"claimed"' "$tmp/body"; then
  ok "GET /status: claimed"
else
  bad "GET /status: $st $(cat "$tmp/body")"
fi
st=$(curl -s -o /dev/null -w '%{http_code}' "$url/nowhere")
expect "unknown path" 404 "$st"
conns=$(curl -s -o /dev/null -o /dev/null -w '%{num_connects}\n' \
  "$url/stats" "$url/status?shop=3&token=good" | paste -sd,)
same "keep-alive: connections opened for two requests" "1,0" "$conns"

echo "== protocol, limits, timeouts (tests/http-client.py)"
for c in protocol slow-head idle; do
  if python3 tests/http-client.py "${port[main]}" $c; then ok "case $c"; else bad "case $c"; fi
done

echo "== clients that hang up (one context)"
start hangup --contexts 1 --call-timeout-ms 60000
if MYSQL_PWD=${RSV_TEST_PASSWORD:-} python3 tests/http-client.py "${port[hangup]}" hangup 2 "${sql_cmd[@]}"; then
  ok "case hangup"
else
  bad "case hangup"
fi
stop hangup

echo "== load: wrk, $connections connections, 2 phases of $seconds s"
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/${pid[main]}/status"; }
declare -A rss_kib
rss_kib[0]=$(rss)
fivexx0=$(stats_field "${port[main]}" 5xx)
wait_idle() {
  for _ in $(seq 1 600); do
    [ "$(stats_field "${port[main]}" busy)/$(stats_field "${port[main]}" queued)" = 0/0 ] && return 0
    sleep 0.1
  done
  bad "the server did not settle after the load"
}
client_claimed=0
client_reserved=0
for phase in 1 2; do
  HTTP_SHOP=1 HTTP_ITEMS=1,2,3 HTTP_TOKEN_PREFIX=p$phase- \
    wrk -t2 -c"$connections" -d"${seconds}s" --timeout 60s \
    -s tests/http-load.lua "$url/" >"$tmp/wrk$phase.log" 2>&1
  cat "$tmp/wrk$phase.log"
  line=$(grep '^load:' "$tmp/wrk$phase.log" | head -1)
  unexpected=$(sed -n 's/.*unexpected=\([0-9]*\).*/\1/p' <<<"$line")
  same "phase $phase: unexpected answers" 0 "$unexpected"
  if grep -q 'Socket errors' "$tmp/wrk$phase.log"; then
    bad "phase $phase: wrk saw socket errors"
  else
    ok "phase $phase: no socket errors"
  fi
  client_claimed=$((client_claimed + $(sed -n 's/.*claimed=\([0-9]*\).*/\1/p' <<<"$line")))
  client_reserved=$((client_reserved + $(sed -n 's/.*reserved=\([0-9]*\).*/\1/p' <<<"$line")))
  wait_idle
  rss_kib[$phase]=$(rss)
done
curl -s "$url/stats" >"$tmp/stats.json"
echo "server: $(cat "$tmp/stats.json")"
echo "server resident memory: ${rss_kib[0]} KiB before, ${rss_kib[1]} KiB after phase 1, ${rss_kib[2]} KiB after phase 2"
if [ "$client_reserved" -gt 0 ] && [ "$client_claimed" -gt 0 ]; then
  ok "the load reserved $client_reserved and claimed $client_claimed"
else
  bad "the load did nothing"
fi
fivexx=$(json_field 5xx <"$tmp/stats.json")
same "5xx answers counted, before and after the load" "$fivexx0" "$fivexx"
# Phase 1 grew what a server grows to under this load (buffers, pools,
# the contexts' statements); phase 2, the same load again, must not: a
# leak of 128 bytes a request, at about 5,000 requests a phase, would
# add over 600 KiB.
if [ "${HTTP_MEMORY_CHECK:-1}" = 0 ]; then
  echo "skip: the memory check (HTTP_MEMORY_CHECK=0)"
elif [ $((rss_kib[2] - rss_kib[1])) -le 512 ]; then
  ok "memory flat: phase 2 added $((rss_kib[2] - rss_kib[1])) KiB (at most 512)"
else
  bad "memory grew by $((rss_kib[2] - rss_kib[1])) KiB in phase 2"
fi

db_claimed=0
for item in 1 2 3; do
  # tokens end in -i<item>; each reserved one unit
  claimed=$(q "SELECT COUNT(*) FROM rsv_checkouts WHERE shop_id = 1 AND status = 2 AND checkout_token LIKE '%-i$item'")
  db_claimed=$((db_claimed + claimed))
  admin --json stock 1 "$item" 1 >"$tmp/stock.json"
  on_hand=$(json_field on_hand <"$tmp/stock.json")
  held=$(json_field held <"$tmp/stock.json")
  taken=$((initial[$item] - on_hand))
  if [ "$taken" = "$claimed" ]; then
    ok "item $item: $claimed claimed, and exactly $taken left the stock"
  else
    bad "item $item: $claimed claimed but $taken left the stock"
  fi
  if [ $((claimed + held)) -le "${initial[$item]}" ] && [ "$on_hand" -ge 0 ]; then
    ok "item $item: not oversold ($claimed claimed + $held held <= ${initial[$item]})"
  else
    bad "item $item: oversold: $claimed claimed + $held held > ${initial[$item]}"
  fi
done
# A claim running when wrk stopped is done but unheard: the database may
# count a few more than the clients, never fewer.
if [ "$db_claimed" -ge "$client_claimed" ] &&
   [ "$db_claimed" -le $((client_claimed + 2 * connections)) ]; then
  ok "claims: $client_claimed answered, $db_claimed in the database"
else
  bad "claims: $client_claimed answered, but $db_claimed in the database"
fi
if admin audit 1 >"$tmp/audit" 2>&1; then ok "rsv-admin audit: clean"; else
  bad "rsv-admin audit: $(cat "$tmp/audit")"; fi

stop main
finish
