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

npm_ci_pinned internal/cli/testdata/mcp-interop @modelcontextprotocol/sdk
