# shellcheck shell=bash
# Helpers shared by scripts/*.sh. Source it, don't run it:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# Everything here logs to stderr so that functions which print a result on stdout
# (temporal_bin) can be used in command substitutions.

if [[ -n "${_GPURES_LIB_SOURCED:-}" ]]; then
  return 0
fi
_GPURES_LIB_SOURCED=1

# Make `set -e` apply inside $(...) too, so a failing step in a function whose output is
# captured aborts that function instead of being silently ignored.
shopt -s inherit_errexit

GPURES_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# CI may run with a trimmed environment: Go's caches and ours need a home.
if [[ -z "${HOME:-}" ]]; then
  HOME="$(getent passwd "$(id -u)" | cut -d: -f6)"
  export HOME="${HOME:-/root}"
fi

log() {
  printf '[gpures] %s\n' "$*" >&2
}

die() {
  log "error: $*"
  exit 1
}

# config/toolchain.json holds what the shell and the TypeScript commands share (src/dev/toolchain.ts
# reads it too). Node is the one JSON reader a fresh machine has before any set-up; it prints
# NAME=value lines, and only such names are assigned.
# shellcheck disable=SC2016 # the ${...} below are JavaScript template literals
_gpures_toolchain="$(node -e '
  const c = require(process.argv[1]);
  const lines = {
    TEMPORAL_CLI_MODULE: c.temporalCli.module,
    TEMPORAL_CLI_TAG: c.temporalCli.tag,
    TEMPORAL_SERVER_MODULE: c.temporalServer.module,
    TEMPORAL_SERVER_TAG: c.temporalServer.tag,
    TEMPORAL_SERVER_PACKAGE: c.temporalServer.serverPackage,
    TEMPORAL_SERVER_SQL_TOOL_PACKAGE: c.temporalServer.sqlToolPackage,
    TEMPORAL_SERVER_SCHEMA_DIR: c.temporalServer.schemaDir,
    GPURES_POSTGRES_APT_PACKAGE: c.postgres.aptPackage,
    GPURES_TEST_BROWSER_APT_PACKAGE: c.testBrowser.aptPackage,
    GPURES_CACHE_UNDER_HOME: c.cacheUnderHome,
    GPURES_DOCKER_SOCK: c.testDockerd.socket,
    GPURES_DOCKER_DATA_ROOT: c.testDockerd.dataRoot,
    GPURES_DOCKER_EXEC_ROOT: c.testDockerd.execRoot,
    GPURES_DOCKER_PIDFILE: c.testDockerd.pidfile,
    GPURES_DOCKERD_LOG: c.testDockerd.log,
    GPURES_DEFAULT_TEST_IMAGE: c.testImages.fakeVllm,
  };
  for (const [name, value] of Object.entries(lines)) {
    if (typeof value !== "string" || value.includes("\n")) throw new Error(`${name}: not a one-line string`);
    console.log(`${name}=${value}`);
  }
' "$GPURES_ROOT/config/toolchain.json")" || die "cannot read $GPURES_ROOT/config/toolchain.json (is node installed?)"
while IFS='=' read -r _gpures_name _gpures_value; do
  [[ "$_gpures_name" =~ ^(GPURES|TEMPORAL_CLI|TEMPORAL_SERVER)_[A-Z_]+$ ]] || die "unexpected line from config/toolchain.json: $_gpures_name"
  printf -v "$_gpures_name" '%s' "$_gpures_value"
done <<<"$_gpures_toolchain"
unset _gpures_toolchain _gpures_name _gpures_value
GPURES_CACHE="${GPURES_CACHE:-$HOME/$GPURES_CACHE_UNDER_HOME}"
GPURES_TEST_IMAGE="${GPURES_TEST_IMAGE:-$GPURES_DEFAULT_TEST_IMAGE}"

_gpures_require_root() {
  if [[ "$(id -u)" != 0 ]]; then
    log "error: $1 needs root (run this script as root, e.g. with sudo)"
    return 1
  fi
}

# --- Temporal CLI --------------------------------------------------------------------------

