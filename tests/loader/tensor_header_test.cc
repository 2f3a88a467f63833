// loader/tensor_header.c: .npy and .safetensors headers of typed payload members, against
// headers written by hand here (the format documents' layout) and, when Debian's python3 has
// numpy, against files numpy itself wrote.
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/common/test_util.h"

extern "C" {
#include "common/al_status.h"
#include "loader/al_members.h"
#include "loader/tensor_header_internal.h"
}

namespace {

using altest::Bytes;

// An .npy member: magic, version, length field, the dict padded with spaces to a multiple of
// 64 and a newline, then `data` bytes (zeros).
Bytes Npy(const std::string &dict, uint64_t data, int major = 1, size_t align = 64) {
  Bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', (unsigned char)major, 0};
  size_t pre = major == 1 ? 10 : 12;
  std::string h = dict;
  while ((pre + h.size() + 1) % align != 0) h += ' ';
  h += '\n';
  size_t n = h.size();
  b.push_back((unsigned char)(n & 0xff));
  b.push_back((unsigned char)(n >> 8 & 0xff));
  if (major != 1) {
    b.push_back((unsigned char)(n >> 16 & 0xff));
    b.push_back((unsigned char)(n >> 24 & 0xff));
  }
  b.insert(b.end(), h.begin(), h.end());
  b.resize(b.size() + data, 0);
  return b;
}

std::string NpyDict(const std::string &descr, const std::string &shape, bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
         ", 'shape': " + shape + ", }";
}

// A safetensors member: 8-byte little-endian length, the JSON, `data` bytes.
Bytes Safetensors(const std::string &json, uint64_t data) {
  Bytes b(8);
  uint64_t n = json.size();
  for (int k = 0; k < 8; k++) b[k] = (unsigned char)(n >> (8 * k));
  b.insert(b.end(), json.begin(), json.end());
  b.resize(b.size() + data, 0);
  return b;
}

struct Parsed {
  int rc;
  theader h;
  size_t need;
  std::string err;
};

// Parses the whole member (have = size).
Parsed Parse(theader_kind kind, const Bytes &b, const char *name = nullptr,
             uint64_t member_size = UINT64_MAX) {
  Parsed p;
  std::memset(&p.h, 0xAB, sizeof p.h); // poison
  p.need = 12345;
  al_clear_error();
  p.rc = theader_parse(kind, b.data(), b.size(), member_size == UINT64_MAX ? b.size() : member_size,
                       name, &p.h, &p.need);
  p.err = al_last_error();
  return p;
}

void ExpectZeroed(const theader &h) {
  theader z;
  std::memset(&z, 0, sizeof z);
  EXPECT_EQ(0, std::memcmp(&h, &z, sizeof z));
}

TEST(TensorHeader, KindOf) {
  EXPECT_EQ(THEADER_KIND_NPY, theader_kind_of("npy"));
  EXPECT_EQ(THEADER_KIND_NPY, theader_kind_of("latent.npy"));
  EXPECT_EQ(THEADER_KIND_NPY, theader_kind_of("t5.npy.lz4"));
  EXPECT_EQ(THEADER_KIND_NPY, theader_kind_of("npy.lz4"));
  EXPECT_EQ(THEADER_KIND_SAFETENSORS, theader_kind_of("safetensors"));
  EXPECT_EQ(THEADER_KIND_SAFETENSORS, theader_kind_of("latent.safetensors"));
  EXPECT_EQ(THEADER_KIND_SAFETENSORS, theader_kind_of("x.safetensors.lz4"));
  EXPECT_EQ(THEADER_KIND_NONE, theader_kind_of("json"));
  EXPECT_EQ(THEADER_KIND_NONE, theader_kind_of("latent"));
  EXPECT_EQ(THEADER_KIND_NONE, theader_kind_of("xnpy"));
  EXPECT_EQ(THEADER_KIND_NONE, theader_kind_of("npy.gz"));
  EXPECT_EQ(THEADER_KIND_NONE, theader_kind_of("npyx"));
  EXPECT_EQ(THEADER_KIND_NONE, theader_kind_of("lz4"));
  EXPECT_EQ(THEADER_KIND_NONE, theader_kind_of(".lz4"));
  EXPECT_EQ(THEADER_KIND_NONE, theader_kind_of("NPY"));
  EXPECT_EQ(THEADER_KIND_NONE, theader_kind_of(""));
  EXPECT_EQ(THEADER_KIND_NONE, theader_kind_of(nullptr));
}

TEST(TensorHeader, DtypeNamesRoundTrip) {
  const char *names[] = {"bool",  "uint8",  "int8",    "int16",    "uint16",  "int32",  "uint32",
                         "int64", "uint64", "float16", "bfloat16", "float32", "float64"};
  const size_t sizes[] = {1, 1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8};
  for (int d = THEADER_BOOL; d <= THEADER_F64; d++) {
    EXPECT_STREQ(names[d - 1], theader_dtype_name((theader_dtype)d));
    EXPECT_EQ(sizes[d - 1], theader_dtype_size((theader_dtype)d));
    theader_dtype back = THEADER_NONE;
    ASSERT_EQ(AL_OK, theader_dtype_from_name(names[d - 1], &back));
    EXPECT_EQ(d, back);
  }
  EXPECT_EQ(0u, theader_dtype_size(THEADER_NONE));
  EXPECT_EQ(0u, theader_dtype_size((theader_dtype)99));
  EXPECT_STREQ("?", theader_dtype_name((theader_dtype)99));
  theader_dtype d = THEADER_F32;
  EXPECT_EQ(AL_EFORMAT, theader_dtype_from_name("none", &d));
  EXPECT_EQ(AL_EFORMAT, theader_dtype_from_name("float128", &d));
  EXPECT_EQ(AL_EINVAL, theader_dtype_from_name(nullptr, &d));
}

TEST(TensorHeader, NpyEveryDtype) {
  const struct {
    const char *descr;
    theader_dtype t;
  } cases[] = {{"|b1", THEADER_BOOL}, {"|u1", THEADER_U8},  {"<u1", THEADER_U8},
               {"|i1", THEADER_I8},   {"<i2", THEADER_I16}, {"<u2", THEADER_U16},
               {"<i4", THEADER_I32},  {"<u4", THEADER_U32}, {"<i8", THEADER_I64},
               {"<u8", THEADER_U64},  {"<f2", THEADER_F16}, {"<f4", THEADER_F32},
               {"<f8", THEADER_F64}};
  for (const auto &c : cases) {
    size_t es = theader_dtype_size(c.t);
    Bytes b = Npy(NpyDict(c.descr, "(16, 5, 30, 52)"), 16 * 5 * 30 * 52 * es);
    Parsed p = Parse(THEADER_KIND_NPY, b);
    ASSERT_EQ(AL_OK, p.rc) << c.descr << ": " << p.err;
    EXPECT_EQ(c.t, p.h.dtype) << c.descr;
    ASSERT_EQ(4u, p.h.ndim);
    EXPECT_EQ(16u, p.h.shape[0]);
    EXPECT_EQ(5u, p.h.shape[1]);
    EXPECT_EQ(30u, p.h.shape[2]);
    EXPECT_EQ(52u, p.h.shape[3]);
    for (int i = 4; i < THEADER_MAX_DIMS; i++) EXPECT_EQ(0u, p.h.shape[i]);
    EXPECT_EQ(128u, p.h.data_offset);
    EXPECT_EQ(16u * 5 * 30 * 52 * es, p.h.data_bytes);
  }
}

TEST(TensorHeader, NpyShapesAndVersions) {
  // () is a scalar: one element.
  Parsed p = Parse(THEADER_KIND_NPY, Npy(NpyDict("<f4", "()"), 4));
  ASSERT_EQ(AL_OK, p.rc) << p.err;
  EXPECT_EQ(0u, p.h.ndim);
  EXPECT_EQ(4u, p.h.data_bytes);
  p = Parse(THEADER_KIND_NPY, Npy(NpyDict("<f4", "(7,)"), 28));
  ASSERT_EQ(AL_OK, p.rc) << p.err;
  EXPECT_EQ(1u, p.h.ndim);
  EXPECT_EQ(7u, p.h.shape[0]);
  // A zero dimension: no data at all.
  p = Parse(THEADER_KIND_NPY, Npy(NpyDict("<f8", "(3, 0, 5)"), 0));
  ASSERT_EQ(AL_OK, p.rc) << p.err;
  EXPECT_EQ(0u, p.h.data_bytes);
  // Key order, double quotes, no trailing comma, Python 2 longs, 16-byte alignment.
  p = Parse(THEADER_KIND_NPY,
            Npy("{\"shape\": (2L, 3L), \"fortran_order\": False, \"descr\": \"<i2\"}", 12, 1, 16));
  ASSERT_EQ(AL_OK, p.rc) << p.err;
  EXPECT_EQ(THEADER_I16, p.h.dtype);
  EXPECT_EQ(2u, p.h.ndim);
  EXPECT_EQ(0u, p.h.data_offset % 16);
  // Versions 2.0 and 3.0: a 4-byte length.
  for (int major : {2, 3}) {
    Bytes b = Npy(NpyDict("<f2", "(16, 1, 60, 104)"), 16 * 60 * 104 * 2, major);
    p = Parse(THEADER_KIND_NPY, b);
    ASSERT_EQ(AL_OK, p.rc) << major << ": " << p.err;
    EXPECT_EQ(128u, p.h.data_offset);
    EXPECT_EQ(THEADER_F16, p.h.dtype);
  }
  // Eight dimensions is the most.
  p = Parse(THEADER_KIND_NPY, Npy(NpyDict("|u1", "(1, 1, 1, 1, 1, 1, 1, 2)"), 2));
  ASSERT_EQ(AL_OK, p.rc) << p.err;
  EXPECT_EQ(8u, p.h.ndim);
  EXPECT_EQ(2u, p.h.shape[7]);
}

// Bad headers: AL_EFORMAT with a message naming what is wrong and where, output zeroed.
void ExpectBad(const Bytes &b, const std::string &want, theader_kind kind = THEADER_KIND_NPY,
               const char *name = nullptr, int want_rc = AL_EFORMAT) {
  Parsed p = Parse(kind, b, name);
  EXPECT_EQ(want_rc, p.rc) << want;
  EXPECT_NE(std::string::npos, p.err.find(want)) << "got: " << p.err;
  EXPECT_NE(std::string::npos, p.err.find("byte")) << "no offset: " << p.err;
  ExpectZeroed(p.h);
}

TEST(TensorHeader, NpyBadHeaders) {
  Bytes b = Npy(NpyDict("<f4", "(2,)"), 8);
  Bytes bad = b;
  bad[0] = 'x';
  ExpectBad(bad, "bad magic");
  bad = b;
  bad[6] = 4;
  ExpectBad(bad, "version 4.0");
  bad = b;
  bad[7] = 1;
  ExpectBad(bad, "version 1.1");
  ExpectBad(Npy(NpyDict("<f4", "(2,)", true), 8), "Fortran");
  ExpectBad(Npy(NpyDict(">f4", "(2,)"), 8), "big-endian");
  ExpectBad(Npy(NpyDict("|f4", "(2,)"), 8), "byte order '|'");
  ExpectBad(Npy(NpyDict("<c8", "(2,)"), 16), "unknown dtype '<c8'");
  ExpectBad(Npy(NpyDict("<V2", "(2,)"), 4), "bfloat16");
  ExpectBad(Npy(NpyDict("|O", "(2,)"), 16), "unknown dtype");
  ExpectBad(Npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8),
            "structured");
  ExpectBad(Npy(NpyDict("<f4", "(1, 1, 1, 1, 1, 1, 1, 1, 2)"), 8), "more than 8 dimensions");
  ExpectBad(Npy(NpyDict("<f4", "(-2,)"), 8), "non-negative");
  ExpectBad(Npy(NpyDict("<f4", "(2)"), 8), "trailing comma");
  ExpectBad(Npy(NpyDict("<f4", "[2]"), 8), "tuple");
  ExpectBad(Npy(NpyDict("<f4", "(99999999999999999999,)"), 8), "overflows 64 bits");
  ExpectBad(Npy(NpyDict("<f8", "(4294967296, 4294967296)"), 8), "overflows 64 bits");
  ExpectBad(Npy(NpyDict("<f4", "(3,)"), 8), "give 12 data bytes, the member holds 8");
  ExpectBad(Npy(NpyDict("<f4", "(2,)"), 9), "give 8 data bytes, the member holds 9");
  ExpectBad(Npy("{'descr': '<f4', 'shape': (2,), }", 8), "missing key 'fortran_order'");
  ExpectBad(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8),
            "unexpected key 'x'");
  ExpectBad(Npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8),
            "repeated key 'descr'");
  ExpectBad(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x", 8),
            "bytes after the dict");
  ExpectBad(Npy("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", 8), "True or False");
  ExpectBad(Npy("{'descr' '<f4', 'fortran_order': False, 'shape': (2,)}", 8), "expected ':'");
  // The newline that ends the header is missing.
  bad = b;
  bad[b.size() - 9] = ' ';
  ExpectBad(bad, "newline");
  // The header length runs past the member.
  bad = b;
  bad[9] = 0x10;
  ExpectBad(bad, "runs past the member's end");
  // A version 2 header over the 1 MiB cap.
  bad = Npy(NpyDict("<f4", "(2,)"), 8, 2);
  bad[10] = 0x20; // length 2 MiB + 64
  ExpectBad(bad, "exceeds the limit");
  // Too short to hold the preamble.
  ExpectBad(Bytes{0x93, 'N', 'U'}, "too short");
  // The byte offset points into the dict: "<c8" sits at byte 10 + strlen("{'descr': ").
  Parsed p = Parse(THEADER_KIND_NPY, Npy(NpyDict("<c8", "(2,)"), 16));
  EXPECT_NE(std::string::npos, p.err.find("byte 20:")) << p.err;
}

