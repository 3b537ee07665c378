# mk/migrate.mk - the migration from an old store (docs/migration.md):
# rsv-admin migrate's test.  The library's side (lib/migrate*.c) is
# tested by build/tests/check_migrate, which the top-level Makefile
# builds and runs with every tests/check_*.c.  Included by the top-level
# Makefile (-include mk/*.mk).

CHECK_EXTRA += tests/migrate-admin-test.sh

# The end-to-end migration of the design libreserve replaces (Redis
# counters, the ledger in MariaDB) under load: examples/migrate_redis.c,
# driven through every stage by tests/migrate-e2e-test.sh.  redis-server
# and libhiredis-dev are Debian packages, installed through tools/deps.sh.
MIGRATE_PACKAGES := redis-server libhiredis-dev
HIREDIS_CFLAGS = $(shell $(PKG_CONFIG) --cflags hiredis 2>/dev/null)
HIREDIS_LIBS = $(or $(shell $(PKG_CONFIG) --libs hiredis 2>/dev/null),-lhiredis)

.PHONY: migrate-deps
migrate-deps:
	@tools/deps.sh packages $(MIGRATE_PACKAGES)

# The old store (Redis counters, the ledger in MariaDB) is linked into the
# example and into the migration's benchmark (mk/bench.mk), one source.
MIGRATE_STORE_SRC := examples/migrate_redis_store.c examples/migrate_redis_store.h

$(B)/examples/migrate_redis: examples/migrate_redis.c $(MIGRATE_STORE_SRC) $(PUB_HDR) $(B)/libreserve.so | $(B)/examples migrate-deps
	$(CC) $(REAL_CFLAGS) $(HIREDIS_CFLAGS) $< $(filter %.c,$(MIGRATE_STORE_SRC)) -o $@ $(REAL_LDFLAGS) -L$(B) -Wl,-rpath,$(CURDIR)/$(B) -lreserve $(MARIADB_LIBS) $(HIREDIS_LIBS)

# The migration's benchmark's load program (tests/bench/migload.c,
# make bench-migrate).
$(B)/bench/migload: tests/bench/migload.c $(MIGRATE_STORE_SRC) $(PUB_HDR) $(B)/libreserve.so | $(B)/bench migrate-deps
	$(CC) $(REAL_CFLAGS) $(HIREDIS_CFLAGS) -Iexamples $< $(filter %.c,$(MIGRATE_STORE_SRC)) -o $@ $(REAL_LDFLAGS) -L$(B) -Wl,-rpath,$(CURDIR)/$(B) -lreserve $(MARIADB_LIBS) $(HIREDIS_LIBS) -lpthread -lm

CHECK_EXTRA_BUILD += $(B)/examples/migrate_redis
CHECK_EXTRA += tests/migrate-e2e-test.sh

# rsv-admin import (tools/rsv-admin/import.c).
CHECK_EXTRA += tests/migrate-import-test.sh

# rsv-admin migrate compare (tools/rsv-admin/compare.c), against a
# throwaway redis-server as well (MIGRATE_PACKAGES).
CHECK_EXTRA += tests/migrate-compare-test.sh
CHECK_EXTRA_BUILD += migrate-deps