_gpures_find_go() {
  if command -v go >/dev/null 2>&1; then
    command -v go
  elif [[ -x /usr/local/go/bin/go ]]; then
    printf '%s\n' /usr/local/go/bin/go
  else
    log "error: Go is needed to build the Temporal CLI $TEMPORAL_CLI_TAG but neither 'go' on PATH nor /usr/local/go/bin/go exists."
    log "       Install Go (https://go.dev/dl/), or point TEMPORAL_CLI at an existing temporal binary."
    return 1
  fi
}

# Prints the path of a usable `temporal` CLI: $TEMPORAL_CLI if set, else `temporal` on PATH,
# else $GPURES_CACHE/temporal-cli-<tag>/temporal, which is built with `go install` on first use.
temporal_bin() {
  if [[ -n "${TEMPORAL_CLI:-}" ]]; then
    if [[ ! -x "$TEMPORAL_CLI" ]]; then
      log "error: TEMPORAL_CLI=$TEMPORAL_CLI is not an executable file"
      return 1
    fi
    printf '%s\n' "$TEMPORAL_CLI"
    return 0
  fi
  if command -v temporal >/dev/null 2>&1; then
    command -v temporal
    return 0
  fi

  local dir="$GPURES_CACHE/temporal-cli-$TEMPORAL_CLI_TAG"
  local bin="$dir/temporal"
  if [[ ! -x "$bin" ]]; then
    local go
    go="$(_gpures_find_go)" || return 1
    mkdir -p "$dir" || return 1
    # The lock makes a second concurrent setup wait for the first build instead of racing it.
    # (Explicit checks: set -e does not apply inside a subshell that is followed by ||.)
    (
      flock 9 || exit 1
      if [[ -x "$bin" ]]; then
        exit 0
      fi
      log "building Temporal CLI $TEMPORAL_CLI_TAG with go install into $dir"
      log "(first run only; this takes a few minutes)"
      tmp="$(mktemp -d "$dir/.build.XXXXXX")" || exit 1
      # GOPATH/GOMODCACHE/GOCACHE keep Go's defaults; only the install directory is ours.
      if ! GOBIN="$tmp" "$go" install "$TEMPORAL_CLI_MODULE@$TEMPORAL_CLI_TAG" >&2 ||
        ! mv -f "$tmp/temporal" "$bin"; then
        rm -rf "$tmp"
        log "error: go install $TEMPORAL_CLI_MODULE@$TEMPORAL_CLI_TAG failed"
        exit 1
      fi
      rm -rf "$tmp"
      log "built $bin"
    ) 9>"$dir/.lock" || return 1
  fi
  printf '%s\n' "$bin"
}

# --- Temporal server (the production-shaped Temporal) ---------------------------------------

# Prints the directory holding temporal-server, temporal-sql-tool and schema/ (the PostgreSQL v12
# schemas of the same tag): $GPURES_CACHE/temporal-server-<tag>/, built with `go install` on first
# use. The schemas are copied out of Go's module cache so that nothing later depends on it.
_gpures_server_bins_ready() {
  [[ -x "$1/temporal-server" && -x "$1/temporal-sql-tool" && -d "$1/schema/temporal/versioned" && -d "$1/schema/visibility/versioned" ]]
}

