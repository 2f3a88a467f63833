#!/usr/bin/env python3
"""bench_decode.py - the CPU decode path's frames/s per core at bucket shape against PyAV and
torchcodec, measured in one run on the same clips.

Encodes --clips H.264 clips (--size, 25 fps, --src-frames frames, testsrc2 with temporal noise
so the bitrate is a camera's, x264 preset medium, crf 23, default GOP) with the system's ffmpeg,
then, pinned to one core, decodes the first --frames frames of each clip into the bucket
(--bucket W x H: scale keeping the aspect so the bucket is covered, centre crop; decode/al_decode.h)
with each decoder, one decoder thread:

  adaptiveload  al_decode_frames (libadaptiveload.so through ctypes), bytes in memory
  pyav          av.open(BytesIO), thread_count 1, frame.to_ndarray(rgb24, W' x H', BILINEAR),
                crop in numpy
  torchcodec    VideoDecoder(bytes, num_ffmpeg_threads=1, NHWC, transforms=[Resize((H', W')),
                CenterCrop((H, W))]), get_frames_in_range(0, frames)

Every rep runs the three in turn (interleaved, so load changes hit all alike); the best rep of
each is reported, with every rep in the log. The outputs are compared (mean absolute
difference to ours) so that the three do the same work.

    dev/anchors/.venv/bin/python dev/bench_decode.py --lib bazel-bin/dist/libadaptiveload.so
    # or any Python with torch, numpy, av and torchcodec
"""

import argparse
import ctypes
import io
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np


class Input(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("data", ctypes.c_void_p), ("size", ctypes.c_uint64),
                ("read", ctypes.c_void_p), ("read_ctx", ctypes.c_void_p), ("where", ctypes.c_char_p),
                ("ext", ctypes.c_char_p)]


class Options(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("threads", ctypes.c_uint32), ("span_start", ctypes.c_uint32),
                ("span_frames", ctypes.c_uint32), ("expect_frames", ctypes.c_uint32), ("allow_vfr", ctypes.c_uint32)]


class Geom(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("scaled_width", ctypes.c_uint32),
                ("scaled_height", ctypes.c_uint32), ("crop_x", ctypes.c_uint32), ("crop_y", ctypes.c_uint32)]


def preload_npp():
    """PyPI's torchcodec (the CUDA 13 build) links NPP, which nothing puts on the loader's path:
    load nvidia-npp's libraries from site-packages first (RTLD_GLOBAL), when they are there."""
    for base in sys.path:
        d = os.path.join(base, "nvidia", "cu13", "lib")
        if os.path.isdir(d):
            libs = sorted(f for f in os.listdir(d) if f.startswith("libnpp") and ".so" in f)
            for f in sorted(libs, key=lambda f: not f.startswith("libnppc.")):  # the core first
                ctypes.CDLL(os.path.join(d, f), mode=ctypes.RTLD_GLOBAL)


