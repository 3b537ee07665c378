# Benchmark: libreserve against the strongest simple alternatives (the
# hot-row counter and the insert-only floor, each in one round trip, and
# as statements), at a local socket and through a delay proxy, on
# throwaway MariaDB servers with production durability (binary log on,
# ROW, synced at every commit) unless told otherwise.
#
#   make bench         every workload, 0 and 0.5 ms RTT, 3 rounds each;
#                      writes $(B)/bench/results.txt and $(B)/bench/*.svg
#   make bench-quick   the headline: flash sale, claims, 10,000 items, carts,
#                      5 units a reserve; libreserve, the batcher, the hot
#                      row and the floor in one round trip; 64 clients,
#                      0.5 ms RTT
#   make bench-crowd   the crowd: 16 to 512 buyers on connections of their
#                      own, as threads and as processes, and the stampede
#                      at both pool caps (see run-bench.sh)
#   make bench-stampede  300 buyers released at once on one item whose
#                      pool (cap 50) is refilled many times over, 4
#                      reserves each; libreserve and the one-trip hot row;
#                      on a freshly started server and on a warm one, 3
#                      rounds; 0.5 ms RTT
#   BINLOG=0           the binary log off instead; BINLOG=both: on, then off
#   SEMISYNC=1         also the semi-synchronous replica configuration
#   BENCH_ARGS=...     options of the bench program (--rounds N,
#                      --workloads ..., --statements-only: libreserve
#                      without its procedures, ...)
#
# Both start their throwaway servers (tests/bench/run-bench.sh, through
# tools/mariadb.sh) and stop them, and the proxies, when done.  Extra
# server options go in RSV_MARIADB_OPTS.

BENCH_ARGS ?=
BINLOG ?= 1
SEMISYNC ?= 0
BENCH_RUN_ARGS = --binlog $(BINLOG) $(if $(filter 1,$(SEMISYNC)),--semisync)

.PHONY: bench bench-quick bench-stampede bench-build

$(B)/bench:
	mkdir -p $@

$(B)/bench/bench: tests/bench/bench.c $(LOADLIB) $(PUB_HDR) $(TEST_SHLIB) | $(B)/bench
	$(CC) $(REAL_CFLAGS) $< tests/loadlib.c -o $@ $(REAL_LDFLAGS) $(TEST_LIB_LINK) $(MARIADB_LIBS) -lpthread -lm

$(B)/bench/proxy: tests/bench/proxy.c | $(B)/bench
	$(CC) $(REAL_CFLAGS) $< -o $@ $(REAL_LDFLAGS)

bench-build: lib $(B)/bench/bench $(B)/bench/proxy

bench: deps
	@$(MAKE) --no-print-directory bench-build
	B=$(B) tests/bench/run-bench.sh full $(BENCH_RUN_ARGS) $(BENCH_ARGS)

bench-quick: deps
	@$(MAKE) --no-print-directory bench-build
	B=$(B) tests/bench/run-bench.sh quick $(BENCH_RUN_ARGS) $(BENCH_ARGS)

bench-stampede: deps
	@$(MAKE) --no-print-directory bench-build
	B=$(B) tests/bench/run-bench.sh stampede $(BENCH_RUN_ARGS) $(BENCH_ARGS)

# The crowd: hundreds of buyers, each on a connection of its own (threads,
# then processes), against the one-trip hot row and floor; then the refill
# stampede at both pool caps.  Writes $(B)/bench/results-crowd.txt and
# $(B)/bench/crowd/*.svg.  BENCH_ARGS as above (e.g. --rounds 1).
.PHONY: bench-crowd
bench-crowd: deps
	@$(MAKE) --no-print-directory bench-build
	B=$(B) tests/bench/run-bench.sh crowd $(BENCH_RUN_ARGS) $(BENCH_ARGS)

# What the migration costs (docs/migration.md, "What it costs"): how fast
# a stage change reaches 4 processes x 16 handles under load, the buyer's
# p99 with shadow off, on, and on with libreserve's server stopped for
# 10 s, and rsv-admin import and migrate compare of 1,000,000 keys under
# live shadow traffic; against the old store of examples/migrate_redis.c
# (Redis counters, the ledger in a MariaDB of its own), everything 0.5 ms
# away through the delay proxy.  tests/bench/migrate-bench.sh starts and
# removes its servers; prints each number beside its target and writes
# $(B)/bench/results-migrate.txt.  MIGBENCH_* variables as that script
# says (MIGBENCH_ROUNDS=2, MIGBENCH_PARTS=propagation,shadow,import).
.PHONY: bench-migrate
bench-migrate: deps
	@$(MAKE) --no-print-directory lib $(B)/rsv-admin $(B)/bench/proxy $(B)/bench/migload
	B=$(B) tests/bench/migrate-bench.sh
