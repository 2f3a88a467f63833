#!/usr/bin/env python3
"""A metadata-only long-tail video corpus for the SP replay: writes an index directly (as
dev/bench_plan.c does: al_index_new / al_index_add_shard / al_index_add_sample, through
ctypes on libadaptiveload.so, no shards and no payloads) and the same shapes as JSON.

    dev/e2e/sp_corpus.py -o DIR [--samples 120000] [--seed 0] [--lib PATH] [--smoke]

DIR/corpus.alidx: the index (samples without members: planning and replay need shapes only).
DIR/corpus.json:  {"samples": [[width, height, frames, fps], ...], "tokens": [...], "mix": ...,
                   "token_bands": ...}; sample i is index position i.

The mix (what a team training a Wan-like model at 480p-720p has): 20 % images, 80 % clips
of 2-16 s (log-normal, median ~3.7 s, long tail), 24/25/30 fps, 480p (832x480) or 720p
(1280x720), mostly landscape, some portrait and square. Tokens by Wan geometry (VAE 4x8x8,
patch 1x2x2): a 720p clip of 81 frames is 75,600 tokens; of 16 s at 30 fps 435,600 (the
planner cuts what even the largest SP degree cannot hold, and reports it).
"""

import argparse
import ctypes
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sp_model  # noqa: E402

RESOLUTIONS = {  # name: (landscape width, height), share of clips
    "480p": ((832, 480), 0.55),
    "720p": ((1280, 720), 0.45),
}
ASPECTS = (("landscape", 0.78), ("portrait", 0.14), ("square", 0.08))
FPS = ((24.0, 0.5), (25.0, 0.2), (30.0, 0.3))
IMAGE_SHARE = 0.20
DURATION = {"median_s": 3.7, "sigma": 0.55, "min_s": 2.0, "max_s": 16.0}


def _pick(rng, table):
    x = rng.random()
    acc = 0.0
    for v, p in table:
        acc += p
        if x < acc:
            return v
    return table[-1][0]


def sample_shape(rng):
    """(width, height, frames, fps) of one sample."""
    res = _pick(rng, [(k, v[1]) for k, v in RESOLUTIONS.items()])
    w, h = RESOLUTIONS[res][0]
    aspect = _pick(rng, ASPECTS)
    if aspect == "portrait":
        w, h = h, w
    elif aspect == "square":
        w = h
    if rng.random() < IMAGE_SHARE:
        return w, h, 1, 0.0
    fps = _pick(rng, FPS)
    import math

    dur = math.exp(math.log(DURATION["median_s"]) + DURATION["sigma"] * rng.gauss(0.0, 1.0))
    dur = min(DURATION["max_s"], max(DURATION["min_s"], dur))
    frames = int(dur * fps) + 1
    return w, h, frames, fps


def make_shapes(n, seed):
    rng = random.Random(seed)
    return [sample_shape(rng) for _ in range(n)]


def token_bands(toks):
    bands = [(1, 8192), (8192, 32768), (32768, 100000), (100000, 250000), (250000, 1 << 62)]
    out = {}
    for lo, hi in bands:
        sel = [t for t in toks if lo <= t < hi]
        out["%d-%d" % (lo, hi) if hi < (1 << 62) else ">=%d" % lo] = {"samples": len(sel), "tokens": sum(sel)}
    return out


class _MemberInfo(ctypes.Structure):  # loader/al_index.h al_member_info (not used: no members)
    _fields_ = [("ext", ctypes.c_char_p), ("offset", ctypes.c_uint64), ("size", ctypes.c_uint64),
                ("lz4", ctypes.c_int)]


def find_lib(given=None):
    cands = [given, os.environ.get("ADAPTIVELOAD_LIB"),
             os.path.join(HERE, "..", "..", "bazel-bin", "dist", "libadaptiveload.so")]
    for c in cands:
        if c and os.path.isdir(c):
            c = os.path.join(c, "libadaptiveload.so")
        if c and os.path.exists(c):
            return os.path.abspath(c)
    raise SystemExit("libadaptiveload.so not found (bazel build //dist:libadaptiveload.so, or --lib)")


def write_index(path, shapes, lib_path, per_shard=1000):
    """Writes the index of ``shapes`` (no members) to ``path``."""
    lib = ctypes.CDLL(lib_path)
    lib.al_index_new.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    lib.al_index_add_shard.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_int,
                                       ctypes.POINTER(ctypes.c_uint32)]
    lib.al_index_add_sample.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_uint32,
                                        ctypes.c_uint32, ctypes.c_uint32, ctypes.c_float,
                                        ctypes.POINTER(_MemberInfo), ctypes.c_size_t]
    lib.al_index_save.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.al_index_free.argtypes = [ctypes.c_void_p]
    lib.al_last_error.restype = ctypes.c_char_p
    idx = ctypes.c_void_p()

    def check(rc, what):
        if rc:
            raise SystemExit("%s failed (%d): %s" % (what, rc, lib.al_last_error().decode()))

    check(lib.al_index_new(ctypes.byref(idx)), "al_index_new")
    try:
        sid = ctypes.c_uint32()
        for i, (w, h, f, fps) in enumerate(shapes):
            if i % per_shard == 0:
                check(lib.al_index_add_shard(idx, ("/sp-corpus/shard-%06d.tar" % (i // per_shard)).encode(), 0, 1,
                                             ctypes.byref(sid)), "al_index_add_shard")
            key = ("%06d-%08d" % (sid.value, i)).encode()
            check(lib.al_index_add_sample(idx, key, sid.value, w, h, f, fps, None, 0), "al_index_add_sample")
        check(lib.al_index_save(idx, path.encode()), "al_index_save " + path)
    finally:
        lib.al_index_free(idx)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--out", required=True, help="folder for corpus.alidx and corpus.json")
    ap.add_argument("--samples", type=int, default=120000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lib", help="libadaptiveload.so (default: $ADAPTIVELOAD_LIB, bazel-bin/dist/)")
    ap.add_argument("--no-index", action="store_true", help="corpus.json only")
    ap.add_argument("--smoke", action="store_true", help="2,000 samples")
    a = ap.parse_args(argv)
    if a.smoke and a.samples == 120000:
        a.samples = 2000
    if a.samples < 1:
        ap.error("--samples must be 1 or more")
    os.makedirs(a.out, exist_ok=True)
    shapes = make_shapes(a.samples, a.seed)
    toks = [sp_model.tokens(w, h, f) for w, h, f, _ in shapes]
    facts = {"samples": shapes, "tokens": toks, "seed": a.seed,
             "mix": {"image_share": IMAGE_SHARE, "resolutions": {k: list(v[0]) + [v[1]] for k, v in RESOLUTIONS.items()},
                     "aspects": ASPECTS, "fps": FPS, "duration": DURATION},
             "token_bands": token_bands(toks), "total_tokens": sum(toks), "max_tokens": max(toks)}
    with open(os.path.join(a.out, "corpus.json"), "w") as f:
        json.dump(facts, f)
    if not a.no_index:
        write_index(os.path.join(a.out, "corpus.alidx"), shapes, find_lib(a.lib))
    print(json.dumps({"samples": a.samples, "total_tokens": facts["total_tokens"], "max_tokens": facts["max_tokens"],
                      "token_bands": facts["token_bands"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
