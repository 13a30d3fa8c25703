#!/usr/bin/env bash
# Installs what internal/cli's MCP interoperability test needs: Node.js
# (Debian's nodejs and npm, when missing) and the official TypeScript MCP
# SDK into internal/cli/testdata/mcp-interop/node_modules, exactly as
# pinned by the committed package-lock.json. Idempotent; quiet when
# everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
usage_or_none "$@"

dir=internal/cli/testdata/mcp-interop
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "==> installing Node.js (apt-get)"
  sudo_if_needed apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
want=$(node -e 'const l=require(process.argv[1]); console.log(l.packages["node_modules/@modelcontextprotocol/sdk"].version)' "$PWD/$dir/package-lock.json")
have=$(node -e 'try { console.log(require(process.argv[1]).version) } catch { console.log("") }' "$PWD/$dir/node_modules/@modelcontextprotocol/sdk/package.json")
if [ "$want" != "$have" ]; then
  echo "==> npm ci @modelcontextprotocol/sdk $want into $dir"
  (cd "$dir" && npm ci --no-audit --no-fund --silent)
fi
