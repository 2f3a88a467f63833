"""Mixtures from Python (adaptiveload.plan_mixture): a dict, the same structure as a file, and the
CLI's `plan --mixture` write the same bytes; Manifest.sources names each source's weight,
passes and draws, and the draws of every source's pass are each in the plan once; the mixture's
refusals name the field or source. No torch needed.

Run by tests/python/python_test.sh (Bazel sh_test, //tests/python:test_mixture) with
ADAPTIVELOAD_LIB, ADAPTIVELOAD_BIN and PYTHONPATH set.
"""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

import adaptiveload

BIN = os.environ.get("ADAPTIVELOAD_BIN", "adaptiveload")


def run(*args, cwd=None):
    p = subprocess.run([BIN] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, cwd=cwd)
    if p.returncode != 0:
        raise AssertionError("adaptiveload %s failed (%d): %s" % (" ".join(map(str, args)), p.returncode, p.stderr))
    return p.stdout


def setUpModule():
    global TMP, MIX
    TMP = tempfile.mkdtemp(prefix="al_mixture_", dir=os.environ.get("TEST_TMPDIR"))
    for name, n, seed in (("web", 900, 3), ("hq", 150, 4), ("img", 500, 5)):
        run("synth", "--out", os.path.join(TMP, name), "--samples", n, "--payload", "none", "--seed", seed)
        run("index", "-o", os.path.join(TMP, name + ".alidx"), os.path.join(TMP, name))
    MIX = {"by": "tokens", "steps": 80,
           "sources": [{"name": "web", "index": "web.alidx", "weight": 0.5},
                       {"name": "hq", "index": "hq.alidx", "weight": 0.3, "on_exhaust": "repeat"},
                       {"name": "img", "index": "img.alidx", "weight": 0.2}]}
    with open(os.path.join(TMP, "mix.json"), "w") as f:
        json.dump(MIX, f)


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


def read(path):
    with open(path, "rb") as f:
        return f.read()


class Mixture(unittest.TestCase):
    def setUp(self):
        self.cwd = os.getcwd()
        os.chdir(TMP)  # the dict's index paths are relative to the working folder

    def tearDown(self):
        os.chdir(self.cwd)

    def test_dict_file_and_cli_write_the_same_bytes(self):
        a = adaptiveload.plan_mixture(MIX, world=4, micro_per_step=2, out=os.path.join(TMP, "d.alm"))
        b = adaptiveload.plan_mixture(os.path.join(TMP, "mix.json"), world=4, micro_per_step=2,
                                      out=os.path.join(TMP, "f.alm"))
        run("plan", "--mixture", os.path.join(TMP, "mix.json"), "--world", 4, "--micro-per-step", 2,
            "-o", os.path.join(TMP, "c.alm"))
        self.assertEqual(read(a.path), read(b.path))
        self.assertEqual(read(a.path), read(os.path.join(TMP, "c.alm")))
        self.assertEqual(a.info["steps"], 80)
        self.assertEqual(a.mix_by, "tokens")

    def test_sources_and_passes(self):
        m = adaptiveload.plan_mixture(MIX, world=4, micro_per_step=2)
        src = m.sources
        self.assertEqual([s["name"] for s in src], ["web", "hq", "img"])
        self.assertAlmostEqual(sum(s["weight"] for s in src), 1.0)
        hq = src[1]
        self.assertGreaterEqual(hq["passes"], 2)
        self.assertEqual(hq["samples"], 150)
        # Sample numbers count every source's passes one after another.
        base = 0
        for s in src:
            self.assertEqual(s["draw_base"], base)
            base += s["passes"] * s["samples"]
        self.assertEqual(m.info["index_samples"], base)
        self.assertEqual(sum(s["drawn"] for s in src), m.info["samples"])

    def test_a_one_stop_source_mixture_is_the_plain_chunked_plan(self):
        one = {"sources": [{"name": "web", "index": "web.alidx", "on_exhaust": "stop"}]}
        a = adaptiveload.plan_mixture(one, world=4, micro_per_step=2)
        b = adaptiveload.plan(os.path.join(TMP, "web.alidx"), world=4, micro_per_step=2, planner="chunked")
        self.assertEqual(read(a.path), read(b.path))
        self.assertEqual(a.sources, [])

    def test_refusals_name_the_field(self):
        bad = [({"sources": [{"name": "web", "index": "web.alidx", "weigth": 1}], "steps": 3}, "unknown field 'weigth'"),
               ({"sources": [{"name": "web", "index": "web.alidx", "weight": 0}], "steps": 3}, "weight must be"),
               ({"sources": [{"name": "web", "index": "nope.alidx"}], "steps": 3}, "source 'web'"),
               ({"sources": [{"name": "web", "index": "web.alidx"}]}, "never ends"),
               ({"sources": [{"name": "web", "index": "web.alidx"}], "steps": -2}, "steps must be an integer")]
        for mix, says in bad:
            with self.assertRaises(adaptiveload.Error) as e:
                adaptiveload.plan_mixture(mix, world=4)
            self.assertIn(says, str(e.exception))
        with self.assertRaises(ValueError):
            adaptiveload.plan_mixture({"sources": [], "x": float("nan")}, world=4)
        with self.assertRaises(ValueError):
            adaptiveload.plan_mixture(MIX, world=4, planner="epoch")
        with self.assertRaises(ValueError):
            adaptiveload.plan_mixture(os.path.join(TMP, "mix.json\0x"), world=4)


if __name__ == "__main__":
    unittest.main()
