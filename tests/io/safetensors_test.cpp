// safetensors: round trips, the byte layout, atomic saves, and every kind of broken file.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/check.h"
#include "support/errors.h"
#include "support/temp_dir.h"

namespace smelt {
namespace {

using testing::all_close;
using testing::expect_error;

using SafetensorsTest = testing::TempDirTest;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  // A new file rather than a truncated one: ext4 flushes truncated files on close, which is slow.
  std::remove(path.c_str());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// A file from a header text and data bytes, with the real header length unless given.
std::string file_bytes(const std::string& header, const std::string& data,
                       std::optional<uint64_t> header_len = std::nullopt) {
  uint64_t n = header_len.value_or(header.size());
  std::string out(reinterpret_cast<const char*>(&n), 8);
  return out + header + data;
}

StateDict every_dtype() {
  StateDict sd;
  sd["f32"] = from_vector(std::vector<float>{1.5f, -2.25f, 3e-8f, 1e30f, -0.0f, 7.0f}, {2, 3});
  sd["f64"] = from_vector(std::vector<double>{M_PI, -1e-300, 42.0}, {3});
  sd["i64"] = from_vector(std::vector<int64_t>{INT64_MIN, -1, 0, INT64_MAX}, {2, 2});
  sd["i32"] = from_vector(std::vector<double>{-2147483648.0, -1, 0, 2147483647.0}, {4}, DType::Int32);
  Tensor b = empty({5}, DType::Bool);
  const bool bools[] = {true, false, false, true, true};
  std::memcpy(b.raw_data(), bools, sizeof(bools));
  sd["bool"] = b;
  Tensor u = empty({2, 2}, DType::UInt8);
  const uint8_t bytes[] = {0, 1, 128, 255};
  std::memcpy(u.raw_data(), bytes, sizeof(bytes));
  sd["u8"] = u;
  sd["scalar"] = scalar_tensor(0.125, DType::Float64);
  sd["empty"] = zeros({0, 3});
  return sd;
}

void expect_same(const StateDict& a, const StateDict& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    const Tensor& u = b.at(name);
    EXPECT_EQ(t.dtype(), u.dtype()) << name;
    EXPECT_EQ(t.shape(), u.shape()) << name;
    ASSERT_EQ(t.numel(), u.numel()) << name;
    Tensor tc = t.contiguous();
    EXPECT_EQ(std::memcmp(tc.raw_data(), u.raw_data(), size_t(t.numel()) * dtype_size(t.dtype())),
              0)
        << name;
  }
}

TEST_F(SafetensorsTest, RoundTripOfEveryDType) {
  StateDict sd = every_dtype();
  io::Metadata meta{{"format", "pt"}, {"note", "ünïcode ok"}};
  io::save_safetensors(path("a.safetensors"), sd, meta);
  io::Metadata loaded_meta;
  StateDict loaded = io::load_safetensors(path("a.safetensors"), &loaded_meta);
  expect_same(sd, loaded);
  EXPECT_EQ(loaded_meta, meta);
  EXPECT_EQ(files(), std::vector<std::string>{"a.safetensors"});  // no temporary left behind
}

TEST_F(SafetensorsTest, StridedTensorsAreSavedInLogicalOrder) {
  StateDict sd;
  Tensor m = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  sd["t"] = m.t();
  sd["s"] = m.slice(1, 0, 3, 2);
  io::save_safetensors(path("s.safetensors"), sd);
  StateDict loaded = io::load_safetensors(path("s.safetensors"));
  EXPECT_TRUE(all_close(loaded["t"], m.t(), 0, 0));
  EXPECT_TRUE(all_close(loaded["s"], from_vector(std::vector<float>{1, 3, 4, 6}, {2, 2}), 0, 0));
  EXPECT_TRUE(loaded["t"].is_contiguous());
}

TEST_F(SafetensorsTest, ByteLayoutFollowsTheFormat) {
  StateDict sd;
  sd["b"] = from_vector(std::vector<double>{1.0, 2.0}, {2});
  sd["a"] = from_vector(std::vector<float>{3.0f}, {1, 1});
  io::save_safetensors(path("l.safetensors"), sd, {{"k", "v"}});
  std::string bytes = read_bytes(path("l.safetensors"));
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u);  // data section aligned
  auto header = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(header["__metadata__"]["k"], "v");
  EXPECT_EQ(header["a"]["dtype"], "F32");
  EXPECT_EQ(header["a"]["shape"], nlohmann::json::array({1, 1}));
  EXPECT_EQ(header["a"]["data_offsets"], nlohmann::json::array({0, 4}));
  EXPECT_EQ(header["b"]["dtype"], "F64");
  EXPECT_EQ(header["b"]["data_offsets"], nlohmann::json::array({4, 20}));
  ASSERT_EQ(bytes.size(), 8 + n + 20);
  double second = 0;
  std::memcpy(&second, bytes.data() + 8 + n + 4 + 8, 8);
  EXPECT_EQ(second, 2.0);
}

