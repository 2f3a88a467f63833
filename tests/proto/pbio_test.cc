// The chunked protobuf/LZ4 container: round trip and every way a file can be bad.
#include <gtest/gtest.h>

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/test_util.h"

extern "C" {
#include "proto/adaptiveload.pb-c.h"
#include "proto/pbio_internal.h"
}

namespace {

using altest::ReadBytes;
using altest::TmpPath;
using altest::WriteBytes;

// Writes an index-kind file: one header, `chunks` chunks of `per` samples, a summary.
void WriteIndex(const std::string &path, int chunks, int per,
                uint32_t version = AL_FORMAT_VERSION) {
  pbio_writer *w = nullptr;
  ASSERT_EQ(pbio_writer_open_version(&w, path.c_str(), AL_KIND_INDEX, version), AL_OK)
      << al_last_error();
  Adaptiveload__IndexHeader hdr = ADAPTIVELOAD__INDEX_HEADER__INIT;
  hdr.producer = const_cast<char *>("pbio_test");
  ASSERT_EQ(pbio_write_msg(w, AL_REC_INDEX_HEADER, &hdr.base), AL_OK);
  for (int c = 0; c < chunks; c++) {
    std::vector<Adaptiveload__Sample> samples(per);
    std::vector<Adaptiveload__Sample *> ptrs(per);
    std::vector<std::string> keys(per);
    for (int i = 0; i < per; i++) {
      adaptiveload__sample__init(&samples[i]);
      keys[i] = "key-" + std::to_string(c * per + i);
      samples[i].key = const_cast<char *>(keys[i].c_str());
      samples[i].width = 832 + i;
      samples[i].height = 480;
      samples[i].frames = 81;
      ptrs[i] = &samples[i];
    }
    Adaptiveload__IndexChunk chunk = ADAPTIVELOAD__INDEX_CHUNK__INIT;
    chunk.n_samples = per;
    chunk.samples = ptrs.data();
    ASSERT_EQ(pbio_write_msg(w, AL_REC_INDEX_CHUNK, &chunk.base), AL_OK);
  }
  Adaptiveload__IndexSummary sum = ADAPTIVELOAD__INDEX_SUMMARY__INIT;
  sum.samples = static_cast<uint64_t>(chunks) * per;
  ASSERT_EQ(pbio_write_msg(w, AL_REC_INDEX_SUMMARY, &sum.base), AL_OK);
  ASSERT_EQ(pbio_writer_close(w), AL_OK) << al_last_error();
}

// Reads every record; returns the final status (AL_EOF when the file is whole).
int ReadEverything(const std::string &path, int *records, uint64_t *samples, bool ahead = false) {
  pbio_reader *r = nullptr;
  int rc = pbio_reader_open(&r, path.c_str(), AL_KIND_INDEX);
  if (rc) return rc;
  if (ahead && (rc = pbio_reader_read_ahead(r)) != AL_OK) return rc;
  *records = 0;
  *samples = 0;
  for (;;) {
    uint32_t tag;
    ProtobufCMessage *msg;
    rc = pbio_read_any(r, &tag, &msg);
    if (rc) break;
    (*records)++;
    if (tag == AL_REC_INDEX_CHUNK)
      *samples += reinterpret_cast<Adaptiveload__IndexChunk *>(msg)->n_samples;
  }
  pbio_reader_close(r);
  return rc;
}

// Both ways of reading (in the caller's thread, and with the read-ahead threads of
// pbio_reader_read_ahead) give the same records.
TEST(Pbio, RoundTripManyChunks) {
  std::string path = TmpPath("round.alidx");
  // ~6 MB of records: spans several 4 MB LZ4 blocks and 1 MB staging flushes.
  WriteIndex(path, 40, 5000);
  for (bool ahead : {false, true}) {
    SCOPED_TRACE(ahead ? "read ahead" : "plain");
    int records = 0;
    uint64_t samples = 0;
    EXPECT_EQ(ReadEverything(path, &records, &samples, ahead), AL_EOF) << al_last_error();
    EXPECT_EQ(records, 42);
    EXPECT_EQ(samples, 200000u);

    // Contents survive: check samples of every chunk.
    pbio_reader *r = nullptr;
    ASSERT_EQ(pbio_reader_open(&r, path.c_str(), AL_KIND_INDEX), AL_OK);
    if (ahead) {
      ASSERT_EQ(pbio_reader_read_ahead(r), AL_OK);
    }
    EXPECT_EQ(pbio_reader_version(r), AL_FORMAT_VERSION);
    ProtobufCMessage *m = nullptr;
    ASSERT_EQ(pbio_read_msg(r, AL_REC_INDEX_HEADER, &adaptiveload__index_header__descriptor, &m),
              AL_OK);
    EXPECT_STREQ(reinterpret_cast<Adaptiveload__IndexHeader *>(m)->producer, "pbio_test");
    for (int c = 0; c < 40; c++) {
      ASSERT_EQ(pbio_read_msg(r, AL_REC_INDEX_CHUNK, &adaptiveload__index_chunk__descriptor, &m),
                AL_OK);
      auto *chunk = reinterpret_cast<Adaptiveload__IndexChunk *>(m);
      ASSERT_EQ(chunk->n_samples, 5000u);
      EXPECT_EQ(std::string(chunk->samples[17]->key), "key-" + std::to_string(c * 5000 + 17));
      EXPECT_EQ(chunk->samples[17]->width, 832u + 17u);
      EXPECT_EQ(std::string(chunk->samples[4999]->key), "key-" + std::to_string(c * 5000 + 4999));
    }
    // The wrong record kind is refused; with read-ahead the raw reader may not race the threads.
    EXPECT_EQ(pbio_read_msg(r, AL_REC_INDEX_CHUNK, &adaptiveload__index_chunk__descriptor, &m),
              AL_EFORMAT);
    if (ahead) {
      uint32_t tag;
      const uint8_t *buf;
      size_t len;
      EXPECT_EQ(pbio_read(r, &tag, &buf, &len), AL_ESTATE);
    }
    pbio_reader_close(r);
  }
}

// Records of the raw tag come back as their bytes from pbio_read_next (plain and read-ahead),
// the same bytes protobuf-c packed; other records as messages; pbio_read_any and
// pbio_read_msg still unpack raw-tag records.
TEST(Pbio, RawTagRecordsComeAsBytes) {
  std::string path = TmpPath("raw.alidx");
  WriteIndex(path, 12, 3000); // spans several staging flushes (the writer thread's stages)
  for (bool ahead : {false, true}) {
    SCOPED_TRACE(ahead ? "read ahead" : "plain");
    pbio_reader *r = nullptr;
    ASSERT_EQ(pbio_reader_open(&r, path.c_str(), AL_KIND_INDEX), AL_OK);
    pbio_reader_set_raw_tag(r, AL_REC_INDEX_CHUNK);
    if (ahead) {
      ASSERT_EQ(pbio_reader_read_ahead(r), AL_OK);
    }
    int raw = 0, msgs = 0;
    uint64_t samples = 0;
    for (uint64_t want = 0;; want++) {
      uint32_t tag = 0;
      ProtobufCMessage *msg = nullptr;
      const uint8_t *buf = nullptr;
      size_t len = 0;
      uint64_t record = 99;
      int rc = pbio_read_next(r, &tag, &msg, &buf, &len, &record);
      if (rc == AL_EOF) break;
      ASSERT_EQ(rc, AL_OK) << al_last_error();
      EXPECT_EQ(record, want);
      if (tag == AL_REC_INDEX_CHUNK) {
        ASSERT_EQ(msg, nullptr);
        ASSERT_NE(buf, nullptr);
        Adaptiveload__IndexChunk *c = adaptiveload__index_chunk__unpack(nullptr, len, buf);
        ASSERT_NE(c, nullptr);
        EXPECT_EQ(std::string(c->samples[5]->key), "key-" + std::to_string(raw * 3000 + 5));
        samples += c->n_samples;
        // Packing it again gives the record's bytes.
        std::vector<uint8_t> again(adaptiveload__index_chunk__get_packed_size(c));
        adaptiveload__index_chunk__pack(c, again.data());
        EXPECT_EQ(again, std::vector<uint8_t>(buf, buf + len));
        adaptiveload__index_chunk__free_unpacked(c, nullptr);
        raw++;
      } else {
        ASSERT_NE(msg, nullptr);
        EXPECT_EQ(buf, nullptr);
        msgs++;
      }
    }
    EXPECT_EQ(raw, 12);
    EXPECT_EQ(msgs, 2);
    EXPECT_EQ(samples, 36000u);
    pbio_reader_close(r);

    // pbio_read_msg and pbio_read_any unpack raw-tag records all the same.
    ASSERT_EQ(pbio_reader_open(&r, path.c_str(), AL_KIND_INDEX), AL_OK);
    pbio_reader_set_raw_tag(r, AL_REC_INDEX_CHUNK);
    if (ahead) {
      ASSERT_EQ(pbio_reader_read_ahead(r), AL_OK);
    }
    ProtobufCMessage *m = nullptr;
    ASSERT_EQ(pbio_read_msg(r, AL_REC_INDEX_HEADER, &adaptiveload__index_header__descriptor, &m),
              AL_OK);
    ASSERT_EQ(pbio_read_msg(r, AL_REC_INDEX_CHUNK, &adaptiveload__index_chunk__descriptor, &m),
              AL_OK);
    EXPECT_EQ(std::string(reinterpret_cast<Adaptiveload__IndexChunk *>(m)->samples[0]->key),
              "key-0");
    uint32_t tag = 0;
    ASSERT_EQ(pbio_read_any(r, &tag, &m), AL_OK);
    EXPECT_EQ(tag, (uint32_t)AL_REC_INDEX_CHUNK);
    EXPECT_EQ(std::string(reinterpret_cast<Adaptiveload__IndexChunk *>(m)->samples[0]->key),
              "key-3000");
    pbio_reader_close(r);
  }
}

TEST(Pbio, DeterministicBytes) {
  std::string a = TmpPath("det_a.alidx"), b = TmpPath("det_b.alidx");
  WriteIndex(a, 3, 100);
  WriteIndex(b, 3, 100);
  EXPECT_EQ(ReadBytes(a), ReadBytes(b));
}

TEST(Pbio, NoTmpLeftBehind) {
  std::string path = TmpPath("tmpcheck.alidx");
  WriteIndex(path, 1, 10);
  EXPECT_EQ(std::fopen((path + ".tmp").c_str(), "rb"), nullptr);
  pbio_writer *w = nullptr;
  std::string p2 = TmpPath("aborted.alidx");
  ASSERT_EQ(pbio_writer_open(&w, p2.c_str(), AL_KIND_INDEX), AL_OK);
  pbio_writer_abort(w);
  EXPECT_EQ(std::fopen(p2.c_str(), "rb"), nullptr);
  EXPECT_EQ(std::fopen((p2 + ".tmp").c_str(), "rb"), nullptr);
}

// The names in `dir` (without . and ..).
std::vector<std::string> DirNames(const std::string &dir) {
  std::vector<std::string> v;
  DIR *d = opendir(dir.c_str());
  if (!d) return v;
  while (struct dirent *e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") v.push_back(n);
  }
  closedir(d);
  return v;
}

std::string FreshDir(const std::string &name) {
  std::string d = TmpPath(name);
  mkdir(d.c_str(), 0755);
  for (auto &n : DirNames(d)) unlink((d + "/" + n).c_str());
  return d;
}

TEST(Pbio, NothingButTheTargetLeftInTheDirectory) {
  std::string d = FreshDir("leftover");
  WriteIndex(d + "/a.alidx", 2, 10);
  pbio_writer *w = nullptr;
  ASSERT_EQ(pbio_writer_open(&w, (d + "/b.alidx").c_str(), AL_KIND_INDEX), AL_OK);
  pbio_writer_abort(w);
  EXPECT_EQ(DirNames(d), std::vector<std::string>{"a.alidx"});
  // A file created new gets the mode a plain create gives (0666 & ~umask), not 0600.
  mode_t um = umask(022);
  umask(um);
  struct stat st;
  ASSERT_EQ(stat((d + "/a.alidx").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~um);
}

// A symlink planted where the old writer put "<path>.tmp" must not be followed.
TEST(Pbio, SymlinkAtTheOldTmpNameIsNotFollowed) {
  std::string d = FreshDir("symlink");
  std::string victim = d + "/victim", path = d + "/x.alidx";
  WriteBytes(victim, {'k', 'e', 'e', 'p'});
  ASSERT_EQ(symlink(victim.c_str(), (path + ".tmp").c_str()), 0);
  WriteIndex(path, 1, 10);
  EXPECT_EQ(altest::ReadFile(victim), "keep");
  struct stat st;
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode)) << "the target became a symlink";
  int records = 0;
  uint64_t samples = 0;
  EXPECT_EQ(ReadEverything(path, &records, &samples), AL_EOF) << al_last_error();
}

