#!/usr/bin/env bash
# shellcheck disable=SC2016  # single-quoted `bash -c` bodies get their values as arguments
# Redis from Debian's packages on 127.0.0.1:6379 (in memory only: no RDB/AOF files).
set -euo pipefail
SVC_NAME=redis
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

case "${1:-start}" in
  start) ;;
  *) die "usage: $0 [start]  (this script only installs and starts; stop the server with its own tools)" ;;
esac

HOST=127.0.0.1
PORT=6379

redis_ping() {
  timeout 2 bash -c 'exec 3<>"/dev/tcp/$1/$2"; printf "PING\r\n" >&3; read -r l <&3; [[ "$l" == +PONG* ]]' \
    _ "$HOST" "$PORT" 2>/dev/null
}

if ! port_open "$HOST" "$PORT"; then
  have redis-server || apt_install redis-server
  # The package's post-install may already have started one.
  if ! port_open "$HOST" "$PORT"; then
    log "starting redis-server"
    as_root mkdir -p /var/lib/redis /var/log/redis
    as_root redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$PORT" --save "" --appendonly no \
      --dir /var/lib/redis --logfile /var/log/redis/ci.log >&2
  fi
fi
wait_for_port "$HOST" "$PORT" 30 Redis || die "Redis is not listening on $HOST:$PORT"
wait_until 30 "Redis PING" redis_ping || die "Redis on $HOST:$PORT does not answer PING"
log "ready: redis://$HOST:$PORT"