// Fed a byte at a time, the parser asks for what it needs (AL_ERANGE, *need > have), never
// more than the header, and then parses.
TEST(TensorHeader, IncrementalNeed) {
  std::vector<std::pair<theader_kind, Bytes>> members =
      {{THEADER_KIND_NPY, Npy(NpyDict("<f2", "(16, 3, 4, 5)"), 16 * 3 * 4 * 5 * 2)},
       {THEADER_KIND_NPY, Npy(NpyDict("<f2", "(16, 3, 4, 5)"), 16 * 3 * 4 * 5 * 2, 2)},
       {THEADER_KIND_SAFETENSORS,
        Safetensors("{\"x\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]}}", 12)}};
  for (const auto &m : members) {
    size_t have = 0, calls = 0;
    for (;;) {
      theader h;
      size_t need = 0;
      int rc = theader_parse(m.first, m.second.data(), have, m.second.size(), nullptr, &h, &need);
      if (rc == AL_OK) {
        EXPECT_EQ(have, h.data_offset) << "asked for more than the header";
        EXPECT_EQ(m.second.size(), h.data_offset + h.data_bytes);
        break;
      }
      ASSERT_EQ(AL_ERANGE, rc) << al_last_error();
      ASSERT_GT(need, have);
      ASSERT_LE(need, m.second.size());
      have = need;
      ASSERT_LT(++calls, 4u);
    }
    EXPECT_GE(calls, 2u);
  }
  // have > member_size is clamped: what lies past the member is not read as header.
  Bytes b = Npy(NpyDict("<f4", "(2,)"), 8);
  theader h;
  size_t need = 0;
  EXPECT_EQ(AL_EFORMAT, theader_parse(THEADER_KIND_NPY, b.data(), b.size(), 5, nullptr, &h, &need));
}

