#!/usr/bin/env bash
# tests/quickstart-test.sh - every quick-start as a newcomer runs it: a
# fresh copy of the tree (the files git knows), `make install` into a
# prefix of its own, the database made as `make try-db` makes it
# (tools/try-db.sh setup) on the server in RSV_TEST_SOCKET, then each
# language's quick-start copied as its README prints it into an
# application directory outside the tree, installed as the README says,
# and run with RSV_DSN naming that database (and PKG_CONFIG_PATH the
# prefix's pkgconfig directory, as make install tells a private prefix;
# no LIBRESERVE_PATH, no LD_LIBRARY_PATH).  Each must reach its first
# reserve and sell ("sold 2 hoodies"), and, run again, answer the
# already-claimed checkout it handles; with RSV_DSN empty, it must take
# the documented fallback (the system server's socket), as when unset.
# A language whose runtime is missing is skipped, as its own tests are
# (the npm registry too, for Node.js).
#
# Without PKG_CONFIG_PATH, each binding must then fail with its own
# error naming the places it tried.
#
# A language is one function qs_NAME and one word of LANGS: in the
# application directory it is run in, qs_NAME installs what the README
# says and writes the quick-start as printed, and run.sh, the command
# that runs it (run with RSV_DSN set, twice, then without pkg-config's
# help); it returns 77 when the language's runtime is missing.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
repo=$PWD
# shellcheck source=tests/testlib.sh
. tests/testlib.sh quickstart
LANGS="c python node ruby go php"

# ---- the tree as a clone has it, installed into a prefix ----
clone=$tmp/libreserve prefix=$tmp/prefix
mkdir -p "$clone"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -z -c -o --exclude-standard |
    xargs -0 -r sh -c 'for f; do if [ -e "$f" ] || [ -L "$f" ]; then printf "%s\0" "$f"; fi; done' sh |
    tar -cf - --null --no-recursion -T - | tar -xf - -C "$clone"
else
  tar -cf - --exclude=./build --exclude=node_modules . | tar -xf - -C "$clone"
fi
if (cd "$clone" && make -s lib >"$tmp/make.log" 2>&1 && make -s install PREFIX="$prefix" >"$tmp/install.log" 2>&1); then
  ok "make install PREFIX=$prefix from a fresh copy of the tree"
else
  tail -20 "$tmp/make.log" "$tmp/install.log"; bad "make install"; finish; exit
fi
if grep -q "PKG_CONFIG_PATH=$prefix/lib/pkgconfig" "$tmp/install.log"; then
  ok "make install says what to do for a prefix outside the loader's paths"
else
  cat "$tmp/install.log"; bad "make install says nothing about $prefix/lib"
fi
rm -rf "$clone/build" # what the programs load is the installed library

# ---- a database for each language, as make try-db makes it ----
cleanup_extra() {
  for lang in $LANGS; do sql -e "DROP DATABASE IF EXISTS \`${DB}_$lang\`" >/dev/null 2>&1; done
  sql -e "DROP USER IF EXISTS 'qs_$$'@'localhost'" >/dev/null 2>&1
}