temporal_server_bins() {
  local dir="$GPURES_CACHE/temporal-server-$TEMPORAL_SERVER_TAG"
  if _gpures_server_bins_ready "$dir"; then
    printf '%s\n' "$dir"
    return 0
  fi
  local go
  go="$(_gpures_find_go)" || return 1
  mkdir -p "$dir" || return 1
  # Same lock discipline as temporal_bin: a concurrent set-up waits for this build.
  (
    flock 9 || exit 1
    if _gpures_server_bins_ready "$dir"; then
      exit 0
    fi
    log "building temporal-server and temporal-sql-tool $TEMPORAL_SERVER_TAG with go install into $dir"
    log "(first run only; this takes a few minutes)"
    tmp="$(mktemp -d "$dir/.build.XXXXXX")" || exit 1
    if ! GOBIN="$tmp" "$go" install "$TEMPORAL_SERVER_MODULE/$TEMPORAL_SERVER_PACKAGE@$TEMPORAL_SERVER_TAG" \
      "$TEMPORAL_SERVER_MODULE/$TEMPORAL_SERVER_SQL_TOOL_PACKAGE@$TEMPORAL_SERVER_TAG" >&2; then
      rm -rf "$tmp"
      log "error: go install $TEMPORAL_SERVER_MODULE/{$TEMPORAL_SERVER_PACKAGE,$TEMPORAL_SERVER_SQL_TOOL_PACKAGE}@$TEMPORAL_SERVER_TAG failed"
      exit 1
    fi
    # go install names a binary after its package's last element: cmd/server -> server, cmd/tools/sql -> sql.
    modcache="$("$go" env GOMODCACHE)" || exit 1
    schema="$modcache/$TEMPORAL_SERVER_MODULE@$TEMPORAL_SERVER_TAG/$TEMPORAL_SERVER_SCHEMA_DIR"
    if [[ ! -d "$schema/temporal/versioned" || ! -d "$schema/visibility/versioned" ]]; then
      rm -rf "$tmp"
      log "error: no PostgreSQL schemas at $schema/{temporal,visibility}/versioned after go install"
      exit 1
    fi
    mkdir -p "$tmp/schema" &&
      cp -R "$schema/temporal" "$schema/visibility" "$tmp/schema/" &&
      chmod -R u+w "$tmp/schema" &&
      rm -rf "$dir/schema" &&
      mv "$tmp/schema" "$dir/schema" &&
      mv -f "$tmp/$(basename "$TEMPORAL_SERVER_SQL_TOOL_PACKAGE")" "$dir/temporal-sql-tool" &&
      mv -f "$tmp/$(basename "$TEMPORAL_SERVER_PACKAGE")" "$dir/temporal-server" || {
      rm -rf "$tmp"
      log "error: cannot install the server binaries and schemas into $dir"
      exit 1
    }
    rm -rf "$tmp"
    log "built $dir/temporal-server and $dir/temporal-sql-tool (schemas in $dir/schema)"
  ) 9>"$dir/.lock" || return 1
  printf '%s\n' "$dir"
}

# --- npm -----------------------------------------------------------------------------------

# `npm ci` when node_modules is missing or package-lock.json changed since the last install
# (npm writes node_modules/.package-lock.json on every install).
ensure_npm_deps() {
  if [[ ! -d "$GPURES_ROOT/node_modules" || "$GPURES_ROOT/package-lock.json" -nt "$GPURES_ROOT/node_modules/.package-lock.json" ]]; then
    log "installing npm dependencies (npm ci)"
    (cd "$GPURES_ROOT" && npm ci --no-audit --no-fund) >&2 || {
      log "error: npm ci failed"
      return 1
    }
  else
    log "npm dependencies up to date"
  fi
}

# Builds dist/ (npm run build) unless ENTRY, a compiled entry point under the checkout, is there:
# the scripts that run one of dist/src/dev/*-main.js need no full set-up first.
ensure_dist() {
  if [[ ! -f "$GPURES_ROOT/$1" ]]; then
    ensure_npm_deps
    log "building (npm run build)"
    (cd "$GPURES_ROOT" && npm run build --silent) || return 1
  fi
}

# --- apt -----------------------------------------------------------------------------------

_GPURES_APT_UPDATED=""

_gpures_pkg_installed() {
  local status
  status="$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)"
  [[ "$status" == "install ok installed" ]]
}

# ensure_apt_packages PKG...: installs the packages that are not installed yet.
ensure_apt_packages() {
  local missing=() pkg
  for pkg in "$@"; do
    if ! _gpures_pkg_installed "$pkg"; then
      missing+=("$pkg")
    fi
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    log "apt packages present: $*"
    return 0
  fi
  _gpures_require_root "installing ${missing[*]}" || return 1
  if [[ -z "$_GPURES_APT_UPDATED" ]]; then
    log "apt-get update"
    apt-get update >&2 || {
      log "error: apt-get update failed"
      return 1
    }
    _GPURES_APT_UPDATED=1
  fi
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}" >&2 || {
    log "error: apt-get install ${missing[*]} failed"
    return 1
  }
}

# --- Docker --------------------------------------------------------------------------------

gpures_docker() {
  docker -H "unix://$GPURES_DOCKER_SOCK" "$@"
}

_gpures_dockerd_answers() {
  gpures_docker info >/dev/null 2>&1
}

