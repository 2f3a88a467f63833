# Sourced by the tests/stream/remote_*_test.sh scripts (after tests/loader/remote_servers.sh):
# steps they share, over their $BIN, $T and fail.
#   stream_two_ranks DIR ARGS...  ranks 0 and 1 of $T/i.alidx and $T/m.alm at once (two threads
#                                 each), sharing the cache folder DIR, ARGS added; their output
#                                 in $T/shared0.jsonl, $T/shared0.err, $T/shared1.*
#   s3_put_corpus FILE...         PUT each file as bkt/corpus/NAME on the S3 server (start_s3 bkt
#                                 first); exports the AWS_ variables the stream then uses
#   url_index DIR                 an index and a plan (world 2) of the files in $T/www/DIR by
#                                 their nginx URLs: $T/u.alidx, $T/u.alm
#   python_step LIB ARGS...       the Python script on stdin, with ARGS, over the library LIB
#                                 (python/ on the path; an ASan build gets its runtimes
#                                 preloaded); says why and runs nothing when LIB is "", a TSan
#                                 build (Python cannot load one: the runtime must start the
#                                 process; the C steps ran under it) or torch is missing
#   same_delivery A B             whether two --jsonl files delivered the same: equal lines
#                                 once each batch's "cost" (its stall and fetches, which differ
#                                 from run to run and between local and remote shards) is left out

. "$(dirname "$(readlink -f "$0")")/../common/python_env.sh"

same_delivery() { cmp -s <(sed 's/,"cost":{[^}]*}//' "$1") <(sed 's/,"cost":{[^}]*}//' "$2"); }

stream_two_ranks() {
  local dir=$1 r pids=()
  shift
  for r in 0 1; do
    "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank $r --threads 2 \
      --cache-dir "$dir" --cache-bytes 100000000 "$@" >"$T/shared$r.jsonl" 2>"$T/shared$r.err" &
    pids[$r]=$!
  done
  wait "${pids[0]}" || fail "rank 0 shared: $(cat "$T/shared0.err")"
  wait "${pids[1]}" || fail "rank 1 shared: $(cat "$T/shared1.err")"
}

s3_put_corpus() {
  export AWS_ACCESS_KEY_ID=$S3_KEY_ID AWS_SECRET_ACCESS_KEY=$S3_SECRET AWS_REGION=us-east-1
  export AWS_ENDPOINT_URL=$S3_EP
  local f
  for f in "$@"; do s3_put "$f" "corpus/$(basename "$f")"; done
}

url_index() {
  local f urls=()
  for f in "$T/www/$1"/*; do urls+=("http://127.0.0.1:$NGINX_PORT/$1/$(basename "$f")"); done
  "$BIN" index -o "$T/u.alidx" "${urls[@]}" >/dev/null 2>"$T/err" ||
    fail "index of URLs: $(cat "$T/err")"
  "$BIN" plan --index "$T/u.alidx" --world 2 -o "$T/u.alm" >/dev/null 2>&1 ||
    fail "plan of the URL index"
}

python_step() {
  local lib=$1
  shift
  local name
  name=$(basename "$0")
  [ -n "$lib" ] || { echo "$name: no library given: the Python step does not run"; return 0; }
  lib=$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")
  if al_tsan_build "$lib"; then
    echo "$name: the Python step does not run against a TSan build of the library"
    return 0
  fi
  al_require "$(al_python)" torch "$name's Python step" || exit 1
  ( # a subshell: only python3 gets the ASan runtimes preloaded, never the test's CLI runs
    al_asan_env "$lib"
    ADAPTIVELOAD_LIB=$lib PYTHONPATH="$(dirname "$(readlink -f "$0")")/../../python" \
      PYTHONDONTWRITEBYTECODE=1 "$(al_python)" - "$@"
  )
}
