#!/usr/bin/env python3
"""Writes a WebDataset corpus of typed members for dev/bench_stream_members.sh:
per sample KEY.json (width, height, frames), KEY.latent.npy (float16 (16, T, H/8, W/8), a
native grid a little larger than its Wan bucket so the stream crops rows, columns and
frames), KEY.t5.npy (float16 (L, 4096), L 16..128) and KEY.txt (a caption); with
--mp4-bytes-per-frame N also KEY.mp4, N x frames bytes standing for the source video that real
shards keep beside the latents (a member a latent-training run does not read).

    dev/gen_members_corpus.py OUT_DIR [--samples N] [--shards K] [--seed S] [--mp4-bytes-per-frame N]

Mix: 40% 848x496 x 85 frames (latent 16x22x62x106, bucket 832x480 x 81), 30% 656x384 x 53
frames (16x14x48x82, bucket 640x368 x 49), 30% 1296x736 images (16x1x92x162, bucket
1280x720). Payload values are slices of one random pool (their values do not matter to a
throughput figure). Needs numpy (Debian's python3-numpy)."""

import argparse
import io
import json
import os
import tarfile

import numpy as np

KINDS = [(848, 496, 85), (656, 384, 53), (1296, 736, 1)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mp4-bytes-per-frame", type=int, default=0)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    pool = rng.integers(0, 1 << 15, size=40 << 20, dtype=np.uint16).view(np.float16)  # 80 MB
    tars = [tarfile.open(os.path.join(a.out, "shard-%04d.tar" % k), "w", format=tarfile.USTAR_FORMAT)
            for k in range(a.shards)]

    def add(t, name, data):
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        ti.mtime = 1700000000
        t.addfile(ti, io.BytesIO(data))

    def npy(shape):
        n = int(np.prod(shape))
        at = int(rng.integers(0, pool.size - n))
        b = io.BytesIO()
        np.save(b, pool[at:at + n].reshape(shape))
        return b.getvalue()

    total = 0
    for i in range(a.samples):
        r = rng.random()
        w, h, f = KINDS[0] if r < 0.4 else KINDS[1] if r < 0.7 else KINDS[2]
        key = "s%07d" % i
        t = tars[i % a.shards]
        lat = npy((16, 1 + (f - 1) // 4, h // 8, w // 8))
        t5 = npy((int(rng.integers(16, 129)), 4096))
        txt = ("a video of sample %d, " % i + "words " * int(rng.integers(5, 30))).encode()
        add(t, key + ".json", json.dumps({"width": w, "height": h, "frames": f}).encode())
        if a.mp4_bytes_per_frame > 0:
            n = a.mp4_bytes_per_frame * f
            at = int(rng.integers(0, pool.size * 2 - n))
            add(t, key + ".mp4", pool.view(np.uint8)[at:at + n].tobytes())
        add(t, key + ".latent.npy", lat)
        add(t, key + ".t5.npy", t5)
        add(t, key + ".txt", txt)
        total += len(lat) + len(t5) + len(txt)
    for t in tars:
        t.close()
    print("wrote %d samples, %.2f GB of members, in %d shards under %s" % (a.samples, total / 1e9, a.shards, a.out))


if __name__ == "__main__":
    main()
