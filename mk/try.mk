# A server to try libreserve against (tools/try-db.sh), for a newcomer's
# first program and the bindings' quick-starts:
#
#   make try-db        start a throwaway MariaDB in $(B)/try-db that stays
#                      up (private socket, no TCP port), with the database
#                      shop, the account shop (password secret) and the
#                      schema loaded; prints the export RSV_DSN=... line.
#                      Again: finds it running and prints the line again
#   make try-db-stop   stop it and remove its data (make clean does too)
#
#   make check-quickstart
#                      every quick-start (C and each binding) as its
#                      README prints it, from a fresh copy of the tree and
#                      an application directory outside it, against such
#                      a database, with only RSV_DSN (and PKG_CONFIG_PATH
#                      for the private prefix) set (tests/quickstart-test.sh,
#                      on a throwaway MariaDB; make check runs it)
#
# make check also runs tests/demo-test.sh: examples/checkout_demo.c
# against a database named only by RSV_DSN.

CHECK_EXTRA += tests/quickstart-test.sh tests/demo-test.sh

.PHONY: try-db try-db-stop check-quickstart

try-db: deps
	@tools/try-db.sh start $(B)/try-db

try-db-stop:
	@tools/try-db.sh stop $(B)/try-db

check-quickstart: lib
	tools/mariadb.sh run tests/quickstart-test.sh

# The older name.
.PHONY: quickstart-test
quickstart-test: check-quickstart

# make clean removes $(B), and with it the server's data: stop it first.
.PHONY: try-db-clean
clean: try-db-clean
try-db-clean:
	@[ ! -d $(B)/try-db ] || tools/try-db.sh stop $(B)/try-db
