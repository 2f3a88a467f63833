"""The C library's structs and constants as ctypes mirrors (internal).

Every struct here has an entry in :data:`MIRRORS`: the size query of its module and the
struct's id there (the id enums of kernels/al_adaln.h, planner/al_plan.h, loader/al_index.h
and stream/al_stream.h). :func:`adaptiveload._lib.load_library` compares each
``ctypes.sizeof`` with what the loaded library reports and refuses a library whose layout
differs. A new mirror gets an entry in MIRRORS, or the library's size query gets an id first.

Sized structs (docs/DESIGN.md, "The ABI of the public structs") start with ``size_t
struct_size``: their mirrors derive from :class:`_Sized`, which holds that first field (so a
mirror's own ``_fields_`` list the struct's other fields) and sets it to ``ctypes.sizeof`` of
the mirror on construction, as C callers do with the ``AL_*_INIT`` macros.

Constants are the library's, never copied here: :data:`CONSTANTS` names every one the package
uses (the struct ids of MIRRORS among them), :func:`adaptiveload._lib.load_library` reads them
through the library's constant queries (al_status_constant, al_adaln_constant,
al_index_constant, al_plan_constant, al_stream_constant), and adaptiveload._constants answers
them as attributes (``_constants.AL_STREAM_MAX_DIMS``). The array lengths in the layouts are
layout, fixed when a class is made: each one a library constant sizes in C is listed in
:data:`LENGTHS` and checked against that constant at load time, as the struct sizes are.
"""

import ctypes

c_int, c_uint, c_float, c_double = ctypes.c_int, ctypes.c_uint, ctypes.c_float, ctypes.c_double
c_int32, c_uint8, c_uint32, c_int64, c_uint64 = (ctypes.c_int32, ctypes.c_uint8, ctypes.c_uint32, ctypes.c_int64,
                                                 ctypes.c_uint64)
c_size_t, c_void_p, c_char_p = ctypes.c_size_t, ctypes.c_void_p, ctypes.c_char_p
_P = ctypes.POINTER


class _Sized(ctypes.Structure):
    """Base of the sized structs' mirrors: the leading ``struct_size``, set from
    ``ctypes.sizeof`` of the mirror (the library reads and writes only that many bytes)."""

    _fields_ = [("struct_size", c_size_t)]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.struct_size = ctypes.sizeof(type(self))


class TensorHeader(_Sized):
    """al_tensor_header (loader/al_members.h)."""

    _fields_ = [
        ("dtype", ctypes.c_char * 16),  # AL_TENSOR_DTYPE_MAX (LENGTHS)
        ("ndim", c_uint32),
        ("shape", c_uint64 * 8),  # AL_INDEX_MAX_DIMS (LENGTHS)
        ("data_offset", c_uint64),
        ("data_bytes", c_uint64),
    ]


class AdalnDesc(_Sized):
    """al_adaln_desc (kernels/al_adaln.h)."""

    _fields_ = [
        ("dtype", c_int),
        ("batch", c_int32),
        ("dim", c_int32),
        ("rows", c_int64),
        ("seq_len", c_int64),
        ("cu_seqlens", c_void_p),
        ("cu_seqlens_host", c_void_p),
    ]


class AdalnOptions(_Sized):
    """al_adaln_options (zero = default). ``tuning`` points to a struct al_adaln_tuning
    (kernels/al_adaln_tuning.h: kernel knobs, unstable, not mirrored here); None = the
    library's choice."""

    _fields_ = [
        ("eps", c_float),
        ("flags", c_uint),
        ("tuning", c_void_p),
    ]


class IndexOptions(_Sized):
    """al_index_options (loader/al_index.h); zero means the default."""

    _fields_ = [
        ("threads", c_int),
        ("strict", c_int),
        ("progress", c_int),
        ("block_size", c_size_t),
        ("dali_idx_dir", c_char_p),
        ("field_width", c_char_p),
        ("field_height", c_char_p),
        ("field_frames", c_char_p),
        ("field_fps", c_char_p),
        ("field_duration", c_char_p),
        ("max_member_bytes", c_uint64),
        ("vae_stride_t", c_uint32),
        ("vae_stride_s", c_uint32),
        ("s3_endpoint", c_char_p),
        ("remote_timeout_s", c_double),
        ("shard_io", c_void_p),
        ("s3_region", c_char_p),
        ("s3_addressing", c_int),
    ]