TEST(TensorHeader, BadArguments) {
  Bytes b = Npy(NpyDict("<f4", "(2,)"), 8);
  theader h;
  size_t need;
  EXPECT_EQ(AL_EINVAL,
            theader_parse(THEADER_KIND_NONE, b.data(), b.size(), b.size(), nullptr, &h, &need));
  EXPECT_EQ(AL_EINVAL, theader_parse(THEADER_KIND_NPY, nullptr, 5, b.size(), nullptr, &h, &need));
  EXPECT_EQ(AL_EINVAL,
            theader_parse(THEADER_KIND_NPY, b.data(), b.size(), b.size(), nullptr, nullptr, &need));
  EXPECT_EQ(AL_EINVAL,
            theader_parse(THEADER_KIND_NPY, b.data(), b.size(), b.size(), nullptr, &h, nullptr));
}

TEST(TensorHeader, Safetensors) {
  std::string one =
      "{\"__metadata__\":{\"format\":\"pt\"},"
      "\"latent\":{\"dtype\":\"BF16\",\"shape\":[16,21,60,104],\"data_offsets\":[0,4193280]}}";
  Bytes b = Safetensors(one, 16 * 21 * 60 * 104 * 2);
  Parsed p = Parse(THEADER_KIND_SAFETENSORS, b);
  ASSERT_EQ(AL_OK, p.rc) << p.err;
  EXPECT_EQ(THEADER_BF16, p.h.dtype);
  ASSERT_EQ(4u, p.h.ndim);
  EXPECT_EQ(21u, p.h.shape[1]);
  EXPECT_EQ(8 + one.size(), p.h.data_offset);
  EXPECT_EQ(4193280u, p.h.data_bytes);
  // By name, and the name of the only tensor works too.
  p = Parse(THEADER_KIND_SAFETENSORS, b, "latent");
  ASSERT_EQ(AL_OK, p.rc) << p.err;
  ExpectBad(b, "no tensor named 'other'", THEADER_KIND_SAFETENSORS, "other", AL_ENOTFOUND);

  // Two tensors: the name picks one; without it, an error.
  std::string two =
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"I64\",\"shape\":[3,1],\"data_offsets\":[8,32]}}  ";
  Bytes b2 = Safetensors(two, 32);
  p = Parse(THEADER_KIND_SAFETENSORS, b2, "b");
  ASSERT_EQ(AL_OK, p.rc) << p.err;
  EXPECT_EQ(THEADER_I64, p.h.dtype);
  EXPECT_EQ(8 + two.size() + 8, p.h.data_offset);
  EXPECT_EQ(24u, p.h.data_bytes);
  p = Parse(THEADER_KIND_SAFETENSORS, b2, "a");
  ASSERT_EQ(AL_OK, p.rc) << p.err;
  EXPECT_EQ(8 + two.size(), p.h.data_offset);
  ExpectBad(b2, "2 tensors", THEADER_KIND_SAFETENSORS);

  auto st = [](const std::string &dtype, const std::string &shape, const std::string &off) {
    return "{\"t\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + off +
           "}}";
  };
  ExpectBad(Safetensors(st("F8_E4M3", "[2]", "[0,2]"), 2), "unsupported dtype 'F8_E4M3'",
            THEADER_KIND_SAFETENSORS);
  ExpectBad(Safetensors(st("F32", "[2]", "[0,4]"), 4), "give 8 bytes, data_offsets 4",
            THEADER_KIND_SAFETENSORS);
  ExpectBad(Safetensors(st("F32", "[2]", "[0,8]"), 12), "data section is 8 bytes",
            THEADER_KIND_SAFETENSORS);
  ExpectBad(Safetensors(st("F32", "[-2]", "[0,8]"), 8), "non-negative", THEADER_KIND_SAFETENSORS);
  ExpectBad(Safetensors(st("F32", "[1,1,1,1,1,1,1,1,2]", "[0,8]"), 8), "9 dimensions",
            THEADER_KIND_SAFETENSORS);
  ExpectBad(Safetensors(st("F32", "[2]", "[8,0]"), 8), "data_offsets", THEADER_KIND_SAFETENSORS);
  ExpectBad(Safetensors(st("F64", "[4294967296,4294967296]", "[0,8]"), 8), "overflows",
            THEADER_KIND_SAFETENSORS);
  ExpectBad(Safetensors("{\"t\":", 0), "broken JSON", THEADER_KIND_SAFETENSORS);
  ExpectBad(Safetensors("[1]", 0), "JSON object", THEADER_KIND_SAFETENSORS);
  ExpectBad(Safetensors("{\"__metadata__\":{}}", 0), "no tensor", THEADER_KIND_SAFETENSORS);
  ExpectBad(Safetensors("{\"t\":1,\"t\":2}", 0), "broken JSON", THEADER_KIND_SAFETENSORS);
  Bytes huge = Safetensors("{}", 0);
  huge[3] = 1; // 16 MiB
  ExpectBad(huge, "exceeds the limit", THEADER_KIND_SAFETENSORS);
  Bytes past = Safetensors(st("F32", "[2]", "[0,8]"), 8);
  past[0] = 0xff;
  ExpectBad(past, "runs past the member's end", THEADER_KIND_SAFETENSORS);
}