# The first fenced block of FILE in LANG that contains MARK (indented
# blocks of a list item too, without their indentation).
block() {
  awk -v lang="$2" -v mark="$3" '
    !c && match($0, /^ *```/) && substr($0, RLENGTH + 1) == lang { ind = RLENGTH - 3; b = ""; c = 1; next }
    c && $0 ~ /^ *```$/ { if (index(b, mark)) { printf "%s", b; exit } c = 0; next }
    c { b = b substr($0, ind + 1) "\n" }' "$1"
}
# What a newcomer's shell has: no LIBRESERVE_PATH, no LD_LIBRARY_PATH.
app_env() {
  env -u LIBRESERVE_PATH -u LD_LIBRARY_PATH -u PYTHONPATH -u RUBYLIB -u NODE_PATH \
    RSV_DSN="$dsn" PKG_CONFIG_PATH="${pc_path-$prefix/lib/pkgconfig}" "$@"
}

qs_c() {
  block "$clone/README.md" c "int main(void)" >minimal.c
  local cc_line
  cc_line=$(sed -n '1s|^/\* *\(cc minimal.c .*\)$|\1|p' minimal.c)
  [ -n "$cc_line" ] || { echo "no cc line in the program's first comment"; return 1; }
  app_env sh -ec "$cc_line -o minimal" || return 1
  echo './minimal' >run.sh
}

qs_python() {
  command -v python3 >/dev/null && python3 -c 'import venv, ensurepip' 2>/dev/null || return 77
  block "$clone/bindings/python/README.md" sh "pip install bindings/python" |
    sed "s|bindings/python|$clone/bindings/python|" >install.sh
  app_env sh -e install.sh >install.log 2>&1 || { tail -20 install.log; return 1; }
  block "$clone/bindings/python/README.md" python "rsv.connect" >checkout.py
  echo 'venv/bin/python checkout.py' >run.sh
}

qs_node() {
  command -v node >/dev/null && command -v npm >/dev/null || return 77
  local cmd
  cmd=$(grep -m1 -o 'npm install [^#]*/path/to/libreserve/bindings/node' "$clone/bindings/node/README.md")
  echo '{"name": "app", "private": true}' >package.json
  if ! app_env npm_config_prefer_offline=true npm_config_audit=false npm_config_fund=false \
      npm_config_update_notifier=false sh -ec "${cmd//\/path\/to\/libreserve/$clone}" >install.log 2>&1; then
    if grep -qiE 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|network' install.log; then return 77; fi
    tail -20 install.log; return 1
  fi
  block "$clone/bindings/node/README.md" js "rsv.open" >checkout.mjs
  echo 'node checkout.mjs' >run.sh
}

qs_ruby() {
  command -v ruby >/dev/null && command -v gem >/dev/null && ruby -e 'require "ffi"' 2>/dev/null || return 77
  local gems=$PWD/gems
  printf 'gem: --no-document\n' >gemrc
  (cd "$clone" && block bindings/ruby/README.md sh "gem install" |
     app_env GEM_HOME="$gems" GEMRC="$OLDPWD/gemrc" sh -e) >install.log 2>&1 || { tail -20 install.log; return 1; }
  block "$clone/bindings/ruby/README.md" ruby "Libreserve.open" >checkout.rb
  echo "GEM_HOME='$gems' GEM_PATH='$gems:$(gem env gempath)' ruby checkout.rb" >run.sh
}

qs_go() {
  command -v go >/dev/null || return 77
  block "$clone/bindings/go/README.md" go "func main()" >main.go
  local script
  script=$(block "$clone/bindings/go/README.md" sh "go mod init")
  # (no network: the module needs none; a build cache of the tree's)
  local goenv="GOPROXY=off GOTOOLCHAIN=local GOFLAGS=-mod=mod GOCACHE='$repo/build/go/cache' GOPATH='$repo/build/go/path'"
  # the README's commands end with its `go run .`: that first run is run.sh's
  script=$(grep -v '^go run' <<<"${script//\/path\/to\/libreserve/$clone}")
  app_env sh -ec "export $goenv; $script" >install.log 2>&1 || { tail -20 install.log; return 1; }
  echo "export $goenv; go run ." >run.sh
}

qs_php() {
  command -v php >/dev/null && command -v composer >/dev/null &&
    php -r 'exit(extension_loaded("ffi") ? 0 : 1);' || return 77
  # an application of its own (composer config needs its composer.json),
  # offline: Packagist off, as for any application whose other
  # dependencies would come from it
  echo '{"name": "example/shop", "repositories": {"packagist.org": false}}' >composer.json
  block "$clone/bindings/php/README.md" sh "composer require" |
    sed "s|/path/to/libreserve|$clone|g" >install.sh
  app_env COMPOSER_HOME="$PWD/composer-home" COMPOSER_CACHE_DIR="$PWD/composer-cache" \
    COMPOSER_DISABLE_NETWORK=1 COMPOSER_NO_INTERACTION=1 COMPOSER_ALLOW_SUPERUSER=1 \
    sh -e install.sh >install.log 2>&1 || { tail -20 install.log; return 1; }
  block "$clone/bindings/php/README.md" php "Context::open" >checkout.php
  echo 'php checkout.php' >run.sh
}

for lang in $LANGS; do
  app=$tmp/app-$lang
  mkdir -p "$app"
  dsn=$("$clone/tools/try-db.sh" setup "$RSV_TEST_SOCKET" "${DB}_$lang" "qs_$$" "secret$$") ||
    { bad "$lang: tools/try-db.sh setup"; continue; }
  out=$(cd "$app" && "qs_$lang" 2>&1); rc=$?
  if [ $rc -eq 77 ]; then echo "skip $lang: its runtime (or package registry) is missing"; continue; fi
  [ $rc -eq 0 ] && { out=$(cd "$app" && app_env sh -e run.sh 2>&1); rc=$?; }
  if [ $rc -eq 0 ] && grep -q "sold 2 hoodies" <<<"$out"; then
    ok "$lang: the quick-start reaches its first reserve and sells"
  else
    echo "$out" | tail -15 | sed 's/^/     /'; bad "$lang: the quick-start as printed (rc $rc)"
    continue
  fi
  # again: the same token, already claimed, handled
  out=$(cd "$app" && app_env sh -e run.sh 2>&1); rc=$?
  if [ $rc -eq 0 ] && grep -q "checkout-9001 was already claimed" <<<"$out"; then
    ok "$lang: run again, it handles the already-claimed checkout"
  else
    echo "$out" | tail -15 | sed 's/^/     /'; bad "$lang: the second run (rc $rc)"
  fi
  # an empty RSV_DSN is no DSN: the documented fallback, the system
  # server's socket (none here, or not ours to write to: then unchecked);
  # the server's own words, not the program's text in a stack trace
  if [ ! -e /run/mysqld/mysqld.sock ]; then
    out=$(cd "$app" && dsn='' app_env sh -e run.sh 2>&1); rc=$?
    if [ $rc -ne 0 ] && grep -q "through socket '/run/mysqld/mysqld.sock'" <<<"$out"; then
      ok "$lang: an empty RSV_DSN means the fallback"
    else
      echo "$out" | tail -15 | sed 's/^/     /'; bad "$lang: an empty RSV_DSN (rc $rc)"
    fi
  fi
  # and without pkg-config's help: the binding's own error, naming the
  # places it tried (the C program has its rpath)
  [ "$lang" = c ] && continue
  out=$(cd "$app" && pc_path=/nonexistent app_env sh -e run.sh 2>&1); rc=$?
  if [ $rc -ne 0 ] && grep -q "cannot load the C library libreserve.so.0; tried LIBRESERVE_PATH (not set); pkg-config --variable=libdir reserve (no reserve.pc in its search path); the system loader" <<<"$out" &&
     ! grep -q "cannot load such file" <<<"$out"; then
    ok "$lang: no library to be found: its own error names each place tried"
  else
    echo "$out" | tail -15 | sed 's/^/     /'; bad "$lang: no library to be found (rc $rc)"
  fi
done
finish
