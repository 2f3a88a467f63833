/* The names of a plan's policies, last-step policies and sync models (al_plan.h), as options and
 * manifests spell them. */
#include <string.h>

#include "planner/al_plan.h"

const char *al_policy_name(al_policy p) {
  return p == AL_POLICY_EQUAL_TOKEN           ? "equal-token"
         : p == AL_POLICY_ADAPTIVE_UNBALANCED ? "adaptive-unbalanced"
                                              : "adaptive";
}

int al_policy_parse(const char *s, al_policy *out) {
  if (!strcmp(s, "adaptive"))
    *out = AL_POLICY_ADAPTIVE;
  else if (!strcmp(s, "equal-token"))
    *out = AL_POLICY_EQUAL_TOKEN;
  else if (!strcmp(s, "adaptive-unbalanced"))
    *out = AL_POLICY_ADAPTIVE_UNBALANCED;
  else
    return al_set_error(AL_EINVAL,
                        "unknown policy '%s' (adaptive, equal-token or adaptive-unbalanced)", s);
  return AL_OK;
}

const char *al_last_step_name(al_last_step l) { return l == AL_LAST_DROP ? "drop" : "pad"; }

int al_last_step_parse(const char *s, al_last_step *out) {
  if (!strcmp(s, "pad"))
    *out = AL_LAST_PAD;
  else if (!strcmp(s, "drop"))
    *out = AL_LAST_DROP;
  else
    return al_set_error(AL_EINVAL, "unknown last-step policy '%s' (pad or drop)", s);
  return AL_OK;
}

const char *al_sync_name(al_sync s) {
  return s == AL_SYNC_STEP ? "step" : s == AL_SYNC_MICRO ? "micro" : "auto";
}

int al_sync_parse(const char *s, al_sync *out) {
  if (!strcmp(s, "step"))
    *out = AL_SYNC_STEP;
  else if (!strcmp(s, "micro"))
    *out = AL_SYNC_MICRO;
  else if (!strcmp(s, "auto"))
    *out = AL_SYNC_AUTO;
  else
    return al_set_error(AL_EINVAL, "unknown sync model '%s' (step, micro or auto)", s);
  return AL_OK;
}
