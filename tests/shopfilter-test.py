#!/usr/bin/env python3
"""Every statement libreserve sends for one shop filters on that shop.

Backs the single-shard claim (docs/scaling.md): a deployment may shard by
shop_id only if no statement of the library reads or writes another shop's
rows.  The test turns on the server's general log (to a table), runs every
public operation for one shop through the Python binding, and checks each
statement the library's connection sent:

  - every statement carries the library's conn_tag comment;
  - INSERT INTO a library table lists shop_id and inserts this shop's id
    (VALUES) or this shop's id / a shop-filtered table's shop_id (SELECT);
  - every other reference to a library table (FROM / JOIN / UPDATE /
    DELETE) is constrained in its own query block by shop_id = <this
    shop>, or by shop_id = <alias>.shop_id of a reference that is itself
    constrained (joins and correlated subqueries).

Prepared statements appear in the log as "Execute" rows with their
parameters substituted, so "shop_id = ?" is checked against the real id.
The exceptions are listed in EXEMPT below, each with its reason.

Run under a server: tools/mariadb.sh run tests/shopfilter-test.py (make
check does).  Needs the in-tree test build, build/test/libreserve.so, and root-like
privileges (SET GLOBAL general_log).  Exits non-zero on any violation, and
also when nothing was captured.
"""

import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
# A test-only option flag (lib/test_flags.h, not in the public API).
TEST_OPT_STATEMENTS_ONLY = 0x8
os.environ.setdefault("LIBRESERVE_PATH", os.path.join(REPO, "build", "test",
                                                      "libreserve.so"))
sys.path.insert(0, os.path.join(REPO, "bindings", "python"))
sys.dont_write_bytecode = True
import libreserve as rsv  # noqa: E402

TABLES = ("rsv_ledger", "rsv_pool", "rsv_checkouts",
          "rsv_holds", "rsv_journal")

ALL_SHOPS_PREFIX = "allshops:"

# (what, why): statements that need not filter on shop_id.
EXEMPT = [
    (re.compile(r"^(set transaction isolation level \w+( \w+)?|"
                r"start transaction( with consistent snapshot,?)?"
                r"( read (only|write))?|"
                r"(commit|rollback)( and no chain no release)?)$"),
     "transaction control: touches no table"),
    (re.compile(r"^/\* conn_tag:open \*/"),
     "rsv_open's server and schema checks: read server variables and "
     "information_schema only"),
    (re.compile(r"^/\* " + re.escape(ALL_SHOPS_PREFIX) + r"audit \*/"),
     "rsv_audit with all_shops: checks every shop by design"),
]

KEYWORDS = {"where", "on", "set", "left", "right", "inner", "join", "cross",
            "values", "order", "limit", "for", "group", "union", "using",
            "straight_join", "natural", "having", "select", "lock"}


def strip_literals(sql):
    """Replace string literals (tokens) by '?' so their bytes cannot look
    like SQL."""
    out, i, n = [], 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"":
            j = i + 1
            while j < n:
                if sql[j] == "\\":
                    j += 2
                    continue
                if sql[j] == ch:
                    if j + 1 < n and sql[j + 1] == ch:
                        j += 2
                        continue
                    break
                j += 1
            out.append("'?'")
            i = j + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def paren_groups(sql):
    """(start, end) of every parenthesised group, end exclusive."""
    stack, groups = [], []
    for i, ch in enumerate(sql):
        if ch == "(":
            stack.append(i)
        elif ch == ")" and stack:
            groups.append((stack.pop(), i + 1))
    return groups


class Scope:
    def __init__(self, start, end, parent):
        self.start, self.end, self.parent = start, end, parent
        self.children = []
        self.refs = []

    def text(self, sql):
        """The scope's own text: nested query blocks blanked out."""
        t = list(sql[self.start:self.end])
        for c in self.children:
            for k in range(c.start - self.start, c.end - self.start):
                t[k] = " "
        return "".join(t)


