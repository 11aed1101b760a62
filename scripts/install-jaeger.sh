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

# shellcheck source=scripts/go-tools.sh
. "$root/scripts/go-tools.sh"
present() { [ -x "$bin_dir/jaeger" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$VERSION" ]; }
build_once jaeger "$tools/jaeger.lock" "$VERSION"

# `go install …/cmd/jaeger@v1.75.0` refuses the module (its go.mod has replace directives), so
# the module is downloaded from the proxy and built in place, as its own main module (which
# honours them), into a folder of its own, then moved into place whole.
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
echo "jaeger: first use: building github.com/jaegertracing/jaeger/cmd/jaeger@v$VERSION with $("$gobin" version | cut -d' ' -f3) (several minutes cold)"
module="$(module_dir "github.com/jaegertracing/jaeger@v$VERSION")"
[ -d "$module/cmd/jaeger" ] || { echo "jaeger: cmd/jaeger not found in $module" >&2; exit 1; }
(cd "$module" && "$gobin" build -trimpath -o "$out/jaeger" ./cmd/jaeger)
install -m 0755 "$out/jaeger" "$bin_dir/jaeger.tmp" && mv "$bin_dir/jaeger.tmp" "$bin_dir/jaeger"
echo "$VERSION" > "$stamp"
echo "jaeger: built $bin_dir/jaeger"
