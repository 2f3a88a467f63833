"""Hostile arguments: stream --members/--root, fit inputs, plan --resume-from/--at-step/
--step-tokens/--micro-per-step, FIFOs, directories and devices given as files, extreme numbers
on every numeric option."""

import json
import os
import random
import shutil

import refs
from harness import judge
from cases_files import compare_stream, write

# ---------------------------------------------------------------- stream --members / --root


def gen_stream_args(rng):
    members = ["latent.npy", "t5.npy", "txt", "json", "clip.npy", "", ",", "latent.npy,", ",latent.npy",
               "latent.npy,latent.npy", "LATENT.NPY", "latent", "npy", ".npy", "latent.npy.lz4", "t5.npy.lz4",
               "x" * 129, "x" * 5000, "lat\x01ent.npy", "latent.npy\xff", "../latent.npy", "latent.npy,clip.npy",
               ",".join(["txt"] * 64), ",".join(["txt"] * 1000), ",".join("m%d" % i for i in range(300)), "json,json.lz4",
               "t5.npy,latent.npy", "txt,latent.npy,t5.npy,json", " latent.npy", "latent.npy ", "*", "%s", "latent.npy=1"]
    for m in members:
        yield {"kind": "members", "v": m, "desc": "--members %r" % m[:40]}
    for m in rng.sample(members, 12):
        yield {"kind": "members_ext", "v": m, "desc": "--ext %r" % m[:40]}
    roots = ["{S}={C}", "{S}/={C}", "{S}={C}/", "{G}={GC}", "{S}=", "={C}", "=", "", "{S}", "{S}={C}={C}",
             "{S}=/nonexistent", "{S}={C}/s0.tar", "/={C}", "{S}=/dev/null", "{S}={FIFO}", "{S}={MUT}", "{S}={EMPTY}",
             "relative=dir", "{S}=relative", "{S}/s0.tar={C}/s0.tar", "{S}/../shards={C}", "x" * 5000 + "={C}",
             "{S}={C}", "{S}={LOOP}", "{S}={SHORT}"]
    for r in roots:
        yield {"kind": "root", "v": [r], "desc": "--root %r" % r[:40]}
    for _ in range(10):
        yield {"kind": "root", "v": rng.sample(roots, rng.randint(2, 4)), "desc": "several --root"}
    for _ in range(8):
        yield {"kind": "root", "v": ["{S}={C}"] * rng.choice([2, 50, 500]), "desc": "repeated --root"}


def exec_stream_args(ctx, case, d):
    P = ctx.shared["P"]
    S = P["shards"]
    base = ["stream", "--index", P["index"], "--manifest", P["manifest"], "--jsonl"]
    names = []
    if case["kind"] in ("members", "members_ext"):
        opt = "--members" if case["kind"] == "members" else "--ext"
        cmd = base + [opt, case["v"]]
        names = [opt, "'%s" % case["v"][:40]] + [m[:40] for m in case["v"].split(",") if m][:50]
    else:
        C = os.path.join(d, "copy")
        shutil.copytree(S, C)
        mut = os.path.join(d, "mut")
        shutil.copytree(S, mut)
        with open(os.path.join(mut, "s0.tar"), "r+b") as f:
            f.seek(600)
            f.write(b"\x55")  # inside the first member's payload: not in size, headers or fingerprint
        short = os.path.join(d, "short")
        shutil.copytree(S, short)
        os.truncate(os.path.join(short, "s1.tar"), 1000)
        empty = os.path.join(d, "empty")
        os.makedirs(empty)
        fifo = os.path.join(d, "fifo")
        os.mkfifo(fifo)
        loop = os.path.join(d, "loop")
        os.symlink(loop, loop)
        sub = {"{S}": S, "{C}": C, "{G}": P["dir"], "{GC}": d, "{MUT}": mut, "{EMPTY}": empty, "{FIFO}": fifo,
               "{LOOP}": loop, "{SHORT}": short}
        if case["v"] == ["{G}={GC}"]:
            shutil.copytree(S, os.path.join(d, "shards"))
        cmd = list(base)
        for r in case["v"]:
            for k, v in sub.items():
                r = r.replace(k, v)
            cmd += ["--root", r]
            names += [r.split("=")[0], r.split("=")[-1], r[:30]]
        names += ["--root", "s0.tar", "s1.tar", "k000"]
    r = ctx.run(cmd)
    j = judge(r, names)
    if j:
        return j
    refmap = ctx.shared["good_ref"]
    if case["kind"] == "root" and any("{MUT}" in x for x in case["v"]):
        with open(os.path.join(d, "mut", "s0.tar"), "rb") as f:
            refmap = dict(refmap)
            refmap.update(refs.scan_tar(f.read()))
    bad = compare_stream(r.out, refmap, "latent.npy")
    if bad:
        return "wrong", bad
    return "ok", "streamed %d batches, matched" % len(r.out.splitlines())


