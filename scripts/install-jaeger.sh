#!/usr/bin/env bash
# Provides Jaeger all-in-one for `TRACING=on npm start` (docs/tracing.md) in .tools/:
#   .tools/bin/jaeger   github.com/jaegertracing/jaeger/cmd/jaeger   v1.75.0
# Built on first use (devstack), a no-op when present. Concurrent callers take turns (flock):
# one builds, the others then find the binary. Needs Go; a cold build takes several minutes
# on 2 cores, a warm Go build cache (~/.cache/go-build) seconds.
set -euo pipefail

VERSION=1.75.0
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="$root/.tools"
bin_dir="$tools/bin"
stamp="$tools/jaeger.version"

gobin=""
if command -v go >/dev/null 2>&1; then gobin="$(command -v go)"; elif [ -x /usr/local/go/bin/go ]; then gobin=/usr/local/go/bin/go; fi

present() { [ -x "$bin_dir/jaeger" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$VERSION" ]; }
if present; then echo "jaeger: present in $bin_dir ($VERSION)"; exit 0; fi
mkdir -p "$tools"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$tools/jaeger.lock"
  if ! flock -n 9; then echo "jaeger: another process is building it; waiting for it"; flock 9; fi
  if present; then echo "jaeger: present in $bin_dir ($VERSION), built meanwhile"; exit 0; fi
fi
[ -n "$gobin" ] || { echo "jaeger: Go is required to build Jaeger (https://go.dev/dl/)" >&2; exit 1; }

mkdir -p "$bin_dir"
# `go install …/cmd/jaeger@v1.75.0` refuses the module (its go.mod has replace directives), so
# the module is downloaded from the proxy and built in place, as its own main module (which
# honours them), into a folder of its own, then moved into place whole.
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
echo "jaeger: first use: building github.com/jaegertracing/jaeger/cmd/jaeger@v$VERSION with $("$gobin" version | cut -d' ' -f3) (several minutes cold)"
module_dir="$(GOFLAGS=-mod=mod "$gobin" mod download -json "github.com/jaegertracing/jaeger@v$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[ -d "$module_dir/cmd/jaeger" ] || { echo "jaeger: cmd/jaeger not found in $module_dir" >&2; exit 1; }
(cd "$module_dir" && "$gobin" build -trimpath -o "$out/jaeger" ./cmd/jaeger)
install -m 0755 "$out/jaeger" "$bin_dir/jaeger.tmp" && mv "$bin_dir/jaeger.tmp" "$bin_dir/jaeger"
echo "$VERSION" > "$stamp"
echo "jaeger: built $bin_dir/jaeger"
