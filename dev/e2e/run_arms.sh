#!/usr/bin/env bash
# The end-to-end experiment on a GPU machine without Bazel, in one device call, from the
# repository root, with the install bundle carried in .devbuild/adaptiveload-dist.tar.gz:
#
#   here:   bazel build --config=opt //dist && mkdir -p .devbuild &&
#           cp bazel-bin/dist/adaptiveload-dist.tar.gz .devbuild/        (.devbuild/ is git-ignored)
#   device: dev/e2e/run_arms.sh [run_arms.py options]                      (carry [".devbuild"])
#           one GPU: replays at W = 8 and 16; `dev/e2e/run_arms.sh --two-gpu` on nvidia-h200-x2;
#           `dev/e2e/run_arms.sh --real-world 1 --real-parallel ddp,fsdp --arms c` on one GPU.
#
# Unpacks the bundle to /tmp/adaptiveload, runs dev/e2e/run_arms.py --bundle /tmp/adaptiveload
# --out /tmp/e2e-out --export $OUT "$@", and leaves in $OUT (at most 8 files come back): run.log,
# summary.json (or real-wN.json), steps-w8.svg, steps-w16.svg (or steps-wN.svg), adaln.json,
# setup.json and results.tar.gz (every file of the run but the manifests: per-arm JSON, traces,
# cost models, the shape benchmark). run_arms.py keeps the call inside --budget-s (540 s).
set -u -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
REPO=$PWD
OUT=${OUT:-/tmp/out}
RES=${E2E_RES:-/tmp/e2e-out}
mkdir -p "$OUT" "$RES"
exec > >(tee -a "$OUT/run.log") 2>&1
bundle=$REPO/.devbuild/adaptiveload-dist.tar.gz
[ -f "$bundle" ] || { echo "no $bundle: build and copy it first (see the top of $0)"; exit 2; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | head -4
python3 -c 'import torch; print("torch", torch.__version__, "GPUs", torch.cuda.device_count())'
rm -rf /tmp/adaptiveload && tar -C /tmp -xzf "$bundle" || exit 2
export PATH=/tmp/adaptiveload/bin:$PATH
# --export: summary.json, setup.json, adaln.json / real-wN.json and the SVGs land in $OUT as they
# are written, so a call cut off at its limit still returns what had finished.
python3 "$REPO/dev/e2e/run_arms.py" --bundle /tmp/adaptiveload --out "$RES" --export "$OUT" "$@"
rc=$?
tar -C "$RES" -czf "$OUT/results.tar.gz" --exclude='*.alm' .
echo "run_arms.py exit status $rc; results in $OUT"
exit $rc
