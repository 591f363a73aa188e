#!/bin/sh
# Fake vLLM OpenAI-compatible server for tests: the entrypoint of gpures/fake-vllm:test, an image
# holding only a static busybox (built by build_test_image in scripts/lib.sh).
#
# Arguments as vLLM's api_server takes them (both `--flag value` and `--flag=value`):
#   --model M                model to "load" (default facebook/opt-125m, as vLLM)
#   --revision R             accepted, only logged
#   --served-model-name N    id reported by /v1/models (default: the model)
#   --port P                 listen port inside the container (default 8000)
# A leading `serve MODEL` (the `vllm serve` form) is accepted too. Anything else is ignored; a
# first argument that is neither an option nor `serve` is run as the command instead.
#
# Test knobs (environment):
#   FAKE_MODEL_ID=ID                report ID instead of the served name (identity mismatch)
#   FAKE_START_DELAY_S=S|never      seconds until /health answers 200 (404 before);
#                                   `never`: never becomes healthy. Default 0.
#   FAKE_EXIT_AT_START=1            exit with code 3 immediately (crash at start-up)
#   FAKE_NUM_REQUESTS_RUNNING=N     value of vllm:num_requests_running (default 0)
#   FAKE_NUM_REQUESTS_WAITING=N     value of vllm:num_requests_waiting (default 0)
# vLLM's sleep mode, with the simulated box's knobs (src/sim/sleep-mode.ts):
#   VLLM_SERVER_DEV_MODE=1          serve /sleep, /wake_up, /is_sleeping, /collective_rpc (else 404)
#   --enable-sleep-mode             a sleep frees memory (without it /sleep answers 500)
#   SIM_SLEEP_RESIDUAL_MIB=N        what a sleeping serve keeps on its GPU (default 512)
#   SIM_SLEEP_LEAK_MIB=N            what a sleep fails to free on top (default 0)
#   SIM_SLEEP_DELAY_MS, SIM_WAKE_DELAY_MS, SIM_RELOAD_DELAY_MS   how long each takes (100, 300, 1000)
#   SIM_WAKE_FAIL=1                 every wake fails with 500, as one that hits an OOM
#
# Endpoints (busybox httpd serving files from /www):
#   /health      200 with an empty body once ready, 404 before
#   /v1/models   {"object":"list","data":[{"id":N,"object":"model","root":M,...}]}; with
#                VLLM_API_KEY set, 401 {"error":"Unauthorized"} without `Authorization: Bearer KEY`
#   /metrics     Prometheus text with vllm:num_requests_running / vllm:num_requests_waiting;
#                running counts the chat completions being answered (plus the knob)
#   /sleep-state level=0|1|2, residual and leak MiB: what the fake nvidia-smi reads of a Docker serve
#   /sleep?level=N, /wake_up[?tags=weights|kv_cache], /is_sleeping, /collective_rpc (reload_weights):
#                busybox httpd runs no CGI for a POST outside cgi-bin, so each is a directory whose
#                URL it redirects (302) to URL/, served by cgi-bin/index.cgi; a client that follows
#                the redirect (fetch does) arrives there with GET, which the fake takes as the POST.
#   /cgi-bin/vllm/v1/chat/completions
#                a CGI (busybox httpd answers a plain POST with 501): answers after the body's
#                sim_delay_ms, in the OpenAI shape. A router tier whose backend is
#                http://HOST:PORT/cgi-bin/vllm reaches /health and /v1/models through it too.
# Content types are application/octet-stream (busybox picks them by file extension); clients
# that parse the body as JSON or text don't care.
set -u

WWW=/www

say() {
  echo "fake-vllm: $*" >&2
}

case "${FAKE_EXIT_AT_START:-}" in
  "" | 0 | false | no) ;;
  *)
    say "FAKE_EXIT_AT_START is set: exiting with code 3"
    exit 3
    ;;
esac

# Another command (the docker-entrypoint idiom): a serve with api "http" or "none" runs the image
# with its own command, e.g. `sleep 3600`.
case "${1:-}" in
  "" | -* | serve) ;;
  *) exec "$@" ;;
