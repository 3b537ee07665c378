#!/usr/bin/env bash
# The Python package installs the usual way and works from where it was
# installed, against the server in RSV_TEST_SOCKET:
#   - `pip install .` of a copy of this directory into a fresh virtual
#     environment, with pip's default options as the README prints it
#     (build isolation on: the package's own backend needs nothing from
#     an index, so it installs offline), and with --target into a plain
#     directory;
#   - the installed package imports from there (not from the source tree),
#     finds libreserve through LIBRESERVE_PATH, or as the installed
#     libreserve.so.0 the dynamic loader finds (LD_LIBRARY_PATH here), and
#     runs stock_set -> reserve -> claim through a connection string;
#   - the ten-line example of README.md runs as printed (its connection
#     string replaced by the test server's), and so does its asyncio
#     example;
#   - the type hints are installed with it (py.typed);
#   - pip uninstall removes it again.
# Usage: tools/mariadb.sh run bindings/python/pip-install-test.sh (make check
# runs it; make lib first).  PYTHON=... picks the interpreter; otherwise the
# first of python3 on PATH and /usr/bin/python3 that has pip and venv.
# As root it installs Debian's python3-pip python3-venv when none has;
# without any it says so and skips.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${RSV_BUILD:-build}
lib=$repo/$build/libreserve.so.0
[ -e "$lib" ] || { echo "python-install: $lib not built (make lib)" >&2; exit 2; }
# shellcheck source=tests/testlib.sh
. "$repo/tests/testlib.sh" python-install

# ---- an interpreter that can build the package offline ----
can_build() {
  "$1" -c 'import pip, venv, ensurepip' >/dev/null 2>&1 || "$1" -c 'import pip, venv' >/dev/null 2>&1
}
pick_python() {
  local p
  for p in ${PYTHON:-} python3 /usr/bin/python3; do
    command -v "$p" >/dev/null 2>&1 && can_build "$p" && { command -v "$p"; return 0; }
  done
  return 1
}
if ! PY=$(pick_python); then
  "$repo/tools/deps.sh" packages python3-pip python3-venv \
    >"$tmp/apt.log" 2>&1 || tail -5 "$tmp/apt.log"
  if ! PY=$(pick_python); then
    echo "skip python-install: no python3 with pip and venv (apt-get install python3-pip python3-venv)"
    echo "python-install: 0 passed, 0 failed"
    exit 0
  fi
fi
echo "python-install: $PY ($("$PY" -c 'import sys, pip; print("Python %d.%d.%d" % sys.version_info[:3], "pip", pip.__version__)'))"

# A copy of the package directory, so the build leaves nothing in the tree.
mkdir -p "$tmp/src" "$tmp/run"
(cd "$here" && tar -c --exclude=build --exclude=dist --exclude='*.egg-info' \
   --exclude=__pycache__ .) | tar -x -C "$tmp/src" || exit 1

sql -e "CREATE DATABASE \`$DB\`" && sql "$DB" <"$repo/sql/schema.sql" || { bad "create the test database"; finish; exit; }
dsn=$("$PY" - "$DB" "${RSV_TEST_USER:-root}" "${RSV_TEST_PASSWORD:-}" "$RSV_TEST_SOCKET" <<'PY'
import sys
from urllib.parse import quote
db, user, pw, sock = sys.argv[1:]
q = lambda s: quote(s, safe="")
print("mariadb://%s%s@/%s?socket=%s" % (q(user), ":" + q(pw) if pw else "", q(db), q(sock)))
PY
)

# smoke INTERPRETER WHERE: import the installed package (from WHERE) and
# run a reserve -> claim through the connection string.
smoke() {
  local python=$1 where=$2
  (cd "$tmp/run" && PYTHONDONTWRITEBYTECODE=1 "$python" - "$where" "$dsn" <<'PY'
import os, sys
where, dsn = sys.argv[1:]
import libreserve as rsv
f = os.path.realpath(rsv.__file__)
assert f.startswith(os.path.realpath(where) + os.sep), "imported from %s" % f
assert rsv._REPO is None, rsv._REPO  # no source tree around an install
print("     %s %s, %s" % (f, rsv.__version__, rsv.library_path()))
assert rsv.version() == rsv.__version__, (rsv.version(), rsv.__version__)
with rsv.connect(dsn, hold_ttl_ms=60000) as ctx:
    shop = os.getpid()
    ctx.stock_set(shop, 42, 7, 10)
    ctx.reserve_one(shop, "checkout-1", 42, 7, 2)
    assert ctx.checkout_status(shop, "checkout-1").name == "held"
    ctx.claim(shop, "checkout-1")
    try:
        ctx.claim(shop, "checkout-1")
        raise AssertionError("claimed twice")
    except rsv.AlreadyClaimed:
        pass
    st = ctx.stock_get(shop, 42, 7)
    assert (st.on_hand, st.held) == (8, 0), st
    assert ctx.audit(shop) == []
print("     reserve -> claim: on hand 10 -> 8")
PY
  )
}

