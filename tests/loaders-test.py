#!/usr/bin/env python3
"""The schema loaders agree: sql/schema.sql loaded by the mariadb client
(the reference: the file is written for it), by the library's one loader
(tools/rsv-admin/sqlscript.h, through `rsv-admin schema install`; the
tests load with the same code) and by the Python binding's
execute_file() leaves the same database: the same tables, views,
procedures and functions, word for word, and the same rows in
rsv_schema.

Run against the server in RSV_TEST_SOCKET (tools/mariadb.sh run
tests/loaders-test.py; make check runs it).  Prints one line per
difference and a closing count; exits 1 on any."""
import os
import re
import subprocess
import sys

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SOCK = os.environ.get("RSV_TEST_SOCKET")
if not SOCK:
    sys.exit("loaders-test: RSV_TEST_SOCKET is not set: run it under "
             "tools/mariadb.sh run")
USER = os.environ.get("RSV_TEST_USER", "root")
PASSWORD = os.environ.get("RSV_TEST_PASSWORD", "")
BUILD = os.environ.get("RSV_BUILD", "build")
ADMIN = os.path.join(BUILD, "rsv-admin")
os.environ.setdefault("LIBRESERVE_PATH", os.path.abspath(os.path.join(BUILD, "libreserve.so")))
sys.path.insert(0, "bindings/python")
import libreserve as rsv  # noqa: E402

SCHEMA = "sql/schema.sql"
pid = os.getpid()
DBS = {"client": "rsv_load_client_%d" % pid, "library": "rsv_load_lib_%d" % pid,
       "python": "rsv_load_py_%d" % pid}


def connect(db=None):
    return rsv.Connection(unix_socket=SOCK, user=USER, password=PASSWORD, db=db)


def text(v):
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else ("" if v is None else str(v))


def describe(c, db):
    """Every object of db as (kind, name) -> its definition, the database's
    own name taken out."""
    out = {}
    def norm(s):
        s = text(s).replace("`%s`." % db, "").replace("%s." % db, "")
        return re.sub(r" AUTO_INCREMENT=\d+", "", s)
    c.select_db(db)
    for (name, kind) in c.query("SHOW FULL TABLES"):
        name, kind = text(name), text(kind)
        if kind == "VIEW":
            out[("view", name)] = norm(c.query("SHOW CREATE VIEW `%s`" % name)[0][1])
        else:
            out[("table", name)] = norm(c.query("SHOW CREATE TABLE `%s`" % name)[0][1])
    for (name, kind) in c.query(
            "SELECT ROUTINE_NAME, ROUTINE_TYPE FROM information_schema.ROUTINES "
            "WHERE ROUTINE_SCHEMA = '%s'" % db):
        name, kind = text(name), text(kind)
        row = c.query("SHOW CREATE %s `%s`" % (kind, name))[0]
        out[(kind.lower(), name)] = norm(row[2])
    for (name, stmt) in c.query(
            "SELECT TRIGGER_NAME, ACTION_STATEMENT FROM information_schema.TRIGGERS "
            "WHERE TRIGGER_SCHEMA = '%s'" % db):
        out[("trigger", text(name))] = norm(stmt)
    # (the time of the load left out)
    out[("rows", "rsv_schema")] = repr([
        tuple(text(v) for v in r if not re.match(r"\d{4}-\d\d-\d\d ", text(v)))
        for r in c.query("SELECT * FROM rsv_schema ORDER BY 1")])
    return out


def main():
    problems = []
    with connect() as c:
        for db in DBS.values():
            c.execute("DROP DATABASE IF EXISTS %s" % db)
            c.execute("CREATE DATABASE %s" % db)
        try:
            client = next(p for p in ("/usr/bin/mariadb", "/usr/bin/mysql") if os.path.exists(p))
            with open(SCHEMA, "rb") as f:
                # (--comments: the other two keep the procedures' comments)
                r = subprocess.run([client, "--no-defaults", "--comments",
                                    "--socket", SOCK, "-u", USER,
                                    DBS["client"]], stdin=f, capture_output=True,
                                   env=dict(os.environ, MYSQL_PWD=PASSWORD))
            if r.returncode:
                problems.append("the mariadb client failed: %s" % r.stderr.decode())
            r = subprocess.run([ADMIN, "--no-defaults", "--socket", SOCK, "--user", USER,
                                "--database", DBS["library"], "--schema", SCHEMA,
                                "schema", "install"], capture_output=True,
                               env=dict(os.environ, RSV_ADMIN_PASSWORD=PASSWORD))
            if r.returncode:
                problems.append("rsv-admin schema install failed: %s" % r.stderr.decode())
            c.select_db(DBS["python"])
            c.execute_file(SCHEMA)
            seen = {way: describe(c, db) for way, db in DBS.items()}
        finally:
            for db in DBS.values():
                c.execute("DROP DATABASE IF EXISTS %s" % db)
    ref = seen["client"]
    if len(ref) < 8:
        problems.append("the reference load has only %d objects" % len(ref))
    for way in ("library", "python"):
        got = seen[way]
        for key in sorted(set(ref) | set(got)):
            if key not in got:
                problems.append("%s: %s %s missing" % (way, key[0], key[1]))
            elif key not in ref:
                problems.append("%s: %s %s not in the reference" % (way, key[0], key[1]))
            elif got[key] != ref[key]:
                a, b = ref[key], got[key]
                i = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
                problems.append("%s: %s %s differs at %d: %r, the reference %r"
                                % (way, key[0], key[1], i, b[max(0, i - 30):i + 40],
                                   a[max(0, i - 30):i + 40]))
    for p in problems:
        print("FAIL loaders:", p)
    print("loaders: %d objects compared three ways, %d differences"
          % (len(ref), len(problems)))
    return 1 if problems else 0


sys.exit(main())
