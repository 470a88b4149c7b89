#!/usr/bin/env bash
# Installs (if missing) Debian's Chromium, which the dashboard's browser tests drive with
# playwright-core (executablePath /usr/bin/chromium). Never `npx playwright install`: it downloads
# browsers from outside the package registries.
set -euo pipefail
SVC_NAME=chromium
# shellcheck source=services/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/services/lib.sh"

if [[ -x /usr/bin/chromium ]]; then
  log "$(/usr/bin/chromium --version 2>/dev/null || echo chromium) is present"
else
  apt_install chromium
fi
