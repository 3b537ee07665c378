#!/usr/bin/env python3
"""rsvctl.py - what the shell tests need done through libreserve itself
(ctypes over $RSV_BUILD/libreserve.so, RSV_BUILD defaulting to build), so
that they test states the library really produces.  Connects to the
database $DB on the server of $RSV_TEST_SOCKET as $RSV_TEST_USER (root)
with $RSV_TEST_PASSWORD, opens one context and runs the commands given,
separated by "--", in order:

  reserve SHOP TOKEN ITEM LOCATION QTY TTL_MS
  try-reserve SHOP TOKEN ITEM LOCATION QTY TTL_MS   (a refusal is fine)
  claim SHOP TOKEN
  release SHOP TOKEN
  prometheus LABELS     print the context's rsv_stats_prometheus() text

Exits non-zero, naming the code, at the first command that fails."""
import ctypes
import ctypes.util
import os
import sys
from ctypes import (POINTER, byref, c_char_p, c_int, c_int64, c_size_t,
                    c_uint, c_uint64, c_ulong, c_void_p)

m = ctypes.CDLL(ctypes.util.find_library("mariadb") or "libmariadb.so.3")
r = ctypes.CDLL(os.path.abspath(os.path.join(
    os.environ.get("RSV_BUILD", "build"), "libreserve.so")))
m.mysql_init.restype = c_void_p
m.mysql_init.argtypes = [c_void_p]
m.mysql_real_connect.restype = c_void_p
m.mysql_real_connect.argtypes = [c_void_p, c_char_p, c_char_p, c_char_p,
                                 c_char_p, c_uint, c_char_p, c_ulong]
m.mysql_error.restype = c_char_p
m.mysql_error.argtypes = [c_void_p]
m.mysql_close.argtypes = [c_void_p]
r.rsv_open.argtypes = [POINTER(c_void_p), c_void_p, c_void_p]
r.rsv_close.argtypes = [c_void_p]
r.rsv_errmsg.restype = c_char_p
r.rsv_errmsg.argtypes = [c_void_p]
r.rsv_code_name.restype = c_char_p
r.rsv_code_name.argtypes = [c_int]
r.rsv_reserve_one.argtypes = [c_void_p, c_uint64, c_char_p, c_size_t,
                              c_uint64, c_uint64, c_int64, c_int64]
for f in (r.rsv_claim, r.rsv_release):
    f.argtypes = [c_void_p, c_uint64, c_char_p, c_size_t]
r.rsv_stats_snapshot_new.argtypes = [POINTER(c_void_p)]
r.rsv_stats_snapshot_add.argtypes = [c_void_p, c_void_p]
r.rsv_stats_snapshot_free.argtypes = [c_void_p]
r.rsv_stats_prometheus.argtypes = [c_void_p, c_char_p, c_char_p, c_size_t,
                                   POINTER(c_size_t)]

conn = m.mysql_init(None)
if not m.mysql_real_connect(
        conn, None, os.environ.get("RSV_TEST_USER", "root").encode(),
        os.environ.get("RSV_TEST_PASSWORD", "").encode(),
        os.environ["DB"].encode(), 0,
        os.environ["RSV_TEST_SOCKET"].encode(), 0):
    sys.exit("connect: %s" % m.mysql_error(conn))
ctx = c_void_p()
rc = r.rsv_open(byref(ctx), conn, None)
if rc != 0:
    sys.exit("rsv_open: %s" % r.rsv_errmsg(ctx))


def prometheus(labels):
    snap = c_void_p()
    if r.rsv_stats_snapshot_new(byref(snap)) or \
            r.rsv_stats_snapshot_add(snap, ctx):
        sys.exit("prometheus: no snapshot")
    need = c_size_t()
    r.rsv_stats_prometheus(snap, labels.encode(), None, 0, byref(need))
    buf = ctypes.create_string_buffer(need.value)
    if r.rsv_stats_prometheus(snap, labels.encode(), buf, need.value, None):
        sys.exit("prometheus: refused")
    r.rsv_stats_snapshot_free(snap)
    sys.stdout.write(buf.value.decode())
    return 0


args = sys.argv[1:]
while args:
    cut = args.index("--") if "--" in args else len(args)
    cmd, rest, args = args[0], args[1:cut], args[cut + 1:]
    if cmd in ("reserve", "try-reserve"):
        shop, tok = int(rest[0]), rest[1].encode()
        item, loc, qty, ttl = (int(x) for x in rest[2:6])
        rc = r.rsv_reserve_one(ctx, shop, tok, len(tok), item, loc, qty, ttl)
        if cmd == "try-reserve":
            rc = 0
    elif cmd in ("claim", "release"):
        shop, tok = int(rest[0]), rest[1].encode()
        fn = r.rsv_claim if cmd == "claim" else r.rsv_release
        rc = fn(ctx, shop, tok, len(tok))
    elif cmd == "prometheus":
        rc = prometheus(rest[0] if rest else "")
    else:
        sys.exit("unknown helper command " + cmd)
    if rc != 0:
        sys.exit("%s: %s: %s" % (cmd, r.rsv_code_name(rc).decode(),
                                 r.rsv_errmsg(ctx).decode()))
r.rsv_close(ctx)
m.mysql_close(conn)
