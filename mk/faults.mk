# mk/faults.mk - the fault-injection build and its suite.
# Included by the top-level Makefile (-include mk/*.mk).
#
# The same lib/*.c, compiled again with -DRSV_FAULT_INJECTION into a
# static library that only tests link: the hooks (lib/fault.h) never reach
# build/libreserve.so or build/libreserve.a.  See docs/testing.md.
#
#   make build/fault/libreserve-fault.a    the test-only library
#   make check-faults                       only the fault suite, against a
#                                           throwaway MariaDB
#   make check                              runs it with everything else

FAULT_DIR := $(B)/fault
FAULT_OBJ := $(LIB_SRC:lib/%.c=$(FAULT_DIR)/lib/%.o)
FAULT_LIB := $(FAULT_DIR)/libreserve-fault.a
FAULT_TEST := $(FAULT_DIR)/check_faults

# The production objects include fault.h too (for the no-op hooks).
$(LIB_OBJ): lib/fault.h

$(FAULT_DIR)/lib:
	mkdir -p $@

$(FAULT_DIR)/lib/%.o: lib/%.c $(LIB_HDR) $(PUB_HDR) | $(FAULT_DIR)/lib
	$(CC) $(REAL_CFLAGS) -DRSV_FAULT_INJECTION -DRSV_TEST_BUILD -c $< -o $@

$(FAULT_LIB): $(FAULT_OBJ)
	rm -f $@
	ar rcs $@ $(FAULT_OBJ)

# Linked statically against the fault library, never against
# build/libreserve.so (whose rpath would win over the hooks); the library's
# allocations are wrapped so the suite can make each one fail in turn.
$(FAULT_TEST): tests/faults/check_faults.c lib/fault.h $(TESTUTIL_OBJ) $(FAULT_LIB)
	$(CC) $(REAL_CFLAGS) $(CHECK_CFLAGS) -DRSV_FAULT_INJECTION -Itests $< $(TESTUTIL_OBJ) $(FAULT_LIB) -o $@ $(REAL_LDFLAGS) -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc $(MARIADB_LIBS) $(CHECK_LIBS) -lpthread -lm

CHECK_EXTRA_BUILD += $(FAULT_TEST)
CHECK_EXTRA += $(FAULT_TEST)

.PHONY: check-faults
check-faults: deps
	@$(MAKE) --no-print-directory $(FAULT_TEST)
	tools/mariadb.sh run $(FAULT_TEST)