# ---------------------------------------------------------------- fit inputs

def gen_fit(rng):
    kinds = ["csv"] * 90 + ["trace"] * 35 + ["json"] * 25
    for k in kinds:
        yield {"kind": k, "desc": "fit --%s hostile" % ("bench" if k != "trace" else "trace"), "p": rng.random()}


HOSTILE_NUM = ["nan", "NaN", "inf", "-inf", "-1", "0", "1e308", "1e-320", "", " ", "abc", "0x10", "1,5", "1e400",
               "18446744073709551616", "-0", "+5", "5 ", " 5", "\x00", "1.5.5", "9" * 400, "2e9", "4294967297"]


def _fit_file(rng, kind):
    rows = []
    for B in (1, 2, 4, 8, 16):
        for S in (2048, 4096, 8192, 16384, 32768):
            rows.append([str(B), str(S), "%.4f" % (0.5 + 2e-4 * B * S), str((1 << 30) + 1000 * B * S)])
    n_bad = rng.choice([0, 1, 1, 2, 5, len(rows)])
    for _ in range(n_bad):
        r = rng.randrange(len(rows))
        rows[r][rng.randrange(4)] = rng.choice(HOSTILE_NUM)
    if kind == "csv":
        hdr = rng.choice(["B,S,step_ms,peak_mem_bytes", "S,B,ms", "B,S", "B,S,step_ms,step_ms", "b,s,STEP_MS",
                          "B,S,step_ms,peak_mem_bytes,extra", "", "B;S;step_ms", "\ufeffB,S,step_ms", "B,,step_ms"])
        lines = [hdr] + [",".join(r) for r in rows[:rng.choice([0, 1, 2, 3, 25])]]
        if rng.random() < 0.2:
            lines.insert(rng.randrange(len(lines) + 1), rng.choice(["", "#c", ",,,", "1,2,3,4,5,6", "1", "\xff\xfe"]))
        if rng.random() < 0.1:
            lines = [hdr] + ["1,%d,1.0" % (4096 + i) for i in range(rng.choice([10000, 200000]))]
        if rng.random() < 0.05:
            lines = [hdr + "," * 100000]
        return "\r\n".join(lines) if rng.random() < 0.1 else "\n".join(lines)
    if kind == "trace":
        out = []
        for r in rows[:rng.choice([0, 1, 3, 25])]:
            o = {"B": r[0], "S": r[1], "ms": r[2]}
            o = {k: (float(v) if v.replace(".", "", 1).isdigit() else v) for k, v in o.items()}
            if rng.random() < 0.2:
                o = rng.choice([{"tokens": 4096, "ms": 1.0}, {"B": 1}, [], "x", {"B": 1, "S": 2, "ms": None},
                                {"B": 1e300, "S": 1e300, "ms": 1}, {"B": -1, "S": 4096, "ms": 1}, {"B": True, "S": 4096, "ms": 1}])
            out.append(json.dumps(o))
        if rng.random() < 0.2:
            out.append(rng.choice(["{", "not json", '{"B": 1, "S": 4096, "ms": 1}' * 2, "\x00", "{\"B\": 1e999}"]))
        return "\n".join(out)
    rs = [{"B": json.loads(r[0]) if r[0].isdigit() else r[0], "S": json.loads(r[1]) if r[1].isdigit() else r[1],
           "ms": float(r[2]) if r[2].replace(".", "", 1).isdigit() else r[2]} for r in rows]
    obj = rng.choice([{"rows": rs}, {"rows": []}, {"rows": "x"}, [], {"rows": rs[:2]}, {"rows": [1, 2]},
                      {"rows": rs, "device": "x" * 100000}, {"rows": [{"B": 1, "S": 4096}]}])
    return json.dumps(obj)


