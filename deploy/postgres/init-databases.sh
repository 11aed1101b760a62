#!/usr/bin/env bash
# PostgreSQL first-start initialisation for docker-compose.yml.
#
# Mounted into /docker-entrypoint-initdb.d of the official postgres image, so it runs ONCE,
# when the data volume is empty (changing a password later means ALTER ROLE by hand, or a
# fresh volume). It makes one login role and one database per tenant of this server, each
# database owned by its role and closed to everybody else:
#
#   role      database(s)                     used by
#   payments  payments                        migrate, api, worker (DATABASE_URL)
#   sandbox   sandbox, sandbox_b              sandbox, sandbox-b (the stand-in PSPs share
#                                             nothing with the orchestrator but the server)
#   temporal  temporal, temporal_visibility   temporal-schema, temporal (server)
#
# The passwords come from the container environment (PAYMENTS_DB_PASSWORD,
# SANDBOX_DB_PASSWORD, TEMPORAL_DB_PASSWORD; see docker-compose.yml). The schemas are not
# made here: `migrate` (db/migrations), the sandbox itself (sandbox/migrations) and the
# `temporal-schema` job (temporal-sql-tool) own them.
#
# Idempotent (it checks before it creates), so it can also be run by hand against a
# running server: `docker compose exec postgres /docker-entrypoint-initdb.d/10-init-databases.sh`.
# No `set -u`: the entrypoint sources (rather than executes) a script without its exec bit.
set -eo pipefail

psql_admin() {
  psql -v ON_ERROR_STOP=1 --no-psqlrc --username "${POSTGRES_USER:-postgres}" --dbname postgres "$@"
}

# create_owned_databases ROLE PASSWORD DATABASE...
create_owned_databases() {
  local role="$1" password="$2"
  shift 2
  if [ -z "$password" ]; then
    echo "init-databases: no password for role $role" >&2
    return 1
  fi
  psql_admin --set=role="$role" --set=password="$password" <<'SQL'
SELECT format('CREATE ROLE %I LOGIN PASSWORD %L', :'role', :'password')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'role') \gexec
SQL
  local db
  for db in "$@"; do
    psql_admin --set=role="$role" --set=db="$db" <<'SQL'
SELECT format('CREATE DATABASE %I OWNER %I', :'db', :'role')
 WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'db') \gexec
SELECT format('REVOKE ALL ON DATABASE %I FROM PUBLIC', :'db') \gexec
SQL
    echo "init-databases: database $db owned by $role"
  done
}

create_owned_databases payments "${PAYMENTS_DB_PASSWORD}" payments
create_owned_databases sandbox "${SANDBOX_DB_PASSWORD}" sandbox sandbox_b
create_owned_databases temporal "${TEMPORAL_DB_PASSWORD}" temporal temporal_visibility
