# Benchmark (issue 4): libreserve against the hot-row counter and the
# insert-only floor, at a local socket and through a delay proxy.
#
#   make bench         every workload, 0 and 0.5 ms RTT; writes
#                      build/bench/results.txt and build/bench/*.svg
#   make bench-quick   the flash sale at 64 clients only (< 2 minutes)
#   make bench-sp      the one-round-trip stored-procedure prototype
#                      against rsv_reserve_one (tests/bench/sp/)
#
# Both start a throwaway MariaDB (tools/mariadb.sh run) and stop it, and the
# proxy, when done.  BENCH_ARGS are passed to the bench program.

BENCH_ARGS ?=

.PHONY: bench bench-quick bench-build bench-sp

$(B)/bench:
	mkdir -p $@

$(B)/bench/bench: tests/bench/bench.c include/reserve.h $(B)/libreserve.so | $(B)/bench
	$(CC) $(REAL_CFLAGS) $< -o $@ $(REAL_LDFLAGS) -L$(B) -Wl,-rpath,$(CURDIR)/$(B) -lreserve $(MARIADB_LIBS) -lpthread -lm

$(B)/bench/proxy: tests/bench/proxy.c | $(B)/bench
	$(CC) $(REAL_CFLAGS) $< -o $@ $(REAL_LDFLAGS)

bench-build: lib $(B)/bench/bench $(B)/bench/proxy

bench: deps
	@$(MAKE) --no-print-directory bench-build
	tools/mariadb.sh run tests/bench/run-bench.sh full $(BENCH_ARGS)

bench-quick: deps
	@$(MAKE) --no-print-directory bench-build
	tools/mariadb.sh run tests/bench/run-bench.sh quick $(BENCH_ARGS)

# The one-round-trip prototype (tests/bench/sp/): a stored procedure doing
# a one-unit reserve against rsv_reserve_one, same pool and clients.
$(B)/bench/sp_bench: tests/bench/sp/sp_bench.c include/reserve.h $(B)/libreserve.so | $(B)/bench
	$(CC) $(REAL_CFLAGS) $< -o $@ $(REAL_LDFLAGS) -L$(B) -Wl,-rpath,$(CURDIR)/$(B) -lreserve $(MARIADB_LIBS) -lpthread

bench-sp: deps
	@$(MAKE) --no-print-directory lib $(B)/bench/proxy $(B)/bench/sp_bench
	tools/mariadb.sh run tests/bench/sp/run.sh
