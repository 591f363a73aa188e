#!/usr/bin/env bash
# The test command (`npm test`): setup (with the test infrastructure), lint, then every compiled
# test file dist/test/**/*.test.js, each in its own `node --test`, GPURES_TEST_LANES (2) files at
# a time, each bounded by GPURES_TEST_FILE_TIMEOUT_S (900) (src/dev/test-lanes-main.ts). Extra
# arguments go to each file's `node --test` (e.g. npm test -- --test-name-pattern=ledger).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh --test

# shellcheck source=scripts/lib.sh
source scripts/lib.sh

export_test_env

log "lint: eslint, prettier --check, dependency-cruiser (layers, no import cycles)"
npx --no-install eslint src test bench
npx --no-install prettier --check --log-level warn "src/**/*.ts" "test/**/*.ts" "bench/**/*.ts"
npx --no-install depcruise src --config .dependency-cruiser.cjs --output-type err

# Explicit file list rather than `node --test dist/test/`: given a directory, Node 20 also runs
# every other .js file under a directory named test (helpers, fixtures) as a test file.
if [[ ! -d dist/test ]]; then
  die "dist/test does not exist: nothing was compiled from test/"
fi
mapfile -t tests < <(find dist/test -type f -name '*.test.js' | LC_ALL=C sort)
if [[ ${#tests[@]} -eq 0 ]]; then
  die "no compiled tests found (dist/test/**/*.test.js)"
fi

log "running ${#tests[@]} test file(s) with TEMPORAL_CLI=$TEMPORAL_CLI DOCKER_HOST=$DOCKER_HOST GPURES_TEST_IMAGE=$GPURES_TEST_IMAGE"
exec node --enable-source-maps dist/src/dev/test-lanes-main.js "$@" -- "${tests[@]}"
