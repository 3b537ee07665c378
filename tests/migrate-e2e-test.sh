#!/usr/bin/env bash
# tests/migrate-e2e-test.sh - a real migration, end to end, under load:
# a shop selling through Redis counters with its ledger in MariaDB (the
# design libreserve replaces) moves to libreserve through every stage
# while buyers keep buying: old, shadow, primary, back to shadow (the
# kill switch), primary again, complete.  Buyers are several processes of
# examples/migrate_redis (threads, a context and a migration handle
# each), sharing the stage table; rsv-admin migrate moves the shop.
#
# Checks: each change reaches every handle (the time is measured and
# printed against the documented 1 s, not asserted); every acknowledged
# checkout was claimable or releasable and is so in the stores that
# should have it (the buyers check their own); libreserve's audit is
# clean and the old store's books balance, nothing below 0 (neither store
# sold a unit twice); the classified disagreements name exactly the
# planted drift (item 7: libreserve has none, item 8: Redis has none), no
# call failed on the new side and nothing was dropped.
#
# Starts a throwaway redis-server on a loopback port below 32768 (removed
# afterwards) and creates its own database; against the MariaDB server in
# RSV_TEST_SOCKET.  Run by `make check`, or by hand:
#   make lib build/rsv-admin build/examples/migrate_redis &&
#     tools/mariadb.sh run tests/migrate-e2e-test.sh
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

B=${RSV_BUILD:-build}
BUYER=$B/examples/migrate_redis
[ -x "$BUYER" ] || { echo "migrate-e2e-test: $BUYER is not built (make $BUYER)" >&2; exit 1; }
PROCS=${MIGRATE_E2E_PROCS:-3}
CONTEXTS=${MIGRATE_E2E_CONTEXTS:-4}
SHOP=41
# shellcheck source=tests/testlib.sh
. tests/testlib.sh migrate-e2e-test
# shellcheck source=tests/admintest.sh
. tests/admintest.sh
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
buyer_pids=()
cleanup_extra() {
  touch "$tmp/stop"
  for p in "${buyer_pids[@]}"; do kill "$p" 2>/dev/null; done
  redis_stop
}
# shellcheck source=tests/redislib.sh
. tests/redislib.sh
echo "redis-server on 127.0.0.1:$port"

# ---- both stores loaded with the same stock, and the planted drift ----
load_schema || exit 1
q "CREATE TABLE legacy_sold (shop_id BIGINT UNSIGNED, item_id BIGINT UNSIGNED, location_id BIGINT UNSIGNED, sold BIGINT NOT NULL, PRIMARY KEY (shop_id, item_id, location_id))"
STOCK=1000000
for item in 1 2 3 4 5 7 8; do
  lib=$STOCK; old=$STOCK
  [ $item = 7 ] && lib=0   # libreserve has none: it refuses what Redis sells
  [ $item = 8 ] && old=0   # Redis has none: libreserve would oversell
  "$ADMIN" "${conn[@]}" set-stock $SHOP $item 1 $lib >/dev/null || exit 1
  rcli SET "stock:$SHOP:$item:1" $old >/dev/null
  rcli SET "initial:$SHOP:$item:1" $old >/dev/null
done

sock_esc=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe="/"))' "$RSV_TEST_SOCKET")
dsn="mariadb://$USER_${PASS_:+:$PASS_}@/$DB?socket=$sock_esc"

for i in $(seq "$PROCS"); do
  "$BUYER" "$dsn" "$port" $SHOP "$CONTEXTS" "$tmp" "$i" >"$tmp/buyer.$i.out" 2>"$tmp/buyer.$i.err" &
  buyer_pids+=($!)
done
nctx=$((PROCS * CONTEXTS))
echo "$PROCS processes x $CONTEXTS contexts buying"

