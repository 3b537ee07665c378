# The failing situations of tests/errors-test.sh through the Python
# binding: one line per situation, "SITUATION ERROR CODE FAILED_LINE ERRNO".
import os
import sys
import time

import libreserve as rsv

SHOP = int(os.environ["RSV_SHOP"])


def show(situation, call):
    try:
        call()
        print(situation, "no-error", 0, "-", "-")
    except rsv.ReserveError as e:
        line = "-" if e.failed_line is None else e.failed_line
        errno = "-" if e.errno is None else e.errno
        print(situation, type(e).__name__, int(e.code), line, errno)


def expired(ctx):
    ctx.reserve_one(SHOP, "py-expired", 1, 1, 1, ttl_ms=1)
    time.sleep(0.05)  # past its deadline; the sweep gives the units back
    ctx.sweep(SHOP)
    ctx.claim(SHOP, "py-expired")


def main():
    if sys.argv[1:] == ["readonly"]:
        show("not_primary", lambda: rsv.connect(os.environ["RSV_DSN"]).close())
        return
    if sys.argv[1:] == ["indoubt"]:
        budget = int(os.environ["RSV_BUDGET_MS"])
        with rsv.connect(os.environ["RSV_DSN_INDOUBT"],
                         call_timeout_ms=budget) as ctx:
            show("in_doubt",
                 lambda: ctx.reserve_one(SHOP, "py-indoubt", 1, 1, 1))
        return
    show("wrong_password", lambda: rsv.connect(os.environ["RSV_DSN_BADPW"]))
    show("no_server", lambda: rsv.connect(os.environ["RSV_DSN_GONE"]))
    with rsv.connect(os.environ["RSV_DSN"]) as ctx:
        ctx.stock_set(SHOP, 1, 1, 3)
        show("out_of_stock", lambda: ctx.reserve_one(SHOP, "py-oos", 1, 1, 5))
        ctx.reserve_one(SHOP, "py-claimed", 1, 1, 1)
        ctx.claim(SHOP, "py-claimed")
        show("already_claimed", lambda: ctx.claim(SHOP, "py-claimed"))
        show("expired", lambda: expired(ctx))
        show("bad_token", lambda: ctx.reserve_one(SHOP, "", 1, 1, 1))


main()
