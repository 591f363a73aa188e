#!/usr/bin/env bash
# The main job (`npm run demo`): set-up, then the field report's T013 sequence on a simulated box
# through the real workflows on a Temporal dev server. Extra arguments go to `gpures demo`
# (e.g. npm run demo -- --keep).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
TEMPORAL_CLI="$(temporal_bin)"
export TEMPORAL_CLI
exec node bin/gpures demo "$@"
