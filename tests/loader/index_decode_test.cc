// The hand-written IndexChunk decoder (loader/index_decode.c) against protobuf-c: the same
// values on valid records, the same verdict on every truncation and every one-byte change of
// them, and hand-made malformed records (varints, lengths, wire types, unknown fields).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/loader/index_fixtures.h"

extern "C" {
#include "common/al_status.h"
#include "loader/al_index.h"
#include "loader/index_decode_internal.h"
#include "proto/adaptiveload.pb-c.h"
#include "proto/pbio_internal.h"
}

using altest::TmpPath;

namespace {

typedef std::vector<uint8_t> Bytes; // (shadows altest::Bytes: the same type)

struct MemberView {
  std::string ext, dtype;
  uint64_t offset, size, data_offset;
  int lz4;
  std::vector<uint64_t> shape; // the first THEADER_MAX_DIMS
  size_t n_shape;
};
struct SampleView {
  std::string key;
  uint32_t shard, width, height, frames;
  uint32_t fps_bits;
  size_t n_members;
  std::vector<MemberView> members;
};

bool operator==(const MemberView &a, const MemberView &b) {
  return a.ext == b.ext && a.dtype == b.dtype && a.offset == b.offset && a.size == b.size &&
         a.data_offset == b.data_offset && a.lz4 == b.lz4 && a.shape == b.shape &&
         a.n_shape == b.n_shape;
}
bool operator==(const SampleView &a, const SampleView &b) {
  return a.key == b.key && a.shard == b.shard && a.width == b.width && a.height == b.height &&
         a.frames == b.frames && a.fps_bits == b.fps_bits && a.n_members == b.n_members &&
         a.members == b.members;
}

int Collect(void *ctx, const idec_sample *s) {
  auto *out = static_cast<std::vector<SampleView> *>(ctx);
  SampleView v;
  v.key.assign(s->key, s->key_len);
  v.shard = s->shard;
  v.width = s->width;
  v.height = s->height;
  v.frames = s->frames;
  std::memcpy(&v.fps_bits, &s->fps, 4);
  v.n_members = s->n_members;
  for (size_t j = 0; j < s->n_members && j < IDEC_MEMBERS_KEPT; j++) {
    const idec_member *m = &s->members[j];
    MemberView mv;
    mv.ext.assign(m->ext, m->ext_len);
    mv.dtype.assign(m->dtype, m->dtype_len);
    mv.offset = m->offset;
    mv.size = m->size;
    mv.data_offset = m->data_offset;
    mv.lz4 = m->lz4;
    mv.n_shape = m->n_shape;
    for (size_t k = 0; k < m->n_shape && k < THEADER_MAX_DIMS; k++) mv.shape.push_back(m->shape[k]);
    v.members.push_back(mv);
  }
  out->push_back(v);
  return 0;
}

// What protobuf-c makes of the record, as views (C strings read up to their NUL).
// Returns false when protobuf-c refuses it; *other when it holds shards/rejected/warnings.
bool ProtobufC(const Bytes &b, std::vector<SampleView> *out, bool *other) {
  Adaptiveload__IndexChunk *c = adaptiveload__index_chunk__unpack(nullptr, b.size(), b.data());
  if (!c) return false;
  *other = c->n_shards || c->n_rejected || c->n_warnings;
  for (size_t i = 0; i < c->n_samples; i++) {
    const Adaptiveload__Sample *s = c->samples[i];
    SampleView v;
    v.key = s->key;
    v.shard = s->shard;
    v.width = s->width;
    v.height = s->height;
    v.frames = s->frames;
    std::memcpy(&v.fps_bits, &s->fps, 4);
    v.n_members = s->n_members;
    for (size_t j = 0; j < s->n_members; j++) {
      const Adaptiveload__Member *m = s->members[j];
      MemberView mv;
      mv.ext = m->ext;
      mv.dtype = m->dtype ? m->dtype : "";
      mv.offset = m->offset;
      mv.size = m->size;
      mv.data_offset = m->data_offset;
      mv.lz4 = m->lz4 ? 1 : 0;
      mv.n_shape = m->n_shape;
      for (size_t k = 0; k < m->n_shape && k < THEADER_MAX_DIMS; k++)
        mv.shape.push_back(m->shape[k]);
      v.members.push_back(mv);
    }
    out->push_back(v);
  }
  adaptiveload__index_chunk__free_unpacked(c, nullptr);
  return true;
}

// The decoder's verdict: AL_OK, IDEC_OTHER or AL_EFORMAT (with err).
int Hand(const Bytes &b, std::vector<SampleView> *out, idec_error *err) {
  idec_scratch scr = {nullptr, 0};
  *err = {0, nullptr};
  static const uint8_t empty = 0;
  int rc = idec_index_chunk(b.empty() ? &empty : b.data(), b.size(), &scr, Collect, out, err);
  idec_scratch_free(&scr);
  return rc;
}

// Both decoders agree: refuse together, or accept with the same samples.
void ExpectSame(const Bytes &b, const std::string &what) {
  std::vector<SampleView> want, got;
  bool other = false;
  bool ok = ProtobufC(b, &want, &other);
  idec_error err;
  int rc = Hand(b, &got, &err);
  if (rc == IDEC_OTHER) { // the loader hands it to protobuf-c: nothing to compare
    EXPECT_TRUE(!ok || other) << what;
    return;
  }
  if (ok) {
    ASSERT_EQ(rc, AL_OK) << what << ": protobuf-c accepts, the decoder says " << rc << " "
                         << (err.what ? err.what : "") << " at " << err.offset;
    EXPECT_TRUE(want == got) << what;
  } else {
    ASSERT_EQ(rc, AL_EFORMAT) << what << ": protobuf-c refuses, the decoder accepts";
    ASSERT_NE(err.what, nullptr) << what;
    EXPECT_LE(err.offset, b.size()) << what;
  }
}

Bytes Pack(const Adaptiveload__IndexChunk &c) {
  Bytes b(adaptiveload__index_chunk__get_packed_size(&c));
  adaptiveload__index_chunk__pack(&c, b.data());
  return b;
}

// A chunk of three samples: typed and untyped members, lz4, fps, a large offset, an empty key.
Bytes ValidChunk() {
  static uint64_t shape[4] = {16, 21, 60, 104};
  static uint64_t shape2[3] = {1, 512, 4096};
  Adaptiveload__Member m[5];
  Adaptiveload__Member *mp[5];
  for (int i = 0; i < 5; i++) {
    adaptiveload__member__init(&m[i]);
    mp[i] = &m[i];
  }
  m[0].ext = (char *)"json";
  m[0].offset = 512;
  m[0].size = 97;
  m[1].ext = (char *)"latent.npy";
  m[1].offset = (1ull << 47) + 3;
  m[1].size = 16ull * 21 * 60 * 104 * 2;
  m[1].dtype = (char *)"float16";
  m[1].n_shape = 4;
  m[1].shape = shape;
  m[1].data_offset = 128;
  m[2].ext = (char *)"json.lz4";
  m[2].offset = 70000;
  m[2].size = 300;
  m[2].lz4 = 1;
  m[3].ext = (char *)"t5.safetensors";
  m[3].offset = 90000;
  m[3].size = 4 * 512 * 4096;
  m[3].dtype = (char *)"bfloat16";
  m[3].n_shape = 3;
  m[3].shape = shape2;
  m[3].data_offset = 88;
  m[4].ext = (char *)"txt";
  m[4].offset = 0;
  m[4].size = 0;
  Adaptiveload__Sample s[3];
  Adaptiveload__Sample *sp[3];
  for (int i = 0; i < 3; i++) {
    adaptiveload__sample__init(&s[i]);
    sp[i] = &s[i];
  }
  s[0].key = (char *)"000000-00000001";
  s[0].shard = 0;
  s[0].members = mp;
  s[0].n_members = 2;
  s[0].width = 832;
  s[0].height = 480;
  s[0].frames = 81;
  s[0].fps = 16.0f;
  s[1].key = (char *)"";
  s[1].shard = 70000;
  s[1].members = mp + 2;
  s[1].n_members = 3;
  s[1].width = 4000000000u;
  s[1].height = 1;
  s[1].frames = 1;
  s[2].key = (char *)"k";
  Adaptiveload__IndexChunk c = ADAPTIVELOAD__INDEX_CHUNK__INIT;
  c.samples = sp;
  c.n_samples = 3;
  return Pack(c);
}

// Wire helpers for hand-made records.
void Varint(Bytes *b, uint64_t v) {
  while (v >= 0x80) {
    b->push_back((uint8_t)(v | 0x80));
    v >>= 7;
  }
  b->push_back((uint8_t)v);
}
void Tag(Bytes *b, uint32_t field, unsigned wt) { Varint(b, (uint64_t)field << 3 | wt); }
void Len(Bytes *b, uint32_t field, const Bytes &payload) {
  Tag(b, field, 2);
  Varint(b, payload.size());
  b->insert(b->end(), payload.begin(), payload.end());
}
Bytes Str(const char *s) { return Bytes(s, s + std::strlen(s)); }
// A chunk of one sample with the given Sample payload.
Bytes OneSample(const Bytes &sample) {
  Bytes b;
  Len(&b, 2, sample);
  return b;
}

TEST(IndexDecode, ValidChunkMatchesProtobufC) {
  Bytes b = ValidChunk();
  std::vector<SampleView> want, got;
  bool other = true;
  ASSERT_TRUE(ProtobufC(b, &want, &other));
  EXPECT_FALSE(other);
  idec_error err;
  ASSERT_EQ(Hand(b, &got, &err), AL_OK);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_TRUE(want == got);
  EXPECT_EQ(got[0].key, "000000-00000001");
  EXPECT_EQ(got[0].members[1].shape, (std::vector<uint64_t>{16, 21, 60, 104}));
  EXPECT_EQ(got[1].width, 4000000000u);
  EXPECT_EQ(got[1].members[0].lz4, 1);
  EXPECT_EQ(got[1].members[1].dtype, "bfloat16");
  EXPECT_EQ(got[2].n_members, 0u);
}

TEST(IndexDecode, EveryTruncationAndByteChangeAgreesWithProtobufC) {
  Bytes b = ValidChunk();
  for (size_t n = 0; n < b.size(); n++)
    ExpectSame(Bytes(b.begin(), b.begin() + n), "truncated to " + std::to_string(n));
  for (size_t i = 0; i < b.size(); i++) {
    for (int v = 0; v < 256; v++) {
      if (v == b[i]) continue;
      Bytes m = b;
      m[i] = (uint8_t)v;
      ExpectSame(m, "byte " + std::to_string(i) + " = " + std::to_string(v));
    }
  }
}

TEST(IndexDecode, MalformedVarints) {
  // An 11-byte varint for width: protobuf-c allows at most 10.
  Bytes s;
  Tag(&s, 4, 0);
  for (int i = 0; i < 10; i++) s.push_back(0x81);
  s.push_back(0x01);
  Bytes b = OneSample(s);
  std::vector<SampleView> got;
  idec_error err;
  EXPECT_EQ(Hand(b, &got, &err), AL_EFORMAT);
  EXPECT_STREQ(err.what, "unterminated varint");
  EXPECT_TRUE(got.empty());
  ExpectSame(b, "11-byte varint");
  // Ten bytes are fine; a uint32 keeps the low 32 bits, as protobuf-c does.
  Bytes s10;
  Tag(&s10, 4, 0);
  Varint(&s10, 0xFFFFFFFFFFFFFFFFull);
  got.clear();
  ASSERT_EQ(Hand(OneSample(s10), &got, &err), AL_OK);
  EXPECT_EQ(got[0].width, 0xFFFFFFFFu);
  ExpectSame(OneSample(s10), "10-byte varint");
  Bytes s5;
  Tag(&s5, 5, 0);
  Varint(&s5, 0x1234567890ull);
  got.clear();
  ASSERT_EQ(Hand(OneSample(s5), &got, &err), AL_OK);
  EXPECT_EQ(got[0].height, 0x34567890u);
  ExpectSame(OneSample(s5), "uint32 overflow");
  // A varint cut by the end of the record, and by the end of its sample.
  Bytes cut = {0x12, 0x02, 0x20, 0x80};
  EXPECT_EQ(Hand(cut, &got, &err), AL_EFORMAT);
  ExpectSame(cut, "cut varint");
  // A packed shape whose last varint runs off its field.
  Bytes m;
  Len(&m, 1, Str("latent.npy"));
  Len(&m, 5, Str("float16"));
  Len(&m, 6, Bytes{16, 21, 0x80});
  Bytes sm;
  Len(&sm, 3, m);
  EXPECT_EQ(Hand(OneSample(sm), &got, &err), AL_EFORMAT);
  EXPECT_STREQ(err.what, "bad packed varint");
  ExpectSame(OneSample(sm), "cut packed varint");
}

TEST(IndexDecode, LengthsPastTheEndAndTruncatedFields) {
  std::vector<SampleView> got;
  idec_error err;
  // The sample's length says 100 bytes; 3 follow.
  Bytes b = {0x12, 100, 0x20, 0x01, 0x28};
  EXPECT_EQ(Hand(b, &got, &err), AL_EFORMAT);
  EXPECT_STREQ(err.what, "length past the end");
  EXPECT_EQ(err.offset, 1u);
  ExpectSame(b, "sample past the end");
  // A key whose length runs past its sample (but not past the record).
  Bytes s = {0x0a, 10, 'a', 'b'};
  Bytes r = OneSample(s);
  r.insert(r.end(), {0x48, 0x01, 0x48, 0x01, 0x48, 0x01, 0x48, 0x01}); // unknown field 9 after
  EXPECT_EQ(Hand(r, &got, &err), AL_EFORMAT);
  ExpectSame(r, "key past its sample");
  // A 6-byte length prefix, a length over INT_MAX, a 32-bit and a 64-bit field cut short.
  Bytes six = {0x12, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00};
  ExpectSame(six, "6-byte length");
  EXPECT_EQ(Hand(six, &got, &err), AL_EFORMAT);
  EXPECT_STREQ(err.what, "bad length prefix");
  Bytes huge = {0x12, 0xff, 0xff, 0xff, 0xff, 0x0f};
  ExpectSame(huge, "length over INT_MAX");
  EXPECT_EQ(Hand(huge, &got, &err), AL_EFORMAT);
  Bytes f32 = OneSample(Bytes{0x3d, 0x00, 0x00}); // fps with 2 of its 4 bytes
  ExpectSame(f32, "cut fixed32");
  EXPECT_EQ(Hand(f32, &got, &err), AL_EFORMAT);
  Bytes f64 = OneSample(Bytes{0x41, 1, 2, 3}); // unknown field 8, 64-bit, cut
  ExpectSame(f64, "cut fixed64");
  EXPECT_EQ(Hand(f64, &got, &err), AL_EFORMAT);
}

TEST(IndexDecode, WireTypesAndTags) {
  std::vector<SampleView> got;
  idec_error err;
  // Field number 0, groups (3, 4) and the unused wire types 6 and 7 are refused.
  for (Bytes b : {Bytes{0x02, 0x00}, Bytes{0x13}, Bytes{0x14}, Bytes{0x16}, Bytes{0x17},
                  OneSample(Bytes{0x00, 0x01}), OneSample(Bytes{0x23})}) {
    got.clear();
    EXPECT_EQ(Hand(b, &got, &err), AL_EFORMAT);
    ExpectSame(b, "bad tag");
  }
  // A known field with the wrong wire type: key as a varint, shard as a string, fps as a varint,
  // a sample as a varint, a member as fixed32.
  for (Bytes s :
       {Bytes{0x08, 0x01}, Bytes{0x12, 0x01, 'x'}, Bytes{0x38, 0x01}, Bytes{0x1d, 0, 0, 0, 0}}) {
    got.clear();
    EXPECT_EQ(Hand(OneSample(s), &got, &err), AL_EFORMAT);
    ExpectSame(OneSample(s), "wrong wire type");
  }
  Bytes sv = {0x10, 0x05};
  EXPECT_EQ(Hand(sv, &got, &err), AL_EFORMAT);
  ExpectSame(sv, "sample as varint");
  // A bool of any wire type: protobuf-c reads its bytes (the prefix of a string included).
  Bytes m;
  Len(&m, 4, Bytes{0x00}); // lz4 as a 1-byte string holding 0: the prefix byte 1 makes it true
  Bytes sm;
  Len(&sm, 3, m);
  got.clear();
  ASSERT_EQ(Hand(OneSample(sm), &got, &err), AL_OK);
  EXPECT_EQ(got[0].members[0].lz4, 1);
  ExpectSame(OneSample(sm), "bool as string");
  // A multi-byte encoding of a small tag (0x90 0x00 is field 2, wire type 0, in 2 bytes).
  ExpectSame(Bytes{0x12, 0x04, 0xa0, 0x00, 0x07, 0x00}, "long tag");
}

TEST(IndexDecode, UnknownFieldsAreSkipped) {
  Bytes s;
  Tag(&s, 99, 0); // unknown varint
  Varint(&s, 123456789);
  Len(&s, 1, Str("key-1"));
  Tag(&s, 100, 1); // unknown fixed64
  for (int i = 0; i < 8; i++) s.push_back((uint8_t)i);
  Len(&s, 101, Str("ignored")); // unknown string
  Tag(&s, 102, 5);              // unknown fixed32
  for (int i = 0; i < 4; i++) s.push_back(0xff);
  Tag(&s, 4, 0);
  Varint(&s, 640);
  Bytes m;
  Len(&m, 1, Str("json"));
  Tag(&m, 12345, 0);
  Varint(&m, 1);
  Tag(&m, 6, 0); // shape: one plain varint, then a packed run, then another plain one
  Varint(&m, 3);
  Len(&m, 6, Bytes{4, 5});
  Tag(&m, 6, 0);
  Varint(&m, 6);
  Len(&m, 5, Str("uint8"));
  Len(&s, 3, m);
  Bytes b;
  Tag(&b, 7, 0); // unknown field of the chunk
  Varint(&b, 5);
  Len(&b, 2, s);
  Len(&b, 9, Str("chunk-level unknown"));
  std::vector<SampleView> got;
  idec_error err;
  ASSERT_EQ(Hand(b, &got, &err), AL_OK);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].key, "key-1");
  EXPECT_EQ(got[0].width, 640u);
  ASSERT_EQ(got[0].members.size(), 1u);
  EXPECT_EQ(got[0].members[0].shape, (std::vector<uint64_t>{3, 4, 5, 6}));
  ExpectSame(b, "unknown fields");
}