def scopes_of(sql):
    root = Scope(0, len(sql), None)
    blocks = sorted((g for g in paren_groups(sql)
                     if re.match(r"\(\s*select\b", sql[g[0]:g[1]])),
                    key=lambda g: (g[0], -g[1]))
    allscopes = [root]
    for s, e in blocks:
        parent = root
        while True:
            inner = [c for c in parent.children if c.start <= s and e <= c.end]
            if not inner:
                break
            parent = inner[0]
        sc = Scope(s, e, parent)
        parent.children.append(sc)
        allscopes.append(sc)
    return root, allscopes


def innermost(root, pos):
    sc = root
    while True:
        inner = [c for c in sc.children if c.start <= pos < c.end]
        if not inner:
            return sc
        sc = inner[0]


def split_top(text, sep=","):
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur).strip())
    return parts


def check_statement(sql, shop):
    """Problems found in one statement (lower-cased, literals stripped)."""
    problems = []
    body = re.sub(r"^/\*.*?\*/\s*", "", sql)
    body = re.sub(r"^set statement .*? for\s+", "", body)
    s = str(shop)
    root, allscopes = scopes_of(body)
    tbl = "|".join(TABLES)
    refs = []  # (scope, alias, table, kind)
    for m in re.finditer(r"\b(from|join|update|into)\s+(" + tbl + r")\b"
                         r"(?:\s+(?:as\s+)?([a-z_][a-z0-9_]*))?", body):
        kind, table, alias = m.group(1), m.group(2), m.group(3)
        if alias in KEYWORDS:
            alias = None
        sc = innermost(root, m.start())
        ref = (sc, alias or table, table, kind)
        refs.append(ref)
        if kind != "into":
            sc.refs.append(ref)

    def resolve(scope, alias):
        while scope is not None:
            for r in scope.refs:
                if r[1] == alias:
                    return r
            scope = scope.parent
        return None

    ok = set()
    changed = True
    while changed:
        changed = False
        for r in refs:
            sc, alias, table, kind = r
            if kind == "into" or r in ok:
                continue
            t = sc.text(body)
            a = re.escape(alias)
            direct = (re.search(r"\b%s\.shop_id\s*=\s*%s\b" % (a, s), t) or
                      re.search(r"\b%s\s*=\s*%s\.shop_id\b" % (s, a), t))
            if not direct and len(sc.refs) == 1:
                direct = re.search(r"(?<![.\w])shop_id\s*=\s*%s\b" % s, t)
            if direct:
                ok.add(r)
                changed = True
                continue
            for m in re.finditer(r"\b([a-z_][a-z0-9_]*)\.shop_id\s*=\s*"
                                 r"([a-z_][a-z0-9_]*)\.shop_id\b", t):
                x, y = m.group(1), m.group(2)
                other = y if x == alias else x if y == alias else None
                if other is None or other == alias:
                    continue
                o = resolve(sc, other)
                if o is not None and o in ok:
                    ok.add(r)
                    changed = True
                    break
    for r in refs:
        if r[3] != "into" and r not in ok:
            problems.append("%s %s%s has no shop_id = %s filter in its query "
                            "block" % (r[3].upper(), r[2],
                                       "" if r[1] == r[2] else " " + r[1], s))

    m = re.match(r"insert\s+into\s+(" + tbl + r")\s*\(([^)]*)\)\s*"
                 r"(values|select)\b", body)
    if re.match(r"insert\b", body) and not m:
        problems.append("INSERT into a library table not recognised")
    if m:
        cols = [c.strip() for c in m.group(2).split(",")]
        if "shop_id" not in cols:
            problems.append("INSERT INTO %s does not set shop_id" % m.group(1))
        else:
            idx = cols.index("shop_id")
            rest = body[m.end():]
            if m.group(3) == "values":
                rest = re.split(r"\bon duplicate key update\b", rest)[0]
                for tup in split_top(rest):
                    vals = split_top(tup.strip()[1:-1])
                    if idx >= len(vals) or vals[idx] != s:
                        problems.append("INSERT INTO %s inserts shop_id %s"
                                        % (m.group(1), vals[idx] if idx <
                                           len(vals) else "(missing)"))
            else:
                depth, cut = 0, len(rest)
                for k, ch in enumerate(rest):
                    depth += ch == "("
                    depth -= ch == ")"
                    if depth == 0 and rest.startswith(" from ", k):
                        cut = k
                        break
                items = split_top(rest[:cut])
                item = items[idx] if idx < len(items) else ""
                fine = item == s
                mm = re.fullmatch(r"(?:([a-z_][a-z0-9_]*)\.)?shop_id", item)
                if mm:
                    sel = innermost(root, m.end())
                    src = (resolve(sel, mm.group(1)) if mm.group(1) else
                           (sel.refs[0] if len(sel.refs) == 1 else None))
                    fine = src is not None and src in ok
                if not fine:
                    problems.append("INSERT INTO %s ... SELECT takes shop_id "
                                    "from %r" % (m.group(1), item))
    return problems


