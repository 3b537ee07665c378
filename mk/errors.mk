# One error vocabulary in every language (docs/errors.md).  Included by
# the top-level Makefile.
#
#   make errors-doc    write docs/errors.md again from include/reserve.h's
#                      codes and the bindings' mapping tables
#                      (tools/error-table.py)
#   make check-errors  the page is not stale (tests/errors-doc-test.sh),
#                      and the same failing situations through every
#                      binding raise the errors it names
#                      (tests/errors-test.sh), against a throwaway MariaDB
#
# make check runs both; make lint the first (it needs no server).

CHECK_EXTRA += tests/errors-doc-test.sh tests/errors-test.sh
LINT_EXTRA += tests/errors-doc-test.sh

.PHONY: errors-doc check-errors

errors-doc:
	tools/error-table.py

check-errors: lib
	tests/errors-doc-test.sh
	tools/mariadb.sh run tests/errors-test.sh

# The older name.
.PHONY: errors-test
errors-test: check-errors
