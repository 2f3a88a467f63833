/* Option values several verbs share (--geometry; member lists); see options_internal.h. */
#include <stdint.h>
#include <string.h>

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

int cli_split_list(const char *v, char *buf, size_t buf_cap, const char **names, size_t cap,
                   size_t *n) {
  *n = 0;
  if (strlen(v) >= buf_cap) return -1;
  strcpy(buf, v);
  for (char *p = buf;;) {
    char *c = strchr(p, ',');
    if (c) *c = 0;
    if (!*p || *n == cap) return -1;
    names[(*n)++] = p;
    if (!c) return 0;
    p = c + 1;
  }
}
