#!/usr/bin/env bash
# shellcheck disable=SC2016  # single-quoted `bash -c` bodies get their values as arguments
# MariaDB from Debian's packages (10.11 on Debian 12) on 127.0.0.1:3306: user root with an empty
# password over TCP, database `test`.
set -euo pipefail
SVC_NAME=mariadb
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

case "${1:-start}" in
  start) ;;
  *) die "usage: $0 [start]  (this script only installs and starts; stop the server with its own tools)" ;;
esac

HOST=127.0.0.1
PORT=3306

tcp_login() {
  mariadb --protocol=TCP -h "$HOST" -P "$PORT" -uroot -e 'SELECT 1' test >/dev/null 2>&1
}

if ! port_open "$HOST" "$PORT"; then
  [[ -x /usr/sbin/mariadbd ]] || apt_install mariadb-server
  # The package's post-install may already have started one.
  if ! port_open "$HOST" "$PORT"; then
    log "starting mariadbd"
    as_root install -d -o mysql -g mysql /run/mysqld
    # Debian's /etc/mysql config: datadir /var/lib/mysql (initialised by the package), user mysql,
    # bind-address 127.0.0.1, socket /run/mysqld/mysqld.sock.
    as_root start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
  fi
fi
wait_for_port "$HOST" "$PORT" 60 MariaDB || die "MariaDB is not listening on $HOST:$PORT"
if ! tcp_login; then
  # A fresh install lets only the system's root in, through the socket (unix_socket): give the tests
  # root over TCP from 127.0.0.1 with an empty password, and the database they connect to.
  log "granting root@127.0.0.1 (empty password) and creating database test"
  wait_until 30 "the MariaDB socket" as_root mariadb -e 'SELECT 1' ||
    die "cannot log in to MariaDB through its socket as root"
  as_root mariadb -e "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
    GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
    CREATE DATABASE IF NOT EXISTS test;"
fi
wait_until 30 "a root login over TCP" tcp_login || die "MariaDB on $HOST:$PORT refuses root over TCP"
# The chaos run's MariaDB variant (in npm test) makes throwaway servers with these two: a server
# found already listening (a container, another host's package) may have left them uninstalled.
if ! have mariadb-install-db || [[ ! -x /usr/sbin/mariadbd && ! -x /usr/bin/mariadbd ]]; then
  log "warning: mariadb-install-db or mariadbd is missing: the chaos run's MariaDB variant needs them (apt-get install mariadb-server, or set MARIADB_BIN)"
fi
log "ready: mysql://root@$HOST:$PORT/test"
