#!/bin/sh
# temporal-schema: one-shot job (temporalio/admin-tools image) that creates or upgrades the
# Temporal server's two PostgreSQL schemas before the server starts:
#   $DBNAME             persistence (histories, mutable state, task queues, ...)
#   $VISIBILITY_DBNAME  visibility (workflow list/search, custom search attributes)
#
# Idempotent: `setup-schema -v 0.0` only creates the version bookkeeping when it is
# missing, and `update-schema` applies only the versioned steps newer than the recorded
# version. So the same job upgrades the schema when the image tags in
# docker-compose.yml move to a newer Temporal release (read its upgrade notes first).
#
# Connection settings are read by temporal-sql-tool itself from the environment:
# SQL_PLUGIN, SQL_HOST, SQL_PORT, SQL_USER, SQL_PASSWORD (see docker-compose.yml).
# The databases themselves are created, owned by SQL_USER, by
# deploy/postgres/init-databases.sh on PostgreSQL's first start.
# POSIX sh: the admin-tools image is Alpine based.
set -eu

: "${SQL_HOST:?SQL_HOST is required}"
: "${SQL_USER:?SQL_USER is required}"
: "${SQL_PLUGIN:=postgres12}"
: "${SQL_PORT:=5432}"
: "${DBNAME:=temporal}"
: "${VISIBILITY_DBNAME:=temporal_visibility}"
: "${SCHEMA_ROOT:=/etc/temporal/schema/postgresql/v12}"
export SQL_PLUGIN SQL_PORT

log() { echo "temporal-schema: $*"; }

for dir in "$SCHEMA_ROOT/temporal/versioned" "$SCHEMA_ROOT/visibility/versioned"; do
  [ -d "$dir" ] || { log "schema directory $dir not found in this image"; exit 1; }
done

# depends_on already waited for PostgreSQL to be healthy; still, ride out a restart.
attempt=0
until temporal-sql-tool --db "$DBNAME" setup-schema -v 0.0; do
  attempt=$((attempt + 1))
  if [ "$attempt" -ge 30 ]; then log "PostgreSQL at $SQL_HOST:$SQL_PORT not usable"; exit 1; fi
  log "waiting for PostgreSQL at $SQL_HOST:$SQL_PORT ($attempt)"
  sleep 2
done
temporal-sql-tool --db "$DBNAME" update-schema -d "$SCHEMA_ROOT/temporal/versioned"
log "persistence schema up to date in $DBNAME"

temporal-sql-tool --db "$VISIBILITY_DBNAME" setup-schema -v 0.0
temporal-sql-tool --db "$VISIBILITY_DBNAME" update-schema -d "$SCHEMA_ROOT/visibility/versioned"
log "visibility schema up to date in $VISIBILITY_DBNAME"
