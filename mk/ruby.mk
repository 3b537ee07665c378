# Ruby binding (bindings/ruby, the gem `libreserve` over ffi).  Included
# by the top-level Makefile.
#
#   make ruby-deps    Debian's ruby and ruby-ffi (apt-get, as root, when
#                     either is missing); never fails: the tests skip
#                     without them
#   make check-ruby    the minitest suites, the gem built and installed as
#                     the README says, and the README's program, against
#                     a throwaway MariaDB
#
# make check does both: ruby-deps before the tests,
# bindings/ruby/ruby-test.sh among them.

CHECK_EXTRA_BUILD += ruby-deps
CHECK_EXTRA += bindings/ruby/ruby-test.sh

.PHONY: ruby-deps check-ruby

ruby-deps:
	@{ command -v ruby >/dev/null 2>&1 && ruby -e 'require "ffi"' >/dev/null 2>&1; } || \
	  tools/deps.sh packages ruby ruby-ffi || \
	  echo "ruby deps: ruby or ruby-ffi is missing: the Ruby tests will be skipped"

check-ruby: lib ruby-deps
	tools/mariadb.sh run bindings/ruby/ruby-test.sh

# The older names of the targets above.
.PHONY: ruby-test
ruby-test: check-ruby
