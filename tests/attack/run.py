#!/usr/bin/env python3
"""The hostile-input attack on the adaptiveload CLI and Python package, as one reproducible run.

    bazel build --config=opt //:adaptiveload //dist:libadaptiveload.so
    python3 tests/attack/run.py --bin bazel-bin/adaptiveload --lib bazel-bin/dist/libadaptiveload.so \
        [--asan ASAN_BIN] [--seed 1] [--jobs 2] [--out /tmp/al_attack] [--only SURFACE,...] \
        [--per-surface N]

Generates the cases from the seed (the same seed, the same cases and files), runs each against the
binary (and, for the parsing surfaces, the ASan binary), classifies every outcome as crash, hang,
wrong, unclear or ok (tests/attack/README.md says how), prints a table per surface and writes every
case with its outcome to OUT/results.json; exits 1 when any case is not ok. Stdlib + numpy (+ torch
for the Python surface). //tests/attack:attack_short_test runs a fixed subset (--per-surface)."""

import argparse
import collections
import json
import os
import random
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases_cli  # noqa: E402
import cases_files  # noqa: E402
import cases_py  # noqa: E402
import cases_sp  # noqa: E402
from harness import CATS, Ctx  # noqa: E402

CASE_MODULES = (cases_files, cases_cli, cases_py, cases_sp)  # each: SURFACES, optionally setup()


def run_case(ctx, case):
    d = os.path.join(ctx.out, "cases", case["id"])
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    t0 = time.time()
    try:
        fn = SURFACES[case["surface"]][1]
        cat, why = fn(ctx, case, d)
    except Exception as ex:  # a harness defect must not pass for a result
        import traceback
        cat, why = "harness-error", "%s: %s" % (type(ex).__name__, traceback.format_exc()[-1500:])
    case = dict(case)
    case["outcome"], case["detail"], case["secs"] = cat, why, round(time.time() - t0, 3)
    if cat == "ok" and not ctx.keep:
        shutil.rmtree(d, ignore_errors=True)
    return case


SURFACES = collections.OrderedDict()
for mod in CASE_MODULES:
    for name, gen, ex in mod.SURFACES:
        SURFACES[name] = (gen, ex)


def generate(seed, only):
    cases = []
    for name, (gen, _) in SURFACES.items():
        if only and name not in only:
            continue
        rng = random.Random("%d/%s" % (seed, name))
        for i, c in enumerate(gen(rng)):
            c["surface"] = name
            c["id"] = "%s-%04d" % (name, i)
            c.setdefault("seed", rng.randrange(1 << 30))
            cases.append(c)
    return cases


def per_surface(cases, seed, n):
    """n cases of each surface, drawn by their own generator from the seed, in the order of the
    full run; each keeps its id, so `--ids` reruns one alone and the full run holds it too."""
    by = collections.OrderedDict()
    for c in cases:
        by.setdefault(c["surface"], []).append(c)
    keep = set()
    for name, cs in by.items():
        keep.update(c["id"] for c in random.Random("%d/subset/%s" % (seed, name)).sample(cs, min(n, len(cs))))
    return [c for c in cases if c["id"] in keep]


def mount_tiny(ctx):
    p = os.path.join(ctx.out, "tiny")
    os.makedirs(p, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", p], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if r.returncode == 0:
        ctx.tiny = p
        return "tmpfs of 64 KiB at %s" % p
    return "no tmpfs (%s): ulimit -f (RLIMIT_FSIZE, SIGXFSZ ignored) only" % r.stderr.decode().strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="bazel-bin/adaptiveload")
    ap.add_argument("--lib", default="bazel-bin/dist/libadaptiveload.so")
    ap.add_argument("--asan", default=None, help="an ASan/UBSan build of the CLI for the parsing surfaces")
    ap.add_argument("--python", default="third_party/venv/bin/python3",
                    help="interpreter with numpy and torch (default: the test environment, tools/bootstrap.sh)")
    ap.add_argument("--pythonpath", default=None, help="the adaptiveload package's folder (default: python/ here)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=20.0, help="per command, seconds (a hang past it)")
    ap.add_argument("--out", default="/tmp/al_attack")
    ap.add_argument("--only", default="", help="comma-separated surfaces")
    ap.add_argument("--ids", default="", help="comma-separated case ids (after --only)")
    ap.add_argument("--per-surface", type=int, default=0, metavar="N",
                    help="only N cases of each surface, drawn from the seed (the short test's subset)")
    ap.add_argument("--keep", action="store_true", help="keep the files of ok cases too")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    a = ap.parse_args()
    only = set(filter(None, a.only.split(",")))
    cases = generate(a.seed, only)
    if a.ids:
        want = set(a.ids.split(","))
        cases = [c for c in cases if c["id"] in want]
    if a.per_surface > 0:
        cases = per_surface(cases, a.seed, a.per_surface)
    if a.list:
        for c in cases:
            print(c["id"], c.get("kind", ""), c.get("desc", ""))
        return 0
    ctx = Ctx(a)
    os.makedirs(ctx.out, exist_ok=True)
    disk = mount_tiny(ctx)
    t0 = time.time()
    results = []
    try:
        for mod in CASE_MODULES:
            if hasattr(mod, "setup"):
                mod.setup(ctx, {c["surface"] for c in cases})
        with ThreadPoolExecutor(max_workers=a.jobs) as pool:
            for r in pool.map(lambda c: run_case(ctx, c), cases):
                results.append(r)
                if r["outcome"] != "ok":
                    print("%-8s %s %s: %s" % (r["outcome"], r["id"], r.get("desc", ""), r["detail"][:300]),
                          flush=True)
    finally:
        cases_py.stop_worker(ctx)
        if ctx.tiny:
            subprocess.run(["umount", ctx.tiny], stderr=subprocess.DEVNULL)
    wall = time.time() - t0
    table = collections.OrderedDict()
    for r in results:
        row = table.setdefault(r["surface"], collections.Counter())
        row[r["outcome"]] += 1
    cols = CATS + (("harness-error",) if any(r["outcome"] == "harness-error" for r in results) else ())
    print("\n%-16s %6s " % ("surface", "cases") + " ".join("%8s" % c for c in cols))
    tot = collections.Counter()
    for s, row in table.items():
        print("%-16s %6d " % (s, sum(row.values())) + " ".join("%8d" % row[c] for c in cols))
        tot.update(row)
    print("%-16s %6d " % ("total", sum(tot.values())) + " ".join("%8d" % tot[c] for c in cols))
    print("seed %d, %d cases in %.0f s, full disk: %s, asan: %s" % (a.seed, len(results), wall, disk,
                                                                   ctx.asan or "not given"))
    with open(os.path.join(ctx.out, "results.json"), "w") as f:
        json.dump({"seed": a.seed, "bin": ctx.bin, "asan": ctx.asan, "disk": disk, "wall_s": round(wall, 1),
                   "table": {s: dict(r) for s, r in table.items()}, "cases": results}, f, indent=1)
    print("every case: %s" % os.path.join(ctx.out, "results.json"))
    return 0 if all(tot[c] == 0 for c in cols if c != "ok") else 1


if __name__ == "__main__":
    sys.exit(main())
