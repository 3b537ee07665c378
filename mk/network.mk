# mk/network.mk - the network suite (tests/network/): calls whose commit
# waits on replication, bounded by their budget, and RSV_OPT_REPLICA_ACK,
# against a throwaway server with semi-synchronous replication and no
# replica (tests/network/run.sh).  make check runs it.
#
#   make check-network   only this suite
# The partitions, lossy links and the soak are Galera targets
# (mk/galera.mk); the replicated pair's failing link is check-replication.

NETWORK_TEST := $(B)/tests/network/check_network

$(B)/tests/network:
	mkdir -p $@

$(NETWORK_TEST): tests/network/check_network.c $(TESTUTIL_OBJ) $(TEST_SHLIB) | $(B)/tests/network
	$(CC) $(REAL_CFLAGS) $(CHECK_CFLAGS) -Itests $< $(TESTUTIL_OBJ) -o $@ $(REAL_LDFLAGS) $(TEST_LINK)

CHECK_EXTRA_BUILD += $(NETWORK_TEST)
CHECK_EXTRA += tests/network/run.sh

.PHONY: check-network
check-network: deps
	@$(MAKE) --no-print-directory lib $(NETWORK_TEST)
	tests/network/run.sh
