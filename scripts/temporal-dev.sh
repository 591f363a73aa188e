#!/usr/bin/env bash
# Runs a local Temporal dev server (temporal server start-dev) in the foreground, for humans.
# The tests start their own from TypeScript.
#
# usage: scripts/temporal-dev.sh [--ui] [--db-filename FILE] [--port N] [--ui-port N] [-- START-DEV-ARGS...]
#   --ui               serve the Web UI (default: headless)
#   --db-filename F    persist state in the SQLite file F (default: in memory, lost on exit)
#   --port N           frontend gRPC port (default: $PORT or 7233)
#   --ui-port N        Web UI port (default: $UI_PORT or port + 1000)
# Binds 127.0.0.1 only. Connect with TEMPORAL_ADDRESS=127.0.0.1:<port> TEMPORAL_NAMESPACE=default.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" >&2
}

port="${PORT:-7233}"
ui_port="${UI_PORT:-}"
ui=0
db_filename=""
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ui) ui=1 ;;
    --db-filename | --port | --ui-port)
      if [[ $# -lt 2 ]]; then
        usage
        exit 2
      fi
      case "$1" in
        --db-filename) db_filename=$2 ;;
        --port) port=$2 ;;
        --ui-port) ui_port=$2 ;;
      esac
      shift
      ;;
    --db-filename=*) db_filename=${1#*=} ;;
    --port=*) port=${1#*=} ;;
    --ui-port=*) ui_port=${1#*=} ;;
    -h | --help)
      usage
      exit 0
      ;;
    --)
      shift
      extra=("$@")
      break
      ;;
    *)
      usage
      exit 2
      ;;
  esac
  shift
done
if [[ ! "$port" =~ ^[0-9]+$ ]]; then
  die "invalid port: $port"
fi
if [[ -z "$ui_port" ]]; then
  ui_port=$((port + 1000))
elif [[ ! "$ui_port" =~ ^[0-9]+$ ]]; then
  die "invalid UI port: $ui_port"
fi

temporal="$(temporal_bin)"
args=(
  server start-dev
  --ip 127.0.0.1
  --port "$port"
  --log-level error
  --dynamic-config-value frontend.enableServerVersionCheck=false
  --dynamic-config-value frontend.enableExecuteMultiOperation=true
  --dynamic-config-value frontend.enableUpdateWorkflowExecution=true
  --dynamic-config-value history.transferProcessorMaxPollRPS=1000
  --search-attribute GpuresServe=Keyword
  --search-attribute GpuresNode=Keyword
  --search-attribute GpuresOperation=Keyword
)
if [[ $ui -eq 1 ]]; then
  args+=(--ui-port "$ui_port")
else
  args+=(--headless)
fi
if [[ -n "$db_filename" ]]; then
  mkdir -p "$(dirname "$db_filename")"
  args+=(--db-filename "$db_filename")
fi

if [[ $ui -eq 1 ]]; then
  log "Temporal dev server on 127.0.0.1:$port, Web UI http://127.0.0.1:$ui_port${db_filename:+, state in $db_filename}"
else
  log "Temporal dev server on 127.0.0.1:$port (headless)${db_filename:+, state in $db_filename}"
fi
exec "$temporal" "${args[@]}" ${extra[@]+"${extra[@]}"}