def exec_fit(ctx, case, d):
    rng = random.Random(case["seed"])
    f = os.path.join(d, "in.%s" % {"csv": "csv", "trace": "jsonl", "json": "json"}[case["kind"]])
    with open(f, "w", encoding="utf-8", errors="surrogateescape") as fh:
        fh.write(_fit_file(rng, case["kind"]))
    cost = os.path.join(d, "c.alc")
    cmd = ["fit", "--trace" if case["kind"] == "trace" else "--bench", f, "-o", cost, "--json"]
    if rng.random() < 0.3:
        cmd += ["--min-tokens", "1"]
    if rng.random() < 0.2:
        cmd += ["--mem-capacity", rng.choice(["1", "8e10", "1e300", "141e9"])]
    with open(f, "rb") as fh:
        rows = fh.read().count(b"\n")
    # fit is linear in the rows, ~0.14 ms each (cost/README.md section 1): 200,000 take ~30 s
    r = ctx.run(cmd, timeout=max(ctx.timeout, rows * 0.0006))
    j = judge(r, [f, os.path.basename(f), "line", "row", "capacity"])
    if j:
        return j
    try:
        o = json.loads(r.out)
    except Exception as e:
        return "wrong", "fit --json printed no JSON: %s" % e
    vals = list(o.get("fit", {}).get("params", {}).values())
    if any(v is None for v in vals):
        return "wrong", "fit accepted the input and wrote a model with non-finite parameters: %s" % o.get("fit")
    r = ctx.run(["plan", "--index", ctx.shared["P"]["index"], "--world", "1", "--cost", cost, "-o",
                 os.path.join(d, "p.alm")])
    j = judge(r, [cost, "cost", "c.alc"])
    return j or ("ok", "fit and planned with it")


# ---------------------------------------------------------------- plan --resume-from

def gen_resume(rng):
    at = ["0", "1", "2", "3", "5", "10", "11", "12", "100", "4294967295", "4294967296", "-1", "", "1e2",
          "18446744073709551615"]
    worlds = ["1", "2", "3", "4", "5", "7", "8", "16", "1048576", "1048577", "0"]
    for _ in range(130):
        c = {"kind": "replan", "at": rng.choice(at), "world": rng.choice(worlds), "desc": "re-plan"}
        if rng.random() < 0.35:
            c["st"] = rng.choice(["1", "1000", "30000", "120000", "1000000", "18446744073709551615", "0", "99999999999"])
        if rng.random() < 0.35:
            c["k"] = rng.choice(["1", "2", "3", "7", "64", "1048576", "4194304", "4194305", "0"])
        if rng.random() < 0.08:
            c["src"] = rng.choice(["index", "cost", "dir", "missing", "replanned"])
        c["desc"] = "--at-step %s --world %s%s%s%s" % (c["at"], c["world"], " --step-tokens " + c["st"] if "st" in c else "",
                                                        " --micro-per-step " + c["k"] if "k" in c else "",
                                                        " from " + c["src"] if "src" in c else "")
        yield c


