"""What the attack's case modules and run.py share: the outcome categories, a command's result
(Res), the run's context (Ctx: the binaries, the output folder, the per-command timeout, the
files every case of a surface reads) and the judgement of one command (judge). It imports no
other module of the suite: the case modules import it, run.py imports them."""

import os
import signal
import subprocess
import threading
import time

CATS = ("crash", "hang", "wrong", "unclear", "ok")


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