def encode(path, w, h, n, seed):
    src = "testsrc2=size=%dx%d:rate=25,noise=alls=6:allf=t:all_seed=%d" % (w, h, seed)
    subprocess.run(["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i", src,
                    "-frames:v", str(n), "-c:v", "libx264", "-preset", "medium", "-crf", "23",
                    "-pix_fmt", "yuv420p", path], check=True)
    with open(path, "rb") as fh:
        return fh.read()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", default="bazel-bin/dist/libadaptiveload.so")
    ap.add_argument("--clips", type=int, default=6)
    ap.add_argument("--size", default="1280x720")
    ap.add_argument("--src-frames", type=int, default=121)
    ap.add_argument("--frames", type=int, default=81)
    ap.add_argument("--bucket", default="832x480")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cpu", type=int, default=0, help="the core the decoders are pinned to")
    a = ap.parse_args()
    sw, sh = map(int, a.size.split("x"))
    bw, bh = map(int, a.bucket.split("x"))
    T = a.frames

    lib = ctypes.CDLL(os.path.abspath(a.lib))
    lib.al_decode_frames.argtypes = [ctypes.POINTER(Input), ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32,
                                     ctypes.POINTER(Options), ctypes.c_void_p, ctypes.c_size_t]
    lib.al_last_error.restype = ctypes.c_char_p
    g = Geom(ctypes.sizeof(Geom))
    assert lib.al_decode_geometry(sw, sh, bw, bh, ctypes.byref(g)) == 0
    W2, H2, x0, y0 = g.scaled_width, g.scaled_height, g.crop_x, g.crop_y

    import av
    import torch
    preload_npp()
    import torchcodec
    from torchcodec.decoders import VideoDecoder
    from torchcodec.transforms import CenterCrop, Resize
    torch.set_num_threads(1)

    tmp = tempfile.mkdtemp(prefix="bench_decode_")
    clips = [encode(os.path.join(tmp, "c%d.mp4" % i), sw, sh, a.src_frames, i) for i in range(a.clips)]
    os.sched_setaffinity(0, {a.cpu})

    def ours(b):
        out = np.empty((T, bh, bw, 3), np.uint8)
        inp = Input(ctypes.sizeof(Input), ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p), len(b), None, None,
                    b"bench", b"mp4")
        o = Options(ctypes.sizeof(Options), 1, 0, 0, 0, 0)
        rc = lib.al_decode_frames(ctypes.byref(inp), bw, bh, T, ctypes.byref(o), out.ctypes.data, out.nbytes)
        if rc != 0:
            raise RuntimeError(lib.al_last_error().decode())
        return out

    def pyav(b):
        out = np.empty((T, bh, bw, 3), np.uint8)
        with av.open(io.BytesIO(b)) as c:
            s = c.streams.video[0]
            s.codec_context.thread_count = 1
            i = 0
            for f in c.decode(s):
                x = f.to_ndarray(format="rgb24", width=W2, height=H2, interpolation="BILINEAR")
                out[i] = x[y0:y0 + bh, x0:x0 + bw]
                i += 1
                if i == T:
                    break
        return out

    def tcodec(b):
        d = VideoDecoder(b, dimension_order="NHWC", num_ffmpeg_threads=1,
                         transforms=[Resize((H2, W2)), CenterCrop((bh, bw))])
        return d.get_frames_in_range(0, T).data.numpy()

    methods = [("adaptiveload", ours), ("pyav", pyav), ("torchcodec", tcodec)]
    ref = [ours(b) for b in clips]
    for name, fn in methods[1:]:
        diffs = [float(np.abs(fn(b).astype(np.int16) - r.astype(np.int16)).mean()) for b, r in zip(clips, ref)]
        print("check %s: shape (%d, %d, %d, 3), mean |difference| to adaptiveload %.3f (max over clips %.3f)"
              % (name, T, bh, bw, sum(diffs) / len(diffs), max(diffs)))
    print("machine %s, python %s, av %s, torchcodec %s, torch %s, cpu %d of %d (load %s)"
          % (platform.node(), platform.python_version(), av.__version__, torchcodec.__version__, torch.__version__,
             a.cpu, os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg())))
    print("clips %d x %dx%d H.264 (%.1f MB, %d frames each), first %d frames into %dx%d (scaled %dx%d, crop at %d,%d)"
          % (a.clips, sw, sh, sum(map(len, clips)) / 1e6, a.src_frames, T, bw, bh, W2, H2, x0, y0))
    best = {}
    for r in range(a.reps):
        for name, fn in methods:
            t0 = time.perf_counter()
            c0 = time.process_time()
            for b in clips:
                fn(b)
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
            fps = a.clips * T / dt
            best[name] = max(best.get(name, 0), fps)
            print("rep %d %-12s %7.1f frames/s (wall %.2f s, cpu %.2f s)" % (r, name, fps, dt, dc))
    for name, _ in methods:
        print("best %-12s %7.1f frames/s per core  (%.2fx adaptiveload)" % (name, best[name],
                                                                         best[name] / best["adaptiveload"]))


if __name__ == "__main__":
    sys.exit(main())
