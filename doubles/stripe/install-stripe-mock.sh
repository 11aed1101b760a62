#!/usr/bin/env bash
# Provides stripe-mock (Stripe's own mock of its API, validated against Stripe's OpenAPI
# definition) at .tools/bin/stripe-mock, for the Stripe adapter's tests. Pure Go, builds in
# seconds; nothing is downloaded when STRIPE_MOCK_PATH or a stripe-mock on PATH is given.
set -euo pipefail

VERSION="${STRIPE_MOCK_VERSION:-v0.203.0}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin_dir="$root/.tools/bin"
target="$bin_dir/stripe-mock"

if [ -n "${STRIPE_MOCK_PATH:-}" ] && [ -x "$STRIPE_MOCK_PATH" ]; then
  echo "stripe-mock: using STRIPE_MOCK_PATH=$STRIPE_MOCK_PATH"; exit 0
fi
if [ -x "$target" ]; then echo "stripe-mock: $target already installed"; exit 0; fi
if command -v stripe-mock >/dev/null 2>&1; then echo "stripe-mock: using $(command -v stripe-mock) from PATH"; exit 0; fi

# shellcheck source=scripts/go-tools.sh
. "$root/scripts/go-tools.sh"
if [ -z "$gobin" ]; then echo "stripe-mock: needs a Go toolchain (or STRIPE_MOCK_PATH)" >&2; exit 1; fi
mkdir -p "$bin_dir"
echo "stripe-mock: building $VERSION with $("$gobin" version)"
GOBIN="$bin_dir" "$gobin" install "github.com/stripe/stripe-mock@$VERSION"
echo "stripe-mock: $target"
