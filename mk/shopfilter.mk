# The single-shard check: every statement the library sends for a
# shop filters on that shop's id (tests/shopfilter-test.py, general log to
# a table).  Runs in `make check`; alone:
#
#   make check-shopfilter
CHECK_EXTRA += tests/shopfilter-test.py

.PHONY: check-shopfilter
check-shopfilter: lib $(TEST_SHLIB)
	tools/mariadb.sh run tests/shopfilter-test.py

# The older names of the targets above.
.PHONY: shopfilter-test
shopfilter-test: check-shopfilter
