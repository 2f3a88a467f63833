"""The library's rules asked of the library: Python checks only that a value is of a type C can
take without wrapping, then hands it to the C check the CLI and the planner use and raises its
message. Internal."""

import ctypes

from . import _lib
from ._args import U32_MAX, whole


def sp_degrees(name, value, world):
    """``value`` (a list of sequence-parallel degrees, plan --sp-degrees) as a list of ints, in
    its order, after al_plan_check_sp_degrees (distinct powers of two in 1..1024, at most
    AL_PLAN_MAX_SP_DEGREES, each dividing ``world``; 0: not checked). TypeError for what is not
    a list of integers, ValueError with the library's message, which names ``name``."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise TypeError("%s must be a list of powers of two, e.g. [1, 2, 4, 8], not %r" % (name, value))
    out = []
    for k, d in enumerate(value):
        if isinstance(d, bool):
            raise TypeError("%s[%d] must be an integer, not %r" % (name, k, d))
        out.append(whole("%s[%d]" % (name, k), d, 0, U32_MAX))
    arr = (ctypes.c_uint32 * max(len(out), 1))(*out)
    cdll = _lib.require("al_plan_check_sp_degrees", "the sequence-parallel degree check")
    if cdll.al_plan_check_sp_degrees(_lib.encode_text(name, "name"), arr, len(out), world):
        raise ValueError(_lib.last_error())
    return out
