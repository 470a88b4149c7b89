#!/usr/bin/env bash
# PostgreSQL from Debian's packages (15 on bookworm) for the integration tests.
#
# Ensures: a server answers on 127.0.0.1:5432; user postgres connects over TCP without a password
# (postgres://postgres@127.0.0.1:5432/postgres, trust auth); max_connections >= 200; database
# outboxer_test exists.
#
# Knobs: OUTBOXER_PG_PORT (5432), OUTBOXER_PG_CLUSTER (main), OUTBOXER_PG_DB (outboxer_test),
# OUTBOXER_PG_ALLOW_RESTART=1 lets the script restart an existing server to raise max_connections
# (it always may on a cluster it created, and when CI=true).
set -euo pipefail
SVC_NAME=postgres
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

case "${1:-start}" in
  start) ;;
  *) die "usage: $0 [start]  (this script only installs and starts; stop the server with its own tools)" ;;
esac

HOST=127.0.0.1
PORT="${OUTBOXER_PG_PORT:-5432}"
CLUSTER="${OUTBOXER_PG_CLUSTER:-main}"
DB="${OUTBOXER_PG_DB:-outboxer_test}"
MIN_CONNECTIONS=200
FRESH=0

# The Debian cluster serving $PORT (or named $CLUSTER): sets PG_VER, PG_NAME, PG_STATUS; 1 if none.
find_cluster() {
  PG_VER="" PG_NAME="" PG_STATUS=""
  have pg_lsclusters || return 1
  local line
  line="$(pg_lsclusters -h 2>/dev/null | awk -v p="$PORT" '$3 == p { print; exit }')"
  [[ -n "$line" ]] || line="$(pg_lsclusters -h 2>/dev/null | awk -v c="$CLUSTER" '$2 == c { print; exit }')"
  [[ -n "$line" ]] || return 1
  read -r PG_VER PG_NAME _ PG_STATUS _ <<<"$line"
  if [[ "$(pg_lsclusters -h | awk -v v="$PG_VER" -v c="$PG_NAME" '$1 == v && $2 == c { print $3 }')" != "$PORT" ]]; then
    die "cluster $PG_VER/$PG_NAME exists but does not use port $PORT"
  fi
}

ensure_cluster() {
  if find_cluster; then return 0; fi
  if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
    apt_install postgresql
    # Debian's postinst creates (and may start) cluster <ver>/main on 5432.
    if find_cluster; then FRESH=1; return 0; fi
  fi
  local ver
  ver="$(printf '%s\n' /usr/lib/postgresql/*/bin/postgres | awk -F/ '{ print $5 }' | sort -V | tail -n1)"
  log "creating cluster $ver/$CLUSTER on port $PORT"
  as_root pg_createcluster "$ver" "$CLUSTER" -p "$PORT" >&2
  FRESH=1
  find_cluster || die "pg_createcluster did not create $ver/$CLUSTER"
}

pg_conf_dir() { echo "/etc/postgresql/$PG_VER/$PG_NAME"; }

configure_fresh() {
  local hba
  hba="$(pg_conf_dir)/pg_hba.conf"
  log "fresh cluster: trust auth (local socket, 127.0.0.1, ::1) in $hba, max_connections $MIN_CONNECTIONS"
  as_root cp "$hba" "$hba.orig-outboxer" 2>/dev/null || true
  as_root tee "$hba" >/dev/null <<'EOF'
# Written by outboxer scripts/services/postgres.sh: a throw-away test server, trust everything local.
# TYPE  DATABASE        USER            ADDRESS                 METHOD
local   all             all                                     trust
host    all             all             127.0.0.1/32            trust
host    all             all             ::1/128                 trust
local   replication     all                                     trust
host    replication     all             127.0.0.1/32            trust
host    replication     all             ::1/128                 trust
EOF
  # Set before the first start, so no restart is needed (a server the package already started gets
  # one in ensure_max_connections).
  as_root pg_conftool "$PG_VER" "$PG_NAME" set max_connections "$MIN_CONNECTIONS"
}

# Without systemd (containers, CI machines) pg_ctlcluster runs pg_ctl itself; under systemd it goes
# through the postgresql@<ver>-<name> unit so that systemd keeps tracking the server.
pg_ctl_cluster() {
  if [[ -d /run/systemd/system ]]; then
    as_root pg_ctlcluster "$PG_VER" "$PG_NAME" "$@" >&2
  else
    as_root pg_ctlcluster --skip-systemctl-redirect "$PG_VER" "$PG_NAME" "$@" >&2
  fi
}

