#!/usr/bin/env python3
"""Train a tiny latent denoiser from adaptiveload.StreamDataset, copying batches to the GPU.

    python3 examples/train_stream.py                    # demo corpus; GPU if present, else CPU
    python3 examples/train_stream.py --index I --manifest M --prefetch 6 --threads 4
    torchrun --nproc-per-node 8 examples/train_stream.py --index I --manifest M   (DDP)

C reader threads pack each planned micro-batch into a pinned buffer and, with a GPU,
copy it to the device on their own CUDA stream; the training stream waits for that
copy on the GPU (an event), so reading and copying overlap the previous step's compute.
Batches arrive in plan order with ``last_in_step`` (optimizer step), ``step_tokens``
(loss normalisation over all ranks), ``cu_seqlens`` and per-sample ``padded`` flags.
On CPU (no GPU) the same loop runs from host buffers.

--resume FILE saves ``batch.resume_state`` after every optimizer step and, when the file
exists at start, continues right after the last saved batch (nothing lost or repeated).
Without --index/--manifest a corpus is made in --workdir with the CLI
(adaptiveload.demo_corpus: synth, index, plan for --world ranks). Synthetic latents are
random bytes: read through their int16 bit pattern (use ``.float()`` with real latents).
"""

import argparse
import json
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



def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    adaptiveload.add_corpus_arguments(p)  # --index/--manifest, or a demo corpus
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--prefetch", type=int, default=4)
    p.add_argument("--steps", type=int, default=0, help="stop after N optimizer steps (0: the whole epoch)")
    p.add_argument("--resume", help="JSON file holding the stream state (read at start, written per step)")
    p.add_argument("--cpu", action="store_true", help="stay on the CPU even with a GPU")
    p.add_argument("--lr", type=float, default=1e-3)
    args = p.parse_args()

    env = adaptiveload.setup_distributed(cpu=args.cpu)  # cuda:LOCAL_RANK with a GPU; NCCL/gloo when > 1
    device, use_cuda = env.device, env.device.type == "cuda"
    index, manifest = adaptiveload.corpus_from_args(args)

    state = None
    if args.resume and os.path.exists(args.resume):
        with open(args.resume) as f:
            state = json.load(f)
        print("resuming at micro-batch %d (step %d)" % (state["position"], state["next_step"]))
    ds = adaptiveload.StreamDataset(index, manifest, threads=args.threads or None, prefetch=args.prefetch,
                                    device=device if use_cuda else None, state=state)
    torch.manual_seed(0)
    model = TinyDenoiser(hidden=256).to(device)
    if env.initialized:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    world = env.world_size

    steps, tokens, t0, wait = 0, 0, time.time(), 0.0
    step_loss = torch.zeros((), device=device)
    it = iter(ds)
    while True:
        w0 = time.time()
        batch = next(it, None)  # host time spent waiting for the loader
        wait += time.time() - w0
        if batch is None:
            break
        bucket = ds.bucket_shape(batch.bucket)
        xs = []
        for i in range(len(batch)):
            t = adaptiveload.latent_tokens(batch.sample(i), batch.shapes[i].tolist(), bucket)
            xs.append(t.view(torch.int16).float() / 32768.0)
        x = torch.cat(xs) if xs else torch.zeros(0, 64, device=device)
        lengths = (batch.cu_seqlens[1:] - batch.cu_seqlens[:-1]).long()
        seg = torch.repeat_interleave(torch.arange(len(batch), device=device), lengths.to(device))
        assert seg.numel() == x.shape[0], "cu_seqlens and latent tokens disagree"
        sigma = torch.rand(len(batch), device=device)
        eps = torch.randn_like(x)
        xt = (1 - sigma[seg, None]) * x + sigma[seg, None] * eps
        keep = (~batch.padded.to(device))[seg]
        with adaptiveload.grad_sync(model, batch.last_in_step):  # DDP reduces on a step's last micro-batch
            err = ((model(xt, sigma, seg) - (eps - x)) ** 2).mean(dim=1)
            loss = (err * keep).sum() * world / batch.step_tokens
            loss.backward()
        step_loss += loss.detach() / world
        tokens += x.shape[0]
        if batch.last_in_step:
            opt.step()
            opt.zero_grad(set_to_none=True)
            steps += 1
            if args.resume:
                with open(args.resume + ".tmp", "w") as f:
                    json.dump(batch.resume_state, f)
                os.replace(args.resume + ".tmp", args.resume)
            if steps % 5 == 1 or steps == args.steps:
                print("step %4d  loss %.4f  micro-batches %d  tokens/s %.0f  loader wait %.3f s"
                      % (batch.step, float(step_loss), batch.n_micro, tokens / (time.time() - t0), wait), flush=True)
            step_loss.zero_()
            if args.steps and steps >= args.steps:
                break
    print("done: %d steps, %d tokens on %s, loader wait %.3f s of %.3f s"
          % (steps, tokens, device, wait, time.time() - t0))
    env.close()


if __name__ == "__main__":
    main()
