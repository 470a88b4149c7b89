#!/usr/bin/env bash
# Install (if missing) and start (if not running) the servers the integration tests need, and wait
# until each answers. Safe to run again: running services are left alone.
#
#   scripts/services/up.sh                   all of them
#   scripts/services/up.sh postgres kafka    only these
#
# Services: postgres (5432), mariadb (3306), redis (6379), rabbitmq (5672), nats (4222), kafka (9092; SASL/PLAIN on 9094),
# sqs (9324).
# Kafka and ElasticMQ (sqs) keep jars, config, data and logs under
# ${OUTBOXER_SERVICES_DIR:-~/.cache/outboxer-services}; stop them with `kafka.sh stop`, `sqs.sh stop`.
# Exits non-zero when any service did not come up (the others are still tried).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SVC_NAME=up
# shellcheck source=lib.sh
source "$HERE/lib.sh"

ALL=(postgres mariadb redis rabbitmq nats kafka sqs)
declare -A ENDPOINT=(
  [postgres]="postgres://postgres@127.0.0.1:5432/postgres"
  [mariadb]="mysql://root@127.0.0.1:3306/test"
  [redis]="redis://127.0.0.1:6379"
  [rabbitmq]="amqp://guest:guest@127.0.0.1:5672"
  [nats]="nats://127.0.0.1:4222"
  [kafka]="127.0.0.1:9092"
  [sqs]="http://127.0.0.1:9324"
)

services=("$@")
((${#services[@]})) || services=("${ALL[@]}")
for s in "${services[@]}"; do
  [[ -n "${ENDPOINT[$s]:-}" ]] || die "unknown service '$s' (known: ${ALL[*]})"
done

# apt-get update at most once for the whole run, whichever script needs it first.
OUTBOXER_APT_STAMP="$(mktemp "${TMPDIR:-/tmp}/outboxer-apt.XXXXXX")"
export OUTBOXER_APT_STAMP
trap 'rm -f "$OUTBOXER_APT_STAMP"' EXIT

summary=()
failed=()
for s in "${services[@]}"; do
  t0=$SECONDS
  if "$HERE/$s.sh" start; then
    summary+=("$(printf 'services: %-8s up    %-45s (%ds)' "$s" "${ENDPOINT[$s]}" $((SECONDS - t0)))")
  else
    summary+=("$(printf 'services: %-8s FAILED (%ds)' "$s" $((SECONDS - t0)))")
    failed+=("$s")
  fi
done

printf '%s\n' "${summary[@]}"
if ((${#failed[@]})); then
  printf 'services: FAILED to start: %s\n' "${failed[*]}" >&2
  exit 1
fi
