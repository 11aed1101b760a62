#!/bin/sh
# temporal-setup: one-shot job (temporalio/admin-tools image, Temporal CLI) that runs once
# the server is healthy and makes the namespace ready for the app:
#   1. registers $TEMPORAL_NAMESPACE (the plain server image, unlike auto-setup and the dev
#      server, creates no namespace) with $TEMPORAL_NAMESPACE_RETENTION for closed workflows;
#   2. registers the custom search attributes in $SEARCH_ATTRIBUTES ("Name=Type ..."), the
#      ones an operator filters payments by in the Web UI: the same list the dev server is
#      started with (devstack/temporal-cli.ts, searchAttributeFlags).
# Idempotent: what exists is left alone ("already exists" is success); an attribute that
# exists with another type is an error. It ends by checking that every attribute is there.
# POSIX sh: the admin-tools image is Alpine based.
set -eu

address="${TEMPORAL_ADDRESS:?TEMPORAL_ADDRESS is required}"
namespace="${TEMPORAL_NAMESPACE:-default}"
retention="${TEMPORAL_NAMESPACE_RETENTION:-720h}"
attributes="${SEARCH_ATTRIBUTES:?SEARCH_ATTRIBUTES must list Name=Type pairs}"
attempts="${SETUP_ATTEMPTS:-60}"

log() { echo "temporal-setup: $*"; }

# retry CMD...: runs CMD until it succeeds, at most $attempts times, 2 s apart.
retry() {
  n=1
  until "$@"; do
    if [ "$n" -ge "$attempts" ]; then return 1; fi
    n=$((n + 1))
    sleep 2
  done
}

serving() { temporal operator cluster health --address "$address" 2>/dev/null | grep -q SERVING; }
namespace_exists() { temporal operator namespace describe --address "$address" --namespace "$namespace" >/dev/null 2>&1; }
list_attributes() { temporal operator search-attribute list --address "$address" --namespace "$namespace"; }
# attribute_type NAME: prints the registered type of NAME (empty if it is not registered).
attribute_type() { list_attributes 2>/dev/null | awk -v name="$1" '$1 == name { print $2 }'; }

log "waiting for the frontend at $address"
if ! retry serving; then
  log "Temporal at $address is not serving:"
  temporal operator cluster health --address "$address" || true
  exit 1
fi

if namespace_exists; then
  log "namespace $namespace already registered"
elif temporal operator namespace create --address "$address" --namespace "$namespace" --retention "$retention" \
  --description "payment orchestrator"; then
  log "namespace $namespace registered (retention $retention)"
elif namespace_exists; then
  log "namespace $namespace registered concurrently"
else
  log "could not register namespace $namespace"
  exit 1
fi

# A new namespace takes a few seconds to reach every frontend's namespace cache.
retry list_attributes >/dev/null 2>&1 || { log "namespace $namespace not usable"; exit 1; }

for pair in $attributes; do
  name="${pair%%=*}"
  type="${pair#*=}"
  if [ -z "$name" ] || [ "$name" = "$pair" ] || [ -z "$type" ]; then
    log "malformed entry '$pair' in SEARCH_ATTRIBUTES (want Name=Type)"
    exit 1
  fi
  current="$(attribute_type "$name")"
  if [ -z "$current" ]; then
    if temporal operator search-attribute create --address "$address" --namespace "$namespace" \
      --name "$name" --type "$type"; then
      log "search attribute $name ($type) registered"
    else
      log "create of $name failed; checking whether it exists now"
    fi
    current="$(attribute_type "$name")"
  else
    log "search attribute $name already registered"
  fi
  if [ "$(echo "$current" | tr '[:upper:]' '[:lower:]')" != "$(echo "$type" | tr '[:upper:]' '[:lower:]')" ]; then
    log "search attribute $name is '${current:-missing}', expected $type"
    exit 1
  fi
done
log "namespace $namespace ready with search attributes: $attributes"