PROCS = ("rsv_reserve_key_v3", "rsv_fast_cart_v5", "rsv_settle_v2")
# The procedures whose bodies hold the statements (the ones above, and
# those they call, never the client), and how many statements on library
# tables each body has at least (fewer: the parse missed some).
MIN_STATEMENTS = {"rsv_reserve_key_v3": 4, "rsv_fast_cart_v5": 5,
                  "rsv_settle_checkout_v1": 4, "rsv_pool_top_up_v3": 2,
                  "rsv_pool_take_units_v1": 3,
                  "rsv_pool_top_up_held_v1": 1}


def procedure_statements(shop, proc):
    """The statements of a reserve procedure's body as sql/schema.sql
    defines it, its shop argument replaced by `shop`.  The general log
    shows only the CALL (statements inside a stored program are not
    logged), so the body is checked as written, and each CALL is checked
    to pass the shop being served."""
    with open(os.path.join(REPO, "sql", "schema.sql")) as f:
        text = f.read()
    m = re.search(r"CREATE PROCEDURE %s\((.*?)\nEND//" % proc, text, re.S)
    if not m:
        return None
    body = "\n".join(ln.split("--")[0] for ln in m.group(1).split("\n"))
    out = []
    for part in body.split(";"):
        st = re.sub(r"\s+", " ", part).strip().lower()
        st = re.sub(r"\bp_shop\b", str(shop), st)
        k = re.search(r"\b(select|insert|delete|update)\b", st)
        if k and re.search(r"\b(" + "|".join(TABLES) + r")\b", st):
            out.append(st[k.start():])
    return out


# The checker must find a problem in each of these and pass the good
# ones; run before the real check so a checker that accepts anything fails.
SELF_TEST_BAD = [
    "delete from rsv_pool where item_id = 1",
    "delete from rsv_pool where shop_id = 8",
    "select a from rsv_checkouts c left join rsv_holds h "
    "on h.checkout_token = c.checkout_token where c.shop_id = 7",
    "select (select count(*) from rsv_pool u where "
    "u.item_id = l.item_id) from rsv_ledger l "
    "where l.shop_id = 7",
    "(select 1 from rsv_ledger where shop_id = 7) union all "
    "(select 2 from rsv_pool where id = 3)",
    "update rsv_ledger set on_hand = 1 where item_id = 7",
    "insert into rsv_pool (item_id, id) values (1, 2)",
    "insert into rsv_pool (shop_id, id) values (7, 2),(8, 3)",
    "insert into rsv_journal (shop_id, quantity) select "
    "shop_id, quantity from rsv_holds where checkout_token = '?'",
    "select 1 from rsv_pool where shop_id = 77",
]
SELF_TEST_GOOD = [
    "delete from rsv_pool where shop_id = 7 and id = 1",
    "select a from rsv_checkouts c left join rsv_holds h "
    "on h.shop_id = c.shop_id where c.shop_id = 7 for update",
    "select (select count(*) from rsv_pool u where u.shop_id = "
    "l.shop_id) from rsv_ledger l where l.shop_id = 7",
    "insert into rsv_pool (shop_id, id) values (7, 2),(7, 3)",
    "insert into rsv_journal (shop_id, quantity) select "
    "shop_id, quantity from rsv_holds where shop_id = 7",
    "insert into rsv_pool (shop_id, id) select 7, n from (select "
    "0 as n union all select 1) seq where n < 2",
]


