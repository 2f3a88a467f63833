#!/usr/bin/env python3
"""The hostile-input attack on the adaptiveload CLI and Python package, as one reproducible run.

    bazel build --config=opt //:adaptiveload //dist:libadaptiveload.so
    python3 dev/attack/run.py --bin bazel-bin/adaptiveload --lib bazel-bin/dist/libadaptiveload.so \
        [--asan ASAN_BIN] [--seed 1] [--jobs 2] [--out /tmp/al_attack] [--only SURFACE,...]

Generates the cases from the seed (the same seed, the same cases and files), runs each against the
binary (and, for the parsing surfaces, the ASan binary), classifies every outcome as crash, hang,
wrong, unclear or ok (dev/attack/README.md says how), prints a table per surface and writes every
case with its outcome to OUT/results.json. Stdlib + numpy (+ torch for the Python surface)."""

import argparse
import collections
import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases_cli  # noqa: E402
import cases_files  # noqa: E402
import cases_py  # noqa: E402
import cases_sp  # noqa: E402

CATS = ("crash", "hang", "wrong", "unclear", "ok")
CASE_MODULES = (cases_files, cases_cli, cases_py, cases_sp)  # each: SURFACES, optionally setup()


class Res:
    def __init__(self, args, rc, out, err, timed_out, secs):
        self.args, self.rc, self.out, self.err, self.timed_out, self.secs = args, rc, out, err, timed_out, secs

    @property
    def text(self):
        return self.err + self.out

    def sanitizer(self):
        t = self.err
        return ("ERROR: AddressSanitizer" in t or "runtime error:" in t or "ERROR: LeakSanitizer" in t
                or "UndefinedBehaviorSanitizer" in t)


class Ctx:
    def __init__(self, a):
        self.bin = os.path.abspath(a.bin)
        self.asan = os.path.abspath(a.asan) if a.asan else None
        self.lib = os.path.abspath(a.lib) if a.lib else None
        self.out = os.path.abspath(a.out)
        self.timeout = a.timeout
        self.keep = a.keep
        self.python = a.python
        self.pythonpath = a.pythonpath
        self.repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.tiny = None  # a small tmpfs for the full-disk cases, when it can be mounted
        self.py_lock = threading.Lock()
        self.py_worker = None
        self.shared = {}

    def run(self, args, timeout=None, cwd=None, env=None, stdout=None, preexec=None, asan=False, input=None):
        """Runs the CLI (args[0] is a verb) or a command list starting with '/'; captures all."""
        exe = self.asan if asan else self.bin
        cmd = list(args) if str(args[0]).startswith("/") else [exe] + [str(x) for x in args]
        e = dict(os.environ)
        e.pop("RANK", None)
        e.pop("WORLD_SIZE", None)
        e["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=0:exitcode=86"
        e["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1:exitcode=86"
        if env:
            e.update(env)
        t0 = time.time()
        so = stdout if stdout is not None else subprocess.PIPE
        try:
            p = subprocess.Popen(cmd, stdout=so, stderr=subprocess.PIPE, stdin=subprocess.PIPE if input else
                                 subprocess.DEVNULL, cwd=cwd, env=e, preexec_fn=preexec, start_new_session=True)
        except OSError as ex:
            return Res(cmd, 127, "", "harness: cannot start: %s" % ex, False, 0.0)
        try:
            out, err = p.communicate(input=input, timeout=timeout or self.timeout)
            to = False
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            to = True
        dec = (lambda b: b.decode("utf-8", "replace") if isinstance(b, bytes) else (b or ""))
        return Res(cmd, p.returncode, dec(out), dec(err), to, time.time() - t0)


def judge(res, names, allow_ok=True, own_kill=False):
    """The outcome of one command: a category and a reason, or None when it exited 0 (the caller
    then checks the output). names: substrings one of which a failure message must hold."""
    if res.timed_out:
        return "hang", "past %.0f s: %s" % (res.secs, " ".join(map(str, res.args[1:]))[:300])
    if res.sanitizer():
        return "crash", "sanitizer: " + _snip(res.err)
    if res.rc < 0 and not own_kill:
        return "crash", "signal %d: %s" % (-res.rc, _snip(res.err))
    if res.rc in (86,):
        return "crash", "sanitizer exit: " + _snip(res.err)
    if res.rc == 0:
        return None
    msg = res.err.strip() or res.out.strip()
    if not msg:
        return "unclear", "exit %d with no message" % res.rc
    if names and not any(n and str(n) in res.text for n in names):
        return "unclear", "exit %d, message names none of %s: %s" % (res.rc, [str(n)[-60:] for n in names][:4],
                                                                      _snip(msg))
    return "ok", "refused (exit %d): %s" % (res.rc, _snip(msg, 160))


def _snip(s, n=400):
    s = s.strip().replace("\n", " | ")
    return s if len(s) <= n else s[:n] + "..."


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
    ap.add_argument("--keep", action="store_true", help="keep the files of ok cases too")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    a = ap.parse_args()
    only = set(filter(None, a.only.split(",")))
    cases = generate(a.seed, only)
    if a.ids:
        want = set(a.ids.split(","))
        cases = [c for c in cases if c["id"] in want]
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