TEST(IndexDecode, LastValueWinsAndStringsStopAtNul) {
  Bytes s;
  Len(&s, 1, Str("first"));
  Tag(&s, 4, 0);
  Varint(&s, 1);
  Len(&s, 1, Bytes{'a', 'b', 0, 'c'});
  Tag(&s, 4, 0);
  Varint(&s, 2);
  std::vector<SampleView> got;
  idec_error err;
  ASSERT_EQ(Hand(OneSample(s), &got, &err), AL_OK);
  EXPECT_EQ(got[0].key, "ab");
  EXPECT_EQ(got[0].width, 2u);
  ExpectSame(OneSample(s), "last wins");
}

TEST(IndexDecode, OtherKindsGoToProtobufC) {
  Adaptiveload__Shard sh = ADAPTIVELOAD__SHARD__INIT;
  sh.path = (char *)"/x.tar";
  Adaptiveload__Shard *shp = &sh;
  Adaptiveload__IndexChunk c = ADAPTIVELOAD__INDEX_CHUNK__INIT;
  c.shards = &shp;
  c.n_shards = 1;
  std::vector<SampleView> got;
  idec_error err;
  EXPECT_EQ(Hand(Pack(c), &got, &err), IDEC_OTHER);
  EXPECT_TRUE(got.empty());
  // An empty chunk holds no samples and nothing else.
  EXPECT_EQ(Hand(Bytes{}, &got, &err), AL_OK);
}

