"""Sequence parallelism under attack: hostile --sp-degrees / --sync / all-to-all link numbers and
buckets --fit options (sp_args), forged SP manifests and per-degree cost files (sp_forged),
re-plans of an SP plan (sp_resume), every rank of random SP plans streamed as token shards and
checked against the plan (sp_stream) and, on typed corpora, against a strict reader's latents
patchified by numpy (sp_bytes); the Python SP calls are cases of the python surface (cases_py.py)."""

import gzip
import json
import os

import numpy as np

import refs
from harness import judge
from cases_cli import EXTREME, GEOM
from cases_files import FORGE_KINDS, FORGE_WEIGHTS, compare_stream, forge, judge_forged, write

# ---------------------------------------------------------------- fixtures


def setup(ctx, surfaces):
    """An SP plan of the shared 3,000-sample metadata-only corpus (W = 4, K = 2, degrees 1,2,4 at
    M_mem 8,000, so clips over 8,000 tokens need a group) and a per-degree cost file fitted from
    the shipped SP shape benchmark."""
    if not surfaces & {"sp_args", "sp_forged", "sp_resume", "sp_stream", "python"}:
        return
    P = ctx.shared["P"]
    g = P["dir"]
    P["sp_manifest"] = os.path.join(g, "sp.alm")
    P["sp_manifest2"] = os.path.join(g, "sp2.alm")
    P["sp_cost"] = os.path.join(g, "sp.alc")
    P["sp_bench"] = os.path.join(ctx.repo, "cost", "data", "h200_shape_bench_sp.csv")
    must = [["fit", "--bench", P["sp_bench"], "-o", P["sp_cost"]],
            ["plan", "--index", P["big_index"], "--world", "4", "--micro-per-step", "2", "--mem-tokens", "8000",
             "--sp-degrees", "1,2,4", "--cost", P["sp_cost"], "-o", P["sp_manifest"]],
            ["plan", "--index", P["big_index"], "--world", "4", "--micro-per-step", "2", "--mem-tokens", "16000",
             "--sp-degrees", "1,2", "--cost", P["sp_cost"], "-o", P["sp_manifest2"]]]
    for c in must:
        r = ctx.run(c, timeout=120)
        if r.rc != 0:
            raise SystemExit("sp setup failed: %s: %s" % (" ".join(c), r.err))


def _pow2_divides(d, world):
    return d >= 1 and d & (d - 1) == 0 and world % d == 0


def _ref_degrees(v):
    """The degrees a strict reader takes from the text: plain decimal numbers separated by single
    commas, or None where the text is not such a list."""
    parts = v.split(",")
    if not v or any(not p.isdigit() or not p.isascii() for p in parts):
        return None
    return [int(p) for p in parts]


def _summary(ctx, manifest):
    r = ctx.run(["inspect", manifest, "--json"], timeout=60)
    if r.rc != 0:
        return None, r
    return json.loads(r.out), r


def _layout_error(lines, world):
    """What is wrong with the SP group layout of inspect --jsonl's lines, or None: every (step,
    micro) partitions the ranks into aligned groups of a power-of-two degree, and the ranks of one
    group hold the same samples with sp_rank = rank - first."""
    slots = {}
    for b in lines:
        slots.setdefault((b["step"], b["micro"]), {})[b["rank"]] = b
    for (st, mi), ranks in slots.items():
        if sorted(ranks) != list(range(world)):
            return "step %d micro %d: ranks %s, not 0..%d" % (st, mi, sorted(ranks)[:8], world - 1)
        for r, b in ranks.items():
            dg, sr = b.get("sp_degree", 1), b.get("sp_rank", 0)
            if not _pow2_divides(dg, world):
                return "step %d micro %d rank %d: sp_degree %d" % (st, mi, r, dg)
            first = r - sr
            if sr < 0 or sr >= dg or first % dg:
                return "step %d micro %d rank %d: sp_rank %d of degree %d is not aligned" % (st, mi, r, sr, dg)
            head = ranks[first]
            if head.get("sp_degree", 1) != dg or head["samples"] != b["samples"]:
                return "step %d micro %d: rank %d and its group's first rank %d differ" % (st, mi, r, first)
    return None


