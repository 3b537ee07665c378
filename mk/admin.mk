# mk/admin.mk - rsv-admin, the operator's command-line tool
# (tools/rsv-admin/*.c), its man page (man/rsv-admin.1), its tests and its
# installation.  Included by the top-level Makefile (-include
# mk/*.mk).
#
#   make build/rsv-admin        build it (runs in-tree: rpath to build/,
#                               schema install/upgrade load sql/schema.sql)
#   make install                also installs rsv-admin to $(DESTDIR)$(BINDIR)
#                               and rsv-admin(1) to $(DESTDIR)$(MANDIR)/man1
#   make install-admin          only the tool and its man page
#   make uninstall-admin        remove them again

ADMIN_SRC := $(wildcard tools/rsv-admin/*.c)
ADMIN_HDR := $(wildcard tools/rsv-admin/*.h)
ADMIN_MAN := man/rsv-admin.1

# The schema file `schema install` and `schema upgrade` load by default:
# the tool built here runs with the tree's library (rpath to $(B)), so it
# loads the tree's sql/schema.sql, which matches it; the installed tool
# loads the installed copy, $(DATADIR)/libreserve/schema.sql.
$(B)/rsv-admin: $(ADMIN_SRC) $(ADMIN_HDR) $(PUB_HDR) mk/admin.mk $(B)/libreserve.so
	$(CC) $(REAL_CFLAGS) -DRSV_ADMIN_SCHEMA='"$(CURDIR)/sql/schema.sql"' $(ADMIN_SRC) -o $@ $(REAL_LDFLAGS) -L$(B) -Wl,-rpath,$(CURDIR)/$(B) -lreserve $(MARIADB_LIBS)

CHECK_EXTRA_BUILD += $(B)/rsv-admin
CHECK_EXTRA += tests/admin-test.sh
# The schema loaded three ways (the mariadb client, rsv-admin's loader
# which the tests share, the Python binding) leaves the same database.
CHECK_EXTRA += tests/loaders-test.py
# The sweeper service's command lines as written in its unit file; who
# holds the connections (it starts a second server, with
# performance_schema on); the alert rules and the dashboard against what
# the library and rsv-admin print (promtool, from Debian's prometheus).
CHECK_EXTRA += tests/sweeper-unit-test.sh tests/connections-test.sh \
	tests/monitoring-test.sh

# The installed copy is linked again, every time (LIBDIR may differ from
# the last install), without the build tree's rpath: it finds libreserve
# in $(LIBDIR), through an rpath unless LIBDIR is a system directory the
# loader searches anyway (/usr/local/lib may not be in the loader cache
# until ldconfig runs).
ADMIN_RPATH = $(if $(filter /lib /lib/% /usr/lib /usr/lib/%,$(LIBDIR)),,-Wl,-rpath,$(LIBDIR))

.PHONY: admin install-admin uninstall-admin
admin: $(B)/rsv-admin

install-admin: $(ADMIN_SRC) $(ADMIN_HDR) $(ADMIN_MAN) $(PUB_HDR) $(B)/libreserve.so
	mkdir -p $(B)/admin-install
	$(CC) $(REAL_CFLAGS) -DRSV_ADMIN_SCHEMA='"$(DATADIR)/libreserve/schema.sql"' $(ADMIN_SRC) -o $(B)/admin-install/rsv-admin $(REAL_LDFLAGS) -L$(B) $(ADMIN_RPATH) -lreserve $(MARIADB_LIBS)
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1
	$(INSTALL) -m 755 $(B)/admin-install/rsv-admin $(DESTDIR)$(BINDIR)/rsv-admin
	$(INSTALL) -m 644 $(ADMIN_MAN) $(DESTDIR)$(MANDIR)/man1/rsv-admin.1

uninstall-admin:
	rm -f $(DESTDIR)$(BINDIR)/rsv-admin $(DESTDIR)$(MANDIR)/man1/rsv-admin.1

install: install-admin
uninstall: uninstall-admin
