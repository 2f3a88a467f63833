"""The Python-surface worker of tests/attack/run.py: reads one case per line (JSON) on stdin, runs the
call, answers {"cat", "why"} on stdout. argv[1]: the shared fixture paths (JSON)."""

import json
import math
import os
import sys
import tempfile
import traceback
import warnings

warnings.simplefilter("ignore")
import adaptiveload  # noqa: E402
from adaptiveload import BatchSampler, IndexDataset, Planner, StreamDataset, checkpoint, training  # noqa: E402

P = json.loads(sys.argv[1])
TMP = tempfile.mkdtemp(prefix="al_attack_py_")
CLEAN = (adaptiveload.Error, ValueError, TypeError)
NUMERIC_BAD = ("-1", "1.5", "nan", "inf", "'4'", "[]", "{}", "b'1'", "-9223372036854775808",
               "1000000000000000000000000000000", "18446744073709551616", "None-state")


def val(x):
    if isinstance(x, dict) and set(x) == {"float"}:
        return float(x["float"])
    if isinstance(x, dict) and set(x) == {"bytes"}:
        return x["bytes"].encode()
    return x


def _sp_list_ok(v, world, distinct=True):
    """A list (or tuple) of 1..11 distinct ints (any number of repeats when not distinct),
    powers of two in 1..1024 dividing world."""
    return (isinstance(v, (list, tuple)) and 1 <= len(v) and (not distinct or len(v) <= 11 and len(set(v)) == len(v))
            and all(isinstance(d, int) and not isinstance(d, bool) and 1 <= d <= 1024 and not d & (d - 1)
                    and world % d == 0 for d in v))


def sp_must_refuse(case, v):
    """The sequence-parallel arguments' documented ranges (plan --sp-degrees / --sync, sp_groups,
    sp_group_for, StreamDataset(sp_shard=))."""
    k, p = case["kind"], case["param"]
    if p == "sp_degrees":  # None: the default, degree 1
        return v is not None and not _sp_list_ok(v, 4)
    if p == "sync":
        return v not in ("step", "micro", "auto") or not isinstance(v, str)
    if k == "sp_groups" and p == "world":
        return isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 1 << 20
    if k == "sp_groups" and p == "degrees":  # without torch.distributed only degree 1 is made;
        return not _sp_list_ok(v, 4, distinct=False) or set(v) != {1}  # repeats make one group each
    if p == "degree":
        return v not in (1, 2)
    if k == "sp_group_for" and p == "rank":
        return isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 4
    if p == "sp_shard":
        return not isinstance(v, (bool, int)) or v not in (0, 1)
    raise RuntimeError("harness: no range for %s %s" % (k, p))


def must_refuse(case, v):
    """The value is outside every range the API documents for a number."""
    if case["kind"].startswith("sp_"):
        return sp_must_refuse(case, v)
    if case["param"] in ("drop",):
        return True
    if case["kind"] in ("stream_state", "sampler_state") and v is None:
        return True
    if isinstance(v, bool) or v is None or v == 0:
        return False
    if isinstance(v, (bytes, list, dict)) and case["param"] not in ("members", "root", "require_members", "geometry",
                                                                  "replans", "options", "state", "index", "cost"):
        return True
    if isinstance(v, float):
        return not math.isfinite(v) or (v != int(v) and case["param"] not in ("comp_ms", "max_skip_fraction"))
    if isinstance(v, int):
        if case["param"] in ("comp_ms", "max_skip_fraction"):  # floats: any finite number is one
            return v < 0 or (case["param"] == "max_skip_fraction" and v > 1)
        return v < 0 or v >= 2 ** 64
    return False


