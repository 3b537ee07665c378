#!/usr/bin/env bash
# The checkout endpoint (examples/checkout.php) under Debian's php8.2-fpm
# behind nginx, driven by wrk, against the server in RSV_TEST_SOCKET:
#   tools/mariadb.sh run bindings/php/fpm-test.sh     (make check-php-fpm)
# FPM and nginx run from configs in a temp dir, on loopback ports below
# 32768, as this user; the system's services and configs are not touched
# (PHP_INI_SCAN_DIR is emptied, php.ini is ours).  The library is
# preloaded as the README says (ffi.enable=preload, ffi.preload naming
# the header bin/libreserve-ffi-preload writes, opcache.preload=preload.php
# for the package's classes), each worker keeps one context across
# requests.
# Phases: a warm-up; every library connection killed (a server restart)
# and a second phase in which the workers reconnect; the load,
# FPM_SECONDS (6) with FPM_CONNECTIONS (48) connections on FPM_WORKERS
# (12) workers.  Then it checks: no
# answer but 200/409, one hot item sold exactly to its stock and never
# beyond, every claimed unit gone from stock, rsv_audit clean, at most one
# connection per worker while they run and none once FPM stopped, and
# each worker's RSS within FPM_RSS_SLACK_KB (768) of what it was before
# the load.  Skips (exit 0) without php-fpm8.2, nginx or wrk.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [ -z "${RSV_TEST_SOCKET:-}" ]; then
  echo "fpm-test.sh: RSV_TEST_SOCKET is not set; use: tools/mariadb.sh run $0" >&2
  exit 2
fi
skip() { echo "skip php-fpm: $*"; exit 0; }
fpm=$(command -v php-fpm8.2 || ls /usr/sbin/php-fpm8.2 2>/dev/null) || skip "php-fpm8.2 is not installed (apt-get install php8.2-fpm)"
nginx=$(command -v nginx || ls /usr/sbin/nginx 2>/dev/null) || skip "nginx is not installed (apt-get install nginx-light)"
command -v wrk >/dev/null 2>&1 || skip "wrk is not installed (apt-get install wrk)"
command -v php >/dev/null 2>&1 || skip "php is not installed (apt-get install php8.2-cli)"
build=$repo/${RSV_BUILD:-build}
if [ -z "${LIBRESERVE_PATH:-}" ]; then
  [ -e "$build/libreserve.so.0" ] || { echo "fpm-test.sh: $build/libreserve.so.0 not built (make lib)" >&2; exit 2; }
  export LIBRESERVE_PATH=$build/libreserve.so.0
fi
workers=${FPM_WORKERS:-12}
conns=${FPM_CONNECTIONS:-48}
secs=${FPM_SECONDS:-6}
slack_kb=${FPM_RSS_SLACK_KB:-768}
hot_stock=${FPM_HOT_STOCK:-300}
big_stock=1000000
db=rsvtest_fpm_$$
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rsv-fpm.XXXXXX")
fail=0
bad() { echo "FAIL: $*"; fail=1; }
sql() { mariadb --no-defaults -uroot --socket="$RSV_TEST_SOCKET" -N -B "$@"; }

stop() { # nginx, then FPM gracefully: requests in flight finish first
  local f pid
  for f in "$tmp/nginx.pid" "$tmp/fpm.pid"; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    kill -QUIT "$pid" 2>/dev/null || continue
    for _ in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$f"
  done
}
cleanup() {
  stop
  sql -e "DROP DATABASE IF EXISTS \`$db\`" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# Two free loopback ports below 32768.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_port() {
  local p
  for _ in $(seq 1 50); do
    p=$((20000 + RANDOM % 12000))
    [ "$p" != "${1:-}" ] && port_free "$p" && { echo "$p"; return 0; }
  done
  return 1
}
fpm_port=$(pick_port) || { echo "no free port"; exit 1; }
http_port=$(pick_port "$fpm_port") || { echo "no free port"; exit 1; }

sql -e "CREATE DATABASE \`$db\`" && sql "$db" <"$repo/sql/schema.sql" || { echo "cannot create $db"; exit 1; }
dsn="mariadb://root@/$db?socket=$(php -r 'echo rawurlencode($argv[1]);' "$RSV_TEST_SOCKET")"
export RSV_DSN=$dsn
php -r 'require $argv[1]; $c = Libreserve\Context::open(getenv("RSV_DSN"));
  $c->stockSet(1, 1, 1, (int) $argv[2]); $c->stockSet(1, 2, 1, (int) $argv[3]);' \
  "$here/autoload.php" "$hot_stock" "$big_stock" || { echo "cannot set the stock"; exit 1; }

