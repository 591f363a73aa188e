#!/bin/sh
# Fake router for the promotion tests: the entrypoint of gpures/fake-router:test, an image holding
# only a static busybox (built by `node dist/src/dev/images-main.js build`).
#
#   /entrypoint.sh --validate-only --config PATH
#       Checks the config, prints the verdict on stdout, exits 0 (valid) or 1 (invalid).
#   /entrypoint.sh [--config PATH] [--port P]
#       Serves (defaults /config/router.toml and 8080):
#         GET  /healthz       200 {"status":"ok","mapping_version":"<from the config>"}
#         POST /admin/reload  Bearer $ROUTER_ADMIN_TOKEN; re-reads the config: 200
#                             {"mapping_version":…,"warnings":[]}, 400 invalid_config (the running
#                             mapping stays), 401 without the right token (or with no token set)
#       Anything else is 404. Both `--flag value` and `--flag=value` are accepted.
#
# The config is a line-oriented subset of the router's TOML:
#   mapping_version = "…"          required (the first such line counts)
#   invalid = true                 rejected by --validate-only and by reload
#   crash = true                   valid, but the router exits with code 3 at start (a crash loop
#                                  under a restart policy); a reload to it answers 200, then exits 3
#   report_mapping_version = "…"   /healthz reports this instead (a release serving the wrong mapping)
# Each directive may also be written as a comment, `# fake-router: crash = true`: a config that
# misbehaves only here and is otherwise one the reference router's rules accept (the worker refuses
# to promote, into a live config in that format, a candidate that is not one).
#
# HTTP: busybox httpd serves static files and CGI under /cgi-bin/ only (Debian's build has no
# proxy directive), so it cannot answer POST /admin/reload; a `nc -ll -e` handler (this same
# script, FAKE_ROUTER_MODE=http) answers each connection instead. SIGTERM stops it at once.
set -u

say() {
  echo "fake-router: $*" >&2
}

CR=$(printf '\r')

# A directive's line starts with its key, or with `# fake-router:` and then its key.
DIRECTIVE='^[[:space:]]*\(#[[:space:]]*fake-router:[[:space:]]*\)\{0,1\}'
DIRECTIVE_E='^[[:space:]]*(#[[:space:]]*fake-router:[[:space:]]*)?'

# value_of KEY FILE: the first `KEY = "value"` line's value; a directive's (not mapping_version,
# the config's own key) may be a comment's.
value_of() {
  prefix=$DIRECTIVE
  [ "$1" = mapping_version ] && prefix='^[[:space:]]*\(\)'
  sed -n "s/$prefix$1[[:space:]]*=[[:space:]]*\"\\([^\"]*\\)\".*\$/\\2/p" "$2" | head -n 1
}

# flag_set KEY FILE: whether a `KEY = true` line exists.
flag_set() {
  grep -Eq "$DIRECTIVE_E$1[[:space:]]*=[[:space:]]*true[[:space:]]*(#.*)?\$" "$2"
}

# check_config FILE: prints the verdict; 0 when valid.
check_config() {
  if [ ! -r "$1" ]; then
    echo "$1: invalid: cannot read the file"
    return 1
  fi
  if flag_set invalid "$1"; then
    echo "$1: invalid: line $(grep -nE "${DIRECTIVE_E}invalid[[:space:]]*=" "$1" | head -n 1 | cut -d: -f1): invalid = true"
    return 1
  fi
  mv=$(value_of mapping_version "$1")
  if [ -z "$mv" ]; then
    echo "$1: invalid: no mapping_version = \"…\" line"
    return 1
  fi
  echo "$1: valid (mapping_version '$mv')"
  return 0
}

json_escape() {
  printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g'
}

respond() {
  printf 'HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %s\r\nConnection: close\r\n\r\n%s' "$1" "${#2}" "$2"
}