class StorageOptions(ctypes.Structure):
    """al_storage_options (loader/al_index.h)."""

    _fields_ = [
        ("s3_endpoint", c_char_p),
        ("s3_region", c_char_p),
        ("s3_addressing", c_int),
        ("remote_timeout_s", c_double),
    ]


class IndexStats(_Sized):
    """al_index_stats (loader/al_index.h)."""

    _fields_ = [
        ("shards", c_uint64),
        ("samples", c_uint64),
        ("rejected", c_uint64),
        ("bytes", c_uint64),
        ("seconds", c_double),
        ("bytes_read", c_uint64),
        ("warnings", c_uint64),
        ("remote_shards", c_uint64),
        ("remote_requests", c_uint64),
        ("remote_bytes", c_uint64),
    ]


class ShardIo(ctypes.Structure):
    """al_shard_io (loader/al_index.h)."""

    _fields_ = [("requests", c_uint64), ("bytes", c_uint64)]


class ShardInfo(_Sized):
    """al_shard_info (loader/al_index.h)."""

    _fields_ = [
        ("path", c_char_p),
        ("size", c_uint64),
        ("mtime_ns", c_int64),
        ("sample_count", c_uint64),
        ("rejected_count", c_uint64),
        ("seekable", c_int),
        ("compression", c_char_p),
        ("content_fp", c_uint64),
        ("remote", c_int),
        ("etag", c_char_p),
    ]


class MemberInfo(ctypes.Structure):
    """al_member_info (loader/al_index.h)."""

    _fields_ = [("ext", c_char_p), ("offset", c_uint64), ("size", c_uint64), ("lz4", c_int)]


class MemberType(_Sized):
    """al_member_type (loader/al_index.h)."""

    _fields_ = [
        ("dtype", c_char_p),
        ("elem_size", c_size_t),
        ("ndim", c_uint32),
        ("shape", c_uint64 * 8),  # AL_INDEX_MAX_DIMS (LENGTHS)
        ("data_offset", c_uint64),
        ("data_bytes", c_uint64),
    ]


class SampleInfo(_Sized):
    """al_sample_info (loader/al_index.h)."""

    _fields_ = [
        ("key", c_char_p),
        ("shard", c_uint32),
        ("width", c_uint32),
        ("height", c_uint32),
        ("frames", c_uint32),
        ("fps", c_float),
        ("n_members", c_uint32),
    ]


class PlanOptions(_Sized):
    """al_plan_options (planner/al_plan.h)."""

    _fields_ = [
        ("policy", c_int),
        ("world", c_uint32),
        ("seed", c_uint64),
        ("epoch", c_uint32),
        ("mem_tokens", c_uint64),
        ("comp_budget_ms", c_double),
        ("step_cost_ms", c_double),
        ("window", c_uint32),
        ("last_step", c_int),
        ("geom", c_uint32 * 5),
        ("buckets", c_void_p),
        ("start_step", c_uint32),
        ("micro_per_step", c_uint32),
        ("step_tokens", c_uint64),
        ("require_members", _P(c_char_p)),
        ("n_require_members", c_size_t),
        ("sp_degrees", _P(c_uint32)),
        ("n_sp_degrees", c_size_t),
        ("sync", c_int),
    ]


class ReplanOptions(_Sized):
    """al_replan_options (planner/al_plan.h)."""

    _fields_ = [
        ("world", c_uint32),
        ("micro_per_step", c_uint32),
        ("step_tokens", c_uint64),
    ]