run_as_root=()
preload_user=
if [ "$(id -u)" = 0 ]; then run_as_root=(--allow-to-run-as-root); preload_user="opcache.preload_user=root"; fi
php "$here/bin/libreserve-ffi-preload" >"$tmp/libreserve-ffi.h" || { echo "FAIL: libreserve-ffi-preload"; exit 1; }
cat >"$tmp/php.ini" <<INI
extension=ffi
zend_extension=opcache
ffi.enable=preload
ffi.preload=$tmp/libreserve-ffi.h
opcache.enable=1
opcache.preload=$here/preload.php
$preload_user
memory_limit=128M
display_errors=Off
log_errors=On
INI
cat >"$tmp/fpm.conf" <<CONF
[global]
pid = $tmp/fpm.pid
process_control_timeout = 20s
error_log = $tmp/fpm.log
daemonize = no

[shop]
listen = 127.0.0.1:$fpm_port
listen.backlog = 512
pm = static
pm.max_children = $workers
catch_workers_output = yes
clear_env = yes
env[RSV_DSN] = "$dsn"
CONF
cat >"$tmp/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $tmp/nginx.pid;
error_log $tmp/nginx-error.log warn;
$( [ "$(id -u)" = 0 ] && echo "user root;" )
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $tmp/body;
  fastcgi_temp_path $tmp/fastcgi;
  proxy_temp_path $tmp/proxy;
  uwsgi_temp_path $tmp/uwsgi;
  scgi_temp_path $tmp/scgi;
  upstream fpm { server 127.0.0.1:$fpm_port; keepalive 16; }
  server {
    listen 127.0.0.1:$http_port;
    root $here/examples;
    location = /checkout.php {
      fastcgi_pass fpm;
      fastcgi_keep_conn on;
      fastcgi_param SCRIPT_FILENAME \$document_root\$fastcgi_script_name;
      fastcgi_param QUERY_STRING \$query_string;
      fastcgi_param REQUEST_METHOD \$request_method;
      fastcgi_param SCRIPT_NAME \$fastcgi_script_name;
      fastcgi_param REQUEST_URI \$request_uri;
      fastcgi_param SERVER_PROTOCOL \$server_protocol;
    }
  }
}
CONF

PHP_INI_SCAN_DIR= "$fpm" "${run_as_root[@]}" --nodaemonize -c "$tmp/php.ini" -y "$tmp/fpm.conf" \
  >"$tmp/fpm.out" 2>&1 &
"$nginx" -e "$tmp/nginx-error.log" -p "$tmp" -c "$tmp/nginx.conf" >"$tmp/nginx.out" 2>&1 &
up=
for _ in $(seq 1 100); do
  if [ -f "$tmp/fpm.pid" ] && [ -f "$tmp/nginx.pid" ] && ! port_free "$http_port" && ! port_free "$fpm_port"; then up=1; break; fi
  sleep 0.1
done
if [ -z "$up" ]; then
  echo "FAIL: php-fpm or nginx did not start"; cat "$tmp"/fpm.out "$tmp"/fpm.log "$tmp"/nginx-error.log 2>/dev/null | tail -20
  exit 1
fi
master=$(cat "$tmp/fpm.pid")
echo "php-fpm (pid $master, $workers workers, port $fpm_port), nginx (port $http_port), wrk $conns connections"

worker_rss() { # "pid rss_kb" per worker
  local p
  for p in $(pgrep -P "$master"); do
    echo "$p $(awk '/^VmRSS:/ { print $2 }' "/proc/$p/status" 2>/dev/null)"
  done | sort
}
lib_conns() { sql -e "SELECT COUNT(*) FROM information_schema.processlist WHERE db = '$db' AND id <> CONNECTION_ID()"; }
load() { # seconds
  FPM_ITEMS=1,2 wrk -t2 -c"$conns" -d"${1}s" --timeout 10s -s "$here/tests/fpm-load.lua" \
    "http://127.0.0.1:$http_port/checkout.php" | tee -a "$tmp/wrk.out" | grep '^load:'
}

# Warm-up: every worker serves, opens its context, fills its caches.
first=$(curl -s "http://127.0.0.1:$http_port/checkout.php?item=2" 2>/dev/null || php -r 'echo @file_get_contents($argv[1]);' "http://127.0.0.1:$http_port/checkout.php?item=2")
case "$first" in claimed*|released*) ;; *) bad "first request answered: $first"; tail -20 "$tmp/fpm.log" ;; esac
load 3 >/dev/null
n=$(lib_conns)
echo "after warm-up: $n library connections for $workers workers"
[ "$n" -ge 1 ] && [ "$n" -le "$workers" ] || bad "$n connections for $workers workers (one context per worker)"

