#!/usr/bin/env bash
# Runs the Python package's tests on a GPU machine without Bazel, against a //dist bundle:
# every tests/python/test_*.py (the CUDA cases run there instead of skipping) and
# tests/kernels/adaln_torch_test.py, then the bundle's tools/gpu_stream_check.sh.
#
# Stage on the build machine, from the repository root:
#   bazel build --config=opt //dist //dist:libal_kernels.so
#   rm -rf .devbuild && mkdir .devbuild
#   cp bazel-bin/dist/adaptiveload-dist.tar.gz bazel-bin/dist/libal_kernels.so .devbuild/
# .devbuild/ is git-ignored: the device tool carries it (carry [".devbuild"]).
# Usage (from the repository root): dev/gpu_python_check.sh OUTDIR
# Writes OUTDIR/all.log (everything) and OUTDIR/summary.txt (one line per test file).
set -u -o pipefail
out=${1:?OUTDIR}
b=$PWD/.devbuild
[ -f "$b/adaptiveload-dist.tar.gz" ] || { echo "no $b/adaptiveload-dist.tar.gz: stage it first (see the top of $0)" >&2; exit 2; }
mkdir -p "$out"
exec > >(tee -a "$out/all.log") 2>&1
tar -C "$b" -xzf "$b/adaptiveload-dist.tar.gz" || exit 2
root=$b/adaptiveload
export ADAPTIVELOAD_LIB=$root/lib/libadaptiveload.so ADAPTIVELOAD_BIN=$root/bin/adaptiveload
export AL_TEST_KERNELS_LIB=$b/libal_kernels.so PYTHONPATH=$PWD/python PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c 'import torch, numpy; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "numpy", numpy.__version__)'
fails=0
for t in tests/python/test_*.py tests/kernels/adaln_torch_test.py; do
  echo "=== $t ($(date +%T))"
  start=$(date +%s)
  if python3 "$t" 2>&1 | tee "$out/last.log"; then rc=0; else rc=1; fi
  line=$(grep -E "^(OK|FAILED)" "$out/last.log" | tail -1)
  ran=$(grep -E "^Ran [0-9]+ tests" "$out/last.log" | tail -1)
  [ "$rc" = 0 ] || fails=$((fails + 1))
  echo "$t: rc $rc, ${ran:-no unittest summary}, ${line:-?}, $(( $(date +%s) - start )) s" >> "$out/summary.txt"
done
rm -f "$out/last.log"
echo "=== gpu_stream_check ($(date +%T))"
if SAMPLES=${SAMPLES:-400} WORK=/tmp/gpu_check_work "$root/tools/gpu_stream_check.sh" "$root"; then
  echo "gpu_stream_check: rc 0" >> "$out/summary.txt"
else
  echo "gpu_stream_check: rc 1" >> "$out/summary.txt"; fails=$((fails + 1))
fi
cat "$out/summary.txt"
exit $((fails > 0))