class ManifestInfo(_Sized):
    """al_manifest_info (planner/al_plan.h)."""

    _fields_ = [
        ("policy", c_char_p),
        ("world", c_uint32),
        ("seed", c_uint64),
        ("epoch", c_uint32),
        ("first_step", c_uint32),
        ("steps", c_uint32),
        ("samples", c_uint64),
        ("dropped", c_uint64),
        ("padded", c_uint64),
        ("tokens", c_uint64),
        ("index_fingerprint", c_uint64),
        ("buckets", c_size_t),
        ("imbalance_cv", c_double),
        ("bubble", c_double),
        ("predicted_seconds", c_double),
        ("predicted_tokens_per_s", c_double),
        ("last_step", c_char_p),
        ("mem_tokens", c_uint64),
        ("comp_budget_ms", c_double),
        ("step_cost_ms", c_double),
        ("window", c_uint32),
        ("index_samples", c_uint64),
        ("rejected", c_uint64),
        ("micro_batches", c_uint64),
        ("cost_family", c_char_p),
        ("micro_per_step", c_uint32),
        ("step_tokens", c_uint64),
        ("micro_tokens", c_uint64),
        ("unequal_steps", c_uint32),
        ("step_tokens_mean", c_double),
        ("step_tokens_cv", c_double),
        ("step_samples_mean", c_double),
        ("step_samples_cv", c_double),
        ("step_time_cv", c_double),
        ("sync", c_char_p),
        ("n_sp_degrees", c_uint32),
        ("sp_degrees", c_uint32 * 11),  # AL_PLAN_MAX_SP_DEGREES (LENGTHS)
        ("sp_max_degree", c_uint32),
        ("bubble_step", c_double),
        ("bubble_micro", c_double),
        ("only_rank", c_uint32),  # R + 1: a rank's slice (plan --rank R); 0: every rank's
        ("own_keys", ctypes.c_int),  # a slice: its key table lists its own samples alone
    ]


class StreamState(_Sized):
    """al_stream_state (stream/al_stream.h)."""

    _fields_ = [
        ("version", c_uint32),
        ("rank", c_uint32),
        ("world", c_uint32),
        ("epoch", c_uint32),
        ("seed", c_uint64),
        ("index_fingerprint", c_uint64),
        ("position", c_uint64),
        ("stride", c_uint32),
        ("next_step", c_uint32),
        ("next_micro", c_uint32),
        ("reserved", c_uint32),
        ("skipped", c_uint64),
        ("delivered", c_uint64),
        ("manifest_fingerprint", c_uint64),
    ]


class StreamOptions(_Sized):
    """al_stream_options (stream/al_stream.h)."""

    _fields_ = [
        ("threads", c_int),
        ("prefetch", c_int),
        ("ext", c_char_p),
        ("on_error", c_int),
        ("world", c_int),
        ("first", c_uint64),
        ("stride", c_uint32),
        ("resume", _P(StreamState)),
        ("pinned", c_int),
        ("device_copy", c_int),
        ("cuda_device", c_int),
        ("align", c_size_t),
        ("read_block", c_size_t),
        ("members", _P(c_char_p)),
        ("n_members", c_size_t),
        ("max_member_bytes", c_uint64),
        ("max_sample_bytes", c_uint64),
        ("max_skip_fraction", c_double),
        ("sp_shard", c_int),
        ("cache_dir", c_char_p),
        ("cache_bytes", c_uint64),
        ("fetch_parallel", c_int),
        ("remote_timeout_s", c_double),
        ("s3_endpoint", c_char_p),
        ("s3_region", c_char_p),
        ("s3_addressing", c_int),
        ("plan_ahead", c_int),
    ]


class RunInfo(_Sized):
    """al_run_info (planner/al_run.h)."""

    _fields_ = [
        ("steps", c_uint32),
        ("window", c_uint32),
        ("world_ref", c_uint32),
        ("micro_ref", c_uint32),
        ("step_tokens", c_uint64),
        ("pass_tokens", c_uint64),
        ("pass_samples", c_uint64),
        ("capacity", c_uint64),
        ("index_samples", c_uint64),
        ("index_fingerprint", c_uint64),
        ("fingerprint", c_uint64),
        ("seed", c_uint64),
        ("epoch", c_uint32),
        ("reserved", c_uint32),
        ("sources", c_uint32),
        ("reserved2", c_uint32),
        ("draw_ids", c_uint64),
    ]


