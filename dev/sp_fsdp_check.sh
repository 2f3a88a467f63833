#!/bin/bash
# dev/sp_fsdp_check.sh OUT: sequence parallelism of examples/train_dit.py on a machine with a
# recent torch (the GPU machine: torch >= 2.6, no bazel, no network; the repo tree copied).
# Logs everything to OUT/sp_fsdp.log and exits non-zero when a check fails or did not run.
#  1. tests/examples/sp_train_test.py --fsdp: FSDP2 (fully_shard per block, gloo on the CPU,
#     2 and 4 processes started by the test): an SP micro-batch's predictions, loss and the
#     whole gradients (gathered from the shards) equal SP=1's; lock-step of the collectives.
#  2. sp_train_test.py --torchrun (DDP) and --fsdp --torchrun: the same, the ranks started
#     by python3 -m torch.distributed.run --nproc_per_node 2 / 4.
#  3. With a GPU: the DiT's forward and backward on CUDA (f32 with the SDPA loop, then bf16
#     autocast with --attn auto: varlen / flash take fp16 and bf16 only) against the CPU path on one micro-batch of three samples (relative error of
#     the prediction and of every gradient). One GPU cannot hold two SP ranks of one process
#     group (NCCL needs a GPU per rank), so SP itself is checked by 1 and 2 on the CPU.
# A mode that prints "NOT RUN" (a torch without fully_shard or a working torchrun) fails here.
set -uo pipefail
OUT=${1:?usage: dev/sp_fsdp_check.sh OUT}
mkdir -p "$OUT"
LOG="$OUT/sp_fsdp.log"
exec > >(tee "$LOG") 2>&1
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD/python" PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
unset ADAPTIVELOAD_BIN  # no CLI here: sp_train_test leaves out its stream-batch part
echo "== $(date -u +%FT%TZ) $(uname -n), $(nproc) CPUs, commit $(cat COMMIT 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo "?")"
"$PY" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.device_count())"
command -v nvidia-smi >/dev/null && nvidia-smi -L
fail=0
run() {  # run NAME CMD...: runs it, fails on a non-zero exit or a NOT RUN line
  local name=$1; shift
  local t0=$SECONDS
  local tmp; tmp=$(mktemp -d)
  echo "== $name: $*"
  TEST_TMPDIR="$tmp" "$@" > "$tmp/out.txt" 2>&1
  local rc=$?
  grep -v 'UserWarning\|Consider using tensor.detach\|ref_loss += float' "$tmp/out.txt" | tail -60
  if [ $rc -ne 0 ] || grep -q "NOT RUN" "$tmp/out.txt"; then
    echo "== $name: FAILED (rc $rc) in $((SECONDS - t0)) s"; fail=1
  else
    echo "== $name: OK in $((SECONDS - t0)) s"
  fi
}
run "FSDP2 under SP (self-spawned ranks)" "$PY" tests/examples/sp_train_test.py --fsdp
run "DDP under SP (torchrun)" "$PY" tests/examples/sp_train_test.py --torchrun
if "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  run "DiT on CUDA (--attn auto) vs CPU" "$PY" - <<'PYEOF'
import sys, torch
sys.path[:0] = ["examples", "python"]
import dit_model as M
import train_dit as td

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
cfg = M.DiTConfig(hidden=128, heads=4, ffn=256, blocks=2, text_dim=32, freq_dim=32)
g = torch.Generator().manual_seed(0)
grids = [(2, 4, 6), (1, 6, 8), (3, 2, 2)]
n = sum(a * b * c for a, b, c in grids)
x0 = torch.randn(n, cfg.patch_dim, generator=g)
noise = torch.randn(n, cfg.patch_dim, generator=g)
texts = [torch.randn(L, cfg.text_dim, generator=g) for L in (5, 9, 3)]
t = torch.rand(len(grids), generator=g)
fields = dict(step=0, micro=0, n_micro=1, last_in_step=True, bucket=0, step_tokens=n, step_samples=3)
cpu, cuda = torch.device("cpu"), torch.device("cuda")
torch.manual_seed(0)
ref = td.build_model(cfg, cpu, "auto", False)
worst = {}

def run(model, dev, autocast):
    p = td.make_prepared(x0.to(dev), grids, [x.to(dev) for x in texts], [False] * 3, fields, dev)
    tt = t.to(dev)[p.seg][:, None]
    xt = (1 - tt) * p.x0 + tt * noise.to(dev)
    model.zero_grad(set_to_none=True)
    with autocast if autocast is not None else torch.autocast("cpu", enabled=False):
        pred = model(xt, p.cu, p.grids, t.to(dev), p.text, p.cu_text, p.text_lengths)
    loss = (pred.float() - (noise.to(dev) - p.x0)).pow(2).mean()
    loss.backward()
    return pred.float().cpu(), {k: q.grad.float().cpu() for k, q in model.named_parameters()}

want_pred, want_grads = run(ref, cpu, None)
# f32: the per-sample SDPA loop (varlen / flash attention take fp16 and bf16 only); bf16
# autocast (what train_dit runs on CUDA): --attn auto
for name, attn, ac, tol_p, tol_g in (("f32", "sdpa", None, 1e-3, 1e-3),
                                     ("bf16 autocast", "auto", torch.autocast("cuda", dtype=torch.bfloat16), 3e-2,
                                      8e-2)):
    m = td.build_model(cfg, cuda, attn, None)
    m.load_state_dict(ref.state_dict())
    pred, grads = run(m, cuda, ac)
    ep = float((pred - want_pred).abs().max() / want_pred.abs().max())
    eg = max(float((grads[k] - want_grads[k]).abs().max() / max(1e-12, float(want_grads[k].abs().max())))
             for k in want_grads)
    ok = ep <= tol_p and eg <= tol_g
    print("CUDA %s (--attn %s) vs CPU f32: prediction relative error %.3g (limit %g), worst gradient %.3g (limit %g): %s"
          % (name, attn, ep, tol_p, eg, tol_g, "OK" if ok else "FAILED"))
    if not ok:
        sys.exit(1)
PYEOF
else
  echo "== no GPU: the CUDA check did not run"
fi
run "FSDP2 under SP (torchrun)" "$PY" tests/examples/sp_train_test.py --fsdp --torchrun
echo "== $(date -u +%FT%TZ) sp_fsdp_check: $([ $fail -eq 0 ] && echo OK || echo FAILED)"
exit $fail
