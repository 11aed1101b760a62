#!/usr/bin/env bash
# Provides the production Temporal server (TEMPORAL_MODE=cluster) in .tools/:
#   .tools/bin/temporal-server     go.temporal.io/server/cmd/server            v1.29.1
#   .tools/bin/temporal-sql-tool   go.temporal.io/server/cmd/tools/sql         v1.29.1
#   .tools/bin/temporal-ui-server  github.com/temporalio/ui-server/v2/cmd/server v2.42.1
#   .tools/temporal-schema/        the server module's PostgreSQL schemas (schema/postgresql/v12)
# 1.29.1 is the server inside the Temporal CLI v1.5.1 (the dev server), so both modes run
# the same server code. Run on first use of cluster mode (devstack/temporal-cluster.ts, and
# test/global-setup.ts once per test run that includes test/cluster/), or at install with
# TEMPORAL_CLUSTER_AT_INSTALL=1; a no-op when present. Concurrent callers take turns (flock):
# one builds, the others then find the binaries.
# Needs Go (1.24+): the first build takes a few minutes per binary; with a warm Go build
# cache (~/.cache/go-build) it takes seconds.
set -euo pipefail

SERVER_VERSION=1.29.1
UI_VERSION=2.42.1
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="$root/.tools"
bin_dir="$tools/bin"
schema_dir="$tools/temporal-schema"
stamp="$tools/temporal-cluster.version"

# shellcheck source=scripts/go-tools.sh
. "$root/scripts/go-tools.sh"
want="server $SERVER_VERSION ui $UI_VERSION"
present() {
  [ -x "$bin_dir/temporal-server" ] && [ -x "$bin_dir/temporal-sql-tool" ] && [ -x "$bin_dir/temporal-ui-server" ] \
    && [ -d "$schema_dir/temporal/versioned" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]
}
build_once "temporal cluster" "$tools/temporal-cluster.lock" "$want"

# Both main packages are named `server`: each is built into a folder of its own, then renamed.
build() { # build PACKAGE@VERSION TARGET STEP EXPECTED-TIME
  local out; out="$(mktemp -d)"
  echo "temporal cluster: building $3 ($2, $1): $4"
  GOBIN="$out" GOFLAGS=-mod=mod "$gobin" install "$1"
  local built; built="$(find "$out" -maxdepth 1 -type f | head -n1)"
  install -m 0755 "$built" "$bin_dir/$2.tmp" && mv "$bin_dir/$2.tmp" "$bin_dir/$2"
  rm -rf "$out"
}
echo "temporal cluster: first use: building the Temporal server, its SQL tool and the UI server with $("$gobin" version | cut -d' ' -f3) into $bin_dir;"
echo "temporal cluster:   with an empty Go cache this takes several minutes on 2 cores; with a warm one, seconds"
build "go.temporal.io/server/cmd/server@v$SERVER_VERSION" temporal-server 1/3 "the longest, a few minutes cold"
build "go.temporal.io/server/cmd/tools/sql@v$SERVER_VERSION" temporal-sql-tool 2/3 "reuses most of the server's packages, about a minute cold"
build "github.com/temporalio/ui-server/v2/cmd/server@v$UI_VERSION" temporal-ui-server 3/3 "about a minute cold"

module="$(module_dir "go.temporal.io/server@v$SERVER_VERSION")"
[ -d "$module/schema/postgresql/v12" ] || { echo "temporal cluster: schema not found in $module" >&2; exit 1; }
rm -rf "$schema_dir.tmp" && mkdir -p "$schema_dir.tmp"
cp -R "$module/schema/postgresql/v12/." "$schema_dir.tmp/"
chmod -R u+w "$schema_dir.tmp"
rm -rf "$schema_dir" && mv "$schema_dir.tmp" "$schema_dir"
echo "$want" > "$stamp"
echo "temporal cluster: ready in $bin_dir"
