#!/usr/bin/env bash
# Runs the AdaLN GPU checks and benchmarks on a machine with a GPU but without Bazel, from
# binaries built elsewhere and copied into .devbuild/ (see kernels/NOTES.md, "Workflow"):
#   adaln_gpu_test adaln_api_test adaln_bench libal_kernels.so [old/adaln_bench]
# Usage (from the repository root):
#   kernels/device_run.sh OUTDIR [--sweep] [--py-args "..."] [--autotune-shapes 1x65536x1536,...]
# Writes OUTDIR/{all.log,gtest.log,bench.json,memcheck.log,racecheck.log,torch.json}, with
# .devbuild/old/adaln_bench (a baseline build) old_bench.json too, and, with --autotune-shapes,
# autotune.json (torch.compile max-autotune-no-cudagraphs too). Everything printed is in
# all.log (at most 8 files come back from the device tool).
set -u -o pipefail
out=${1:?OUTDIR}
shift
sweep=""
pyargs=""
autotune=""
while [ $# -gt 0 ]; do
  case "$1" in
    --sweep) sweep="--sweep" ;;
    --py-args) pyargs="$2"; shift ;;
    --autotune-shapes) autotune="$2"; shift ;;
  esac
  shift
done
b=.devbuild
mkdir -p "$out"
exec > >(tee -a "$out/all.log") 2>&1
step() { echo; echo "=== $* ($(date +%T))"; }

step device
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv

step api test
[ -x $b/adaln_api_test ] && timeout 60 $b/adaln_api_test 2>&1 | tail -2

step gpu test
timeout 150 $b/adaln_gpu_test > "$out/gtest.log" 2>&1
echo "rc=$?"
grep -E "^  \S+ +rows|FAILED|Failure|PASSED|error" "$out/gtest.log" | head -120

step benchmark
timeout 240 $b/adaln_bench $sweep --json "$out/bench.json"
echo "rc=$?"

if [ -x $b/old/adaln_bench ]; then
  step baseline benchmark
  timeout 100 $b/old/adaln_bench --json "$out/old_bench.json"
  echo "rc=$?"
fi

step memcheck
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $b/adaln_gpu_test \
  --gtest_filter='-*Big*' > "$out/memcheck.log" 2>&1
echo "rc=$?"
grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/memcheck.log" | head

step racecheck
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $b/adaln_gpu_test \
  --gtest_filter='*tpr*:*D3072*:*split*:*D12288*:*chunk*:*D64*:*tile*:*group*:AdalnGpuArgs*-*Big*' > "$out/racecheck.log" 2>&1
echo "rc=$?"
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$out/racecheck.log" | head

step python
PYTHONUNBUFFERED=1 ADAPTIVELOAD_LIB=$PWD/$b/libal_kernels.so PYTHONPATH=$PWD/python \
  timeout 420 python3 examples/bench_adaln.py $pyargs --json "$out/torch.json" 2>&1
echo "rc=$?"

if [ -n "$autotune" ]; then
  step python autotune
  PYTHONUNBUFFERED=1 ADAPTIVELOAD_LIB=$PWD/$b/libal_kernels.so PYTHONPATH=$PWD/python \
    timeout 200 python3 examples/bench_adaln.py --autotune --shapes "$autotune" --json "$out/autotune.json" 2>&1
  echo "rc=$?"
fi
