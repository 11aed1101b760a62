#!/usr/bin/env bash
# Machine setup for development and tests. Idempotent: safe to run again at any time.
#
#   1. Chromium (Debian's `chromium` package) at /usr/bin/chromium, for the browser test of
#      the Temporal Web UI (test/e2e). Installed with apt-get, which needs root.
#   2. The Temporal CLI v1.5.1 (dev server + Web UI), via scripts/install-temporal.sh.
#   3. stripe-mock (the Stripe adapter's tests run against it), via scripts/install-stripe-mock.sh.
#
# Run it as `npm run setup` (or `sudo npm run setup` as a non-root user).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
chromium=/usr/bin/chromium

if [ -x "$chromium" ]; then
  echo "chromium: $chromium already installed ($("$chromium" --version 2>/dev/null || echo 'version unknown'))"
elif [ "$(id -u)" -ne 0 ]; then
  echo "chromium: MISSING at $chromium, and installing it needs root." >&2
  echo "          run: sudo apt-get update && sudo apt-get install -y chromium" >&2
  echo "          (or run this script as root: sudo bash scripts/setup.sh)" >&2
  exit 1
elif ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium: MISSING at $chromium and this is not a Debian/Ubuntu machine (no apt-get);" >&2
  echo "          install Chromium so that it is at $chromium." >&2
  exit 1
else
  echo "chromium: installing Debian's chromium package with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends chromium fonts-liberation
  echo "chromium: installed ($("$chromium" --version 2>/dev/null || echo "$chromium"))"
fi

bash "$root/scripts/install-temporal.sh"
bash "$root/scripts/install-stripe-mock.sh"
echo "setup: done"
