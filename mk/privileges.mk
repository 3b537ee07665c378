# The documented grants, exactly: an installing and a runtime account with
# only those (tests/privileges-test.sh).  Runs in `make check`; alone:
#   make lib && tools/mariadb.sh run tests/privileges-test.sh

CHECK_EXTRA += tests/privileges-test.sh
