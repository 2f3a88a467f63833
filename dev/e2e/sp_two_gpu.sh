#!/usr/bin/env bash
# The two-GPU arm set in one device call (nvidia-h200-x2), from the repository root:
#   dev/e2e/sp_two_gpu.sh JOBDIR OUT
# JOBDIR: the folder `sp_two_gpu.py job --work` wrote two/job.json and two/arms.json into
# (carry JOBDIR/two). SP2_BACKEND=gloo runs it on one GPU, two ranks sharing it (a path check).
# OUT/replay: the one-GPU replay of the same steps' shapes (GPU 0 alone, before the others);
# OUT/coll, OUT/check, OUT/train: the torchrun steps (NCCL). Each step's log is
# OUT/<step>.log; a failed step does not stop the rest (the exit status is the last failure's).
# SP2_MODELS=14b (or 1.3b; default both) does one model's set, so that a call fits the device's
# per-command limit; SP2_TRAIN_BUDGET_S (default 400) caps the training, shared out over the
# arms: the rest of a 14B call took 125 s on one H200 (replay 59 s, collectives 32, check 17,
# start-ups), so a call stays inside the 600 s limit.
set -u
JOB=${1:?JOBDIR}
OUT=${2:?OUT}
mkdir -p "$OUT"
# NVLink multicast stays off in NCCL, PyTorch and NVSHMEM (a program using it can take a shared
# host's GPUs out of service); the device image sets these too, kept here for other launchers.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
NP=${SP2_NPROC:-2}
TR=(torchrun --standalone --nproc-per-node "$NP")
MODELS=${SP2_MODELS:-14b,1.3b}
BUDGET=${SP2_TRAIN_BUDGET_S:-400}
rc=0
step() {
  local name=$1
  shift
  echo "== $name: $*"
  local t0=$SECONDS
  "$@" >"$OUT/$name.log" 2>&1
  local r=$?
  tail -n 15 "$OUT/$name.log"
  echo "== $name: rc $r, $((SECONDS - t0)) s"
  [ "$r" = 0 ] || rc=$r
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
step replay env CUDA_VISIBLE_DEVICES=0 python3 dev/e2e/sp_replay.py --job "$JOB/two/job.json" --models "$MODELS" \
  --out "$OUT/replay"
step coll "${TR[@]}" dev/e2e/sp_two_gpu.py collectives --models "$MODELS" --out "$OUT/coll"
step check "${TR[@]}" dev/e2e/sp_two_gpu.py check --models "$MODELS" --out "$OUT/check"
step train "${TR[@]}" dev/e2e/sp_two_gpu.py train --arms "$JOB/two/arms.json" --models "$MODELS" \
  --budget-s "$BUDGET" --out "$OUT/train"
exit $rc
