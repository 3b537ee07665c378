#!/usr/bin/env bash
# tests/bench/migrate-bench.sh - what the migration costs (make
# bench-migrate; docs/migration.md "What it costs"), measured on servers
# it starts and removes:
#   new   libreserve's MariaDB (binary log on, synced: servers.sh binlog1)
#   old   the old store's ledger, a MariaDB of its own (binlog1 as well)
#   Redis the old store's counters (tests/redislib.sh)
# Every client reaches each of the three through the delay proxy
# (tests/bench/proxy, 0.5 ms round trip), so stopping the new server
# never stops the old store.  The load is tests/bench/migload (buyers
# through migration handles, the old store of examples/migrate_redis.c).
#
# Parts (MIGBENCH_PARTS, comma-separated; all by default):
#   propagation  4 processes x 16 handles buying (1,000 checkouts/s in
#                all); rsv-admin migrate set moves the shop through five
#                stages; each handle's time from the change's commit
#                (rsv_migration_stage.changed_at, written before the
#                commit, so the times are upper bounds) to the moment
#                rsv_migrate_stage() showed it; the statements the
#                handles' threads sent to follow the stages and keep
#                their counters, from performance_schema's digests
#   shadow       64 buyers at each rate of MIGBENCH_SHADOW_RATES (250
#                and 1,000 checkouts/s: within what 2 cores sustain for
#                both stores, and at the limit): a shop at stage old
#                (shadow off), one at shadow (on), and the same at shadow
#                with the new server stopped (SIGSTOP) for 10 s mid-run
#                and queues of 64 (so that they fill and drop); each
#                call's time, p99 against off, over the whole run and
#                over the calls started while the server was stopped;
#                the queue's books after the drain (offered = applied +
#                dropped) and the most work seen waiting
#   import       rsv-admin import of MIGBENCH_KEYS (1,000,000) levels from
#                a CSV file; rsv-admin migrate compare of them against the
#                CSV file and against Redis while 1,000 checkouts/s of
#                shadow traffic run (on another shop for the CSV file,
#                which is a snapshot; on the compared keys for Redis)
#   recheck      what checking differences again costs, without
#                buyers: rsv-admin migrate compare of
#                MIGBENCH_RECHECK_KEYS (100,000) keys against Redis, once
#                clean, once with every tenth key changed in Redis (drift
#                that stays, so each of the three rechecks sees all of it;
#                --settle 0), and once more with those keys decremented in
#                Redis every half second (--settle 1: each recheck finds
#                new values to record); the statements (Questions)
#                and binary-log commits (Binlog_commits) libreserve's
#                server counted, and the time each run took
# Environment: B (build directory), MIGBENCH_ROUNDS (2: the propagation
# and shadow parts repeated), MIGBENCH_SECONDS (30: each shadow run),
# MIGBENCH_RATE (1000: the propagation's and the compares' traffic),
# MIGBENCH_SHADOW_RATES, MIGBENCH_STALL_QUEUE (64), MIGBENCH_KEYS,
# MIGBENCH_RECHECK_KEYS, MIGBENCH_SETTLE (the import part's compares'
# --settle; the tool's default when unset), MIGBENCH_RTT_US (500),
# MIGBENCH_DUMP (a directory: every call of the shadow runs, migload
# --dump, one file a run; the stall's window is written beside it),
# MIGBENCH_PIN (1: the shadow runs with libreserve's server and its proxy
# on CPU 0, the old store's servers, their proxies and the buyers on the
# others: libreserve's side with a core of its own, as on a server with
# cores to spare), MIGBENCH_BATCHER (N: in the shadow runs and the
# compares' traffic the buyers' handles share one batcher of N
# connections, rsv_migrate_set_batcher).
# The numbers are printed next to their targets, never asserted: the exit
# status says only whether the runs themselves worked (every call
# answered, the books balanced, nothing reported as drift).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=tests/bench/servers.sh
. tests/bench/servers.sh
B=${B:-build}
ADMIN=$B/rsv-admin LOAD=$B/bench/migload PROXY=$B/bench/proxy
for f in "$ADMIN" "$LOAD" "$PROXY"; do
  [ -x "$f" ] || { echo "migrate-bench: $f missing: make bench-migrate builds it" >&2; exit 2; }
