#!/usr/bin/env python3
"""Every identifier docs/internals.md names exists in the code.

The internals page is a map of the code: a name it gives (in `code`
spans: functions, macros, fields, SQL procedures and columns, files) must
be found in lib/, include/, sql/, tests/ or tools/, or the map has drifted
from the territory.  A span is split into its names (`j->end`,
`rkey.read.ledger_took`, `proc_usable()`, `FOR UPDATE SKIP LOCKED` ...);
SQL keywords and plain numbers are skipped, file names must exist.  A
name the page places in a file ("`name` (`file.c`)", "`a`, `b` (`file.c`)"
or "(`name`, `file.c`)") must be in that file.
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
# "`name` (`file.c`)", "`a`, `b` and `c` (`file.c`)" and "(`name`,
# `file.c`)": each name must be in the file named, not merely somewhere.
FILE_DIRS = ("", "lib", "sql", "tests", "include", "include/reserve", "tools/rsv-admin")
file_words = {}
def words_of(path):
    for d in FILE_DIRS:
        p = os.path.join(d, path)
        if os.path.isfile(p):
            if p not in file_words:
                t = open(p, encoding="utf-8", errors="replace").read()
                file_words[p] = (p, set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", t)))
            return file_words[p]
    return None, None

SPAN = r"`[^`]+`"
wrong = []
placed = 0
for doc in DOCS:
    text = open(doc, encoding="utf-8").read()
    places = list(re.finditer(r"\(((?:%s|[^()`])*?)`([\w./-]+\.(?:c|h|sql))`\)" % SPAN, text))
    # "`a` and `b` in `file.c`"
    places += list(re.finditer(r"()((?:%s(?:\(\))?(?:,\s*|\s+and\s+|\s+or\s+|\s*/\s*)?)+)\s+in\s+`([\w./-]+\.(?:c|h|sql))`" % SPAN, text))
    for m in places:
        ln = text.count("\n", 0, m.start()) + 1
        if m.lastindex == 3:  # the "in `file`" form
            inside, path = m.group(2), m.group(3)
        else:
            inside, path = m.group(1), m.group(2)
        # (what follows another file named inside belongs to this one)
        inside = re.split(r"`[\w./-]+\.(?:c|h|sql)`", inside)[-1]
        spans = re.findall(SPAN, inside)
        if not spans and not re.search(r"`[\w./-]+\.(?:c|h|sql)`", m.group(1)):
            # the spans just before the parenthesis, joined by commas,
            # "and", "or" or a slash
            before = text[:m.start()]
            tail = re.search(r"((?:%s(?:\(\))?\s*(?:,|/|\band\b|\bor\b)?\s*)+)$" % SPAN, before)
            spans = re.findall(SPAN, tail.group(1)) if tail else []
        real, known = words_of(path)
        if known is None:
            continue  # (a missing file is reported above)
        for sp in spans:
            sp = sp.strip("`")
            if re.search(r"\.(?:c|h|sql|sh|py|md|mk)\b", sp) or " " in sp.strip():
                continue  # a file, or prose and SQL: not one name
            for name in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", sp):
                if len(name) < 3 or name in SQL_WORDS:
                    continue
                placed += 1
                if name.endswith("_"):
                    ok = any(w.startswith(name) for w in known)
                else:
                    ok = name in known
                if not ok:
                    wrong.append((doc, ln, name, real))
for doc, ln, name, real in wrong:
    print("%s:%d: `%s` is named as in %s, which does not have it" % (doc, ln, name, real))
for doc, ln, name in missing:
    print("%s:%d: `%s` is named but not found in the code" % (doc, ln, name))
print("docs-names: %d names checked, %d missing; %d placed in a file, %d not there"
      % (checked, len(missing), placed, len(wrong)))
sys.exit(1 if missing or wrong else 0)
