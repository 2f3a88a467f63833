#!/usr/bin/env bash
# tools/fuzz.sh - builds the libFuzzer harnesses of tests/fuzz/ with clang
# (-fsanitize=fuzzer,address,undefined) straight from the C sources (no Bazel),
# then fuzzes them or replays their inputs.
#
#   tools/fuzz.sh [--time SECONDS] [--jobs N] [HARNESS...]
#       fuzzes each harness (default: all) for SECONDS (default 60) on a copy of
#       tests/fuzz/corpus/HARNESS/ in $AL_FUZZ_WORK/HARNESS (default /tmp/al_fuzz),
#       one harness after the other; --jobs N > 1 uses libFuzzer's -fork=N.
#       --keep-going: fork mode that goes on after a crash, leak, timeout or OOM
#       (-ignore_crashes ...) and so collects every finding of the run.
#       Prints executions, coverage and findings per harness; any crash, leak,
#       timeout or OOM makes it exit 1, its input copied (minimised when
#       possible) into tests/fuzz/findings/HARNESS/ for triage.
#   tools/fuzz.sh --regress [HARNESS...]
#       runs each harness once over its seeds and tests/fuzz/regressions/HARNESS/
#       (no fuzzing; seconds): what tools/test.sh runs. Exit 1 on any failure.
#   tools/fuzz.sh --build
#       builds only; binaries in $AL_FUZZ_WORK/build/bin/.
# AL_FUZZ_CFLAGS adds compiler flags (its own build folder).
#
# Needs clang and libclang-rt-14-dev (libclang_rt.fuzzer), protoc-c and the -dev
# packages of libarchive, lz4, jansson, protobuf-c, libcurl (tools/bootstrap.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

HARNESSES=(tar_index meta_json index_load manifest_load cost_load bench_csv tensor_header)
declare -A MAXLEN=([tar_index]=65536 [meta_json]=4096 [index_load]=16384
  [manifest_load]=16384 [cost_load]=4096 [bench_csv]=8192 [tensor_header]=4096)

mode=fuzz
seconds=60
jobs=1
keep_going=0
picked=()
while [ $# -gt 0 ]; do
  case "$1" in
    --time) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --regress) mode=regress; shift ;;
    --keep-going) keep_going=1; shift ;;
    --build) mode=build; shift ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *)
      [ -n "${MAXLEN[$1]:-}" ] || { echo "fuzz.sh: unknown harness '$1' (${HARNESSES[*]})" >&2; exit 2; }
      picked+=("$1"); shift ;;
  esac
