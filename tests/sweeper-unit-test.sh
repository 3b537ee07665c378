#!/usr/bin/env bash
# tests/sweeper-unit-test.sh - the sweeper service the rsv-admin package
# ships (debian/rsv-admin.rsv-admin-sweep@.service and its .timer) does
# what it says.  systemd need not run: the unit's ExecStart= lines are
# read from the file and run as systemd would run them for an instance
# (in order; one prefixed "-" may fail; %i is the instance), against a
# database on the server in RSV_TEST_SOCKET that has expired holds and
# journalled claims.  Then: every run line exited 0, the log names what
# the sweep did, the holds came back and the journal is empty, the
# metrics files are where the unit says and say so (a second run carries
# the counters over), the condition on the option file holds, and the
# timer runs the service every 30 s.
#
# Built tree (make check): /usr/bin/rsv-admin is build/rsv-admin, and
# /etc/rsv-admin/ and /var/lib/rsv-admin/ are directories of a temp dir;
# nothing else of the command lines changes.  With RSV_UNIT_INSTALLED=1
# (tests/deb-test.sh, the package installed) the lines run exactly as
# written: the test writes /etc/rsv-admin/<instance>.cnf and creates
# /var/lib/rsv-admin as systemd's StateDirectory= would, and removes what
# it made.  Unsupported syntax in an ExecStart= line fails the test rather
# than being guessed at.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

UNIT=debian/rsv-admin.rsv-admin-sweep@.service
TIMER=debian/rsv-admin.rsv-admin-sweep@.timer
ADMIN=$(realpath "${RSV_ADMIN_BIN:-${RSV_BUILD:-build}/rsv-admin}")
installed=${RSV_UNIT_INSTALLED:-0}
INSTANCE=rsvtest$$
# shellcheck source=tests/testlib.sh
. tests/testlib.sh sweeper-unit
export DB
stop() { echo; finish; exit $?; }
if [ "$installed" = 1 ]; then
  etc=/etc/rsv-admin state=/var/lib/rsv-admin
  made_state=0; [ -d "$state" ] || made_state=1
else
  etc=$tmp/etc state=$tmp/state
fi
cleanup_extra() {
  if [ "$installed" = 1 ]; then
    rm -f "$etc/$INSTANCE.cnf" "$state/$INSTANCE"-*.prom
    [ "$made_state" = 1 ] && rmdir "$state" 2>/dev/null
  fi
}

