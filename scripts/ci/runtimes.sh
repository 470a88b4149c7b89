#!/usr/bin/env bash
# The part of .ci/run on the other runtimes, after the Node 24 run in the checkout itself:
#
#   Node 22   the whole suite, in a copy of the checkout with its own `npm ci` (native modules are
#             compiled per Node ABI: a node_modules built under Node 24 crashes under 22)
#   oldest    the floor of package.json's engines: `npm run demo`, then the built package (dist/,
#             built under that Node) through the examples, the engine suites on SQLite and Postgres
#             and the SQLite and pg adapter suites, and the Kafka relay's (@platformatic/kafka 1.x
#             is the line for a Node below 22.22). It reuses the Node 22 copy: one major, one ABI.
#
# Writes .tmp/vitest-22.json and .tmp/vitest-oldest.json (read by scripts/test-summary.mjs) and
# exits non-zero when a step failed; the oldest-Node run runs even after the Node 22 one failed.
# (Each run is a subshell with `set -e`, its status read afterwards: `( … ) || x` would switch
# `set -e` off inside it.)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root=$PWD
copy="$root/.tmp/runtimes/22"
status=0
step() { echo "== $1"; step_started=$SECONDS; }
took() { echo "   ($((SECONDS - step_started)) s)"; }

step "Node 22: a copy of the checkout"
rm -rf "$copy" && mkdir -p "$copy"
tar -C "$root" --exclude=./node_modules --exclude=./.tmp --exclude=./dist --exclude=./.git -cf - . |
  tar -C "$copy" -xf -
took

(
  set -e
  cd "$copy"
  # shellcheck source=../node/use.sh
  source scripts/node/use.sh 22
  echo "   node $(node --version), npm $(npm --version)"
  step "Node 22: npm ci"
  npm ci --no-audit --no-fund
  took
  step "Node 22: native modules"
  npm run native
  took
  step "Node 22: tests"
  npm test -- --reporter=default --reporter=json --outputFile.json="$root/.tmp/vitest-22.json"
  took
)
(($? == 0)) || status=1

(
  set -e
  cd "$copy"
  # shellcheck source=../node/use.sh
  source scripts/node/use.sh oldest
  echo "   node $(node --version): the oldest Node package.json's engines allows"
  step "oldest Node: npm run demo"
  npm run demo >/dev/null
  took
  step "oldest Node: build, then the built package's tests"
  npm run build >/dev/null
  OUTBOXER_TEST_PACKAGE=dist npx vitest run examples test/engine \
    test/adapters/better-sqlite3.test.ts test/adapters/node-sqlite.test.ts test/adapters/pg.test.ts \
    test/relays/kafka.test.ts \
    --reporter=default --reporter=json --outputFile.json="$root/.tmp/vitest-oldest.json"
  took
)
(($? == 0)) || status=1

exit "$status"
