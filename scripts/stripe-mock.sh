#!/usr/bin/env bash
# Installs stripe-mock, Stripe's own stand-in for its API (from the Go module
# proxy), which the tests of tools/stripe start on a free port. Idempotent and
# quiet when the pinned version is already installed. It goes where
# `go install` puts binaries (GOBIN, else GOPATH/bin), where the tests look.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
usage_or_none "$@"
ensure_go

version=v0.203.0
dir=$(go env GOBIN)
if [ -z "$dir" ]; then dir="$(go env GOPATH)/bin"; fi
if [ -x "$dir/stripe-mock" ] && go version -m "$dir/stripe-mock" 2>/dev/null | grep -q "mod[[:space:]]*github.com/stripe/stripe-mock[[:space:]]*$version"; then
  exit 0
fi
echo "==> installing stripe-mock $version (go install)"
go install "github.com/stripe/stripe-mock@$version"
