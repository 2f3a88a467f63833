"""Validation of numbers a Python caller passes to the C library: the same ranges as the CLI's
option table, checked before a value reaches a ctypes field (ctypes stores an out-of-range
integer modulo 2^bits without a word, so -1 would become 2^32-1). Internal."""

import math
import os
import operator

U32_MAX = (1 << 32) - 1
U64_MAX = (1 << 64) - 1


def whole(name, value, lo=0, hi=U64_MAX):
    """``value`` as an int in [lo, hi]; TypeError when it is not an integer (2.5, "3"), ValueError
    naming ``name`` and the range when it is outside."""
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError("%s must be an integer, not %r" % (name, value)) from None
    if v < lo or v > hi:
        raise ValueError("%s must be in %d..%d, not %d" % (name, lo, hi, v))
    return v


def whole_or_default(name, value, lo=0, hi=U64_MAX):
    """0 (the library's default) for None, else :func:`whole`: an empty list or dict is refused,
    not read as 0."""
    return 0 if value is None else whole(name, value, lo, hi)


def no_nul(name, value):
    """``value`` (str or bytes) unchanged; ValueError naming ``name`` when it holds a NUL: C reads
    a string only up to its first NUL, so ``"L.idx\\0junk"`` would open ``L.idx``."""
    if ("\0" if isinstance(value, str) else b"\0") in value:
        raise ValueError("%s must not contain a NUL byte (C would read it only up to the NUL): %r" % (name, value))
    return value


def path_arg(name, value):
    """``value`` as a path string (os.fspath); TypeError naming ``name`` when it is not one,
    ValueError when it holds a NUL byte."""
    try:
        path = os.fspath(value)
    except TypeError:
        raise TypeError("%s must be a path (str, bytes or os.PathLike), not %r" % (name, value)) from None
    return no_nul(name, path)


def text_arg(name, value):
    """``value`` as a str for the C library (a member name, an extension); TypeError naming
    ``name`` when it is not a str, ValueError when it holds a NUL."""
    if not isinstance(value, str):
        raise TypeError("%s must be a str, not %r" % (name, value))
    return no_nul(name, value)


def finite(name, value, lo=0.0, hi=math.inf):
    """``value`` as a finite float in [lo, hi]; ValueError naming ``name`` otherwise (TypeError
    when it is not a number at all)."""
    try:
        if isinstance(value, (bytes, bytearray)):
            raise TypeError(value)
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError("%s must be a number, not %r" % (name, value)) from None
    if not math.isfinite(v) or v < lo or v > hi:
        if hi == math.inf:
            raise ValueError("%s must be a finite number >= %g, not %r" % (name, lo, value))
        raise ValueError("%s must be a number in [%g, %g], not %r" % (name, lo, hi, value))
    return v


SYNC = {"auto": 0, "step": 1, "micro": 2}  # al_sync


def sync_model(value):
    """``value`` ("step" | "micro" | "auto", plan --sync) as its al_sync number."""
    if not isinstance(value, str) or value not in SYNC:
        raise ValueError("sync must be 'step', 'micro' or 'auto', not %r" % (value,))
    return SYNC[value]
