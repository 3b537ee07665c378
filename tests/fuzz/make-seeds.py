#!/usr/bin/env python3
"""Writes the seed corpora in tests/fuzz/corpus/<target>/ (committed).

Each seed is a meaningful case spelled in the byte encoding its target
decodes (see the comments at the top of each tests/fuzz/fuzz_*.c): valid
calls, every boundary of the rules in include/reserve.h, and for the
stateful target short checkout stories.  Run it again after changing a
target's encoding:  python3 tests/fuzz/make-seeds.py
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
U64MAX = 2**64 - 1


def u64(v):
    return struct.pack("<Q", v & U64MAX)


def u32(v):
    return struct.pack("<I", v & 0xFFFFFFFF)


def interesting(kind, arg=None):
    """fz_i64_interesting(): a selector byte and its payload."""
    sel = {"0": 0, "-1": 1, "1": 2, "min": 3, "max": 4, "lo": 5,
           "lo-1": 6, "hi": 7, "hi+1": 8, "i32max": 11, "i32max+1": 12}
    if kind in sel:
        return bytes([sel[kind]])
    if kind == "small":
        return bytes([9, arg])
    if kind == "neg":
        return bytes([10, arg])
    if kind == "raw":
        return bytes([13]) + u64(arg)
    raise ValueError(kind)


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- fuzz_cart ----
def cart_id(v):
    """pick_id(): small ids 1..5, 0, UINT64_MAX, INT64_MAX+1, or raw."""
    if v == 0:
        return bytes([0])
    if v == U64MAX:
        return bytes([1])
    if v == 2**63:
        return bytes([2])
    if 1 <= v <= 5:
        for b in range(4, 256):
            if b % 8 >= 4 and b % 5 + 1 == v:
                return bytes([b])
    return bytes([3]) + u64(v)


def cart_n(n):
    special = {16: 0x20, 17: 0x40, "SIZE_MAX": 0x60, "2^62": 0x80}
    if n in special:
        return bytes([special[n]])
    if n == 0:
        return bytes([0])
    for b in range(0xA0, 0x100):
        if b % 20 == n:
            return bytes([b])
    raise ValueError(n)


def cart_flags(kind, raw=0):
    return {"0": bytes([0]), "split": bytes([1]), "bit1": bytes([2]),
            "high": bytes([3]), "nulllocs": bytes([0xC0]),
            "raw": bytes([4]) + u32(raw)}[kind]


def add(item, locs, qty, flags="0", n=None, raw=0):
    b = bytes([0]) + cart_id(item)
    b += cart_n(len(locs) if n is None else n)
    for l in locs:
        b += cart_id(l)
    b += qty + cart_flags(flags, raw)
    return b


def reserve(tok_len=3, ttl=interesting("0"), shop=1):
    tl = {0: 0, 129: 1}.get(tok_len)
    if tl is None:
        tl = next(b for b in range(256) if b % 4 >= 2 and b % 40 + 1 == tok_len)
    return bytes([11, tl]) + ttl + cart_id(shop)


def getters(line_sel=0, idx=0):
    """s byte (s % 4: 0 an existing line, 1 one past the end, 2 SIZE_MAX),
    then the index byte."""
    return bytes([8, line_sel, idx])


def getters_raw(line, idx):
    """s = 0x83: line and index both raw 64-bit values."""
    return bytes([8, 0x83]) + u64(line) + u64(idx)


BULK = lambda k, base: bytes([6, k - 1]) + u64(base)
CLEAR, RENEW, NULLS, LINES = bytes([7]), bytes([13]), bytes([14]), bytes([15])
ONE = interesting("1")

cart_seeds = {
    "one-line": add(1, [1], ONE),
    "one-line-reserve": add(1, [1], ONE) + reserve(),
    "split-three-locations": add(2, [1, 2, 3], interesting("small", 7), "split") + reserve(),
    "duplicate-location": add(1, [1, 1], ONE),
    "duplicate-location-late": add(1, [1, 2, 3, 2], ONE),
    "no-location": add(1, [], ONE),
    "null-locations": add(1, [1], ONE, "nulllocs"),
    "sixteen-locations": add(1, list(range(100, 116)), ONE) + reserve(),
    "seventeen-locations": add(1, list(range(100, 117)), ONE),
    "size-max-locations": add(1, list(range(100, 117)), ONE, n="SIZE_MAX"),
    "huge-locations": add(1, list(range(100, 117)), ONE, n="2^62"),
    "qty-zero": add(1, [1], interesting("0")),
    "qty-negative": add(1, [1], interesting("-1")),
    "qty-int64-min": add(1, [1], interesting("min")),
    "qty-int64-max": add(1, [1], interesting("max")),
    "qty-max": add(1, [1], interesting("hi")) + reserve(),
    "qty-max-plus-one": add(1, [1], interesting("hi+1")),
    "qty-int32-max": add(1, [1], interesting("i32max")),
    "flags-unknown-bit": add(1, [1], ONE, "bit1"),
    "flags-high-bit": add(1, [1], ONE, "high"),
    "flags-raw": add(1, [1], ONE, "raw", raw=0xFFFFFFFF),
    "id-extremes": add(0, [0, U64MAX, 2**63], ONE, "split") + add(U64MAX, [0], ONE) + reserve(),
    "same-item-two-lines": add(3, [1, 2], ONE) + add(3, [2, 1], ONE, "split") + reserve(),
    "getters": add(1, [1, 2], ONE) + getters(0) + getters(1) + getters(2) + getters_raw(2**63, U64MAX) + getters_raw(1, 1),
    "clear-then-reserve": add(1, [1], ONE) + CLEAR + reserve(),
    "empty-reserve": reserve(),
    "token-empty": add(1, [1], ONE) + reserve(0),
    "token-too-long": add(1, [1], ONE) + reserve(129),
    "token-max": add(1, [1], ONE) + reserve(40),
    "ttl-negative": add(1, [1], ONE) + reserve(ttl=interesting("-1")),
    "ttl-30-days": add(1, [1], ONE) + reserve(ttl=interesting("hi")),
    "ttl-over-30-days": add(1, [1], ONE) + reserve(ttl=interesting("hi+1")),
    "free-and-new": add(1, [1], ONE) + RENEW + add(2, [2], ONE) + LINES,
    "null-forms": NULLS,
    "bulk-256-lines": BULK(256, 1000) + reserve(),
    "bulk-1000-lines-full": BULK(256, 0) + BULK(256, 1000) + BULK(256, 2000) + BULK(232, 3000) + add(9, [1], ONE),
    "bulk-1001-pairs": BULK(250, 0) + BULK(251, 1000) + reserve(),
    "bulk-over-line-limit": BULK(256, 0) * 4 + reserve(),
}
for name, data in cart_seeds.items():
    write("fuzz_cart", name, data)


# ---- fuzz_token ----
def token_seed(func, ttl=interesting("0"), lenmode=3, tok=b"checkout-1", flags=0):
    return bytes([func | flags]) + ttl + bytes([lenmode]) + tok


FUNCS = {"claim": 0, "release": 1, "extend": 2, "status": 3, "reserve-one": 4,
         "reserve": 5, "reserve-empty": 6, "null-ctx": 7}
for fname, fn in FUNCS.items():
    write("fuzz_token", fname + "-valid", token_seed(fn))
    write("fuzz_token", fname + "-empty", token_seed(fn, tok=b""))
    write("fuzz_token", fname + "-null", token_seed(fn, lenmode=0))
    write("fuzz_token", fname + "-too-long", token_seed(fn, tok=b"x" * 129))
    write("fuzz_token", fname + "-max-len", token_seed(fn, tok=b"y" * 128))
    write("fuzz_token", fname + "-declared-huge", token_seed(fn, lenmode=2))
write("fuzz_token", "binary-token", token_seed(0, tok=b"a\0b'\\\"\xff"))
write("fuzz_token", "extend-ttl-negative", token_seed(2, ttl=interesting("-1")))
write("fuzz_token", "extend-ttl-over-max", token_seed(2, ttl=interesting("hi+1")))
write("fuzz_token", "extend-ttl-max", token_seed(2, ttl=interesting("hi")))
write("fuzz_token", "status-null-out", token_seed(3, flags=0x80))
write("fuzz_token", "status-null-units", token_seed(3, flags=0x60))
write("fuzz_token", "reserve-one-qty-zero", token_seed(4, flags=0x80, tok=b""))
write("fuzz_token", "declared-129", token_seed(0, lenmode=1, tok=b"z"))


# ---- fuzz_options ----
F_VERSION, F_FLAGS, F_CAP, F_LOW, F_TTL, F_RETRIES, F_BASE, F_LOCK, F_RET, F_TAG, F_IDLE = (
    1 << i for i in range(11))
NULL_OPTS = 0x8000


def opts(init_version=4, which=0, fields=b""):
    return bytes([init_version]) + struct.pack("<H", which) + fields


def tag(s):
    return bytes([len(s)]) + s


opt_seeds = {
    "defaults": opts(),
    "init-version-0": opts(0),
    "init-version-next": opts(1),
    # version 1 (selector 3, then the version as a u32): the init must not
    # write past settled_retention_s; then the struct said to be version 2
    # with those bytes as pool_idle_s
    "init-version-1": bytes([3]) + u32(1) + struct.pack("<H", 0),
    "init-version-1-as-2": bytes([3]) + u32(1) + struct.pack("<H", F_VERSION) + bytes([4]),
    "pool-idle-0": opts(which=F_IDLE, fields=interesting("0")),
    "pool-idle-30-days": opts(which=F_IDLE, fields=interesting("hi")),
    "pool-idle-over-30-days": opts(which=F_IDLE, fields=interesting("hi+1")),
    "pool-idle-negative": opts(which=F_IDLE, fields=interesting("-1")),
    "init-version-max": opts(2),
    "null-options": opts(which=NULL_OPTS),
    "struct-version-0": opts(which=F_VERSION, fields=bytes([0])),
    "struct-version-next": opts(which=F_VERSION, fields=bytes([1])),
    "flags-known": opts(which=F_FLAGS, fields=bytes([7])),
    "flags-unknown": opts(which=F_FLAGS, fields=bytes([0]) + u32(0x4)),
    "flags-all": opts(which=F_FLAGS, fields=bytes([0]) + u32(0xFFFFFFFF)),
    "pool-cap-1": opts(which=F_CAP, fields=interesting("lo")),
    "pool-cap-0": opts(which=F_CAP, fields=interesting("lo-1")),
    "pool-cap-10000": opts(which=F_CAP, fields=interesting("hi")),
    "pool-cap-10001": opts(which=F_CAP, fields=interesting("hi+1")),
    "pool-cap-int64-max": opts(which=F_CAP, fields=interesting("max")),
    "low-water-eq-cap": opts(which=F_LOW, fields=bytes([0])),
    "low-water-above-cap": opts(which=F_LOW, fields=bytes([1])),
    "low-water-minus-2": opts(which=F_LOW, fields=bytes([2]) + interesting("neg", 2)),
    "low-water-0": opts(which=F_LOW, fields=bytes([2]) + interesting("0")),
    "cap-1-low-water-default": opts(which=F_CAP | F_LOW, fields=interesting("lo") + bytes([2]) + interesting("-1")),
    "ttl-0": opts(which=F_TTL, fields=interesting("0")),
    "ttl-30-days": opts(which=F_TTL, fields=interesting("hi")),
    "ttl-over-30-days": opts(which=F_TTL, fields=interesting("hi+1")),
    "retries-0": opts(which=F_RETRIES, fields=interesting("0")),
    "retries-101": opts(which=F_RETRIES, fields=interesting("hi+1")),
    "retries-negative": opts(which=F_RETRIES, fields=interesting("-1")),
    "retry-base-0": opts(which=F_BASE, fields=interesting("0")),
    "retry-base-max": opts(which=F_BASE, fields=interesting("hi")),
    "retry-base-over": opts(which=F_BASE, fields=interesting("hi+1")),
    "lock-wait-3600": opts(which=F_LOCK, fields=interesting("hi")),
    "lock-wait-3601": opts(which=F_LOCK, fields=interesting("hi+1")),
    "lock-wait-negative": opts(which=F_LOCK, fields=interesting("-1")),
    "retention-negative": opts(which=F_RET, fields=interesting("-1")),
    "retention-int64-max": opts(which=F_RET, fields=interesting("max")),
    "tag-valid": opts(which=F_TAG, fields=tag(b"shop-7.api:")),
    "tag-32": opts(which=F_TAG, fields=tag(b"a" * 32)),
    "tag-33": opts(which=F_TAG, fields=tag(b"a" * 33)),
    "tag-empty": opts(which=F_TAG, fields=tag(b"")),
    "tag-comment-close": opts(which=F_TAG, fields=tag(b"x*/ DROP")),
    "tag-space": opts(which=F_TAG, fields=tag(b"a b")),
    "tag-high-byte": opts(which=F_TAG, fields=tag(b"caf\xc3\xa9")),
    "everything-valid": opts(which=0x3FE, fields=bytes([7]) + interesting("small", 50) + bytes([2]) + interesting("small", 10) + interesting("small", 100) + interesting("small", 3) + interesting("small", 9) + interesting("small", 5) + interesting("small", 60) + tag(b"t:")),
}
for name, data in opt_seeds.items():
    write("fuzz_options", name, data)


# ---- fuzz_stateful ----
# Steps are (op, arg) byte pairs plus the op's own bytes.  op % 16:
# 0-2 reserve, 3-4 claim, 5 release, 6 joined claim/release, 7 extend,
# 8 status, 9 sweep, 10 replenish (arg bit 6: pool drain), 11 stock_set, 12 stock_adjust,
# 13 stock_get, 14 sleep, 15 audit (arg bit 6: a batch instead, of kind
# (arg >> 2) % 3: reserves, claims, releases).  op bit 7: context 1.  arg:
# token (bits 0-1), item (bits 2-3, mod 3), location (bits 4-5, mod 3).
def search(pred):
    return next(b for b in range(256) if pred(b))


def arg(tok=0, item=None, loc=None, claim=None, rollback=None):
    """The arg byte: token arg % 4, item (arg >> 2) % 3, location
    (arg >> 4) % 3; for the joined op also claim bit 6, rollback bit 7."""
    return search(lambda b: b % 4 == tok and
                  (item is None or (b >> 2) % 3 == item) and
                  (loc is None or (b >> 4) % 3 == loc) and
                  (claim is None or (b >> 6) & 1 == claim) and
                  (rollback is None or (b >> 7) & 1 == rollback))


def st_stock(n, item=0, loc=0, ctx=0):
    return bytes([11 | ctx << 7, arg(0, item, loc), n % 12])


def st_reserve(tok, lines, ttl_idx=4, ctx=0):
    """lines: (item, nloc, first_loc, quantity, split)."""
    shape = search(lambda b: (b >> 4) % 8 == ttl_idx and b % 3 + 1 == len(lines))
    b = bytes([0 | ctx << 7, arg(tok), shape])
    for item, nloc, first, qty, split in lines:
        lb = search(lambda x: x % 3 == item and (x >> 2) % 3 + 1 == nloc and
                    (x >> 4) % 3 == first and bool(x & 0x80) == split)
        b += bytes([lb, qty - 1])
    return b


def st(op, tok=0, ctx=0, extra=b"", a=None):
    return bytes([op | ctx << 7, arg(tok) if a is None else a]) + extra


CLAIM = lambda tok, ctx=0: st(3, tok, ctx)
RELEASE = lambda tok, ctx=0: st(5, tok, ctx)
JOINED = lambda tok, claim, rollback, ctx=0: st(6, ctx=ctx, a=arg(tok, claim=claim, rollback=rollback))
EXTEND = lambda tok, ttl_idx=6: st(7, tok, extra=bytes([ttl_idx]))
STATUS = lambda tok, ctx=0: st(8, tok, ctx)
SWEEP = lambda m=0: st(9, extra=bytes([m]))
REPLENISH = lambda item=0, loc=0, ctx=0: st(10, ctx=ctx, a=arg(0, item, loc, claim=0))
DRAIN = lambda item=0, loc=0, ctx=0: st(10, ctx=ctx, a=arg(0, item, loc, claim=1))  # arg bit 6
ADJUST = lambda v, item=0, loc=0: st(12, a=arg(0, item, loc), extra=bytes([v]))
GET = lambda item=0, loc=0: st(13, a=arg(0, item, loc))
SLEEP = lambda ms=8: st(14, a=ms - 1)
AUDIT = st(15)


def BATCH(kind, entries, ttl_idx=4, ctx=0):
    """kind 0 reserves, 1 claims, 2 releases; entries: (tok, item, loc,
    qty) with qty 0..3 (0: the bad quantity)."""
    a = search(lambda b: b & 0x40 and (b >> 2) % 3 == kind)
    b = bytes([15 | ctx << 7, a, len(entries) - 1, ttl_idx])
    for tok, item, loc, qty in entries:
        b += bytes([tok | item << 2 | loc << 4 | (3 if qty == 0 else qty - 1) << 6])
    return b
ONE_LINE = [(0, 1, 0, 1, False)]  # item 1, location 0, quantity 1

stateful_seeds = {
    "reserve-claim-claim": st_stock(5) + st_reserve(0, ONE_LINE) + CLAIM(0) + CLAIM(0) + STATUS(0),
    "reserve-release-claim": st_stock(5) + st_reserve(1, ONE_LINE) + RELEASE(1) + CLAIM(1) + RELEASE(1),
    "unknown-token": CLAIM(2) + RELEASE(2) + STATUS(2) + EXTEND(2),
    "no-ledger-row": st_reserve(0, ONE_LINE),
    "out-of-stock": st_stock(1) + st_reserve(0, [(0, 1, 0, 2, False)]),
    "sold-out-then-freed": st_stock(2) + st_reserve(0, [(0, 1, 0, 2, False)]) + st_reserve(1, ONE_LINE) + RELEASE(0) + st_reserve(1, ONE_LINE),
    "expire-then-claim": st_stock(3) + st_reserve(0, ONE_LINE, ttl_idx=0) + SLEEP(8) + STATUS(0) + CLAIM(0),
    "expire-taken-by-other": st_stock(1) + st_reserve(0, ONE_LINE, ttl_idx=0) + SLEEP(8) + st_reserve(1, ONE_LINE) + CLAIM(0) + STATUS(0),
    "expire-sweep": st_stock(4) + st_reserve(0, ONE_LINE, ttl_idx=1) + st_reserve(1, ONE_LINE, ttl_idx=1) + SLEEP(8) + SWEEP(0) + SWEEP(1) + STATUS(0),
    "extend-live": st_stock(3) + st_reserve(0, ONE_LINE, ttl_idx=6) + EXTEND(0, 6) + STATUS(0),
    "extend-expired": st_stock(3) + st_reserve(0, ONE_LINE, ttl_idx=0) + SLEEP(8) + SWEEP(0) + EXTEND(0, 6) + CLAIM(0),
    "re-reserve-bigger": st_stock(6) + st_reserve(0, ONE_LINE) + st_reserve(0, [(0, 1, 0, 3, False)]) + STATUS(0),
    "re-reserve-after-release": st_stock(2) + st_reserve(0, ONE_LINE) + RELEASE(0) + st_reserve(0, ONE_LINE) + CLAIM(0),
    "reserve-claimed": st_stock(2) + st_reserve(0, ONE_LINE) + CLAIM(0) + st_reserve(0, ONE_LINE),
    "split-across-locations": st_stock(1, 0, 0) + st_stock(2, 0, 1) + st_stock(3, 0, 2) + st_reserve(0, [(0, 3, 0, 5, True)]) + CLAIM(0),
    "unsplit-second-location": st_stock(1, 0, 0) + st_stock(5, 0, 1) + st_reserve(0, [(0, 2, 0, 3, False)]),
    "three-lines": st_stock(5, 0, 0) + st_stock(5, 1, 1) + st_stock(5, 2, 2) + st_reserve(3, [(0, 1, 0, 1, False), (1, 1, 1, 2, False), (2, 3, 2, 1, True)]) + CLAIM(3),
    "joined-claim-rollback": st_stock(2) + st_reserve(0, ONE_LINE) + JOINED(0, 1, 1) + STATUS(0) + CLAIM(0),
    "joined-claim-commit": st_stock(2) + st_reserve(0, ONE_LINE) + JOINED(0, 1, 0) + CLAIM(0),
    "joined-release-rollback": st_stock(2) + st_reserve(0, ONE_LINE) + JOINED(0, 0, 1) + CLAIM(0),
    "stock-below-held": st_stock(5) + st_reserve(0, [(0, 1, 0, 3, False)]) + st_stock(1) + ADJUST(0) + GET(),
    "stock-set-extremes": st_stock(5) + bytes([11, 0, 250]) + bytes([11, 0, 251]) + bytes([11, 0, 252]) + bytes([11, 0, 253]),
    "adjust-extremes": st_stock(5) + ADJUST(250) + ADJUST(251) + ADJUST(252) + ADJUST(253) + ADJUST(0) + GET(),
    "adjust-no-row": ADJUST(10),
    "replenish-and-get": st_stock(9) + REPLENISH() + GET() + REPLENISH(ctx=1) + GET() + st_stock(2) + GET(),
    "replenish-no-row": REPLENISH(1, 2),
    "drain-pool": st_stock(9) + REPLENISH() + st_reserve(0, ONE_LINE) + DRAIN() + GET() + st_reserve(1, ONE_LINE) + DRAIN() + DRAIN(1, 2) + CLAIM(0) + AUDIT,
    "two-contexts": st_stock(4, ctx=1) + st_reserve(0, ONE_LINE, ctx=1) + CLAIM(0) + st_reserve(1, ONE_LINE) + RELEASE(1, ctx=1) + AUDIT,
    "token-binary-and-long": st_stock(4) + st_reserve(1, ONE_LINE) + st_reserve(3, ONE_LINE) + CLAIM(1) + RELEASE(3) + STATUS(3),
    "id-extremes": st_stock(7, 2, 2) + st_reserve(0, [(2, 1, 2, 2, False)]) + CLAIM(0) + GET(2, 2),
    "batch-reserve-claim-release": st_stock(5) + BATCH(0, [(0, 0, 0, 1), (1, 0, 0, 2), (2, 0, 0, 3), (0, 0, 0, 1), (3, 0, 0, 0)]) + BATCH(1, [(0, 0, 0, 1), (1, 0, 0, 1), (0, 0, 0, 1)]) + BATCH(2, [(1, 0, 0, 1), (2, 0, 0, 1), (3, 0, 0, 1)]) + AUDIT,
    "batch-expired": st_stock(3) + BATCH(0, [(0, 0, 0, 1), (1, 0, 0, 1)], ttl_idx=0) + SLEEP(8) + SWEEP(0) + BATCH(1, [(0, 0, 0, 1), (1, 0, 0, 1)]) + STATUS(0),
    "sleep-audit": st_stock(3) + st_reserve(0, ONE_LINE, ttl_idx=2) + SLEEP(6) + AUDIT + REPLENISH() + AUDIT,
}
for name, data in stateful_seeds.items():
    write("fuzz_stateful", name, data)

print("seeds: " + ", ".join("%s %d" % (t, len(os.listdir(os.path.join(HERE, "corpus", t))))
                            for t in ("fuzz_cart", "fuzz_token", "fuzz_options", "fuzz_stateful")))
