# Go binding (bindings/go, the module libreserve/reserve: cgo, the
# standard library only).  Included by the top-level Makefile.
#
#   make go-deps    Debian's golang-go (apt-get, as root, when go is
#                   missing); never fails: the tests skip without go
#   make check-go    go vet and go test ./... (the package, the example
#                   server, the README's program) against a throwaway
#                   MariaDB
#
# make check does both: go-deps before the tests, bindings/go/go-test.sh
# among them.

CHECK_EXTRA_BUILD += go-deps
CHECK_EXTRA += bindings/go/go-test.sh

.PHONY: go-deps check-go

go-deps:
	@command -v go >/dev/null 2>&1 || tools/deps.sh packages golang-go || \
	  echo "go deps: go is missing: the Go tests will be skipped"

check-go: lib go-deps
	tools/mariadb.sh run bindings/go/go-test.sh

# The older names of the targets above.
.PHONY: go-test
go-test: check-go
