#!/usr/bin/env bash
# shellcheck disable=SC2016  # single-quoted `bash -c` bodies get their values as arguments
# RabbitMQ from Debian's packages on 127.0.0.1:5672 (user guest, password guest).
set -euo pipefail
SVC_NAME=rabbitmq
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

case "${1:-start}" in
  start) ;;
  *) die "usage: $0 [start]  (this script only installs and starts; stop the server with its own tools)" ;;
esac

HOST=127.0.0.1
PORT=5672
START_TIMEOUT="${OUTBOXER_RABBITMQ_START_TIMEOUT:-120}"

# A broker that is up answers the AMQP 0-9-1 protocol header with a Connection.Start method frame
# (frame type 1 on channel 0).
amqp_ready() {
  local first
  first="$(timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2"; printf "AMQP\x00\x00\x09\x01" >&3; head -c 3 <&3' \
    _ "$HOST" "$PORT" 2>/dev/null | od -An -tx1 | tr -d ' \n')" || return 1
  [[ "$first" == 010000 ]]
}

if ! port_open "$HOST" "$PORT"; then
  have rabbitmq-server || [[ -x /usr/sbin/rabbitmq-server ]] || apt_install rabbitmq-server
  # The package's post-install may already be starting one: give it a moment before starting another.
  if ! port_open "$HOST" "$PORT" && ! pgrep -u rabbitmq -f 'beam.*rabbit' >/dev/null 2>&1; then
    log "starting rabbitmq-server (takes 5-20 s)"
    as_root rabbitmq-server -detached >&2
  fi
fi
wait_until "$START_TIMEOUT" "RabbitMQ AMQP handshake on $HOST:$PORT" amqp_ready ||
  die "RabbitMQ does not answer AMQP on $HOST:$PORT (see /var/log/rabbitmq/)"
log "ready: amqp://guest:guest@$HOST:$PORT"