TEST(IndexDecode, TooManyMembersAreCountedNotKept) {
  Bytes m;
  Len(&m, 1, Str("j"));
  Bytes s;
  for (size_t i = 0; i < IDEC_MEMBERS_KEPT + 5; i++) Len(&s, 3, m);
  std::vector<SampleView> got;
  idec_error err;
  ASSERT_EQ(Hand(OneSample(s), &got, &err), AL_OK);
  EXPECT_EQ(got[0].n_members, IDEC_MEMBERS_KEPT + 5);
  EXPECT_EQ(got[0].members.size(), (size_t)IDEC_MEMBERS_KEPT);
}

// A whole index file whose sample record is broken: the load fails naming file, record, byte.
TEST(IndexDecode, LoadNamesFileRecordAndByte) {
  std::string path = TmpPath("decode_bad.alidx");
  pbio_writer *w = nullptr;
  ASSERT_EQ(pbio_writer_open(&w, path.c_str(), AL_KIND_INDEX), AL_OK);
  Adaptiveload__IndexHeader h = ADAPTIVELOAD__INDEX_HEADER__INIT;
  ASSERT_EQ(pbio_write_msg(w, AL_REC_INDEX_HEADER, &h.base), AL_OK);
  Adaptiveload__Shard sh = ADAPTIVELOAD__SHARD__INIT;
  sh.path = (char *)"/x.tar";
  sh.sample_count = 1;
  Adaptiveload__Shard *shp = &sh;
  Adaptiveload__IndexChunk c = ADAPTIVELOAD__INDEX_CHUNK__INIT;
  c.shards = &shp;
  c.n_shards = 1;
  ASSERT_EQ(pbio_write_msg(w, AL_REC_INDEX_CHUNK, &c.base), AL_OK);
  Bytes bad = {0x12, 0x03, 0x0a, 0x05, 'k'}; // key length 5 inside a 3-byte sample
  ASSERT_EQ(pbio_write(w, AL_REC_INDEX_CHUNK, bad.data(), bad.size()), AL_OK);
  ASSERT_EQ(pbio_writer_close(w), AL_OK);
  al_index *idx = nullptr;
  EXPECT_EQ(al_index_load(&idx, path.c_str()), AL_EFORMAT);
  EXPECT_EQ(idx, nullptr);
  std::string e = al_last_error();
  EXPECT_NE(e.find(path), std::string::npos) << e;
  EXPECT_NE(e.find("record 2"), std::string::npos) << e;
  EXPECT_NE(e.find("length past the end at byte 3"), std::string::npos) << e;
}

} // namespace

