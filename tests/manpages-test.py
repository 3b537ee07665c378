#!/usr/bin/env python3
"""Every function the header declares has a man page (a page or a link to
one), whose SYNOPSIS includes the header that declares it and gives the
same prototype as include/reserve.h (or the header of include/reserve/
that declares it); and every page formats without a
warning from man(1) at 80 columns, as lintian checks the packages.

Run from anywhere (make check runs it); prints one line per mismatch and a
closing "N passed, N failed" line."""
import os
import re
import sys

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import glob
hdr = "".join(open(f).read() for f in ["include/reserve.h"] + sorted(glob.glob("include/reserve/*.h")))
decls = {}
for m in re.finditer(r"RSV_EXTERN\s+([^;]*?\b(rsv_\w+)\s*\([^;]*?\));", hdr, re.S):
    decls[m.group(2)] = re.sub(r"\s+", " ", m.group(1)).strip()
# The header that declares each function: its page's SYNOPSIS includes it
# (the sub-headers are not included by reserve.h).
declared_in = {}
for f in ["include/reserve.h"] + sorted(glob.glob("include/reserve/*.h")):
    for m in re.finditer(r"RSV_EXTERN\s+[^;]*?\b(rsv_\w+)\s*\(", open(f).read(), re.S):
        declared_in[m.group(1)] = f[len("include/"):]
def norm(s):
    s = re.sub(r"\s+", " ", s).strip()
    s = re.sub(r"\s*([(),*])\s*", r"\1", s)
    return s
problems = []
for name, proto in sorted(decls.items()):
    page = "man/%s.3" % name
    if not os.path.exists(page):
        problems.append("%s: no man page" % name); continue
    text = open(page).read()
    protos = []
    cur = None
    for line in text.splitlines():
        if line.startswith(".BI ") or line.startswith(".B "):
            body = line.split(" ", 1)[1]
            if line.startswith(".B ") and '"' not in body:
                s = body  # one argument: the rest of the line
            else:  # alternating fonts: the arguments join without spaces
                parts = re.findall(r'"([^"]*)"|(\S+)', body)
                s = "".join(a if a else b for a, b in parts)
            if cur is not None:
                cur += " " + s
            elif re.search(r"\brsv_\w+\s*\(", s):
                cur = s
            if cur is not None and cur.rstrip().endswith(";"):
                protos.append(cur.rstrip()[:-1]); cur = None
    if ".B #include <%s>" % declared_in[name] not in text:
        problems.append("%s: %s's SYNOPSIS does not include <%s>" % (name, page, declared_in[name]))
    want = norm(proto)
    if not any(norm(p) == want for p in protos):
        problems.append("%s: header says %r; %s has %r" % (name, want, page, [norm(p) for p in protos if name + "(" in norm(p)]))
# man(1) as lintian runs it: a table wider than the line, a bad macro
import shutil
import subprocess
if shutil.which("man"):
    env = dict(os.environ, LC_ALL="C.UTF-8", MANWIDTH="80")
    for page in sorted(glob.glob("man/*.[0-9]")):
        r = subprocess.run(["man", "--warnings", "-E", "UTF-8", "-l", "-Tutf8",
                            "-Z", page], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        if r.stderr.strip():
            problems.append("%s: man warns: %s" % (page, " ".join(r.stderr.split())))
else:
    print("manpages: man(1) not installed: formatting not checked")
for p in problems: print("FAIL", p)
print("manpages: %d passed, %d failed" % (len(decls) - len(problems), len(problems)))
sys.exit(1 if problems else 0)
