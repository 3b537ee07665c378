# Sanitizers: the whole suite under AddressSanitizer +
# UndefinedBehaviorSanitizer + LeakSanitizer, and the Check suites under
# valgrind memcheck.  See docs/testing.md, "Sanitizers and fuzzing".
#
#   make check-asan       build everything in $(ASAN_B) with
#                         -fsanitize=address,undefined and run the suite
#                         (Check suites, C++ caller, exports, rsv-admin test,
#                         Python binding tests) against a throwaway MariaDB
#   make check-valgrind   build in $(VG_B) and run the Check suites under
#                         valgrind memcheck (CK_FORK=no)
#
# Both fail on the first sanitizer report, memcheck error or leak.

# Build directories, relative to the source tree.
ASAN_B ?= build-asan
# gcc: its shared libasan lets the instrumented libreserve.so link with
# -Wl,--no-undefined and be loaded by Python; clang links its ASan runtime
# statically into executables only.
ASAN_CC ?= gcc
ASAN_CXX ?= g++
VG_B ?= build-valgrind
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

# detect_leaks=1: LeakSanitizer is on for every C program of the suite.
# ASan stops at its first report; UBSan does too (-fno-sanitize-recover,
# halt_on_error).  Either way the process exits non-zero, which
# tests/run.sh (or Check, for the forked child of one test) counts as a
# failure.
ASAN_ENV := ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1 \
            UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# Python loads the instrumented libreserve.so with ctypes, so the ASan
# runtime has to be in the process first: a python3 shim on PATH preloads
# it.  The interpreter itself keeps memory at exit that LeakSanitizer would
# report (none of it ours), so leak detection is off in python processes
# only; ASan/UBSan checks of the library code they call stay on.
ASAN_RT = $(shell $(ASAN_CC) -print-file-name=libasan.so)

# The install test checks packaging (make install, pkg-config, the
# installed library); it rebuilds the default build dir and is not about
# memory, so it runs in make check only.
ASAN_EXTRA := tests/admin-test.sh bindings/python/run-tests.sh

.PHONY: check-asan check-valgrind asan-build valgrind-build

asan-build:
	@$(MAKE) --no-print-directory B=$(ASAN_B) SAN_CFLAGS="$(SAN_FLAGS)" \
	    SAN_LDFLAGS="$(SAN_FLAGS)" CC="$(ASAN_CC)" CXX="$(ASAN_CXX) $(SAN_FLAGS)" \
	    lib $(TEST_PROGS:$(B)/%=$(ASAN_B)/%) $(ASAN_B)/rsv-admin
	@mkdir -p $(ASAN_B)/pyshim
	@printf '%s\n' '#!/bin/sh' \
	    '# written by mk/sanitize.mk: python3 with the ASan runtime preloaded' \
	    'PATH=$${PATH#$(CURDIR)/$(ASAN_B)/pyshim:}' \
	    'LD_PRELOAD=$(ASAN_RT)$${LD_PRELOAD:+:$$LD_PRELOAD} ASAN_OPTIONS=$${ASAN_OPTIONS:+$$ASAN_OPTIONS:}detect_leaks=0 exec python3 "$$@"' \
	    >$(ASAN_B)/pyshim/python3
	@chmod +x $(ASAN_B)/pyshim/python3

check-asan: deps
	@$(MAKE) --no-print-directory asan-build
	$(ASAN_ENV) RSV_BUILD=$(ASAN_B) LIBRESERVE_PATH=$(CURDIR)/$(ASAN_B)/test/libreserve.so \
	    PATH=$(CURDIR)/$(ASAN_B)/pyshim:$$PATH \
	    tools/mariadb.sh run tests/run.sh $(TEST_PROGS:$(B)/%=$(ASAN_B)/%) -- $(ASAN_EXTRA)

# ---- valgrind ----
# CK_FORK=no: Check runs every test in the valgrind-traced process itself
# (by default it forks one child per test, which valgrind would follow only
# with --trace-children and report per child).
VALGRIND ?= valgrind
VALGRIND_FLAGS := --tool=memcheck --error-exitcode=99 --leak-check=full \
    --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect \
    --track-origins=yes --num-callers=30
VG_TESTS := $(TEST_SRC:tests/%.c=$(VG_B)/tests/%)

valgrind-build:
	@$(MAKE) --no-print-directory B=$(VG_B) lib $(VG_TESTS)

check-valgrind: deps
	@tools/deps.sh valgrind
	@command -v $(VALGRIND) >/dev/null || { echo "valgrind not found: apt-get install valgrind" >&2; exit 2; }
	@$(MAKE) --no-print-directory valgrind-build
	CK_FORK=no RSV_BUILD=$(VG_B) tools/mariadb.sh run tests/run.sh -- \
	    $(foreach t,$(VG_TESTS),"$(VALGRIND) $(VALGRIND_FLAGS) $(t)")