TEST_F(SafetensorsTest, ReadsAFileWrittenByAnotherWriter) {
  // As the reference implementation writes it: tensors in any order, no padding.
  std::string header =
      R"({"w":{"dtype":"I64","shape":[2],"data_offsets":[4,20]},"m":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})";
  int64_t w[2] = {-7, 9};
  std::string data =
      std::string("\x01\x02\x03\x04", 4) + std::string(reinterpret_cast<char*>(w), 16);
  write_bytes(path("x.safetensors"), file_bytes(header, data));
  StateDict sd = io::load_safetensors(path("x.safetensors"));
  EXPECT_EQ(sd["w"].to_vector(), (std::vector<double>{-7, 9}));
  EXPECT_EQ(sd["m"].to_vector(), (std::vector<double>{1, 2, 3, 4}));
}

TEST_F(SafetensorsTest, AtomicSaveKeepsTheOldFileWhenWritingFails) {
  const std::string p = path("ckpt.safetensors");
  StateDict old_sd;
  old_sd["w"] = from_vector(std::vector<float>{1, 2, 3}, {3});
  io::save_safetensors(p, old_sd);
  const std::string before = read_bytes(p);

  // A file-size limit makes the write of a large tensor fail half way (EFBIG), as a full disk
  // or a quota would.
  StateDict big;
  big["w"] = zeros({1 << 20});
  struct rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto previous_handler = signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 64 * 1024;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  bool threw = false;
  try {
    io::save_safetensors(p, big);
  } catch (const Error& e) {
    threw = true;
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("write failed"), std::string::npos) << e.what();
  }
  setrlimit(RLIMIT_FSIZE, &saved);
  signal(SIGXFSZ, previous_handler);
  EXPECT_TRUE(threw);
  EXPECT_EQ(read_bytes(p), before);
  EXPECT_EQ(files(), std::vector<std::string>{"ckpt.safetensors"});

  // Invalid input is rejected before anything is written.
  StateDict bad = old_sd;
  bad["x"] = Tensor();
  expect_error([&] { io::save_safetensors(p, bad); }, {p, "'x'", "undefined"});
  StateDict reserved;
  reserved["__metadata__"] = zeros({1});
  expect_error([&] { io::save_safetensors(p, reserved); }, {"reserved"});
  EXPECT_EQ(read_bytes(p), before);
  EXPECT_EQ(files(), std::vector<std::string>{"ckpt.safetensors"});

  expect_error([&] { io::save_safetensors(path("no/such/dir/f.safetensors"), old_sd); },
               {"no/such/dir", "temporary"});
}

TEST_F(SafetensorsTest, SaveReplacesAnExistingFile) {
  const std::string p = path("r.safetensors");
  StateDict a, b;
  a["x"] = zeros({100});
  b["y"] = ones({2});
  io::save_safetensors(p, a);
  io::save_safetensors(p, b);
  StateDict loaded = io::load_safetensors(p);
  EXPECT_EQ(loaded.size(), 1u);
  EXPECT_TRUE(loaded.count("y"));
}

// ---- broken files: each must give a smelt::Error naming the file and the problem

struct Corruption {
  const char* name;
  std::string bytes;
  std::vector<std::string> needles;
};

