#!/usr/bin/env bash
# The benchmarks (`npm run bench`): setup (with the test infrastructure), then bench/bring-up.ts:
# bring-up as a Temporal workflow vs. the same dockerode calls in a plain script; then
# bench/eviction.ts: drain-to-stop latency and the orchestration cost of an acquisition with
# eviction on the simulated box; then bench/router-on-demand.ts: request -> first byte when the
# router must acquire the serve first, and what the router adds when it is up; then bench/sleep.ts:
# eviction and restore by vLLM's sleep mode against by stop and cold start; then bench/cli.ts: the
# CLI's start-up against a bare node start, and `gpures ledger` on the simulated box; then
# bench/ledger-callers.ts: one ledger under 50 open-loop callers offering 250 and 200 decisions/s
# (2 rounds each, in turn; the count begun once the warm-up is answered);
# bench/audit-replay.ts: recorded histories replayed per second; then bench/worker-rss.ts: a
# worker process's resident memory idle and after a storm. Each prints issue 15's targets. Extra arguments go to each (e.g. npm run bench -- --runs 11);
# both take --runs N and --poll-ms MS.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# shellcheck source=scripts/lib.sh
source scripts/lib.sh

bash scripts/setup.sh --test

export_test_env

# The benchmarks that run a worker in their own process run it with the flag bin/gpures starts
# every command with (its shebang), so their figures are the installed worker's.
AS_INSTALLED=(--enable-source-maps --max-semi-space-size=1)

for bench in bring-up eviction router-on-demand sleep cli ledger-callers audit-replay worker-rss; do
  if [[ ! -f "dist/bench/$bench.js" ]]; then
    die "dist/bench/$bench.js does not exist: bench/ was not compiled"
  fi
done

log "bench: node ${AS_INSTALLED[*]} dist/bench/bring-up.js $* (TEMPORAL_CLI=$TEMPORAL_CLI DOCKER_HOST=$DOCKER_HOST)"
node "${AS_INSTALLED[@]}" dist/bench/bring-up.js "$@"
echo
log "bench: node ${AS_INSTALLED[*]} dist/bench/eviction.js $*"
node "${AS_INSTALLED[@]}" dist/bench/eviction.js "$@"
echo
log "bench: node ${AS_INSTALLED[*]} dist/bench/router-on-demand.js $*"
node "${AS_INSTALLED[@]}" dist/bench/router-on-demand.js "$@"
echo
log "bench: node ${AS_INSTALLED[*]} dist/bench/sleep.js $*"
node "${AS_INSTALLED[@]}" dist/bench/sleep.js "$@"
echo
log "bench: node ${AS_INSTALLED[*]} dist/bench/cli.js $*"
node "${AS_INSTALLED[@]}" dist/bench/cli.js "$@"
echo
log "bench: node ${AS_INSTALLED[*]} dist/bench/ledger-callers.js --callers 50 --decisions 3000 --rate 250,200 --runs 2"
node "${AS_INSTALLED[@]}" dist/bench/ledger-callers.js --callers 50 --decisions 3000 --rate 250,200 --runs 2
echo
log "bench: node ${AS_INSTALLED[*]} dist/bench/audit-replay.js $*"
node "${AS_INSTALLED[@]}" dist/bench/audit-replay.js "$@"
echo
log "bench: node ${AS_INSTALLED[*]} dist/bench/worker-rss.js"
exec node "${AS_INSTALLED[@]}" dist/bench/worker-rss.js
