#!/usr/bin/env bash
# Makes sure the build and test dependencies are installed.
#
# Checks for a C compiler, make, pkg-config, MariaDB Connector/C
# (libmariadb-dev), Check, the MariaDB server and client, and Python 3;
# "valgrind" and "fuzz" also for valgrind, resp. clang with libFuzzer.
# "packages PKG..." checks for exactly those Debian packages (the extra
# needs of one target or test: galera-4, nodejs, a Python module ...).
# Run as root it installs what is missing with apt-get; otherwise it prints
# the exact command to run and fails.
# Usage: tools/deps.sh [build|test|valgrind|fuzz] | tools/deps.sh packages PKG...
set -euo pipefail
what=${1:-test}

missing=()
have() { command -v "$1" >/dev/null 2>&1; }

# What the project's own builds and tests need.
project_needs() {
  have cc || have gcc || missing+=(gcc)
  have c++ || have g++ || missing+=(g++)
  have make || missing+=(make)
  have pkg-config || missing+=(pkg-config)
  if ! have pkg-config || ! pkg-config --exists libmariadb 2>/dev/null; then
    missing+=(libmariadb-dev)
  fi
  if [ "$what" = valgrind ]; then
    have valgrind || missing+=(valgrind)
  fi
  if [ "$what" = fuzz ]; then
    have clang || missing+=(clang)
  fi
  if [ "$what" != build ]; then
    if ! have pkg-config || ! pkg-config --exists check 2>/dev/null; then
      missing+=(check)
    fi
    [ -x /usr/sbin/mariadbd ] || have mariadbd || missing+=(mariadb-server)
    have mariadb || missing+=(mariadb-client)
    have python3 || missing+=(python3)
  fi
}

if [ "$what" = packages ]; then
  shift
  for p in "$@"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q ' installed$' ||
      missing+=("$p")
  done
else
  project_needs
fi

[ ${#missing[@]} -eq 0 ] && exit 0

cmd="apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=120 ${missing[*]}"
if [ "$(id -u)" = 0 ] && have apt-get; then
  echo "deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  # The package lists may be missing on a fresh machine.
  apt-get update -qq >/dev/null || true
  # Keep the system MariaDB service from starting: tests run their own.
  policy=/usr/sbin/policy-rc.d
  made_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"; made_policy=1
  fi
  set +e
  $cmd >/tmp/libreserve-deps.log 2>&1
  status=$?
  set -e
  [ $made_policy = 1 ] && rm -f "$policy"
  if [ $status -ne 0 ]; then
    tail -20 /tmp/libreserve-deps.log >&2
    echo "deps: '$cmd' failed" >&2
    exit 1
  fi
  exit 0
fi
echo "deps: missing ${missing[*]}. Install them with:" >&2
echo "  sudo apt-get update && sudo $cmd" >&2
exit 1
