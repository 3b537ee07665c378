# mk/replication.mk - replicated pairs and failover (tests/replication/).
# Included by the top-level Makefile (-include mk/*.mk).
#
#   make check-replication   a primary and a replica of MariaDB on
#                            127.0.0.1 (GTID, row-based binary log,
#                            durable commits), clients reserving,
#                            claiming, releasing and sweeping, the
#                            primary SIGKILLed, the replica promoted:
#                            semi-synchronous replication (AFTER_SYNC)
#                            must lose nothing acknowledged; asynchronous
#                            replication with a lagging replica is
#                            measured, and must be seen to lose; the
#                            replica's link stalled until semi-sync
#                            falls back, without and with
#                            RSV_OPT_REPLICA_ACK (which must lose
#                            nothing).  About 2.5 minutes on two cores.
#                            See docs/scaling.md, "Replicated pairs and
#                            failover".
#   make replication-build   only build the load program and rsv-admin
#
# REPL_ARGS are passed to tests/replication/run.sh (--runs N, --keep, the
# scenarios: semisync, async-lag, semisync-fallback,
# semisync-fallback-ack, async).  Not part of make check: it
# starts servers of its own on TCP ports 15000-15099.

REPL_ARGS ?=

.PHONY: check-replication replication-build

$(B)/replication:
	mkdir -p $@

REPL_SRC := $(wildcard tests/replication/*.c)

$(B)/replication/failover_load: $(REPL_SRC) tests/replication/failover.h $(LOADLIB) include/reserve.h $(TEST_SHLIB) | $(B)/replication
	$(CC) $(REAL_CFLAGS) $(REPL_SRC) tests/loadlib.c -o $@ $(REAL_LDFLAGS) $(TEST_LIB_LINK) $(MARIADB_LIBS) -lpthread

replication-build: lib $(B)/replication/failover_load $(B)/rsv-admin

check-replication: deps
	@$(MAKE) --no-print-directory replication-build
	RSV_BUILD=$(B) tests/replication/run.sh $(REPL_ARGS)
