# CMake package of the installed library (cmake/*.cmake.in): make install
# puts libreserve-config.cmake and its version file in $(CMAKEDIR), so
# that find_package(libreserve) gives the imported target
# libreserve::reserve (and libreserve::reserve_static).  The files locate
# the headers and libraries relative to themselves.
#
#   make check-cmake   make install into a staging directory, then a C++
#                     program built by CMake against it, run against a
#                     throwaway MariaDB (tests/install-test.sh --cmake-only)
#
# make check runs the same through tests/install-test.sh.

CMAKEDIR ?= $(LIBDIR)/cmake/libreserve
CMAKE_PKG := $(B)/cmake/libreserve-config.cmake $(B)/cmake/libreserve-config-version.cmake

# Relative paths from where the files are installed; "realpath -m" works
# on directories that do not exist yet.
cmake_rel = $(shell realpath -m --relative-to='$(CMAKEDIR)' '$(1)')
CMAKE_SUBST = -e 's|@CONFIG_TO_INCLUDEDIR@|$(call cmake_rel,$(INCLUDEDIR))|g' \
	-e 's|@CONFIG_TO_LIBDIR@|$(call cmake_rel,$(LIBDIR))|g' \
	-e 's|@SONAME@|$(SONAME)|g' -e 's|@VERSION@|$(VERSION)|g' \
	-e 's|@MAJOR@|$(MAJOR)|g' \
	-e "s|@SIZEOF_VOID_P@|$$($(CC) -dM -E - </dev/null | sed -n 's/^\#define __SIZEOF_POINTER__ //p')|g"

# Always rewritten, as reserve.pc: they record LIBDIR and INCLUDEDIR.
$(B)/cmake/%.cmake: cmake/%.cmake.in include/reserve.h FORCE
	@mkdir -p $(B)/cmake
	sed $(CMAKE_SUBST) $< >$@

install: $(CMAKE_PKG)

.PHONY: check-cmake
check-cmake: lib
	tools/mariadb.sh run tests/install-test.sh --cmake-only

# The older names of the targets above.
.PHONY: cmake-test
cmake-test: check-cmake
