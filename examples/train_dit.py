#!/usr/bin/env python3
"""Train a Wan-2.1-like DiT (examples/dit_model.py) on packed micro-batches from adaptiveload.StreamDataset.

    python3 examples/train_dit.py --smoke                                   # tiny model, CPU, own corpus
    python3 examples/train_dit.py --index I --manifest M --blocks 2 --trace trace.jsonl
    torchrun --nproc-per-node 8 examples/train_dit.py --index I --manifest M [--fsdp]

Data: ``StreamDataset(index, manifest, members=[LATENT, TEXT])`` (typed members):
each micro-batch's latents arrive cropped to the bucket and are patchified (1x2x2) into one
(tokens, 64) tensor whose rows ``cu_seqlens`` delimits; each sample's text embedding
(L_i, text_dim) keeps its own length. Where the package predates typed members, or the
corpus has no text member (``--text-member none``: an ``adaptiveload synth`` corpus of raw
bf16 latents), the latent is read from the raw payload as examples/train_stream.py does and
each sample's text embedding is generated from its key (deterministic, seeded by the key's
CRC-32).

Model: hidden 1536, 12 heads, FFN 8960 (GELU tanh), 16 latent channels, patch 1x2x2, 3D
RoPE per sample, per-sample text cross-attention, AdaLN blocks (fused
``adaptiveload.adaln`` on CUDA unless --no-fused-adaln), --blocks N (default 2). bf16
autocast on CUDA. Attention (--attn): auto picks varlen (torch.nn.attention.varlen) on
CUDA with torch >= 2.5, else FlexAttention with a document mask, else a per-sample SDPA
loop; on the CPU the per-sample loop (explicit softmax on torch < 2.0). The choice is
printed.

Loss: rectified flow. Per sample t ~ logit-normal (or --t-sampling uniform); x_t = (1 - t)
x0 + t noise; target noise - x0; per-token loss l = mean over features of the squared error.
Each micro-batch's loss is (W / step_tokens) * sum of l over its real tokens (padding
samples masked), the README's "Loss normalisation": with DDP/FSDP averaging gradients over
W ranks, the accumulated gradient is the gradient of the step's mean per-token loss over all
ranks. The optimizer steps on ``last_in_step``; DDP skips gradient sync on the other
micro-batches (``adaptiveload.grad_sync``), FSDP2 likewise (set_requires_gradient_sync).

Sequence parallelism (Ulysses): with a manifest planned with ``plan --sp-degrees 1,2,4``
(or --sp-degrees here) every rank creates the SP process groups once
(``adaptiveload.training.sp_groups``); a micro-batch of an SP group of degree d (the batch's
sp_degree, sp_rank, sp_ranks; a stream without them: degree 1) runs on each of its d ranks
over that rank's contiguous token slice (or the stream's shard, sp_token_range), with
self-attention over all tokens for heads / d heads between two all-to-alls
(examples/dit_model.py). Its timesteps and noise come from a generator seeded per group
and micro-batch, so the group's ranks agree. The loss formula is unchanged (each real token
is held by one rank of its group; see python/README.md, "Sequence parallelism"), and the
gradients under DDP / FSDP over the world equal those of the same samples without SP.

--trace FILE writes one JSON line per micro-batch (what ``adaptiveload fit --trace`` reads):
step, rank, micro, bucket, B, S, tokens, ms (forward + backward; CUDA events, else
perf_counter), sp_degree and sp_rank under SP (B, S, tokens: the group's micro-batch),
peak_mem_bytes (CUDA: max allocated since the step began), and "warmup":
true on the first --warmup-steps steps. Under torchrun each rank writes FILE.rankR.
--step-log FILE: one line per optimizer step (wall ms between steps, this rank's compute
ms and tokens, the global loss).

--smoke: tiny model (hidden 64, 2 heads, FFN 128, 1 block, text dim 32) for --steps steps
(default 4) on a corpus it makes in --workdir (a typed corpus of .npy latents and text
embeddings written here when the package has typed members, else ``adaptiveload synth``),
indexed and planned with the CLI for WORLD_SIZE ranks (with --sp-degrees 1,2[,4] planned
with ``plan --sp-degrees``: a --mem-tokens below the longest clips' tokens sends those
buckets to groups of 2 or 4 ranks). Exits 0 only when every step ran and every loss was
finite. --sp-shard has each SP rank read only its token shard (StreamDataset(sp_shard=True));
the whole micro-batch's packing is rebuilt around it. --record DIR writes what each rank ran
and each step's gradients (tests/examples/sp_smoke_test.py, at --lr 0, compares them with
the same plan's micro-batches on one process without SP).
"""

import argparse
import contextlib
import inspect
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tarfile
import time
import zlib

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
try:  # an installed package (the //dist bundle on PYTHONPATH) first, else this checkout's
    import adaptiveload
except ImportError:
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    import adaptiveload  # noqa: E402
import adaptiveload.training  # noqa: E402  (sp_groups, sp_shard_of)
import dit_model  # noqa: E402  (examples/dit_model.py, next to this file)

LATENT_MEMBER = "latent.npy"
TEXT_MEMBER = "t5.npy"

# ---------------------------------------------------------------------------------------------
# corpus


def find_cli(given=None):
    """The adaptiveload CLI: ``given``, $ADAPTIVELOAD_BIN, the bundle's bin/ beside examples/,
    this checkout's bazel-bin/, then PATH."""
    cands = [given, os.environ.get("ADAPTIVELOAD_BIN"), os.path.join(HERE, "..", "bin", "adaptiveload"),
             os.path.join(HERE, "..", "bazel-bin", "adaptiveload")]
    for c in cands:
        if c and os.path.sep in c and os.access(c, os.X_OK):
            return os.path.abspath(c)
        if c and os.path.sep not in c and shutil.which(c):
            return shutil.which(c)
    w = shutil.which("adaptiveload")
    if w:
        return w
    raise SystemExit("adaptiveload CLI not found: pass --bin, set ADAPTIVELOAD_BIN or put it on PATH")


