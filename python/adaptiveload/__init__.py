"""AdaptiveLoad: shape-bucketed, load-balanced data loading for video diffusion
transformers, plus a fused AdaLN kernel, through ctypes over libadaptiveload.so
(no compiled extension).

Indexing (no torch needed):
    build_index    indexes shards (files, folders, brace patterns, http(s):// and s3:// URLs,
                   s3:// prefixes) into an index file, as `adaptiveload index`

Planning (no torch needed):
    plan           plans one epoch of an index in-process -> Manifest (byte-identical to the CLI's)
    plan_mixture   plans several indexes as one weighted run (plan --mixture) -> Manifest
    Planner        plans epochs on demand for BatchSampler / StreamDataset set_epoch
    Manifest       a loaded manifest with its summary (``info``)
    checkpoint     save_checkpoint / load_checkpoint / resume: the planner, the manifest's
                   identity, the step and a stream state; resume at another world size in one call

Data loading (needs torch):
    BatchSampler   one rank's planned micro-batches as lists of index positions
    IndexDataset   map-style dataset over an index (pairs with BatchSampler)
    collate_packed packs IndexDataset items like the C stream (member_tensors: typed views)
    StreamDataset  packed micro-batches read by C threads, optionally copied to the GPU
    StepTotals     a step's delivered totals over all ranks (exact loss after skipped samples)
    latent_tokens  crops a Wan latent to its bucket and patchifies it into tokens
    wan_tokens     tokens of one sample (the planner's count)
    SampleIndex    an index's samples by position (key, shard, members) for a Dataset of one's own
    crop_to_bucket, bucket_tokens   a loaded latent cut to its planned bucket (BatchSampler's
                   info), patchified: the stream's crop, for a Dataset of one's own

Errors (no torch needed):
    Error          raised by failing C calls: status, the C message (shard, key, offset);
                   a RuntimeError; StreamError is the same class under its earlier name

Kernels (needs torch and CUDA):
    adaln          the fused AdaLN (adaptiveload.adaln: autograd, torch.compile operators)

Training scripts (adaptiveload.training):
    setup_distributed   rank, world and device from torchrun; starts torch.distributed
    grad_sync           DDP gradient sync only on a step's last micro-batch
    demo_corpus         a small synthetic corpus made with the CLI (synth, index, plan)
    add_corpus_arguments, corpus_from_args   --index/--manifest, or the demo corpus

__version__ is the loaded library's (al_version()), read on first use.

Install: unpack the //dist bundle (adaptiveload-dist.tar.gz) anywhere and put its
python/ folder on PYTHONPATH; the package finds ../../lib/libadaptiveload.so itself
(or set ADAPTIVELOAD_LIB).
"""

import importlib

__all__ = ["__version__", "build_index", "plan", "plan_mixture", "Planner", "Manifest", "BatchSampler", "MicroBatchInfo", "IndexDataset",
           "collate_packed", "member_tensors", "StreamDataset", "PackedBatch", "MemberInfo", "Error", "StreamError",
           "wan_tokens", "latent_tokens", "adaln", "setup_distributed", "grad_sync", "demo_corpus",
           "add_corpus_arguments", "corpus_from_args", "checkpoint", "save_checkpoint", "load_checkpoint",
           "StepTotals", "SampleIndex", "Sample", "Member", "crop_to_bucket", "bucket_tokens"]

# Attributes resolved on first use, so `import adaptiveload` needs neither torch nor the
# shared library until a class is used.
_LAZY = {
    "build_index": ".indexing",
    "plan": ".planning",
    "plan_mixture": ".planning",
    "Planner": ".planning",
    "Manifest": ".planning",
    "checkpoint": None,  # the submodule adaptiveload.checkpoint itself
    "save_checkpoint": ".checkpoint",
    "load_checkpoint": ".checkpoint",
    "BatchSampler": ".sampler",
    "MicroBatchInfo": ".schedule",
    "IndexDataset": ".dataset",
    "collate_packed": ".dataset",
    "member_tensors": ".dataset",
    "StreamDataset": ".stream",
    "PackedBatch": ".stream",
    "MemberInfo": ".stream",
    "Error": "._lib",
    "StreamError": "._lib",
    "wan_tokens": ".latents",
    "latent_tokens": ".latents",
    "adaln": "._adaln",
    "setup_distributed": ".training",
    "grad_sync": ".training",
    "demo_corpus": ".training",
    "add_corpus_arguments": ".training",
    "corpus_from_args": ".training",
    "StepTotals": ".step_totals",
    "SampleIndex": ".samples",
    "Sample": ".samples",
    "Member": ".samples",
    "crop_to_bucket": ".samples",
    "bucket_tokens": ".samples",
}


def __getattr__(name):
    if name == "__version__":  # the loaded library's al_version(): one version for C and Python
        from . import _lib

        value = _lib.version()
    else:
        if name not in _LAZY:
            raise AttributeError("module 'adaptiveload' has no attribute %r" % name)
        mod = _LAZY[name]
        if mod is None:
            value = importlib.import_module("." + name, __name__)
        else:
            value = getattr(importlib.import_module(mod, __name__), name)
    globals()[name] = value
    return value

