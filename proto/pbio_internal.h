/*
 * pbio_internal.h - AdaptiveLoad's chunked protobuf container.
 *
 * An Index, CostModel or Manifest file is an LZ4 frame (block and content
 * checksums on) whose decompressed stream is:
 *
 *   header  : "ALPB" | u32 format_version | u32 file kind | u32 reserved (0)
 *   records : u32 tag | u32 length | `length` bytes (one packed protobuf message)
 *   end     : u32 0   | u32 8      | u64 number of records before it
 *
 * all integers little-endian. Records keep every message small (protobuf-c
 * unpacks a whole message into memory), so a 10M-sample index streams in
 * bounded memory. The end record makes truncation detectable even where the
 * cut falls on an LZ4 block boundary. Writers write a uniquely named temporary
 * file beside `path` (common/atomic_file_internal.h), fsync it and rename it
 * over `path` on close, then fsync the directory: a crashed writer never leaves
 * a half file under `path`, and two concurrent writers never share a temporary.
 *
 * Errors: every function returns an al_status; the message (al_last_error())
 * names the file and the byte offset in the decompressed stream, e.g.
 *   "idx.alidx: record 3 at byte 4096: truncated (wanted 812 bytes, have 100)".
 *
 * Thread safety: a reader or writer handle must be used by one thread at a
 * time; distinct handles are independent.
 */
#ifndef AL_PBIO_INTERNAL_H
#define AL_PBIO_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "common/al_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AL_FORMAT_VERSION 1u

typedef enum pbio_file_kind {
  AL_KIND_INDEX = 1,
  AL_KIND_COST = 2,
  AL_KIND_MANIFEST = 3
} pbio_file_kind;

/* Record tags: which message a record holds (see proto/adaptiveload.proto). */
typedef enum pbio_record_tag {
  AL_REC_INDEX_HEADER = 1,
  AL_REC_INDEX_CHUNK = 2,
  AL_REC_INDEX_SUMMARY = 3,
  AL_REC_COST_MODEL = 10,
  AL_REC_MANIFEST_HEADER = 20,
  AL_REC_KEY_CHUNK = 21,
  AL_REC_MANIFEST_CHUNK = 22,
  AL_REC_MANIFEST_SUMMARY = 23
} pbio_record_tag;

/* Largest record accepted by readers and writers. */
#define AL_PBIO_MAX_RECORD (256u << 20)

const char *pbio_file_kind_name(pbio_file_kind kind);

/* ------------------------------------------------------------- writing -- */

typedef struct pbio_writer pbio_writer;

/* Creates a temporary file beside `path` (refusing a `path` that exists and is
 * not a regular file) and writes the header. On success *out owns the file
 * until pbio_writer_close() or pbio_writer_abort(). */
int pbio_writer_open(pbio_writer **out, const char *path, pbio_file_kind kind);

/* For tests: write a header claiming another format version. */
int pbio_writer_open_version(pbio_writer **out, const char *path, pbio_file_kind kind,
                             uint32_t version);

/* Appends one record. `tag` must not be 0. */
int pbio_write(pbio_writer *w, uint32_t tag, const void *buf, size_t len);

/* Packs `msg` with protobuf-c and appends it as one record. */
int pbio_write_msg(pbio_writer *w, uint32_t tag, const ProtobufCMessage *msg);

/* Writes the end record, finishes the LZ4 frame, fsyncs the file, renames it
 * to `path`, fsyncs the directory and frees `w` (also on failure). */
int pbio_writer_close(pbio_writer *w);

/* Discards the partial file and frees `w`. NULL is a no-op. */
void pbio_writer_abort(pbio_writer *w);

/* Ends a write begun with pbio_writer_open: pbio_writer_close when `rc` is
 * AL_OK, else pbio_writer_abort and `rc` back. Frees `w` either way. */
int pbio_writer_finish(pbio_writer *w, int rc);

/* ------------------------------------------------------------- reading -- */

typedef struct pbio_reader pbio_reader;

/* Opens `path`, checks the LZ4 frame, the magic, the format version and that
 * the file kind is `expect` (0 accepts any kind; pbio_reader_kind tells). */
int pbio_reader_open(pbio_reader **out, const char *path, pbio_file_kind expect);

/* Refuses (AL_ERANGE, naming `limit_by`, a static string) any record that would
 * take the decoded content past `max_bytes` (0 = no limit), before decoding it. */
void pbio_reader_set_limit(pbio_reader *r, uint64_t max_bytes, const char *limit_by);

pbio_file_kind pbio_reader_kind(const pbio_reader *r);
uint32_t pbio_reader_version(const pbio_reader *r);
const char *pbio_reader_path(const pbio_reader *r);

/* Reads the next record. Returns AL_OK with *tag, *buf (owned by the reader,
 * valid until the next call) and *len set; AL_EOF after a valid end record
 * (the frame's content checksum has then been verified); an error otherwise. */
int pbio_read(pbio_reader *r, uint32_t *tag, const uint8_t **buf, size_t *len);

/* Reads the next record and unpacks it as `desc`, which must match `tag`.
 * *msg is owned by the reader: it lives in an arena that the next read (or
 * close) recycles. Copy out what you keep; never free it yourself. */
int pbio_read_msg(pbio_reader *r, uint32_t tag, const ProtobufCMessageDescriptor *desc,
                  ProtobufCMessage **msg);

/* Like pbio_read_msg but for whatever record comes next: returns its tag
 * and unpacks with the descriptor pbio_descriptor_for(tag). */
int pbio_read_any(pbio_reader *r, uint32_t *tag, ProtobufCMessage **msg);

const ProtobufCMessageDescriptor *pbio_descriptor_for(uint32_t tag);

/* Records of `tag` (0: none) are not unpacked by the reader: pbio_read_next hands over their
 * bytes, for a caller that decodes them itself (the index loader's IndexChunk records); the
 * read-ahead threads skip unpacking them too. pbio_read_msg and pbio_read_any still
 * unpack them (in the caller's thread). Call before pbio_reader_read_ahead (later: no effect). */
void pbio_reader_set_raw_tag(pbio_reader *r, uint32_t tag);

/* Like pbio_read_any, but a record of the raw tag comes back as its bytes: *msg NULL, *raw and
 * *raw_len set (owned by the reader, valid until the next read). Other records: *msg set,
 * *raw NULL. *record: the record's number in the file (for messages). */
int pbio_read_next(pbio_reader *r, uint32_t *tag, ProtobufCMessage **msg, const uint8_t **raw,
                   size_t *raw_len, uint64_t *record);

/* Starts a thread that reads, decompresses and unpacks the following records ahead of
 * the caller (a few records, each in its own arena). From then on read with
 * pbio_read_any / pbio_read_msg only (pbio_read would race the thread); messages stay
 * valid until the next read, as without it; errors are the same, with the same text.
 * Call after pbio_reader_set_limit. If the thread cannot start, reads go on in the
 * caller's thread. pbio_reader_close stops it. */
int pbio_reader_read_ahead(pbio_reader *r);

void pbio_reader_close(pbio_reader *r);

/* Convenience for single-message files (CostModel). load_one's *msg belongs
 * to the caller: protobuf_c_message_free_unpacked(*msg, NULL). */
int pbio_save_one(const char *path, pbio_file_kind kind, uint32_t tag, const ProtobufCMessage *msg);
int pbio_load_one(const char *path, pbio_file_kind kind, uint32_t tag,
                  const ProtobufCMessageDescriptor *desc, ProtobufCMessage **msg);

#ifdef __cplusplus
}
#endif

#endif /* AL_PBIO_INTERNAL_H */
