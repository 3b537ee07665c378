# libFuzzer targets, in tests/fuzz/.  See docs/testing.md,
# "Sanitizers and fuzzing".
#
#   make fuzz            every pure target for FUZZ_RUNS inputs (default
#                        1,000,000 each), starting from its seed corpus
#   make fuzz-quick      every pure target for FUZZ_QUICK_SECONDS (default 5)
#                        seconds: a smoke run for CI
#   make fuzz-stateful   the stateful target against a throwaway MariaDB,
#                        FUZZ_STATEFUL_RUNS inputs (default 2000)
#   make fuzz-build      only build them
#
# Targets link the library's objects directly (built again with clang,
# -fsanitize=fuzzer-no-link,address,undefined, in $(FUZZ_B)/lib), so the
# library's own code is coverage-guided and instrumented.  A crash (a
# sanitizer report or a failed check, which aborts) is written to
# $(FUZZ_B)/crashes/ and fails the target.  New inputs found go to
# $(FUZZ_B)/corpus/<target>, never into the committed seeds in
# tests/fuzz/corpus/<target>; copy interesting ones there by hand.
# FUZZ_ARGS are passed to every libFuzzer run (e.g. -jobs=2).

FUZZ_B ?= build-fuzz
FUZZ_CC ?= clang
FUZZ_RUNS ?= 1000000
FUZZ_QUICK_SECONDS ?= 5
FUZZ_STATEFUL_RUNS ?= 2000
FUZZ_ARGS ?=
FUZZ_TARGETS := fuzz_cart fuzz_token fuzz_options
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS = -std=c11 -D_POSIX_C_SOURCE=200809L -DRSV_TEST_BUILD -O1 -g $(WARN) -Iinclude -Ilib $(MARIADB_CFLAGS) $(FUZZ_SAN) $(CPPFLAGS) $(CFLAGS)
FUZZ_LIB_OBJ := $(LIB_SRC:lib/%.c=$(FUZZ_B)/lib/%.o)

.PHONY: fuzz fuzz-quick fuzz-stateful fuzz-build fuzz-check-cc
.SECONDARY: $(FUZZ_LIB_OBJ)

$(FUZZ_B)/lib $(FUZZ_B)/crashes:
	mkdir -p $@

$(FUZZ_B)/lib/%.o: lib/%.c $(LIB_HDR) $(PUB_HDR) | $(FUZZ_B)/lib
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_B)/%: tests/fuzz/%.c tests/fuzz/fuzz_util.h $(FUZZ_LIB_OBJ) | $(FUZZ_B)/lib
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< $(FUZZ_LIB_OBJ) -o $@ $(LDFLAGS) $(MARIADB_LIBS) -lpthread

# The stateful target talks to a server: the test programs' client
# plumbing (tests/loadlib.c) is built in.
$(FUZZ_B)/fuzz_stateful: tests/fuzz/fuzz_stateful.c tests/fuzz/fuzz_util.h $(LOADLIB) $(FUZZ_LIB_OBJ) | $(FUZZ_B)/lib
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< tests/loadlib.c $(FUZZ_LIB_OBJ) -o $@ $(LDFLAGS) $(MARIADB_LIBS) -lpthread

fuzz-build: fuzz-check-cc $(FUZZ_TARGETS:%=$(FUZZ_B)/%) $(FUZZ_B)/fuzz_stateful

fuzz-check-cc:
	@tools/deps.sh fuzz
	@command -v $(FUZZ_CC) >/dev/null || { echo "$(FUZZ_CC) not found: the fuzz targets need clang with libFuzzer (apt-get install clang)" >&2; exit 2; }

fuzz: fuzz-build
	@set -e; for t in $(FUZZ_TARGETS); do \
	    tests/fuzz/run.sh $(FUZZ_B) $$t -runs=$(FUZZ_RUNS) $(FUZZ_ARGS); done

fuzz-quick: fuzz-build
	@set -e; for t in $(FUZZ_TARGETS); do \
	    tests/fuzz/run.sh $(FUZZ_B) $$t -max_total_time=$(FUZZ_QUICK_SECONDS) $(FUZZ_ARGS); done

fuzz-stateful: deps fuzz-build
	tools/mariadb.sh run tests/fuzz/run.sh $(FUZZ_B) fuzz_stateful \
	    -runs=$(FUZZ_STATEFUL_RUNS) -max_len=512 $(FUZZ_ARGS)
