#!/usr/bin/env python3
"""GPU check of the typed-member stream: the same micro-batches read with the copy to
the GPU (StreamDataset(device="cuda")) and host-only hold the same bytes for every member of
every sample, the cropped latent's tokens equal cu_seqlens, and PackedBatch.packed() on the GPU
equals the host one. Run on a machine with CUDA, from the repository root, with the CLI on PATH
and the package importable (e.g. from the unpacked //dist bundle):

    PATH=BUNDLE/bin:$PATH PYTHONPATH=BUNDLE/python dev/gpu_members_check.py [--samples 200]

Makes a corpus with dev/gen_members_corpus.py (typed latents at native grids, t5.npy, txt),
indexes and plans it for 2 ranks, then compares both ranks. Exit status 0 only if all agree."""

import argparse
import os
import subprocess
import sys
import tempfile

import torch

import adaptiveload


def bits(t):
    """The tensor's bytes (random payloads hold NaN patterns: compare bits, not values)."""
    t = t.contiguous()
    return t if t.dtype == torch.uint8 else t.view(torch.uint8)


def batches(index, manifest, rank, device, members):
    ds = adaptiveload.StreamDataset(index, manifest, rank=rank, world_size=2, members=members,
                                    device=device, keep=2)
    for b in ds:
        per = {name: [t.detach().to("cpu").clone() for t in b.tensors(name)] for name in members}
        packed = b.packed().to("cpu").clone()
        cu = b.cu_seqlens.to("cpu").clone()
        yield b.step, b.micro, list(b.keys), per, packed, cu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--work", default=None)
    ap.add_argument("--device", default="cuda", help="cuda (the check); cpu runs the same code host-only")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_members_check: no CUDA device")
        return 2
    target = args.device if args.device == "cuda" else None
    here = os.path.dirname(os.path.abspath(__file__))
    work = args.work or tempfile.mkdtemp(prefix="al_gpu_members_")
    corpus = os.path.join(work, "corpus")
    subprocess.run([sys.executable, os.path.join(here, "gen_members_corpus.py"), corpus,
                    "--samples", str(args.samples), "--shards", "4"], check=True)
    index, manifest = os.path.join(work, "c.alidx"), os.path.join(work, "m.alm")
    subprocess.run(["adaptiveload", "index", "-o", index, corpus], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["adaptiveload", "plan", "--index", index, "--world", "2", "-o", manifest], check=True,
                   stdout=subprocess.DEVNULL)
    members = ["latent.npy", "t5.npy", "txt"]
    n_batches = n_samples = n_bytes = 0
    for rank in (0, 1):
        host = list(batches(index, manifest, rank, None, members))
        dev = list(batches(index, manifest, rank, target, members))
        assert len(host) == len(dev) and host, (rank, len(host), len(dev))
        for h, d in zip(host, dev):
            assert h[:3] == d[:3], (h[:3], d[:3])
            for name in members:
                for a, b in zip(h[3][name], d[3][name]):
                    assert a.dtype == b.dtype and a.shape == b.shape, (name, a.shape, b.shape)
                    assert torch.equal(bits(a), bits(b)), (h[:3], name)
                    n_bytes += a.numel() * a.element_size()
            assert torch.equal(bits(h[4]), bits(d[4])) and torch.equal(h[5], d[5]), h[:3]
            assert h[4].shape[0] == int(h[5][-1]), (h[4].shape, h[5][-1])
            n_batches += 1
            n_samples += len(h[2])
    print("gpu_members_check: OK: %d micro-batches, %d samples, %.1f MB of members identical with and "
          "without the copy to %s; packed latents match cu_seqlens"
          % (n_batches, n_samples, n_bytes / 1e6,
             torch.cuda.get_device_name(0) if target else "the host (--device cpu)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
