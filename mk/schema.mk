# The schema's life in an application's database, in make check:
#   tests/privileges-test.sh  the documented grants, exactly: an installing
#                             and a runtime account with only those
#   tests/upgrade-test.sh     the schemas of the two earlier releases
#                             (version 1 and unversioned), each filled by
#                             its own library, upgraded to today's
#   tests/coexist-test.sh     the schema beside an application's own tables
#                             of the names libreserve used before version 2
# Alone: make lib admin && tools/mariadb.sh run tests/upgrade-test.sh

CHECK_EXTRA += tests/privileges-test.sh tests/upgrade-test.sh tests/coexist-test.sh
