#!/usr/bin/env python3
"""Every identifier docs/internals.md names exists in the code.

The internals page is a map of the code: a name it gives (in `code`
spans: functions, macros, fields, SQL procedures and columns, files) must
be found in lib/, include/, sql/, tests/ or tools/, or the map has drifted
from the territory.  A span is split into its names (`j->end`,
`rkey.read.ledger_took`, `proc_usable()`, `FOR UPDATE SKIP LOCKED` ...);
SQL keywords and plain numbers are skipped, file names must exist.
Prints each missing name with its line, and a closing count; exits 1 if
any is missing.  make check runs it."""
import os
import re
import subprocess
import sys

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DOCS = sys.argv[1:] or ["docs/internals.md"]
SQL_WORDS = set("""SELECT FROM WHERE AND OR NOT IN IS NULL FOR UPDATE SKIP LOCKED
LOCK SHARE MODE INSERT DELETE INTO VALUES ORDER BY DESC ASC LIMIT UNION ALL
START TRANSACTION READ WRITE ONLY COMMITTED UNCOMMITTED REPEATABLE COMMIT
ROLLBACK CHAIN NO RELEASE SAVEPOINT CALL SET ISOLATION LEVEL EXISTS COUNT
FORCE INDEX PRIMARY JOIN STRAIGHT_JOIN ON AS BEGIN END IF THEN ELSE WHEN
CASE TO WITH EXECUTE ALTER TABLE CREATE DROP PROCEDURE HANDLER SIGNAL
SQLSTATE DECLARE DATABASE MAX MIN SUM GROUP HAVING UNHEX HEX JSON_TABLE
RENAME INSTANT ALGORITHM CHECK""".split())

def sources():
    out = subprocess.run(
        ["git", "ls-files", "lib", "include", "sql", "tests", "tools", "mk",
         "Makefile", "bindings"], capture_output=True, text=True).stdout
    files = [f for f in out.split() if os.path.isfile(f)]
    # files not yet committed count too (the check runs on a work tree)
    for root in ["lib", "include", "sql", "tests", "tools"]:
        for d, _, names in os.walk(root):
            for n in names:
                p = os.path.join(d, n)
                if p not in files and re.search(r"\.(c|h|sql|sh|py|mk)$", n):
                    files.append(p)
    text = []
    for f in files:
        try:
            text.append(open(f, encoding="utf-8", errors="replace").read())
        except OSError:
            pass
    return "\n".join(text)

code = sources()
words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code))
missing = []
checked = 0
for doc in DOCS:
    text = open(doc, encoding="utf-8").read()
    for m in re.finditer(r"`([^`]+)`", text):
        ln = text.count("\n", 0, m.start()) + 1
        if True:
            span = " ".join(m.group(1).split())
            # file names: lib/x.c, sql/schema.sql, reserve_job.h ...
            for path in re.findall(r"[\w./-]+\.(?:c|h|sql|sh|py|md|mk)\b", span):
                checked += 1
                cands = [path] + [os.path.join(d, path) for d in ("lib", "sql", "tests", "include")]
                if not any(os.path.exists(c) for c in cands):
                    missing.append((doc, ln, path))
            span = re.sub(r"[\w./-]+\.(?:c|h|sql|sh|py|md|mk)\b", " ", span)
            for name in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", span):
                if name in SQL_WORDS or name.upper() in SQL_WORDS and name.isupper():
                    continue
                if len(name) < 3 or name.isdigit():
                    continue
                checked += 1
                # `ledger_*()` names a family, `rsv_batcher_*_start`'s
                # `_claim` a part: a prefix or a suffix of some name
                if name.endswith("_"):
                    found = any(w.startswith(name) for w in words)
                elif name.startswith("_"):
                    found = any(name in w for w in words)
                else:
                    found = name in words
                if not found:
                    missing.append((doc, ln, name))
for doc, ln, name in missing:
    print("%s:%d: `%s` is named but not found in the code" % (doc, ln, name))
print("docs-names: %d names checked, %d missing" % (checked, len(missing)))
sys.exit(1 if missing else 0)
