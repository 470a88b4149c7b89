#!/usr/bin/env bash
# Installs (if missing) what `npm ci` needs to compile better-sqlite3: a C++ compiler, make and
# Python for node-gyp. Its prebuilt binaries are downloaded from GitHub, which a machine that only
# reaches the package registries cannot do; node-gyp then builds SQLite from the package's sources.
set -euo pipefail
SVC_NAME=build-tools
# shellcheck source=services/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/services/lib.sh"

missing=()
have g++ || missing+=(g++)
have make || missing+=(make)
have python3 || missing+=(python3)
if ((${#missing[@]})); then
  apt_install "${missing[@]}"
else
  log "g++, make and python3 are present"
fi
