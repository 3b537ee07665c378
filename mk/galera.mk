# libreserve on a 3-node MariaDB Galera cluster on loopback (tests/galera/):
# clients on every node doing reserve / claim / release / sweep on one hot
# item, one by one and in batches, while a node is SIGKILLed and rejoins,
# then every acknowledged outcome checked and rsv_audit() run on every
# node.  Installs galera-4 and rsync when run as root; starts and stops
# its own servers (ports 14001-14033, or GALERA_PORT_BASE+1..+33).  Not
# part of make check.
#
#   make check-galera        3 runs of 30 s (a few minutes on two cores),
#                            after rsv-admin migrate on the cluster
#   make check-galera-migrate  only rsv-admin migrate on the cluster:
#                            stages set on one node read on another, two
#                            nodes changing them at once
#   make check-galera-partition  a node partitioned away while alive, a
#                            flapping partition, a lossy link and a slow
#                            one (4 runs of 40 s; nftables rules of its
#                            own, removed afterwards)
#   make soak-galera         one run of 600 s (GALERA_DURATION) with every
#                            kind of link failure on every node in turn,
#                            the load's memory, descriptors and server
#                            sessions printed every 15 s: they stay flat
#   make check-galera-long   6 runs of 90 s
#   make galera-repro        the server behaviour the library guards
#                            against, and the procedures' behaviour it
#                            relies on, without libreserve
#                            (tests/galera/repro_bf_abort.c)
#
# GALERA_LIB=DIR runs the test against the libreserve.so.0 in DIR instead
# of this build's; GALERA_RTT_US=N puts the clients N us of round trip
# away from the nodes; see tests/galera/run-galera.sh for the other
# settings.

.PHONY: check-galera check-galera-migrate check-galera-long check-galera-partition soak-galera galera-repro galera-build

$(B)/galera:
	mkdir -p $@

$(B)/galera/galera_load: tests/galera/galera_load.c $(LOADLIB) $(PUB_HDR) $(TEST_SHLIB) | $(B)/galera
	$(CC) $(REAL_CFLAGS) $< tests/loadlib.c -o $@ $(REAL_LDFLAGS) $(TEST_LIB_LINK) $(MARIADB_LIBS) -lpthread

$(B)/galera/repro_bf_abort: tests/galera/repro_bf_abort.c | $(B)/galera
	$(CC) $(REAL_CFLAGS) $< -o $@ $(REAL_LDFLAGS) $(MARIADB_LIBS) -lpthread

# (the benchmark's delay proxy: GALERA_RTT_US puts the clients behind it)
galera-build: lib $(B)/galera/galera_load $(B)/galera/repro_bf_abort $(B)/bench/proxy $(B)/rsv-admin

check-galera: deps
	@$(MAKE) --no-print-directory galera-build
	GALERA_BUILD=$(B) tests/galera/run-galera.sh quick

check-galera-migrate: deps
	@$(MAKE) --no-print-directory galera-build
	GALERA_BUILD=$(B) tests/galera/run-galera.sh migrate

check-galera-long: deps
	@$(MAKE) --no-print-directory galera-build
	GALERA_BUILD=$(B) tests/galera/run-galera.sh long

check-galera-partition: deps
	@$(MAKE) --no-print-directory galera-build
	GALERA_BUILD=$(B) tests/galera/run-galera.sh partition

soak-galera: deps
	@$(MAKE) --no-print-directory galera-build
	GALERA_BUILD=$(B) tests/galera/run-galera.sh soak

galera-repro: deps
	@$(MAKE) --no-print-directory galera-build
	GALERA_BUILD=$(B) tests/galera/run-galera.sh repro
