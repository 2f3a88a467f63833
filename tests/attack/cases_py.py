"""The Python API with hostile numbers, types and states: adaptiveload.plan, Planner,
Planner.resume, Planner.from_state, StreamDataset (and load_state_dict), BatchSampler (and
load_state_dict, state_at), IndexDataset, checkpoint.resume. Run in one worker process
(pyworker.py) that reports each call's exception type and message; a worker that dies is a
crash of that case, one that does not answer is a hang."""

import json
import os
import select
import subprocess
import sys

HOSTILE = [-1, 2 ** 64, 2 ** 63, 2 ** 32, 1.5, float("nan"), float("inf"), "4", None, [], {}, True, 0, 1 << 21,
           -(2 ** 63), 10 ** 30, b"1", 2.0]
# values any API may accept (meaning: default, or a legal number)
MAYBE_OK = {0, 2.0, True, None, 1 << 21, 2 ** 32, 2 ** 63, 2 ** 64, 10 ** 30}


def _v(x):
    """JSON-safe spelling of a value (floats nan/inf and bytes as tagged strings)."""
    if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
        return {"float": repr(x)}
    if isinstance(x, bytes):
        return {"bytes": x.decode()}
    return x


CALLS = {
    "plan": ["world", "epoch", "seed", "micro_per_step", "step_tokens", "mem_tokens", "comp_ms", "window",
             "start_step", "policy", "last_step", "geometry", "require_members", "buckets", "bogus"],
    "Planner": ["world", "seed", "micro_per_step", "step_tokens", "mem_tokens", "window", "path_epoch"],
    "resume": ["at_step", "world", "epoch", "step_tokens", "micro_per_step"],
    "from_state": ["world", "seed", "index", "cost", "options", "epoch0", "version", "drop", "extra"],
    "StreamDataset": ["rank", "world_size", "threads", "prefetch", "keep", "max_member_bytes", "max_sample_bytes",
                      "max_skip_fraction", "members", "root", "ext", "on_error", "device", "state"],
    "stream_state": ["version", "rank", "world", "epoch", "seed", "index_fingerprint", "manifest_fingerprint",
                     "position", "next_step", "next_micro", "stride", "skipped", "delivered", "worker", "drop", "extra"],
    "BatchSampler": ["rank", "world_size", "epoch", "members", "index"],
    "sampler_state": ["version", "rank", "world", "epoch", "seed", "index_fingerprint", "manifest_fingerprint",
                      "position", "next_step", "next_micro", "drop", "extra"],
    "state_at": ["position"],
    "IndexDataset": ["ext", "members", "vae_stride_t", "vae_stride_s", "root", "item"],
    "checkpoint": ["world", "step_tokens", "micro_per_step", "epoch", "step", "planner", "drop"],
    "sp_plan": ["sp_degrees", "sync"],
    "sp_groups": ["world", "degrees"],
    "sp_group_for": ["degree", "rank"],
    "sp_stream": ["sp_shard"],
}
# sequence-parallel values: degree lists legal and not, sync models, flags
SP_EXTRA = [[1, 2, 4], [1, 2], [4, 2, 1], (1, 2), [1, 2, 4, 8], [3], [1, 1], [0], [-2], [2 ** 64], [1.5], [True],
            ["2"], "1,2", "micro", "step", "auto", "MICRO", "", [1] * 12, False, 1, 2]
SP_PARAMS = {"sp_degrees", "sync", "degrees", "degree", "sp_shard"}
STRINGISH = {"policy", "last_step", "ext", "on_error", "members", "root", "buckets", "require_members", "index",
             "cost", "device", "geometry", "options", "replans"}
EXTRA_STR = ["", "x" * 5000, "latent.npy", "clip.npy", "\x00", "/dev/zero", "/nonexistent", ["latent.npy", 5],
             {"a": "b"}, "=", "/=/", ["latent.npy"] * 100, (1, 2, 3, 4, 5), (0, 0, 0, 0, 0), (4, 8, 1, 2), "fail "]


def gen_python(rng):
    for fn, params in CALLS.items():
        for p in params:
            vals = list(HOSTILE) + (EXTRA_STR if p in STRINGISH else []) + (SP_EXTRA if p in SP_PARAMS else [])
            if p in ("drop", "extra", "bogus"):
                vals = [1, "x"]
            n = 5 if p in STRINGISH else 10 if p in SP_PARAMS else 6 if fn.startswith("sp_") else 4
            for v in rng.sample(vals, min(len(vals), n)):
                yield {"kind": fn, "param": p, "v": _v(v), "desc": "%s %s=%r" % (fn, p, v)}


def start_worker(ctx):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.abspath(ctx.pythonpath) if ctx.pythonpath else os.path.join(ctx.repo, "python")
    if ctx.lib:
        env["ADAPTIVELOAD_LIB"] = ctx.lib
    env.pop("RANK", None)
    env.pop("WORLD_SIZE", None)
    env["ADAPTIVELOAD_BIN"] = ctx.bin
    p = subprocess.Popen([ctx.python, os.path.join(os.path.dirname(os.path.abspath(__file__)), "pyworker.py"),
                          json.dumps(ctx.shared["P"])], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, universal_newlines=True, bufsize=1, start_new_session=True)
    line = p.stdout.readline()
    if not line.startswith("ready"):
        raise SystemExit("python worker did not start: %s %s" % (line, p.stderr.read()[-2000:]))
    ctx.py_worker = p


def stop_worker(ctx):
    p = ctx.py_worker
    if p and p.poll() is None:
        p.kill()
        p.wait()
    ctx.py_worker = None


def exec_python(ctx, case, d):
    with ctx.py_lock:
        if ctx.py_worker is None or ctx.py_worker.poll() is not None:
            start_worker(ctx)
        p = ctx.py_worker
        p.stdin.write(json.dumps(case) + "\n")
        p.stdin.flush()
        r, _, _ = select.select([p.stdout], [], [], ctx.timeout + 10)
        if not r:
            stop_worker(ctx)
            return "hang", "no answer in %.0f s" % (ctx.timeout + 10)
        line = p.stdout.readline()
        if not line:
            rc = p.wait()
            err = p.stderr.read()[-1500:]
            ctx.py_worker = None
            return "crash", "worker died (exit %s): %s" % (rc, err.replace("\n", " | "))
    res = json.loads(line)
    return res["cat"], res["why"]


SURFACES = [("python", gen_python, exec_python)]
