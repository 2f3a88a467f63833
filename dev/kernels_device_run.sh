#!/usr/bin/env bash
# Runs the AdaLN GPU checks and benchmarks on a machine with a GPU but without Bazel, from the
# repository root, using binaries built here and staged in .devbuild/:
#   adaln_gpu_test adaln_api_test adaln_bench libal_kernels.so
# (tests/kernels/adaln_torch_test.py and examples/bench_adaln.py run from the working tree).
#
# Stage .devbuild/ on the build machine, from the repository root. Use the --config=opt tree:
# bazel-bin follows the last command, and after a plain `bazel test` it is the fastbuild tree.
#   bazel build --config=opt //dev:adaln_bench //dist:libal_kernels.so \
#       //tests/kernels:adaln_gpu_test //tests/kernels:adaln_api_test
#   O=$(bazel info --config=opt bazel-bin)
#   rm -rf .devbuild && mkdir .devbuild
#   cp $O/tests/kernels/adaln_gpu_test $O/tests/kernels/adaln_api_test $O/dev/adaln_bench \
#       $O/dist/libal_kernels.so .devbuild/
#   chmod u+w .devbuild/* && strip --strip-debug .devbuild/*
#   # optional, when the files exceed what can be carried (~51 MB for these four): pack them;
#   # this script unpacks .devbuild/all.tar.xz first
#   tar -C .devbuild -cf - . | xz -T0 > /tmp/all.tar.xz && rm -rf .devbuild/* && mv /tmp/all.tar.xz .devbuild/
# .devbuild/ is git-ignored: the device tool must carry it (carry [".devbuild"]).
#
# Optional: other builds in .devbuild/NAME/ (same files): NAME's benchmark runs as a same-run
# baseline (NAME_bench.json), and if this build's GPU tests fail and .devbuild/fallback names
# one of them (a line "NAME"), that build gets the full check too (its output in all.log only).
#
# Usage (from the repository root):
#   dev/kernels_device_run.sh OUTDIR [--sweep] [--py-args "..."] [--autotune-shapes 1x65536x1536,...]
#                         [--bench "ARGS"]...
# Each --bench runs adaln_bench ARGS once more after the default benchmark (output in all.log).
# The Python binding's GPU tests (tests/kernels/adaln_torch_test.py) run after the C checks.
# Writes OUTDIR/{all.log,gtest.log,bench.json,memcheck.log,racecheck.log,torch.json},
# NAME_bench.json per baseline, and, with --autotune-shapes, autotune.json (torch.compile
# max-autotune-no-cudagraphs too). Everything printed is in all.log (at most 8 files come
# back from the device tool).
set -u -o pipefail
out=${1:?OUTDIR}
shift
sweep=""
pyargs=""
autotune=""
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sweep) sweep="--sweep" ;;
    --py-args) pyargs="$2"; shift ;;
    --autotune-shapes) autotune="$2"; shift ;;
    --bench) extra+=("$2"); shift ;;
  esac
  shift
done
b=.devbuild
[ -d $b ] || { echo "no $b/: stage it first (see the top of $0)" >&2; exit 2; }
if [ -f $b/all.tar.xz ]; then
  tar -C $b -xJf $b/all.tar.xz && rm $b/all.tar.xz || exit 2
fi
mkdir -p "$out"
exec > >(tee -a "$out/all.log") 2>&1
step() { echo; echo "=== $* ($(date +%T))"; }

step device
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv

# checks BUILD_DIR LOG_PREFIX: api test, GPU tests, memcheck, racecheck of one build.
checks() {
  local d=$1 p=$2
  step api test $d
  [ -x $d/adaln_api_test ] && timeout 60 $d/adaln_api_test 2>&1 | tail -2

  step gpu test $d
  timeout 150 $d/adaln_gpu_test > "$p-gtest.log" 2>&1
  gtest_rc=$?
  echo "rc=$gtest_rc"
  grep -E "^  \S+ +rows|FAILED|Failure|PASSED|error" "$p-gtest.log" | head -150

  step memcheck $d
  timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $d/adaln_gpu_test \
    --gtest_filter='-*Big*' > "$p-memcheck.log" 2>&1
  echo "rc=$?"
  grep -E "ERROR SUMMARY|PASSED|FAILED" "$p-memcheck.log" | head

  step racecheck $d
  timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $d/adaln_gpu_test \
    --gtest_filter='*tpr*:*D3072*:*split*:*D12288*:*chunk*:*D64*:*tile*:*group*:AdalnGpuArgs*-*Big*' > "$p-racecheck.log" 2>&1
  echo "rc=$?"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$p-racecheck.log" | head
}

# python BUILD_DIR JSON: examples/bench_adaln.py against that build's library.
python_bench() {
  step python $1
  PYTHONUNBUFFERED=1 ADAPTIVELOAD_LIB=$PWD/$1/libal_kernels.so PYTHONPATH=$PWD/python \
    timeout 420 python3 examples/bench_adaln.py $pyargs --json "$2" 2>&1
  echo "rc=$?"
}

checks $b "$out/x"
main_gtest_rc=$gtest_rc
for f in gtest memcheck racecheck; do mv "$out/x-$f.log" "$out/$f.log"; done

# The Python binding under PyTorch: eager, CUDA graphs, torch.compile, opcheck.
step python tests
PYTHONUNBUFFERED=1 ADAPTIVELOAD_LIB=$PWD/$b/libal_kernels.so PYTHONPATH=$PWD/python \
  timeout 300 python3 tests/kernels/adaln_torch_test.py 2>&1 | tail -40
echo "rc=${PIPESTATUS[0]}"

step benchmark
timeout 240 $b/adaln_bench $sweep --json "$out/bench.json"
echo "rc=$?"

for a in "${extra[@]}"; do
  step "benchmark $a"
  # shellcheck disable=SC2086
  timeout 200 $b/adaln_bench $a
  echo "rc=$?"
done

for d in $b/*/; do
  d=${d%/}
  [ -x $d/adaln_bench ] || continue
  n=$(basename $d)
  step baseline benchmark $n
  timeout 100 $d/adaln_bench --json "$out/${n}_bench.json"
  echo "rc=$?"
done

python_bench $b "$out/torch.json"

if [ -n "$autotune" ]; then
  step python autotune
  PYTHONUNBUFFERED=1 ADAPTIVELOAD_LIB=$PWD/$b/libal_kernels.so PYTHONPATH=$PWD/python \
    timeout 200 python3 examples/bench_adaln.py --autotune --shapes "$autotune" --json "$out/autotune.json" 2>&1
  echo "rc=$?"
fi

if [ "$main_gtest_rc" != 0 ] && [ -f $b/fallback ]; then
  fb=$b/$(head -1 $b/fallback)
  step "FALLBACK: GPU tests failed (rc=$main_gtest_rc); full check of $fb"
  mkdir -p /tmp/fb
  checks $fb /tmp/fb/fb
  python_bench $fb /tmp/fb/torch.json
fi
