#!/usr/bin/env bash
# shellcheck disable=SC2016  # single-quoted `bash -c` bodies get their values as arguments
# NATS with JetStream from Debian's packages on 127.0.0.1:4222.
set -euo pipefail
SVC_NAME=nats
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

case "${1:-start}" in
  start) ;;
  *) die "usage: $0 [start]  (this script only installs and starts; stop the server with its own tools)" ;;
esac

HOST=127.0.0.1
PORT=4222

# The first line a NATS server sends is its INFO JSON.
nats_info() {
  timeout 2 bash -c 'exec 3<>"/dev/tcp/$1/$2"; read -r l <&3; printf "%s\n" "$l"' _ "$HOST" "$PORT" 2>/dev/null
}

if ! port_open "$HOST" "$PORT"; then
  have nats-server || [[ -x /usr/sbin/nats-server ]] || apt_install nats-server
  if ! port_open "$HOST" "$PORT"; then
    log "starting nats-server with JetStream"
    as_root mkdir -p /var/lib/nats-server
    as_root start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
      -a "$HOST" -p "$PORT" -js -sd /var/lib/nats-server -l /var/log/nats-server.log >&2
  fi
fi
wait_for_port "$HOST" "$PORT" 30 NATS || die "NATS is not listening on $HOST:$PORT"
deadline=$((SECONDS + 30))
info="$(nats_info || true)"
until [[ "$info" == INFO* ]]; do
  ((SECONDS < deadline)) || die "port $PORT answers but sends no NATS INFO line"
  sleep 0.5
  info="$(nats_info || true)"
done
if [[ "$info" != *'"jetstream":true'* ]]; then
  # On a machine with systemd, installing the package starts the nats-server unit with
  # /etc/nats-server.conf, which has no JetStream: turn it on there and restart the unit.
  if [[ -d /run/systemd/system ]] && systemctl is-active --quiet nats-server 2>/dev/null; then
    log "the nats-server systemd unit runs without JetStream: enabling it in /etc/nats-server.conf"
    as_root mkdir -p /var/lib/nats-server
    as_root chown nats:nats /var/lib/nats-server 2>/dev/null || true
    if ! grep -q jetstream /etc/nats-server.conf; then
      printf '\n# Added by outboxer scripts/services/nats.sh\njetstream {\n  store_dir: "/var/lib/nats-server"\n}\n' |
        as_root tee -a /etc/nats-server.conf >/dev/null
    fi
    as_root systemctl restart nats-server
    wait_for_port "$HOST" "$PORT" 30 NATS || die "NATS did not come back after the restart"
    sleep 0.5
    info="$(nats_info || true)"
  fi
  [[ "$info" == *'"jetstream":true'* ]] ||
    die "the NATS server on $HOST:$PORT runs without JetStream; restart it with -js"
fi
version="$(sed -n 's/.*"version":"\([^"]*\)".*/\1/p' <<<"$info")"
log "ready: nats://$HOST:$PORT (nats-server $version, JetStream on)"
