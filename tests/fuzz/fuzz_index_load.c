/* libFuzzer harness: index files (loader/al_index.h, al_index_load) through the
 * proto container. Input byte 0, bit 0 clear: the rest is the decompressed
 * container stream, wrapped here in a valid LZ4 frame; set: the file as is.
 * A loaded index is walked through every accessor.
 * The input is also decoded as one IndexChunk record by the loader's own decoder
 * (loader/index_decode.c) and by protobuf-c: they must accept and refuse the same
 * records and give the same samples (abort otherwise). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loader/al_index.h"
#include "loader/index_decode_internal.h"
#include "proto/adaptiveload.pb-c.h"
#include "tests/fuzz/fuzz_common.h"

typedef struct diff_ctx {
  const Adaptiveload__IndexChunk *c; /* protobuf-c's, or NULL when it refused the record */
  size_t i;
} diff_ctx;

static void same_str(const char *want, const char *got, size_t got_len) {
  if (strlen(want) != got_len || memcmp(want, got, got_len) != 0) abort();
}

static int diff_sample(void *ctx, const idec_sample *s) {
  diff_ctx *d = ctx;
  if (!d->c) return 0; /* protobuf-c refused: the decoder must refuse later */
  if (d->i >= d->c->n_samples) abort();
  const Adaptiveload__Sample *p = d->c->samples[d->i++];
  same_str(p->key, s->key, s->key_len);
  if (p->shard != s->shard || p->width != s->width || p->height != s->height ||
      p->frames != s->frames || memcmp(&p->fps, &s->fps, sizeof s->fps) != 0 ||
      p->n_members != s->n_members)
    abort();
  for (size_t j = 0; j < p->n_members && j < IDEC_MEMBERS_KEPT; j++) {
    const Adaptiveload__Member *pm = p->members[j];
    const idec_member *m = &s->members[j];
    same_str(pm->ext, m->ext, m->ext_len);
    same_str(pm->dtype ? pm->dtype : "", m->dtype, m->dtype_len);
    if (pm->offset != m->offset || pm->size != m->size || pm->data_offset != m->data_offset ||
        !pm->lz4 != !m->lz4 || pm->n_shape != m->n_shape)
      abort();
    for (size_t k = 0; k < pm->n_shape && k < THEADER_MAX_DIMS; k++)
      if (pm->shape[k] != m->shape[k]) abort();
  }
  return 0;
}

static void differential(const uint8_t *data, size_t size) {
  static const uint8_t empty = 0;
  if (!size) data = &empty;
  Adaptiveload__IndexChunk *c = adaptiveload__index_chunk__unpack(NULL, size, data);
  idec_scratch scr = {NULL, 0};
  idec_error err = {0, NULL};
  diff_ctx d = {c, 0};
  int rc = idec_index_chunk(data, size, &scr, diff_sample, &d, &err);
  idec_scratch_free(&scr);
  if (rc == IDEC_OTHER) {
    /* shards, rejected entries or warnings: the loader hands it to protobuf-c */
  } else if (c) {
    if (rc != AL_OK || d.i != c->n_samples) abort();
  } else if (rc != AL_EFORMAT || !err.what || err.offset > size) {
    abort();
  }
  if (c) adaptiveload__index_chunk__free_unpacked(c, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char *path;
  if (!path) path = fuzz_tmp_path(".alidx");
  differential(data, size);
  fuzz_write_container(path, data, size);
  al_index *idx = NULL;
  if (al_index_load(&idx, path) != AL_OK) {
    if (idx) abort(); /* nothing handed out on failure */
    return 0;
  }
  for (size_t i = 0; i < al_index_shard_count(idx); i++) {
    al_shard_info sh = AL_SHARD_INFO_INIT;
    if (al_index_shard(idx, i, &sh) != AL_OK) abort();
  }
  for (size_t i = 0; i < al_index_sample_count(idx); i++) {
    al_sample_info s = AL_SAMPLE_INFO_INIT;
    if (al_index_sample(idx, i, &s) != AL_OK) abort();
    if (s.shard >= al_index_shard_count(idx)) abort();
    for (size_t m = 0; m < s.n_members; m++) {
      al_member_info mi;
      if (al_index_member(idx, i, m, &mi) != AL_OK) abort();
    }
    al_member_info mi;
    (void)al_index_find_member(idx, i, "latent", &mi);
  }
  for (size_t i = 0; i < al_index_rejected_count(idx); i++) {
    al_rejected_info r = AL_REJECTED_INFO_INIT;
    if (al_index_rejected(idx, i, &r) != AL_OK) abort();
  }
  (void)al_index_fingerprint(idx);
  (void)al_index_memory(idx, NULL, NULL);
  al_index_free(idx);
  return 0;
}