# ---- the unit, as systemd reads it ----
# value KEY FILE: the values of KEY= in FILE, one a line, in order
value() { sed -n "s/^$1=//p" "$2"; }
# expand LINE: %i and %% as systemd expands them; any other specifier is
# refused
expand() {
  local s=$1 out=
  while [ -n "$s" ]; do
    case $s in
      %i*) out+=$INSTANCE; s=${s:2} ;;
      %%*) out+=%; s=${s:2} ;;
      %*) echo "unsupported specifier ${s:0:2}" >&2; return 1 ;;
      *) out+=${s:0:1}; s=${s:1} ;;
    esac
  done
  printf '%s' "$out"
}
mapfile -t lines < <(value ExecStart "$UNIT")
if [ ${#lines[@]} -ge 1 ]; then ok "$UNIT: ${#lines[@]} ExecStart= line(s)"; else bad "$UNIT: no ExecStart="; stop; fi
check_type=$(value Type "$UNIT")
if [ "$check_type" = oneshot ]; then ok "Type=oneshot"; else bad "Type=$check_type, want oneshot"; fi
state_dir=$(value StateDirectory "$UNIT")
if [ "$state_dir" = rsv-admin ]; then ok "StateDirectory=rsv-admin (/var/lib/rsv-admin)"; else bad "StateDirectory=$state_dir"; fi
cond=$(expand "$(value ConditionPathExists "$UNIT")") || bad "ConditionPathExists"
if [ "$cond" = "/etc/rsv-admin/$INSTANCE.cnf" ]; then ok "ConditionPathExists= the instance's option file"; else bad "ConditionPathExists=$cond"; fi
if [ "$(value OnUnitActiveSec "$TIMER")" = 30s ] && [ -n "$(value OnActiveSec "$TIMER")" ] &&
   [ "$(value WantedBy "$TIMER")" = timers.target ]; then
  ok "$TIMER: every 30 s once started, wanted by timers.target"
else
  bad "$TIMER: OnUnitActiveSec=$(value OnUnitActiveSec "$TIMER") OnActiveSec=$(value OnActiveSec "$TIMER") WantedBy=$(value WantedBy "$TIMER")"
fi
if command -v systemd-analyze >/dev/null 2>&1 && [ "$installed" = 1 ]; then
  if systemd-analyze verify "/lib/systemd/system/rsv-admin-sweep@.service" "/lib/systemd/system/rsv-admin-sweep@.timer" >"$tmp/verify.log" 2>&1; then
    ok "systemd-analyze verify: the installed units"
  else
    sed 's/^/     /' "$tmp/verify.log"; bad "systemd-analyze verify"
  fi
fi

# ---- a database with work for the sweeper ----
sql -e "CREATE DATABASE \`$DB\`" && sql "$DB" <sql/schema.sql || { bad "create the database"; stop; }
conn=(--no-defaults --socket "$RSV_TEST_SOCKET" --user "${RSV_TEST_USER:-root}" --database "$DB")
RSV_ADMIN_PASSWORD=${RSV_TEST_PASSWORD:-} "$ADMIN" "${conn[@]}" set-stock 1 1 1 20 >/dev/null &&
RSV_ADMIN_PASSWORD=${RSV_TEST_PASSWORD:-} "$ADMIN" "${conn[@]}" set-stock 2 1 1 20 >/dev/null ||
  { bad "set-stock"; stop; }
# three claims (journalled), then holds of 2 + 3 units that expire at once
python3 tests/rsvctl.py reserve 1 paid-1 1 1 1 0 -- reserve 1 paid-2 1 1 1 0 -- \
  reserve 2 paid-3 1 1 1 0 -- reserve 1 gone-1 1 1 2 1 -- reserve 2 gone-2 1 1 3 1 -- \
  claim 1 paid-1 -- claim 1 paid-2 -- claim 2 paid-3 || { bad "holds and claims"; stop; }
until [ "$(sql -N "$DB" -e "SELECT COUNT(*) FROM rsv_holds WHERE expires_at > NOW(6) AND checkout_token LIKE 'gone%'")" = 0 ]; do
  sleep 0.05
done
journal=$(sql -N "$DB" -e "SELECT COUNT(*) FROM rsv_journal")
if [ "$journal" = 3 ]; then ok "3 journal rows and 2 expired holds to sweep"; else bad "journal rows: $journal"; fi

# The option file, as an operator writes it from /etc/rsv-admin/default.cnf.
mkdir -p "$etc"
{
  echo "[rsv-admin]"
  echo "socket = $RSV_TEST_SOCKET"
  echo "user = ${RSV_TEST_USER:-root}"
  [ -n "${RSV_TEST_PASSWORD:-}" ] && echo "password = $RSV_TEST_PASSWORD"
  echo "database = $DB"
} >"$etc/$INSTANCE.cnf"
chmod 600 "$etc/$INSTANCE.cnf"
mkdir -p "$state"
if [ -e "$(if [ "$installed" = 1 ]; then echo "$cond"; else echo "$etc/$INSTANCE.cnf"; fi)" ]; then
  ok "the condition holds: the option file is there"
else
  bad "the option file is missing"
fi

# run_unit N: every ExecStart= line in order, as systemd runs them; the
# log (stdout and stderr of all) into $tmp/log.N.  0 when the unit
# succeeds.
run_unit() {
  local n=$1 line cmd ignore argv st=0
  : >"$tmp/log.$n"
  for line in "${lines[@]}"; do
    ignore=0
    case $line in
      -*) ignore=1; line=${line#-} ;;
      [@:+!]*) echo "unsupported ExecStart prefix: $line" >>"$tmp/log.$n"; return 1 ;;
    esac
    case $line in *\"*|*\'*|*\\*|*\$*) echo "quoting or variables in: $line" >>"$tmp/log.$n"; return 1 ;; esac
    cmd=$(expand "$line") || return 1
    read -r -a argv <<<"$cmd"
    if [ "$installed" != 1 ]; then
      [ "${argv[0]}" = /usr/bin/rsv-admin ] || { echo "not /usr/bin/rsv-admin: ${argv[0]}" >>"$tmp/log.$n"; return 1; }
      argv[0]=$ADMIN
      argv=("${argv[@]//\/etc\/rsv-admin\//$etc/}")
      argv=("${argv[@]//\/var\/lib\/rsv-admin\//$state/}")
    fi
    echo "+ ${argv[*]}" >>"$tmp/log.$n"
    (cd / && env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "${argv[@]}") >>"$tmp/log.$n" 2>&1
    local rc=$?
    if [ $rc != 0 ] && [ $ignore = 0 ]; then st=$rc; break; fi
    [ $rc != 0 ] && echo "(exit $rc, ignored)" >>"$tmp/log.$n"
  done
  return $st
}

# The unit's command lines run from / with an empty environment, as
# systemd starts them (the tree's rsv-admin finds its library through its
# rpath, the installed one through the loader).
if run_unit 1; then ok "first run: every ExecStart= line succeeded"; else sed 's/^/     /' "$tmp/log.1"; bad "first run failed"; fi
sed 's/^/     /' "$tmp/log.1"
if grep -Eq '^every shop: gave back 2 expired hold\(s\) \(5 units\), folded 3 journal row\(s\), drained 0 pool row\(s\), purged 0 checkout\(s\) in 2 shop\(s\), [0-9]+ ms$' "$tmp/log.1"; then
  ok "the log says what the sweep did"
else
  bad "the log does not say what the sweep did"
fi
if grep -Eq '^(\(exit|.*ignored)' "$tmp/log.1"; then bad "a line prefixed - failed"; else ok "no line failed, not even those allowed to"; fi
left=$(sql -N "$DB" -e "SELECT (SELECT COUNT(*) FROM rsv_holds) + (SELECT COUNT(*) FROM rsv_journal)")
if [ "$left" = 0 ]; then ok "a sweep happened: no hold and no journal row left"; else bad "$left holds and journal rows left"; fi
audit=$(RSV_ADMIN_PASSWORD=${RSV_TEST_PASSWORD:-} "$ADMIN" "${conn[@]}" audit --all 2>&1)
if [ $? = 0 ]; then ok "audit clean"; else bad "audit: $audit"; fi

# The metrics files the unit names.
prom() { sed -n "s/^$1{database=\"$DB\"$2} //p" "$state/$INSTANCE-sweep.prom"; }
now=$(date +%s)
last=$(prom libreserve_sweep_last_success_timestamp_seconds "")
if [ -n "$last" ] && python3 -c "import sys; sys.exit(0 if abs(float('$last') - $now) < 600 else 1)"; then
  ok "$INSTANCE-sweep.prom: the last full sweep is this one"
else
  bad "$INSTANCE-sweep.prom: last success '$last', now $now"
fi
if [ "$(prom libreserve_sweep_holds_released_total "")" = 2 ] && [ "$(prom libreserve_sweep_journal_folded_total "")" = 3 ] &&
   [ "$(prom libreserve_sweep_runs_total ',result="ok"')" = 1 ]; then
  ok "$INSTANCE-sweep.prom: counters of the work"
else
  bad "$INSTANCE-sweep.prom: $(grep -v '^#' "$state/$INSTANCE-sweep.prom" | tr '\n' ' ')"
fi
# The figures are read before the sweep: the backlog it then folded.
if grep -q "^libreserve_shop_journal_rows{shop_id=\"1\"} 2$" "$state/$INSTANCE-stats.prom" &&
   grep -q "^libreserve_shop_expired_holds{shop_id=\"2\"} 1$" "$state/$INSTANCE-stats.prom"; then
  ok "$INSTANCE-stats.prom: the backlog before the sweep"
else
  bad "$INSTANCE-stats.prom: $(grep -v '^#' "$state/$INSTANCE-stats.prom" 2>&1 | tr '\n' ' ')"
fi
if grep -q '^libreserve_connections_statement_history [01]$' "$state/$INSTANCE-connections.prom"; then
  ok "$INSTANCE-connections.prom written"
else
  bad "$INSTANCE-connections.prom: $(head -c 300 "$state/$INSTANCE-connections.prom" 2>&1)"
fi
if ls "$state" | grep -q '\.tmp$'; then bad "temporary files left in $state"; else ok "no temporary file left in $state"; fi

# A second run: nothing to do, the counters carried over.
python3 tests/rsvctl.py reserve 1 gone-3 1 1 4 1 >/dev/null || bad "a hold for the second run"
until [ "$(sql -N "$DB" -e "SELECT COUNT(*) FROM rsv_holds WHERE expires_at > NOW(6)")" = 0 ]; do sleep 0.05; done
if run_unit 2; then ok "second run succeeded"; else sed 's/^/     /' "$tmp/log.2"; bad "second run failed"; fi
if grep -Eq '^shop 1: gave back 1 expired hold\(s\) \(4 units\)' "$tmp/log.2" && ! grep -q '^shop 2:' "$tmp/log.2"; then
  ok "second run: the log names the shop that had work, and only it"
else
  sed 's/^/     /' "$tmp/log.2"; bad "second run: the log"
fi
if [ "$(prom libreserve_sweep_holds_released_total "")" = 3 ] && [ "$(prom libreserve_sweep_units_released_total "")" = 9 ] &&
   [ "$(prom libreserve_sweep_runs_total ',result="ok"')" = 2 ]; then
  ok "second run: counters carried over"
else
  bad "second run: $(grep -v '^#' "$state/$INSTANCE-sweep.prom" | tr '\n' ' ')"
fi

# A run that cannot connect fails the unit and is counted, and the time of
# the last full sweep stays.
last2=$(prom libreserve_sweep_last_success_timestamp_seconds "")
sed -i "s|^socket = .*|socket = $tmp/no-such.sock|" "$etc/$INSTANCE.cnf"
if run_unit 3; then bad "a run without a server succeeded"; else ok "a run without a server fails the unit"; fi
if [ "$(prom libreserve_sweep_runs_total ',result="failed"')" = 1 ] &&
   [ "$(prom libreserve_sweep_last_success_timestamp_seconds "")" = "$last2" ] &&
   [ "$(prom libreserve_sweep_runs_total ',result="ok"')" = 2 ]; then
  ok "the failed run is counted; the last full sweep is still the one before"
else
  bad "after a failed run: $(grep -v '^#' "$state/$INSTANCE-sweep.prom" | tr '\n' ' ')"
fi
stop
