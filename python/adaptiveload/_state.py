"""Checks of resume-state dicts (StreamDataset and BatchSampler) before any value is used:
the version, every field present and a whole number in its range; ValueError naming the
field otherwise. Internal."""

import operator

from . import _constants as C

U32_MAX = (1 << 32) - 1
U64_MAX = (1 << 64) - 1
END = U32_MAX  # next_step / next_micro of a state at the end of the rank's micro-batches


def version():
    """The version of the states: the C stream's (AL_STREAM_STATE_VERSION), which BatchSampler's
    states share."""
    return C.AL_STREAM_STATE_VERSION


def check_state(owner, state, fields):
    """``state`` as a dict of ints: ``fields`` maps each required key to its largest value.
    ValueError for a state that is not a dict, of another version (version 1 names no
    manifest), lacking a key, or with a value that is not a whole number in range."""
    if not isinstance(state, dict):
        raise ValueError("%s state must be a dict (a state_dict() or batch.resume_state), not %s"
                         % (owner, type(state).__name__))
    got, want = state.get("version"), version()
    if got == 1:
        raise ValueError("%s state version 1 names no manifest and no step (written before states carried "
                         "them), so it cannot be told apart from a state of another plan of the same index; "
                         "start the epoch without a state" % owner)
    if got != want or type(got) is not int:  # 2.0 and True equal 2 and 1, yet are no version
        raise ValueError("%s state version %r unsupported (expected %d)" % (owner, got, want))
    missing = [k for k in fields if k not in state]
    if missing:
        raise ValueError("%s state lacks %s" % (owner, ", ".join(repr(k) for k in missing)))
    out = dict(state)
    for k, hi in fields.items():
        out[k] = field(owner, k, state[k], hi)
    return out


def field(owner, key, value, hi):
    """One state value as an int in [0, hi]; ValueError naming ``key`` otherwise."""
    if isinstance(value, bool):
        raise ValueError("%s state[%r] must be a whole number, not %r" % (owner, key, value))
    try:
        v = operator.index(value)
    except TypeError:
        raise ValueError("%s state[%r] must be a whole number, not %r" % (owner, key, value)) from None
    if not 0 <= v <= hi:
        raise ValueError("%s state[%r] must be in 0..%d, not %d" % (owner, key, hi, v))
    return v


def manifest_mismatch(owner, state_fp, path, fp):
    """The ValueError for a state of another manifest, naming both fingerprints."""
    return ValueError("%s state belongs to manifest %016x, but %s is manifest %016x (another plan of the same "
                      "index, e.g. a re-plan with --resume-from): a state resumes only the manifest it was "
                      "taken from" % (owner, state_fp, path, fp))