done
[ ${#picked[@]} -gt 0 ] || picked=("${HARNESSES[@]}")

WORK=${AL_FUZZ_WORK:-/tmp/al_fuzz}
# AL_FUZZ_CFLAGS: extra compiler flags (e.g. -fno-sanitize=pointer-overflow to fuzz past
# an open finding); builds with extra flags get a build folder of their own.
EXTRA=${AL_FUZZ_CFLAGS:-}
BUILD=$WORK/build${EXTRA:+-$(printf '%s' "$EXTRA" | md5sum | cut -c1-8)}
mkdir -p "$BUILD/gen" "$BUILD/obj" "$BUILD/bin"
CC=${CC:-clang}
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
CFLAGS="-g -O1 -std=c11 -D_GNU_SOURCE -I. -I$BUILD/gen -Wall -Wno-unused-parameter $SAN $EXTRA"

# ---- build ----
# Generated sources: the protobuf-c schema (as //proto:adaptiveload_pb_c does)
# and the embedded default cost model (as //cost:default_cost_c does).
# Written to a side folder and copied only when changed, so that objects are not
# rebuilt on every call.
rm -rf "$BUILD/gen.new" && mkdir -p "$BUILD/gen.new" "$BUILD/gen/proto"
protoc-c --proto_path=. --c_out="$BUILD/gen.new" proto/adaptiveload.proto
for f in adaptiveload.pb-c.c adaptiveload.pb-c.h; do
  cmp -s "$BUILD/gen.new/proto/$f" "$BUILD/gen/proto/$f" || cp "$BUILD/gen.new/proto/$f" "$BUILD/gen/proto/$f"
done
mkdir -p "$BUILD/gen/cost"
{
  echo '/* Generated from cost/data/h200_dit_block_cost.json by tools/fuzz.sh. */'
  echo 'extern const char cost_default_json[];'
  echo 'extern const unsigned long cost_default_json_len;'
  echo 'const char cost_default_json[] = {'
  od -An -v -tu1 cost/data/h200_dit_block_cost.json | sed -e 's/  */ /g' -e 's/^ //' -e 's/ $//' -e 's/ /, /g' -e 's/$/,/'
  echo '0};'
  echo "const unsigned long cost_default_json_len = $(wc -c < cost/data/h200_dit_block_cost.json);"
} > "$BUILD/gen.new/default_cost_data.c"
cmp -s "$BUILD/gen.new/default_cost_data.c" "$BUILD/gen/cost/default_cost_data.c" \
  || cp "$BUILD/gen.new/default_cost_data.c" "$BUILD/gen/cost/default_cost_data.c"

# Library sources: the .c files of the Bazel cc_library targets (read from the
# BUILD files, so that a file added or split needs no edit here); generated ones
# come from $BUILD/gen.
bazel_srcs() { # PACKAGE NAME|'*'
  python3 - "$1" "$2" <<'PY'
import os, re, sys
pkg, want = sys.argv[1], sys.argv[2]
text = open(os.path.join(pkg, "BUILD")).read()
for m in re.finditer(r"cc_library\((.*?)\n\)", text, re.S):
    body = m.group(1)
    name = re.search(r'name\s*=\s*"([^"]+)"', body).group(1)
    srcs = re.search(r"srcs\s*=\s*\[(.*?)\]", body, re.S)
    if want in ("*", name) and srcs:
        for f in re.findall(r'"([^"]+\.c)"', srcs.group(1)):
            print(os.path.join(pkg, f))
PY
}
lib_srcs() { # PACKAGE NAME...
  local pkg=$1 f
  shift
  for n in "$@"; do
    for f in $(bazel_srcs "$pkg" "$n"); do
      if [ -f "$f" ]; then echo "$f"; else echo "$BUILD/gen/$f"; fi
    done
  done
}
mapfile -t COMMON < <(lib_srcs common '*')
mapfile -t PROTO < <(lib_srcs proto schema pbio)
mapfile -t LOADER < <(lib_srcs loader loader; lib_srcs storage storage; lib_srcs decode decode)
mapfile -t COST < <(lib_srcs cost cost)
mapfile -t PLANNER < <(lib_srcs planner planner run_draw)
mapfile -t MANIFEST < <(lib_srcs manifest manifest)
for f in "${COMMON[@]}" "${PROTO[@]}" "${LOADER[@]}" "${COST[@]}" "${PLANNER[@]}" "${MANIFEST[@]}"; do
  [ -f "$f" ] || { echo "fuzz: $f (named in a BUILD file) is missing" >&2; exit 1; }
done
LIBS_LOADER="-larchive -llz4 -ljansson -lprotobuf-c -lcurl -lavformat -lavcodec -lswscale -lavutil -lz -lm -lpthread"
LIBS_PLANNER="-llz4 -ljansson -lprotobuf-c -lm -lpthread"

srcs_of() {
  case "$1" in
    meta_json) echo "${COMMON[@]} loader/meta.c" ;;
    tensor_header) echo "${COMMON[@]} loader/tensor_header.c" ;;
    tar_index|index_load) echo "${COMMON[@]} ${PROTO[@]} ${LOADER[@]}" ;;
    manifest_load) echo "${COMMON[@]} ${PROTO[@]} ${COST[@]} ${PLANNER[@]} ${MANIFEST[@]}" ;;
    cost_load|bench_csv) echo "${COMMON[@]} ${PROTO[@]} ${COST[@]}" ;;
  esac
}
libs_of() {
  case "$1" in
    meta_json) echo "-ljansson -lm -lpthread" ;;
    tensor_header) echo "-ljansson -lm -lpthread" ;;
    tar_index|index_load) echo "$LIBS_LOADER" ;;
    *) echo "$LIBS_PLANNER" ;;
  esac
}

