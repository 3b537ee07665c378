# Python binding (bindings/python, the pip package `libreserve`) and the
# install test.
#
#   make check-python    the binding's unittest suites against a throwaway
#                       MariaDB (in-tree build/libreserve.so), the
#                       mysqlclient recipe among them (python3-mysqldb,
#                       installed as root when missing)
#   make check-python-install
#                       pip install of the package (offline, into a venv
#                       and with --target), then a reserve -> claim and the
#                       README's example from the installed package
#   make check-install   make install into a staging DESTDIR, build and run a
#                       program with pkg-config (shared and static), run the
#                       binding's tests against the installed library
#
# All three also run in `make check` (tests/run.sh runs CHECK_EXTRA after
# "--", with RSV_TEST_SOCKET set).

CHECK_EXTRA += bindings/python/run-tests.sh bindings/python/pip-install-test.sh tests/install-test.sh

.PHONY: check-python check-python-install check-install

check-python: lib $(TEST_SHLIB)
	tools/mariadb.sh run bindings/python/run-tests.sh

check-python-install: lib
	tools/mariadb.sh run bindings/python/pip-install-test.sh

check-install: lib
	tools/mariadb.sh run tests/install-test.sh

# The older names of the targets above.
.PHONY: python-install-test python-test install-test
python-install-test: check-python-install
python-test: check-python
install-test: check-install
