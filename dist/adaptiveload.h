/*
 * adaptiveload.h - the whole public C API in one include: every public header of
 * libadaptiveload.so (the list //dist:public_headers names). The install bundle ships it as
 * include/adaptiveload.h beside the module headers it includes (include/loader/al_index.h,
 * ...), so a C program needs `-I adaptiveload/include` and `#include "adaptiveload.h"`, then
 * links -ladaptiveload. Declares nothing of its own. //tests/dist:umbrella_test compiles a C
 * file that includes only this header with -Wall -Wextra -Wpedantic -Werror.
 *
 * Sized structs: the structs the library fills or reads start with `size_t struct_size`; set
 * it with the struct's AL_*_INIT macro (common/al_api.h; docs/DESIGN.md, "The ABI of the public
 * structs").
 */
#ifndef ADAPTIVELOAD_H
#define ADAPTIVELOAD_H

#include "common/al_api.h"
#include "common/al_status.h"
#include "common/al_version.h"
#include "decode/al_decode.h"
#include "kernels/al_adaln.h"
#include "loader/al_check.h"
#include "loader/al_index.h"
#include "loader/al_members.h"
#include "loader/al_synth.h"
#include "cost/al_cost.h"
#include "planner/al_buckets.h"
#include "planner/al_plan.h"
#include "planner/al_run.h"
#include "manifest/al_manifest.h"
#include "manifest/al_mixture.h"
#include "manifest/al_plan_index.h"
#include "manifest/al_report.h"
#include "stream/al_schedule.h"
#include "stream/al_stream.h"

#endif /* ADAPTIVELOAD_H */
