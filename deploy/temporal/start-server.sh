#!/bin/sh
# Entrypoint of the `temporal` service in docker-compose.yml: the server with the same
# config template that `TEMPORAL_MODE=cluster` runs and tests on one machine
# (deploy/temporal/config/cluster.yaml, rendered by the server from the environment).
# In a container the services listen on its own address, which is also the address the
# other nodes of a cluster reach it at (ringpop); on one host devstack/temporal-cluster.ts uses
# 127.0.0.1 and distinct ports instead.
set -eu
: "${BIND_ON_IP:=$(hostname -i | awk '{print $1}')}"
: "${TEMPORAL_BROADCAST_ADDRESS:=$BIND_ON_IP}"
export BIND_ON_IP TEMPORAL_BROADCAST_ADDRESS
exec temporal-server --root / --config /deploy/temporal/config --env cluster --allow-no-auth start
