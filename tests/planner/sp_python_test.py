"""adaptiveload.plan(..., sp_degrees=[...], sync=...): the manifest the CLI writes with
--sp-degrees / --sync, byte for byte, and the options validated as the CLI validates them."""

import os
import subprocess
import sys
import tempfile

import adaptiveload

BIN = os.environ["ADAPTIVELOAD_BIN"]


def main():
    tmp = tempfile.mkdtemp(prefix="sp_python_")
    corpus, index = os.path.join(tmp, "c"), os.path.join(tmp, "i.alidx")
    subprocess.run([BIN, "synth", "--out", corpus, "--samples", "600", "--payload", "none", "--seed", "2"],
                   check=True, capture_output=True)
    subprocess.run([BIN, "index", "-o", index, corpus], check=True, capture_output=True)

    out = os.path.join(tmp, "py.alm")
    m = adaptiveload.plan(index, world=8, seed=1, out=out, mem_tokens=16384, micro_per_step=2,
                          sp_degrees=[1, 2, 4, 8], sync="micro")
    info = m.info
    assert info["sync"] == "micro", info["sync"]
    assert list(info["sp_degrees"])[: info["n_sp_degrees"]] == [1, 2, 4, 8], list(info["sp_degrees"])
    assert info["sp_max_degree"] == 8, info["sp_max_degree"]
    assert 0 <= info["bubble_step"] <= info["bubble_micro"] + 1e-12 < 1, (info["bubble_step"], info["bubble_micro"])
    cli = os.path.join(tmp, "cli.alm")
    subprocess.run([BIN, "plan", "--index", index, "--world", "8", "--seed", "1", "--mem-tokens", "16384",
                    "--micro-per-step", "2", "--sp-degrees", "1,2,4,8", "--sync", "micro", "-o", cli],
                   check=True, capture_output=True)
    assert open(out, "rb").read() == open(cli, "rb").read(), "Python and CLI SP manifests differ"

    # Elastic resume from the SP manifest: the degrees and the sync model are kept, also for
    # the epochs planned fresh; a world they do not divide is refused.
    r = adaptiveload.Planner.resume(out, at_step=3, world=16, index=index, out_dir=tmp)
    ri = adaptiveload.Manifest(r.path(0)).info
    assert ri["world"] == 16 and ri["first_step"] == 3 and ri["sync"] == "micro", ri
    assert list(ri["sp_degrees"])[: ri["n_sp_degrees"]] == [1, 2, 4, 8]
    fi = adaptiveload.Manifest(r.path(1)).info
    assert fi["world"] == 16 and fi["sync"] == "micro" and fi["first_step"] == 0, fi
    try:
        adaptiveload.Planner.resume(out, at_step=3, world=4, index=index, out_dir=tmp)
    except ValueError as e:  # the new world's Planner checks its options first, as the CLI does
        assert "sp_degrees: 8 does not divide the world size 4" in str(e), str(e)
    else:
        raise AssertionError("resumed at world 4 with degree 8")

    # K = 1: the default and D = {1} with the step model spelt out are the same bytes; K > 1:
    # the default is the micro model.
    a = adaptiveload.plan(index, world=4, out=os.path.join(tmp, "a.alm"))
    b = adaptiveload.plan(index, world=4, out=os.path.join(tmp, "b.alm"), sp_degrees=[1], sync="step")
    assert open(a.path, "rb").read() == open(b.path, "rb").read()
    assert a.info["sync"] == "step"
    a = adaptiveload.plan(index, world=4, out=os.path.join(tmp, "a.alm"), micro_per_step=2)
    b = adaptiveload.plan(index, world=4, out=os.path.join(tmp, "b.alm"), micro_per_step=2, sp_degrees=[1],
                          sync="micro")
    assert open(a.path, "rb").read() == open(b.path, "rb").read()
    assert a.info["sync"] == "micro"

    bad = [
        (dict(sp_degrees=[3]), ValueError, "sp_degrees: 3 is not a power of two in 1..1024"),
        (dict(sp_degrees=[1, 16]), ValueError, "sp_degrees: 16 does not divide the world size 8"),
        (dict(sp_degrees=[2, 2]), ValueError, "sp_degrees: 2 is listed twice"),
        (dict(sp_degrees=[0]), ValueError, "sp_degrees: 0 is not a power of two in 1..1024"),
        (dict(sp_degrees=[-1]), ValueError, "sp_degrees[0] must be in 0..4294967295"),
        (dict(sp_degrees=[2 ** 32 + 2]), ValueError, "sp_degrees[0] must be in 0..4294967295"),
        (dict(sp_degrees=[2048]), ValueError, "sp_degrees: 2048 is not a power of two in 1..1024"),
        (dict(sp_degrees=[2.0]), TypeError, "sp_degrees[0] must be an integer"),
        (dict(sp_degrees=[1, True]), TypeError, "sp_degrees[1] must be an integer, not True"),
        (dict(sp_degrees="1,2"), TypeError, "sp_degrees must be a list"),
        (dict(sp_degrees=[1] * 12), ValueError, "sp_degrees: 12 degrees, at most 11"),
        (dict(sync="sometimes"), ValueError, "sync must be 'step', 'micro' or 'auto'"),
        (dict(sync=2), ValueError, "sync must be 'step', 'micro' or 'auto'"),
    ]
    for kw, exc, says in bad:
        try:
            adaptiveload.plan(index, world=8, out=os.path.join(tmp, "bad.alm"), **kw)
        except exc as e:
            assert says in str(e), (kw, str(e))
        else:
            raise AssertionError("planned with %r" % (kw,))
        assert not os.path.exists(os.path.join(tmp, "bad.alm")), kw
    print("PASS")


if __name__ == "__main__":
    sys.exit(main())
