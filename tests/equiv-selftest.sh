#!/usr/bin/env bash
# The equivalence suite (tests/check_equiv.c) made to fail: each case
# loads, for the procedures' side only, a copy of sql/schema.sql with one
# procedure changed by sed, runs the suite's random sequences with a fixed
# seed, and expects it to report a difference naming the step.  A change
# that no longer applies (the procedure was rewritten) fails here too:
# write a new one for the new text.  Runs against the server in
# RSV_TEST_SOCKET; RSV_BUILD names the build directory (default build).
set -u
cd "$(dirname "$0")/.."
. tests/testlib.sh equiv-selftest
bin=${RSV_BUILD:-build}/tests/check_equiv
[ -x "$bin" ] || { echo "equiv-selftest: $bin is not built (make $bin)" >&2; exit 1; }

# name | sed expression (applied to sql/schema.sql)
cases=(
  "the cart procedure counts one hold more than it writes|s/VALUES (p_shop, p_token, 1, 1, p_nkeys,/VALUES (p_shop, p_token, 1, 1, p_nkeys + 1,/"
  "a ledger take does not count its units as issued|s/SET issued = issued + p_want + o_mint,/SET issued = issued + o_mint,/;s/SET issued = issued + p_want, updated_at/SET issued = issued, updated_at/"
  "a pool take of several units deletes only one of them|s/ORDER BY id LIMIT p_want;/ORDER BY id LIMIT 1;/"
  "a claim or release journals the wrong generation|s/v_gen, v_kind, quantity, NOW(6)/v_gen + 1, v_kind, quantity, NOW(6)/"
)

n=0
for c in "${cases[@]}"; do
  n=$((n + 1))
  name=${c%%|*} expr=${c#*|}
  schema=$tmp/schema-$n.sql
  sed -e "$expr" sql/schema.sql >"$schema"
  if cmp -s sql/schema.sql "$schema"; then
    bad "$name: the change no longer applies to sql/schema.sql ($expr)"
    continue
  fi
  # Sequences stop at their first difference; the concurrent phase checks
  # invariants only, so it is left out.
  out=$(RSV_EQUIV_SCHEMA=$schema RSV_EQUIV_SEED=1 RSV_EQUIV_SEQUENCES=1 \
        RSV_EQUIV_STEPS=150 CK_RUN_CASE=sequences "$bin" 2>&1)
  rc=$?
  found=$(printf '%s\n' "$out" | grep -m1 'DIFFERENCE at step [0-9]* of seed')
  if [ $rc -ne 0 ] && [ -n "$found" ]; then
    ok "$name: ${found#equiv: }"
  else
    bad "$name: no difference reported (exit $rc)"
    printf '%s\n' "$out" | tail -n 20
  fi
done
# The concurrent phase checks what holds whatever the scheduling: with the
# ledger take above, buyers are sold more units than there are.
sed -e "s/SET issued = issued + p_want + o_mint,/SET issued = issued + o_mint,/" \
    -e "s/SET issued = issued + p_want, updated_at/SET issued = issued, updated_at/" \
    sql/schema.sql >"$tmp/oversell.sql"
out=$(RSV_EQUIV_SCHEMA=$tmp/oversell.sql RSV_EQUIV_SEED=1 \
      CK_RUN_CASE=concurrency "$bin" 2>&1)
rc=$?
found=$(printf '%s\n' "$out" | grep -m1 'oversold')
if [ $rc -ne 0 ] && [ -n "$found" ]; then
  ok "the concurrent phase finds the oversell: ${found##*:F:}"
else
  bad "the concurrent phase did not report the oversell (exit $rc)"
  printf '%s\n' "$out" | tail -n 20
fi
finish