esac

model=""
revision=""
served=""
port=8000
sleep_mode=0

if [ "${1:-}" = serve ] && [ $# -ge 2 ]; then
  model=$2
  shift 2
fi

while [ $# -gt 0 ]; do
  case "$1" in
    --enable-sleep-mode | --enable_sleep_mode)
      sleep_mode=1
      shift
      continue
      ;;
    --model | --revision | --served-model-name | --port)
      if [ $# -lt 2 ]; then
        say "$1 needs a value"
        exit 2
      fi
      opt=$1
      val=$2
      shift 2
      ;;
    --model=* | --revision=* | --served-model-name=* | --port=*)
      opt=${1%%=*}
      val=${1#*=}
      shift
      ;;
    *)
      shift
      continue
      ;;
  esac
  case "$opt" in
    --model) model=$val ;;
    --revision) revision=$val ;;
    --served-model-name) served=$val ;;
    --port) port=$val ;;
  esac
done

[ -n "$model" ] || model=facebook/opt-125m
[ -n "$served" ] || served=$model
id=${FAKE_MODEL_ID:-$served}
delay=${FAKE_START_DELAY_S:-0}
running=${FAKE_NUM_REQUESTS_RUNNING:-0}
waiting=${FAKE_NUM_REQUESTS_WAITING:-0}

case "$port" in
  "" | *[!0-9]*)
    say "invalid --port: $port"
    exit 2
    ;;
esac
for knob in "FAKE_NUM_REQUESTS_RUNNING=$running" "FAKE_NUM_REQUESTS_WAITING=$waiting" \
  "SIM_SLEEP_RESIDUAL_MIB=${SIM_SLEEP_RESIDUAL_MIB:-512}" "SIM_SLEEP_LEAK_MIB=${SIM_SLEEP_LEAK_MIB:-0}" \
  "SIM_SLEEP_DELAY_MS=${SIM_SLEEP_DELAY_MS:-100}" "SIM_WAKE_DELAY_MS=${SIM_WAKE_DELAY_MS:-300}" "SIM_RELOAD_DELAY_MS=${SIM_RELOAD_DELAY_MS:-1000}"; do
  case "${knob#*=}" in
    "" | *[!0-9]*)
      say "invalid $knob (a whole number)"
      exit 2
      ;;
  esac
done
case "$delay" in
  never) ;;
  "" | *[!0-9.]* | *.*.* | .)
    say "invalid FAKE_START_DELAY_S: $delay (seconds or 'never')"
    exit 2
    ;;
esac

json_escape() {
  printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g'
}

# A restarted container keeps its filesystem: start from "not ready" every time.
rm -f "$WWW/health"
rm -rf "$WWW/v1/models" /tmp/fake-vllm.key
mkdir -p "$WWW/v1" || exit 1
printf '{"object":"list","data":[{"id":"%s","object":"model","root":"%s","owned_by":"vllm","max_model_len":4096}]}\n' \
  "$(json_escape "$id")" "$(json_escape "$model")" >/tmp/fake-vllm.models || exit 1
# With VLLM_API_KEY, as vLLM, /v1/models answers 401 without `Authorization: Bearer <key>`: a
# directory whose URL/ index.cgi checks the header (httpd serves a file to anyone).
if [ -n "${VLLM_API_KEY:-}" ]; then
  (umask 077 && printf 'Bearer %s' "$VLLM_API_KEY" >/tmp/fake-vllm.key) || exit 1
  mkdir "$WWW/v1/models" || exit 1
else
  cp /tmp/fake-vllm.models "$WWW/v1/models" || exit 1
