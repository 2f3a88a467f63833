# Sourced after remote_servers.sh by the fault tests and dev/bench_remote.sh: fault_proxy.py
# on 127.0.0.1 in front of an upstream, stopped with the other servers when the script exits.
#   start_proxy NAME UPSTREAM [KNOB=VALUE ...]   sets PROXY_PORT (and NAME's port file)
#   proxy_set PORT KNOB=VALUE&...                changes knobs at run time
#   proxy_stats PORT                             the proxy's counters (JSON) on stdout
#   proxy_reset PORT                             every knob back to its default, counters 0
FAULT_PROXY=${FAULT_PROXY:-$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)/fault_proxy.py}

start_proxy() {
  local name=$1 up=$2
  shift 2
  rm -f "$T/$name.port"
  python3 "$FAULT_PROXY" "$up" "$T/$name.port" "$@" &
  REMOTE_PIDS+=($!)
  for _ in $(seq 1 200); do [ -f "$T/$name.port" ] && break; sleep 0.05; done
  PROXY_PORT=$(cat "$T/$name.port") || { echo "FAIL: fault_proxy.py did not start" >&2; exit 1; }
}

proxy_set() {
  [ "$(curl -s --max-time 10 "http://127.0.0.1:$1/__proxy/set?$2")" = ok ] ||
    { echo "FAIL: proxy_set $2" >&2; exit 1; }
}

proxy_stats() { curl -s --max-time 10 "http://127.0.0.1:$1/__proxy/stats"; }

proxy_reset() {
  [ "$(curl -s --max-time 10 "http://127.0.0.1:$1/__proxy/reset")" = ok ] ||
    { echo "FAIL: proxy_reset" >&2; exit 1; }
}
