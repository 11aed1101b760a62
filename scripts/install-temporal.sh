#!/usr/bin/env bash
# Provides the Temporal CLI v1.5.1 (dev server + Web UI) at .tools/bin/temporal: all that
# `npm start` needs. npm's postinstall runs it. The production server's binaries (cluster mode,
# test/cluster/, bench or chaos with --temporal cluster) are built on their first use instead
# (scripts/install-temporal-cluster.sh, called by devstack/temporal-cluster.ts and, for a test
# run that includes test/cluster/, by test/global-setup.ts); TEMPORAL_CLUSTER_AT_INSTALL=1
# builds them now as well (an image or CI cache that wants everything up front).
#
# Order of preference, as in docs/CONTRACT.md §2.1:
#   1. TEMPORAL_CLI_PATH, or a `temporal` already on PATH: nothing to install.
#   2. Go present: `go install` of v1.5.1 (later tags carry a `replace` directive that
#      breaks `go install`; v1.5.1 is pure Go, no cgo).
#   3. Otherwise, on a machine with internet: the official release archive.
# Set SKIP_TEMPORAL_CLI=1 to skip (e.g. in an image that only runs the API).
set -euo pipefail

VERSION=1.5.1
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin_dir="$root/.tools/bin"
target="$bin_dir/temporal"

if [ "${SKIP_TEMPORAL_CLI:-}" = "1" ]; then
  echo "temporal cli: skipped (SKIP_TEMPORAL_CLI=1)"; exit 0
fi
cluster() {
  if [ "${TEMPORAL_CLUSTER_AT_INSTALL:-}" != "1" ]; then
    echo "temporal cluster: not built now; built on first use of cluster mode (test/cluster/, TEMPORAL_MODE=cluster, bench/chaos --temporal cluster), or set TEMPORAL_CLUSTER_AT_INSTALL=1"
    exit 0
  fi
  # Not fatal: without Go, dev mode works; cluster mode tries again on first use and says why.
  bash "$root/scripts/install-temporal-cluster.sh" || echo "temporal cluster: not built; TEMPORAL_MODE=cluster and test/cluster/ need it (see above)" >&2
  exit 0
}
if [ -n "${TEMPORAL_CLI_PATH:-}" ] && [ -x "$TEMPORAL_CLI_PATH" ]; then
  echo "temporal cli: using TEMPORAL_CLI_PATH=$TEMPORAL_CLI_PATH"; cluster
fi
if [ -x "$target" ] && "$target" --version 2>/dev/null | grep -q "$VERSION"; then
  echo "temporal cli: $target ($VERSION) already installed"; cluster
fi
if command -v temporal >/dev/null 2>&1; then
  echo "temporal cli: using $(command -v temporal) from PATH"; cluster
fi

mkdir -p "$bin_dir"
gobin=""
if command -v go >/dev/null 2>&1; then gobin="$(command -v go)"; elif [ -x /usr/local/go/bin/go ]; then gobin=/usr/local/go/bin/go; fi

if [ -n "$gobin" ]; then
  echo "temporal cli: building v$VERSION with $("$gobin" version) (first time: a few minutes)"
  GOBIN="$bin_dir" "$gobin" install \
    -ldflags "-X github.com/temporalio/cli/temporalcli.Version=$VERSION" \
    "github.com/temporalio/cli/cmd/temporal@v$VERSION"
else
  os="$(uname -s | tr '[:upper:]' '[:lower:]')"
  case "$(uname -m)" in x86_64|amd64) arch=amd64 ;; aarch64|arm64) arch=arm64 ;; *) echo "unsupported arch $(uname -m)" >&2; exit 1 ;; esac
  url="https://temporal.download/cli/archive/v$VERSION?platform=$os&arch=$arch"
  echo "temporal cli: no Go toolchain; downloading $url"
  tmp="$(mktemp -d)"
  curl -fsSL "$url" -o "$tmp/temporal.tar.gz"
  tar -xzf "$tmp/temporal.tar.gz" -C "$tmp"
  install -m 0755 "$tmp/temporal" "$target"
  rm -rf "$tmp"
fi
"$target" --version
cluster
