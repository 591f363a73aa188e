#!/usr/bin/env bash
# The benchmark (`npm run bench`): setup (with the test infrastructure), then bench/bring-up.ts:
# bring-up as a Temporal workflow vs. the same dockerode calls in a plain script. Extra
# arguments go to the benchmark (e.g. npm run bench -- --runs 11).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# shellcheck source=scripts/lib.sh
source scripts/lib.sh

bash scripts/setup.sh --test

TEMPORAL_CLI="$(temporal_bin)"
DOCKER_HOST="unix://$GPURES_DOCKER_SOCK"
export TEMPORAL_CLI DOCKER_HOST GPURES_TEST_IMAGE

if [[ ! -f dist/bench/bring-up.js ]]; then
  die "dist/bench/bring-up.js does not exist: bench/ was not compiled"
fi

log "bench: node dist/bench/bring-up.js $* (TEMPORAL_CLI=$TEMPORAL_CLI DOCKER_HOST=$DOCKER_HOST)"
exec node --enable-source-maps dist/bench/bring-up.js "$@"
