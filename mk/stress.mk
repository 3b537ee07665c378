# Fault-injection stress: many client processes doing mixed checkouts
# (single calls, batch calls and the batcher) through a proxy that cuts
# connections at commit points (COMMIT and every procedure CALL, a batch's
# among them), while clients and the server are SIGKILLed and lock storms
# are provoked, on a server with a binary log (ROW, sync_binlog=1); the
# run ends with one "stress: ..." line and fails if anything was
# oversold, undersold, lost, claimed twice or left open, or if no batch
# was cut at its COMMIT.  See docs/stress.md.
#
#   make stress           the self-test of the checks, then the default
#                         run: 40 clients, >= 50,000 operations, >= 8
#                         minutes (about ten minutes on two cores)
#   make stress-quick     the self-test, then 16 clients for about 60-90 s
#                         (CI; under two minutes in all)
#   make stress-selftest  the self-test alone: each check is made to fire
#                         by tampering behind the library's back
#   make stress-diskfull  the data directory on a small file system of its
#                         own, filled during the run (root: it mounts a
#                         tmpfs; about 70 s)
#   make stress-repro     the reproducer of a library bug the stress found
#                         (tests/stress/repro_eintxn.c; exits 1 while the
#                         bug is there)
#
# All start their own throwaway MariaDB (they kill and restart it, so an
# existing server given in RSV_TEST_SOCKET is never used).  STRESS_ARGS are
# passed to the stress program (--clients N --ops N --duration S --seed N).
# The programs are built in $(B)/stress.  Not part of make check.

STRESS_ARGS ?=
STRESS_RUN = STRESS_BUILD_DIR=$(B) tests/stress/run-stress.sh

.PHONY: stress stress-quick stress-selftest stress-diskfull stress-build stress-repro

$(B)/stress:
	mkdir -p $@

$(B)/stress/stress: tests/stress/stress.c $(LOADLIB) $(PUB_HDR) $(TEST_SHLIB) | $(B)/stress
	$(CC) $(REAL_CFLAGS) $< tests/loadlib.c -o $@ $(REAL_LDFLAGS) $(TEST_LIB_LINK) $(MARIADB_LIBS)

$(B)/stress/cutproxy: tests/stress/cutproxy.c | $(B)/stress
	$(CC) $(REAL_CFLAGS) $< -o $@ $(REAL_LDFLAGS) -lpthread

$(B)/stress/repro_eintxn: tests/stress/repro_eintxn.c $(PUB_HDR) $(TEST_SHLIB) | $(B)/stress
	$(CC) $(REAL_CFLAGS) $< -o $@ $(REAL_LDFLAGS) $(TEST_LIB_LINK) $(MARIADB_LIBS)

stress-build: lib $(B)/stress/stress $(B)/stress/cutproxy $(B)/stress/repro_eintxn

stress: deps
	@$(MAKE) --no-print-directory B=$(B) stress-build
	$(STRESS_RUN) full $(STRESS_ARGS)

stress-quick: deps
	@$(MAKE) --no-print-directory B=$(B) stress-build
	$(STRESS_RUN) quick $(STRESS_ARGS)

stress-selftest: deps
	@$(MAKE) --no-print-directory B=$(B) stress-build
	$(STRESS_RUN) selftest

stress-diskfull: deps
	@$(MAKE) --no-print-directory B=$(B) stress-build
	$(STRESS_RUN) diskfull $(STRESS_ARGS)

stress-repro: deps
	@$(MAKE) --no-print-directory B=$(B) stress-build
	$(STRESS_RUN) repro
