#!/usr/bin/env bash
# A production-shaped Temporal on this machine: PostgreSQL 15 and temporal-server on loopback,
# schemas applied, the `default` namespace and the search attributes registered. Idempotent.
#
# usage: scripts/temporal-prod.sh start|stop|status [--dir D] [--port N] [--pg-port N]
# (options and defaults: src/dev/prod-temporal-main.ts and config/toolchain.json).
# This script only provides what it runs with: dist/, and for `start` temporal-server and
# temporal-sql-tool (built on first use).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

# Only `start` runs the binaries; status and stop need dist/ alone, so they never wait for a build
# (minutes on a cold machine). The command is the first argument that is not an option or its value.
command=""
skip=0
for arg in "$@"; do
  if [[ $skip -eq 1 ]]; then
    skip=0
    continue
  fi
  case "$arg" in
    --dir | --port | --pg-port) skip=1 ;;
    -*) ;;
    *) command="${command:-$arg}" ;;
  esac
done
if [[ "$command" == start ]]; then
  GPURES_TEMPORAL_SERVER_DIR="$(temporal_server_bins)"
  export GPURES_TEMPORAL_SERVER_DIR
fi
ensure_dist dist/src/dev/prod-temporal-main.js
exec node dist/src/dev/prod-temporal-main.js "$@"
