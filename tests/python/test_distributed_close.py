"""Distributed.close() with a DistributedDataParallel model still alive, under torch.distributed
with 2 gloo processes on the CPU.

Rank 0 starts an all-reduce of a tensor that Python then drops (the gloo work holds the last
reference), calls close(), then frees its DDP model. Rank 1 joins that all-reduce seconds
later. Had the model's C++ Reducer held the group's last reference, freeing the model would
free the gloo group with the GIL held, joining the worker thread that must take the GIL to
free the tensor once the all-reduce ends: rank 0 would never exit. close() keeps the group's
handle, so both ranks exit 0, and the all-reduce's sum reaches rank 1.

Run by tests/python/python_test.sh with ADAPTIVELOAD_LIB and PYTHONPATH set.
"""

import faulthandler
import gc
import os
import socket
import sys
import tempfile
import time
import unittest

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError as e:
    print("SKIP: torch cannot be imported (%s)" % e)
    sys.exit(0)

import adaptiveload

HANG_S = 60  # a rank still running after this is hung: it exits with every thread's stack
LATE_S = 3  # how long rank 1 waits before joining rank 0's all-reduce


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank, port, out_dir):
    faulthandler.dump_traceback_later(HANG_S, exit=True)
    os.environ.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    env = adaptiveload.setup_distributed(cpu=True)
    assert env.initialized and env.world_size == 2 and env.rank == rank
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(1, 1))
    if rank == 0:
        t = torch.full((1,), 2.0)
        dist.all_reduce(t, async_op=True)  # pending until rank 1 joins
        del t  # the work now holds the tensor's last reference
        env.close()
        del model  # the Reducer releases the group here
        gc.collect()
    else:
        time.sleep(LATE_S)
        t = torch.full((1,), 5.0)
        dist.all_reduce(t)
        with open(os.path.join(out_dir, "sum"), "w") as f:
            f.write("%g" % float(t))
        del model
        env.close()
        env.close()  # a second close does nothing
    with open(os.path.join(out_dir, "rank%d.done" % rank), "w") as f:
        f.write("ok")


class CloseWithModelAliveTest(unittest.TestCase):
    def test_both_ranks_exit_when_the_model_outlives_close(self):
        if not (dist.is_available() and dist.is_gloo_available()):
            self.skipTest("torch.distributed with gloo is not available")
        out_dir = tempfile.mkdtemp(prefix="al_close_", dir=os.environ.get("TEST_TMPDIR"))
        mp.spawn(_rank, args=(_free_port(), out_dir), nprocs=2, join=True)  # raises on a rank's failure
        for r in range(2):
            self.assertTrue(os.path.exists(os.path.join(out_dir, "rank%d.done" % r)), r)
        with open(os.path.join(out_dir, "sum")) as f:
            self.assertEqual(f.read(), "7")

    def test_close_without_a_group(self):
        env = adaptiveload.setup_distributed(cpu=True)  # no launcher here: not distributed
        self.assertFalse(env.initialized)
        env.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
