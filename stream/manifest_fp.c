/* al_stream_manifest_fingerprint: a hash of what every rank of a manifest reads (a rank's slice,
 * PlanConfig.only_rank: what its one rank reads), the identity a resume state carries
 * (al_stream_state.manifest_fingerprint). */
#include "stream/al_stream.h"

typedef struct fp_hash {
  uint64_t h;
} fp_hash;

/* murmur3's 64-bit finaliser. */
static uint64_t fp_mix(uint64_t x) {
  x ^= x >> 33;
  x *= UINT64_C(0xff51afd7ed558ccd);
  x ^= x >> 33;
  x *= UINT64_C(0xc4ceb9fe1a85ec53);
  x ^= x >> 33;
  return x;
}

static void fp_add(fp_hash *f, uint64_t v) {
  f->h = (f->h ^ fp_mix(v + UINT64_C(0x9e3779b97f4a7c15))) * UINT64_C(0x9e3779b97f4a7c15);
  f->h = (f->h << 27) | (f->h >> 37);
}

/* One micro-batch: where it sits, its bucket, samples, tokens, padding and step totals. */
static void fp_micro(fp_hash *f, const al_micro_ref *r) {
  fp_add(f, ((uint64_t)r->step << 32) | r->micro);
  fp_add(f, ((uint64_t)r->rank << 32) | r->bucket);
  fp_add(f, r->n_samples);
  for (size_t i = 0; i < r->n_samples; i++) {
    fp_add(f, r->samples[i]);
    fp_add(f, r->tokens ? r->tokens[i] : 0);
  }
  fp_add(f, r->n_padded);
  for (size_t j = 0; j < r->n_padded; j++) fp_add(f, r->padded[j]);
  fp_add(f, r->step_samples);
  fp_add(f, r->step_tokens);
}

static int fp_buckets(fp_hash *f, const al_manifest *m, size_t n) {
  for (size_t k = 0; k < n; k++) {
    al_bucket_info b = AL_BUCKET_INFO_INIT;
    int rc = al_manifest_bucket(m, k, &b);
    if (rc != AL_OK) return rc;
    fp_add(f, ((uint64_t)b.id << 32) | b.frames);
    fp_add(f, ((uint64_t)b.width << 32) | b.height);
    fp_add(f, b.tokens);
  }
  return AL_OK;
}

int al_stream_manifest_fingerprint(const al_manifest *m, uint64_t *out) {
  *out = 0;
  if (!m) return al_set_error(AL_EINVAL, "manifest fingerprint: NULL manifest");
  al_manifest_info info = AL_MANIFEST_INFO_INIT;
  int rc = al_manifest_get_info(m, &info);
  if (rc != AL_OK) return rc;
  fp_hash f = {UINT64_C(0x616c6d616e696673)}; /* "almanifs" */
  fp_add(&f, ((uint64_t)info.world << 32) | info.epoch);
  fp_add(&f, info.seed);
  fp_add(&f, ((uint64_t)info.first_step << 32) | info.steps);
  fp_add(&f, info.index_fingerprint);
  fp_add(&f, info.index_samples);
  fp_add(&f, info.buckets);
  if ((rc = fp_buckets(&f, m, info.buckets)) != AL_OK) return rc;
  /* A rank's slice holds one rank: its hash is of that rank (folded in, so it is no whole
   * plan's); a whole manifest's is unchanged. */
  uint32_t r0 = info.only_rank ? info.only_rank - 1 : 0;
  uint32_t r1 = info.only_rank ? info.only_rank : info.world;
  if (info.only_rank) fp_add(&f, info.only_rank);
  for (uint32_t step = info.first_step; step < info.first_step + info.steps; step++)
    for (uint32_t r = r0; r < r1; r++) {
      uint32_t nm = 0;
      if ((rc = al_manifest_micro_count(m, step, r, &nm)) != AL_OK) return rc;
      fp_add(&f, nm);
      for (uint32_t k = 0; k < nm; k++) {
        al_micro_ref ref = AL_MICRO_REF_INIT;
        if ((rc = al_manifest_micro(m, step, r, k, &ref)) != AL_OK) return rc;
        fp_micro(&f, &ref);
      }
    }
  *out = fp_mix(f.h);
  if (!*out) *out = 1; /* 0 means "no manifest" (a stream over a hand-made plan) */
  return AL_OK;
}
