#!/usr/bin/env bash
# gpu_stream_check.sh [ROOT] - stream throughput and copy/compute overlap on a GPU machine.
#
# ROOT (default: the folder above this script) holds prebuilt binaries as the //dist
# bundle lays them out: bin/adaptiveload, lib/libadaptiveload.so, python/adaptiveload/.
# Needs python3 with torch + CUDA; no Bazel. It
#   1. makes a synthetic corpus with `adaptiveload synth` (SAMPLES, default 2000: ~4 GB;
#      WORK, default ROOT/gpu_check_work), indexes and plans it for one rank;
#   2. reads it once to warm the page cache;
#   3. runs `adaptiveload stream --bench` host-only, then with --device (copies to the
#      GPU), then with --device and a simulated compute time per batch;
#   4. runs a PyTorch check: StreamDataset(device="cuda") feeding a fake training step
#      (bf16 matmuls on the current stream that also read the batch), and compares
#      the wall time with the same compute alone: the difference is the stall;
#   5. prints a summary. Exit status 1 if any step fails.
# Environment: SAMPLES, SHARDS (16), THREADS (4), PREFETCH (4), COMPUTE_MS (per batch,
# default 30), PYTHON (python3), KEEP_WORK=1 keeps the corpus.
# The bundle ships it as adaptiveload/tools/gpu_stream_check.sh (bazel build --config=opt //dist).
# BENCHMARKS.md (stream) quotes a run on one H200: docs/results/2026-11-30-h200-stream-gpu-check.log.
set -euo pipefail
ROOT=$(cd "${1:-$(dirname "$0")/..}" && pwd)
BIN=$ROOT/bin/adaptiveload
LIB=$ROOT/lib/libadaptiveload.so
PY=${PYTHON:-python3}
SAMPLES=${SAMPLES:-2000}
SHARDS=${SHARDS:-16}
THREADS=${THREADS:-4}
PREFETCH=${PREFETCH:-4}
COMPUTE_MS=${COMPUTE_MS:-30}
WORK=${WORK:-$ROOT/gpu_check_work}
for f in "$BIN" "$LIB" "$ROOT/python/adaptiveload/__init__.py"; do
  [ -e "$f" ] || { echo "gpu_stream_check: missing $f (run from an unpacked //dist bundle)" >&2; exit 1; }
