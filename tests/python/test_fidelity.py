"""Whole-sample fidelity: the fraction of native latent tokens a bucket table keeps, as
`inspect INDEX` and the plan summary report it, and `adaptiveload buckets --fit`, which fits a
table to the corpus's own latent grids.

The corpus is typed latents (KEY.latent.npy, float16 (1, T, H, W)) at native resolution:
720p and 480p at 16:9, 9:16, 4:3, 1:1, plus 848x480, 1024x576 and 1000x560 (W/8 = 125, odd:
the fit floors it to whole 2x2 patches, 992x560), at 1..81 frames, written with tarfile and numpy. Native
tokens come from the latents' own shapes, and the planner's assignment rule (nearest ratio,
then the largest size inside the sample's pixels and grid, then the most frames under M_mem)
is recomputed here, so the reports are checked against numbers the C code did not make. The
fitted plan is checked from the manifest's per-sample token counts (inspect --jsonl).

Run by tests/python/python_test.sh (Bazel sh_test, al_py_test) with ADAPTIVELOAD_LIB,
ADAPTIVELOAD_BIN and PYTHONPATH set.
"""

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest

try:
    import numpy as np
except ImportError as e:  # the sh_test checks torch first; this keeps direct runs honest too
    print("SKIP: numpy cannot be imported (%s)" % e)
    sys.exit(0)

BIN = os.environ.get("ADAPTIVELOAD_BIN", "adaptiveload")
SHAPES = [(1280, 720), (832, 480), (848, 480), (720, 1280), (480, 832), (960, 720), (640, 480),
          (720, 720), (512, 512), (1024, 576), (1000, 560)]
FRAMES = [1, 17, 33, 49, 81]
MEM = 65536  # AL_PLAN_DEFAULT_MEM_TOKENS
ST, SS, PT, PH, PW = 4, 8, 1, 2, 2  # Wan 2.1


