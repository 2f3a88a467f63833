/* The latent rule (al_members.h): which member extensions name a latent. The index (scan.c,
 * index.c), the stream (through the index) and Python (through ctypes) all call this. */
#include <string.h>

#include "loader/al_members.h"

int al_member_is_latent(const char *ext) { return ext && strncmp(ext, "latent", 6) == 0; }