done
export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH}
export ADAPTIVELOAD_LIB=$LIB
command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "gpu_stream_check: nvidia-smi not found"
echo "== corpus: $SAMPLES samples in $SHARDS shards under $WORK"
df -h "$(dirname "$WORK")" | tail -1
rm -rf "$WORK" && mkdir -p "$WORK"
"$BIN" synth --out "$WORK/shards" --samples "$SAMPLES" --shards "$SHARDS" --seed 1
"$BIN" index -o "$WORK/corpus.alidx" "$WORK/shards"
"$BIN" plan --index "$WORK/corpus.alidx" --world 1 -o "$WORK/plan.alm" >/dev/null
cat "$WORK"/shards/*.tar >/dev/null  # page cache

common=(--index "$WORK/corpus.alidx" --manifest "$WORK/plan.alm" --rank 0 --threads "$THREADS" --prefetch "$PREFETCH" --bench --json)
echo "== stream --bench (host only)"
"$BIN" stream "${common[@]}" | tee "$WORK/host.json"
echo "== stream --bench --device"
"$BIN" stream "${common[@]}" --device | tee "$WORK/device.json"
echo "== stream --bench --device --compute-ms $COMPUTE_MS"
"$BIN" stream "${common[@]}" --device --compute-ms "$COMPUTE_MS" | tee "$WORK/device_compute.json"

echo "== PyTorch: StreamDataset(device='cuda') + fake compute ($COMPUTE_MS ms/batch)"
"$PY" - "$WORK" "$THREADS" "$PREFETCH" "$COMPUTE_MS" <<'EOF' | tee "$WORK/torch.json"
import json, sys, time
import torch
import adaptiveload

work, threads, prefetch, compute_ms = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
assert torch.cuda.is_available(), "torch sees no CUDA device"
dev = torch.device("cuda", 0)
torch.cuda.set_device(dev)
a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)

def fake_step(x, reps):
    # Reads the batch (so the copy must have landed) and spends `reps` matmuls.
    s = x[: 1 << 20].float().sum() if x.numel() else torch.zeros((), device=dev)
    y = a
    for _ in range(reps):
        y = torch.mm(a, a)
    return s + y[0, 0].float()

# Calibrate matmuls per step to about compute_ms.
x0 = torch.zeros(1 << 20, dtype=torch.uint8, device=dev)
fake_step(x0, 4); torch.cuda.synchronize()
t = time.perf_counter(); fake_step(x0, 20); torch.cuda.synchronize()
per = (time.perf_counter() - t) / 20
reps = max(1, int(round(compute_ms / 1e3 / per)))

def run(ds, limit=None):
    n = nbytes = 0
    host_wait = 0.0
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    it = iter(ds)
    acc = torch.zeros((), device=dev)
    while True:
        h = time.perf_counter()
        b = next(it, None)
        host_wait += time.perf_counter() - h
        if b is None:
            break
        acc += fake_step(b.data, reps)
        n += 1
        nbytes += int(b.offsets[-1])
        if limit and n >= limit:
            break
    torch.cuda.synchronize()
    return n, nbytes, time.perf_counter() - t0, host_wait

res = {"reps_per_step": reps, "matmul_ms": per * 1e3}

# Correctness first: device batches (copied by the C library, read after the event wait,
# while the GPU is kept busy) equal the host batches byte for byte, cu_seqlens included.
mk = lambda **k: adaptiveload.StreamDataset(f"{work}/corpus.alidx", f"{work}/plan.alm", rank=0, world_size=1,
                                            threads=threads, prefetch=prefetch, **k)
checked = 0
for zc in (False, True):
    for hb, db in zip(mk(zero_copy=False), mk(device=dev, zero_copy=zc)):
        fake_step(x0, 2)  # queue work so that copies and compute really overlap
        assert db.data.is_cuda and db.cu_seqlens.is_cuda
        assert hb.keys == db.keys, (hb.keys, db.keys)
        assert torch.equal(hb.data, db.data.cpu()), "device bytes differ at position %d" % hb.position
        assert torch.equal(hb.cu_seqlens, db.cu_seqlens.cpu())
        checked += 1
        if checked % 40 == 0:
            break
res["device_batches_verified"] = checked
for mode, zc in (("clone", False), ("zero_copy", True)):
    ds = adaptiveload.StreamDataset(f"{work}/corpus.alidx", f"{work}/plan.alm", rank=0, world_size=1,
                                    device=dev, threads=threads, prefetch=prefetch, zero_copy=zc)
    n, nbytes, wall, host_wait = run(ds)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fake_step(x0, reps)
    torch.cuda.synchronize()
    alone = time.perf_counter() - t0
    res[mode] = {"batches": n, "gb": nbytes / 1e9, "wall_s": wall, "compute_alone_s": alone,
                 "stall_s": max(0.0, wall - alone), "stall_pct": 100 * max(0.0, wall - alone) / wall,
                 "host_wait_in_next_s": host_wait, "gb_per_s": nbytes / 1e9 / wall}
# Loader alone (no compute) through Python, for the GB/s ceiling of this path.
ds = adaptiveload.StreamDataset(f"{work}/corpus.alidx", f"{work}/plan.alm", rank=0, world_size=1, device=dev,
                                threads=threads, prefetch=prefetch, zero_copy=True)
reps_saved, reps = reps, 0
n, nbytes, wall, _ = run(ds)
reps = reps_saved
res["loader_only"] = {"batches": n, "gb": nbytes / 1e9, "wall_s": wall, "gb_per_s": nbytes / 1e9 / wall}
print(json.dumps(res))
EOF

"$PY" - "$WORK" <<'EOF'
import json, sys
w = sys.argv[1]
h = json.load(open(f"{w}/host.json")); d = json.load(open(f"{w}/device.json"))
dc = json.load(open(f"{w}/device_compute.json")); t = json.loads(open(f"{w}/torch.json").read().strip().splitlines()[-1])
print("== summary")
print(f"host-only stream : {h['gb_per_s']:.2f} GB/s, {h['batches_per_s']:.1f} batches/s, stall {h['stall_seconds']:.3f} s of {h['seconds']:.2f} s")
print(f"with device copy : {d['gb_per_s']:.2f} GB/s, copy stall {d['copy_stall_seconds']:.3f} s, next() stall {d['stall_seconds']:.3f} s of {d['seconds']:.2f} s")
print(f"+ {dc['compute_seconds']/max(dc['batches'],1)*1e3:.0f} ms compute/batch : next() stall {dc['stall_seconds']:.3f} s, copy stall {dc['copy_stall_seconds']:.3f} s of {dc['seconds']:.2f} s")
for m in ("clone", "zero_copy"):
    r = t[m]
    print(f"torch {m:9s}: {r['batches']} batches {r['gb']:.2f} GB, wall {r['wall_s']:.2f} s vs compute alone {r['compute_alone_s']:.2f} s -> stall {r['stall_s']:.3f} s ({r['stall_pct']:.1f}%), host wait in next() {r['host_wait_in_next_s']:.3f} s")
print(f"torch loader only: {t['loader_only']['gb_per_s']:.2f} GB/s")
EOF
[ "${KEEP_WORK:-0}" = 1 ] || rm -rf "$WORK"