def _group_samples(lines):
    """(step -> [real sample positions]) counting each group once (its sp_rank 0)."""
    steps = {}
    for b in lines:
        if b.get("sp_rank", 0):
            continue
        pad = set(b.get("padded") or [])
        steps.setdefault(b["step"], []).extend(s for i, s in enumerate(b["samples"]) if i not in pad)
    return steps


def _jsonl(ctx, manifest):
    r = ctx.run(["inspect", manifest, "--jsonl"], timeout=120)
    if r.rc != 0:
        return None, r
    return [json.loads(x) for x in r.out.splitlines()], r


def _aligned_lines(ctx, manifest, world):
    """inspect --jsonl's lines of a plan and None, or None and what is wrong: inspect failed, or
    the group layout of some slot (_layout_error)."""
    lines, r = _jsonl(ctx, manifest)
    if lines is None:
        return None, "inspect --jsonl failed: " + r.err[-200:]
    bad = _layout_error(lines, world)
    return (None, "group layout: " + bad) if bad else (lines, None)


# ---------------------------------------------------------------- hostile SP options

SP_DEGREES = ["1", "2", "4", "8", "1,2", "1,2,4", "1,2,4,8", "4,2,1", "8,1", "3", "0", "-1", "1,,2", ",1", "1,",
              "2,2", "1 ,2", " 2", "2 ", "+2", "2.0", "1e1", "0x2", "02", "nan", "", "1;2", "1024", "2048",
              "4294967296", "4294967297", "18446744073709551616", "1,2,4,8,16,32,64,128,256,512,1024",
              "1,2,4,8,16,32,64,128,256,512,1024,2048", "\xff", "1,2,4,8,16"]
SYNC = ["step", "micro", "auto", "", "MICRO", "micro ", " step", "stepp", "1", "none", "micro,step"]
SP_OPT_EXTREME = {"fit": ["--sp-link-gbps", "--sp-a2a-bytes-per-token"],
                  "buckets": ["--max-sizes", "--mem-tokens", "--geometry"],
                  "inspect": ["--mem-tokens"]}


def gen_sp_args(rng):
    for _ in range(80):
        w = rng.choice(["1", "2", "3", "4", "6", "8", "16"])
        v = rng.choice(SP_DEGREES) if rng.random() < 0.6 else rng.choice(SP_DEGREES[:8])
        yield {"kind": "plan_degrees", "v": v, "world": w, "k": rng.choice(["1", "2", "3"]),
               "desc": "plan --sp-degrees at world %s" % w}
    for _ in range(24):
        yield {"kind": "plan_sync", "v": rng.choice(SYNC), "k": rng.choice(["1", "2"]),
               "sp": rng.choice(["", "1,2"]), "desc": "plan --sync"}
    for _ in range(16):
        yield {"kind": "inspect_degrees", "v": rng.choice(SP_DEGREES), "desc": "inspect INDEX --sp-degrees"}
    for verb, opts in SP_OPT_EXTREME.items():
        for o in opts:
            vals = GEOM if o == "--geometry" else EXTREME
            for v in rng.sample(vals, min(10, len(vals))):
                yield {"kind": verb, "opt": o, "v": v, "desc": "%s %s %r" % (verb, o, v)}
    for _ in range(12):
        yield {"kind": "stream_rank", "v": rng.choice(["0", "1", "2", "3", "4", "-1", "5", "4294967296", "", "1.0"]),
               "desc": "stream --sp-shard --rank"}


