# The single-shard check: every statement the library sends for a
# shop filters on that shop's id (tests/shopfilter-test.py, general log to
# a table).  Runs in `make check`; alone:
#
#   make shopfilter-test
CHECK_EXTRA += tests/shopfilter-test.py

.PHONY: shopfilter-test
shopfilter-test: lib $(TEST_SHLIB)
	tools/mariadb.sh run tests/shopfilter-test.py