def _real_samples(ctx, manifest):
    """(step -> [real sample positions]) of a manifest over all ranks, via inspect --jsonl
    (a plan of W x K = 2^22 micro-batches per step prints millions of lines: 120 s)."""
    r = ctx.run(["inspect", manifest, "--jsonl"], timeout=120)
    if r.rc != 0:
        return None, r
    steps = {}
    for line in r.out.splitlines():
        b = json.loads(line)
        pad = set(b.get("padded") or [])  # the slots (indices into samples) that are padding
        for i, s in enumerate(b["samples"]):
            if i not in pad:
                steps.setdefault(b["step"], []).append(s)
    return steps, r


def exec_resume(ctx, case, d):
    P = ctx.shared["P"]
    old = P["big_manifest"]
    src = case.get("src")
    if src == "replanned":
        mid = os.path.join(d, "mid.alm")
        r = ctx.run(["plan", "--resume-from", old, "--at-step", "2", "--world", "3", "-o", mid])
        if r.rc != 0:
            return "wrong", "setup re-plan failed: " + r.err[-200:]
        old = mid
    elif src:
        old = {"index": P["big_index"], "cost": P["cost"], "dir": d, "missing": os.path.join(d, "nope.alm")}[src]
    out = os.path.join(d, "new.alm")
    cmd = ["plan", "--resume-from", old, "--at-step", case["at"], "--world", case["world"], "-o", out]
    if "st" in case:
        cmd += ["--step-tokens", case["st"]]
    if "k" in case:
        cmd += ["--micro-per-step", case["k"]]
    r = ctx.run(cmd)
    names = [old, "--at-step", "--world", "--step-tokens", "--micro-per-step", "step", "world", "tokens",
             "micro", "at-step", "resume"]
    j = judge(r, names)
    if j:
        if j[0] == "ok" and os.path.exists(out):
            return "wrong", "refused, yet wrote %s" % out
        return j
    o, ro = _real_samples(ctx, old)
    n, rn = _real_samples(ctx, out)
    if o is None or n is None:
        return "wrong", "inspect of a re-plan failed: " + (ro.err if o is None else rn.err)[-200:]
    K = int(case["at"])
    before = [s for st, ss in o.items() if st < K for s in ss]
    want = sorted(s for ss in o.values() for s in ss)
    got = sorted(before + [s for ss in n.values() for s in ss])
    if n and min(n) != K and min(n) < K:
        return "wrong", "re-plan steps start at %d, before --at-step %d" % (min(n), K)
    if got != want:
        dup = len(got) - len(set(got))
        return "wrong", "re-plan at step %d: %d samples after it (+%d before) vs %d planned; %d repeated, %d missing" % (
            K, len(got) - len(before), len(before), len(want), dup, len(set(want) - set(got)))
    return "ok", "re-planned: every sample once (%d before step %d, %d after)" % (len(before), K, len(got) - len(before))


# ---------------------------------------------------------------- FIFOs, directories, devices as files

FILE_ARGS = [("index-shard", ["index", "-o", "{D}/o.alidx", "{X}"]),
             ("index-out", ["index", "-o", "{X}", "{SH}"]),
             ("index-dali", ["index", "-o", "{D}/o.alidx", "--dali-idx", "{X}", "{SH}"]),
             ("plan-index", ["plan", "--index", "{X}", "--world", "1", "-o", "{D}/o.alm"]),
             ("plan-cost", ["plan", "--index", "{I}", "--world", "1", "--cost", "{X}", "-o", "{D}/o.alm"]),
             ("plan-buckets", ["plan", "--index", "{I}", "--world", "1", "--buckets", "{X}", "-o", "{D}/o.alm"]),
             ("plan-out", ["plan", "--index", "{I}", "--world", "1", "-o", "{X}"]),
             ("plan-resume", ["plan", "--resume-from", "{X}", "--at-step", "1", "--world", "1", "-o", "{D}/o.alm"]),
             ("fit-bench", ["fit", "--bench", "{X}"]), ("fit-trace", ["fit", "--trace", "{X}"]),
             ("fit-out", ["fit", "--default", "-o", "{X}"]),
             ("inspect", ["inspect", "{X}"]), ("inspect-compare", ["inspect", "{M}", "--compare", "{X}"]),
             ("inspect-svg", ["inspect", "{M}", "--svg", "{X}"]),
             ("stream-index", ["stream", "--index", "{X}", "--manifest", "{M}"]),
             ("stream-manifest", ["stream", "--index", "{I}", "--manifest", "{X}"]),
             ("verify-index", ["verify", "{X}"]), ("verify-manifest", ["verify", "{I}", "{X}"]),
             ("verify-buckets", ["verify", "{I}", "--buckets", "{X}"]),
             ("synth-out", ["synth", "--out", "{X}", "--samples", "4"])]