def exec_sp_args(ctx, case, d):
    P = ctx.shared["P"]
    k, v = case["kind"], case["v"]
    out = os.path.join(d, "o.alm")
    if k in ("plan_degrees", "plan_sync"):
        w = case.get("world", "4")
        cmd = ["plan", "--index", P["big_index"], "--world", w, "--micro-per-step", case["k"], "--mem-tokens", "8000",
               "--cost", P["sp_cost"], "-o", out]
        cmd += ["--sp-degrees", v] if k == "plan_degrees" else (["--sync", v] + (["--sp-degrees", case["sp"]]
                                                                               if case["sp"] else []))
        r = ctx.run(cmd)
        opt = "--sp-degrees" if k == "plan_degrees" else "--sync"
        j = judge(r, [opt, "world", "sp-degrees", "sync"])
        if j:
            if j[0] == "ok" and os.path.exists(out):
                return "wrong", "refused, yet wrote %s" % out
            return j
        s, rs = _summary(ctx, out)
        if s is None:
            return "wrong", "inspect of the plan failed: " + rs.err[-200:]
        if k == "plan_sync":
            if v not in ("step", "micro", "auto"):
                return "wrong", "--sync %r accepted (sync %s)" % (v, s.get("sync"))
            want = v if v != "auto" else ("micro" if case["k"] != "1" or case["sp"] else "step")
            got = s.get("sync", "step")  # a one-micro-batch plan without SP reports no sync model
            if got != want or (case["k"] != "1" and "bubble_micro" not in s):
                return "wrong", "--sync %s -> plan says sync %s (want %s), bubble_micro %s" % (
                    v, got, want, s.get("bubble_micro"))
            return "ok", "planned, sync %s" % got
        ref = _ref_degrees(v)
        got = s.get("sp_degrees", [1])  # a one-micro-batch plan of degree 1 reports none
        wn = int(w)
        if ref is None:
            return "wrong", "--sp-degrees %r accepted as %s" % (v, got)
        if len(set(ref)) != len(ref) or not all(_pow2_divides(x, wn) for x in ref):
            return "wrong", "--sp-degrees %r at world %d accepted as %s" % (v, wn, got)
        if got != sorted(ref):
            return "wrong", "--sp-degrees %r recorded as %s" % (v, got)
        lines, bad = _aligned_lines(ctx, out, wn)
        if bad:
            return "wrong", bad
        if any(b.get("sp_degree", 1) not in ref for b in lines):
            return "wrong", "a micro-batch at a degree not in %s" % ref
        return "ok", "planned at degrees %s, layout checked" % got
    if k == "inspect_degrees":
        r = ctx.run(["inspect", P["big_index"], "--sp-degrees", v, "--json"])
        j = judge(r, ["--sp-degrees", "sp-degrees"])
        if j:
            return j
        ref = _ref_degrees(v)
        if ref is None or len(set(ref)) != len(ref) or not all(x >= 1 and x & (x - 1) == 0 for x in ref):
            return "wrong", "inspect --sp-degrees %r accepted" % v
        return "ok", "accepted"
    if k == "stream_rank":
        r = ctx.run(["stream", "--index", P["big_index"], "--manifest", P["sp_manifest"], "--rank", v, "--sp-shard",
                     "--members", "json", "--jsonl", "--max-batches", "4"])
        j = judge(r, ["--rank", "rank", "world"])
        if j:
            return j
        if v not in ("0", "1", "2", "3"):
            return "wrong", "stream --rank %r accepted for a world of 4" % v
        return "ok", "streamed"
    # extremes of the numeric SP-related options
    o = case["opt"]
    if k == "fit":
        cost = os.path.join(d, "c.alc")
        r = ctx.run(["fit", "--bench", P["sp_bench"], o, v, "-o", cost])
        j = judge(r, [o, o.lstrip("-")])
        if j:
            return j
        rp = ctx.run(["plan", "--index", P["big_index"], "--world", "4", "--micro-per-step", "2", "--mem-tokens",
                      "8000", "--sp-degrees", "1,2,4", "--cost", cost, "-o", out])
        jp = judge(rp, [cost, "cost", os.path.basename(cost)])
        return jp or ("ok", "fitted %s %s and planned with it" % (o, v))
    if k == "buckets":
        table = os.path.join(d, "t.txt")
        cmd = ["buckets", "--fit", P["big_index"], "-o", table, "--quiet"]
        cmd += [o, v]
        r = ctx.run(cmd)
        j = judge(r, [o, o.lstrip("-"), o.lstrip("-").replace("-", " "), "M_mem", "geometry"])
        if j:
            if j[0] == "ok" and os.path.exists(table):
                return "wrong", "refused, yet wrote %s" % table
            return j
        mem = v if o == "--mem-tokens" else "65536"
        geo = ["--geometry", v] if o == "--geometry" else []
        rp = ctx.run(["plan", "--index", P["big_index"], "--world", "2", "--buckets", table, "--mem-tokens", mem,
                      "-o", out] + geo)
        jp = judge(rp, [table, "--mem-tokens", "mem-tokens", "M_mem", "bucket"])
        if jp and jp[0] != "ok":
            return jp[0], "the proposed table: " + jp[1]
        return "ok", "proposed a table%s" % (" that plans" if not jp else " (plan refused the cap: %s)" % jp[1][:80])
    if k == "inspect":
        r = ctx.run(["inspect", P["big_index"], o, v, "--sp-degrees", "1,2,4", "--json"])
        return judge(r, [o, o.lstrip("-")]) or ("ok", "accepted")
    raise RuntimeError("harness: unknown kind %s" % k)


