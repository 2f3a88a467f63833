"""The SP replay's bucket table, and the planner's bucket rule called from libadaptiveload.so
for the policy written here (dev/e2e/dcp_policy.py).

The table (written for `plan --buckets` too, so every arm buckets alike): the corpus's own
sizes (dev/e2e/sp_corpus.py: 480p and 720p, landscape, portrait, square) and frame counts
up to 281 (71 latent frames: a 720p clip of 255,600 tokens).

Rule (SP_SPEC.md, planner/README.md section 2): the library's al_bucket_assign (through
ctypes, as sp_corpus.py writes the index) with the per-sample cap d_max x M_mem, the cap
`plan --sp-degrees` buckets with: here a sample's size is its own (the table holds every
corpus size); its frame count is the largest table count <= its frames whose tokens fit the
cap (a sample cut because even d_max cannot hold it is counted); a sample no bucket takes is
left out (counted). A bucket's degree (degree_for): the smallest allowed d with
S <= d M_mem, the planner's degree rule, which the library exports no call for.
"""

import ctypes

import sp_corpus

FRAMES = (1, 17, 33, 49, 65, 81, 97, 121, 161, 201, 241, 281)
ASPECTS = (("16:9", ((832, 480), (1280, 720))), ("9:16", ((480, 832), (720, 1280))),
           ("1:1", ((480, 480), (720, 720))))
GEOMETRY = (4, 8, 1, 2, 2)  # Wan 2.1: VAE strides 4 x 8 x 8, patch 1 x 2 x 2 (sp_model.tokens)


def table_text():
    """The table in `plan --buckets` text form."""
    lines = ["# SP replay buckets (dev/e2e/sp_buckets.py): the corpus's sizes, frames up to 281",
             "frames " + " ".join(str(f) for f in FRAMES)]
    for name, sizes in ASPECTS:
        lines.append("aspect %s %s" % (name, " ".join("%dx%d" % s for s in sizes)))
    return "\n".join(lines) + "\n"


def degree_for(S, mem_tokens, degrees):
    """Smallest allowed degree holding S tokens per sample, or None."""
    for d in sorted(degrees):
        if S <= d * mem_tokens:
            return d
    return None


class _Geom(ctypes.Structure):  # planner/al_buckets.h al_latent_geom
    _fields_ = [(n, ctypes.c_uint32) for n in ("vae_stride_t", "vae_stride_s", "patch_t", "patch_h", "patch_w")]


class _Shape(ctypes.Structure):  # planner/al_buckets.h al_bucket_shape: sized, the library fills struct_size bytes
    _fields_ = [("struct_size", ctypes.c_size_t), ("width", ctypes.c_uint32), ("height", ctypes.c_uint32),
                ("frames", ctypes.c_uint32), ("aspect", ctypes.c_char_p)]

    def __init__(self):
        super().__init__()
        self.struct_size = ctypes.sizeof(_Shape)


def _table(lib_path):
    """(the library, the table of table_text() parsed by it, a function (w, h, f, cap) -> the
    bucket's (w, h, frames) or None)."""
    lib = ctypes.CDLL(sp_corpus.find_lib(lib_path))
    lib.al_bucket_table_parse.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_size_t,
                                          ctypes.c_char_p]
    lib.al_bucket_table_get.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(_Shape)]
    lib.al_bucket_table_free.argtypes = [ctypes.c_void_p]
    lib.al_bucket_assign.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Geom), ctypes.c_uint64, ctypes.c_uint32,
                                     ctypes.c_uint32, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint32),
                                     ctypes.POINTER(ctypes.c_int)]
    lib.al_last_error.restype = ctypes.c_char_p
    lib.al_plan_constant.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64)]
    lib.al_plan_struct_size.restype = ctypes.c_size_t
    which = ctypes.c_int64()
    if (lib.al_plan_constant(b"AL_PLAN_STRUCT_BUCKET_SHAPE", ctypes.byref(which))
            or lib.al_plan_struct_size(int(which.value)) != ctypes.sizeof(_Shape)):
        raise SystemExit("sp_buckets.py: al_bucket_shape of the library is not _Shape's %d bytes: library and "
                         "script are from different versions" % ctypes.sizeof(_Shape))
    t = ctypes.c_void_p()
    text = table_text().encode()
    if lib.al_bucket_table_parse(ctypes.byref(t), text, len(text), b"sp_buckets.py"):
        raise SystemExit("al_bucket_table_parse: %s" % lib.al_last_error().decode())
    geom, bucket, reason, shape, memo = _Geom(*GEOMETRY), ctypes.c_uint32(), ctypes.c_int(), _Shape(), {}

    def put(w, h, f, cap):
        k = (w, h, f, cap)
        if k not in memo:
            if lib.al_bucket_assign(t, ctypes.byref(geom), cap, w, h, f, ctypes.byref(bucket), ctypes.byref(reason)):
                memo[k] = None
            else:
                lib.al_bucket_table_get(t, bucket.value, ctypes.byref(shape))
                memo[k] = (shape.width, shape.height, shape.frames)
        return memo[k]

    return lib, t, put


def assign(shapes, mem_tokens, degrees, lib=None):
    """(buckets, stats): buckets = {(w, h, frames): [sample index, ...]} in index order, each
    bucket's S = sp_model.tokens(w, h, frames), as the library buckets each sample at the cap
    d_max x M_mem; stats counts the samples cut by the cap (a smaller frame count than without
    it) and those left out. lib: libadaptiveload.so (default: sp_corpus.find_lib's)."""
    cap = max(degrees) * mem_tokens
    so, table, put = _table(lib)
    out, cut, left_out = {}, 0, 0
    try:
        for i, (w, h, f, _) in enumerate(shapes):
            key = put(w, h, f, cap)
            if key is None:
                left_out += 1
                continue
            if key != put(w, h, f, 0):
                cut += 1  # longer than d_max x M_mem: fewer frames than the table allows
            out.setdefault(key, []).append(i)
    finally:
        so.al_bucket_table_free(table)
    return out, {"cut_by_cap": cut, "left_out": left_out, "cap_tokens": cap}