fi
mkdir -p "$WWW/cgi-bin" /tmp/inflight || exit 1
rm -rf /tmp/inflight/* /tmp/metrics.lock
printf 'running=%s\nwaiting=%s\n' "$running" "$waiting" >/tmp/fake-vllm.env || exit 1
# Already JSON-escaped; read with cat, never sourced (the shell would undo the escapes).
json_escape "$id" >/tmp/fake-vllm.model-id || exit 1

# Sleep mode: the state in /tmp/sleep (level, whether the weights are loaded), published as
# /www/sleep-state for the fake nvidia-smi; the endpoints are directories whose URL/ index.cgi answers.
dev_mode=0
[ "${VLLM_SERVER_DEV_MODE:-}" = 1 ] && dev_mode=1
wake_fail=0
[ "${SIM_WAKE_FAIL:-}" = 1 ] && wake_fail=1
cat >/tmp/sleep.env <<END || exit 1
dev_mode=$dev_mode
sleep_mode=$sleep_mode
residual=${SIM_SLEEP_RESIDUAL_MIB:-512}
leak=${SIM_SLEEP_LEAK_MIB:-0}
sleep_ms=${SIM_SLEEP_DELAY_MS:-100}
wake_ms=${SIM_WAKE_DELAY_MS:-300}
reload_ms=${SIM_RELOAD_DELAY_MS:-1000}
wake_fail=$wake_fail
END
printf 'level=0\nweights=1\n' >/tmp/sleep || exit 1
rm -rf "$WWW/sleep" "$WWW/wake_up" "$WWW/is_sleeping" "$WWW/collective_rpc"
if [ "$dev_mode" = 1 ]; then
  mkdir -p "$WWW/sleep" "$WWW/wake_up" "$WWW/is_sleeping" "$WWW/collective_rpc" || exit 1
fi
printf 'level=0\nresidual=%s\nleak=%s\n' "${SIM_SLEEP_RESIDUAL_MIB:-512}" "${SIM_SLEEP_LEAK_MIB:-0}" >"$WWW/sleep-state" || exit 1

cat >"$WWW/cgi-bin/index.cgi" <<'EOF' || exit 1
#!/bin/sh
# vLLM's sleep-mode endpoints, reached as URL/ after httpd's redirect (see the entrypoint).
. /tmp/sleep.env
. /tmp/sleep
reply() { printf 'Status: %s\r\nContent-Type: application/json\r\n\r\n%s\n' "$1" "$2"; }
publish() {
  printf 'level=%s\nweights=%s\n' "$level" "$weights" >/tmp/sleep
  printf 'level=%s\nresidual=%s\nleak=%s\n' "$level" "$residual" "$leak" >/www/sleep-state.$$
  mv /www/sleep-state.$$ /www/sleep-state
}
pause() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }
path=${REQUEST_URI%%\?*}
case "$path" in
  /v1/models/)
    if [ "${HTTP_AUTHORIZATION:-}" = "$(cat /tmp/fake-vllm.key)" ]; then reply '200 OK' "$(cat /tmp/fake-vllm.models)"; else reply '401 Unauthorized' '{"error":"Unauthorized"}'; fi
    ;;
  /is_sleeping/)
    if [ "$level" != 0 ]; then reply '200 OK' '{"is_sleeping":true}'; else reply '200 OK' '{"is_sleeping":false}'; fi
    ;;
  /sleep/)
    if [ "$sleep_mode" != 1 ]; then
      reply '500 Internal Server Error' '{"error":"sleep mode is not enabled: start with --enable-sleep-mode"}'
      exit 0
    fi
    case "$QUERY_STRING" in *level=2*) new=2 ;; *) new=1 ;; esac
    pause "$sleep_ms"
    level=$new
    [ "$new" = 2 ] && weights=0
    publish
    echo "fake-vllm: sleeping at level $level" >&2
    reply '200 OK' '{}'
    ;;
  /wake_up/)
    pause "$wake_ms"
    if [ "$wake_fail" = 1 ]; then
      reply '500 Internal Server Error' '{"error":"CUDA error: out of memory (simulated: SIM_WAKE_FAIL)"}'
      exit 0
    fi
    case "$QUERY_STRING" in
      *tags=weights*) ;;
      *) level=0 ;;
    esac
    publish
    reply '200 OK' '{}'
    ;;
  /collective_rpc/)
    pause "$reload_ms"
    weights=1
    publish
    reply '200 OK' '{"results":[null]}'
    ;;
  *)
    reply '404 Not Found' '{"error":"not found"}'
    ;;
esac
EOF

# The CGI below rewrites /metrics as requests start and finish; httpd serves the file.
cat >/bin/fake-vllm-metrics <<'EOF' || exit 1
#!/bin/sh
. /tmp/fake-vllm.env
# One writer at a time: a count taken before another request's rewrite must not land after it.
until mkdir /tmp/metrics.lock 2>/dev/null; do sleep 0.01; done
set -- /tmp/inflight/*
[ -e "$1" ] || set --
cat >/www/metrics.$$ <<END
# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running $((running + $#))
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting $waiting
END
mv /www/metrics.$$ /www/metrics
rmdir /tmp/metrics.lock
EOF

cat >"$WWW/cgi-bin/vllm" <<'EOF' || exit 1
#!/bin/sh
status() { printf 'Status: %s\r\nContent-Type: %s\r\n\r\n' "$1" "${2:-application/json}"; }
if [ -f /tmp/fake-vllm.key ] && [ "${PATH_INFO#/v1}" != "$PATH_INFO" ] && [ "${HTTP_AUTHORIZATION:-}" != "$(cat /tmp/fake-vllm.key)" ]; then
  status '401 Unauthorized'
  printf '{"error":"Unauthorized"}\n'
  exit 0
fi
case "$PATH_INFO" in
  /health)
    if [ -f /www/health ]; then status '200 OK' text/plain; else status '404 Not Found' text/plain; fi
    ;;
  /v1/models)
    status '200 OK'
    cat /tmp/fake-vllm.models
    ;;
  /v1/chat/completions)
    body=$(head -c "${CONTENT_LENGTH:-0}")
    . /tmp/sleep
    if [ "$level" != 0 ] || [ "$weights" != 1 ]; then
      status '503 Service Unavailable'
      printf '{"error":{"message":"the engine is sleeping","type":"ServiceUnavailableError"}}\n'
      exit 0
    fi
    : >/tmp/inflight/$$
    fake-vllm-metrics
    ms=$(printf '%s' "$body" | sed -n 's/.*"sim_delay_ms"[[:space:]]*:[[:space:]]*\([0-9][0-9]*\).*/\1/p')
    [ -n "$ms" ] && sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
    rm -f /tmp/inflight/$$
    fake-vllm-metrics
    status '200 OK'
    printf '{"id":"chatcmpl-fake-%s","object":"chat.completion","model":"%s","choices":[{"index":0,"message":{"role":"assistant","content":"fake answer"},"finish_reason":"stop"}]}\n' "$$" "$(cat /tmp/fake-vllm.model-id)"
    ;;
  *)
    status '404 Not Found'
    printf '{"error":{"message":"no route %s","type":"NotFoundError"}}\n' "$PATH_INFO"
    ;;
