/*
 * fidelity_print_internal.h - the crop report (manifest/fidelity_internal.h) as `inspect INDEX`
 * and `plan` print it: text lines and JSON fields in their style (", " separators).
 *
 * Internal to cli/. Prints only; the report and index are the caller's.
 */
#ifndef AL_FIDELITY_PRINT_INTERNAL_H
#define AL_FIDELITY_PRINT_INTERNAL_H

#include <stdio.h>

#include "loader/al_index.h"
#include "manifest/fidelity_internal.h"

/* kept / native, 1 when native is 0. */
double fidprint_fraction(uint64_t kept, uint64_t native);

/* The table (aspect group x duration band: samples, kept, mean, min), the cuts by why and the
 * samples cut most, after a heading line "fidelity (FROM): ...". */
void fidprint_text(FILE *out, const fid_report *r, const al_index *idx, const char *from);

/* `"fidelity": {...}` (the same numbers, every cut listed in "cut_most"). */
void fidprint_json(FILE *out, const fid_report *r, const al_index *idx, const char *from);

/* The plan summary's line: "plan: fidelity: P% of native latent tokens kept (N samples), C
 * cut in time (longer than M_mem), K cropped to bucket". */
void fidprint_plan_line(FILE *out, const fid_report *r);

/* The plan --json field `"fidelity": {...}` without the per-group table. */
void fidprint_plan_json(FILE *out, const fid_report *r);

#endif /* AL_FIDELITY_PRINT_INTERNAL_H */