# One HTTP connection on stdin/stdout (run by nc for each connection).
handle_http() {
  read -r method target _proto || exit 0
  auth=""
  length=0
  while read -r line; do
    line=${line%"$CR"}
    [ -z "$line" ] && break
    case "$line" in
      [Aa]uthorization:*) auth=${line#*:}; auth=${auth# } ;;
      [Cc]ontent-[Ll]ength:*) length=${line#*:}; length=${length# } ;;
    esac
  done
  case "$length" in "" | *[!0-9]*) length=0 ;; esac
  [ "$length" -gt 0 ] && head -c "$length" >/dev/null
  state=$(cat "$FAKE_ROUTER_STATE/mapping_version" 2>/dev/null)
  case "$method $target" in
    "GET /healthz")
      respond "200 OK" "{\"status\":\"ok\",\"mapping_version\":\"$(json_escape "$state")\"}"
      ;;
    "POST /admin/reload")
      if [ -z "${ROUTER_ADMIN_TOKEN:-}" ] || [ "$auth" != "Bearer $ROUTER_ADMIN_TOKEN" ]; then
        respond "401 Unauthorized" '{"error":{"message":"admin API requires Authorization: Bearer <token>; missing or wrong token","type":"unauthorized"}}'
        return
      fi
      if ! verdict=$(check_config "$FAKE_ROUTER_CONFIG"); then
        v=$(json_escape "$verdict")
        respond "400 Bad Request" "{\"error\":{\"message\":\"config $FAKE_ROUTER_CONFIG is invalid; the running mapping '$(json_escape "$state")' stays\",\"type\":\"invalid_config\",\"errors\":[\"$v\"],\"mapping_version\":\"$(json_escape "$state")\"}}"
        return
      fi
      mv=$(value_of mapping_version "$FAKE_ROUTER_CONFIG")
      reported=$(value_of report_mapping_version "$FAKE_ROUTER_CONFIG")
      printf '%s' "${reported:-$mv}" >"$FAKE_ROUTER_STATE/mapping_version"
      say "reloaded: mapping_version '$mv'"
      respond "200 OK" "{\"mapping_version\":\"$(json_escape "$mv")\",\"warnings\":[]}"
      if flag_set crash "$FAKE_ROUTER_CONFIG"; then
        say "crash = true in the reloaded config: crashing"
        kill -USR1 "$FAKE_ROUTER_PID"
      fi
      ;;
    *)
      respond "404 Not Found" "{\"error\":{\"message\":\"no route for $(json_escape "$method $target")\",\"type\":\"not_found\"}}"
      ;;
  esac
}

if [ "${FAKE_ROUTER_MODE:-}" = http ]; then
  handle_http
  exit 0
fi

config=/config/router.toml
port=8080
validate=0
while [ $# -gt 0 ]; do
  case "$1" in
    --validate-only) validate=1; shift ;;
    --config | --port)
      if [ $# -lt 2 ]; then
        say "$1 needs a value"
        exit 2
      fi
      if [ "$1" = --config ]; then config=$2; else port=$2; fi
      shift 2
      ;;
    --config=*) config=${1#*=}; shift ;;
    --port=*) port=${1#*=}; shift ;;
    *)
      say "unknown argument: $1"
      exit 2
      ;;
  esac
done

if [ "$validate" = 1 ]; then
  if verdict=$(check_config "$config"); then
    echo "fake-router: validate: $verdict"
    exit 0
  fi
  echo "fake-router: validate: $verdict"
  exit 1
fi

case "$port" in
  "" | *[!0-9]*)
    say "invalid --port: $port"
    exit 2
    ;;
esac

if ! verdict=$(check_config "$config"); then
  say "cannot start: $verdict"
  exit 2
fi
if flag_set crash "$config"; then
  say "crash = true in $config: exiting with code 3"
  exit 3
fi

FAKE_ROUTER_STATE=/tmp/fake-router
FAKE_ROUTER_CONFIG=$config
FAKE_ROUTER_PID=$$
export FAKE_ROUTER_STATE FAKE_ROUTER_CONFIG FAKE_ROUTER_PID
mkdir -p "$FAKE_ROUTER_STATE" || exit 1
mv=$(value_of mapping_version "$config")
reported=$(value_of report_mapping_version "$config")
printf '%s' "${reported:-$mv}" >"$FAKE_ROUTER_STATE/mapping_version" || exit 1

nc_pid=""
# As PID 1 (without --init), sh ignores SIGTERM unless it traps it.
# shellcheck disable=SC2317 # invoked by the traps
stop() {
  say "stopping"
  [ -n "$nc_pid" ] && kill "$nc_pid" 2>/dev/null
  exit "$1"
}
trap 'stop 0' TERM INT
trap 'say "crashing (exit 3)"; stop 3' USR1

say "serving mapping_version '$mv' from $config on port $port"
FAKE_ROUTER_MODE=http nc -ll -p "$port" -e /entrypoint.sh &
nc_pid=$!

# `wait` returns early when a trapped signal arrives, and the trap then runs.
wait "$nc_pid"
rc=$?
say "nc exited with code $rc"
[ "$rc" -ne 0 ] || rc=1
exit "$rc"
