#!/usr/bin/env python3
"""Train a tiny latent denoiser with torch's DataLoader + adaptiveload.BatchSampler.

    python3 examples/train_dataloader.py                   # makes a demo corpus, CPU is fine
    python3 examples/train_dataloader.py --index I --manifest M --workers 4
    torchrun --nproc-per-node 2 examples/train_dataloader.py --world 2 ...   (DDP, gloo/nccl)

The sampler yields, for this rank, the index positions of each planned micro-batch;
IndexDataset reads each sample's latent through the C library in DataLoader worker
processes; collate_packed packs them (64-byte aligned, cu_seqlens). Gradients are
accumulated over the micro-batches of a step (every rank has exactly the plan's K of them,
``info.n_micro``; their sizes differ, which is how the planner balances predicted cost) and
the optimizer steps on ``info.last_in_step``.
The loss is normalised by the step's planned token total over all ranks, so every
token weighs the same whatever batch it landed in.

Without --index/--manifest a corpus is made in --workdir with the CLI (``adaptiveload``
on PATH, or --bin): synth, index, plan for --world ranks (adaptiveload.demo_corpus).
The model stays on the CPU; with torchrun, ranks reduce gradients over gloo.

The synthetic latents are pseudo-random bytes, so values are read through their int16
bit pattern scaled to [-1, 1) (random bf16 bit patterns include NaN and 1e38); with real
latents use ``tokens.float()``.
"""

import argparse
import os
import sys
import time

import torch
import torch.nn as nn

try:  # an installed package (the //dist bundle on PYTHONPATH) first, else this checkout's
    import adaptiveload
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import adaptiveload  # noqa: E402
from adaptiveload.toy_model import TinyDenoiser  # stand-in: replace with your model



def to_tokens(batch, sampler):
    """Packed collate_packed batch -> (tokens, 64) float tensor, per-token sample ids, mask."""
    xs, segs = [], []
    offs = batch["offsets"].tolist()
    for i in range(len(batch["keys"])):
        payload = batch["data"][offs[i]:offs[i] + int(batch["sizes"][i])]
        shape = batch["shapes"][i].tolist()
        # collate_packed does not know buckets; the sampler does.
        t = adaptiveload.latent_tokens(payload, shape, sampler.bucket_shape(batch["bucket"]))
        xs.append(t.view(torch.int16).float() / 32768.0)
        segs.append(torch.full((t.shape[0],), i, dtype=torch.long))
    return torch.cat(xs), torch.cat(segs)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    adaptiveload.add_corpus_arguments(p)  # --index/--manifest, or a demo corpus
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--steps", type=int, default=0, help="stop after N optimizer steps (0: the whole epoch)")
    p.add_argument("--lr", type=float, default=1e-3)
    args = p.parse_args()

    env = adaptiveload.setup_distributed(cpu=True)  # torchrun's rank and world; gloo when > 1
    index, manifest = adaptiveload.corpus_from_args(args)

    sampler = adaptiveload.BatchSampler(manifest)  # rank / world from torchrun, or rank 0 of 1
    dataset = adaptiveload.IndexDataset(index)
    loader = torch.utils.data.DataLoader(dataset, batch_sampler=sampler, num_workers=args.workers,
                                         collate_fn=adaptiveload.collate_packed)
    torch.manual_seed(0)
    model = TinyDenoiser()
    if env.initialized:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    world = sampler.world_size

    steps, seen_tokens, t0 = 0, 0, time.time()
    step_loss = 0.0
    for info, batch in zip(sampler.infos(), loader):
        batch["bucket"] = info.bucket
        x, seg = to_tokens(batch, sampler)
        n = len(batch["keys"])
        sigma = torch.rand(n)
        eps = torch.randn_like(x)
        xt = (1 - sigma[seg, None]) * x + sigma[seg, None] * eps
        keep = ~torch.tensor([bool(p) for p in info.padded])[seg]  # padding repeats carry no loss
        with adaptiveload.grad_sync(model, info.last_in_step):  # DDP reduces on a step's last micro-batch
            pred = model(xt, sigma, seg)
            err = ((pred - (eps - x)) ** 2).mean(dim=1)
            # DDP averages gradients over ranks: scale by world so the step's loss is the
            # mean over all of its planned tokens.
            loss = (err * keep).sum() * world / info.step_tokens
            loss.backward()
        step_loss += float(loss) / world
        seen_tokens += x.shape[0]
        if info.last_in_step:
            opt.step()
            opt.zero_grad(set_to_none=True)
            steps += 1
            if steps % 5 == 1 or steps == args.steps:
                print("step %4d  loss %.4f  micro-batches %d  tokens/s %.0f"
                      % (info.step, step_loss, info.n_micro, seen_tokens / (time.time() - t0)), flush=True)
            step_loss = 0.0
            if args.steps and steps >= args.steps:
                break
    print("done: %d steps, %d tokens, rank %d of %d" % (steps, seen_tokens, sampler.rank, world))
    env.close()


if __name__ == "__main__":
    main()
