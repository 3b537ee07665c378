#!/usr/bin/env bash
# tests/monitoring-test.sh - the alert rules and the Grafana dashboard in
# examples/monitoring/ against what really exists:
#   - promtool (Debian's prometheus package, installed here when missing
#     and run as root) checks the rules and runs their unit tests
#     (libreserve-alerts.test.yml);
#   - every metric the rules and the dashboard name is printed by the
#     library's rsv_stats_prometheus() or by rsv-admin (stats, stats
#     --by-shop, connections, sweep --metrics-file), run here against the
#     server in RSV_TEST_SOCKET on a database of their own with stock,
#     holds and claims in it; every label a selector names is on that
#     metric's samples (or added by Prometheus: job, instance), and every
#     result="..." value is the name of a library code;
#   - promtool check metrics finds nothing to say about those outputs.
# Run by `make check`, or: make lib build/rsv-admin && tools/mariadb.sh
# run tests/monitoring-test.sh
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

ADMIN=${RSV_ADMIN_BIN:-${RSV_BUILD:-build}/rsv-admin}
DIR=examples/monitoring
# shellcheck source=tests/testlib.sh
. tests/testlib.sh monitoring

if ! command -v promtool >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    tools/deps.sh packages prometheus >/dev/null 2>&1 || true
  fi
fi
if ! command -v promtool >/dev/null 2>&1; then
  echo "monitoring-test: SKIP: promtool is missing (Debian's prometheus package: run as root, or apt-get install prometheus)"
  finish; exit $?
fi

# End the server sessions running statements tagged $1 (a client killed
# mid-statement leaves its statement running on the server).
kill_tagged() {
  local id
  for id in $(sql -N -e "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE '%conn_tag:$1 %' AND ID <> CONNECTION_ID()" 2>/dev/null); do
    sql -e "KILL $id" >/dev/null 2>&1
  done
}
cleanup_extra() { kill_tagged monitoring.test; }

# ---- the rules ----
if promtool check rules "$DIR/libreserve-alerts.yml" >"$tmp/check.log" 2>&1; then
  ok "promtool check rules: $(grep -o '[0-9]* rules found' "$tmp/check.log")"
else
  cat "$tmp/check.log"; bad "promtool check rules"
fi
if (cd "$DIR" && promtool test rules libreserve-alerts.test.yml) >"$tmp/test.log" 2>&1; then
  ok "promtool test rules: every alert fires where it should, and only there"
else
  cat "$tmp/test.log"; bad "promtool test rules"
fi

# ---- what the library and rsv-admin print ----
sql -e "CREATE DATABASE \`$DB\`" && sql "$DB" <sql/schema.sql || { bad "create the database"; finish; exit $?; }
export RSV_ADMIN_PASSWORD=${RSV_TEST_PASSWORD:-}
conn=(--no-defaults --socket "$RSV_TEST_SOCKET" --user "${RSV_TEST_USER:-root}" --database "$DB")
"$ADMIN" "${conn[@]}" set-stock 1 1 1 50 >/dev/null
"$ADMIN" "${conn[@]}" set-stock 1 2 1 50 >/dev/null
# The library's own Prometheus text, after a reserve, a claim and a
# refused reserve (so that results other than ok appear).
DB=$DB python3 tests/rsvctl.py reserve 1 t1 1 1 3 0 -- claim 1 t1 -- \
  try-reserve 1 t2 1 1 1000 0 -- prometheus 'instance="a"' >"$tmp/library.prom" ||
  bad "the library's rsv_stats_prometheus"
"$ADMIN" "${conn[@]}" stats --all --prometheus >"$tmp/stats.prom" || bad "rsv-admin stats --all --prometheus"
"$ADMIN" "${conn[@]}" stats --all --by-shop --metrics-file "$tmp/by-shop.prom" || bad "rsv-admin stats --by-shop --metrics-file"
# A tagged session running a statement, so that connections has samples.
MYSQL_PWD=${RSV_TEST_PASSWORD:-} "$client" --no-defaults --comments --socket="$RSV_TEST_SOCKET" \
  -u"${RSV_TEST_USER:-root}" -e "/* conn_tag:monitoring.test */ SELECT SLEEP(60)" >/dev/null 2>&1 &
sleeper=$!
for _ in $(seq 1 100); do
  "$ADMIN" "${conn[@]}" connections --prometheus >"$tmp/connections.prom" || break
  grep -q 'tag="monitoring.test"' "$tmp/connections.prom" && break
  sleep 0.1
