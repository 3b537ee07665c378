#!/usr/bin/env bash
# A MariaDB to try libreserve against, that stays up: `make try-db` and
# `make try-db-stop`.  The server is tools/mariadb.sh's throwaway server
# (a data directory of its own, a private Unix socket, no TCP port), with
# the database and account the quick-starts name by default (shop, with
# the password secret) and the schema loaded; it prints the RSV_DSN line
# to paste.  Usage:
#   tools/try-db.sh start [DIR]   start it in DIR (default build/try-db), or
#                                 find it running there; print the line
#   tools/try-db.sh stop [DIR]    stop it and remove DIR
#   tools/try-db.sh setup SOCKET DATABASE USER PASSWORD
#                                 on the server at SOCKET (as root, or
#                                 RSV_TEST_USER/RSV_TEST_PASSWORD): create
#                                 the database and the account, load the
#                                 schema, print the dsn (tests use it)
set -euo pipefail
cd "$(dirname "$0")/.."
tree=$PWD

client() {
  local c
  c=$(command -v mariadb || command -v mysql) || {
    echo "try-db: the mariadb client is missing (apt-get install mariadb-client)" >&2
    return 1
  }
  MYSQL_PWD=${RSV_TEST_PASSWORD:-} "$c" --no-defaults --socket="$socket" -u"${RSV_TEST_USER:-root}" "$@"
}

# A dsn's parts with %XX escapes where they need them.
esc() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe="/"))' "$1"; }

setup() {
  local db=$1 user=$2 pw=$3
  client -e "CREATE DATABASE IF NOT EXISTS \`$db\`;
    CREATE USER IF NOT EXISTS '$user'@'localhost' IDENTIFIED BY '$pw';
    GRANT SELECT, INSERT, UPDATE, DELETE, EXECUTE ON \`$db\`.* TO '$user'@'localhost'"
  client "$db" <"$tree/sql/schema.sql"
  echo "mariadb://$(esc "$user"):$(esc "$pw")@localhost/$(esc "$db")?socket=$(esc "$socket")"
}

cmd=${1:-}
case "$cmd" in
  start)
    dir=$(realpath -m "${2:-build/try-db}")
    socket=$dir/mysqld.sock
    if [ -S "$socket" ] && client -e 'SELECT 1' >/dev/null 2>&1; then
      echo "try-db: the server in $dir is running"
    elif [ -d "$dir/data/mysql" ]; then
      tools/mariadb.sh resume "$dir" >/dev/null
      echo "try-db: started the server in $dir again"
    else
      rm -rf "$dir"
      tools/mariadb.sh start "$dir" >/dev/null
      echo "try-db: started a MariaDB in $dir (socket $socket, no TCP port)"
    fi
    dsn=$(setup shop shop secret)
    echo "try-db: database shop, account shop (password secret), schema loaded; stop it with make try-db-stop"
    echo
    echo "export RSV_DSN='$dsn'"
    ;;
  stop)
    dir=$(realpath -m "${2:-build/try-db}")
    tools/mariadb.sh stop "$dir"
    rm -rf "$dir"
    echo "try-db: stopped the server in $dir and removed it"
    ;;
  setup)
    [ $# -eq 5 ] || { echo "usage: $0 setup SOCKET DATABASE USER PASSWORD" >&2; exit 2; }
    socket=$2
    setup "$3" "$4" "$5"
    ;;
  *) echo "usage: $0 start [DIR] | stop [DIR] | setup SOCKET DATABASE USER PASSWORD" >&2; exit 2 ;;
esac