# ---- a virtual environment ----
venv=$tmp/venv
if "$PY" -m venv --system-site-packages --without-pip "$venv" >"$tmp/venv.log" 2>&1 &&
   "$venv/bin/python" -m pip install "$tmp/src" >"$tmp/pip-venv.log" 2>&1; then
  ok "pip install (default options: build isolation, the index) into a virtual environment"
else
  cat "$tmp/venv.log" "$tmp/pip-venv.log" 2>/dev/null | tail -30
  bad "pip install into a virtual environment"
fi
shown=$("$venv/bin/python" -m pip show libreserve 2>/dev/null | sed -n 's/^Version: //p')
want=$(sed -n 's/^#define RSV_VERSION "\(.*\)"/\1/p' "$repo/include/reserve.h")
if [ "$shown" = "$want" ]; then ok "pip show libreserve: version $shown (reserve.h: $want)"; else bad "pip show libreserve: version '$shown', reserve.h $want"; fi
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if out=$(LIBRESERVE_PATH=$lib smoke "$venv/bin/python" "$site" 2>&1); then
  echo "$out"; ok "venv: imports from site-packages, LIBRESERVE_PATH, reserve -> claim"
else
  echo "$out"; bad "venv: the installed package runs"
fi

# put_dsn FILE: an example of the README, its one connection string
# replaced by the test server's.
put_dsn() {
  "$PY" - "$1" "$dsn" <<'PY'
import re, sys
path, dsn = sys.argv[1:]
text = open(path).read()
new, n = re.subn(r'"mariadb://[^"]*"', lambda m: repr(dsn), text)
assert n == 1, "one connection string expected, found %d" % n
open(path, "w").write(new)
PY
}

