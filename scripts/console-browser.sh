#!/usr/bin/env bash
# Installs what the console's browser test drives: Debian's chromium and the
# npm package playwright-core (into server/console/testdata/browser, from
# its committed package.json and package-lock.json). Idempotent and quiet
# when everything is already there. Playwright's own browser download is
# never used: the test points playwright-core at /usr/bin/chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
usage_or_none "$@"

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "==> installing ${missing[*]} (apt-get) for the console's browser test"
  sudo_if_needed apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

dir=server/console/testdata/browser
if [ ! -f "$dir/node_modules/playwright-core/package.json" ]; then
  echo "==> npm ci playwright-core (server/console/testdata/browser)"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
