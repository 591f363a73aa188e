#!/usr/bin/env bash
# `npm run record-histories`: re-records test/histories/*.json (the histories test/replay.test.ts
# replays) by driving the real workflows on a fresh Temporal dev server, the simulated box and,
# for the promotions, the test dockerd with the fake router image. Setup as for the tests (which
# builds), then dist/test/histories/record.js. Extra arguments go to it
# (e.g. npm run record-histories -- --only eviction,drain-timeout, or -- --no-promotion).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh --test

# shellcheck source=scripts/lib.sh
source scripts/lib.sh

export_test_env

log "recording workflow histories into test/histories/"
exec node --enable-source-maps dist/test/histories/record.js "$@"
