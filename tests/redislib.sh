# tests/redislib.sh - a throwaway redis-server for the migration tests,
# after tests/testlib.sh: `. tests/redislib.sh`.  Starts it on a free
# loopback port below 32768, its files in $tmp, and gives port, redis_pid
# and rcli ARGS... (redis-cli against it); redis_stop stops it (call it
# from the test's cleanup_extra).  Options in redis_opts (an array, set
# before sourcing) are added to the server's own.
# shellcheck shell=bash disable=SC2034,SC2154
redis_server=$(command -v redis-server || echo /usr/bin/redis-server)
[ -x "$redis_server" ] || { echo "$tl_name: no redis-server (tools/deps.sh packages redis-server)" >&2; exit 1; }
redis_pid="" port=""
[ -n "${redis_opts+x}" ] || redis_opts=()
redis_stop() {
  [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
  redis_pid=
}
for try in 1 2 3 4 5 6 7 8 9 10; do
  p=$((20000 + (RANDOM + $$ + try * 977) % 12000))
  "$redis_server" --bind 127.0.0.1 --port "$p" --save '' --appendonly no \
    --dir "$tmp" --logfile "$tmp/redis.log" --daemonize no "${redis_opts[@]}" &
  redis_pid=$!
  for _ in $(seq 50); do
    if grep -q 'Ready to accept' "$tmp/redis.log" 2>/dev/null; then port=$p; break; fi
    kill -0 "$redis_pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$port" ] && break
  redis_stop
  : >"$tmp/redis.log"
done
[ -n "$port" ] || { echo "$tl_name: redis-server did not start"; cat "$tmp/redis.log"; exit 1; }
rcli() { redis-cli -h 127.0.0.1 -p "$port" "$@"; }
