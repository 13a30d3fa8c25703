#!/usr/bin/env bash
# Installs what sandbox/apipix's BR Code test reads the sandbox's codes
# with: Node.js (Debian's nodejs and npm, when missing) and pix-utils into
# sandbox/apipix/testdata/pixutils/node_modules, exactly as pinned by the
# committed package-lock.json. Idempotent; quiet when everything is
# already there.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
usage_or_none "$@"

npm_ci_pinned sandbox/apipix/testdata/pixutils pix-utils