FILE_KINDS = ["fifo", "dir", "devnull", "devzero", "symlink_fifo", "missing", "notdir", "empty", "loop", "dangling",
              "devfull"]


def gen_fifo(rng):
    for name, _ in FILE_ARGS:
        for k in FILE_KINDS:
            yield {"kind": k, "arg": name, "desc": "%s given %s" % (name, k)}


def exec_fifo(ctx, case, d):
    P = ctx.shared["P"]
    k = case["kind"]
    x = os.path.join(d, "thing")
    if k == "fifo":
        os.mkfifo(x)
    elif k == "dir":
        os.makedirs(x)
    elif k == "devnull":
        x = "/dev/null"
    elif k == "devzero":
        x = "/dev/zero"
    elif k == "devfull":
        x = "/dev/full"
    elif k == "symlink_fifo":
        os.mkfifo(x + ".f")
        os.symlink(x + ".f", x)
    elif k == "notdir":
        write(x + ".file", b"x")
        x = x + ".file/sub"
    elif k == "empty":
        write(x, b"")
    elif k == "loop":
        os.symlink(x, x)
    elif k == "dangling":
        os.symlink(os.path.join(d, "nowhere"), x)
    tmpl = dict(FILE_ARGS)[case["arg"]]
    sub = {"{D}": d, "{X}": x, "{SH}": P["shards"], "{I}": P["index"], "{M}": P["manifest"]}
    cmd = []
    for t in tmpl:
        for a, b in sub.items():
            t = t.replace(a, b)
        cmd.append(t)
    r = ctx.run(cmd, timeout=10)
    if k in ("dir", "fifo") and case["arg"] in ("index-dali", "synth-out") and k == "dir":
        pass
    j = judge(r, [x, os.path.basename(x), "thing"])
    if j:
        return j
    # exit 0: fine for a directory of shards / an output directory, and for writing over /dev/null
    if (case["arg"] == "index-shard" and k in ("dir", "empty")) or (case["arg"] in ("index-dali", "synth-out")
                                                                   and k in ("dir", "missing")):
        return "ok", "accepted (a folder or an empty shard)"
    if (case["arg"].endswith("-out") or case["arg"] == "inspect-svg") and k in ("missing", "dangling", "empty"):
        return "ok", "wrote a new file"
    return "wrong", "exit 0 with %s given %s (%s)" % (case["arg"], k, x)


# ---------------------------------------------------------------- extreme numbers on every option

NUM_OPTS = {
    "synth": ["--samples", "--shards", "--seed", "--threads"],
    "index": ["--threads", "--max-member-bytes", "--block-size", "--vae-stride"],
    "fit": ["--min-tokens", "--folds", "--mem-capacity", "--mem-safety"],
    "plan": ["--world", "--seed", "--epoch", "--mem-tokens", "--mem-capacity", "--mem-safety", "--comp-ms",
             "--micro-per-step", "--step-tokens", "--window", "--start-step", "--geometry"],
    "inspect": ["--top"],
    "stream": ["--rank", "--threads", "--prefetch", "--max-batches", "--max-sample-bytes", "--max-member-bytes",
               "--max-skip-fraction", "--compute-ms", "--device"],
    "verify": ["--show", "--top", "--threads"],
}
EXTREME = ["0", "1", "2", "-1", "-0", "4294967295", "4294967296", "9223372036854775807", "9223372036854775808",
           "18446744073709551615", "18446744073709551616", "99999999999999999999999", "1e308", "1e309", "nan",
           "inf", "-inf", "0.5", "1e-300", "", " 1", "1 ", "+1", "0x10", "010", "1e3", "1,2", "abc", "1048576",
           "1048577", "4194304", "4194305", "65535", "65536", "1000000", "1000001", "5e-324", "\xff"]