# Reuses the dockerd answering on $GPURES_DOCKER_SOCK, or starts one with this project's own
# socket, data root, exec root and pidfile (so it never touches a system docker) and waits up
# to 30 s for it to answer. The daemon is left running for the next run.
ensure_dockerd() {
  if _gpures_dockerd_answers; then
    log "dockerd answering on unix://$GPURES_DOCKER_SOCK; reusing it"
    return 0
  fi
  _gpures_require_root "starting dockerd" || return 1
  local dockerd
  if command -v dockerd >/dev/null 2>&1; then
    dockerd="$(command -v dockerd)"
  elif [[ -x /usr/sbin/dockerd ]]; then
    dockerd=/usr/sbin/dockerd # PATH without sbin
  else
    log "error: dockerd not found (apt-get install docker.io)"
    return 1
  fi

  local pid="" existing=""
  existing="$(cat "$GPURES_DOCKER_PIDFILE" 2>/dev/null || true)"
  if [[ "$existing" =~ ^[0-9]+$ ]] && kill -0 "$existing" 2>/dev/null &&
    [[ "$(cat "/proc/$existing/comm" 2>/dev/null || true)" == dockerd ]]; then
    # Probably another setup started it a moment ago: wait for that one rather than start a
    # second daemon on the same pidfile.
    log "dockerd (pid $existing, from $GPURES_DOCKER_PIDFILE) is running but not answering yet; waiting for it"
    pid="$existing"
  else
    mkdir -p "$(dirname "$GPURES_DOCKER_SOCK")" "$GPURES_DOCKER_DATA_ROOT" "$GPURES_DOCKER_EXEC_ROOT" || return 1
    log "starting dockerd on unix://$GPURES_DOCKER_SOCK (log: $GPURES_DOCKERD_LOG)"
    printf '\n=== %s: started by %s ===\n' "$(date -Is)" "$0" >>"$GPURES_DOCKERD_LOG"
    # setsid: own session, so a Ctrl-C in the terminal that ran the tests doesn't kill it.
    setsid "$dockerd" \
      --host "unix://$GPURES_DOCKER_SOCK" \
      --data-root "$GPURES_DOCKER_DATA_ROOT" \
      --exec-root "$GPURES_DOCKER_EXEC_ROOT" \
      --pidfile "$GPURES_DOCKER_PIDFILE" \
      </dev/null >>"$GPURES_DOCKERD_LOG" 2>&1 &
    pid=$!
  fi

  local i
  for ((i = 0; i < 60; i++)); do
    if _gpures_dockerd_answers; then
      log "dockerd ready (pid $pid)"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      # It may have lost a race against a daemon started concurrently: check once more.
      if _gpures_dockerd_answers; then
        log "dockerd ready"
        return 0
      fi
      log "error: dockerd exited during start-up; last lines of $GPURES_DOCKERD_LOG:"
      tail -n 20 "$GPURES_DOCKERD_LOG" >&2 || true
      return 1
    fi
    sleep 0.5
  done
  log "error: dockerd (pid $pid) did not answer on unix://$GPURES_DOCKER_SOCK within 30 s; last lines of $GPURES_DOCKERD_LOG:"
  tail -n 20 "$GPURES_DOCKERD_LOG" >&2 || true
  return 1
}

# --- test images --------------------------------------------------------------------------

# Builds the gpures/fake-vllm:test and gpures/fake-router:test images on the test dockerd unless
# they are up to date (src/dev/images.ts; needs `npm run build` first).
build_test_images() {
  DOCKER_HOST="unix://$GPURES_DOCKER_SOCK" node "$GPURES_ROOT/dist/src/dev/images-main.js" build
}

# What the tests, the benchmarks and the history recorder run with: the Temporal CLI, the test
# dockerd and the test image (after `scripts/setup.sh --test`); no worker /metrics (the box's real
# worker has 127.0.0.1:9475; a test that scrapes one passes its own address).
export_test_env() {
  TEMPORAL_CLI="$(temporal_bin)"
  DOCKER_HOST="unix://$GPURES_DOCKER_SOCK"
  GPURES_METRICS_ADDR=off
  export TEMPORAL_CLI DOCKER_HOST GPURES_TEST_IMAGE GPURES_METRICS_ADDR
}
