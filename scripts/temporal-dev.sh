#!/usr/bin/env bash
# Runs a local Temporal dev server (temporal server start-dev) in the foreground, for humans.
# The tests start their own from TypeScript.
#
# usage: scripts/temporal-dev.sh [--ui] [--db-filename FILE] [--port N] [--ui-port N] [-- START-DEV-ARGS...]
# (options, flags and defaults: src/dev/dev-server-main.ts and config/toolchain.json).
# This script only provides what it runs with: the Temporal CLI (built on first use) and dist/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

TEMPORAL_CLI="$(temporal_bin)"
export TEMPORAL_CLI
ensure_dist dist/src/dev/dev-server-main.js
exec node dist/src/dev/dev-server-main.js "$@"