# A server restart, as the workers see it: every connection dropped.  The
# workers reconnect in the next phase, which must answer as any other.
for id in $(sql -e "SELECT id FROM information_schema.processlist WHERE db = '$db' AND id <> CONNECTION_ID()"); do
  sql -e "KILL $id" 2>/dev/null || true
done
line=$(load 2)
echo "after the connections were killed: $line"
grep -q ' other=0' <<<"$line" || bad "answers other than 200/409/503 after the connections were killed"
worker_rss >"$tmp/rss.before"

line=$(load "$secs")
echo "$line"
n=$(lib_conns)
echo "after the load: $n library connections"
[ "$n" -le "$workers" ] || bad "$n connections for $workers workers"
worker_rss >"$tmp/rss.after"
other=$(sed -n 's/.* other=\([0-9]*\).*/\1/p' <<<"$line")
ok=$(sed -n 's/.* ok=\([0-9]*\).*/\1/p' <<<"$line")
[ "${other:-1}" = 0 ] || { bad "answers other than 200/409/503: $other"; tail -20 "$tmp/fpm.log"; }
[ "${ok:-0}" -gt 0 ] || bad "no checkout succeeded"
grep -q "Socket errors" "$tmp/wrk.out" && echo "note: $(grep 'Socket errors' "$tmp/wrk.out" | tail -1)"

# Memory: each worker after the load against after the warm-up.
join "$tmp/rss.before" "$tmp/rss.after" >"$tmp/rss"
[ -s "$tmp/rss" ] || bad "no worker survived from warm-up to the end (were they restarted?)"
while read -r pid before after; do
  grow=$((after - before))
  [ "$grow" -le "$slack_kb" ] || bad "worker $pid: RSS $before -> $after kB (+$grow, bound $slack_kb)"
done <"$tmp/rss"
echo "worker RSS kB (pid before after): $(tr '\n' ';' <"$tmp/rss")"

stop
# Connections go with their workers.
for _ in $(seq 1 50); do [ "$(lib_conns)" = 0 ] && break; sleep 0.2; done
n=$(lib_conns)
[ "$n" = 0 ] || bad "$n connections left after FPM stopped"

# The database: every claimed unit off the stock, never beyond it.
php -r '
require $argv[1];
$c = Libreserve\Context::open(getenv("RSV_DSN"));
$fail = 0;
$v = $c->audit(0, allShops: true);
foreach ($v as $x) { echo "FAIL: audit: item {$x->itemId}: {$x->problem}\n"; $fail = 1; }
$c->sweep(1);
foreach ([1 => (int) $argv[2], 2 => (int) $argv[3]] as $item => $stock) {
    $s = $c->stockGet(1, $item, 1);
    $claimed = (int) shell_exec(sprintf("mariadb --no-defaults -uroot --socket=%s -N -B -e %s %s",
        escapeshellarg(getenv("RSV_TEST_SOCKET")),
        escapeshellarg("SELECT COALESCE(SUM(quantity), 0) FROM rsv_journal WHERE kind = 2 AND item_id = $item"),
        escapeshellarg($argv[4])));
    $count = (int) shell_exec(sprintf("mariadb --no-defaults -uroot --socket=%s -N -B -e %s %s",
        escapeshellarg(getenv("RSV_TEST_SOCKET")),
        escapeshellarg("SELECT COUNT(*) FROM rsv_checkouts WHERE status = 2"),
        escapeshellarg($argv[4])));
    echo "item $item: stock $stock, on hand {$s->onHand}, held {$s->held}, available {$s->available}\n";
    if ($s->onHand < 0 || $s->available < 0 || $s->held !== 0) { echo "FAIL: item $item oversold or still held\n"; $fail = 1; }
    if ($item === 1 && $s->onHand !== 0) { echo "FAIL: the hot item was not sold out exactly: {$s->onHand} left\n"; $fail = 1; }
    $rows[$item] = $stock - $s->onHand;
}
$total = array_sum($rows);
if ($total !== $count) { echo "FAIL: $count checkouts claimed, but $total units left the stock\n"; $fail = 1; }
echo "claimed checkouts $count = units off the stock $total\n";
if ($c->audit(0, allShops: true) !== []) { echo "FAIL: audit after the sweep\n"; $fail = 1; }
exit($fail);
' "$here/autoload.php" "$hot_stock" "$big_stock" "$db" || fail=1

if grep -qiE "PHP (Fatal|Warning)|segfault|SIGSEGV" "$tmp/fpm.log"; then
  bad "FPM log:"; grep -iE "PHP (Fatal|Warning)|segfault|SIGSEGV" "$tmp/fpm.log" | head -5
fi
if [ "$fail" = 0 ]; then echo "php-fpm: passed"; else echo "php-fpm: FAILED"; fi
exit $fail
