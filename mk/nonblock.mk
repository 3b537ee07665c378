# mk/nonblock.mk - what the non-blocking interface adds to the build: its
# Check suite (tests/check_nonblock.c), which drives the libuv and libevent
# adapters (include/reserve/libuv.h, include/reserve/libevent.h); it needs
# libuv1-dev and libevent-dev, installed through tools/deps.sh when
# missing (the HTTP checkout example on libuv, built in mk/http.mk, uses
# nonblock-deps too).  The suites run a second
# time through the interface (check_*_nb) are built by the Makefile.

NB_PACKAGES := libuv1-dev libevent-dev
# Read when a recipe runs, after nonblock-deps installed the packages.
UV_CFLAGS = $(shell $(PKG_CONFIG) --cflags libuv 2>/dev/null)
UV_LIBS = $(or $(shell $(PKG_CONFIG) --libs libuv 2>/dev/null),-luv)
EVENT_CFLAGS = $(shell $(PKG_CONFIG) --cflags libevent 2>/dev/null)
EVENT_LIBS = $(or $(shell $(PKG_CONFIG) --libs libevent 2>/dev/null),-levent)

.PHONY: nonblock-deps

nonblock-deps:
	@tools/deps.sh packages $(NB_PACKAGES)

$(B)/tests/check_nonblock: tests/check_nonblock.c include/reserve/libuv.h include/reserve/libevent.h $(TESTUTIL_OBJ) $(B)/libreserve.so | $(B)/tests nonblock-deps
	$(CC) $(REAL_CFLAGS) $(CHECK_CFLAGS) $(UV_CFLAGS) $(EVENT_CFLAGS) $< $(TESTUTIL_OBJ) -o $@ $(REAL_LDFLAGS) $(TEST_LINK) $(UV_LIBS) $(EVENT_LIBS)