// Files written by numpy itself (np.save, and np.lib.format.write_array for versions 2.0
// and 3.0), when Debian's python3 (or $AL_TEST_PYTHON) has numpy.
TEST(TensorHeader, NumpyWrittenFiles) {
  const char *env = std::getenv("AL_TEST_PYTHON");
  std::string py = env && *env ? env : "/usr/bin/python3";
  std::string probe = py + " -c 'import numpy' >/dev/null 2>&1";
  if (std::system(probe.c_str()) != 0) GTEST_SKIP() << py << " has no numpy";
  std::string dir = altest::TmpPath("npy_ref");
  std::string script = altest::TmpPath("npy_ref.py");
  {
    FILE *f = std::fopen(script.c_str(), "w");
    ASSERT_NE(nullptr, f);
    std::fputs(
        "import sys, os, numpy as np\n"
        "from numpy.lib import format as F\n"
        "d = sys.argv[1]; os.makedirs(d, exist_ok=True)\n"
        "cases = [('f16_4d', np.float16, (16, 5, 30, 52)), ('f32_3d', np.float32, (16, 60, 104)),\n"
        "         ('u8_1d', np.uint8, (7,)), ('i64_0d', np.int64, ()), ('b_2d', np.bool_, (3, 4)),\n"
        "         ('f64_empty', np.float64, (0, 3)), ('i16', np.int16, (2, 2)),\n"
        "         ('u16', np.uint16, (5,)), ('i32', np.int32, (1, 2, 3)), ('u32', np.uint32, (4,)),\n"
        "         ('u64', np.uint64, (2,)), ('i8', np.int8, (9,))]\n"
        "for name, t, shape in cases:\n"
        "    np.save(os.path.join(d, name + '.npy'), np.zeros(shape, dtype=t))\n"
        "for v in [(2, 0), (3, 0)]:\n"
        "    with open(os.path.join(d, 'v%d.npy' % v[0]), 'wb') as f:\n"
        "        F.write_array(f, np.zeros((16, 1, 8, 8), np.float16), version=v)\n"
        "np.save(os.path.join(d, 'fortran.npy'), np.asfortranarray(np.zeros((3, 4), np.float32)))\n"
        "np.save(os.path.join(d, 'big.npy'), np.zeros((3,), dtype='>f4'))\n"
        "np.save(os.path.join(d, 'c64.npy'), np.zeros((3,), dtype=np.complex64))\n",
        f);
    std::fclose(f);
  }
  std::string cmd = py + " " + script + " " + dir;
  ASSERT_EQ(0, std::system(cmd.c_str()));
  const struct {
    const char *file;
    theader_dtype t;
    std::vector<uint64_t> shape;
  } ok[] = {{"f16_4d", THEADER_F16, {16, 5, 30, 52}},
            {"f32_3d", THEADER_F32, {16, 60, 104}},
            {"u8_1d", THEADER_U8, {7}},
            {"i64_0d", THEADER_I64, {}},
            {"b_2d", THEADER_BOOL, {3, 4}},
            {"f64_empty", THEADER_F64, {0, 3}},
            {"i16", THEADER_I16, {2, 2}},
            {"u16", THEADER_U16, {5}},
            {"i32", THEADER_I32, {1, 2, 3}},
            {"u32", THEADER_U32, {4}},
            {"u64", THEADER_U64, {2}},
            {"i8", THEADER_I8, {9}},
            {"v2", THEADER_F16, {16, 1, 8, 8}},
            {"v3", THEADER_F16, {16, 1, 8, 8}}};
  for (const auto &c : ok) {
    Bytes b = altest::ReadBytes(dir + "/" + c.file + ".npy");
    ASSERT_FALSE(b.empty()) << c.file;
    Parsed p = Parse(THEADER_KIND_NPY, b);
    ASSERT_EQ(AL_OK, p.rc) << c.file << ": " << p.err;
    EXPECT_EQ(c.t, p.h.dtype) << c.file;
    ASSERT_EQ(c.shape.size(), p.h.ndim) << c.file;
    for (size_t i = 0; i < c.shape.size(); i++) EXPECT_EQ(c.shape[i], p.h.shape[i]) << c.file;
    EXPECT_EQ(b.size(), p.h.data_offset + p.h.data_bytes) << c.file;
    EXPECT_EQ(0u, p.h.data_offset % 16) << c.file;
  }
  EXPECT_EQ(AL_EFORMAT, Parse(THEADER_KIND_NPY, altest::ReadBytes(dir + "/fortran.npy")).rc);
  Parsed big = Parse(THEADER_KIND_NPY, altest::ReadBytes(dir + "/big.npy"));
  EXPECT_EQ(AL_EFORMAT, big.rc);
  EXPECT_NE(std::string::npos, big.err.find("big-endian")) << big.err;
  EXPECT_EQ(AL_EFORMAT, Parse(THEADER_KIND_NPY, altest::ReadBytes(dir + "/c64.npy")).rc);
}

} // namespace

