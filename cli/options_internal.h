/*
 * options_internal.h - the verbs' option tables and the one parser that reads them.
 *
 * Each verb declares its options once, as rows of a table (cli_option: long name, alias,
 * value type and range, where the value goes, metavar, help, default), and a cli_verb: its
 * usage prose, the table, and the wording of its usage errors. cli_parse() reads argv
 * against it (values checked by type and range with common/parse_internal.h, the other
 * arguments handed to the verb in order); cli_print_help() writes the verb's --help page
 * from the same table. The layout follows curl's aliases[] table (src/tool_getparam.c).
 *
 * A value lands in the verb's own argument struct, at the member the row names with
 * CLI_AT, so a table is static const data. Integers are stored into members of any width
 * (the range keeps them representable); doubles into doubles, strings as the argv pointer.
 * The default column documents the default only: the verb's zeroed (or initialised)
 * argument struct and the library's zero-means-default options supply it.
 *
 * Internal to cli/. Single-threaded (it prints to stdout and stderr).
 */
#ifndef AL_OPTIONS_INTERNAL_H
#define AL_OPTIONS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/cli_internal.h"
#include "planner/al_buckets.h"

/* cli_parse(): go on and run the verb (any other value is the exit status). */
#define CLI_RUN (-1)
/* A cli_parse_fn or positional handler refusing its argument: the parser reports it. */
#define CLI_BAD (-2)

typedef enum cli_type {
  CLI_FLAG,   /* takes no value; stores .set */
  CLI_STRING, /* stores the argument (const char *) */
  CLI_U64,    /* parse_u64 (digits only, no sign or space, no overflow) in [.min, .max] */
  CLI_DOUBLE, /* parse_double (finite, no leading space) in [.lo, .hi] */
  CLI_CHOICE, /* one of .choices' names; stores its value */
  CLI_CUSTOM  /* .parse reads the value */
} cli_type;

typedef struct cli_choice {
  const char *name;
  int value;
} cli_choice;

/* cli_option.flags */
enum {
  CLI_ABOVE_LO = 1,      /* CLI_DOUBLE: the value must exceed .lo (not equal it) */
  CLI_VALUE_IF_DIGIT = 2 /* CLI_CUSTOM: the next argument is its value only when it starts
                            with a digit; otherwise .parse gets NULL */
};

typedef struct cli_verb cli_verb;

/* Reads `value` of option `opt` into the verb's argument struct `args`. Returns 0, CLI_BAD
 * (the parser reports a bad value), or an exit status after printing its own message. */
typedef int (*cli_parse_fn)(const cli_verb *verb, const char *opt, const char *value, void *args);

typedef struct cli_option {
  const char *name;  /* "--samples"; NULL ends the table */
  const char *alias; /* "-o", or NULL */
  cli_type type;
  size_t offset, size;       /* the destination in the argument struct (CLI_AT) */
  uint64_t min, max;         /* CLI_U64: inclusive range; max 0 = no upper bound */
  double lo, hi;             /* CLI_DOUBLE: range (hi 0 = no upper bound), see CLI_ABOVE_LO */
  int64_t set;               /* CLI_FLAG: the value stored */
  const cli_choice *choices; /* CLI_CHOICE: ended by a NULL name */
  cli_parse_fn parse;        /* CLI_CUSTOM */
  unsigned flags;
  const char *bad;     /* format of a refused value, given the value; NULL = the verb's .bad */
  const char *metavar; /* "N" in "--samples N"; NULL for flags */
  const char *help;    /* NULL: accepted but not listed; each '\n' starts an indented line */
  const char *def;     /* shown as "(default DEF)" after the help; NULL: none (or in .help) */
} cli_option;

/* The destination of a row: member `member` of the argument struct `type`. */
#define CLI_AT(type, member) .offset = offsetof(type, member), .size = sizeof(((type *)0)->member)

/* The S3 addressing names of --s3-addressing (loader/al_index.h, AL_S3_ADDRESSING_*). */
extern const cli_choice cli_s3_addressing[];

/* The storage options every verb that reads shards at URLs takes, the same four rows
 * (loader/al_index.h, al_storage_options): into the members s3_endpoint, s3_region,
 * s3_addressing and remote_timeout_s of W in the argument struct T (W = `o` for an
 * al_index_options or al_stream_options named o, `storage` for an al_storage_options). */