// "-o" at a device node, FIFO or directory (or a link to one) is refused, untouched.
TEST(Pbio, NonRegularTargetIsRefused) {
  std::string d = FreshDir("nonreg");
  std::string fifo = d + "/fifo", link = d + "/link", sub = d + "/sub";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  ASSERT_EQ(symlink(fifo.c_str(), link.c_str()), 0);
  ASSERT_EQ(mkdir(sub.c_str(), 0755), 0);
  for (const std::string &t : {fifo, link, sub}) {
    pbio_writer *w = nullptr;
    int rc = pbio_writer_open(&w, t.c_str(), AL_KIND_INDEX);
    if (rc == AL_OK) rc = pbio_writer_close(w);
    EXPECT_EQ(rc, AL_EINVAL) << t;
    EXPECT_TRUE(altest::ErrorContains("not a regular file")) << al_last_error();
  }
  struct stat st;
  ASSERT_EQ(lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  ASSERT_EQ(lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(DirNames(d).size(), 3u) << "a temporary file was left behind";
}

// Two writers of one target: each succeeds and the file is one of them, whole.
TEST(Pbio, ConcurrentWritersOfOneTargetNeverCorruptIt) {
  std::string d = FreshDir("concurrent");
  std::string path = d + "/c.alidx";
  auto writer = [&](int per) {
    for (int i = 0; i < 30; i++) WriteIndex(path, 4, per);
  };
  std::thread a(writer, 500), b(writer, 700);
  a.join();
  b.join();
  int records = 0;
  uint64_t samples = 0;
  EXPECT_EQ(ReadEverything(path, &records, &samples), AL_EOF) << al_last_error();
  EXPECT_TRUE(samples == 2000 || samples == 2800) << samples;
  EXPECT_EQ(DirNames(d), std::vector<std::string>{"c.alidx"});
}

// A FIFO given as an input fails at once instead of blocking in open.
TEST(Pbio, FifoInputIsRefusedWithoutBlocking) {
  std::string d = FreshDir("fifoin");
  std::string fifo = d + "/in.alidx";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  alarm(20); // a hang kills the test instead of stalling the suite
  pbio_reader *r = nullptr;
  EXPECT_EQ(pbio_reader_open(&r, fifo.c_str(), AL_KIND_INDEX), AL_EINVAL);
  EXPECT_TRUE(altest::ErrorContains("FIFO")) << al_last_error();
  EXPECT_EQ(pbio_reader_open(&r, d.c_str(), AL_KIND_INDEX), AL_EINVAL);
  EXPECT_TRUE(altest::ErrorContains("directory")) << al_last_error();
  alarm(0);
}

TEST(Pbio, EmptyFileIsClearError) {
  std::string path = TmpPath("empty.alidx");
  WriteBytes(path, {});
  pbio_reader *r = nullptr;
  EXPECT_EQ(pbio_reader_open(&r, path.c_str(), AL_KIND_INDEX), AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("empty file"));
  EXPECT_TRUE(altest::ErrorContains(path));
}

TEST(Pbio, MissingFileIsNotFound) {
  pbio_reader *r = nullptr;
  EXPECT_EQ(pbio_reader_open(&r, TmpPath("nope.alidx").c_str(), AL_KIND_INDEX), AL_ENOTFOUND);
  EXPECT_TRUE(altest::ErrorContains("nope.alidx"));
}

TEST(Pbio, NotAnAdaptiveLoadFile) {
  std::string path = TmpPath("garbage.alidx");
  WriteBytes(path, std::vector<unsigned char>(1000, 'x'));
  pbio_reader *r = nullptr;
  EXPECT_EQ(pbio_reader_open(&r, path.c_str(), AL_KIND_INDEX), AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("not an AdaptiveLoad file"));
}

// For a damaged file the read-ahead threads give the same status and message as reading in
// the caller's thread.
TEST(PbioReadAhead, DamageGivesTheSameErrorAsThePlainReader) {
  std::string path = TmpPath("ahead_whole.alidx");
  WriteIndex(path, 6, 2000);
  std::vector<unsigned char> whole = ReadBytes(path);
  std::string bad = TmpPath("ahead_bad.alidx");
  int compared = 0;
  for (size_t n = 0; n < whole.size(); n += whole.size() / 23 + 1) {
    for (int flip = 0; flip < 2; flip++) {
      std::vector<unsigned char> v(whole.begin(), flip ? whole.end() : whole.begin() + n);
      if (flip && n >= 7) v[n] ^= 0x40;
      WriteBytes(bad, v);
      int r1 = 0, r2 = 0;
      uint64_t s1 = 0, s2 = 0;
      int plain = ReadEverything(bad, &r1, &s1, false);
      std::string plain_msg = al_last_error();
      int ahead = ReadEverything(bad, &r2, &s2, true);
      EXPECT_EQ(plain, ahead) << "at " << n << (flip ? " flipped" : " cut");
      if (plain < 0) {
        EXPECT_EQ(plain_msg, std::string(al_last_error()));
      }
      EXPECT_EQ(r1, r2);
      EXPECT_EQ(s1, s2);
      compared++;
    }
  }
  EXPECT_GT(compared, 40);
}

TEST(PbioReadAhead, ClosingEarlyStopsTheThread) {
  std::string path = TmpPath("ahead_early.alidx");
  WriteIndex(path, 30, 3000);
  for (int k = 0; k < 4; k++) {
    pbio_reader *r = nullptr;
    ASSERT_EQ(pbio_reader_open(&r, path.c_str(), AL_KIND_INDEX), AL_OK);
    ASSERT_EQ(pbio_reader_read_ahead(r), AL_OK);
    for (int i = 0; i < k; i++) {
      uint32_t tag;
      ProtobufCMessage *msg;
      ASSERT_EQ(pbio_read_any(r, &tag, &msg), AL_OK);
    }
    pbio_reader_close(r); // the thread may be blocked on a full queue: must not hang or leak
  }
}

TEST(Pbio, TruncatedAtEveryCutIsAnErrorNeverACrash) {
  std::string path = TmpPath("whole.alidx");
  WriteIndex(path, 4, 300);
  std::vector<unsigned char> whole = ReadBytes(path);
  ASSERT_GT(whole.size(), 100u);
  std::string cut = TmpPath("cut.alidx");
  // Every cut point short of the whole file must fail (never AL_EOF, never a crash).
  size_t step = whole.size() / 97 + 1;
  int checked = 0;
  for (size_t n = 0; n < whole.size(); n += step) {
    WriteBytes(cut, std::vector<unsigned char>(whole.begin(), whole.begin() + n));
    int records = 0;
    uint64_t samples = 0;
    int rc = ReadEverything(cut, &records, &samples);
    EXPECT_LT(rc, 0) << "cut at " << n << " of " << whole.size() << " read as complete";
    EXPECT_TRUE(altest::ErrorContains(cut));
    checked++;
  }
  // The last byte matters too (frame end mark / checksum).
  WriteBytes(cut, std::vector<unsigned char>(whole.begin(), whole.end() - 1));
  int records = 0;
  uint64_t samples = 0;
  EXPECT_LT(ReadEverything(cut, &records, &samples), 0);
  EXPECT_GT(checked, 50);
}

TEST(Pbio, FlippedByteIsDetected) {
  std::string path = TmpPath("flip_src.alidx");
  WriteIndex(path, 2, 500);
  std::vector<unsigned char> whole = ReadBytes(path);
  std::string bad = TmpPath("flip.alidx");
  int detected = 0, tried = 0;
  // Flip one bit at spread-out positions past the 7-byte frame header.
  for (size_t pos = 7; pos < whole.size(); pos += whole.size() / 41 + 1) {
    std::vector<unsigned char> v = whole;
    v[pos] ^= 0x10;
    WriteBytes(bad, v);
    int records = 0;
    uint64_t samples = 0;
    int rc = ReadEverything(bad, &records, &samples);
    tried++;
    if (rc < 0) detected++;
  }
  EXPECT_EQ(detected, tried) << "a flipped byte went unnoticed";
  // The message says what kind of damage it is.
  std::vector<unsigned char> v = whole;
  v[whole.size() / 2] ^= 0x01;
  WriteBytes(bad, v);
  int records = 0;
  uint64_t samples = 0;
  EXPECT_EQ(ReadEverything(bad, &records, &samples), AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("corrupt LZ4 frame"));
}

// A damaged block is located: the message names the file bytes of the LZ4 block that failed
// its checksum (the file is fed to LZ4F one block at a time), not the start of the read buffer.
TEST(Pbio, FlippedByteIsLocatedToItsBlock) {
  std::string path = TmpPath("flip_loc_src.alidx");
  WriteIndex(path, 64, 8000); // several 4 MiB blocks of records
  std::vector<unsigned char> whole = ReadBytes(path);
  std::string bad = TmpPath("flip_loc.alidx");
  uint64_t lo_seen = 0;
  for (size_t pos : {whole.size() / 3, whole.size() * 2 / 3, whole.size() - 100}) {
    std::vector<unsigned char> v = whole;
    v[pos] ^= 0x10;
    WriteBytes(bad, v);
    int records = 0;
    uint64_t samples = 0;
    EXPECT_EQ(ReadEverything(bad, &records, &samples), AL_EFORMAT);
    std::string m = al_last_error();
    unsigned long long lo = 0, hi = 0;
    size_t at = m.find("damage in file bytes ");
    ASSERT_NE(at, std::string::npos) << m;
    ASSERT_EQ(std::sscanf(m.c_str() + at, "damage in file bytes %llu..%llu", &lo, &hi), 2) << m;
    EXPECT_LE(lo, pos) << m;
    EXPECT_GE(hi, pos) << m;
    EXPECT_LT(hi, whole.size()) << m;
    EXPECT_LE(hi - lo, (4u << 20) + 16) << m; // one block, its size field and checksum
    lo_seen = std::max<uint64_t>(lo_seen, lo);
  }
  EXPECT_GT(lo_seen, 7u); // a later block: not the start of the file
  al_clear_error();
}

TEST(Pbio, WrongFormatVersion) {
  std::string path = TmpPath("v99.alidx");
  WriteIndex(path, 1, 10, 99);
  pbio_reader *r = nullptr;
  EXPECT_EQ(pbio_reader_open(&r, path.c_str(), AL_KIND_INDEX), AL_EVERSION);
  std::string msg = al_last_error();
  EXPECT_TRUE(altest::Contains(msg, "format version 99"));
  EXPECT_TRUE(altest::Contains(msg, path));
}

TEST(Pbio, WrongKind) {
  std::string path = TmpPath("kind.alidx");
  WriteIndex(path, 1, 10);
  pbio_reader *r = nullptr;
  EXPECT_EQ(pbio_reader_open(&r, path.c_str(), AL_KIND_MANIFEST), AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("is a index file, expected a manifest"));
}

TEST(Pbio, SingleMessageHelpers) {
  std::string path = TmpPath("cost.alcost");
  Adaptiveload__CostModel cm = ADAPTIVELOAD__COST_MODEL__INIT;
  double params[3] = {1.5, 2e-5, 3e-10};
  cm.family = const_cast<char *>("poly2");
  cm.n_params = 3;
  cm.params = params;
  ASSERT_EQ(pbio_save_one(path.c_str(), AL_KIND_COST, AL_REC_COST_MODEL, &cm.base), AL_OK);
  ProtobufCMessage *m = nullptr;
  ASSERT_EQ(pbio_load_one(path.c_str(), AL_KIND_COST, AL_REC_COST_MODEL,
                          &adaptiveload__cost_model__descriptor, &m),
            AL_OK)
      << al_last_error();
  auto *got = reinterpret_cast<Adaptiveload__CostModel *>(m);
  EXPECT_STREQ(got->family, "poly2");
  ASSERT_EQ(got->n_params, 3u);
  EXPECT_EQ(got->params[2], 3e-10);
  protobuf_c_message_free_unpacked(m, nullptr);
}

TEST(Pbio, BadArguments) {
  pbio_writer *w = nullptr;
  EXPECT_EQ(pbio_writer_open(&w, nullptr, AL_KIND_INDEX), AL_EINVAL);
  std::string path = TmpPath("args.alidx");
  ASSERT_EQ(pbio_writer_open(&w, path.c_str(), AL_KIND_INDEX), AL_OK);
  EXPECT_EQ(pbio_write(w, 0, "x", 1), AL_EINVAL);
  pbio_writer_abort(w);
  EXPECT_EQ(pbio_writer_open(&w, "/nonexistent-dir/x.alidx", AL_KIND_INDEX), AL_EIO);
  EXPECT_TRUE(altest::ErrorContains("/nonexistent-dir/x.alidx"));
}

} // namespace
