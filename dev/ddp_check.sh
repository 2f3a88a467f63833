#!/usr/bin/env bash
# Two-GPU DDP check of the install bundle: every rank reads the same manifest, no coordination.
# On a machine with 2 GPUs and PyTorch, from the repository root, with the bundle copied to
# .devbuild/adaptiveload-dist.tar.gz (bazel build --config=opt //dist). Output under $OUT.
set -u -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
REPO=$PWD
OUT=${OUT:-/tmp/out}
nvidia-smi -L
cd /tmp && tar xzf "$REPO/.devbuild/adaptiveload-dist.tar.gz"
A=/tmp/adaptiveload
export PATH=$A/bin:$PATH PYTHONPATH=$A/python
adaptiveload synth --out /tmp/c --samples 600 --shards 8 2>&1 | tail -1
adaptiveload index -o /tmp/c.alidx /tmp/c 2>&1 | tail -1
adaptiveload plan --index /tmp/c.alidx --world 2 -o /tmp/p2.alm 2>&1 | tail -2
adaptiveload plan --index /tmp/c.alidx --world 4 -o /tmp/p4.alm 2>&1 | tail -1
echo "== torchrun, 2 ranks, manifest planned for 2"
PYTHONUNBUFFERED=1 python3 -m torch.distributed.run --nproc-per-node 2 "$A/examples/train_stream.py" \
  --index /tmp/c.alidx --manifest /tmp/p2.alm 2>&1 | grep -v "^W1\|OMP_NUM_THREADS\|^\*\*\*" | tee "$OUT/ddp.log"
echo "rc=$?"
echo "== torchrun, 2 ranks, manifest planned for 4 (must fail clearly)"
PYTHONUNBUFFERED=1 python3 -m torch.distributed.run --nproc-per-node 2 "$A/examples/train_stream.py" \
  --index /tmp/c.alidx --manifest /tmp/p4.alm 2>&1 | grep -iE "error|world" | head -4
echo "== per-rank C stream over the same manifest"
for r in 0 1; do RANK=$r WORLD_SIZE=2 adaptiveload stream --index /tmp/c.alidx --manifest /tmp/p2.alm --bench --device $r --json; done