def call(case, v):
    k, p = case["kind"], case["param"]
    if k == "plan":
        kw = {"world": 1, "epoch": 0, "seed": 0, "out": os.path.join(TMP, "p.alm")}
        kw[p] = v
        return adaptiveload.plan(P["index"], **kw)
    if k == "Planner":
        kw = {"world": 1, "out_dir": TMP}
        if p == "path_epoch":
            return Planner(P["index"], **kw).path(v)
        kw[p] = v
        return Planner(P["index"], **kw).path(0)
    if k == "resume":
        base = Planner(P["big_index"], world=4, micro_per_step=2, mem_tokens=30000, out_dir=TMP)
        kw = {"at_step": 2, "world": 3, "epoch": 0}
        kw[p] = v
        r = Planner.resume(base, **kw)
        return r.path(kw["epoch"] if isinstance(kw["epoch"], int) else 0)
    if k == "from_state":
        st = Planner(P["index"], world=1, out_dir=TMP).state_dict()
        if p == "drop":
            st.pop(sorted(st)[0])
        elif p == "extra":
            st["bogus"] = 1
        elif p == "epoch0":
            return Planner.from_state(st, out_dir=TMP).path(v)
        else:
            st[p] = v
        return Planner.from_state(st, out_dir=TMP).path(0)
    if k == "StreamDataset":
        kw = {"rank": 0, "world_size": 1}
        kw[p] = v
        ds = StreamDataset(P["index"], P["manifest"], **kw)
        it = iter(ds)
        b = next(it)
        del it
        return b
    if k == "stream_state":
        ds = StreamDataset(P["index"], P["manifest2"], rank=0, world_size=2)
        it = iter(ds)
        st = dict(next(it).resume_state)
        del it
        _mutate(st, p, v)
        ds2 = StreamDataset(P["index"], P["manifest2"], rank=0, world_size=2)
        ds2.load_state_dict(st)
        return [b.keys if hasattr(b, "keys") else b for b in ds2]
    if k == "BatchSampler":
        kw = {"rank": 0, "world_size": 2}
        kw[p] = v
        return list(BatchSampler(P["manifest2"], **kw))
    if k == "sampler_state":
        s = BatchSampler(P["manifest2"], rank=0, world_size=2)
        it = iter(s)
        next(it)
        st = dict(s.state_dict())
        _mutate(st, p, v)
        s2 = BatchSampler(P["manifest2"], rank=0, world_size=2)
        s2.load_state_dict(st)
        return list(s2)
    if k == "state_at":
        return BatchSampler(P["manifest2"], rank=0, world_size=2).state_at(v)
    if k == "IndexDataset":
        if p == "item":
            return IndexDataset(P["index"])[v]
        ds = IndexDataset(P["index"], **{p: v})
        return ds[0]
    if k == "checkpoint":
        pl = Planner(P["big_index"], world=4, micro_per_step=2, mem_tokens=30000, out_dir=TMP)
        ck = checkpoint.save_checkpoint(planner=pl, step=2, epoch=0)
        if p in ("world", "step_tokens", "micro_per_step"):
            kw = {"world": 3}
            kw[p] = v
            r = checkpoint.resume(ck, out_dir=TMP, **kw)
        else:
            if p == "drop":
                ck.pop(sorted(ck)[0])
            else:
                ck[p] = v
            r = checkpoint.resume(ck, world=3, out_dir=TMP)
        return r.planner.path(r.epoch)
    if k == "sp_plan":
        kw = {"world": 4, "micro_per_step": 2, "mem_tokens": 8000, "out": os.path.join(TMP, "sp.alm")}
        kw[p] = v
        return adaptiveload.plan(P["big_index"], **kw)
    if k == "sp_groups":
        kw = {"world": 4, "degrees": [1]}
        kw[p] = v
        return training.sp_groups(**kw)
    if k == "sp_group_for":
        groups = {1: [None] * 4, 2: ["g0", "g1"]}  # the shape sp_groups returns; groups stand-ins
        kw = {"degree": 2, "rank": 3}
        kw[p] = v
        return training.sp_group_for(groups, **kw)
    if k == "sp_stream":
        ds = StreamDataset(P["big_index"], P["sp_manifest"], rank=1, world_size=4, ext="json", sp_shard=v)
        it = iter(ds)
        b = next(it)
        del it
        if b.sp_sharded != bool(v):
            raise RuntimeError("harness: sp_shard=%r delivered sp_sharded %r" % (v, b.sp_sharded))
        return b
    raise RuntimeError("harness: unknown kind %s" % k)


def _mutate(st, p, v):
    if p == "drop":
        st.pop("position")
    elif p == "extra":
        st["bogus"] = 1
    else:
        st[p] = v


def judge(case):
    v = val(case["v"])
    p = case["param"]
    try:
        call(case, v)
    except CLEAN as e:
        msg = str(e)
        names = [p, p.replace("_", " "), p.replace("_", "-"), "epoch" if p in ("path_epoch", "epoch0") else p,
                 "state", "position" if p == "drop" else p]
        if p.startswith("max_"):
            names += ["cap"]  # a tiny cap (True is 1) refuses the first member over it, naming the cap
        if p == "drop":
            names += ["lacks"]
        if p == "world_size":
            names += ["world"]  # True is a world of 1: refused against the manifest's world
        if p == "at_step":
            names += ["re-plan from step"]
        if case["kind"] in ("from_state", "checkpoint") and p in ("drop", "extra"):
            names += ["key", "missing", "unknown"]
        if p == "item":
            names += ["index", "position", "sample"]
        if p in ("degrees", "degree"):
            names += ["degree", "SP"]
        if p in ("members", "ext", "root", "buckets", "require_members", "index", "cost", "state", "device"):
            names += [repr(v)[:30], str(v)[:30], "member", "root", "path", "file"]
        if not any(n and n in msg for n in names):
            return "unclear", "%s names none of %s: %s" % (type(e).__name__, names[:3], msg[:300])
        return "ok", "%s: %s" % (type(e).__name__, msg[:200])
    except RuntimeError as e:
        if case["kind"] == "sp_groups" and "torch.distributed" in str(e):
            return "ok", "RuntimeError: %s" % str(e)[:200]
        return "crash", "RuntimeError (not a clean error): " + traceback.format_exc()[-800:]
    except KeyError as e:
        if case["kind"] == "sp_group_for" and "sp_groups made degrees" in str(e):
            return "ok", "KeyError: %s" % str(e)[:200]
        return "crash", "KeyError (not a clean error): " + traceback.format_exc()[-800:]
    except IndexError as e:
        if p == "item":
            return "ok", "IndexError: %s" % e
        return "crash", "IndexError (not a clean error): " + traceback.format_exc()[-800:]
    except Exception as e:
        return "crash", "%s (not a clean error): %s" % (type(e).__name__, traceback.format_exc()[-900:])
    if must_refuse(case, v):
        return "wrong", "accepted %s=%r" % (p, v)
    return "ok", "accepted"


print("ready", flush=True)
for line in sys.stdin:
    c = json.loads(line)
    cat, why = judge(c)
    print(json.dumps({"cat": cat, "why": why}), flush=True)