# ---------------------------------------------------------------- forged SP manifests and cost files

SP_FORGE_TARGETS = ["sp_manifest", "sp_cost"]


def gen_sp_forged(rng):
    for _ in range(120):
        t = rng.choice(SP_FORGE_TARGETS + ["sp_manifest"])
        k = rng.choices(FORGE_KINDS, FORGE_WEIGHTS)[0]
        yield {"kind": k, "target": t, "desc": "%s %s" % (t, k), "p": rng.random(), "rank": rng.randrange(4)}


def exec_sp_forged(ctx, case, d):
    P = ctx.shared["P"]
    src = P[case["target"]]
    with open(src, "rb") as f:
        orig = f.read()
    others = [P[t] for t in ("sp_cost", "sp_manifest", "big_manifest", "cost") if P[t] != src]
    data = forge(case, orig, others)
    path = write(os.path.join(d, "forged" + os.path.splitext(src)[1]), data)
    if case["target"] == "sp_cost":
        cmds = [["plan", "--index", P["big_index"], "--world", "4", "--micro-per-step", "2", "--mem-tokens", "8000",
                 "--sp-degrees", "1,2,4", "--cost", path, "-o", path + ".m"]]
    else:
        cmds = [["inspect", path, "--jsonl"], ["inspect", path, "--json"],
                ["stream", "--index", P["big_index"], "--manifest", path, "--rank", str(case["rank"]), "--sp-shard",
                 "--members", "json", "--jsonl"],
                ["plan", "--resume-from", path, "--at-step", "3", "--world", "4", "-o", path + ".m"]]
    return judge_forged(ctx, case, src, path, data, orig, cmds)


# ---------------------------------------------------------------- re-plans of an SP plan


def gen_sp_resume(rng):
    """Re-plans of the two SP plans (degrees 1,2,4 and 1,2 at W = 4, K = 2): mostly worlds and
    steps a resized run asks for; a re-plan keeps the degrees and the sync model, so
    --sp-degrees and --sync, rarely given, must be refused."""
    for _ in range(80):
        c = {"kind": "sp_replan", "base": rng.choice(["sp_manifest", "sp_manifest2"]),
             "at": rng.choice(["0", "1", "3", "10", "100", "200", "450", "478", "479", "4294967296"]),
             "world": rng.choice(["2", "4", "4", "6", "8", "8", "1", "3", "16"]), "desc": "SP re-plan"}
        if rng.random() < 0.1:
            c["sp"] = rng.choice(["1", "1,2", "1,2,4", "2,4", "3", "1,,2"])
        if rng.random() < 0.3:
            c["k"] = rng.choice(["1", "2", "4"])
        if rng.random() < 0.1:
            c["sync"] = rng.choice(["step", "micro", "auto", "x"])
        c["desc"] = "%s --at-step %s --world %s%s%s%s" % (c["base"], c["at"], c["world"],
                                                        " --sp-degrees " + c["sp"] if "sp" in c else "",
                                                        " --micro-per-step " + c["k"] if "k" in c else "",
                                                        " --sync " + c["sync"] if "sync" in c else "")
        yield c


