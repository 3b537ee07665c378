# libreserve - build, test, install.
#
#   make              build build/libreserve.so and build/libreserve.a
#   make check        install missing dependencies, run every test suite
#                     against a throwaway MariaDB
#   make check TESTS=lifecycle
#                     the same, only the suites named (TESTS=list names
#                     them all; docs/testing.md)
#   make lint         the checks that need no server: exports, layers
#                     (normal and fault build), each header alone, the
#                     decision table, the docs' names, the man pages,
#                     docs/errors.md
#   make demo         run the example checkout against a throwaway MariaDB
#   make install      PREFIX=/usr/local LIBDIR=$(PREFIX)/lib DESTDIR=
#
# User CFLAGS/LDFLAGS/CPPFLAGS are added to ours, never replace them.

VERSION := $(shell sed -n 's/^\#define RSV_VERSION "\(.*\)"/\1/p' include/reserve.h)
MAJOR := $(firstword $(subst ., ,$(VERSION)))

PREFIX ?= /usr/local
EXEC_PREFIX ?= $(PREFIX)
LIBDIR ?= $(EXEC_PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
BINDIR ?= $(EXEC_PREFIX)/bin
DESTDIR ?=
INSTALL ?= install
LDCONFIG ?= ldconfig

CC ?= cc
CXX ?= c++
PKG_CONFIG ?= pkg-config
B := build

MARIADB_CFLAGS = $(shell $(PKG_CONFIG) --cflags libmariadb 2>/dev/null)
MARIADB_LIBS = $(shell $(PKG_CONFIG) --libs libmariadb 2>/dev/null)
CHECK_CFLAGS = $(shell $(PKG_CONFIG) --cflags check 2>/dev/null)
CHECK_LIBS = $(shell $(PKG_CONFIG) --libs check 2>/dev/null)

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-missing-field-initializers
REAL_CFLAGS = -std=c11 -D_POSIX_C_SOURCE=200809L -pthread -O2 -g $(WARN) -Iinclude -Ilib -DRSV_DATADIR='"$(DATADIR)"' $(MARIADB_CFLAGS) $(SAN_CFLAGS) $(CPPFLAGS) $(CFLAGS)
REAL_LDFLAGS = -pthread $(SAN_LDFLAGS) $(LDFLAGS)

# The public headers: reserve.h and what it includes by audience.
PUB_HDR := include/reserve.h $(wildcard include/reserve/*.h)
LIB_SRC := $(wildcard lib/*.c)
LIB_HDR := $(wildcard lib/*.h)
LIB_OBJ := $(LIB_SRC:lib/%.c=$(B)/lib/%.o)
SONAME := libreserve.so.$(MAJOR)
SHLIB := $(B)/libreserve.so.$(VERSION)
STLIB := $(B)/libreserve.a

.DEFAULT_GOAL := all
.PHONY: all lib check lint test demo install uninstall clean deps deps-build FORCE
FORCE:

all: lib
lib: $(B)/libreserve.so $(STLIB) $(B)/reserve.pc

deps-build:
	@tools/deps.sh build
deps:
	@tools/deps.sh test

$(B)/lib/%.o: lib/%.c $(LIB_HDR) $(PUB_HDR) | $(B)/lib
	$(CC) $(REAL_CFLAGS) -fPIC -fvisibility=hidden -c $< -o $@

$(B)/lib $(B)/tests $(B)/examples:
	mkdir -p $@

$(SHLIB): $(LIB_OBJ) lib/libreserve.map
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=lib/libreserve.map -Wl,--no-undefined -o $@ $(LIB_OBJ) $(REAL_LDFLAGS) $(MARIADB_LIBS)

$(B)/libreserve.so: $(SHLIB)
	ln -sf libreserve.so.$(VERSION) $(B)/$(SONAME)
	ln -sf $(SONAME) $@

# One relocatable object whose only global symbols are the shared
# library's exports: an application that links statically and defines a
# name of ours (buf_free, op_begin ...) must not clash with it.
$(STLIB): $(LIB_OBJ) $(SHLIB)
	rm -f $@
	$(CC) -r -nostdlib -o $(B)/libreserve-all.o $(LIB_OBJ)
	nm -D --defined-only $(SHLIB) | awk 'NF == 3 && $$3 !~ /^LIBRESERVE/ { sub(/@.*/, "", $$3); print $$3 }' >$(B)/exports.list
	objcopy --keep-global-symbols=$(B)/exports.list $(B)/libreserve-all.o
	ar rcs $@ $(B)/libreserve-all.o

