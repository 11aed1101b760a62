# Sourced by the scripts that build a tool with Go on its first use (install-temporal-cluster.sh,
# install-jaeger.sh, and the PSP doubles' installers in doubles/<kind>/); defines no behaviour of its own.

# The Go toolchain: `go` on PATH, else the usual install folder; empty when there is none.
gobin=""
if command -v go >/dev/null 2>&1; then gobin="$(command -v go)"; elif [ -x /usr/local/go/bin/go ]; then gobin=/usr/local/go/bin/go; fi

# build_once LABEL LOCKFILE WHAT: ends the script when `present` (the caller's function) holds,
# now or once another caller building the same tool has finished (they take turns on LOCKFILE
# with flock); otherwise returns, holding the lock, to a caller that then builds. WHAT names the
# tool in the messages; Go is required from here on.
build_once() {
  local label="$1" lockfile="$2" what="$3"
  if present; then echo "$label: present in $bin_dir ($what)"; exit 0; fi
  mkdir -p "$(dirname "$lockfile")"
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$lockfile"
    if ! flock -n 9; then echo "$label: another process is building it; waiting for it"; flock 9; fi
    if present; then echo "$label: present in $bin_dir ($what), built meanwhile"; exit 0; fi
  fi
  [ -n "$gobin" ] || { echo "$label: Go is required to build it (https://go.dev/dl/)" >&2; exit 1; }
  mkdir -p "$bin_dir"
}

# module_dir MODULE@VERSION: the folder of the module, downloaded from the proxy if need be.
module_dir() {
  GOFLAGS=-mod=mod "$gobin" mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
}