def exec_sp_resume(ctx, case, d):
    P = ctx.shared["P"]
    old = P[case["base"]]
    out = os.path.join(d, "new.alm")
    cmd = ["plan", "--resume-from", old, "--at-step", case["at"], "--world", case["world"], "-o", out]
    for key, opt in (("sp", "--sp-degrees"), ("k", "--micro-per-step"), ("sync", "--sync")):
        if key in case:
            cmd += [opt, case[key]]
    r = ctx.run(cmd)
    j = judge(r, [old, "--at-step", "--world", "--sp-degrees", "--micro-per-step", "--sync", "sp-degrees", "degree",
                  "world", "step", "resume"])
    if j:
        if j[0] == "ok" and os.path.exists(out):
            return "wrong", "refused, yet wrote %s" % out
        return j
    if "sync" in case or "sp" in case:
        return "wrong", "a re-plan took %s (it keeps the old plan's)" % case["desc"]
    o, ro = _jsonl(ctx, old)
    if o is None:
        return "wrong", "inspect of the old plan failed: " + ro.err[-200:]
    n, bad = _aligned_lines(ctx, out, int(case["world"]))
    if bad:
        return "wrong", "the re-plan: " + bad
    allowed = {b.get("sp_degree", 1) for b in o} | {1}
    off = sorted({b.get("sp_degree", 1) for b in n} - allowed)
    if off:
        return "wrong", "re-plan uses degrees %s, which the old plan does not" % off
    K = int(case["at"])
    og, ng = _group_samples(o), _group_samples(n)
    before = [s for st, ss in og.items() if st < K for s in ss]
    want = sorted(s for ss in og.values() for s in ss)
    got = sorted(before + [s for ss in ng.values() for s in ss])
    if ng and min(ng) < K:
        return "wrong", "re-plan steps start at %d, before --at-step %d" % (min(ng), K)
    if got != want:
        return "wrong", "re-plan at step %d: %d samples after it (+%d before) vs %d planned; %d repeated, %d missing" % (
            K, len(got) - len(before), len(before), len(want), len(got) - len(set(got)), len(set(want) - set(got)))
    return "ok", "re-planned: every sample once, layout aligned (%d before step %d)" % (len(before), K)


# ---------------------------------------------------------------- every rank's token shards against the plan


def gen_sp_stream(rng):
    for _ in range(24):
        w = rng.choice([2, 4, 8])
        degs = sorted({1} | set(rng.sample([x for x in (2, 4, 8) if x <= w], rng.randint(1, len([x for x in (2, 4, 8)
                                                                                                   if x <= w])))))
        yield {"kind": "sp_stream", "world": w, "k": rng.choice([1, 2, 3]), "degrees": degs,
               "mem": rng.choice([4000, 8000, 16000]), "plan_seed": rng.randrange(1000),
               "shard": rng.random() < 0.75, "desc": "W %d, degrees %s" % (w, degs)}


def _shard_error(b, keys, whole_tokens, skipped=()):
    """What is wrong with one delivered token shard, or None: rank j of a group of d holds the
    contiguous tokens [j N // d, (j + 1) N // d) of the N packed tokens of the plan (keys,
    whole_tokens); its keys are the samples those tokens belong to, less the skipped ones (a
    skipped sample leaves the range as planned and delivers no piece), and its cu_seqlens,
    token_first and sample_tokens describe exactly those pieces."""
    dg, j = b["sp_degree"], b["sp_rank"]
    n = sum(whole_tokens)
    lo, hi = j * n // dg, (j + 1) * n // dg
    if b["shard_token_range"] != [lo, hi]:
        return "shard %s, want [%d, %d) of %d tokens" % (b["shard_token_range"], lo, hi, n)
    starts = [0]
    for t in whole_tokens:
        starts.append(starts[-1] + t)
    held = [(i, max(lo, starts[i]), min(hi, starts[i + 1])) for i in range(len(whole_tokens))
            if min(hi, starts[i + 1]) > max(lo, starts[i]) and keys[i] not in skipped]
    cu = b["cu_seqlens"]
    if cu[0] != 0 or any(cu[i] > cu[i + 1] for i in range(len(cu) - 1)):
        return "cu_seqlens %s" % cu[:8]
    if b["keys"] != [keys[h[0]] for h in held]:
        return "keys %s, the shard's tokens belong to %s" % (b["keys"][:4], [keys[h[0]] for h in held][:4])
    if b["sample_tokens"] != [whole_tokens[h[0]] for h in held]:
        return "sample_tokens %s, plan says %s" % (b["sample_tokens"][:6], [whole_tokens[h[0]] for h in held][:6])
    if [h[2] - h[1] for h in held] != [cu[i + 1] - cu[i] for i in range(len(cu) - 1)]:
        return "cu_seqlens %s do not cut the samples' tokens at the shard's range [%d, %d)" % (cu[:8], lo, hi)
    if b["token_first"] != [h[1] - starts[h[0]] for h in held]:
        return "token_first %s, want %s" % (b["token_first"][:6], [h[1] - starts[h[0]] for h in held][:6])
    return None


