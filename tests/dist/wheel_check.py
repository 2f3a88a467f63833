"""The installed wheel's package, run by tests/dist/wheel_test.sh with the virtual
environment's python from a folder outside the checkout:

    python wheel_check.py VENV INDEX CLI_PLAN STREAM_JSONL OUT_DIR

Checks that `adaptiveload` is imported from VENV and loads the wheel's
adaptiveload/lib/libadaptiveload.so; that adaptiveload.plan writes the same bytes as
`adaptiveload plan` (CLI_PLAN, made with --world 2 --seed 1 --mem-tokens 20000); and, when
torch imports, that StreamDataset gives rank 0 the batches STREAM_JSONL
(`adaptiveload stream --jsonl --max-batches K`) lists: the same steps, keys, token
boundaries and payload CRC-32s. Prints one "ok:" line per check; exits 1 on a failure.
"""

import json
import os
import sys
import zlib


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def loaded_libraries(name):
    """Paths of the mapped shared objects called NAME, from /proc/self/maps."""
    paths = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split(None, 5)[-1].strip()
            if os.path.basename(path) == name:
                paths.add(path)
    return paths


def main():
    venv, index, cli_plan, jsonl, out_dir = sys.argv[1:]
    import adaptiveload

    pkg = os.path.dirname(os.path.realpath(adaptiveload.__file__))
    if not pkg.startswith(os.path.realpath(venv) + os.sep):
        fail("adaptiveload imported from %s, not from the virtual environment %s" % (pkg, venv))
    print("ok: adaptiveload imported from %s" % pkg)

    out = os.path.join(out_dir, "py.alm")
    m = adaptiveload.plan(index, 2, seed=1, mem_tokens=20000, out=out)
    want = os.path.join(pkg, "lib", "libadaptiveload.so")
    got = loaded_libraries("libadaptiveload.so") | loaded_libraries("libal_kernels.so")
    if got != {want}:
        fail("the library loaded is %s, not the wheel's %s" % (sorted(got) or "none", want))
    print("ok: loaded the wheel's %s" % want)
    with open(cli_plan, "rb") as a, open(m.path, "rb") as b:
        if a.read() != b.read():
            fail("adaptiveload.plan wrote %s, which differs from the CLI's %s" % (m.path, cli_plan))
    print("ok: adaptiveload.plan is byte-identical to `adaptiveload plan`")

    import torch  # noqa: F401  (the test environment's, through a .pth file)
    lines = [json.loads(line) for line in open(jsonl)]
    if len(lines) < 2:
        fail("%s lists %d batches; the check needs at least 2" % (jsonl, len(lines)))
    ds = adaptiveload.StreamDataset(index, m.path, rank=0, world_size=2)
    batches = []
    for b in ds:
        batches.append(b)
        if len(batches) == len(lines):
            break
    if len(batches) != len(lines):
        fail("StreamDataset gave %d batches, the CLI %d" % (len(batches), len(lines)))
    for i, (line, b) in enumerate(zip(lines, batches)):
        got = (b.step, b.micro, list(b.keys), b.cu_seqlens.tolist())
        ref = (line["step"], line["micro"], line["keys"], line["cu_seqlens"])
        if got != ref:
            fail("batch %d: StreamDataset gave (step, micro, keys, cu_seqlens) %s, the CLI %s" % (i, got, ref))
        crcs = ["%08x" % zlib.crc32(bytes(b.sample(k).numpy())) for k in range(len(b.keys))]
        if crcs != line["members"]["latent"]["crc32"]:
            fail("batch %d: payload CRC-32s %s, the CLI %s" % (i, crcs, line["members"]["latent"]["crc32"]))
    n = sum(len(line["keys"]) for line in lines)
    print("ok: StreamDataset read %d batches (%d samples) equal to `adaptiveload stream --jsonl`" % (len(lines), n))


if __name__ == "__main__":
    main()