esac
EOF
chmod 0755 /bin/fake-vllm-metrics "$WWW/cgi-bin/vllm" "$WWW/cgi-bin/index.cgi" || exit 1
fake-vllm-metrics || exit 1

httpd_pid=""
ready_pid=""

# As PID 1, sh ignores SIGTERM unless it traps it: without this `docker stop` waits its full
# timeout and then SIGKILLs.
# shellcheck disable=SC2317 # invoked by the trap
stop() {
  say "stopping"
  [ -n "$ready_pid" ] && kill "$ready_pid" 2>/dev/null
  [ -n "$httpd_pid" ] && kill "$httpd_pid" 2>/dev/null
  exit 0
}
trap stop TERM INT

say "serving model=$model revision=${revision:-<none>} served-model-name=$served id=$id port=$port start-delay=$delay"

if [ "$delay" != never ]; then
  (
    sleep "$delay" && : >"$WWW/health" && echo "fake-vllm: healthy" >&2
  ) &
  ready_pid=$!
fi

httpd -f -p "$port" -h "$WWW" &
httpd_pid=$!

# `wait` returns early when a trapped signal arrives, and the trap then runs.
wait "$httpd_pid"
rc=$?
say "httpd exited with code $rc"
[ -n "$ready_pid" ] && kill "$ready_pid" 2>/dev/null
[ "$rc" -ne 0 ] || rc=1
exit "$rc"