def exec_sp_stream(ctx, case, d):
    P = ctx.shared["P"]
    w = case["world"]
    man = os.path.join(d, "p.alm")
    r = ctx.run(["plan", "--index", P["big_index"], "--world", str(w), "--micro-per-step", str(case["k"]),
                 "--mem-tokens", str(case["mem"]), "--sp-degrees", ",".join(map(str, case["degrees"])), "--seed",
                 str(case["plan_seed"]), "--cost", P["sp_cost"], "-o", man], timeout=60)
    j = judge(r, ["--sp-degrees", "world"])
    if j:
        return j if j[0] != "ok" else ("wrong", "a valid SP plan was refused: " + j[1])
    plan, bad = _aligned_lines(ctx, man, w)
    if bad:
        return "wrong", "the plan: " + bad
    want = {(b["step"], b["micro"], b["rank"]): b for b in plan}
    seen = set()
    for rank in range(w):
        cmd = ["stream", "--index", P["big_index"], "--manifest", man, "--rank", str(rank), "--members", "json",
               "--jsonl"] + (["--sp-shard"] if case["shard"] else [])
        rs = ctx.run(cmd, timeout=120)
        js = judge(rs, None)
        if js:
            return js if js[0] != "ok" else ("wrong", "rank %d refused a valid SP plan: %s" % (rank, js[1]))
        for line in rs.out.splitlines():
            b = json.loads(line)
            key = (b["step"], b["micro"], rank)
            p = want.get(key)
            if p is None:
                return "wrong", "rank %d delivered step %d micro %d, not in its plan" % (rank, b["step"], b["micro"])
            seen.add(key)
            sharded = case["shard"] and p["sp_degree"] > 1
            if (not sharded and b["keys"] != p["keys"]) or b["sp_degree"] != p["sp_degree"] or \
                    b["sp_rank"] != p["sp_rank"]:
                return "wrong", "rank %d step %d micro %d: keys/degree/sp_rank %s/%d/%d, plan %s/%d/%d" % (
                    rank, b["step"], b["micro"], b["keys"][:2], b["sp_degree"], b["sp_rank"], p["keys"][:2],
                    p["sp_degree"], p["sp_rank"])
            if b["sp_group_first"] != rank - p["sp_rank"]:
                return "wrong", "rank %d: sp_group_first %d" % (rank, b["sp_group_first"])
            if sharded:
                if not b["sp_sharded"]:
                    return "wrong", "rank %d step %d micro %d: --sp-shard gave the whole micro-batch" % (
                        rank, b["step"], b["micro"])
                e = _shard_error(b, p["keys"], p["tokens"])
                if e:
                    return "wrong", "rank %d step %d micro %d: %s" % (rank, b["step"], b["micro"], e)
            elif b["cu_seqlens"][-1] != sum(p["tokens"]) or b["sample_tokens"] != p["tokens"]:
                return "wrong", "rank %d step %d micro %d: %d tokens delivered, plan %d" % (
                    rank, b["step"], b["micro"], b["cu_seqlens"][-1], sum(p["tokens"]))
    missing = set(want) - seen
    if missing:
        return "wrong", "%d planned micro-batches never delivered (first %s)" % (len(missing), sorted(missing)[0])
    return "ok", "%d micro-batches on %d ranks match the plan" % (len(seen), w)


# ---------------------------------------------------------------- the bytes of every token shard


def gen_sp_bytes(rng):
    for _ in range(12):
        w = rng.choice([2, 4, 8])
        degs = sorted({1} | set(rng.sample([x for x in (2, 4, 8) if x <= w], 1)))
        store = rng.choice(["tar", "tar", "lz4", "gz"])
        yield {"kind": "sp_bytes", "world": w, "k": rng.choice([1, 2]), "degrees": degs,
               "mem": rng.choice([600, 1200, 2400]), "n": rng.randint(12, 40), "corpus_seed": rng.randrange(1 << 20),
               "store": store, "damage": store != "gz" and rng.random() < 0.5,
               "desc": "typed corpus (%s), W %d, degrees %s" % (store, w, degs)}


