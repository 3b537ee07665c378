# mk/admin.mk - rsv-admin, the operator's command-line tool
# (tools/rsv-admin/*.c), its man page (man/rsv-admin.1), its tests and its
# installation.  Included by the top-level Makefile (-include
# mk/*.mk).
#
#   make build/rsv-admin        build it (runs in-tree: rpath to build/,
#                               schema install/upgrade load sql/schema.sql)
#   make install                also installs rsv-admin to $(DESTDIR)$(BINDIR)
#                               and rsv-admin(1) to $(DESTDIR)$(MANDIR)/man1
#   make install-admin          only the tool, its man page and the
#                               sweeper's systemd units and option file
#   make uninstall-admin        remove them again
#
# The sweeper's units are the ones the rsv-admin package ships
# (debian/rsv-admin.rsv-admin-sweep@.service and .timer), with the
# installed paths: $(BINDIR)/rsv-admin and $(SYSCONFDIR)/rsv-admin/%i.cnf.
# They go to $(SYSTEMD_UNITDIR) (systemd reads /usr/local/lib/systemd/system
# and /usr/lib/systemd/system), the package's option file to
# $(SYSCONFDIR)/rsv-admin/default.cnf unless one is there already (it is
# the operator's, with a password in it perhaps).  Nothing is enabled.

ADMIN_SRC := $(wildcard tools/rsv-admin/*.c)
ADMIN_HDR := $(wildcard tools/rsv-admin/*.h)
ADMIN_MAN := man/rsv-admin.1
SWEEP_UNITS := debian/rsv-admin.rsv-admin-sweep@.service debian/rsv-admin.rsv-admin-sweep@.timer
SYSCONFDIR ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
SYSTEMD_UNITDIR ?= $(if $(filter /usr,$(PREFIX)),/lib/systemd/system,$(PREFIX)/lib/systemd/system)
UNIT_SUBST = -e 's|/usr/bin/rsv-admin|$(BINDIR)/rsv-admin|g' -e 's|/etc/rsv-admin|$(SYSCONFDIR)/rsv-admin|g'

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
	$(INSTALL) -d $(DESTDIR)$(SYSTEMD_UNITDIR) $(DESTDIR)$(SYSCONFDIR)/rsv-admin
	@for u in $(SWEEP_UNITS); do \
	  n=$${u#debian/rsv-admin.}; \
	  sed $(UNIT_SUBST) "$$u" >$(B)/admin-install/"$$n" && \
	  echo "$(INSTALL) -m 644 $(B)/admin-install/$$n $(DESTDIR)$(SYSTEMD_UNITDIR)/$$n" && \
	  $(INSTALL) -m 644 $(B)/admin-install/"$$n" $(DESTDIR)$(SYSTEMD_UNITDIR)/"$$n" || exit 1; \
	done
	@sed $(UNIT_SUBST) tools/rsv-admin/default.cnf >$(B)/admin-install/default.cnf
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/rsv-admin/default.cnf ]; then \
	  echo "install: kept $(DESTDIR)$(SYSCONFDIR)/rsv-admin/default.cnf (the new one is $(B)/admin-install/default.cnf)"; \
	else echo "$(INSTALL) -m 644 $(B)/admin-install/default.cnf $(DESTDIR)$(SYSCONFDIR)/rsv-admin/default.cnf"; \
	  $(INSTALL) -m 644 $(B)/admin-install/default.cnf $(DESTDIR)$(SYSCONFDIR)/rsv-admin/default.cnf; fi

uninstall-admin:
	rm -f $(DESTDIR)$(BINDIR)/rsv-admin $(DESTDIR)$(MANDIR)/man1/rsv-admin.1
	rm -f $(DESTDIR)$(SYSTEMD_UNITDIR)/rsv-admin-sweep@.service $(DESTDIR)$(SYSTEMD_UNITDIR)/rsv-admin-sweep@.timer

install: install-admin
uninstall: uninstall-admin
