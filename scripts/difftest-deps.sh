#!/usr/bin/env bash
# Installs what derive's differential test (derive/difftest) compares with:
# node + npm and the npm packages pinned in derive/difftest/testdata
# (package-lock.json), and Debian's python3-phonenumbers for /usr/bin/python3.
# Idempotent and quiet when everything is there.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
usage_or_none "$@"
pkgs=()
command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || pkgs+=(npm)
/usr/bin/python3 -c 'import phonenumbers' >/dev/null 2>&1 || pkgs+=(python3-phonenumbers)
if [ ${#pkgs[@]} -gt 0 ]; then
  echo "==> apt-get install ${pkgs[*]}"
  sudo_if_needed apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null
fi
dir=derive/difftest/testdata
if ! (cd "$dir" && node -e 'for (const m of ["libphonenumber-js","validator","cpf-cnpj-validator","@brazilian-utils/brazilian-utils"]) require.resolve(m)') >/dev/null 2>&1; then
  echo "==> npm ci in $dir"
  (cd "$dir" && npm ci --no-audit --no-fund --silent)
fi