# The test build: the same library, but rsv_open accepts the test-only
# option flags (lib/test_flags.h), which the installed library refuses.
# Only the files that read those flags are compiled again; the tests, the
# benchmark and the load programs link it (TEST_LIB_LINK).
TEST_B := $(B)/test
TEST_BUILD_SRC := $(shell grep -l TEST_OPT_FLAGS lib/*.c)
TEST_BUILD_OBJ := $(TEST_BUILD_SRC:lib/%.c=$(TEST_B)/lib/%.o)
TEST_SHLIB := $(TEST_B)/libreserve.so
TEST_LIB_LINK = -L$(TEST_B) -Wl,-rpath,$(CURDIR)/$(TEST_B) -lreserve

$(TEST_B)/lib:
	mkdir -p $@

$(TEST_B)/lib/%.o: lib/%.c $(LIB_HDR) $(PUB_HDR) | $(TEST_B)/lib
	$(CC) $(REAL_CFLAGS) -DRSV_TEST_BUILD -fPIC -fvisibility=hidden -c $< -o $@

$(TEST_SHLIB): $(filter-out $(TEST_BUILD_SRC:lib/%.c=$(B)/lib/%.o),$(LIB_OBJ)) $(TEST_BUILD_OBJ) lib/libreserve.map
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=lib/libreserve.map -Wl,--no-undefined -o $(TEST_B)/libreserve.so.$(VERSION) $(filter %.o,$^) $(REAL_LDFLAGS) $(MARIADB_LIBS)
	ln -sf libreserve.so.$(VERSION) $(TEST_B)/$(SONAME)
	ln -sf $(SONAME) $@

# Always rewritten: it records PREFIX/LIBDIR, which may differ at install.
# libdir and includedir are written relative to ${prefix} when they lie
# under PREFIX, as pkg-config users expect (--define-variable=prefix=...).
pc_rel = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))
$(B)/reserve.pc: reserve.pc.in include/reserve.h Makefile FORCE | $(B)/lib
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(call pc_rel,$(LIBDIR))|g' \
	    -e 's|@INCLUDEDIR@|$(call pc_rel,$(INCLUDEDIR))|g' -e 's|@VERSION@|$(VERSION)|g' $< >$@

# ---- tests ----
TEST_SRC := $(wildcard tests/check_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(B)/tests/%)
TEST_LINK = $(TEST_LIB_LINK) $(MARIADB_LIBS) $(CHECK_LIBS) -lpthread -lm

# The client plumbing of every test program that talks to a server
# (tests/loadlib.h); the load programs in mk/*.mk compile it in, and the
# suites' fixture (testutil) is built on it.
LOADLIB := tests/loadlib.c tests/loadlib.h tools/rsv-admin/sqlscript.h
TESTUTIL_OBJ := $(B)/tests/testutil.o $(B)/tests/loadlib.o

$(B)/tests/testutil.o: tests/testutil.c tests/testutil.h tests/loadlib.h tests/nonblock_shim.h $(PUB_HDR) | $(B)/tests
	$(CC) $(REAL_CFLAGS) $(CHECK_CFLAGS) -c $< -o $@

$(B)/tests/loadlib.o: $(LOADLIB) $(PUB_HDR) | $(B)/tests
	$(CC) $(REAL_CFLAGS) -c $< -o $@

$(B)/tests/check_%: tests/check_%.c $(TESTUTIL_OBJ) $(TEST_SHLIB) | $(B)/tests
	$(CC) $(REAL_CFLAGS) $(CHECK_CFLAGS) $< $(TESTUTIL_OBJ) -o $@ $(REAL_LDFLAGS) $(TEST_LINK)

# The decision table of docs/internals.md, executed: the suite links
# lib/reserve_next.c alone (pure: no server, no other file), and reads the
# table from the page.
$(B)/tests/check_decisions: tests/check_decisions.c lib/reserve_next.c lib/reserve_job.h $(LIB_HDR) $(PUB_HDR) docs/internals.md | $(B)/tests
	$(CC) $(REAL_CFLAGS) $(CHECK_CFLAGS) -DRSV_SOURCE_DIR='"$(CURDIR)"' $< lib/reserve_next.c -o $@ $(REAL_LDFLAGS) $(CHECK_LIBS) -lm

# Every entry point answers bad input alike: the suite also links
# lib/argcheck.c alone (pure) to ask the argument check what it says.
$(B)/tests/check_entrypoints: tests/check_entrypoints.c lib/argcheck.c $(LIB_HDR) $(TESTUTIL_OBJ) $(TEST_SHLIB) | $(B)/tests
	$(CC) $(REAL_CFLAGS) $(CHECK_CFLAGS) $< lib/argcheck.c $(TESTUTIL_OBJ) -o $@ $(REAL_LDFLAGS) $(TEST_LINK)

# The same suites through the non-blocking interface: tests/nonblock_shim.h
# turns each of its six calls into _start, a wait on rsv_async_fd and
# rsv_cont.
NB_SUITES := lifecycle badinput concurrency
NB_TEST_BIN := $(NB_SUITES:%=$(B)/tests/check_%_nb)
$(B)/tests/check_%_nb: tests/check_%.c tests/nonblock_shim.h $(TESTUTIL_OBJ) $(TEST_SHLIB) | $(B)/tests
	$(CC) $(REAL_CFLAGS) $(CHECK_CFLAGS) -DRSV_TEST_NONBLOCKING $< $(TESTUTIL_OBJ) -o $@ $(REAL_LDFLAGS) $(TEST_LINK)

# A C++ caller: the header must compile as C++ and link.
$(B)/tests/cxx_caller: tests/cxx_caller.cpp $(PUB_HDR) $(B)/libreserve.so | $(B)/tests
	$(CXX) -std=c++11 -Wall -Wextra -Werror -Iinclude $(MARIADB_CFLAGS) $< -o $@ -L$(B) -Wl,-rpath,$(CURDIR)/$(B) -lreserve $(MARIADB_LIBS)

TEST_PROGS := $(TEST_BIN) $(NB_TEST_BIN) $(B)/tests/cxx_caller
CHECK_EXTRA ?=
# make check TESTS="lifecycle faults": only these suites (tests/run.sh
# says which names each answers to; TESTS=list prints them).
TESTS ?=

# Target names: check and check-NAME run tests and pass or fail (the older
# NAME-test names remain as aliases); bench*, stress*, soak*, fuzz* run
# workloads; NAME-deps install packages, NAME-build build programs.
check: deps
ifeq ($(TESTS),list)
	@RSV_TESTS=list tests/run.sh $(TEST_PROGS) -- $(CHECK_EXTRA)
else
	@$(MAKE) --no-print-directory lib $(TEST_PROGS) $(CHECK_EXTRA_BUILD)
	RSV_TESTS='$(TESTS)' tools/mariadb.sh run tests/run.sh $(TEST_PROGS) -- $(CHECK_EXTRA)
endif
test: check

# The suites that need no server, run without one.  (make check runs
# them too.)
LINT_PROGS := $(B)/tests/check_decisions
LINT_EXTRA := tests/docs-names.py tests/manpages-test.py
lint: deps
	@$(MAKE) --no-print-directory lib $(B)/fault/libreserve-fault.a $(LINT_PROGS)
	tests/run.sh $(LINT_PROGS) -- $(LINT_EXTRA)

# ---- example ----
$(B)/examples/checkout_demo: examples/checkout_demo.c $(PUB_HDR) $(B)/libreserve.so | $(B)/examples
	$(CC) $(REAL_CFLAGS) $< -o $@ $(REAL_LDFLAGS) -L$(B) -Wl,-rpath,$(CURDIR)/$(B) -lreserve $(MARIADB_LIBS) -lpthread

$(B)/examples/minimal: examples/minimal.c $(PUB_HDR) $(B)/libreserve.so | $(B)/examples
	$(CC) $(REAL_CFLAGS) $< -o $@ $(REAL_LDFLAGS) -L$(B) -Wl,-rpath,$(CURDIR)/$(B) -lreserve $(MARIADB_LIBS)

demo: deps
	@$(MAKE) --no-print-directory lib $(B)/examples/checkout_demo $(B)/examples/minimal $(B)/examples/http_checkout
	tools/mariadb.sh run examples/run-demo.sh $(B)/examples/checkout_demo $(DEMO_ARGS)

# ---- install ----
install: lib
	$(INSTALL) -d $(DESTDIR)$(INCLUDEDIR)/reserve $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(DATADIR)/libreserve $(DESTDIR)$(MANDIR)/man3
	$(INSTALL) -m 644 include/reserve.h $(DESTDIR)$(INCLUDEDIR)/reserve.h
	$(INSTALL) -m 644 include/reserve/*.h $(DESTDIR)$(INCLUDEDIR)/reserve/
	$(INSTALL) -m 755 $(SHLIB) $(DESTDIR)$(LIBDIR)/libreserve.so.$(VERSION)
	ln -sf libreserve.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libreserve.so
	$(INSTALL) -m 644 $(STLIB) $(DESTDIR)$(LIBDIR)/libreserve.a
	$(INSTALL) -m 644 $(B)/reserve.pc $(DESTDIR)$(LIBDIR)/pkgconfig/reserve.pc
	$(INSTALL) -m 644 sql/*.sql $(DESTDIR)$(DATADIR)/libreserve/
	@for f in man/*.3; do \
	  if [ -L "$$f" ]; then ln -sf "$$(readlink "$$f")" $(DESTDIR)$(MANDIR)/man3/"$${f#man/}"; \
	  else $(INSTALL) -m 644 "$$f" $(DESTDIR)$(MANDIR)/man3/; fi; \
	done
	$(INSTALL) -d $(DESTDIR)$(CMAKEDIR)
	$(INSTALL) -m 644 $(CMAKE_PKG) $(DESTDIR)$(CMAKEDIR)/
ifeq ($(DESTDIR),)
	@# Installed onto this machine: programs find the new libreserve.so.0
	@# at once only when LIBDIR is a directory the dynamic loader searches
	@# and its cache is rebuilt (as root).  For any other LIBDIR the cache
	@# cannot help, so it is left alone and the ways that do are printed.
	@# Packaging (DESTDIR) leaves all that to the package manager.
	@real=$$(realpath -m "$(LIBDIR)"); searched=no; \
	for d in $$($(LDCONFIG) -v -N 2>/dev/null | sed -n 's/^\([^[:space:]][^:]*\):.*/\1/p'); do \
	  [ "$$(realpath -m "$$d")" = "$$real" ] && searched=yes; \
	done; \
	if [ $$searched = yes ] && [ "$$(id -u)" = 0 ]; then echo "$(LDCONFIG)"; $(LDCONFIG); \
	elif [ $$searched = yes ]; then \
	  echo "install: not root: run $(LDCONFIG) as root, or programs will not find $(SONAME) in $(LIBDIR)"; \
	else \
	  echo "install: $(LIBDIR) is not a directory the dynamic loader searches, so programs will not find $(SONAME) by themselves. Either:"; \
	  echo "  link with an rpath:  cc app.c \$$(pkg-config --cflags --libs reserve) -Wl,-rpath,$(LIBDIR)"; \
	  echo "  or set:              export LD_LIBRARY_PATH=$(LIBDIR)"; \
	  echo "  or, as root:         echo $(LIBDIR) >/etc/ld.so.conf.d/libreserve.conf && ldconfig"; \
	  echo "  the bindings find it through pkg-config:  export PKG_CONFIG_PATH=$(LIBDIR)/pkgconfig (or LIBRESERVE_PATH=$(LIBDIR))"; \
	fi
endif

uninstall:
	rm -f $(DESTDIR)$(INCLUDEDIR)/reserve.h $(DESTDIR)$(LIBDIR)/libreserve.* $(DESTDIR)$(LIBDIR)/pkgconfig/reserve.pc
	rm -rf $(DESTDIR)$(INCLUDEDIR)/reserve $(DESTDIR)$(CMAKEDIR)
	rm -rf $(DESTDIR)$(DATADIR)/libreserve
	cd man 2>/dev/null && for f in *.3; do rm -f $(DESTDIR)$(MANDIR)/man3/$$f; done || true

clean:
	rm -rf $(B)

# Further targets (bench, stress, fuzz, python, admin tool) live in their
# own fragments, each owned by the part of the tree it builds.
-include mk/*.mk
