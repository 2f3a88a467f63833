/*
 * tensor_header_internal.h - the header of a typed payload member: a NumPy .npy
 * array (format versions 1.0, 2.0, 3.0) or a safetensors file. The index scan
 * (loader/scan.c) parses it to store each typed member's dtype and shape; the
 * stream (stream/) parses it to find the array data inside the member. Internal
 * to //loader and //stream (not exported by libadaptiveload.so).
 *
 * Nothing here reads files: the caller hands the first bytes of the member
 * (decoded bytes for a KEY.ext.lz4 member) and the member's full decoded size,
 * and asks again with more bytes when told to.
 *
 * Errors: AL_EFORMAT for a bad header, with a message (al_set_error) saying what
 * is wrong and at which byte of the member ("npy header: byte 47: unknown dtype
 * '<c8'"); the caller prefixes shard, member and offset. Thread safety: every
 * function is pure apart from the thread-local error message; safe from any
 * thread.
 */
#ifndef AL_TENSOR_HEADER_INTERNAL_H
#define AL_TENSOR_HEADER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum theader_dtype {
  THEADER_NONE = 0,
  THEADER_BOOL,
  THEADER_U8,
  THEADER_I8,
  THEADER_I16,
  THEADER_U16,
  THEADER_I32,
  THEADER_U32,
  THEADER_I64,
  THEADER_U64,
  THEADER_F16,
  THEADER_BF16,
  THEADER_F32,
  THEADER_F64
} theader_dtype;

#define THEADER_DTYPE_COUNT 14 /* THEADER_NONE .. THEADER_F64 */
#define THEADER_MAX_DIMS 8
/* Largest header accepted (npy: magic, length field and dict; safetensors: the 8-byte length
 * and the JSON), so that a reader never has to hold more than this to parse one. */
#define THEADER_MAX_HEADER_BYTES (1u << 20)

typedef struct theader {
  theader_dtype dtype;
  uint32_t ndim;
  uint64_t shape[THEADER_MAX_DIMS]; /* shape[i] for i < ndim; 0 beyond */
  uint64_t data_offset;             /* bytes from the member's first byte to the array data */
  uint64_t data_bytes;              /* product(shape) x element size (checked against overflow) */
} theader;

typedef enum theader_kind {
  THEADER_KIND_NONE = 0,
  THEADER_KIND_NPY,
  THEADER_KIND_SAFETENSORS
} theader_kind;

/* Kind from a member extension: "npy", "latent.npy", "t5.npy.lz4" -> NPY;
 * "safetensors", "x.safetensors", "x.safetensors.lz4" -> SAFETENSORS; anything else
 * (NULL included) -> NONE. Case-sensitive, as WebDataset extensions are. */
theader_kind theader_kind_of(const char *ext);

/* Parses the header at the start of a member. `buf` holds the first `have` bytes of the
 * (decoded) member, `member_size` is its full decoded size.
 *
 * Returns
 *   AL_OK       *out filled (all of it; shape entries past ndim are 0);
 *   AL_ERANGE   more bytes are needed: *need is set to the number of leading bytes of the
 *               member required (> have, <= member_size, <= THEADER_MAX_HEADER_BYTES); call
 *               again with at least that many. No message is recorded for this case. Asking
 *               with have >= THEADER_MAX_HEADER_BYTES (or the whole member) never gives it;
 *   AL_EFORMAT  a bad header, message recorded: bad magic or version, broken dict or JSON,
 *               Fortran order, unknown dtype or byte order (big-endian is refused), ndim > 8,
 *               shape product overflow, a header larger than THEADER_MAX_HEADER_BYTES or than
 *               the member, or data that does not end the member (npy:
 *               data_offset + data_bytes != member_size; safetensors: the tensor's
 *               data_offsets do not match its shape, or the data section does not end the
 *               member);
 *   AL_ENOTFOUND safetensors: `name` is not one of the tensors (message lists a few);
 *   AL_EINVAL   kind NONE, or NULL out/need/buf (with have > 0).
 * On any failure *out is zeroed.
 *
 * npy: the dict needs exactly the keys 'descr', 'fortran_order', 'shape'; descr is one of
 * '|b1' '|u1' '|i1' (also '<' spelling of those), '<i2' '<u2' '<i4' '<u4' '<i8' '<u8' '<f2'
 * '<f4' '<f8'. bfloat16 cannot be told apart in .npy: ml_dtypes' bfloat16 is saved as '<V2',
 * a plain 2-byte void, so '<V2' is refused (save bfloat16 as safetensors "BF16", or view it
 * as uint16 / convert to float16 or float32). Fortran order is refused (the data would be
 * transposed). shape is a tuple of non-negative integers, () (a scalar, ndim 0) and (n,)
 * included.
 * safetensors: the JSON object maps tensor names to {"dtype", "shape", "data_offsets"} and
 * may hold "__metadata__" (ignored). With `name` NULL the file must hold exactly one tensor;
 * with `name` given, that tensor is taken (several or one). dtypes: BOOL U8 I8 I16 U16 I32
 * U32 I64 U64 F16 BF16 F32 F64 (F8 variants are refused). data_offset is 8 + header length +
 * the tensor's begin offset. */
int theader_parse(theader_kind kind, const void *buf, size_t have, uint64_t member_size,
                  const char *name, theader *out, size_t *need);

/* NumPy names: "bool", "uint8", "int8", "int16", "uint16", "int32", "uint32", "int64",
 * "uint64", "float16", "bfloat16", "float32", "float64"; "none" for THEADER_NONE and "?" for
 * values out of range. Never NULL. */
const char *theader_dtype_name(theader_dtype d);

/* AL_OK when header `h` says the dtype (NumPy name) and shape an index recorded when it read
 * the same header; else AL_EFORMAT with "its header says float16 (16, 5, 42, 42), the index
 * recorded float16 (16, 5, 42, 40)" (the caller prefixes shard, key, member and offset). A
 * header rewritten in place keeps its shard's size and tar headers: this is how it is caught. */
int theader_check_recorded(const theader *h, const char *dtype, uint32_t ndim,
                           const uint64_t *shape);

/* Element size in bytes; 0 for THEADER_NONE and out-of-range values. */
size_t theader_dtype_size(theader_dtype d);

/* Inverse of theader_dtype_name (for index loading): AL_OK and *out, or AL_EFORMAT (message
 * recorded) for an unknown name; "none" is unknown. */
int theader_dtype_from_name(const char *name, theader_dtype *out);

#ifdef __cplusplus
}
#endif

#endif /* AL_TENSOR_HEADER_INTERNAL_H */