def has_typed_members():
    """Whether this adaptiveload package has typed members (StreamDataset(members=)
    and PackedBatch.tensors / packed)."""
    try:
        sig = inspect.signature(adaptiveload.StreamDataset.__init__)
    except (TypeError, ValueError):
        return False
    pb = adaptiveload.PackedBatch
    return "members" in sig.parameters and hasattr(pb, "tensors") and hasattr(pb, "packed")


# Shape profiles of write_typed_corpus: (heights, aspect ratios with weights, fps, seconds range,
# text lengths, image fraction).
PROFILES = {
    # Koala-36M-like: 360p-720p, mostly 16:9, images and 2-10 s clips (Wan trains at 16 fps).
    "koala": dict(heights=(368, 480, 544, 720), aspects=((16 / 9, 0.7), (4 / 3, 0.2), (1.0, 0.1)), fps=16,
                  seconds=(2.0, 10.0), text=(16, 128), image_frac=0.3),
    # Tiny shapes for CPU smoke runs: images and 1-5 latent-frame clips at 32-64 px.
    "smoke": dict(heights=(32, 48, 64), aspects=((1.5, 0.6), (1.0, 0.4)), fps=4, seconds=(1.0, 4.0),
                  text=(3, 12), image_frac=0.4),
}


def write_typed_corpus(out, samples, shards=4, seed=0, profile="koala", text_dim=4096, dtype="float16",
                       vae_stride=(4, 8), workers=None):
    """Writes WebDataset shards OUT/shard-NNNNNN.tar of KEY.json (width, height, frames, fps),
    KEY.latent.npy ((16, T, H/8, W/8) of ``dtype``, T = 1 + (frames - 1) / 4) and KEY.t5.npy
    ((L, text_dim) of ``dtype``) at the shape mix of ``profile`` (see PROFILES). Values are
    slices of one pool of standard-normal numbers (their content does not matter to timing,
    and they are finite). Shard k holds samples k, k + shards, ... drawn from a generator
    seeded by (seed, k), so the files do not depend on ``workers`` (processes writing shards
    in parallel; default: up to 8, one per core). Returns the number of payload bytes."""
    os.makedirs(out, exist_ok=True)
    jobs = [(out, k, shards, samples, seed, profile, text_dim, dtype, tuple(vae_stride)) for k in range(shards)]
    workers = workers or min(8, shards, os.cpu_count() or 1)
    if workers > 1 and shards > 1:
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(workers) as pool:
            return sum(pool.map(_write_shard, jobs))
    return sum(_write_shard(j) for j in jobs)


