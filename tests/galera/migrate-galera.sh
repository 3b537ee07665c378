#!/usr/bin/env bash
# tests/galera/migrate-galera.sh - rsv-admin migrate on the Galera cluster
# of DIR (started by tests/galera/run-galera.sh with cluster.sh): stages
# set and percentages changed on one node are read on another; a refusal
# on a third node sees the stages the others wrote; and two percent
# commands started at once on two nodes, several rounds, both succeed (the
# later one loses certification on the row of rsv_migration_change and is
# run again), do the work once, and give every changed row a version of
# its own.  Owns its database (rsvgalera_migrate), dropped when it passes.
#
# Usage: tests/galera/migrate-galera.sh DIR [BUILD]  (BUILD: the build
# directory with rsv-admin, build by default).  The last line is
# "migrate-galera: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
dir=${1:?usage: $0 DIR [BUILD]}
build=${2:-build}
admin=$build/rsv-admin
[ -x "$admin" ] || { echo "migrate-galera: $admin is not built (make $admin)" >&2; exit 2; }
client=$(command -v mariadb || command -v mysql)
db=rsvgalera_migrate
tmp=$(mktemp -d "${TMPDIR:-/tmp}/migrate-galera.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
check() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1: got '$2', want '$3'"; fi; }

sqln() {
  local n=$1
  shift
  "$client" --defaults-file="$dir/n$n/my.cnf" -N -B "$@"
}
# A read on node N that first waits for every write the cluster committed.
read_on() { sqln "$1" "$db" -e "SET SESSION wsrep_sync_wait = 15; $2"; }
# rsv-admin against node N: its output in $tmp/out.N, its exit status
adm() {
  local n=$1
  shift
  "$admin" --no-defaults --socket "$(tests/galera/cluster.sh socket "$dir" "$n")" \
    --user root --database "$db" "$@" >"$tmp/out.$n" 2>&1
}
json() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print('"$2"')' "$tmp/out.$1"; }

sqln 1 -e "DROP DATABASE IF EXISTS $db; CREATE DATABASE $db"
sqln 1 "$db" <sql/schema.sql
sqln 1 "$db" -e "INSERT INTO rsv_ledger (shop_id, item_id, location_id, on_hand) SELECT seq, 1, 1, 5 FROM seq_1_to_300"
certs0=0
for n in 1 2 3; do
  certs0=$((certs0 + $(sqln "$n" -e "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_LOCAL_CERT_FAILURES'")))
done

adm 1 migrate set shadow 1,2,3 --reason "first three"
check "set shadow on node 1" "$?" 0
check "read on node 3: shops 1-3 at shadow" "$(read_on 3 "SELECT GROUP_CONCAT(stage ORDER BY shop_id) FROM rsv_migration_stage WHERE shop_id IN (1, 2, 3)")" "1,1,1"
adm 2 migrate percent 10 --json
check "percent 10 on node 2" "$?" 0
check "read on node 1: 30 of 300 shops at shadow" "$(read_on 1 "SELECT COUNT(*) FROM rsv_migration_stage WHERE stage > 0")" 30
adm 3 migrate set complete 2
check "node 3 refuses shadow -> complete (it sees shop 2 at shadow)" "$?" 4
sleep 2.2
adm 3 migrate set primary 1 --max-ttl 1
check "set primary on node 3 once shadow outlasted the TTL" "$?" 0
check "read on node 2: shop 1 at primary" "$(read_on 2 "SELECT stage FROM rsv_migration_stage WHERE shop_id = 1")" 2
adm 2 migrate show 1 --json
check "migrate show on node 2: shop 1 primary" "$(json 2 'd["shops"][0]["stage"]')" primary

# Two nodes at once: without a lock that holds across the cluster both
# would take the same shops and the same versions.
race() {
  local a=$1 b=$2 p=$3 in0 v0 v1 n_in sum
  in0=$(read_on "$a" "SELECT COUNT(*) FROM rsv_migration_stage WHERE stage > 0")
  v0=$(read_on "$a" "SELECT MAX(version) FROM rsv_migration_stage")
  adm "$a" migrate percent "$p" --json & local pa=$!
  adm "$b" migrate percent "$p" --json & local pb=$!
  wait "$pa"; local ra=$?
  wait "$pb"; local rb=$?
  n_in=$(read_on 3 "SELECT COUNT(*) FROM rsv_migration_stage WHERE stage > 0")
  v1=$(read_on 3 "SELECT MAX(version) FROM rsv_migration_stage")
  sum=$(( $(json "$a" 'd.get("changed", -1000)') + $(json "$b" 'd.get("changed", -1000)') ))
  local want=$(( (p * 300 + 99) / 100 )) moved
  moved=$(( want > in0 ? want - in0 : in0 - want ))
  if [ "$ra $rb $n_in $sum $((v1 - v0))" = "0 0 $want $moved $moved" ]; then
    return 0
  fi
  echo "     nodes $a and $b, percent $p: exits $ra $rb, in $n_in, changed $sum, versions +$((v1 - v0)) (want 0 0 $want $moved $moved)"
  echo "     node $a: $(cat "$tmp/out.$a")"
  echo "     node $b: $(cat "$tmp/out.$b")"
  return 1
}
raced=1
for round in 1 2 3; do
  race 1 2 50 || { raced=0; break; }
  race 2 3 10 || { raced=0; break; }
done
if [ "$raced" = 1 ]; then ok "two nodes' percent commands at once, 3 rounds: the work done once, one version per changed row"; else bad "two nodes' percent commands at once (round $round)"; fi
check "every row's version distinct (read on node 2)" "$(read_on 2 "SELECT COUNT(DISTINCT version) = COUNT(*) FROM rsv_migration_stage")" 1
check "the shops set by list kept their stages (read on node 1)" "$(read_on 1 "SELECT GROUP_CONCAT(stage ORDER BY shop_id) FROM rsv_migration_stage WHERE shop_id IN (1, 2, 3)")" "2,1,1"
certs1=0
for n in 1 2 3; do
  certs1=$((certs1 + $(sqln "$n" -e "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_LOCAL_CERT_FAILURES'")))
done
echo "# certification failures during the races (each one a change run again): $((certs1 - certs0))"

[ "$failed" = 0 ] && sqln 1 -e "DROP DATABASE $db"
echo "migrate-galera: $passed passed, $failed failed"
[ "$failed" = 0 ]