start_server() {
  find_cluster
  if [[ "$PG_STATUS" == online* ]]; then
    ((FRESH)) && pg_ctl_cluster reload
    return 0
  fi
  log "starting cluster $PG_VER/$PG_NAME"
  pg_ctl_cluster start
}

psql_tcp() { psql -X -q -w -h "$HOST" -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -Atc "$1"; }

can_connect() { psql_tcp 'select 1' >/dev/null 2>&1; }

ensure_auth() {
  if can_connect; then return 0; fi
  find_cluster || die "cannot connect as postgres@$HOST:$PORT without a password, and no Debian cluster serves that port to fix it"
  local hba
  hba="$(pg_conf_dir)/pg_hba.conf"
  warn "postgres@$HOST:$PORT needs a password; adding trust lines for 127.0.0.1 and ::1 at the top of $hba"
  as_root cp "$hba" "$hba.orig-outboxer"
  {
    echo "# Added by outboxer scripts/services/postgres.sh (tests connect without a password)"
    echo "host    all             all             127.0.0.1/32            trust"
    echo "host    all             all             ::1/128                 trust"
    as_root cat "$hba.orig-outboxer"
  } | as_root tee "$hba" >/dev/null
  pg_ctl_cluster reload
  wait_until 10 "trust auth after reload" can_connect ||
    die "still cannot connect as postgres@$HOST:$PORT without a password"
}

ensure_max_connections() {
  local current
  current="$(psql_tcp 'show max_connections')"
  if ((current >= MIN_CONNECTIONS)); then return 0; fi
  # The value the config files will give at the next start (an earlier ALTER SYSTEM may be pending).
  local pending
  pending="$(psql_tcp "select setting from pg_file_settings where name = 'max_connections' order by seqno desc limit 1")"
  if [[ ! "$pending" =~ ^[0-9]+$ ]] || ((pending < MIN_CONNECTIONS)); then
    log "max_connections is $current; setting it to $MIN_CONNECTIONS (ALTER SYSTEM)"
    psql_tcp "alter system set max_connections = $MIN_CONNECTIONS" >/dev/null
  fi
  if ((FRESH)) || [[ "${CI:-}" == true || "${OUTBOXER_PG_ALLOW_RESTART:-}" == 1 ]]; then
    find_cluster || die "cannot restart: no Debian cluster serves port $PORT"
    log "restarting cluster $PG_VER/$PG_NAME for max_connections"
    pg_ctl_cluster restart
    wait_for_port "$HOST" "$PORT" 60 PostgreSQL || die "PostgreSQL did not come back after restart"
    wait_until 30 "PostgreSQL after restart" can_connect || die "PostgreSQL did not accept connections after restart"
  else
    warn "max_connections stays $current until PostgreSQL restarts (rerun with OUTBOXER_PG_ALLOW_RESTART=1 to restart now)"
  fi
}

ensure_db() {
  if [[ "$(psql_tcp "select 1 from pg_database where datname = '$DB'")" == 1 ]]; then return 0; fi
  log "creating database $DB"
  psql_tcp "create database \"$DB\"" >/dev/null 2>&1 ||
    [[ "$(psql_tcp "select 1 from pg_database where datname = '$DB'")" == 1 ]] ||
    die "could not create database $DB"
}

main() {
  if ! port_open "$HOST" "$PORT"; then
    ensure_cluster
    ((FRESH)) && configure_fresh
    start_server
  fi
  have psql || apt_install postgresql-client
  wait_for_port "$HOST" "$PORT" 60 PostgreSQL || die "PostgreSQL is not listening on $HOST:$PORT"
  # The port opens a moment before the server accepts logins ("the database system is starting up").
  local deadline=$((SECONDS + 60))
  until can_connect || ! psql -X -w -h "$HOST" -p "$PORT" -U postgres -d postgres -c 'select 1' 2>&1 |
      grep -q 'starting up'; do
    ((SECONDS < deadline)) || break
    sleep 0.5
  done
  ensure_auth
  ensure_max_connections
  ensure_db
  log "ready: postgres://postgres@$HOST:$PORT/postgres ($(psql_tcp 'show server_version'), max_connections $(psql_tcp 'show max_connections'), database $DB)"
}

main "$@"