#define CLI_STORAGE_OPTIONS(T, W)                                                             \
  {.name = "--s3-endpoint",                                                                   \
   .type = CLI_STRING,                                                                        \
   CLI_AT(T, W.s3_endpoint),                                                                  \
   .metavar = "URL",                                                                          \
   .help = "S3-compatible endpoint of s3:// shards (e.g. http://127.0.0.1:9000)",             \
   .def = "$AWS_ENDPOINT_URL, else the index's, else AWS"},                                   \
      {.name = "--s3-region",                                                                 \
       .type = CLI_STRING,                                                                    \
       CLI_AT(T, W.s3_region),                                                                \
       .metavar = "REGION",                                                                   \
       .help = "SigV4 region of s3:// shards",                                                \
       .def = "$AWS_REGION, else the index's, else us-east-1"},                               \
      {.name = "--s3-addressing",                                                             \
       .type = CLI_CHOICE,                                                                    \
       CLI_AT(T, W.s3_addressing),                                                            \
       .choices = cli_s3_addressing,                                                          \
       .metavar = "path|virtual",                                                             \
       .help = "ENDPOINT/BUCKET/KEY or BUCKET.HOST/KEY",                                      \
       .def = "the index's, else path at an endpoint, virtual at AWS"},                       \
  {                                                                                           \
    .name = "--remote-timeout", .type = CLI_DOUBLE, CLI_AT(T, W.remote_timeout_s), .lo = 0.1, \
    .hi = 86400, .metavar = "S",                                                              \
    .help =                                                                                   \
        "give a remote operation (a HEAD, a read, a listing page) up\n"                       \
        "S seconds after it started (retries with backoff meanwhile)",                        \
    .def = "$ADAPTIVELOAD_REMOTE_TIMEOUT_S, else 60"                                          \
  }

/* How a usage error continues after "adaptiveload VERB: MESSAGE". */
typedef enum cli_say {
  CLI_SAY_HINT,  /* a line "run 'adaptiveload VERB --help' for usage" */
  CLI_SAY_PAGE,  /* a blank line and the verb's help page */
  CLI_SAY_BLANK, /* a blank line */
} cli_say;

struct cli_verb {
  const char *name;          /* "synth" */
  const char *usage;         /* usage lines and what the verb does, printed before the options */
  const cli_option *options; /* ended by a row with a NULL name */
  const char *epilogue;      /* printed after the options; NULL: nothing */
  /* Arguments that are not options ("-" included) go to .positional in order; it returns 0,
   * CLI_BAD (the parser reports .stray) or an exit status. Without it they are reported as
   * .stray, or read as option names when .stray is NULL too. */
  int (*positional)(const cli_verb *verb, const char *arg, void *args);
  int dashdash; /* nonzero: "--" ends the options, the arguments after it are positional */
  /* Usage errors: printf formats of MESSAGE; .say says how they continue. */
  cli_say say;
  const char *missing; /* (option): an option that takes a value is the last argument */
  const char *unknown; /* (option, next argument or ""): not in the table */
  const char *stray;   /* (argument): a positional argument refused */
  int unknown_first;   /* nonzero: an unknown last argument is .unknown, not .missing */
  const char *bad;     /* (option, value): a value that is not of the type or out of range */
  cli_say bad_say;     /* how .bad (and a row's .bad) continue */
};

/* Reads argv (argv[0] is the verb) into `args`. With --help or -h anywhere it prints the
 * help page on stdout and returns AL_EXIT_OK. Returns CLI_RUN when the verb should run, else
 * the exit status after printing the error: AL_EXIT_USAGE for a usage error, or what a
 * handler returned. */
int cli_parse(const cli_verb *verb, int argc, char **argv, void *args);

/* The verb's help page: its usage prose, "options:" and one entry per listed row (alias,
 * name, metavar, help, default), then the epilogue. */
void cli_print_help(FILE *out, const cli_verb *verb);

/* Prints "adaptiveload VERB: MESSAGE" on stderr, continued as `say`; returns AL_EXIT_USAGE. */
int cli_usage(const cli_verb *verb, cli_say say, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Exactly `n` comma-separated parse_u64 numbers ("4,8") into v[0..n): 0, or -1 (v may be
 * partly written). */
int cli_parse_u64_list(const char *s, uint64_t *v, size_t n);

/* --geometry ST,SS,PT,PH,PW (VAE strides t, s and patch t, h, w): five numbers 1..2^32-1 into
 * *out: 0, or CLI_BAD (*out untouched). */
int cli_parse_geometry(const char *v, al_latent_geom *out);

/* --sp-degrees 1,2,4,8: distinct powers of two 1..1024, at most AL_PLAN_MAX_SP_DEGREES of them,
 * into out[0..*n) in the order given: 0, or cli_usage's status naming the bad item. */
int cli_parse_sp_degrees(const cli_verb *verb, const char *v, uint32_t *out, size_t *n);

/* --root FROM=TO (stream, verify): v appended to roots (*n of them, at most cap): 0, or
 * cli_usage's status for a value that is not FROM=TO or one too many; the message shows any
 * URL's user:password@ as ***@. */
int cli_parse_root(const cli_verb *verb, const char *v, const char **roots, size_t *n, size_t cap);

/* A comma list ("latent.npy,t5.npy") copied into buf (buf_cap bytes) and split there: names[i]
 * point into buf, *n of them. 0, or -1 for a value too long, an empty item or more than cap. */
int cli_split_list(const char *v, char *buf, size_t buf_cap, const char **names, size_t cap,
                   size_t *n);

#endif /* AL_OPTIONS_INTERNAL_H */