def self_test():
    bad = [q for q in SELF_TEST_BAD if not check_statement(q, 7)]
    bad += [q for q in SELF_TEST_GOOD if check_statement(q, 7)]
    for q in bad:
        print("FAIL: the checker misjudges: %s -> %s"
              % (q, check_statement(q, 7)))
    return not bad


def run_operations(ctx, ctx_all, ctx_stmts, shop):
    """Every public operation, for one shop (and one all_shops audit)."""
    ctx.stock_set(shop, 1, 1, 20)
    ctx.stock_set(shop, 1, 2, 20)
    ctx.stock_set(shop, 2, 1, 5)
    ctx.stock_adjust(shop, 2, 1, 3)
    # multi-line, multi-location cart: first on empty pools (slow path)
    with rsv.Cart() as cart:
        cart.add(1, [1, 2], 25, split=True)
        cart.add(2, [1], 2)
        ctx.reserve(shop, b"co-1", cart)
    ctx.replenish(shop, 1, 1)
    ctx.replenish(shop, 2, 1)
    # the same token with a changed cart (re-reserve), then the fast path
    with rsv.Cart() as cart:
        cart.add(1, [1, 2], 3, split=True)
        cart.add(2, [1], 1)
        ctx.reserve(shop, b"co-1", cart)
    ctx.reserve_one(shop, b"co-2", 1, 1, 2)
    ctx_stmts.reserve_one(shop, b"co-2s", 1, 1, 1)  # the statement path
    ctx.reserve_one(shop, b"co-3", 2, 1, 1, ttl_ms=1)
    try:
        ctx.reserve_one(shop, b"co-4", 2, 1, 1000)
    except rsv.OutOfStock:
        pass
    ctx.checkout_status(shop, b"co-1")
    ctx.extend(shop, b"co-1", 60000)
    ctx.claim(shop, b"co-1")
    ctx.release(shop, b"co-2")
    try:
        ctx.claim(shop, b"co-1")
    except rsv.AlreadyClaimed:
        pass
    ctx.reserve_one(shop, b"co-5", 1, 1, 1, ttl_ms=1)
    ctx.reserve_one(shop, b"co-6", 1, 1, 1, ttl_ms=1)
    time.sleep(0.05)                      # co-3, co-5 and co-6 expire
    ctx.replenish(shop, 1, 1)             # gives back co-5's and co-6's
    try:
        ctx.claim(shop, b"co-5")          # releases what is left of it
    except rsv.Expired:
        pass
    try:
        ctx.extend(shop, b"co-6")
    except rsv.Expired:
        pass
    ctx.release(shop, b"co-6")
    ctx.sweep(shop)                       # also looks for idle pools
    ctx.pool_drain(shop, 1, 1)            # a pool back to its ledger row
    ctx.replenish(shop, 1, 1)             # folds the claim
    ctx.stock_set(shop, 1, 1, 2)          # shrinks the pool
    ctx.stock_get(shop, 1, 1)
    ctx.audit(shop)
    ctx_all.audit(all_shops=True)


