# One error vocabulary in every language (docs/errors.md).  Included by
# the top-level Makefile.
#
#   make errors-doc    write docs/errors.md again from include/reserve.h's
#                      codes and the bindings' mapping tables
#                      (tools/error-table.py)
#   make errors-test   the page is not stale (tests/errors-doc-test.sh),
#                      and the same failing situations through every
#                      binding raise the errors it names
#                      (tests/errors-test.sh), against a throwaway MariaDB
#
# make check runs both.

CHECK_EXTRA += tests/errors-doc-test.sh tests/errors-test.sh

.PHONY: errors-doc errors-test

errors-doc:
	tools/error-table.py

errors-test: lib
	tests/errors-doc-test.sh
	tools/mariadb.sh run tests/errors-test.sh