GEOM = ["4,8,1,2,2", "0,8,1,2,2", "4,0,1,2,2", "1,1,1,1,1", "4294967295,8,1,2,2", "4,8,1,2", "4,8,1,2,2,2",
        "4,8,-1,2,2", "a,b,c,d,e", "", "4,8,1,2,2,", "1000000,1000000,1000000,1000000,1000000", "4,8,1,2,3"]


def gen_extremes(rng):
    for verb, opts in NUM_OPTS.items():
        for o in opts:
            vals = GEOM if o == "--geometry" else (["4,8", "0,8", "4,0", "1,1", "4294967296,8", "4", "4,8,1", "-4,8",
                                                    "65536,65536"] if o == "--vae-stride" else EXTREME)
            n = len(vals) if o in ("--geometry", "--vae-stride") else 8
            for v in rng.sample(vals, min(n, len(vals))):
                yield {"kind": verb, "opt": o, "v": v, "desc": "%s %s %r" % (verb, o, v)}


def exec_extremes(ctx, case, d):
    P = ctx.shared["P"]
    verb, o, v = case["kind"], case["opt"], case["v"]
    base = {"synth": ["synth", "--out", os.path.join(d, "tiny", "c"), "--samples", "8", "--payload", "none"],
            "index": ["index", "-o", os.path.join(d, "o.alidx"), P["shards"]],
            "fit": ["fit", "--bench", P["bench"], "--json"],
            "plan": ["plan", "--index", P["big_index"], "--world", "2", "-o", os.path.join(d, "o.alm")],
            "inspect": ["inspect", P["big_manifest"]],
            "stream": ["stream", "--index", P["index"], "--manifest", P["manifest2"], "--rank", "0"],
            "verify": ["verify", P["index"], P["manifest"], "-q"]}[verb]
    if verb == "synth":
        import subprocess
        os.makedirs(os.path.join(d, "tiny"))
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", os.path.join(d, "tiny")])
    try:
        if o in base:
            i = base.index(o)
            cmd = base[:i] + [o, v] + base[i + 2:]
        else:
            cmd = base + [o, v]
        if o == "--mem-capacity" and verb == "plan" and v not in ("",):
            cmd = [c for c in cmd]
        long_job = False
        if o in ("--compute-ms",):
            cmd += ["--bench", "--max-batches", "2"]
            try:
                long_job = float(v) > 5000  # asked for: a busy-wait of v ms per batch
            except ValueError:
                pass
        r = ctx.run(cmd, timeout=3 if long_job else None)
        if long_job and r.timed_out:
            return "ok", "busy-waits %s ms per batch, as asked (stopped after 3 s)" % v
        names = [o, o.lstrip("-"), "capacity", o.lstrip("-").replace("-", "_"), o.lstrip("-").replace("-", " "), "tiny", "No space",
                 "rank", "world", "token", "sample", "bucket", "step", "memory", "GPU", "CUDA", "device"]
        j = judge(r, names)
        if j:
            return j
        return "ok", "accepted"
    finally:
        if verb == "synth":
            import subprocess
            subprocess.run(["umount", os.path.join(d, "tiny")], stderr=subprocess.DEVNULL)


SURFACES = [("stream_args", gen_stream_args, exec_stream_args), ("fit", gen_fit, exec_fit),
            ("plan_resume", gen_resume, exec_resume), ("fifo_dir", gen_fifo, exec_fifo),
            ("extremes", gen_extremes, exec_extremes)]