# One object per source (instrumented, -fsanitize=fuzzer-no-link), rebuilt when
# the source or any header is newer; then one link per harness.
obj_of() { local s=${1#"$BUILD/gen/"}; echo "$BUILD/obj/${s//\//__}.o"; }
newest_header=$(ls -t common/*.h proto/*.h loader/*.h storage/*.h cost/*.h planner/*.h manifest/*.h tests/fuzz/*.h "$BUILD"/gen/proto/*.h | head -1)
compile() {
  local src=$1 obj
  obj=$(obj_of "$src")
  if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ "$newest_header" -nt "$obj" ]; then
    $CC $CFLAGS -fsanitize=fuzzer-no-link -c "$src" -o "$obj" || return 1
  fi
}
need=()
for h in "${picked[@]}"; do
  for s in $(srcs_of "$h"); do need+=("$s"); done
  need+=("tests/fuzz/fuzz_$h.c")
done
mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
echo "fuzz: compiling ${#need[@]} sources with $CC ($SAN)" >&2
export -f compile obj_of
export CC CFLAGS BUILD newest_header
printf '%s\n' "${need[@]}" | xargs -P "$(nproc)" -I{} bash -c 'compile "$1"' _ {} \
  || { echo "fuzz: compile failed" >&2; exit 1; }
for h in "${picked[@]}"; do
  objs=()
  for s in $(srcs_of "$h") "tests/fuzz/fuzz_$h.c"; do objs+=("$(obj_of "$s")"); done
  # shellcheck disable=SC2046
  $CC $CFLAGS -fsanitize=fuzzer "${objs[@]}" $(libs_of "$h") -o "$BUILD/bin/fuzz_$h" \
    || { echo "fuzz: link of fuzz_$h failed" >&2; exit 1; }
done
[ "$mode" = build ] && { echo "fuzz: built ${picked[*]} in $BUILD/bin" >&2; exit 0; }

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
COMMON_OPTS=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048)

# ---- regress: every seed and regression input once ----
if [ "$mode" = regress ]; then
  fail=0
  for h in "${picked[@]}"; do
    mapfile -t inputs < <(find "tests/fuzz/corpus/$h" "tests/fuzz/regressions/$h" -type f 2>/dev/null | sort)
    if [ ${#inputs[@]} -eq 0 ]; then echo "fuzz: $h: no inputs" >&2; fail=1; continue; fi
    log=$WORK/$h.regress.log
    mkdir -p "$WORK/$h/tmp"
    if TMPDIR=$WORK/$h/tmp "$BUILD/bin/fuzz_$h" "${COMMON_OPTS[@]}" "${inputs[@]}" > "$log" 2>&1; then
      echo "fuzz: $h: ${#inputs[@]} inputs ok"
    else
      echo "fuzz: $h: FAILED (log: $log)"
      { grep -E "ERROR: |SUMMARY: |runtime error|Running: " "$log" || true; } | tail -8 | sed 's/^/  /'
      fail=1
    fi
  done
  exit $fail
fi

# ---- fuzz ----
last_num() { { grep -oE "$1" "$2" || true; } | tail -1 | grep -oE '[0-9]+$' || true; }
fail=0
summary=()
for h in "${picked[@]}"; do
  dir=$WORK/$h
  rm -rf "$dir/corpus" "$dir/artifacts" "$dir/tmp" "$dir/fuzz_$h"
  mkdir -p "$dir/corpus" "$dir/artifacts" "$dir/tmp"
  cp tests/fuzz/corpus/"$h"/* "$dir/corpus/"
  [ -d "tests/fuzz/regressions/$h" ] && cp tests/fuzz/regressions/"$h"/* "$dir/corpus/" 2>/dev/null || true
  par=()
  [ "$jobs" -gt 1 ] && par=(-fork="$jobs")
  [ "$keep_going" = 1 ] && par=(-fork="$jobs" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  log=$dir/fuzz.log
  echo "fuzz: $h for ${seconds}s (log: $log, corpus: $dir/corpus)" >&2
  set +e
  # run a copy: a later build (another fuzz.sh, test.sh) must not swap the binary
  # under fork mode, which starts it again for every job
  cp "$BUILD/bin/fuzz_$h" "$dir/fuzz_$h"
  TMPDIR=$dir/tmp "$dir/fuzz_$h" "${COMMON_OPTS[@]}" "${par[@]}" -max_len="${MAXLEN[$h]}" \
    -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$dir/artifacts/" \
    "$dir/corpus" > "$log" 2>&1
  rc=$?
  set -e
  execs=$(last_num 'stat::number_of_executed_units: [0-9]+' "$log")
  [ -n "$execs" ] || execs=$(last_num '^#[0-9]+' "$log")
  cov=$(last_num 'cov: [0-9]+' "$log")
  ft=$(last_num 'ft: [0-9]+' "$log")
  corp=$(ls "$dir/corpus" | wc -l)
  mapfile -t found < <(find "$dir/artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'slow-unit-*' \) | sort)
  n_found=0
  for a in "${found[@]}"; do
    case "$(basename "$a")" in slow-unit-*) continue ;; esac
    n_found=$((n_found + 1))
    dest=tests/fuzz/findings/$h
    mkdir -p "$dest"
    cp "$a" "$dest/"
    echo "fuzz: $h: finding $(basename "$a") -> $dest/" >&2
  done
  if [ "$rc" -ne 0 ] && [ "$n_found" -eq 0 ]; then n_found="rc=$rc"; fi
  if [ "$rc" -ne 0 ] || [ "$n_found" != 0 ]; then fail=1; fi
  summary+=("$(printf '%-14s %8ss %12s execs  cov %-6s ft %-6s corpus %-5s findings %s' \
    "$h" "$seconds" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$corp" "$n_found")")
  if [ "$rc" -ne 0 ]; then
    { grep -E "ERROR: |SUMMARY: |runtime error" "$log" || true; } | sort -u | head -10 | sed 's/^/  /' >&2
  fi
done
echo "fuzz: summary ($(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
printf '  %s\n' "${summary[@]}"
exit $fail