done
ROUNDS=${MIGBENCH_ROUNDS:-2} SECS=${MIGBENCH_SECONDS:-30} RATE=${MIGBENCH_RATE:-1000}
KEYS=${MIGBENCH_KEYS:-1000000} RTT_US=${MIGBENCH_RTT_US:-500}
SHADOW_RATES=${MIGBENCH_SHADOW_RATES:-250 1000} STALL_QUEUE=${MIGBENCH_STALL_QUEUE:-64}
PARTS=,${MIGBENCH_PARTS:-propagation,shadow,import},
DB=rsvbench
results=$B/bench/results-migrate.txt
mkdir -p "$B/bench"

work=$(mktemp -d "${TMPDIR:-/tmp}/rsv-migbench.XXXXXX")
# shellcheck disable=SC2034  # read by tests/redislib.sh
tmp=$work tl_name=migrate-bench
load_pids=() proxy_pids=() proxy_fds=()
# shellcheck disable=SC2317  # called by the trap
cleanup() {
  local rc=$? p
  touch "$work/stop" 2>/dev/null || true
  # a server left stopped would never stop
  [ -f "$work/new/mysqld.pid" ] && kill -CONT "$(cat "$work/new/mysqld.pid")" 2>/dev/null
  for p in "${load_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${proxy_fds[@]}"; do exec {p}>&- 2>/dev/null || true; done
  for p in "${proxy_pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  declare -F redis_stop >/dev/null && redis_stop
  if [ "$rc" -ne 0 ]; then
    for l in "$work"/new/error.log "$work"/old/error.log; do
      [ -f "$l" ] && { echo "== ${l#"$work"/}" >&2; tail -n 10 "$l" >&2; }
    done
  fi
  bench_stop_all
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { echo "$*" | tee -a "$results"; }
: >"$results"
say "# machine: $(uname -srm), $(nproc) cpu(s), $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
[ -n "${MIGBENCH_BATCHER:-}" ] && say "# the buyers' handles share one batcher of $MIGBENCH_BATCHER connections for their shadow calls"
[ "${MIGBENCH_PIN:-0}" = 1 ] && say "# pinned: libreserve's server and its proxy on CPU 0; the old store, its proxies and the buyers on CPUs 1-$(($(nproc) - 1))"
say "# $(date -u '+%Y-%m-%d %H:%M UTC'); every server binlog1 (binary log on, ROW, sync_binlog=1, redo log flushed at commit); every client through the delay proxy, $RTT_US us round trip"

now_ms() { date +%s%3N; }
newsql() { bench_sql "$work/new" "USE $DB; $1"; }
admin() { "$ADMIN" --no-defaults --socket "$work/new/mysqld.sock" --user root --database "$DB" "$@"; }

# proxy_up SOCKET: a delay proxy in front of SOCKET; prints nothing, sets
# proxy_port.  The proxy ends when the FIFO this shell holds is closed.
proxy_up() {
  local sock=$1 fifo n=${#proxy_pids[@]} fd
  fifo=$work/proxy.$n.in
  mkfifo "$fifo"
  "$PROXY" --unix "$sock" --rtt-us "$RTT_US" <"$fifo" >"$work/proxy.$n.port" 2>"$work/proxy.$n.err" &
  proxy_pids+=($!)
  exec {fd}>"$fifo"
  proxy_fds+=("$fd")
  for _ in $(seq 100); do
    [ -s "$work/proxy.$n.port" ] && break
    sleep 0.05
  done
  proxy_port=$(head -1 "$work/proxy.$n.port")
  [ -n "$proxy_port" ] || { echo "migrate-bench: the proxy did not start: $(cat "$work/proxy.$n.err")" >&2; exit 1; }
}

# new_up EXTRA_OPTS: the new server (again), with the schema loaded.
new_up() {
  local saved=$bench_user_opts
  if [ -d "$work/new" ]; then tools/mariadb.sh stop "$work/new"; rm -rf "$work/new"; fi
  bench_user_opts="$1 $saved"
  bench_start binlog1 "$work/new"
  bench_user_opts=$saved
  bench_sql "$work/new" "CREATE DATABASE $DB"
  mariadb --no-defaults -uroot -S "$work/new/mysqld.sock" "$DB" <sql/schema.sql
}

# ---------------------------------------------------------------- servers
new_up ""
bench_start binlog1 "$work/old"
bench_sql "$work/old" "CREATE DATABASE legacy; CREATE TABLE legacy.legacy_sold (shop_id BIGINT UNSIGNED, item_id BIGINT UNSIGNED, location_id BIGINT UNSIGNED, sold BIGINT NOT NULL, PRIMARY KEY (shop_id, item_id, location_id)) ENGINE=InnoDB"
# shellcheck disable=SC2034  # read by tests/redislib.sh
redis_opts=(--unixsocket "$work/redis.sock" --unixsocketperm 700)
# shellcheck source=tests/redislib.sh
. tests/redislib.sh
proxy_up "$work/old/mysqld.sock"; old_port=$proxy_port
proxy_up "$work/redis.sock"; redis_proxy=$proxy_port
proxy_up "$work/new/mysqld.sock"; new_port=$proxy_port
dsn="mariadb://root@127.0.0.1:$new_port/$DB"
load_args=(--dsn "$dsn" --redis-port "$redis_proxy" --ledger-port "$old_port" --ledger-db legacy)

# stock SHOP ITEMS LEVEL: the same level of items 1..ITEMS (location 1)
# in both stores: libreserve through rsv-admin import, Redis through
# redis-cli --pipe.
stock() {
  local shop=$1 n=$2 level=$3 csv=$work/stock-$1.csv
  awk -v s="$shop" -v n="$n" -v l="$level" 'BEGIN { for (i = 1; i <= n; i++) print s "," i ",1," l }' >"$csv"
  admin import --csv "$csv" >/dev/null 2>"$work/import.err" || { cat "$work/import.err" >&2; return 1; }
  redis_load "$csv"
}
redis_load() {
  awk -F, '{ k = "stock:" $1 ":" $2 ":" $3; printf "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(k), k, length($4), $4 }' "$1" |
    rcli --pipe >"$work/pipe.out" 2>&1 || { cat "$work/pipe.out" >&2; return 1; }
}
field() { sed -n "s/.*[ ]$1=\([^ ]*\).*/\1/p" "$2" | head -1; }

# ------------------------------------------------------------ propagation
# rows of the summary: "what|measured|target|ratio"
summary=()
row() { summary+=("$1|$2|$3|$4"); }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

propagation() {
  local round=$1 shop=$((10 + $1)) i st=$work/prop$1
  mkdir -p "$st"
  stock "$shop" 1000 1000000
  for i in 1 2 3 4; do
    "$LOAD" "${load_args[@]}" --shop "$shop" --buyers 16 --rate $((RATE / 4)) \
        --seconds 0 --state "$st" --id "$i" >"$st/load.$i.out" 2>"$st/load.$i.err" &
    load_pids+=($!)
  done
  for _ in $(seq 600); do
    [ "$(find "$st" -name 'stage.*' | wc -l)" -ge 64 ] && break
    sleep 0.1
  done
  [ "$(find "$st" -name 'stage.*' | wc -l)" -ge 64 ] || { echo "migrate-bench: the 64 handles did not start" >&2; cat "$st"/load.*.err >&2; exit 1; }
  sleep 2
  local ps="SELECT COALESCE(SUM(COUNT_STAR), 0) FROM performance_schema.events_statements_summary_by_digest WHERE SCHEMA_NAME = '$DB' AND"
  local reads_q="$ps DIGEST_TEXT LIKE 'SELECT % FROM \`rsv_migration_stage\` WHERE \`version\` > ?%'"
  local books_q="$ps (DIGEST_TEXT LIKE 'INSERT INTO \`rsv_migration_counts\`%' OR DIGEST_TEXT LIKE 'REPLACE INTO \`rsv_migration_mismatch\`%' OR DIGEST_TEXT LIKE 'UPDATE \`rsv_migration_stage\` SET \`needs_compare\`%')"
  local r0 b0 t0 r1 b1 t1
  r0=$(bench_sql "$work/new" "$reads_q"); b0=$(bench_sql "$work/new" "$books_q"); t0=$(now_ms)
  : >"$st/commits"
  local step to pause extra
  # primary is allowed once the shop was shadowed longer than its holds'
  # TTL (5 s): the first pause is longer
  for step in "shadow 7" "primary 4" "shadow 4" "primary 4" "complete 4"; do
    read -r to pause <<<"$step"
    extra=()
    [ "$to" = primary ] && extra=(--max-ttl 1)
    admin migrate set "$to" "$shop" "${extra[@]}" --reason "bench" >/dev/null
    echo "$to $(newsql "SELECT ROUND(UNIX_TIMESTAMP(changed_at) * 1000) FROM rsv_migration_stage WHERE shop_id = $shop")" >>"$st/commits"
    sleep "$pause"
  done
  r1=$(bench_sql "$work/new" "$reads_q"); b1=$(bench_sql "$work/new" "$books_q"); t1=$(now_ms)
  touch "$st/stop"
  local status=0 p
  for p in "${load_pids[@]}"; do wait "$p" || status=1; done
  load_pids=()
  [ $status = 0 ] || { echo "migrate-bench: a load process failed:" >&2; cat "$st"/load.*.err "$st"/load.*.out >&2; exit 1; }
  for i in 1 2 3 4; do sed -n "s/^migload: \(shop=.*\)/propagation round $round, process $i: \1/p" "$st/load.$i.out"; done | tee -a "$results"
  python3 - "$st" >"$st/summary" <<'PY'
import glob, math, sys
st = sys.argv[1]
names = {"old": 0, "shadow": 1, "primary": 2, "complete": 3}
commits = [(names[l.split()[0]], int(float(l.split()[1])))
           for l in open(st + "/commits")]
logs = {}
for f in glob.glob(st + "/stage.*"):
    logs[f] = [tuple(int(x) for x in l.split()) for l in open(f) if l.strip()]
def p99(v):
    v = sorted(v)
    return v[max(0, math.ceil(0.99 * len(v)) - 1)]
every = []
for k, (stage, c) in enumerate(commits):
    end = commits[k + 1][1] if k + 1 < len(commits) else 1 << 62
    d = []
    for f, lines in logs.items():
        seen = [t for s, t in lines if s == stage and c <= t < end + 5000]
        d.append(seen[0] - c if seen else None)
    missing = sum(1 for x in d if x is None)
    got = [x for x in d if x is not None]
    every += got
    print("propagation: change %d to stage %d: %d handles, %d missed; "
          "max %d ms, p99 %d ms, median %d ms" % (
              k + 1, stage, len(d), missing, max(got), p99(got),
              sorted(got)[len(got) // 2]))
print("propagation: all changes: max_ms=%d p99_ms=%d handles=%d changes=%d"
      % (max(every), p99(every), len(logs), len(commits)))
PY
  tee -a "$results" <"$st/summary"
  local maxms p99ms secs reads books
  maxms=$(field max_ms "$st/summary"); p99ms=$(field p99_ms "$st/summary")
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1000 }')
  reads=$(awk -v a="$r0" -v b="$r1" -v s="$secs" 'BEGIN { printf "%.2f", (b - a) / 64 / s }')
  books=$(awk -v a="$b0" -v b="$b1" -v s="$secs" 'BEGIN { printf "%.2f", (b - a) / 64 / s }')
  say "propagation round $round: over $secs s: stage reads per handle per 1 s interval $reads, counter and sample writes per handle per interval $books ($((r1 - r0)) reads, $((b1 - b0)) writes by 64 handles)"
  row "propagation r$round: slowest of 64 handles, ms" "$maxms" "<= 2000" "$(ratio "$maxms" 2000)"
  row "propagation r$round: p99 over 64 handles x 5 changes, ms" "$p99ms" "<= 2000" "$(ratio "$p99ms" 2000)"
  row "propagation r$round: stage reads / handle / interval" "$reads" "<= 1" "$(ratio "$reads" 1)"
  row "propagation r$round: all bookkeeping statements / handle / interval" "$(awk -v a="$reads" -v b="$books" 'BEGIN { printf "%.2f", a + b }')" "(1 + counters every 5th)" "-"
}

# ------------------------------------------------------------------ shadow
# shadow_run LABEL SHOP RATE STALL(0|1): one run of 64 buyers; sets
# run_out.
shadow_run() {
  local label=$1 shop=$2 rate=$3 stall=$4 out=$work/$1.out
  rm -f "$work/window"
  local args=("${load_args[@]}" --shop "$shop" --buyers 64 --rate "$rate" --seconds "$SECS" --items 1000)
  local c0 c1
  c0=$(cpu_all)
  [ -n "${MIGBENCH_DUMP:-}" ] && args+=(--dump "$MIGBENCH_DUMP/$label.calls")
  args+=("${batcher_args[@]}")
  if [ "$stall" = 1 ]; then
    "${pin_load[@]}" "$LOAD" "${args[@]}" --queue-max "$STALL_QUEUE" --window "$work/window" >"$out" 2>"$work/$label.err" &
    local lp=$! pid from to
    load_pids+=("$lp")
    sleep $((SECS / 3))
    pid=$(cat "$work/new/mysqld.pid")
    from=$(now_ms); kill -STOP "$pid"
    sleep 10
    kill -CONT "$pid"; to=$(now_ms)
    echo "$from $to" >"$work/window"
    [ -n "${MIGBENCH_DUMP:-}" ] && cp "$work/window" "$MIGBENCH_DUMP/$label.window"
    wait "$lp" || { cat "$work/$label.err" "$out" >&2; exit 1; }
    load_pids=()
  else
    "${pin_load[@]}" "$LOAD" "${args[@]}" >"$out" 2>"$work/$label.err" || { cat "$work/$label.err" "$out" >&2; exit 1; }
  fi
  c1=$(cpu_all)
  # what each server spent: where shadow's second copy of the work goes
  echo "$c0 $c1" | awk '{ printf "migload: cpu_ms libreserve=%d old_ledger=%d redis=%d\n", $4 - $1, $5 - $2, $6 - $3 }' >>"$out"
  sed "s/^migload:/$label:/" "$out" | tee -a "$results"
  run_out=$out
}
p99_of() { grep " $1 " "$run_out" | sed 's/.*p99_us=\([0-9]*\).*/\1/'; }
cpu_of() { sed -n 's/.*cpu_ms libreserve=\([0-9]*\).*/\1/p' "$run_out"; }
# cpu_ms PID: the CPU time (user + system) the process has used, in ms.
cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{ print int(($14 + $15) * 1000 / hz) }' "/proc/$1/stat"; }
# cpu_all: "new old redis" CPU ms of the three servers.
# shellcheck disable=SC2154  # redis_pid: set by tests/redislib.sh
cpu_all() { echo "$(cpu_ms "$(cat "$work/new/mysqld.pid")") $(cpu_ms "$(cat "$work/old/mysqld.pid")") $(cpu_ms "$redis_pid")"; }

batcher_args=()
[ -n "${MIGBENCH_BATCHER:-}" ] && batcher_args=(--batcher "$MIGBENCH_BATCHER")

# pin: MIGBENCH_PIN's placement of the servers (and pin_load's of the
# buyers); nothing without it.
pin_load=()
pin() {
  [ "${MIGBENCH_PIN:-0}" = 1 ] || return 0
  local rest=1-$(($(nproc) - 1)) p
  taskset -a -c -p 0 "$(cat "$work/new/mysqld.pid")" >/dev/null
  taskset -a -c -p 0 "${proxy_pids[2]}" >/dev/null
  for p in "$(cat "$work/old/mysqld.pid")" "$redis_pid" "${proxy_pids[0]}" "${proxy_pids[1]}"; do
    taskset -a -c -p "$rest" "$p" >/dev/null
  done
  pin_load=(taskset -c "$rest")
}

shadow_part() {
  local round=$1 rate off on k=0 p_off p_on p_stall p_win books c_off c_on
  pin
  for rate in $SHADOW_RATES; do
    k=$((k + 1)); off=$((1000 + 100 * round + 10 * k + 1)); on=$((off + 1))
    stock "$off" 1000 1000000
    stock "$on" 1000 1000000
    admin migrate set shadow "$on" --reason bench >/dev/null
    shadow_run "r$round-$rate-off" "$off" "$rate" 0; p_off=$(p99_of all); c_off=$(cpu_of)
    shadow_run "r$round-$rate-on" "$on" "$rate" 0; p_on=$(p99_of all); c_on=$(cpu_of)
    shadow_run "r$round-$rate-stall" "$on" "$rate" 1; p_stall=$(p99_of all); p_win=$(p99_of window)
    books=$(grep ' queue ' "$run_out" | sed 's/^.*queue //')
    row "shadow r$round $rate/s: p99 off (stage old), us" "$p_off" "-" "-"
    row "shadow r$round $rate/s: p99 on, us" "$p_on" "<= 1.1x off" "$(ratio "$p_on" "$p_off")"
    row "shadow r$round $rate/s: libreserve's server CPU over the run, ms (off, on)" "$c_off, $c_on" "-" "-"
    row "shadow r$round $rate/s: p99 on, server stopped 10 s (whole run), us" "$p_stall" "<= 1.1x off" "$(ratio "$p_stall" "$p_off")"
    row "shadow r$round $rate/s: p99 on, calls while stopped, us" "$p_win" "<= 1.1x off" "$(ratio "$p_win" "$p_off")"
    row "shadow r$round $rate/s: books after the drain (queues of $STALL_QUEUE)" "$books" "offered = applied + dropped" "-"
  done
}

# ------------------------------------------------------------------ import
import_part() {
  local shop=31 traffic=32 csv=$work/levels.csv t0 t1 secs lp drift settle_args=()
  [ -n "${MIGBENCH_SETTLE:-}" ] && settle_args=(--settle "$MIGBENCH_SETTLE")
  rcli FLUSHALL >/dev/null
  awk -v s="$shop" -v n="$KEYS" 'BEGIN { print "shop_id,item_id,location_id,on_hand"; for (i = 1; i <= n; i++) print s "," i ",1," 1000 + i % 1000 }' >"$csv"
  t0=$(now_ms)
  admin import --csv "$csv" >"$work/import.out" 2>"$work/import.err" || { cat "$work/import.err" >&2; exit 1; }
  t1=$(now_ms); secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1000 }')
  say "import: $(tail -1 "$work/import.out") in $secs s"
  row "import of $KEYS levels (CSV), s" "$secs" "< 60" "$(ratio "$secs" 60)"
  tail -n +2 "$csv" | redis_load /dev/stdin

  # against the CSV file: live shadow traffic on another shop
  stock "$traffic" 1000 1000000
  admin migrate set shadow "$traffic" --reason bench >/dev/null
  "$LOAD" "${load_args[@]}" --shop "$traffic" --buyers 64 --rate "$RATE" --seconds 0 \
      --items 1000 --state "$work" --id 0 "${batcher_args[@]}" >"$work/traffic-csv.out" 2>"$work/traffic-csv.err" &
  lp=$!; load_pids+=("$lp")
  sleep 3
  t0=$(now_ms); set +e
  admin migrate compare --csv "$csv" "${settle_args[@]}" >"$work/compare-csv.out" 2>"$work/compare-csv.err"; local rc=$?
  set -e; t1=$(now_ms); secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1000 }')
  touch "$work/stop"; wait "$lp" || { cat "$work/traffic-csv.err" >&2; exit 1; }; load_pids=(); rm -f "$work/stop"
  sed 's/^migload:/traffic (csv compare):/' "$work/traffic-csv.out" | tee -a "$results"
  say "compare csv (exit $rc): $(head -1 "$work/compare-csv.out") in $secs s"
  drift=$(sed -n 's/.*; \([0-9]*\) drifted.*/\1/p' "$work/compare-csv.out")
  row "compare of $KEYS keys against the CSV file, s" "$secs" "< 60" "$(ratio "$secs" 60)"
  row "compare against the CSV file: keys reported" "${drift:-?}" "0" "-"
  [ "$rc" = 0 ] || { cat "$work/compare-csv.err" >&2; compare_failed=1; }

  # against Redis: live shadow traffic on the compared keys
  rcli --scan --pattern "stock:$traffic:*" | xargs -r -n 500 redis-cli -h 127.0.0.1 -p "$port" DEL >/dev/null
  admin migrate set shadow "$shop" --reason bench >/dev/null
  "$LOAD" "${load_args[@]}" --shop "$shop" --buyers 64 --rate "$RATE" --seconds 0 \
      --items "$KEYS" --state "$work" --id 0 "${batcher_args[@]}" >"$work/traffic-redis.out" 2>"$work/traffic-redis.err" &
  lp=$!; load_pids+=("$lp")
  sleep 3
  t0=$(now_ms); set +e
  admin migrate compare --redis "127.0.0.1:$port" --pattern 'stock:{shop}:{item}:{location}' \
      "${settle_args[@]}" >"$work/compare-redis.out" 2>"$work/compare-redis.err"; rc=$?
  set -e; t1=$(now_ms); secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1000 }')
  touch "$work/stop"; wait "$lp" || { cat "$work/traffic-redis.err" >&2; exit 1; }; load_pids=(); rm -f "$work/stop"
  sed 's/^migload:/traffic (redis compare):/' "$work/traffic-redis.out" | tee -a "$results"
  say "compare redis (exit $rc): $(head -1 "$work/compare-redis.out") in $secs s"
  grep '^drift:' "$work/compare-redis.out" | head -5 | tee -a "$results" || true
  grep '^migrate compare: check' "$work/compare-redis.err" | tee -a "$results" || true
  drift=$(sed -n 's/.*; \([0-9]*\) drifted.*/\1/p' "$work/compare-redis.out")
  row "compare of $KEYS keys against Redis under $RATE checkouts/s, s" "$secs" "< 60" "$(ratio "$secs" 60)"
  row "compare against Redis: keys reported" "${drift:-?}" "0" "-"
  [ "$rc" = 0 ] || { cat "$work/compare-redis.err" >&2; compare_failed=1; }
}

# ----------------------------------------------------------------- recheck
# recheck_run LABEL WANT_EXIT SETTLE: one compare against Redis; sets
# r_secs, r_stmts, r_commits.
recheck_run() {
  local q0 c0 t0 t1 rc
  q0=$(bench_status "$work/new" Questions); c0=$(bench_status "$work/new" Binlog_commits)
  t0=$(now_ms); set +e
  admin migrate compare --redis "127.0.0.1:$port" --pattern 'stock:{shop}:{item}:{location}' \
      --settle "$3" >"$work/$1.out" 2>"$work/$1.err"; rc=$?
  set -e; t1=$(now_ms)
  r_stmts=$(($(bench_status "$work/new" Questions) - q0 - 1))
  r_commits=$(($(bench_status "$work/new" Binlog_commits) - c0))
  r_secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1000 }')
  say "recheck $1 (exit $rc): $(head -1 "$work/$1.out") in $r_secs s; $r_stmts statements, $r_commits commits"
  grep '^migrate compare: check' "$work/$1.err" | sed "s/^/recheck $1: /" | tee -a "$results" || true
  [ "$rc" = "$2" ] || { cat "$work/$1.err" >&2; compare_failed=1; }
}

