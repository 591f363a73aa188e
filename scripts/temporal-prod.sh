#!/usr/bin/env bash
# A production-shaped Temporal on this machine: PostgreSQL 15 and temporal-server on loopback,
# schemas applied, the `default` namespace and the search attributes registered. Idempotent.
#
# usage: scripts/temporal-prod.sh start|stop|status [--dir D] [--port N] [--pg-port N]
# (options and defaults: src/dev/prod-temporal-main.ts and config/toolchain.json).
# This script only provides what it runs with: temporal-server and temporal-sql-tool (built on
# first use) and dist/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

GPURES_TEMPORAL_SERVER_DIR="$(temporal_server_bins)"
export GPURES_TEMPORAL_SERVER_DIR
ensure_dist dist/src/dev/prod-temporal-main.js
exec node dist/src/dev/prod-temporal-main.js "$@"
