# Python binding (examples/python) and the install test.
#
#   make python-test    the binding's unittest suite against a throwaway
#                       MariaDB (in-tree build/libreserve.so)
#   make install-test   make install into a staging DESTDIR, build and run a
#                       program with pkg-config (shared and static), run the
#                       binding's tests against the installed library
#
# Both also run in `make check` (tests/run.sh runs CHECK_EXTRA after "--",
# with RSV_TEST_SOCKET set).

CHECK_EXTRA += examples/python/run-tests.sh tests/install-test.sh

.PHONY: python-test install-test

python-test: lib
	tools/mariadb.sh run examples/python/run-tests.sh

install-test: lib
	tools/mariadb.sh run tests/install-test.sh