recheck_part() {
  local shop=41 n=${MIGBENCH_RECHECK_KEYS:-100000} d mover
  rcli FLUSHALL >/dev/null
  stock "$shop" "$n" 1000
  recheck_run clean 0 0
  row "recheck: compare of $n keys against Redis, none differing, s" "$r_secs" "-" "-"
  row "recheck:   its statements, commits" "$r_stmts, $r_commits" "-" "-"
  awk -v s="$shop" -v n="$n" 'BEGIN { for (i = 10; i <= n; i += 10) print s "," i ",1,999" }' >"$work/drift.csv"
  redis_load "$work/drift.csv"
  d=$(wc -l <"$work/drift.csv")
  recheck_run drift 1 0
  row "recheck: the same, $d keys differing (3 rechecks, --settle 0), s" "$r_secs" "-" "-"
  row "recheck:   its statements, commits" "$r_stmts, $r_commits" "-" "-"
  awk -v s="$shop" -v n="$n" 'BEGIN { for (i = 10; i <= n; i += 10) printf "*2\r\n$4\r\nDECR\r\n$%d\r\n%s\r\n", length("stock:" s ":" i ":1"), "stock:" s ":" i ":1" }' >"$work/decr.resp"
  ( while [ ! -f "$work/stop" ]; do rcli --pipe <"$work/decr.resp" >/dev/null 2>&1; sleep 0.5; done ) &
  mover=$!; load_pids+=("$mover")
  recheck_run moving 1 1
  touch "$work/stop"; wait "$mover" || true; load_pids=(); rm -f "$work/stop"
  row "recheck: the same, the $d changed every 0.5 s (--settle 1), s" "$r_secs" "-" "-"
  row "recheck:   its statements, commits" "$r_stmts, $r_commits" "-" "-"
}

compare_failed=0
[[ $PARTS == *,recheck,* ]] && recheck_part
for round in $(seq "$ROUNDS"); do
  if [[ $PARTS == *,propagation,* ]]; then
    # performance_schema counts the handles' statements; only here, so
    # that it costs the shadow runs nothing
    new_up "--performance-schema=ON"
    propagation "$round"
    new_up ""
  fi
  [[ $PARTS == *,shadow,* ]] && shadow_part "$round"
done
[[ $PARTS == *,import,* ]] && import_part

say ""
say "# what | measured | target | ratio"
for r in "${summary[@]}"; do say "${r//|/ | }"; done
say "# load average after: $(cut -d' ' -f1-3 /proc/loadavg); written to $results"
exit "$compare_failed"
