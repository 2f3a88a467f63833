/* A bucket's latent grid under a geometry, checked against its token count (engine_internal.h:
 * stream_grid_of): what a manifest's rank plan and a run's feed crop typed latents to. */
#include <inttypes.h>

#include "stream/engine_internal.h"

int stream_grid_of(const al_bucket_info *b, const al_latent_geom *geom, const char *origin,
                   uint32_t grid[3]) {
  const al_bucket_info bi = *b;
  const al_latent_geom g = *geom;
  const uint32_t bucket = bi.id;
  grid[0] = grid[1] = grid[2] = 0;
  uint64_t t = bi.frames ? 1 + ((uint64_t)bi.frames - 1) / g.vae_stride_t : 0;
  uint64_t h = bi.height / g.vae_stride_s, w = bi.width / g.vae_stride_s;
  uint64_t tokens = al_tokens(&g, bi.width, bi.height, bi.frames);
  if (!t || t % g.patch_t || h % g.patch_h || w % g.patch_w || tokens != bi.tokens ||
      (t / g.patch_t) * (h / g.patch_h) * (w / g.patch_w) != tokens || t > UINT32_MAX)
    return al_set_error(AL_EFORMAT,
                        "bucket %" PRIu32 " (%" PRIu32 "x%" PRIu32 " x %" PRIu32 " frames, %" PRIu64
                        " tokens in the %s): no whole latent grid "
                        "under the VAE stride %" PRIu32 "x%" PRIu32 " and patch %" PRIu32
                        "x%" PRIu32 "x%" PRIu32 " (%" PRIu64 "x%" PRIu64 "x%" PRIu64 ", %" PRIu64
                        " tokens); typed latents cannot be cropped to it",
                        bucket, bi.width, bi.height, bi.frames, bi.tokens, origin, g.vae_stride_t,
                        g.vae_stride_s, g.patch_t, g.patch_h, g.patch_w, t, h, w, tokens);
  grid[0] = (uint32_t)t;
  grid[1] = (uint32_t)h;
  grid[2] = (uint32_t)w;
  return AL_OK;
}