# The README's example, as printed, from the installed package.
awk '/^```python$/ { c = 1; next } c && /^```$/ { exit } c { print }' "$here/README.md" >"$tmp/readme.py"
lines=$(grep -c . "$tmp/readme.py")
if [ "$lines" -ge 3 ] && [ "$lines" -le 10 ]; then ok "README's example is $lines lines"; else bad "README's example is $lines lines (at most 10)"; fi
if grep -q 'os.environ.get("RSV_DSN") or "mariadb://' "$tmp/readme.py"; then ok "README's example reads RSV_DSN"; else bad "README's example does not read RSV_DSN"; fi
if out=$(cd "$tmp/run" && RSV_DSN=$dsn LIBRESERVE_PATH=$lib PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" "$tmp/readme.py" 2>&1); then
  echo "$out" | sed 's/^/     /'; ok "README's example runs"
else
  echo "$out" | sed 's/^/     /'; bad "README's example runs"
fi
if out=$(cd "$tmp/run" && RSV_DSN=$dsn LIBRESERVE_PATH=$lib PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" "$tmp/readme.py" 2>&1); then
  echo "$out" | sed 's/^/     /'; ok "README's example runs again (the claim is not taken twice)"
else
  echo "$out" | sed 's/^/     /'; bad "README's example runs again"
fi

if [ -f "$site/libreserve/py.typed" ] && [ -f "$site/libreserve/aio.py" ]; then
  ok "installed with py.typed and the asyncio module"
else
  bad "py.typed or aio.py missing from $site/libreserve"
fi

# The type hints, as a type checker sees the installed package: mypy
# (Debian's python3-mypy) passes a program that uses it right, finds
# exactly the two wrong arguments of another, and finds nothing to say
# about the package itself.
mypy_ok() { /usr/bin/python3 -m mypy --version >/dev/null 2>&1; }
mypy_ok || "$repo/tools/deps.sh" packages python3-mypy >/dev/null 2>&1
if ! mypy_ok; then
  echo "skip type check: no mypy (apt-get install python3-mypy)"
else
  cat >"$tmp/run/typed_app.py" <<'PY'
import asyncio
from typing import List
import libreserve as rsv

def checkout(dsn: str) -> int:
    with rsv.connect(dsn, hold_ttl_ms=60000) as ctx:
        ctx.reserve_one(1, "t", 42, 7, 2)
        st: rsv.CheckoutStatus = ctx.checkout_status(1, b"t")
        if st.status is rsv.Status.HELD:
            ctx.claim(1, "t")
        try:
            ctx.release(1, "t")
        except rsv.AlreadyClaimed as e:
            print(e.code, e.errno, e.message)
        v: List[rsv.Violation] = ctx.audit(1)
        return ctx.stock_get(1, 42, 7).available + len(v)

async def acheckout(dsn: str) -> str:
    async with await rsv.connect_async(dsn) as ctx:
        await ctx.claim(1, "t")
        return (await ctx.checkout_status(1, "t")).name
PY
  cat >"$tmp/run/typed_bad.py" <<'PY'
import libreserve as rsv
def f(ctx: rsv.Context) -> None:
    ctx.reserve_one(1, 12, 42, 7, 2)
    ctx.claim("1", "t")
PY
  out=$(cd "$tmp/run" && /usr/bin/python3 -m mypy --no-incremental --cache-dir=/dev/null \
        --python-executable "$venv/bin/python" typed_app.py typed_bad.py "$site/libreserve" 2>&1)
  errors=$(grep -c ': error: ' <<<"$out")
  if [ "$errors" = 2 ] && [ "$(grep -c '^typed_bad.py:[34]: error: .*\[arg-type\]' <<<"$out")" = 2 ]; then
    ok "mypy: the installed package's hints pass a right program and catch a wrong one"
  else
    echo "$out" | tail -20; bad "mypy on the installed package"
  fi
fi

# The asyncio example, under "## asyncio", as printed.
awk '/^## asyncio/ { s = 1 } s && /^```python$/ { c = 1; next }
     c && /^```$/ { exit } c { print }' "$here/README.md" >"$tmp/readme_aio.py"
put_dsn "$tmp/readme_aio.py" || bad "put the test server into the README's asyncio example"
if out=$(cd "$tmp/run" && LIBRESERVE_PATH=$lib PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" "$tmp/readme_aio.py" 2>&1) &&
   grep -q "status=<Status.CLAIMED: 2>" <<<"$out"; then
  echo "$out" | sed 's/^/     /'; ok "README's asyncio example runs"
else
  echo "$out" | sed 's/^/     /'; bad "README's asyncio example runs"
fi

# ---- --target: a plain directory on PYTHONPATH ----
target=$tmp/target
if "$PY" -m pip install --no-deps \
     --disable-pip-version-check --target "$target" "$tmp/src" >"$tmp/pip-target.log" 2>&1; then
  ok "pip install --target DIR"
else
  tail -30 "$tmp/pip-target.log"; bad "pip install --target DIR"
fi
# No LIBRESERVE_PATH: the installed libreserve.so.0 as the loader finds it.
if out=$(unset LIBRESERVE_PATH; LD_LIBRARY_PATH="$(dirname "$lib")" PYTHONPATH="$target" smoke "$PY" "$target" 2>&1); then
  echo "$out"; ok "--target: imports from DIR, finds libreserve.so.0 on the loader's path, reserve -> claim"
else
  echo "$out"; bad "--target: the installed package runs"
fi
# No LIBRESERVE_PATH, not on the loader's path: the libdir of reserve.pc
# as pkg-config finds it (a prefix of one's own, PKG_CONFIG_PATH).
mkdir -p "$tmp/pc"
printf 'prefix=/nonexistent\nlibdir=%s\nincludedir=/nonexistent\n\nName: reserve\nDescription: test\nVersion: 0\nLibs: -L${libdir} -lreserve\n' \
  "$(dirname "$lib")" >"$tmp/pc/reserve.pc"
if out=$(unset LIBRESERVE_PATH; PKG_CONFIG_PATH=$tmp/pc PYTHONPATH="$target" smoke "$PY" "$target" 2>&1) &&
   grep -qF ", $(dirname "$lib")/" <<<"$out"; then
  echo "$out"; ok "--target: finds libreserve.so.0 in the libdir pkg-config reports for reserve"
else
  echo "$out"; bad "--target: pkg-config's libdir"
fi
out=$(cd "$tmp/run" && env -u LIBRESERVE_PATH PKG_CONFIG_PATH=/nonexistent LD_LIBRARY_PATH=/nonexistent PYTHONPATH="$target" "$PY" -c 'import libreserve' 2>&1)
if grep -q "libreserve.LibraryNotFound: .*LIBRESERVE_PATH (not set); pkg-config .*; the system loader" <<<"$out"; then
  ok "no library anywhere: LibraryNotFound names each place tried"
elif [ -z "$out" ]; then
  echo "skip no-library message (a libreserve.so.0 is installed on this machine)"
else
  echo "$out" | tail -3; bad "no library anywhere: unclear error"
fi

# ---- uninstall ----
if "$venv/bin/python" -m pip uninstall -y libreserve >"$tmp/pip-uninstall.log" 2>&1 &&
   ! (cd "$tmp/run" && "$venv/bin/python" -c 'import libreserve' >/dev/null 2>&1); then
  ok "pip uninstall removes it"
else
  cat "$tmp/pip-uninstall.log"; bad "pip uninstall removes it"
fi
finish