done
grep -q 'tag="monitoring.test",state="running"} 1' "$tmp/connections.prom" || bad "rsv-admin connections --prometheus names a running tagged session"
kill_tagged monitoring.test
wait "$sleeper" 2>/dev/null
"$ADMIN" "${conn[@]}" sweep --all --metrics-file "$tmp/sweep.prom" >/dev/null || bad "rsv-admin sweep --metrics-file"
# the names of the library's codes, as its result label writes them
codes=$(python3 - <<'PY'
import ctypes, os
r = ctypes.CDLL(os.path.abspath(os.path.join(os.environ.get("RSV_BUILD", "build"), "libreserve.so")))
r.rsv_code_name.restype = ctypes.c_char_p
print(" ".join(r.rsv_code_name(c).decode().lower().replace("rsv_", "", 1)
               for c in range(-64, 1) if r.rsv_code_name(c)))
PY
)

for f in library stats by-shop connections sweep; do
  if promtool check metrics <"$tmp/$f.prom" >"$tmp/lint.log" 2>&1; then
    ok "promtool check metrics: $f output"
  else
    sed 's/^/     /' "$tmp/lint.log"; bad "promtool check metrics: $f output"
  fi
done

# ---- every name the rules and the dashboard use exists ----
if python3 - "$DIR/libreserve-alerts.yml" "$DIR/libreserve-dashboard.json" "$codes" "$tmp"/*.prom <<'PY'; then
import json, re, sys
rules, dash, codes, outputs = sys.argv[1], sys.argv[2], set(sys.argv[3].split()), sys.argv[4:]
# families, their types, and the labels their samples carry
types, labels = {}, {}
for path in outputs:
    for line in open(path):
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m:
            types[m.group(1)] = m.group(2)
            labels.setdefault(m.group(1), set())
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s", line)
        if m and not line.startswith("#"):
            name = m.group(1)
            base = re.sub(r"_(bucket|sum|count)$", "", name) if name not in types else name
            labels.setdefault(base, set()).update(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)=\"", m.group(3) or ""))
exprs = [l.split("expr:", 1)[1].strip() for l in open(rules) if l.strip().startswith("expr:")]
d = json.load(open(dash))
def walk(o):
    if isinstance(o, dict):
        for k, v in o.items():
            if k in ("expr", "definition") and isinstance(v, str):
                exprs.append(v)
            else:
                walk(v)
    elif isinstance(o, list):
        for v in o:
            walk(v)
walk(d["panels"]); walk(d["templating"])
problems, used = [], set()
for e in exprs:
    for m in re.finditer(r"\b(libreserve_[a-zA-Z0-9_]+)(\{([^}]*)\})?", e):
        name, sel = m.group(1), m.group(3) or ""
        fam = name
        if fam not in types:
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            if types.get(base) == "histogram":
                fam = base
            else:
                problems.append("%s (in %s) is printed by neither the library nor rsv-admin" % (name, e)); continue
        used.add(fam)
        for lname, op, val in re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!=|=)\s*\"([^\"]*)\"", sel):
            if lname not in labels[fam] | {"job", "instance"}:
                problems.append("%s has no label %s (in %s)" % (fam, lname, e))
            if lname == "result" and fam == "libreserve_calls_total" and op == "=" and val not in codes:
                problems.append("result=\"%s\" is no library code (in %s)" % (val, e))
    # label_values(metric, label) of the dashboard's variables
    for m in re.finditer(r"label_values\((libreserve_\w+),\s*(\w+)\)", e):
        if m.group(2) not in labels.get(m.group(1), set()) | {"job", "instance"}:
            problems.append("%s has no label %s (in %s)" % (m.group(1), m.group(2), e))
for p in problems:
    print("  " + p)
print("  %d expressions, %d metric families used, all printed" % (len(exprs), len(used)) if not problems else "")
sys.exit(1 if problems else 0)
PY
  ok "every metric and label the rules and the dashboard use is printed"
else
  bad "metrics the rules or the dashboard use that nothing prints"
fi

# every alert of the rules file has a test
alerts=$(grep -o 'alert: [A-Za-z]*' "$DIR/libreserve-alerts.yml" | cut -d' ' -f2 | sort -u)
tested=$(grep -o 'alertname: [A-Za-z]*' "$DIR/libreserve-alerts.test.yml" | cut -d' ' -f2 | sort -u)
if [ "$alerts" = "$tested" ]; then ok "every alert has a unit test ($(echo "$alerts" | wc -l))"; else bad "alerts without a unit test: $(comm -23 <(echo "$alerts") <(echo "$tested") | tr '\n' ' ')"; fi

echo
finish
