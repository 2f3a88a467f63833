/* Synthetic WebDataset corpus; see al_synth.h. Shards are written in parallel, one per task. */
#include "common/struct_abi_internal.h"
#include "loader/al_synth.h"

#include <errno.h>
#include <lz4frame.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock_internal.h"
#include "loader/tar_write_internal.h"

#define SYNTH_MTIME 1700000000 /* fixed: byte-identical shards */
#define FILL_CAP (1u << 20)

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

static uint32_t pick(uint64_t *s, uint32_t n) { return (uint32_t)((splitmix(s) >> 32) * n >> 32); }

static uint32_t round16(double v) {
  uint32_t r = (uint32_t)(v / 16.0 + 0.5) * 16;
  return r < 16 ? 16 : r;
}

/* Short sides 240p..720p (multiples of 16) and aspect ratios square..21:9, both orientations. */
static const uint32_t SHORT_SIDES[] = {240, 352, 480, 720};
static const double ASPECTS[] = {1.0, 4.0 / 3.0, 3.0 / 2.0, 16.0 / 9.0, 21.0 / 9.0};
static const float FPS[] = {16.0f, 24.0f, 25.0f, 30.0f};

/* al_synth_sample into a struct of this library's layout. */
static void synth_sample(uint64_t seed, uint64_t i, al_synth_sample_meta *out) {
  uint64_t s = seed * UINT64_C(0xd1342543de82ef95) ^ (i + 1) * UINT64_C(0x9e3779b97f4a7c15);
  splitmix(&s);
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->is_image = pick(&s, 100) < 40;
  uint32_t side = SHORT_SIDES[pick(&s, 4)];
  double ar = ASPECTS[pick(&s, 5)];
  uint32_t longer = round16(side * ar);
  if (pick(&s, 4) == 0) { /* one in four portrait */
    out->width = side;
    out->height = longer;
  } else {
    out->width = longer;
    out->height = side;
  }
  if (out->is_image) {
    out->frames = 1;
  } else {
    /* Mostly Wan's 4k+1 lengths (5..121), some arbitrary lengths (2..121). */
    out->frames = pick(&s, 10) ? 4 * (1 + pick(&s, 30)) + 1 : 2 + pick(&s, 120);
    out->fps = FPS[pick(&s, 4)];
  }
  uint64_t tp = 1 + (out->frames - 1) / 4;
  out->latent_bytes = UINT64_C(16) * tp * (out->height / 8) * (out->width / 8) * 2;
}

int al_synth_sample(uint64_t seed, uint64_t i, al_synth_sample_meta *caller) {
  if (!caller) return al_set_error(AL_EINVAL, "al_synth_sample: out is NULL");
  size_t n;
  int rc = struct_out_size(caller, sizeof(al_synth_sample_meta), AL_SYNTH_SAMPLE_META_V1,
                           "al_synth_sample", "al_synth_sample_meta", &n);
  if (rc) return rc;
  al_synth_sample_meta m;
  synth_sample(seed, i, &m);
  struct_out(caller, &m, n);
  return AL_OK;
}

typedef struct job {
  const al_synth_options *o;
  uint64_t samples;
  uint32_t shards;
  atomic_uint next;
  atomic_int failed;
  pthread_mutex_t mu;
  char err[1024];
  int err_rc;
  atomic_ullong bytes, images;
} job;

static void fill_random(uint64_t *state, unsigned char *buf, size_t n) {
  /* xorshift64*: ~1 ns per 8 bytes, enough to make payloads incompressible. */
  uint64_t x = *state | 1;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    uint64_t v = x * UINT64_C(0x2545f4914f6cdd1d);
    memcpy(buf + i, &v, 8);
  }
  for (; i < n; i++) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    buf[i] = (unsigned char)(x * UINT64_C(0x2545f4914f6cdd1d) >> 56);
  }
  *state = x;
}

static int json_of(const al_synth_sample_meta *m, char *buf, size_t cap) {
  if (m->is_image)
    return snprintf(buf, cap, "{\"width\": %u, \"height\": %u}\n", m->width, m->height);
  return snprintf(buf, cap,
                  "{\"width\": %u, \"height\": %u, \"frames\": %u, \"fps\": %g, \"duration\": %.6f}\n",
                  m->width, m->height, m->frames, (double)m->fps, m->frames / (double)m->fps);
}

static int write_shard(job *J, uint32_t k, unsigned char *fill, void *lz4buf, size_t lz4cap) {
  const al_synth_options *o = J->o;
  char path[4096];
  if (snprintf(path, sizeof path, "%s/shard-%06u.tar", o->out_dir, k) >= (int)sizeof path)
    return al_set_error(AL_EINVAL, "%s: output path too long", o->out_dir);
  uint64_t first = (uint64_t)k * J->samples / J->shards,
           end = (uint64_t)(k + 1) * J->samples / J->shards;
  tarw *w;
  int rc = tarw_open(&w, path, SYNTH_MTIME);
  if (rc) return rc;
  uint64_t images = 0;
  for (uint64_t i = first; i < end && !rc; i++) {
    al_synth_sample_meta m;
    synth_sample(o->seed, i, &m);
    images += (uint64_t)m.is_image;
    char name[64], js[256];
    int jn = json_of(&m, js, sizeof js);
    if (o->lz4_json) {
      snprintf(name, sizeof name, "%06u-%08llu.json.lz4", k, (unsigned long long)i);
      LZ4F_preferences_t prefs;
      memset(&prefs, 0, sizeof prefs);
      size_t z = LZ4F_compressFrame(lz4buf, lz4cap, js, (size_t)jn, &prefs);
      if (LZ4F_isError(z))
        rc = al_set_error(AL_EIO, "%s: LZ4: %s", path, LZ4F_getErrorName(z));
      else
        rc = tarw_add(w, name, lz4buf, z);
    } else {
      snprintf(name, sizeof name, "%06u-%08llu.json", k, (unsigned long long)i);
      rc = tarw_add(w, name, js, (uint64_t)jn);
    }
    if (rc || o->payload == AL_SYNTH_NONE) continue;
    snprintf(name, sizeof name, "%06u-%08llu.latent", k, (unsigned long long)i);
    rc = tarw_begin(w, name, m.latent_bytes);
    uint64_t st = o->seed ^ (i * UINT64_C(0x9e3779b97f4a7c15));
    for (uint64_t left = m.latent_bytes; left && !rc;) {
      size_t n = left < FILL_CAP ? (size_t)left : FILL_CAP;
      fill_random(&st, fill, n);
      rc = tarw_data(w, fill, n);
      left -= n;
    }
    if (!rc) rc = tarw_end(w);
  }
  if (rc) {
    tarw_abort(w);
    return rc;
  }
  uint64_t bytes = tarw_offset(w) + 1024;
  rc = tarw_close(w);
  if (!rc) {
    atomic_fetch_add(&J->bytes, bytes);
    atomic_fetch_add(&J->images, images);
  }
  return rc;
}

