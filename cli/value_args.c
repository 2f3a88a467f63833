/* Option values several verbs share (--geometry; member lists; --sp-degrees); see
 * options_internal.h. */
#include <stdint.h>
#include <string.h>

#include "cli/options_internal.h"
#include "loader/al_index.h"
#include "common/parse_internal.h"
#include "manifest/al_manifest.h"
#include "planner/al_plan.h"

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

int cli_parse_sp_degrees(const cli_verb *verb, const char *v, uint32_t *out, size_t *n) {
  char buf[128];
  const char *items[AL_PLAN_MAX_SP_DEGREES];
  if (cli_split_list(v, buf, sizeof buf, items, AL_PLAN_MAX_SP_DEGREES, n))
    return cli_usage(verb, CLI_SAY_BLANK,
                     "bad --sp-degrees '%s' (a comma list of at most %u distinct powers of two "
                     "1..1024, e.g. 1,2,4,8)",
                     v, AL_PLAN_MAX_SP_DEGREES);
  for (size_t i = 0; i < *n; i++) {
    uint64_t d = 0;
    if (parse_u64(items[i], &d) || d > UINT32_MAX)
      return cli_usage(verb, CLI_SAY_BLANK, "bad --sp-degrees '%s': '%s' is not a number", v,
                       items[i]);
    out[i] = (uint32_t)d;
  }
  /* The rule is the library's; the world is checked once --world is known (cmd_plan.c). */
  if (al_plan_check_sp_degrees("--sp-degrees", out, *n, 0))
    return cli_usage(verb, CLI_SAY_BLANK, "bad %s", al_last_error());
  return 0;
}

const cli_choice cli_s3_addressing[] = {{"path", AL_S3_ADDRESSING_PATH},
                                        {"virtual", AL_S3_ADDRESSING_VIRTUAL},
                                        {NULL, 0}};
