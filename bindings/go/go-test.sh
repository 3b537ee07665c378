#!/usr/bin/env bash
# Runs the Go package's tests (go vet, go test ./...: the package, the
# example server, the README's program) against the server in
# RSV_TEST_SOCKET.  Start it under a throwaway server:
#   tools/mariadb.sh run bindings/go/go-test.sh [go test args...]
# (make check-go, and make check, install Debian's golang-go first:
# mk/go.mk.)  No network: GOPROXY=off, and the build cache and GOPATH live
# in the build directory.  Library: $LIBRESERVE_PATH if set, otherwise
# the in-tree build.  Without go it says why and skips (exit 0).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [ -z "${RSV_TEST_SOCKET:-}" ]; then
  echo "go-test.sh: RSV_TEST_SOCKET is not set; use: tools/mariadb.sh run $0" >&2
  exit 2
fi
if ! command -v go >/dev/null 2>&1; then
  echo "skip go: go is not installed (make go-deps installs it as root: apt-get install golang-go)"
  echo "go: 0 passed, 0 failed, 1 skipped"
  exit 0
fi
build=$repo/${RSV_BUILD:-build}
if [ -z "${LIBRESERVE_PATH:-}" ]; then
  [ -e "$build/libreserve.so.0" ] || { echo "go-test.sh: $build/libreserve.so.0 not built (make lib) and LIBRESERVE_PATH not set" >&2; exit 2; }
  export LIBRESERVE_PATH=$build/libreserve.so.0
fi
export GOPROXY=off GOTOOLCHAIN=local GOFLAGS= \
  GOCACHE=$repo/build/go/cache GOPATH=$repo/build/go/path
cd "$here" || exit 2
echo "$(go version), $LIBRESERVE_PATH"
go vet ./... || exit 1
if [ $# -eq 0 ]; then set -- ./...; fi
exec go test -count=1 "$@"
