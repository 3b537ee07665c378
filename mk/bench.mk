# Benchmark: libreserve against the hot-row counter and the
# insert-only floor, at a local socket and through a delay proxy.
#
#   make bench         every workload, 0 and 0.5 ms RTT; writes
#                      build/bench/results.txt and build/bench/*.svg
#   make bench-quick   the flash sale at 64 clients only (< 2 minutes)
#   BENCH_ARGS=--statements-only   libreserve without its reserve procedure
#                      (every reserve sends its statements one by one)
#
# Both start a throwaway MariaDB (tools/mariadb.sh run) and stop it, and the
# proxy, when done.  BENCH_ARGS are passed to the bench program.

BENCH_ARGS ?=

.PHONY: bench bench-quick bench-build

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
