#!/usr/bin/env bash
# The layer rule of lib/ (the table at the top of lib/internal.h), checked
# on the built objects: for every object, the hidden symbols it takes from
# the library's other objects name the files it calls.  Fails when a file
# calls a file of a higher layer, when files call each other round a
# circle, or when a file of lib/ is missing from the table (or the table
# names a file that does not exist).
#
# Usage: tests/layers.sh [BUILD_DIR...]   (default: build, and build/fault
# if it was built; make check and make lint run it).  The fault-injection
# build (mk/faults.mk, BUILD_DIR/fault) is checked like the normal one: it
# is the only build where lib/fault.c has code.
# After the checks it runs itself once more as a self-test (--selftest):
# one base file (guard) moved to the top layer of a copy of the table, as
# if its functions were back in a surface file; that run must fail on the
# calls from below, or the check could not fail at all.
set -euo pipefail
cd "$(dirname "$0")/.."
selftest=0
if [ "${1:-}" = --selftest ]; then selftest=1; shift; fi
if [ $selftest = 0 ] && [ $# -eq 0 ]; then
  set -- build
  [ -d build/fault/lib ] && set -- build build/fault
fi
if [ $selftest = 0 ] && [ $# -gt 1 ]; then
  status=0
  for b in "$@"; do "$0" "$b" || status=1; done
  exit $status
fi
build=${1:-build}

table=$(awk '/^ \* LAYERS\./ {on = 1} on && /^ \*   [0-9] [a-z]+ / {p = 1}
             on && p && /^ \*$/ {exit}
             on && p {sub(/^ \* +/, ""); print}' lib/internal.h |
        awk '/^[0-9] / {layer = $1; $1 = ""; $2 = ""} {for (i = 1; i <= NF; i++) if ($i != "") print $i, layer}')
[ -n "$table" ] || { echo "layers: no LAYERS table found in lib/internal.h"; exit 2; }
if [ $selftest = 1 ]; then
  table=$(echo "$table" | awk '$1 == "guard" {$2 = 7} {print}')
fi

status=0
declare -A layer
while read -r f l; do layer[$f]=$l; done <<<"$table"
for c in lib/*.c; do
  f=$(basename "$c" .c)
  [ -n "${layer[$f]:-}" ] || { echo "layers: lib/$f.c is in no layer of lib/internal.h"; status=1; }
done
for f in "${!layer[@]}"; do
  [ -f "lib/$f.c" ] || { echo "layers: lib/internal.h lists $f, but lib/$f.c does not exist"; status=1; }
done

# Which object defines each global symbol, and which objects use it.
# fault.c is compiled only in the fault-injection build (an empty object
# here), so it takes part only when it defines something.
defs=$(for c in lib/*.c; do f=$(basename "$c" .c); o=$build/lib/$f.o
         [ -f "$o" ] || { echo "layers: $o not built (make lib)" >&2; exit 2; }
         nm --defined-only -g "$o" | awk -v f="$f" 'NF == 3 {print $3, f}'; done | sort)
uses=$(for c in lib/*.c; do f=$(basename "$c" .c)
         nm -u "$build/lib/$f.o" | awk -v f="$f" '{print $2, f}'; done | sort)
edges=$(join <(echo "$uses") <(echo "$defs") | awk '$2 != $3 {print $2, $3, $1}' | sort -u)

while read -r from to sym; do
  [ -n "$from" ] || continue
  if [ "${layer[$from]:-0}" -lt "${layer[$to]:-0}" ]; then
    echo "layers: lib/$from.c (layer ${layer[$from]}) calls $sym of lib/$to.c (layer ${layer[$to]})"
    status=1
  fi
done <<<"$edges"

# Circles: tsort reports a loop for any cycle among the files.
loops=$(echo "$edges" | awk 'NF {print $2, $1}' | sort -u | tsort 2>&1 >/dev/null | sed -n 's/^tsort: -: input contains a loop:$/loop/p; s/^tsort: \(.*\)$/  \1/p' || true)
if [ -n "$loops" ]; then
  echo "layers: files that call each other round a circle:"
  echo "$loops" | grep -v '^loop$' | sed 's/^ */    /' | sort -u
  status=1
fi

nfiles=$(ls lib/*.c | wc -l)
nedges=$(echo "$edges" | awk 'NF {print $1, $2}' | sort -u | wc -l)
if [ $selftest = 1 ]; then
  if [ $status = 0 ]; then
    echo "layers self-test: FAILED: the check passed with guard moved to the top layer"
    exit 1
  fi
  echo "layers self-test: the check fails when guard sits above its callers, as it must"
  exit 0
fi
[ $status = 0 ] || exit 1
echo "layers ($build): $nfiles files, $nedges calls between them, none upward, no circle"
"$0" --selftest "$build"
