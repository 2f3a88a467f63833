/* Tokens per sample from its pixel shape and the latent geometry. */
#include "planner/al_buckets.h"

al_latent_geom al_latent_geom_resolve(const al_latent_geom *in) {
  al_latent_geom g = {4, 8, 1, 2, 2};
  if (!in) return g;
  if (in->vae_stride_t) g.vae_stride_t = in->vae_stride_t;
  if (in->vae_stride_s) g.vae_stride_s = in->vae_stride_s;
  if (in->patch_t) g.patch_t = in->patch_t;
  if (in->patch_h) g.patch_h = in->patch_h;
  if (in->patch_w) g.patch_w = in->patch_w;
  return g;
}

/* a * b, or UINT64_MAX when that does not fit. */
static uint64_t mul_sat(uint64_t a, uint64_t b) {
  return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

uint64_t al_tokens(const al_latent_geom *gin, uint32_t width, uint32_t height, uint32_t frames) {
  al_latent_geom g = al_latent_geom_resolve(gin);
  if (!frames) return 0;
  uint64_t t_lat = 1 + ((uint64_t)frames - 1) / g.vae_stride_t;
  /* A causal VAE's latent time is padded up to whole temporal patches. */
  uint64_t t_tok = (t_lat + g.patch_t - 1) / g.patch_t;
  uint64_t h_tok = (uint64_t)height / ((uint64_t)g.vae_stride_s * g.patch_h);
  uint64_t w_tok = (uint64_t)width / ((uint64_t)g.vae_stride_s * g.patch_w);
  /* Up to 2^96 with 32-bit shapes and unit geometry: saturated (no M_mem is that large). */
  return mul_sat(mul_sat(t_tok, h_tok), w_tok);
}