def run(*args):
    p = subprocess.run([BIN] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if p.returncode != 0:
        raise AssertionError("adaptiveload %s failed (%d): %s" % (" ".join(map(str, args)), p.returncode, p.stderr))
    return p.stdout, p.stderr


def native_tokens(grid):
    t, h, w = grid
    return -(-t // PT) * (h // PH) * (w // PW)


def bucket_tokens(w, h, f):
    return -(-(1 + (f - 1) // ST) // PT) * (h // (SS * PH)) * (w // (SS * PW))


def parse_table(text):
    """The text form of a bucket table: (frames, [(group, rw, rh, [(w, h), ...]), ...])."""
    frames, groups = [], []
    for line in text.splitlines():
        line = line.split("#")[0].split()
        if not line:
            continue
        if line[0] == "frames":
            frames = sorted(set(int(x) for x in line[1:]))
        else:
            rw, rh = map(int, line[1].split(":"))
            sizes = [tuple(map(int, s.split("x"))) for s in line[2:]]
            groups.append((line[1], rw, rh, sorted(sizes, key=lambda s: (s[0] * s[1], s[0]))))
    return frames, groups


def assign(table, w, h, f, grid, mem=MEM):
    """The planner's rule (planner/al_buckets.h) for a typed latent: (group, bw, bh, bf) or None."""
    frames, groups = table
    def distance(a):  # the larger of x and 1/x, x = (W/H) / (rw/rh): monotone in |ln x|
        x = (w * groups[a][2]) / (h * groups[a][1])
        return max(x, 1 / x), a

    best = min(range(len(groups)), key=distance)
    name, _, _, sizes = groups[best]
    for bw, bh in reversed(sizes):
        if bw > w or bh > h or bw // SS > grid[2] or bh // SS > grid[1]:
            continue
        for bf in reversed([x for x in frames if x <= f]):
            if 1 + (bf - 1) // ST > grid[0]:
                continue
            tok = bucket_tokens(bw, bh, bf)
            if tok and tok <= mem:
                return name, bw, bh, bf
    return None


def band(frames, fps):
    if frames <= 1:
        return "image"
    s = frames / fps
    return "<2s" if s < 2 else "2-5s" if s < 5 else "5-10s" if s < 10 else ">=10s"


class Corpus:
    def __init__(self, root):
        self.root = root
        os.makedirs(os.path.join(root, "shards"))
        self.samples = []  # (key, w, h, frames, grid)
        with tarfile.open(os.path.join(root, "shards", "n-0.tar"), "w") as tar:
            for rep in range(2):
                for w, h in SHAPES:
                    for f in FRAMES:
                        key = "n%04d" % len(self.samples)
                        grid = (1 + (f - 1) // ST, h // SS, w // SS)
                        buf = io.BytesIO()
                        np.save(buf, np.zeros((1,) + grid, np.float16))
                        meta = json.dumps({"width": w, "height": h, "frames": f, "fps": 24}).encode()
                        for name, data in ((key + ".json", meta), (key + ".latent.npy", buf.getvalue())):
                            ti = tarfile.TarInfo(name)
                            ti.size = len(data)
                            tar.addfile(ti, io.BytesIO(data))
                        self.samples.append((key, w, h, f, grid))
        self.index = os.path.join(root, "n.alidx")
        run("index", "-o", self.index, os.path.join(root, "shards"))
        self.native = sum(native_tokens(s[4]) for s in self.samples)

    def expected(self, table):
        """The crop report under `table`, recomputed: totals, per (group, band) cells, cuts."""
        kept, cells, why = 0, {}, {"crop": 0, "time": 0, "kept": 0}
        for key, w, h, f, grid in self.samples:
            b = assign(table, w, h, f, grid)
            n = native_tokens(grid)
            k = bucket_tokens(b[1], b[2], b[3])
            kept += k
            c = cells.setdefault((b[0], band(f, 24)), [0, 0, 0, 1.0])
            c[0] += 1
            c[1] += n
            c[2] += k
            c[3] = min(c[3], k / n)
            whole = native_tokens((grid[0], b[2] // SS, b[1] // SS))
            tb = 1 + (b[3] - 1) // ST
            why["kept" if k >= n else "time" if tb < grid[0] and whole > MEM else "crop"] += 1
        return kept, cells, why


def setUpModule():
    global TMP, C
    TMP = tempfile.mkdtemp(prefix="al_fid_", dir=os.environ.get("TEST_TMPDIR"))
    C = Corpus(TMP)


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


def manifest_kept(manifest):
    """Tokens of every scheduled sample (padding repeats left out), from inspect --jsonl."""
    out, _ = run("inspect", manifest, "--jsonl")
    kept, seen = 0, set()
    for line in out.splitlines():
        r = json.loads(line)
        for j, (s, t) in enumerate(zip(r["samples"], r["tokens"])):
            if j not in r["padded"]:
                kept += t
                seen.add(s)
    return kept, seen


class FidelityTest(unittest.TestCase):
    def check_report(self, fid, table):
        kept, cells, why = C.expected(table)
        self.assertEqual(fid["native_tokens"], C.native)
        self.assertEqual(fid["kept_tokens"], kept)
        self.assertEqual(fid["samples"], len(C.samples))
        self.assertAlmostEqual(fid["kept_fraction"], kept / C.native, places=6)
        self.assertEqual((fid["cropped"], fid["time_cut"], fid["kept_whole"]), (why["crop"], why["time"], why["kept"]))
        got = {(g["aspect"], g["duration"]): g for g in fid["groups"]}
        self.assertEqual(set(got), set(cells))
        for k, (n, nat, kp, mn) in cells.items():
            self.assertEqual((got[k]["samples"], got[k]["native_tokens"], got[k]["kept_tokens"]), (n, nat, kp), k)
            self.assertAlmostEqual(got[k]["min_fraction"], mn, places=6)
        return kept

    def test_inspect_reports_the_default_tables_fidelity(self):
        table = parse_table(run("buckets")[0])
        out, _ = run("inspect", C.index, "--json")
        kept = self.check_report(json.loads(out)["fidelity"], table)
        self.assertLess(kept / C.native, 0.90)  # the default table crops native 4:3 and 720p
        text, _ = run("inspect", C.index)
        self.assertIn("%.1f%% of their native latent tokens kept" % (100 * kept / C.native), text)
        self.assertIn("longer than M_mem (time cut)", text)
        self.assertIn("crop to bucket (aspect/size)", text)

    def test_fit_then_plan_keeps_95_percent(self):
        fitted = os.path.join(TMP, "fit.txt")
        _, err = run("buckets", "--fit", C.index, "-o", fitted)
        manifest = os.path.join(TMP, "fit.alm")
        _, perr = run("plan", "--index", C.index, "--world", 1, "--buckets", fitted, "-o", manifest)
        kept, seen = manifest_kept(manifest)
        self.assertEqual(seen, set(range(len(C.samples))))
        self.assertGreaterEqual(kept / C.native, 0.95)
        self.assertIn("%.2f%% of native latent tokens kept (%d of %d)" % (100 * kept / C.native, kept, C.native), err)
        self.assertIn("plan: fidelity: %.2f%% of native latent tokens kept (%d samples)" % (100 * kept / C.native,
                      len(C.samples)), perr)
        # inspect --buckets agrees with the recomputation under the fitted table
        with open(fitted) as fh:
            table = parse_table(fh.read())
        out, _ = run("inspect", C.index, "--json", "--buckets", fitted)
        self.assertEqual(self.check_report(json.loads(out)["fidelity"], table), kept)
        out, _ = run("plan", "--index", C.index, "--world", 1, "--buckets", fitted, "-o", manifest, "--json")
        fid = json.loads(out)["fidelity"]
        self.assertEqual((fid["kept_tokens"], fid["native_tokens"]), (kept, C.native))
        why = C.expected(table)[2]
        self.assertEqual(fid["time_cut"], why["time"])
        self.assertGreater(why["time"], 0)  # the 720p 81-frame clips exceed M_mem

    def test_fit_is_deterministic(self):
        a, b = os.path.join(TMP, "a.txt"), os.path.join(TMP, "b.txt")
        run("buckets", "--fit", C.index, "-o", a, "--max-sizes", 6)
        run("buckets", "--fit", C.index, "-o", b, "--max-sizes", 6, "--quiet")
        with open(a, "rb") as fa, open(b, "rb") as fb:
            ta = fa.read()
            self.assertEqual(ta, fb.read())
        frames, groups = parse_table(ta.decode())
        self.assertLessEqual(sum(len(g[3]) for g in groups), 6)
        out, _ = run("buckets", "--fit", C.index, "--max-sizes", 6, "-q")
        self.assertEqual(out.encode(), ta)

    def test_plan_without_fit_reports_the_default_kept_fraction(self):
        manifest = os.path.join(TMP, "def.alm")
        _, err = run("plan", "--index", C.index, "--world", 1, "-o", manifest)
        kept, _ = manifest_kept(manifest)
        self.assertEqual(kept, C.expected(parse_table(run("buckets")[0]))[0])
        self.assertIn("plan: fidelity: %.2f%% of native latent tokens kept" % (100 * kept / C.native), err)

    def test_usage_errors(self):
        manifest = os.path.join(TMP, "u.alm")
        run("plan", "--index", C.index, "--world", 1, "-o", manifest)
        for args in (["buckets", "--fit", C.index, "--max-sizes", 0],
                     ["buckets", "--fit", C.index, "--max-sizes", 65],
                     ["buckets", "--fit", C.index, "--buckets", "x.txt"],
                     ["buckets", "--max-sizes", 4],
                     ["inspect", manifest, "--buckets", "x.txt"],
                     ["inspect", C.index, "--mem-tokens", 0]):
            p = subprocess.run([BIN] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            self.assertEqual(p.returncode, 2, args)
        # a fit that can keep nothing names the option to change and the figures that decide it
        for args, says in ((["--mem-tokens", 10], ["M_mem 10 tokens (--mem-tokens)", "smallest candidate size"]),
                           (["--geometry", "4,8,1,100000,100000"], ["geometry 4,8,1,100000,100000 (--geometry"])):
            p = subprocess.run([BIN, "buckets", "--fit", C.index, "-q"] + [str(a) for a in args],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
            self.assertEqual(p.returncode, 1, args)
            for text in says:
                self.assertIn(text, p.stderr)
            self.assertEqual(p.stdout, "")
        p = subprocess.run([BIN, "buckets", "--fit", os.path.join(TMP, "none.alidx")], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(p.returncode, 1)
        self.assertIn("none.alidx", p.stderr)


if __name__ == "__main__":
    unittest.main()
