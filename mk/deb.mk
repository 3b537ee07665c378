# mk/deb.mk - Debian packages, from the debian/ directory.
#
#   make deb        build libreserve0, libreserve-dev and rsv-admin
#                   (dpkg-buildpackage -us -uc -b) from a copy of the tree
#                   in build/deb/src, then check them with lintian; the
#                   .deb, .changes and .buildinfo files land in build/deb/.
#                   Run as root it first installs what it needs with
#                   apt-get (dpkg-dev, debhelper, lintian, fakeroot, and
#                   the build dependencies through tools/deps.sh).
#   make check-deb   make deb, then install the packages on this machine,
#                   build and run a program against them and a throwaway
#                   MariaDB, and remove them again (tests/deb-test.sh;
#                   needs root, changes the system: not part of make check)
#
# The copy holds the files git knows (tracked, or new and not ignored), or,
# outside a git checkout, the tree without its build directories.  Nothing
# is written outside build/deb (lintian's temporary files included).
# LINTIAN_FLAGS replaces the lintian options.

DEB_DIR := $(B)/deb
DEB_SRC := $(DEB_DIR)/src
DEB_TOOLS := dpkg-dev debhelper lintian fakeroot
LINTIAN_FLAGS ?= --display-info --pedantic --fail-on error,warning,info,pedantic

.PHONY: deb deb-deps check-deb

deb-deps: deps-build
	@tools/deps.sh packages $(DEB_TOOLS)

deb: deb-deps
	@deb_version=$$(dpkg-parsechangelog -l debian/changelog -S Version); \
	if [ "$${deb_version%-*}" != "$(VERSION)" ]; then \
	  echo "deb: debian/changelog is at $$deb_version but include/reserve.h says $(VERSION): add a debian/changelog entry (dch -v $(VERSION)-1)" >&2; \
	  exit 1; \
	fi
	rm -rf $(DEB_DIR)
	mkdir -p $(DEB_SRC)
	@if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
	  git ls-files -z -c -o --exclude-standard | \
	    xargs -0 -r sh -c 'for f; do if [ -e "$$f" ] || [ -L "$$f" ]; then printf "%s\0" "$$f"; fi; done' sh | \
	    tar -cf - --null --no-recursion -T -; \
	else \
	  tar -cf - --exclude=./.git --exclude=./build --exclude='./build-*' .; \
	fi | tar -xf - -C $(DEB_SRC)
	cd $(DEB_SRC) && dpkg-buildpackage -us -uc -b
	@echo "== lintian $(LINTIAN_FLAGS)"
	mkdir -p $(DEB_DIR)/tmp
	TMPDIR=$(CURDIR)/$(DEB_DIR)/tmp lintian $(LINTIAN_FLAGS) $(DEB_DIR)/*.changes
	rm -rf $(DEB_DIR)/tmp
	@ls -l $(DEB_DIR)/*.deb

check-deb:
	tests/deb-test.sh

# The older names of the targets above.
.PHONY: deb-test
deb-test: check-deb
