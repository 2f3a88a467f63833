"""adaptiveload.training: its docstring's account of the steps holds for a real plan. Every
rank gets exactly ``micro_per_step`` micro-batches in every step, the last one ``last_in_step``
(what the gradient-sync pattern it shows relies on); the docstring says so.

Run by tests/python/python_test.sh (Bazel sh_test) with ADAPTIVELOAD_LIB, ADAPTIVELOAD_BIN and
PYTHONPATH set.
"""

import collections
import os
import shutil
import sys
import tempfile
import unittest

try:
    import torch  # noqa: F401  (the package's samplers need it)
except ImportError as e:  # the sh_test checks first; this keeps direct runs honest too
    print("SKIP: torch cannot be imported (%s)" % e)
    sys.exit(0)

import adaptiveload
from adaptiveload import training

BIN = os.environ.get("ADAPTIVELOAD_BIN", "adaptiveload")


class StepsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="al_training_", dir=os.environ.get("TEST_TMPDIR"))
        cls.index, _ = training.demo_corpus(cls.tmp, world=3, samples=60, bin=BIN)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_every_rank_gets_micro_per_step_micro_batches_in_every_step(self):
        for k in (1, 3):
            m = adaptiveload.plan(self.index, world=3, seed=1, micro_per_step=k, mem_tokens=16384,
                                  out=os.path.join(self.tmp, "k%d.alm" % k))
            per_step = {}
            for rank in range(3):
                infos = list(adaptiveload.BatchSampler(m.path, rank=rank, world_size=3).infos())
                counts = collections.Counter(i.step for i in infos)
                self.assertEqual(set(counts.values()), {k}, "rank %d, K %d" % (rank, k))
                for i in infos:
                    self.assertEqual(i.n_micro, k)
                    self.assertEqual(i.last_in_step, i.micro == k - 1)
                per_step[rank] = sorted(counts)
            self.assertEqual(per_step[0], per_step[1])
            self.assertEqual(per_step[0], per_step[2])

    def test_the_docstring_says_so(self):
        doc = " ".join(training.__doc__.split())
        self.assertNotIn("differ between ranks", doc)
        self.assertIn("Every rank gets exactly ``micro_per_step`` micro-batches in every step", doc)


if __name__ == "__main__":
    unittest.main(verbosity=2)