class RunSourceInfo(_Sized):
    """al_run_source_info (planner/al_run.h): a mixture's source."""

    _fields_ = [
        ("name", ctypes.c_char * 64),
        ("weight", ctypes.c_double),
        ("on_exhaust", ctypes.c_int),
        ("passes", c_uint32),
        ("samples", c_uint64),
        ("pass_samples", c_uint64),
        ("pass_tokens", c_uint64),
        ("draw_base", c_uint64),
        ("drawn", c_uint64),
        ("drawn_tokens", c_uint64),
        ("drawn_ms", ctypes.c_double),
        ("index_fingerprint", c_uint64),
        ("stop_step", c_uint32),
        ("reserved", c_uint32),
    ]


class StreamMember(ctypes.Structure):
    """al_stream_member (stream/al_stream.h): reached through StreamBatch.members."""

    _fields_ = [
        ("name", c_char_p),
        ("dtype", c_char_p),
        ("itemsize", c_size_t),
        ("typed", c_int),
        ("cropped", c_int),
        ("ndim", _P(c_uint32)),
        ("shapes", _P(c_uint64)),
        ("offsets", _P(c_uint64)),
        ("sizes", _P(c_uint64)),
    ]


class StreamBatch(_Sized):
    """al_stream_batch (stream/al_stream.h)."""

    _fields_ = [
        ("position", c_uint64),
        ("step", c_uint32),
        ("micro", c_uint32),
        ("n_micro", c_uint32),
        ("last_in_step", c_int),
        ("bucket", c_uint32),
        ("reserved", c_uint32),
        ("step_samples", c_uint64),
        ("step_tokens", c_uint64),
        ("tokens", c_uint64),
        ("n", c_size_t),
        ("keys", _P(c_char_p)),
        ("samples", _P(c_uint64)),
        ("shapes", _P(c_uint32)),
        ("padded", _P(c_uint8)),
        ("cu_seqlens", _P(c_int32)),
        ("offsets", _P(c_uint64)),
        ("sizes", _P(c_uint64)),
        ("data", c_void_p),
        ("data_bytes", c_size_t),
        ("cu_seqlens_offset", c_size_t),
        ("copy_bytes", c_size_t),
        ("pinned", c_int),
        ("device_data", c_void_p),
        ("ready_event", c_void_p),
        ("n_skipped", c_size_t),
        ("skipped_keys", _P(c_char_p)),
        ("skipped_reasons", _P(c_char_p)),
        ("n_members", c_size_t),
        ("members", _P(StreamMember)),
        ("grid", c_uint32 * 3),
        ("reserved2", c_uint32),
        ("skipped_real_samples", c_uint64),
        ("skipped_real_tokens", c_uint64),
        ("planned_tokens", c_uint64),
        ("sp_degree", c_uint32),
        ("sp_rank", c_uint32),
        ("sp_group_first", c_uint32),
        ("sp_sharded", c_uint32),
        ("shard_token_begin", c_uint64),
        ("shard_token_end", c_uint64),
        ("token_first", _P(c_uint64)),
        ("sample_tokens", _P(c_uint64)),
        ("patch", c_uint32 * 3),
        ("reserved3", c_uint32),
        ("group_tokens", c_uint64),
        ("stall_seconds", c_double),
        ("fetched_bytes", c_uint64),
        ("requests", c_uint64),
        ("cache_hits", c_uint64),
        ("cache_misses", c_uint64),
        ("sources", _P(c_uint32)),
    ]


class StreamStats(_Sized):
    """al_stream_stats (stream/al_stream.h)."""

    _fields_ = [
        ("batches", c_uint64),
        ("samples", c_uint64),
        ("bytes", c_uint64),
        ("skipped", c_uint64),
        ("total_batches", c_uint64),
        ("stall_seconds", c_double),
        ("read_seconds", c_double),
        ("buffers", c_int),
        ("buffers_allocated", c_int),
        ("max_in_use", c_int),
        ("host_bytes", c_uint64),
        ("device_bytes", c_uint64),
        ("pinned", c_int),
        ("device_copy", c_int),
        ("threads", c_int),
        ("lacking", c_uint64),
        ("bytes_fetched", c_uint64),
        ("requests", c_uint64),
        ("cache_hits", c_uint64),
        ("cache_misses", c_uint64),
        ("evicted_bytes", c_uint64),
    ]