def main():
    if not self_test():
        return 1
    sock = os.environ.get("RSV_TEST_SOCKET")
    if not sock:
        print("shopfilter-test: RSV_TEST_SOCKET is not set; run under "
              "tools/mariadb.sh run", file=sys.stderr)
        return 2
    user = os.environ.get("RSV_TEST_USER", "root")
    password = os.environ.get("RSV_TEST_PASSWORD")
    db = "rsvtest_shopfilter_%d" % os.getpid()
    admin = rsv.Connection(unix_socket=sock, user=user, password=password)
    if admin.scalar_int("SELECT COUNT(*) FROM information_schema.schemata "
                        "WHERE schema_name = '%s'" % db):
        print("database %s exists: refusing a dirty database" % db)
        return 2
    admin.execute("CREATE DATABASE %s" % db)
    failures = []
    try:
        admin.select_db(db)
        admin.execute_file(os.path.join(REPO, "sql", "schema.sql"))
        old_output = admin.scalar("SELECT @@global.log_output").decode()
        old_log = admin.scalar_int("SELECT @@global.general_log")
        admin.execute("SET GLOBAL log_output = 'TABLE'")
        admin.execute("SET GLOBAL general_log = 1")
        shop = 7000000000 + os.getpid()
        try:
            with rsv.Connection(unix_socket=sock, user=user,
                                password=password, db=db) as conn:
                tid = conn.thread_id
                with rsv.Context(conn) as ctx, \
                        rsv.Context(conn, conn_tag_prefix=ALL_SHOPS_PREFIX) \
                        as ctx_all, \
                        rsv.Context(conn, flags=TEST_OPT_STATEMENTS_ONLY) \
                        as ctx_stmts:
                    run_operations(ctx, ctx_all, ctx_stmts, shop)
        finally:
            admin.execute("SET GLOBAL general_log = %d" % old_log)
            admin.execute("SET GLOBAL log_output = '%s'" % old_output)
        rows = admin.query("SELECT command_type, argument FROM "
                           "mysql.general_log WHERE thread_id = %d AND "
                           "command_type IN ('Query', 'Execute') ORDER BY "
                           "event_time" % tid)
        if not old_log:
            admin.execute("TRUNCATE mysql.general_log")
    finally:
        admin.execute("DROP DATABASE IF EXISTS %s" % db)
        admin.close()

    checked, exempt, kinds, calls = 0, {}, set(), 0
    in_procs = 0
    for proc in MIN_STATEMENTS:
        body = procedure_statements(shop, proc)
        if not body or len(body) < MIN_STATEMENTS[proc]:
            failures.append(("the statements of procedure %s were not found "
                             "in sql/schema.sql" % proc, repr(body)))
        for st in body or []:
            checked += 1
            in_procs += 1
            for p in check_statement(st, shop):
                failures.append(("in procedure %s: %s" % (proc, p), st))
    for command, arg in rows:
        raw = arg.decode("utf-8", "replace") if isinstance(arg, bytes) else arg
        sql = re.sub(r"\s+", " ", strip_literals(raw)).strip().lower()
        tag = re.match(r"^/\* (conn_tag:|" + re.escape(ALL_SHOPS_PREFIX) +
                       r")(\w+) \*/ ?(.*)$", sql)
        if not tag:
            failures.append(("statement without the library's conn_tag",
                             raw))
            continue
        kinds.add(tag.group(2))
        why = None
        for rx, reason in EXEMPT:
            if rx.search(sql) or rx.search(tag.group(3)):
                why = reason
                break
        if why:
            exempt[why] = exempt.get(why, 0) + 1
            continue
        call = re.match(r"(?:set statement .*? for )?call (?:%s)\s*\(\s*"
                        r"(\d+)\s*," % "|".join(PROCS), tag.group(3))
        if call:
            calls += 1
            if call.group(1) != str(shop):
                failures.append(("CALL passes shop %s" % call.group(1), raw))
            continue
        if not re.search(r"\b(" + "|".join(TABLES) + r")\b", sql):
            failures.append(("tagged statement touches no library table and "
                             "is not an exception", raw))
            continue
        checked += 1
        for p in check_statement(sql, shop):
            failures.append((p, raw))

    print("shopfilter: %d statements captured, %d checked (%d in the "
          "reserve procedures), %d CALLs; exceptions: %s"
          % (len(rows), checked, in_procs, calls,
             "; ".join("%d x %s" % (n, w) for w, n in exempt.items())))
    if calls == 0:
        failures.append(("no CALL of the reserve procedure was captured", ""))
    want = {"open", "stock", "reserve", "replenish", "status", "extend",
            "claim", "release", "sweep", "audit"}
    if checked == 0:
        failures.append(("no library statement was captured (is the general "
                         "log working?)", ""))
    elif not want <= kinds:
        failures.append(("operations missing from the log: %s"
                         % sorted(want - kinds), ""))
    if not any(c in (b"Execute", "Execute") for c, _ in rows):
        failures.append(("no prepared statement execution was captured", ""))
    for problem, stmt in failures:
        print("FAIL: %s\n      %s" % (problem, stmt[:600]))
    if failures:
        print("shopfilter: %d problem(s)" % len(failures))
        return 1
    print("shopfilter: every statement filters on shop_id")
    return 0


if __name__ == "__main__":
    sys.exit(main())
