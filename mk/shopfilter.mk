# The single-shard check (issue 6): every statement the library sends for a
# shop filters on that shop's id (tests/shopfilter-test.py, general log to
# a table).  Runs in `make check`; alone:
#
#   make shopfilter-test
CHECK_EXTRA += tests/shopfilter-test.py

.PHONY: shopfilter-test
shopfilter-test: lib
	tools/mariadb.sh run tests/shopfilter-test.py