def _typed_shards(d, seed, n, store):
    """Two shards of n samples: 256 x 256 px, images and 17-65-frame clips, float16 latents
    (16, T, 32, 32) of random values, float32 t5 embeddings; and the strict reader's members.
    store: tar (the latent's frames read by pread), lz4 (KEY.latent.npy.lz4 frames) or gz
    (.tar.gz shards), the last two read whole and sliced."""
    rng = np.random.default_rng(seed)
    mem = [[], []]
    for i in range(n):
        k = "k%04d" % i
        f = int(rng.choice([1, 1, 17, 33, 49, 65]))
        lat = rng.standard_normal((16, 1 + (f - 1) // 4, 32, 32)).astype(np.float16)
        t5 = rng.standard_normal((int(rng.integers(2, 9)), 8)).astype(np.float32)
        latent = (k + ".latent.npy.lz4", refs.lz4_frame(refs.npy_bytes(lat))) if store == "lz4" else \
            (k + ".latent.npy", refs.npy_bytes(lat))
        mem[i % 2] += [(k + ".json", json.dumps({"width": 256, "height": 256, "frames": f}).encode()), latent,
                       (k + ".t5.npy", refs.npy_bytes(t5))]
    paths, refmap = [], {}
    for j in range(2):
        data, _ = refs.write_tar(mem[j])
        if store == "gz":
            paths.append(write(os.path.join(d, "s%d.tar.gz" % j), gzip.compress(data, mtime=0)))
        else:
            paths.append(write(os.path.join(d, "s%d.tar" % j), data))
        for name, cands in refs.scan_tar(data).items():
            refmap.setdefault(name, []).extend(cands)
    return paths, refmap


def _piece_error(b, whole, refmap):
    """What is wrong with the latent pieces and t5 members of one token shard b, or None: each
    piece is rows [token_first, token_first + n) of the patchified crop (patch 1 x 2 x 2) of the
    sample's latent as a strict reader gives it, at the crop the group's whole micro-batch
    (whole, the same micro-batch streamed without --sp-shard) delivered; t5 whole."""
    lat, t5 = b["members"]["latent.npy"], b["members"]["t5.npy"]
    wl, wt = whole["members"]["latent.npy"], whole["members"]["t5.npy"]
    cu = b["cu_seqlens"]
    for i, key in enumerate(b["keys"]):
        j = whole["keys"].index(key)
        n = cu[i + 1] - cu[i]
        name = key + ".latent.npy" if key + ".latent.npy" in refmap else key + ".latent.npy.lz4"
        ref = refs.typed_ref(name, refmap[name][0])
        crop = refs.crop_array(ref[3], wl["shapes"][j])
        rows = refs.patchify(crop, 1, 2, 2)[b["token_first"][i]:b["token_first"][i] + n]
        if lat["shapes"][i] != list(rows.shape) or lat["crc32"][i] != refs.crc(rows.tobytes()):
            return "sample %s piece of %d tokens from %d: shape %s crc %s, the reference %s %s" % (
                key, n, b["token_first"][i], lat["shapes"][i], lat["crc32"][i], list(rows.shape),
                refs.crc(rows.tobytes()))
        if t5["crc32"][i] != wt["crc32"][j] or t5["shapes"][i] != wt["shapes"][j]:
            return "sample %s: its t5 member in the shard differs from the whole micro-batch's" % key
    return None


def _damage_one_latent(shard, key):
    """Changes the dtype in the .npy header of key's latent in the shard file, in place (the
    same size), as a shard changed after indexing would: every reader of the sample must fail
    it the same way."""
    with open(shard, "r+b") as f:
        data = f.read()
        at = data.find(b"'<f2'", data.find((key + ".latent.npy").encode()))
        f.seek(at)
        f.write(b"'<i2'")


def exec_sp_bytes(ctx, case, d):
    w = case["world"]
    shards, refmap = _typed_shards(d, case["corpus_seed"], case["n"], case["store"])
    idx, man = os.path.join(d, "i.alidx"), os.path.join(d, "p.alm")
    for c in (["index", "-o", idx] + shards,
              ["plan", "--index", idx, "--world", str(w), "--micro-per-step", str(case["k"]), "--mem-tokens",
               str(case["mem"]), "--sp-degrees", ",".join(map(str, case["degrees"])), "-o", man]):
        j = judge(ctx.run(c, timeout=60), None)
        if j:
            return j if j[0] != "ok" else ("wrong", "%s of a valid corpus refused: %s" % (c[0], j[1]))
    plan, bad = _aligned_lines(ctx, man, w)
    if bad:
        return "wrong", "the plan: " + bad
    planned = {(b["step"], b["micro"], b["rank"]): b for b in plan}
    bad_key = None
    if case["damage"]:  # a sample of a degree > 1 group, if any, else any sample
        grouped = [b["keys"][0] for b in plan if b.get("sp_degree", 1) > 1] or [plan[0]["keys"][0]]
        bad_key = grouped[case["corpus_seed"] % len(grouped)]
        bad_shard = shards[int(bad_key[1:]) % 2]
        _damage_one_latent(bad_shard, bad_key)
    skip = ["--on-error", "skip", "--max-skip-fraction", "1"] if bad_key else []
    pieces = 0
    for rank in range(w):
        outs = []
        for shard in (False, True):
            cmd = ["stream", "--index", idx, "--manifest", man, "--rank", str(rank), "--members",
                   "latent.npy,t5.npy", "--jsonl"] + (["--sp-shard"] if shard else []) + skip
            r = ctx.run(cmd, timeout=120, asan=shard and rank == 0 and ctx.asan is not None)
            j = judge(r, None)
            if j:
                return j if j[0] != "ok" else ("wrong", "rank %d refused a valid SP plan: %s" % (rank, j[1]))
            if bad_key and bad_key in r.err and not all(x in r.err for x in (bad_shard, bad_key + ".latent.npy",
                                                                              "at byte")):
                return "unclear", "the skip of %s names no file, member or offset: %s" % (bad_key, r.err[-300:])
            outs.append(r.out)
        bad = compare_stream(outs[0], refmap, "latent.npy")  # the whole micro-batches, crop included
        if bad:
            return "wrong", "rank %d, whole micro-batches: %s" % (rank, bad)
        whole = {(b["step"], b["micro"]): b for b in map(json.loads, outs[0].splitlines())}
        for b in map(json.loads, outs[1].splitlines()):
            wb, p = whole.get((b["step"], b["micro"])), planned[(b["step"], b["micro"], rank)]
            if wb is None:
                return "wrong", "rank %d: step %d micro %d sharded but not whole" % (rank, b["step"], b["micro"])
            held = set(b["skipped"]) | set(b["keys"])
            if bad_key in p["keys"] and bad_key in held and (bad_key not in b["skipped"] or
                                                             bad_key not in wb["skipped"]):
                return "wrong", "rank %d step %d micro %d: the damaged %s is not skipped (shard %s, whole %s)" % (
                    rank, b["step"], b["micro"], bad_key, b["skipped"], wb["skipped"])
            e = _shard_error(b, p["keys"], p["tokens"], set(b["skipped"])) or _piece_error(b, wb, refmap)
            if e:
                return "wrong", "rank %d step %d micro %d (degree %d): %s" % (rank, b["step"], b["micro"],
                                                                            b["sp_degree"], e)
            pieces += len(b["keys"])
        if len(whole) != len(outs[1].splitlines()):
            return "wrong", "rank %d: %d whole micro-batches, %d sharded" % (rank, len(whole),
                                                                           len(outs[1].splitlines()))
    return "ok", "%d latent pieces on %d ranks equal the reference's rows%s" % (
        pieces, w, "; %s skipped on every rank that holds it" % bad_key if bad_key else "")


SURFACES = [("sp_args", gen_sp_args, exec_sp_args), ("sp_forged", gen_sp_forged, exec_sp_forged),
            ("sp_resume", gen_sp_resume, exec_sp_resume), ("sp_stream", gen_sp_stream, exec_sp_stream),
            ("sp_bytes", gen_sp_bytes, exec_sp_bytes)]
