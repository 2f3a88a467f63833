/*
 * mixture_report_internal.h - a mixture's manifest reported (mixture_report.c): each source's
 * realised share of every stage's steps, by tokens, samples and predicted compute, beside its
 * scheduled weight. Internal to //manifest: what inspect's text, JSON and JSONL add for a
 * mixture. Nothing is printed for a plan of one index.
 */
#ifndef AL_MIXTURE_REPORT_INTERNAL_H
#define AL_MIXTURE_REPORT_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "manifest/al_manifest.h"

/* The source (an index into the manifest's sources) that drew sample number `draw`. */
uint32_t manifest_source_of(const al_manifest *m, uint64_t draw);

/* The text section "mixture by ...": sources, passes, and per stage the realised shares. */
void manifest_mix_print_summary(FILE *out, const al_manifest *m);

/* `, "mixture": {...}` for the JSON object (the caller closes the object). */
void manifest_mix_print_json(FILE *out, const al_manifest *m);

#endif /* AL_MIXTURE_REPORT_INTERNAL_H */
