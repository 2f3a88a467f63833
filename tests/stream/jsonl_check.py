"""Checks what `adaptiveload stream --jsonl` runs delivered against a reference run.

    python3 jsonl_check.py [--partial] [--skipped N] REFERENCE RUN [RUN ...]

REFERENCE is the --jsonl of the same stream from local disk. The RUNs together (a run and the
runs that resumed it, in any order) must deliver each of REFERENCE's batches exactly once:
no position twice, none missing (with --partial: missing ones allowed, as after an error),
none REFERENCE lacks. A batch with nothing skipped equals REFERENCE's batch field for field
(keys in order, CRC-32 of every member of every sample, shapes, sequence lengths). A batch
with skipped samples holds REFERENCE's keys less the skipped ones, in order, with the same
CRCs, and lists each skipped key; --skipped N: N samples were skipped in all (default 0).
A trailing line without its newline (a run killed while printing) is not a delivered batch.
Prints "delivered B batches, S samples, K skipped" and exits 0, or names the first mismatch
and exits 1.
"""

import json
import sys


def batches(path):
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    out = [json.loads(line) for line in lines[:-1] if line]  # the last piece has no newline
    for b in out:
        b.pop("cost", None)  # the batch's stall and fetches: the run's, not what was delivered
    return out


def samples(b):
    """key -> {member: (crc, shape)} of a batch."""
    out = {}
    for i, k in enumerate(b["keys"]):
        out[k] = {m: (v["crc32"][i], v["shapes"][i]) for m, v in b["members"].items()}
    return out


def check_skipped(ref, got, where):
    skipped = got["skipped"]
    kept = [k for k in ref["keys"] if k not in skipped]
    if got["keys"] != kept or not set(skipped) <= set(ref["keys"]):
        return "%s: keys %s skipped %s, the reference has %s" % (
            where, got["keys"], skipped, ref["keys"])
    want, have = samples(ref), samples(got)
    for k in kept:
        if have[k] != want[k]:
            return "%s: sample %s delivered %s, the reference %s" % (where, k, have[k], want[k])
    return None


def main(argv):
    partial = "--partial" in argv
    argv = [a for a in argv if a != "--partial"]
    want_skipped = 0
    if "--skipped" in argv:
        i = argv.index("--skipped")
        want_skipped = int(argv[i + 1])
        del argv[i:i + 2]
    if len(argv) < 2:
        sys.exit(__doc__)
    ref = {b["position"]: b for b in batches(argv[0])}
    seen = {}
    n_samples = n_skipped = 0
    for path in argv[1:]:
        for b in batches(path):
            where = "%s: position %d" % (path, b["position"])
            if b["position"] in seen:
                return "%s delivered twice (also in %s)" % (where, seen[b["position"]])
            seen[b["position"]] = path
            r = ref.get(b["position"])
            if r is None:
                return "%s: no such batch in %s" % (where, argv[0])
            if b["skipped"]:
                err = check_skipped(r, b, where)
                if err:
                    return err
            elif b != r:
                for k in sorted(set(b) | set(r)):
                    if b.get(k) != r.get(k):
                        return "%s: %s is %s, the reference's %s" % (where, k, b.get(k), r.get(k))
            n_samples += len(b["keys"])
            n_skipped += len(b["skipped"])
    missing = sorted(set(ref) - set(seen))
    if missing and not partial:
        return "%d of %d batches never delivered (positions %s...)" % (
            len(missing), len(ref), missing[:8])
    if n_skipped != want_skipped:
        return "%d samples skipped, expected %d" % (n_skipped, want_skipped)
    print("delivered %d batches, %d samples, %d skipped" % (len(seen), n_samples, n_skipped))
    return None


if __name__ == "__main__":
    err = main(sys.argv[1:])
    if err:
        sys.exit("jsonl_check: " + err)
