# The schema's life in an application's database, in make check:
#   tests/privileges-test.sh  the documented grants, exactly: an installing
#                             and a runtime account with only those
#   tests/upgrade-test.sh     the last unversioned release's schema, filled
#                             by its own library, upgraded live to today's
# Alone: make lib && tools/mariadb.sh run tests/upgrade-test.sh

CHECK_EXTRA += tests/privileges-test.sh tests/upgrade-test.sh