namespace {

// An index large enough for the loader's prefault thread (arrays of 32 MB and more): what
// loads is what was saved, sample for sample, with the ext cache crossing member orders.
TEST(IndexDecode, LargeIndexRoundTrip) {
  const size_t n = 900000; // 36 MB of sample records
  al_index *idx = nullptr;
  ASSERT_EQ(al_index_new(&idx), AL_OK);
  uint32_t s0 = 0;
  ASSERT_EQ(al_index_add_shard(idx, "/data/big.tar", 1u << 30, 1, &s0), AL_OK);
  for (size_t i = 0; i < n; i++) {
    char key[32];
    std::snprintf(key, sizeof key, "k%08zu", i);
    al_member_info m[3];
    std::memset(m, 0, sizeof m);
    m[0].ext = i % 7 == 0 ? "latent" : "json"; // member 0's extension changes now and then
    m[0].offset = 512 + i * 1024;
    m[0].size = 100 + i % 13;
    m[1].ext = i % 7 == 0 ? "json" : "latent";
    m[1].offset = 1024 + i * 1024;
    m[1].size = 1000;
    m[2].ext = "txt";
    m[2].offset = 1536 + i * 1024;
    m[2].size = 7;
    ASSERT_EQ(al_index_add_sample(idx, key, 0, 64 + (uint32_t)(i % 5) * 64, 480, i % 3 ? 81 : 1,
                                  0.0f, m, i % 11 == 0 ? 3 : 2),
              AL_OK);
  }
  std::string path = TmpPath("decode_large.alidx");
  ASSERT_EQ(al_index_save(idx, path.c_str()), AL_OK);
  al_index *back = nullptr;
  ASSERT_EQ(al_index_load(&back, path.c_str()), AL_OK) << al_last_error();
  ASSERT_EQ(al_index_sample_count(back), n);
  EXPECT_EQ(al_index_fingerprint(back), al_index_fingerprint(idx));
  for (size_t i = 0; i < n; i += 997) {
    al_sample_info a = AL_SAMPLE_INFO_INIT, b = AL_SAMPLE_INFO_INIT;
    ASSERT_EQ(al_index_sample(idx, i, &a), AL_OK);
    ASSERT_EQ(al_index_sample(back, i, &b), AL_OK);
    EXPECT_STREQ(a.key, b.key);
    EXPECT_EQ(a.width, b.width);
    EXPECT_EQ(a.frames, b.frames);
    ASSERT_EQ(a.n_members, b.n_members);
    for (size_t j = 0; j < a.n_members; j++) {
      al_member_info ma, mb;
      ASSERT_EQ(al_index_member(idx, i, j, &ma), AL_OK);
      ASSERT_EQ(al_index_member(back, i, j, &mb), AL_OK);
      EXPECT_STREQ(ma.ext, mb.ext) << i << " " << j;
      EXPECT_EQ(ma.offset, mb.offset);
      EXPECT_EQ(ma.size, mb.size);
    }
  }
  al_index_free(back);
  al_index_free(idx);
  std::remove(path.c_str());
}

} // namespace