std::string f32_entry(const std::string& name, const std::string& shape, uint64_t b, uint64_t e) {
  return "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":[" +
         std::to_string(b) + "," + std::to_string(e) + "]}";
}

std::vector<Corruption> corruptions() {
  const std::string data8(8, '\0');
  const std::string one = "{" + f32_entry("a", "[2]", 0, 8) + "}";
  std::vector<Corruption> c = {
      {"empty file", "", {"0 bytes", "too short"}},
      {"shorter than the length field", std::string("\x05\x00\x00", 3), {"3 bytes", "too short"}},
      {"zero header length", file_bytes("", data8, 0), {"header length is 0"}},
      {"header length past the end",
       file_bytes(one, data8, 5000),
       {"header length 5000", "exceeds"}},
      {"absurd header length",
       file_bytes(one, data8, uint64_t(1) << 62),
       {"exceeds the format's limit"}},
      {"not JSON", file_bytes("{\"a\": [1, 2", ""), {"not valid JSON"}},
      {"binary garbage header",
       file_bytes(std::string("\xff\xfe\x00\x13garbage", 11), ""),
       {"not valid JSON"}},
      {"JSON array header", file_bytes("[1, 2, 3]", ""), {"must be a JSON object", "'['"}},
      {"entry not an object", file_bytes(R"({"a": 3})", ""), {"tensor 'a'", "JSON object"}},
      {"missing field",
       file_bytes(R"({"a":{"dtype":"F32","shape":[2]}})", data8),
       {"'a'", "data_offsets"}},
      {"unknown field",
       file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", data8),
       {"unknown field 'x'"}},
      {"unknown dtype",
       file_bytes(R"({"a":{"dtype":"F99","shape":[2],"data_offsets":[0,8]}})", data8),
       {"'F99'", "not a safetensors dtype", "F32"}},
      {"unsupported dtype",
       file_bytes(R"({"a":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]}})", data8),
       {"'BF16'", "not supported by smelt"}},
      {"dtype not a string",
       file_bytes(R"({"a":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", data8),
       {"dtype must be a string"}},
      {"negative dim",
       file_bytes("{" + f32_entry("a", "[-2]", 0, 8) + "}", data8),
       {"non-negative"}},
      {"fractional dim",
       file_bytes("{" + f32_entry("a", "[2.5]", 0, 8) + "}", data8),
       {"non-negative"}},
      {"shape overflow",
       file_bytes("{" + f32_entry("a", "[4294967296,4294967296,4294967296]", 0, 8) + "}", data8),
       {"too many elements"}},
      {"offsets disagree with shape",
       file_bytes("{" + f32_entry("a", "[3]", 0, 8) + "}", data8),
       {"span 8 bytes", "needs 12"}},
      {"offsets reversed",
       file_bytes("{" + f32_entry("a", "[0]", 8, 4) + "}", data8),
       {"end before"}},
      {"offsets malformed",
       file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", data8),
       {"two non-negative integers"}},
      {"truncated data",
       file_bytes(one, std::string(5, '\0')),
       {"holds only 5 bytes", "truncated"}},
      {"overlapping tensors",
       file_bytes("{" + f32_entry("a", "[2]", 0, 8) + "," + f32_entry("b", "[2]", 4, 12) + "}",
                  std::string(12, '\0')),
       {"overlap", "'a'", "'b'"}},
      {"gap between tensors",
       file_bytes("{" + f32_entry("a", "[1]", 0, 4) + "," + f32_entry("b", "[1]", 8, 12) + "}",
                  std::string(12, '\0')),
       {"belong to no tensor", "'b'"}},
      {"trailing bytes", file_bytes(one, std::string(16, '\0')), {"cover only 8", "trailing"}},
      {"duplicate name",
       file_bytes("{" + f32_entry("a", "[1]", 0, 4) + "," + f32_entry("a", "[1]", 4, 8) + "}",
                  data8),
       {"'a' twice"}},
      {"metadata not strings",
       file_bytes(R"({"__metadata__":{"k":1}})", ""),
       {"__metadata__['k']"}},
      {"bool out of range",
       file_bytes(R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})",
                  std::string("\x01\x02", 2)),
       {"'m'", "must be 0 or 1"}},
  };
  return c;
}

TEST_F(SafetensorsTest, EveryCorruptionIsAClearError) {
  std::vector<Corruption> cases = corruptions();
  EXPECT_GE(cases.size(), 8u);
  for (const Corruption& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string p = path("bad.safetensors");
    write_bytes(p, c.bytes);
    std::vector<std::string> needles = c.needles;
    needles.push_back(p);
    try {
      io::load_safetensors(p);
      ADD_FAILURE() << "loaded without an error";
    } catch (const Error& e) {
      for (const std::string& n : needles) {
        EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
            << "message lacks '" << n << "': " << e.what();
      }
    }
  }
}

TEST_F(SafetensorsTest, MissingFileAndDirectory) {
  expect_error([&] { io::load_safetensors(path("missing.safetensors")); },
               {"missing.safetensors", "cannot open", "No such file"});
  expect_error([&] { io::load_safetensors(dir_); }, {dir_, "not a regular file"});
}

TEST_F(SafetensorsTest, EveryTruncationAndRandomDamageFailsCleanly) {
  StateDict sd = every_dtype();
  const std::string p = path("good.safetensors"), q = path("damaged.safetensors");
  io::save_safetensors(p, sd);
  const std::string good = read_bytes(p);
  // Every proper prefix of the file is an error (never a crash, never a silent partial load).
  for (size_t len = 0; len < good.size(); ++len) {
    write_bytes(q, good.substr(0, len));
    EXPECT_THROW(io::load_safetensors(q), Error) << "prefix of " << len << " bytes";
  }
  // Random byte damage in the header: either still a valid file, or an Error.
  uint64_t header_len = 0;
  std::memcpy(&header_len, good.data(), 8);
  Generator gen(7);
  for (int trial = 0; trial < 300; ++trial) {
    uint32_t w[4];
    gen.block(gen.reserve(1), w);
    std::string damaged = good;
    size_t pos = w[0] % (8 + header_len);
    damaged[pos] = char(w[1] & 0xff);
    write_bytes(q, damaged);
    try {
      io::load_safetensors(q);
    } catch (const Error&) {
    }
  }
  // Random garbage of assorted sizes.
  for (int trial = 0; trial < 50; ++trial) {
    std::string garbage;
    size_t n = size_t(trial) * 13;
    for (size_t i = 0; i < n; i += 4) {
      uint32_t w[4];
      gen.block(gen.reserve(1), w);
      garbage.append(reinterpret_cast<const char*>(w), 4);
    }
    write_bytes(q, garbage);
    EXPECT_THROW(io::load_safetensors(q), Error) << "garbage of " << garbage.size() << " bytes";
  }
}

}  // namespace
}  // namespace smelt
