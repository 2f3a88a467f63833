/* al_version(): the library's AL_VERSION_STRING. */
#include "common/al_version.h"

const char *al_version(void) { return AL_VERSION_STRING; }