def _write_shard(job):
    """One shard of :func:`write_typed_corpus`; returns its payload bytes."""
    out, k, shards, samples, seed, profile, text_dim, dtype, (st, ss) = job
    p = PROFILES[profile]
    rng = np.random.default_rng([seed, k])
    pool = rng.standard_normal(16 << 20, dtype=np.float32).astype(dtype)  # 32 MB at fp16: > a 10 s 720p latent
    aspects = [a for a, _ in p["aspects"]]
    weights = np.array([w for _, w in p["aspects"]], dtype=np.float64)
    weights /= weights.sum()

    def npy(shape):
        n = int(np.prod(shape))
        src = pool if n <= pool.size else np.tile(pool, -(-n // pool.size))
        at = int(rng.integers(0, src.size - n + 1))
        b = io.BytesIO()
        np.save(b, src[at:at + n].reshape(shape))
        return b.getvalue()

    def add(t, name, data):
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        ti.mtime = 1700000000
        t.addfile(ti, io.BytesIO(data))

    total = 0
    with tarfile.open(os.path.join(out, "shard-%06d.tar" % k), "w", format=tarfile.USTAR_FORMAT) as t:
        for i in range(k, samples, shards):
            h = int(rng.choice(p["heights"]))
            ar = aspects[int(rng.choice(len(aspects), p=weights))]
            w = max(16, int(round(h * ar / 16.0)) * 16)
            h = max(16, (h // 16) * 16)
            if rng.random() < p["image_frac"]:
                frames = 1
            else:
                sec = rng.uniform(*p["seconds"])
                frames = 4 * max(1, int(round(sec * p["fps"] / 4.0))) + 1
            t_lat = 1 + (frames - 1) // st
            key = "%06d-%08d" % (k, i)
            meta = {"width": w, "height": h, "frames": frames, "fps": p["fps"], "duration": frames / float(p["fps"])}
            lat = npy((16, t_lat, h // ss, w // ss))
            txt = npy((int(rng.integers(p["text"][0], p["text"][1] + 1)), text_dim))
            add(t, key + ".json", json.dumps(meta).encode())
            add(t, key + ".latent.npy", lat)
            add(t, key + ".t5.npy", txt)
            total += len(lat) + len(txt)
    return total


def run_cli(cli, *args, quiet=True):
    """Runs ``cli args...``; raises with its stderr when it fails; returns stdout."""
    r = subprocess.run([cli] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if r.returncode:
        raise SystemExit("%s %s failed (%d):\n%s" % (os.path.basename(cli), " ".join(map(str, args)), r.returncode,
                                                     r.stderr.strip()))
    if not quiet and r.stderr.strip():
        print(r.stderr.strip(), file=sys.stderr)
    return r.stdout


# The --smoke bucket table (plan --buckets; planner/README.md): sizes small enough for the
# smoke profile and for every sample `adaptiveload synth` writes, so a tiny CPU model trains on
# tens of tokens per sample.
SMOKE_BUCKETS = """# tiny buckets for CPU smoke runs (examples/train_dit.py --smoke)
frames 1 5 9
aspect 1:1 32x32 48x48
aspect 3:2 48x32 96x64
aspect 2:1 64x32 96x48
aspect 2:3 32x48 64x96
aspect 1:2 32x64 48x96
"""


def smoke_corpus(workdir, cli, world, typed, samples, mem_tokens, seed=0, micro_per_step=2, sp_degrees=None):
    """(index, manifest) of the --smoke corpus in workdir, made once (files reused); with
    ``sp_degrees`` (e.g. [1, 2, 4]) planned with ``plan --sp-degrees`` (a bucket whose samples
    exceed ``mem_tokens`` goes to groups of the smallest degree holding them)."""
    os.makedirs(workdir, exist_ok=True)
    kind = "typed" if typed else "synth"
    index = os.path.join(workdir, "%s.alidx" % kind)
    sp = "-sp%s-m%d" % ("_".join(str(d) for d in sp_degrees), mem_tokens) if sp_degrees else ""
    manifest = os.path.join(workdir, "%s-w%d-k%d%s.alm" % (kind, world, micro_per_step, sp))
    shards = os.path.join(workdir, "%s-shards" % kind)
    if not os.path.exists(index):
        if typed:
            write_typed_corpus(shards, samples, shards=2, seed=seed, profile="smoke", text_dim=32)
        else:
            run_cli(cli, "synth", "--out", shards, "--samples", samples, "--shards", 2, "--seed", seed)
        run_cli(cli, "index", "-o", index + ".tmp", shards)
        os.replace(index + ".tmp", index)
    buckets = os.path.join(workdir, "smoke-buckets.txt")
    with open(buckets, "w") as f:
        f.write(SMOKE_BUCKETS)
    if not os.path.exists(manifest):
        extra = ["--sp-degrees", ",".join(str(d) for d in sp_degrees)] if sp_degrees else []
        run_cli(cli, "plan", "--index", index, "--world", world, "--mem-tokens", mem_tokens, "--buckets", buckets,
                "--micro-per-step", micro_per_step, *extra, "-o", manifest + ".tmp")
        os.replace(manifest + ".tmp", manifest)
    return index, manifest


# ---------------------------------------------------------------------------------------------
# batches


class Prepared:
    """One micro-batch ready for the model: x0 (tokens, 64) float, cu (int32, n+1), grids
    (token grid per sample), text (text rows, text_dim) float, cu_text, keep (tokens,) bool
    (False on padding samples), n (samples), S (tokens of one sample: the bucket's), tokens
    (the micro-batch's), real_tokens (real tokens held here), sp (adaptiveload.sp.Shard under
    SP, else None: then x0, seg and keep hold the shard's rows only) and the batch's step
    fields."""

    __slots__ = ("x0", "cu", "grids", "text", "cu_text", "text_lengths", "seg", "keep", "n", "S", "tokens",
                 "real_tokens", "sp", "epoch", "step", "micro",
                 "n_micro", "last_in_step", "bucket", "step_tokens", "step_samples")


def _key_text(key, text_dim, device, lengths=(8, 40)):
    """A deterministic (L, text_dim) text embedding for a sample key (its CRC-32 seeds it)."""
    c = zlib.crc32(key.encode())
    g = torch.Generator().manual_seed(c)
    n = lengths[0] + c % (lengths[1] - lengths[0] + 1)
    return torch.randn(n, text_dim, generator=g).to(device)


def _to_device(t, device):
    """A host tensor on ``device``: pinned and copied without blocking on CUDA."""
    if device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t


def _cu(lengths, device):
    c = [0]
    for n in lengths:
        c.append(c[-1] + int(n))
    return _to_device(torch.tensor(c, dtype=torch.int32), device)


def prepare(batch, ds, cfg, device, typed, text_member=TEXT_MEMBER, latent_member=LATENT_MEMBER, sp_groups=None,
            epoch=0):
    """A :class:`Prepared` from a PackedBatch. typed: members latent + text (the typed-member API);
    else the raw payload of an ``adaptiveload synth`` corpus (random bf16 bit patterns, read
    as int16 / 32768 so values are finite) and text embeddings generated from the keys.
    A batch of an SP group (``sp_degree`` > 1; ``sp_groups``: adaptiveload.training.sp_groups)
    gives this rank's token slice (:func:`make_prepared`); from a token shard
    (``StreamDataset(sp_shard=True)``) the whole micro-batch's packing is rebuilt around it
    (:func:`_group_of_shard`). ``epoch`` goes into the SP noise seed (:func:`micro_generator`)."""
    pt, ph, pw = cfg.patch
    n = len(batch)
    if typed:
        x0 = batch.packed(latent_member, cfg.patch)
        # a token shard's latent arrives as pieces (tokens, features): _group_of_shard gives the grids
        shapes = [] if getattr(batch, "sp_sharded", False) else batch.members[latent_member].shapes
        grids = []
        for s in shapes:
            c, t, h, w = s if len(s) == 4 else (s[0], 1, s[1], s[2])
            grids.append((t // pt, h // ph, w // pw))
        x0 = x0.to(device, non_blocking=True).float()
        if text_member:
            texts = [t.to(device, non_blocking=True).float() for t in batch.tensors(text_member)]
        else:
            texts = [_key_text(k, cfg.text_dim, device) for k in batch.keys]
    else:
        bw, bh, bf = (int(v) for v in ds.bucket_shape(batch.bucket)[:3])
        xs = []
        for i in range(n):
            t = adaptiveload.latent_tokens(batch.sample(i), batch.shapes[i].tolist(), (bw, bh, bf))
            xs.append(t.view(torch.int16).float() / 32768.0)
        x0 = torch.cat(xs).to(device) if xs else torch.zeros(0, cfg.patch_dim, device=device)
        g = ((1 + (bf - 1) // 4) // pt, (bh // 8) // ph, (bw // 8) // pw)
        grids = [g] * n
        texts = [_key_text(k, cfg.text_dim, device) for k in batch.keys]
    if texts and texts[0].shape[1] != cfg.text_dim:
        raise SystemExit("text embeddings are %d-d, the model takes %d (--text-dim)"
                         % (texts[0].shape[1], cfg.text_dim))
    padded = batch.padded.tolist()
    if getattr(batch, "sp_sharded", False):
        grids, texts, padded = _group_of_shard(batch, grids, texts, padded, sp_groups or {}, cfg, device)
    lengths = [a * b * c for a, b, c in grids]
    shard = None
    if int(getattr(batch, "sp_degree", 1) or 1) > 1:
        shard = adaptiveload.training.sp_shard_of(sp_groups or {}, batch, sum(lengths))
    rows = shard.tokens if shard is not None and _is_shard(batch, sum(lengths)) else sum(lengths)
    if x0.shape[0] != rows or int(batch.cu_seqlens[-1]) != rows:
        raise RuntimeError("micro-batch %d: grids give %d tokens (%d held here), latents %d, cu_seqlens %d"
                           % (batch.position, sum(lengths), rows, x0.shape[0], int(batch.cu_seqlens[-1])))
    fields = {f: getattr(batch, f) for f in STEP_FIELDS}
    fields["epoch"] = epoch
    return make_prepared(x0, grids, texts, padded, fields, device, shard)


STEP_FIELDS = ("step", "micro", "n_micro", "last_in_step", "bucket", "step_tokens", "step_samples")


def _group_of_shard(batch, grids, texts, padded, groups, cfg, device):
    """(grids, texts, padded) of the whole micro-batch of an SP group from this rank's token
    shard (``StreamDataset(sp_shard=True)``): the samples all have the bucket's grid (the
    stream crops every latent to it), the group's N tokens are the last rank's shard end (one
    all-reduce of an int over the group), and a sample this rank holds no token of gets an
    empty text (the model reads the text of the samples its rows touch only). Sample i of the
    shard is sample (lo + cu_seqlens[i] - token_first[i]) / S of the group's micro-batch."""
    if tuple(batch.patch or ()) != tuple(cfg.patch):
        raise RuntimeError("micro-batch %d: the stream patchified the shard %s, the model's patch is %s"
                           % (batch.position, batch.patch, cfg.patch))
    lo, hi = (int(v) for v in batch.sp_token_range)
    n_all = hi
    if int(batch.sp_degree) > 1:  # (degree 1: the shard is the whole micro-batch, still patchified)
        group = adaptiveload.training.sp_group_of(groups, batch)
        n_all = torch.tensor([hi], dtype=torch.int64)
        torch.distributed.all_reduce(n_all, op=torch.distributed.ReduceOp.MAX, group=group)
        n_all = int(n_all)
    g = tuple(int(v) // p for v, p in zip(batch.grid, cfg.patch))
    S = g[0] * g[1] * g[2]
    if S == 0 or n_all % S or any(int(v) != S for v in batch.sample_tokens):
        raise RuntimeError("micro-batch %d: a shard of %d tokens of samples of %s tokens, the bucket's grid %s"
                           % (batch.position, n_all, batch.sample_tokens.tolist(), g))
    n = n_all // S
    all_texts = [texts[0].new_zeros(0, texts[0].shape[1])] * n if texts else []
    all_padded = [False] * n
    for i in range(len(batch)):
        k = (lo + int(batch.cu_seqlens[i]) - int(batch.token_first[i])) // S
        all_texts[k], all_padded[k] = texts[i], padded[i]
    return [g] * n, all_texts, all_padded


def _is_shard(batch, n_tokens):
    """Whether the stream delivered only this rank's token shard (sp_token_range not the whole)."""
    r = getattr(batch, "sp_token_range", None)
    return r is not None and tuple(int(v) for v in r) != (0, n_tokens)


def make_prepared(x0, grids, texts, padded, fields, device, shard=None):
    """A :class:`Prepared` from the micro-batch's parts: x0 (tokens, patch_dim) the patchified
    latents of the whole micro-batch (or only rows [shard.lo, shard.hi) of it), grids (token
    grid per sample), texts (one (L_i, text_dim) tensor per sample), padded (bool per
    sample), fields (the batch's STEP_FIELDS) and shard (an adaptiveload.sp.Shard, or None
    without SP). Under SP x0, seg and keep are this rank's rows; cu, grids, text describe the
    whole micro-batch (the model needs every sample's packing for attention), real_tokens
    counts the real tokens held here."""
    p = Prepared()
    n = len(grids)
    lengths = [a * b * c for a, b, c in grids]
    total = sum(lengths)
    lo, hi = (shard.lo, shard.hi) if shard is not None and shard.degree > 1 else (0, total)
    if x0.shape[0] == total and hi - lo != total:
        x0 = x0[lo:hi]
    elif x0.shape[0] != hi - lo:
        raise RuntimeError("micro-batch: %d latent rows; the samples have %d tokens, this rank holds [%d, %d)"
                           % (x0.shape[0], total, lo, hi))
    p.n = n
    p.x0, p.grids = x0, grids
    p.text_lengths = [int(t.shape[0]) for t in texts]
    p.text = torch.cat(texts) if texts else torch.zeros(0, 0, device=device)
    p.cu_text = _cu(p.text_lengths, device)
    p.cu = _cu(lengths, device)
    seg = torch.repeat_interleave(torch.arange(n), torch.tensor(lengths, dtype=torch.long))
    keep = torch.tensor([not b for b in padded], dtype=torch.bool)[seg]
    p.seg = _to_device(seg[lo:hi].contiguous(), device)  # sample of each row (built on the host: no device sync)
    p.keep = _to_device(keep[lo:hi].contiguous(), device)
    p.S = max(lengths) if lengths else 0
    p.tokens = total
    p.real_tokens = int(keep[lo:hi].sum())
    p.sp = shard if shard is not None and shard.degree > 1 else None
    for f in STEP_FIELDS:
        setattr(p, f, fields[f])
    p.epoch = int(fields.get("epoch", 0))
    return p


def sample_t(n, gen, device, kind):
    """n timesteps in (0, 1): logit-normal (sigmoid of a standard normal) or uniform."""
    z = torch.randn(n, generator=gen, device=device) if kind == "logit-normal" else None
    return torch.sigmoid(z) if z is not None else torch.rand(n, generator=gen, device=device)


def flow_loss(model, p, world, gen, t_sampling="logit-normal", autocast=None):
    """The micro-batch's loss, (world / step_tokens) * sum over the real tokens held here of
    the per-token flow-matching loss (README, "Loss normalisation"); returns (loss, sum of
    per-token loss over those tokens) - call loss.backward().

    Under SP (p.sp) every rank of the group draws the timesteps of all samples and the noise
    of all the micro-batch's tokens from ``gen`` (which must then be the group's:
    :func:`micro_generator`) and takes its rows, so the group's ranks agree on every sample's
    t and the noise is that of the unsharded micro-batch. Each token is held by one rank of
    the group, so the formula is SP=1's: summed over the world (DDP / FSDP average, times W)
    each real token of the step counts once."""
    dev = p.x0.device
    sp = getattr(p, "sp", None)  # a Prepared filled by hand may leave it unset
    t = sample_t(p.n, gen, dev, t_sampling)
    if sp is None:
        noise = torch.randn(p.x0.shape, generator=gen, device=dev)
    else:
        noise = torch.randn((p.tokens, p.x0.shape[1]), generator=gen, device=dev)[sp.lo:sp.hi]
    tt = t[p.seg][:, None]
    xt = (1 - tt) * p.x0 + tt * noise
    with autocast if autocast is not None else contextlib.nullcontext():
        if sp is None:
            pred = model(xt, p.cu, p.grids, t, p.text, p.cu_text, p.text_lengths)
        else:
            pred = model(xt, p.cu, p.grids, t, p.text, p.cu_text, p.text_lengths, sp=sp)
    per_token = (pred.float() - (noise - p.x0)).pow(2).mean(1)
    total = (per_token * p.keep).sum()
    return total * (float(world) / max(1, p.step_tokens)), total.detach()


def micro_generator(seed, p, device, rank_gen):
    """The generator of a micro-batch's timesteps and noise: ``rank_gen`` (this rank's stream)
    without SP; under SP one seeded by (seed, epoch, step, micro, the group's first rank), the same
    on every rank of the group whatever micro-batches each ran before. The key holds (seed,
    epoch, step, micro, first rank), so epochs draw different noise for the same slot."""
    sp = getattr(p, "sp", None)
    if sp is None:
        return rank_gen
    first = int(torch.distributed.get_rank()) - sp.rank if torch.distributed.is_initialized() else 0
    return torch.Generator(device=device).manual_seed(sp_seed(seed, getattr(p, "epoch", 0), p.step, p.micro, first))


def sp_seed(seed, epoch, step, micro, first):
    """The seed of an SP group's micro-batch generator (:func:`micro_generator`)."""
    return zlib.crc32(("%d/%d/%d/%d/%d" % (seed, epoch, step, micro, first)).encode())


class MicroTimer:
    """Times forward + backward of micro-batches: CUDA events on CUDA (read at the step's
    end, no sync per micro-batch), perf_counter on the CPU."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"
        self.device = device

    def start(self):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def stop(self, start):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return (start, e)
        return (time.perf_counter() - start) * 1000.0

    def ms(self, token):
        """Milliseconds of a stop() token (CUDA: after the events completed)."""
        if self.cuda:
            a, b = token
            b.synchronize()
            return a.elapsed_time(b)
        return token


def autocast_for(device):
    """bf16 autocast on CUDA, nothing on the CPU."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return None


def fused_adaln_available(device):
    """(usable, why not): the fused AdaLN needs CUDA and the kernel library."""
    if device.type != "cuda":
        return False, "not on CUDA"
    try:
        x = torch.randn(2, 8, 64, device=device, dtype=torch.bfloat16)
        s = torch.zeros(2, 64, device=device, dtype=torch.bfloat16)
        adaptiveload.adaln(x, s, s)
        return True, ""
    except Exception as e:  # noqa: BLE001 - any failure: use the PyTorch path and say why
        return False, "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")


def build_model(cfg, device, attn="auto", fused=None, log=print):
    """The PackedDiT on ``device`` with the attention of --attn and the fused AdaLN where
    asked and usable (fused None: use it when available). Prints both choices."""
    attention = dit_model.make_attention(attn, device, log=log)
    if fused is None or fused:
        ok, why = fused_adaln_available(device)
        if fused and not ok:
            raise SystemExit("--fused-adaln asked for but not usable: %s" % why)
        fused = ok
        if not ok:
            log("adaln: PyTorch LayerNorm + modulate (%s)" % why)
    model = dit_model.PackedDiT(cfg, attention=attention, fused_adaln=bool(fused)).to(device)
    log("model: %s, %.1fM parameters, attention %s, adaln %s" % (
        json.dumps(cfg.as_dict()), dit_model.param_count(model) / 1e6, attention.name,
        "fused (adaptiveload.adaln)" if fused else "pytorch"))
    return model


def wrap_distributed(model, env, fsdp, log=print):
    """(model, sync_context(last_in_step)) for DDP, FSDP2 (fully_shard) or FSDP1; the plain
    model with a null context when not distributed."""
    if not env.initialized:
        return model, lambda last: contextlib.nullcontext()
    if not fsdp:
        ids = [env.device.index] if env.device.type == "cuda" else None
        ddp = nn.parallel.DistributedDataParallel(model, device_ids=ids)
        log("parallel: DDP over %d ranks (no_sync on all but a step's last micro-batch)" % env.world_size)
        return ddp, lambda last: adaptiveload.grad_sync(ddp, last)
    try:
        from torch.distributed.fsdp import fully_shard  # torch >= 2.6
    except ImportError:
        fully_shard = None
    if fully_shard is not None:
        # the mesh on the training device: fully_shard's default mesh is CUDA whenever a GPU
        # exists, which a CPU (gloo) run must not use
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh(env.device.type, (env.world_size,))
        for blk in model.blocks:
            fully_shard(blk, mesh=mesh)
        fully_shard(model, mesh=mesh)

        @contextlib.contextmanager
        def sync(last):
            model.set_requires_gradient_sync(bool(last))
            yield

        log("parallel: FSDP2 fully_shard per block over %d ranks" % env.world_size)
        return model, sync
    import functools

    from torch.distributed.fsdp import FullyShardedDataParallel

    try:
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy  # torch >= 2.0

        policy = ModuleWrapPolicy({dit_model.Block})
    except ImportError:
        from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

        policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={dit_model.Block})
    kw = {"device_id": env.device} if env.device.type == "cuda" else {}
    f = FullyShardedDataParallel(model, auto_wrap_policy=policy, **kw)
    log("parallel: FSDP1 (FullyShardedDataParallel per block) over %d ranks" % env.world_size)
    return f, lambda last: adaptiveload.grad_sync(f, last)


def sp_degrees_of(given, manifest):
    """The SP degrees to create groups for: ``given`` ("1,2,4"), else the manifest's
    (al_manifest_info sp_degrees), else [1] (a manifest or package without SP)."""
    if given:
        try:
            return sorted({int(v) for v in given.split(",")})
        except ValueError:
            raise SystemExit("--sp-degrees %r: a comma-separated list of powers of two" % (given,))
    if manifest is None:
        return [1]
    info = adaptiveload.Manifest(manifest).info
    n = int(info.get("n_sp_degrees", 0) or 0)
    return sorted({int(v) for v in list(info["sp_degrees"])[:n]}) if n else [1]


def model_config(args, degrees=None):
    """The DiTConfig of the parsed options (--smoke / --tiny-model: DiTConfig.smoke, with as
    many heads as the largest SP degree of ``degrees`` where that is more)."""
    if args.smoke or getattr(args, "tiny_model", False):
        cfg = dit_model.DiTConfig.smoke(blocks=args.blocks or 1)
        d_max = max(degrees or [1])
        if cfg.heads % d_max:  # Ulysses splits heads: as many as the largest SP degree (hidden 64: 16 per head)
            cfg = dit_model.DiTConfig(hidden=cfg.hidden, heads=d_max, ffn=cfg.ffn, blocks=cfg.blocks,
                                      text_dim=cfg.text_dim, freq_dim=cfg.freq_dim)
        return cfg
    return dit_model.DiTConfig(hidden=args.hidden, heads=args.heads, ffn=args.ffn, blocks=args.blocks or 2,
                               text_dim=args.text_dim)


def write_trace_line(f, mb, rank, ms, peak, warm):
    """One --trace line (what ``adaptiveload fit --trace`` reads): micro-batch ``mb`` (step, micro,
    bucket, n, S, tokens) of ``rank`` took ``ms``; ``peak`` (bytes, or None) is its peak memory;
    ``warm`` marks a warm-up step."""
    rec = {"step": mb.step, "rank": rank, "micro": mb.micro, "bucket": mb.bucket, "B": mb.n, "S": mb.S,
           "tokens": mb.tokens, "ms": round(ms, 4)}
    sp = getattr(mb, "sp", None)
    if sp is not None:
        rec["sp_degree"], rec["sp_rank"] = sp.degree, sp.rank
    if peak is not None:
        rec["peak_mem_bytes"] = int(peak)
    if warm:
        rec["warmup"] = True
    f.write(json.dumps(rec) + "\n")


def record_line(batch, prep, loss):
    """One micro-batch of --record: where it ran (step, micro, group, token range) and its loss."""
    sp = prep.sp
    return {"step": int(batch.step), "micro": int(batch.micro), "position": int(batch.position),
            "bucket": int(batch.bucket), "sp_degree": sp.degree if sp else 1, "sp_rank": sp.rank if sp else 0,
            "sp_ranks": list(getattr(batch, "sp_ranks", ())), "rows": [sp.lo, sp.hi] if sp else [0, prep.tokens],
            "tokens": prep.tokens, "samples": prep.n, "real_tokens": prep.real_tokens, "loss": float(loss)}


def full_grads(model):
    """{parameter name: its whole gradient} (DDP's module prefix dropped; an FSDP2 DTensor
    gradient gathered with full_tensor, a collective every rank must join)."""
    out = {}
    for n, q in model.named_parameters():
        g = q.grad
        if g is not None and hasattr(g, "full_tensor"):
            g = g.full_tensor()
        out[n[len("module."):] if n.startswith("module.") else n] = None if g is None else g.detach().cpu().clone()
    return out


def record_step(folder, step, model, step_loss, env):
    """--record: rank 0 writes stepN.pt, step N's global loss and whole gradients (before the
    optimizer step; every rank takes part in the gathers)."""
    g = torch.as_tensor(step_loss).double().reshape(1).to(env.device)
    if env.initialized:
        torch.distributed.all_reduce(g)
    grads = full_grads(model)
    if env.rank == 0:
        torch.save({"loss": float(g), "grads": grads}, os.path.join(folder, "step%d.pt" % step))


def trace_path(path, rank, world):
    return path if world == 1 else "%s.rank%d" % (path, rank)


def add_model_arguments(p):
    """Model and attention options shared with dev/e2e/replay.py."""
    p.add_argument("--blocks", type=int, default=0, help="DiT blocks (default 2; --smoke: 1)")
    p.add_argument("--hidden", type=int, default=1536)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--ffn", type=int, default=8960)
    p.add_argument("--text-dim", type=int, default=4096, help="text embedding width (the corpus's)")
    p.add_argument("--attn", default="auto", choices=["auto", "varlen", "flex", "sdpa", "math"],
                   help="attention implementation (auto: see the module docstring)")
    p.add_argument("--no-fused-adaln", action="store_true", help="PyTorch LayerNorm + modulate instead of "
                   "adaptiveload.adaln (default: fused on CUDA when the kernel library loads)")
    p.add_argument("--tiny-model", action="store_true",
                   help="the --smoke model (hidden 64, 2 heads, FFN 128, text 32) on the given data")
    p.add_argument("--t-sampling", default="logit-normal", choices=["logit-normal", "uniform"])
    p.add_argument("--seed", type=int, default=0)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--index", help="index file (adaptiveload index)")
    p.add_argument("--manifest", help="manifest planned from it for WORLD_SIZE ranks")
    p.add_argument("--latent-member", default=LATENT_MEMBER, help="typed latent member (default latent.npy)")
    p.add_argument("--text-member", default=TEXT_MEMBER,
                   help="text embedding member (default t5.npy); 'none': embeddings generated from the keys")
    p.add_argument("--raw", action="store_true",
                   help="read the single raw payload member (adaptiveload synth corpora) even with typed members")
    p.add_argument("--smoke", action="store_true", help="tiny model on a corpus made in --workdir (CPU smoke)")
    p.add_argument("--smoke-corpus", choices=["auto", "typed", "synth"], default="auto",
                   help="--smoke: typed (npy members, needs the typed-member API), synth (CLI synth) or auto")
    p.add_argument("--workdir", default="/tmp/adaptiveload-train-dit", help="--smoke: corpus folder")
    p.add_argument("--bin", help="adaptiveload CLI (--smoke; default: ADAPTIVELOAD_BIN, the bundle, PATH)")
    p.add_argument("--samples", type=int, default=64, help="--smoke corpus samples")
    p.add_argument("--micro-per-step", type=int, default=2, help="--smoke plan: micro-batches per rank per step")
    p.add_argument("--mem-tokens", type=int, default=256, help="--smoke plan: tokens per micro-batch at most")
    p.add_argument("--steps", type=int, default=0, help="stop after N optimizer steps (0: the epoch; --smoke: 4)")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--fsdp", action="store_true", help="FSDP (fully_shard on torch >= 2.6, else FSDP1) not DDP")
    p.add_argument("--cpu", action="store_true", help="stay on the CPU even with a GPU")
    p.add_argument("--threads", type=int, default=0, help="C reader threads (0: the stream's default)")
    p.add_argument("--prefetch", type=int, default=4)
    p.add_argument("--trace", help="JSONL per micro-batch for adaptiveload fit --trace (rank R of W>1: FILE.rankR)")
    p.add_argument("--step-log", help="JSONL per optimizer step (rank R of W>1: FILE.rankR)")
    p.add_argument("--warmup-steps", type=int, default=2, help="steps marked warmup in --trace/--step-log")
    p.add_argument("--sp-degrees", help="SP degrees to make process groups for, e.g. 1,2,4 (default: the "
                   "manifest's, planned with plan --sp-degrees; 1 when it records none); --smoke: also plans with them")
    p.add_argument("--sp-shard", action="store_true", help="StreamDataset(sp_shard=True): each rank of an SP group "
                   "reads only its token shard (typed corpora) instead of the whole micro-batch")
    p.add_argument("--record", help="folder: each rank writes rankR.json (every micro-batch it ran: step, micro, "
                   "group, token range, loss) and rank 0 stepN.pt (each step's loss and gradients, "
                   "gathered whole, before the optimizer step)")
    add_model_arguments(p)
    args = p.parse_args(argv)

    env = adaptiveload.setup_distributed(cpu=args.cpu or (args.smoke and not torch.cuda.is_available()))
    device = env.device
    log = (lambda *a: print(*a, flush=True)) if env.rank == 0 else (lambda *a: None)
    torch.manual_seed(args.seed)
    typed_api = has_typed_members()
    if args.smoke:
        args.steps = args.steps or 4
        args.lr = args.lr if args.lr != 1e-4 else 1e-3
        typed = typed_api if args.smoke_corpus == "auto" else args.smoke_corpus == "typed"
        if typed and not typed_api:
            raise SystemExit("--smoke-corpus typed needs StreamDataset(members=...)")
        cli = find_cli(args.bin)
        plan_sp = sp_degrees_of(args.sp_degrees, None) if args.sp_degrees else None
        if env.rank == 0:
            index, manifest = smoke_corpus(args.workdir, cli, env.world_size, typed, args.samples, args.mem_tokens,
                                           args.seed, args.micro_per_step, plan_sp)
        if env.initialized:
            torch.distributed.barrier()
        index, manifest = smoke_corpus(args.workdir, cli, env.world_size, typed, args.samples, args.mem_tokens,
                                       args.seed, args.micro_per_step, plan_sp)
        if not typed:
            args.text_member = "none"
    else:
        if not args.index or not args.manifest:
            raise SystemExit("--index and --manifest are needed (or --smoke)")
        index, manifest = args.index, args.manifest
        typed = typed_api and not args.raw
    text_member = None if args.text_member == "none" else args.text_member
    log("data: %s (%s)" % ("typed members %s" % ([args.latent_member] + ([text_member] if text_member else []))
                           if typed else "raw payload, text embeddings from keys",
                           "typed-member API present" if typed_api else "package without typed members"))

    kw = dict(threads=args.threads or None, prefetch=args.prefetch, device=device if device.type == "cuda" else None)
    if typed:
        kw["members"] = [args.latent_member] + ([text_member] if text_member else [])
    if args.sp_shard:
        if not typed:
            raise SystemExit("--sp-shard needs a typed latent member (a raw payload cannot be cut into token shards)")
        kw["sp_shard"] = True
    ds = adaptiveload.StreamDataset(index, manifest, **kw)
    epoch = int(adaptiveload.Manifest(manifest).info.get("epoch", 0) or 0)
    degrees = sp_degrees_of(args.sp_degrees, manifest)
    groups = adaptiveload.training.sp_groups(env.world_size, degrees) if env.initialized else {1: [None]}
    if degrees != [1]:
        log("sequence parallel: Ulysses over SP degrees %s (all-to-all over heads)" % degrees)
    cfg = model_config(args, degrees)
    model = build_model(cfg, device, args.attn, False if args.no_fused_adaln else None, log=log)
    model, sync = wrap_distributed(model, env, args.fsdp, log=log)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    gen = torch.Generator(device=device).manual_seed(args.seed * 1000003 + env.rank)
    autocast = autocast_for(device)
    timer = MicroTimer(device)
    world = env.world_size
    n_micro_rank = len(ds)

    trace = open(trace_path(args.trace, env.rank, world), "w") if args.trace else None
    steplog = open(trace_path(args.step_log, env.rank, world), "w") if args.step_log else None
    steps, losses, pending, step_loss, step_tokens_here = 0, [], [], 0.0, 0
    record = []
    if args.record:
        os.makedirs(args.record, exist_ok=True)
    expected = None
    t_prev = time.perf_counter()
    t0 = t_prev
    tokens_total = 0
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    for batch in ds:
        if expected is None:
            expected = n_micro_rank // max(1, batch.n_micro)
            if args.steps:
                expected = min(expected, args.steps)
        prep = prepare(batch, ds, cfg, device, typed, text_member, args.latent_member, groups, epoch)
        start = timer.start()
        with sync(batch.last_in_step):
            loss, _ = flow_loss(model, prep, world, micro_generator(args.seed, prep, device, gen), args.t_sampling,
                                autocast)
            loss.backward()
        stop = timer.stop(start)
        peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
        pending.append((prep, stop, peak))
        step_loss = step_loss + loss.detach() / world  # the rank's share (a tensor: no sync here)
        step_tokens_here += prep.real_tokens
        if args.record:
            record.append(record_line(batch, prep, loss))
        if not batch.last_in_step:
            continue
        if args.record:
            record_step(args.record, batch.step, model, step_loss, env)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        now = time.perf_counter()
        wall_ms = (now - t_prev) * 1000.0
        t_prev = now
        warm = steps < args.warmup_steps
        compute_ms = 0.0
        for pr, st, pk in pending:
            ms = timer.ms(st)
            compute_ms += ms
            if trace:
                write_trace_line(trace, pr, env.rank, ms, pk, warm)
        pending = []
        g = torch.as_tensor(step_loss, device=device).double().reshape(1)
        if env.initialized:
            torch.distributed.all_reduce(g)
        gl = float(g)
        losses.append(gl)
        tokens_total += step_tokens_here
        if steplog:
            rec = {"step": batch.step, "rank": env.rank, "wall_ms": round(wall_ms, 3),
                   "compute_ms": round(compute_ms, 3),
                   "tokens": step_tokens_here, "step_tokens": batch.step_tokens, "micro": batch.n_micro, "loss": gl}
            if warm:
                rec["warmup"] = True
            steplog.write(json.dumps(rec) + "\n")
        log("step %4d  loss %.5f  micro %d  tokens(rank0) %6d  compute %8.1f ms  wall %8.1f ms%s"
            % (batch.step, gl, batch.n_micro, step_tokens_here, compute_ms, wall_ms, "  (warm-up)" if warm else ""))
        step_loss, step_tokens_here = 0.0, 0
        steps += 1
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        if args.steps and steps >= args.steps:
            break
    for f in (trace, steplog):
        if f:
            f.close()
    if args.record:
        with open(os.path.join(args.record, "rank%d.json" % env.rank), "w") as f:
            json.dump({"rank": env.rank, "world": world, "epoch": epoch, "manifest": manifest, "index": index,
                       "degrees": degrees, "sp_shard": bool(args.sp_shard), "micro": record}, f)
    elapsed = time.perf_counter() - t0
    finite = all(math.isfinite(x) for x in losses)
    ok = expected is not None and steps == expected and finite
    log("done: %d of %d steps, losses %s, %d tokens on rank 0 in %.1f s on %s: %s"
        % (steps, expected or 0, "finite" if finite else "NOT finite", tokens_total, elapsed, device,
           "OK" if ok else "FAILED"))
    env.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
