# mk/migrate.mk - the migration from an old store (docs/migration.md):
# rsv-admin migrate's test.  The library's side (lib/migrate*.c) is
# tested by build/tests/check_migrate, which the top-level Makefile
# builds and runs with every tests/check_*.c.  Included by the top-level
# Makefile (-include mk/*.mk).

CHECK_EXTRA += tests/migrate-admin-test.sh