static void *worker(void *arg) {
  job *J = arg;
  unsigned char *fill = J->o->payload == AL_SYNTH_NONE ? NULL : malloc(FILL_CAP);
  size_t lz4cap = LZ4F_compressFrameBound(256, NULL);
  void *lz4buf = malloc(lz4cap);
  int rc = (!lz4buf || (J->o->payload != AL_SYNTH_NONE && !fill))
               ? al_set_error(AL_ENOMEM, "out of memory")
               : AL_OK;
  for (;;) {
    if (rc) {
      pthread_mutex_lock(&J->mu);
      if (!atomic_load(&J->failed)) {
        snprintf(J->err, sizeof J->err, "%s", al_last_error());
        J->err_rc = rc;
        atomic_store(&J->failed, 1);
      }
      pthread_mutex_unlock(&J->mu);
      break;
    }
    if (atomic_load(&J->failed)) break;
    unsigned k = atomic_fetch_add(&J->next, 1);
    if (k >= J->shards) break;
    rc = write_shard(J, k, fill, lz4buf, lz4cap);
  }
  free(fill);
  free(lz4buf);
  return NULL;
}

static int mkdirs(const char *dir) {
  char buf[4096];
  size_t n = strlen(dir);
  if (n == 0 || n >= sizeof buf) return al_set_error(AL_EINVAL, "bad output directory '%s'", dir);
  memcpy(buf, dir, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] == '/' || buf[i] == '\0') {
      char c = buf[i];
      buf[i] = '\0';
      if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return al_set_error(AL_EIO, "%s: cannot create directory: %s", buf, strerror(errno));
      buf[i] = c;
    }
  }
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return al_set_error(AL_EIO, "%s: not a directory", dir);
  return AL_OK;
}

int al_synth_write(const al_synth_options *caller_opts, al_synth_stats *stats) {
  al_synth_options local;
  if (caller_opts) {
    int src = struct_in(&local, sizeof local, AL_SYNTH_OPTIONS_V1, caller_opts, "al_synth_write",
                        "al_synth_options");
    if (src) return src;
  }
  const al_synth_options *opts = caller_opts ? &local : NULL;
  size_t n_stats = 0;
  if (stats) {
    int src = struct_out_size(stats, sizeof(al_synth_stats), AL_SYNTH_STATS_V1, "al_synth_write",
                              "al_synth_stats", &n_stats);
    if (src) return src;
  }
  if (!opts || !opts->out_dir)
    return al_set_error(AL_EINVAL, "al_synth_write: no output directory");
  if (opts->payload != AL_SYNTH_LATENT && opts->payload != AL_SYNTH_NONE)
    return al_set_error(AL_EINVAL, "al_synth_write: unknown payload kind %d", (int)opts->payload);
  double t0 = clock_now_s();
  job J;
  memset(&J, 0, sizeof J);
  J.o = opts;
  J.samples = opts->samples ? opts->samples : 2000;
  J.shards = opts->shards ? opts->shards : 8;
  if (J.shards > J.samples) J.shards = (uint32_t)J.samples;
  int rc = mkdirs(opts->out_dir);
  if (rc) return rc;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = opts->threads > 0 ? opts->threads : (cores > 0 ? (int)cores : 1);
  if ((uint32_t)threads > J.shards) threads = (int)J.shards;
  pthread_mutex_init(&J.mu, NULL);
  pthread_t *tids = calloc((size_t)threads, sizeof *tids);
  if (!tids) {
    pthread_mutex_destroy(&J.mu);
    return al_set_error(AL_ENOMEM, "out of memory");
  }
  int started = 0;
  for (; started < threads; started++)
    if (pthread_create(&tids[started], NULL, worker, &J) != 0) break;
  if (started == 0) worker(&J);
  for (int i = 0; i < started; i++) pthread_join(tids[i], NULL);
  free(tids);
  pthread_mutex_destroy(&J.mu);
  if (atomic_load(&J.failed)) return al_set_error(J.err_rc, "%s", J.err);
  double t1 = clock_now_s();
  if (stats) {
    al_synth_stats full = AL_SYNTH_STATS_INIT;
    full.samples = J.samples;
    full.images = atomic_load(&J.images);
    full.videos = J.samples - full.images;
    full.bytes = atomic_load(&J.bytes);
    full.seconds = t1 - t0;
    struct_out(stats, &full, n_stats);
  }
  return AL_OK;
}
