/* The --geometry value of plan and buckets; see options_internal.h. */
#include <stdint.h>

#include "cli/options_internal.h"

int cli_parse_geometry(const char *v, al_latent_geom *out) {
  uint64_t g[5];
  if (cli_parse_u64_list(v, g, 5)) return CLI_BAD;
  for (int k = 0; k < 5; k++)
    if (!g[k] || g[k] > UINT32_MAX) return CLI_BAD;
  al_latent_geom geom = {(uint32_t)g[0], (uint32_t)g[1], (uint32_t)g[2], (uint32_t)g[3],
                         (uint32_t)g[4]};
  *out = geom;
  return 0;
}