# (mirror, the size query of its module, the name of the struct's id there)
MIRRORS = (
    (AdalnDesc, "al_adaln_struct_size", "AL_ADALN_STRUCT_DESC"),
    (AdalnOptions, "al_adaln_struct_size", "AL_ADALN_STRUCT_OPTIONS"),
    (IndexOptions, "al_index_struct_size", "AL_INDEX_STRUCT_OPTIONS"),
    (ShardInfo, "al_index_struct_size", "AL_INDEX_STRUCT_SHARD_INFO"),
    (MemberInfo, "al_index_struct_size", "AL_INDEX_STRUCT_MEMBER_INFO"),
    (SampleInfo, "al_index_struct_size", "AL_INDEX_STRUCT_SAMPLE_INFO"),
    (MemberType, "al_index_struct_size", "AL_INDEX_STRUCT_MEMBER_TYPE"),
    (IndexStats, "al_index_struct_size", "AL_INDEX_STRUCT_STATS"),
    (ShardIo, "al_index_struct_size", "AL_INDEX_STRUCT_SHARD_IO"),
    (StorageOptions, "al_index_struct_size", "AL_INDEX_STRUCT_STORAGE"),
    (TensorHeader, "al_index_struct_size", "AL_INDEX_STRUCT_TENSOR_HEADER"),
    (PlanOptions, "al_plan_struct_size", "AL_PLAN_STRUCT_OPTIONS"),
    (ManifestInfo, "al_plan_struct_size", "AL_PLAN_STRUCT_MANIFEST_INFO"),
    (ReplanOptions, "al_plan_struct_size", "AL_PLAN_STRUCT_REPLAN_OPTIONS"),
    (RunInfo, "al_plan_struct_size", "AL_PLAN_STRUCT_RUN_INFO"),
    (RunSourceInfo, "al_plan_struct_size", "AL_PLAN_STRUCT_RUN_SOURCE_INFO"),
    (StreamOptions, "al_stream_struct_size", "AL_STREAM_STRUCT_OPTIONS"),
    (StreamState, "al_stream_struct_size", "AL_STREAM_STRUCT_STATE"),
    (StreamBatch, "al_stream_struct_size", "AL_STREAM_STRUCT_BATCH"),
    (StreamStats, "al_stream_struct_size", "AL_STREAM_STRUCT_STATS"),
    (StreamMember, "al_stream_struct_size", "AL_STREAM_STRUCT_MEMBER"),
)

# (mirror, array field, the library constant that is its length)
LENGTHS = (
    (TensorHeader, "dtype", "AL_TENSOR_DTYPE_MAX"),
    (TensorHeader, "shape", "AL_INDEX_MAX_DIMS"),
    (MemberType, "shape", "AL_INDEX_MAX_DIMS"),
    (ManifestInfo, "sp_degrees", "AL_PLAN_MAX_SP_DEGREES"),
)

# Every library constant the package uses: those above and these, read at load time
# (adaptiveload._constants answers them).
CONSTANTS = tuple(sorted({which for _, _, which in MIRRORS} | {name for _, _, name in LENGTHS} | {
    "AL_OK",  # common/al_status.h (the other codes: adaptiveload._lib.status)
    "AL_EXHAUST_STOP",  # planner/al_run.h: al_exhaust (Manifest.sources)
    "AL_DTYPE_BF16", "AL_DTYPE_FP16", "AL_DTYPE_FP32",  # kernels/al_adaln.h: al_dtype
    "AL_ADALN_PLAIN_SCALE",  # al_adaln_options.flags
    "AL_ADALN_MAX_DIM", "AL_ADALN_MAX_BATCH",  # the kernels' limits (the CPU path checks them too)
    "AL_S3_ADDRESSING_DEFAULT", "AL_S3_ADDRESSING_PATH", "AL_S3_ADDRESSING_VIRTUAL",  # loader/al_index.h
    "AL_STREAM_FAIL", "AL_STREAM_SKIP_SAMPLE",  # stream/al_stream.h: on_error
    "AL_STREAM_STATE_VERSION",  # al_stream_state.version, also of BatchSampler's states
    "AL_STREAM_MAX_DIMS",  # the stride of al_stream_member.shapes
}))