now_ms() { date +%s%3N; }
# follow STAGE T0: wait until every handle has followed STAGE; print the
# slowest handle's delay from T0 (the moment before the change was sent).
worst_ms=0
follow() {
  local st=$1 t0=$2 n=0 max=0 f line t
  for _ in $(seq 600); do
    n=0; max=0
    for f in "$tmp"/stage.*; do
      [ -f "$f" ] || continue
      line=$(awk -v s="$st" -v t0="$t0" '$1 == s && $2 >= t0 {t = $2} END {print t}' "$f")
      [ -n "$line" ] || continue
      n=$((n + 1)); t=$((line - t0)); [ $t -gt $max ] && max=$t
      [ -n "${MIGRATE_E2E_VERBOSE:-}" ] && echo "  $(basename "$f"): $t ms"
    done
    [ $n -ge $nctx ] && break
    sleep 0.1
  done
  if [ $n -ge $nctx ]; then
    if [ "$t0" != 0 ]; then
      echo "stage $st reached all $nctx handles, the slowest after $max ms from the start of rsv-admin (refresh interval 1000 ms, bound 2000 ms)"
      [ $max -gt $worst_ms ] && worst_ms=$max
    fi
    ok "stage $st followed by every handle"
  else
    bad "stage $st reached only $n of $nctx handles"
  fi
}
step() {
  local name=$1 secs=$2; shift 2
  local t0; t0=$(now_ms)
  if ! "$ADMIN" "${conn[@]}" migrate "$@" >"$tmp/admin.out" 2>&1; then
    bad "rsv-admin migrate $*: $(cat "$tmp/admin.out")"; return
  fi
  echo "rsv-admin migrate $1 $2 took $(($(now_ms) - t0)) ms"
  follow "$name" "$t0"
  sleep "$secs"
}

follow 0 0
sleep 2
step 1 3 set shadow $SHOP --reason "e2e: shadow"
step 2 3 set primary $SHOP --max-ttl 1 --reason "e2e: primary"
step 1 2 set shadow $SHOP --reason "e2e: kill switch"
step 2 2 set primary $SHOP --max-ttl 1 --reason "e2e: forward again"
step 3 2 set complete $SHOP --reason "e2e: complete"
touch "$tmp/stop"
status=0
for p in "${buyer_pids[@]}"; do wait "$p" || status=1; done
buyer_pids=()
cat "$tmp"/buyer.*.out
if [ $status = 0 ]; then ok "every buyer's acknowledged checkouts are where they should be"
else bad "buyers found checkouts out of place:"; head -20 "$tmp"/buyer.*.err; fi
echo "slowest stage change over all steps and handles: $worst_ms ms"

# ---- neither store sold a unit twice ----
if "$ADMIN" "${conn[@]}" audit --all >"$tmp/audit" 2>&1; then ok "libreserve's audit is clean"
else bad "libreserve's audit: $(tail -5 "$tmp/audit")"; fi
if "$BUYER" check "$port" $SHOP >"$tmp/check" 2>&1; then ok "the old store's books balance, nothing below 0"
else bad "the old store's books: $(cat "$tmp/check")"; fi
cat "$tmp/check"
sold=$(q "SELECT COALESCE(SUM(sold), 0) FROM legacy_sold WHERE shop_id = $SHOP")
[ "$sold" -gt 0 ] && ok "the old store's ledger took claims ($sold units)" || bad "no claim reached the old store's ledger"

# ---- the disagreements name exactly the planted drift ----
counts=$(q "SELECT class, n FROM rsv_migration_counts WHERE shop_id = $SHOP ORDER BY class")
echo "$counts" | sed 's/^/counts: /'
cnt() { q "SELECT COALESCE(SUM(n), 0) FROM rsv_migration_counts WHERE shop_id = $SHOP AND class = '$1'"; }
[ "$(cnt both_accepted)" -gt 0 ] && ok "shadowed calls compared" || bad "no call compared"
[ "$(cnt new_failed)" = 0 ] && ok "no call failed on libreserve's side" || bad "new_failed $(cnt new_failed)"
[ "$(cnt dropped)" = 0 ] && ok "nothing dropped" || bad "dropped $(cnt dropped)"
[ "$(cnt old_failed)" = 0 ] && ok "no call failed on the old store's side" || bad "old_failed $(cnt old_failed)"
[ "$(cnt offered)" = "$(cnt applied)" ] && ok "the queues' books balance (offered = applied)" || bad "offered $(cnt offered), applied $(cnt applied)"
over=$(q "SELECT COALESCE(GROUP_CONCAT(DISTINCT item_id ORDER BY item_id), '') FROM rsv_migration_mismatch WHERE shop_id = $SHOP AND class = 'old_refused_new_accepted' AND op = 1")
under=$(q "SELECT COALESCE(GROUP_CONCAT(DISTINCT item_id ORDER BY item_id), '') FROM rsv_migration_mismatch WHERE shop_id = $SHOP AND class = 'old_accepted_new_refused'")
[ "$over" = 8 ] && ok "would-oversell reserves sampled on item 8 only" || bad "would-oversell reserves on items '$over', want 8"
[ "$under" = 7 ] && ok "would-undersell sampled on item 7 only" || bad "would-undersell on items '$under', want 7"
[ "$(cnt old_refused_new_accepted)" -gt 0 ] && [ "$(cnt old_accepted_new_refused)" -gt 0 ] && ok "both planted drifts counted" || bad "the planted drift was not counted"
"$ADMIN" "${conn[@]}" migrate show $SHOP

finish
