#!/usr/bin/env bash
# Prepares a checkout: npm dependencies, the Temporal CLI (built once with go install), and a
# fresh `npm run build` into dist/.
#   --test   also what the tests need: docker.io, busybox-static and iproute2 (apt), this project's own
#            dockerd on unix:///run/gpures/docker.sock, and the gpures/fake-vllm:test and
#            gpures/fake-router:test images (built by dist/src/dev/images-main.js); and for the
#            production-shaped Temporal (scripts/temporal-prod.sh, the durability tests): PostgreSQL 15
#            (apt) and temporal-server + temporal-sql-tool (built once with go install); and Chromium
#            (apt) for the ledger page's browser test.
# Paths, the CLI tag and the image names: config/toolchain.json.
# Idempotent: a second run only re-checks and rebuilds dist/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

usage() {
  echo "usage: scripts/setup.sh [--test]" >&2
}

with_test=0
for arg in "$@"; do
  case "$arg" in
    --test) with_test=1 ;;
    -h | --help)
      usage
      exit 0
      ;;
    *)
      usage
      exit 2
      ;;
  esac
done

ensure_npm_deps
temporal="$(temporal_bin)"
log "temporal CLI: $temporal"

# Clean build: tsc never deletes outputs, and a compiled test whose source was removed would
# otherwise keep running.
log "building (npm run build)"
rm -rf dist
npm run build --silent

# Debian's postgresql-15 creates a 15/main cluster on 5432, started at boot under systemd; our
# PostgreSQL runs from its own data directory, so when we are the ones installing the package we
# tell postgresql-common not to create it. Only for our install: an existing installation and its
# clusters are left as they are. An existing createcluster.conf is edited in place; before
# postgresql-common is installed, a drop-in in createcluster.d (which its createcluster.conf
# includes), since writing the conffile itself would make dpkg ask whether to keep it.
no_main_cluster() {
  local conf=/etc/postgresql-common/createcluster.conf
  local dropin_dir=/etc/postgresql-common/createcluster.d
  if _gpures_pkg_installed "$GPURES_POSTGRES_APT_PACKAGE"; then
    return 0
  fi
  if [[ -f "$conf" && -w "$conf" ]]; then
    if grep -Eq '^[[:space:]]*#?[[:space:]]*create_main_cluster[[:space:]]*=' "$conf"; then
      sed -Ei 's/^[[:space:]]*#?[[:space:]]*create_main_cluster[[:space:]]*=.*/create_main_cluster = false/' "$conf"
    else
      printf 'create_main_cluster = false\n' >>"$conf"
    fi
    log "postgresql-common: create_main_cluster = false in $conf (no 15/main cluster on 5432)"
  elif [[ ! -e "$conf" && -w /etc ]]; then
    mkdir -p "$dropin_dir"
    printf '# gpures setup: no main cluster for our install of %s\ncreate_main_cluster = false\n' \
      "$GPURES_POSTGRES_APT_PACKAGE" >"$dropin_dir/gpures.conf"
    log "postgresql-common: create_main_cluster = false in $dropin_dir/gpures.conf (no 15/main cluster on 5432)"
  fi
}

if [[ $with_test -eq 1 ]]; then
  no_main_cluster
  # iproute2: the fleet test puts each node's worker in a network namespace of its own; chromium:
  # the ledger page's test drives Debian's browser (playwright-core downloads none).
  ensure_apt_packages docker.io busybox-static iproute2 "$GPURES_POSTGRES_APT_PACKAGE" "$GPURES_TEST_BROWSER_APT_PACKAGE"
  server_dir="$(temporal_server_bins)"
  log "temporal-server and temporal-sql-tool: $server_dir"
  ensure_dockerd
  build_test_images
fi
log "setup done"
