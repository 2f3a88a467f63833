# Sourced by the remote_*_test.sh scripts: real servers on 127.0.0.1, each started in the
# test's directory $T with a port chosen at run time, stopped when the script exits.
#   start_nginx WWW      nginx (Debian's, as the current user) serving WWW; sets NGINX_PORT
#   start_faults WWW     remote_faults.py serving WWW; sets FAULT_PORT
#   start_s3 BUCKET      s3_server.py (moto's S3 from PyPI, SigV4 checked) with BUCKET; sets
#                        S3_PORT, S3_EP (its path-style endpoint) and the account's S3_KEY_ID
#                        and S3_SECRET (S3_SECRET set beforehand chooses the secret), and
#                        temporary credentials S3_SESSION_KEY_ID, _SECRET and _TOKEN
#   s3_put FILE KEY      PUT FILE as BUCKET/KEY (KEY as it goes in the URL), signed by curl
#   stop_nginx, restart_nginx      nginx killed (SIGKILL: no graceful close), then started
#                                  again on NGINX_PORT with the same root
#   stop_s3, restart_s3            the same for s3_server.py, which keeps its objects on disk
# The repository root (for tests/loader/s3_server.py, remote_faults.py and the test
# environment's Python) is found through this script's real path.
REMOTE_PIDS=()
REPO_ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)
NGINX=${AL_NGINX:-/usr/sbin/nginx}
. "$REPO_ROOT/tests/common/python_env.sh"

stop_servers() {
  for p in "${REMOTE_PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${REMOTE_PIDS[@]}"; do wait "$p" 2>/dev/null; done
}
trap stop_servers EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits until something answers HTTP on port $1 (any status), at most 10 s.
wait_http() {
  for _ in $(seq 1 200); do
    curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$1/" && return 0
    sleep 0.05
  done
  echo "FAIL: no server on port $1" >&2
  return 1
}

start_nginx() {
  [ -x "$NGINX" ] || { echo "FAIL: $NGINX missing (tools/bootstrap.sh installs nginx)" >&2; exit 1; }
  local d="$T/nginx" user=""
  mkdir -p "$d/tmp"
  NGINX_PORT=$(free_port)
  # A root master would hand the workers to "nobody"; keep them as the current user.
  [ "$(id -u)" = 0 ] && user="user $(id -un);"
  cat >"$d/nginx.conf" <<CONF
$user
daemon off;
worker_processes 1;
pid $d/nginx.pid;
error_log $d/error.log;
events { worker_connections 64; }
http {
  access_log $d/access.log;
  client_body_temp_path $d/tmp/body;
  proxy_temp_path $d/tmp/proxy;
  fastcgi_temp_path $d/tmp/fastcgi;
  uwsgi_temp_path $d/tmp/uwsgi;
  scgi_temp_path $d/tmp/scgi;
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:$NGINX_PORT;
    root $1;
  }
}
CONF
  restart_nginx
}

restart_nginx() {
  local d="$T/nginx"
  "$NGINX" -p "$d" -c "$d/nginx.conf" -e "$d/error.log" &
  NGINX_PID=$!
  REMOTE_PIDS+=($!)
  wait_http "$NGINX_PORT" || { cat "$d/error.log" >&2; exit 1; }
}

# Kills a server started here (and, for nginx, its worker) and waits until its port is free.
stop_pid() {
  kill -STOP "$1" 2>/dev/null # no worker respawned while its workers are killed
  pkill -KILL -P "$1" 2>/dev/null
  kill -KILL "$1" 2>/dev/null
  wait "$1" 2>/dev/null
  for _ in $(seq 1 200); do
    curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$2/" || return 0
    sleep 0.05
  done
  echo "FAIL: port $2 still answers" >&2
  exit 1
}

stop_nginx() { stop_pid "$NGINX_PID" "$NGINX_PORT"; }

start_faults() {
  python3 "$REPO_ROOT/tests/loader/remote_faults.py" "$1" "$T/faults.port" &
  REMOTE_PIDS+=($!)
  for _ in $(seq 1 200); do [ -f "$T/faults.port" ] && break; sleep 0.05; done
  FAULT_PORT=$(cat "$T/faults.port") || exit 1
}

start_s3() {
  al_require "$(al_python)" moto "the S3 server" || exit 1
  S3_PORT=$(free_port)
  S3_EP=http://127.0.0.1:$S3_PORT
  S3_BUCKET=$1
  S3_KEY_ID=AKIAADAPTIVELOADTEST
  S3_SECRET=${S3_SECRET:-adaptiveload-test-secret}
  S3_SESSION_KEY_ID=ASIAADAPTIVELOADTEST S3_SESSION_SECRET=$S3_SECRET-session
  S3_SESSION_TOKEN=adaptiveload-session-token
  restart_s3
}

restart_s3() {
  "$(al_python)" "$REPO_ROOT/tests/loader/s3_server.py" --port "$S3_PORT" --data "$T/s3" \
    --bucket "$S3_BUCKET" --access-key "$S3_KEY_ID" --secret "$S3_SECRET" \
    --session-key "$S3_SESSION_KEY_ID" --session-secret "$S3_SESSION_SECRET" --session-token "$S3_SESSION_TOKEN" >>"$T/s3_server.log" 2>&1 &
  S3_PID=$!
  REMOTE_PIDS+=($!)
  wait_http "$S3_PORT" || { cat "$T/s3_server.log" >&2; exit 1; }
}

stop_s3() { stop_pid "$S3_PID" "$S3_PORT"; }

s3_put() {
  local code
  code=$(curl -s -o "$T/put.out" -w '%{http_code}' --aws-sigv4 "aws:amz:us-east-1:s3" \
    -u "$S3_KEY_ID:$S3_SECRET" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -T "$1" \
    "$S3_EP/$S3_BUCKET/$2")
  [ "$code" = 200 ] || { echo "FAIL: PUT $2: HTTP $code $(cat "$T/put.out")" >&2; exit 1; }
}