// The public parser bindings use (al_tensor_header_parse): the same reading as the index's,
// every field written, nothing past the caller's struct, an unset size and an untyped name
// refused.
TEST(TensorHeaderApi, ParsesWhatTheIndexParses) {
  Bytes b = Npy(NpyDict("<f2", "(16, 5, 42, 40)"), 16ull * 5 * 42 * 40 * 2);
  al_tensor_header h;
  memset(&h, 0xAB, sizeof h);
  h.struct_size = sizeof h;
  size_t need = 0;
  ASSERT_EQ(al_tensor_header_parse("latent.npy", b.data(), b.size(), b.size(), &h, &need), AL_OK)
      << al_last_error();
  EXPECT_STREQ(h.dtype, "float16");
  ASSERT_EQ(h.ndim, 4u);
  EXPECT_EQ(h.shape[0], 16u);
  EXPECT_EQ(h.shape[3], 40u);
  EXPECT_EQ(h.shape[4], 0u);
  EXPECT_EQ(h.data_offset, b.size() - h.data_bytes);
  EXPECT_EQ(h.data_offset % 64, 0u);
  EXPECT_EQ(h.data_bytes, 16ull * 5 * 42 * 40 * 2);
  EXPECT_EQ(h.data_offset + h.data_bytes, b.size());
  // A header cut short asks for more bytes, as the internal parser does.
  EXPECT_EQ(al_tensor_header_parse("latent.npy", b.data(), 9, b.size(), &h, &need), AL_ERANGE);
  EXPECT_GT(need, 9u);
  // A shape that does not match the member's size is refused, naming it.
  EXPECT_EQ(al_tensor_header_parse("latent.npy", b.data(), b.size(), b.size() + 2, &h, &need),
            AL_EFORMAT);
  // A struct of an older, smaller layout: nothing past it is written.
  unsigned char buf[sizeof(al_tensor_header) + 16];
  memset(buf, 0xCD, sizeof buf);
  size_t small = offsetof(al_tensor_header, ndim);
  memcpy(buf, &small, sizeof small);
  Bytes s = Safetensors("{\"x\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]}}", 12);
  EXPECT_EQ(al_tensor_header_parse("t5.safetensors", s.data(), s.size(), s.size(),
                                   (al_tensor_header *)buf, &need),
            AL_EINVAL); // below the first version's size
  EXPECT_TRUE(altest::ErrorContains("al_tensor_header"));
  for (size_t i = sizeof small; i < sizeof buf; i++) ASSERT_EQ(buf[i], 0xCD) << i;
  al_tensor_header z = {};
  EXPECT_EQ(al_tensor_header_parse("latent.npy", b.data(), b.size(), b.size(), &z, &need),
            AL_EINVAL);
  h.struct_size = sizeof h;
  EXPECT_EQ(al_tensor_header_parse("caption.txt", b.data(), b.size(), b.size(), &h, &need),
            AL_EINVAL);
  EXPECT_TRUE(altest::ErrorContains("'caption.txt' is not a typed member"));
  EXPECT_EQ(al_member_is_typed("t5.npy.lz4"), 1);
  EXPECT_EQ(al_member_is_typed("x.safetensors"), 1);
  EXPECT_EQ(al_member_is_typed("latent"), 0);
  EXPECT_EQ(al_member_is_typed(nullptr), 0);
  h.struct_size = sizeof h;
  ASSERT_EQ(al_tensor_header_parse("t5.safetensors", s.data(), s.size(), s.size(), &h, &need),
            AL_OK)
      << al_last_error();
  EXPECT_STREQ(h.dtype, "bfloat16");
  EXPECT_EQ(h.ndim, 2u);
}
