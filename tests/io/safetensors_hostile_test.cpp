// safetensors files built to hurt the reader: deep JSON, junk hidden behind a NUL byte, huge
// strings echoed in errors, and the inputs the libFuzzer target (fuzz_targets/) found. Each must
// be a smelt::Error with a short message, or load exactly what the header declares.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>

#include "io/safetensors_format.h"
#include "smelt/smelt.h"
#include "support/errors.h"
#include "support/temp_dir.h"

namespace smelt {
namespace {

// Every message quotes user data as bounded excerpts: a few hundred characters at most.
constexpr size_t kMaxMessage = 1000;

std::string image(const std::string& header, const std::string& data = "") {
  const uint64_t n = header.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + header + data;
}

StateDict load_bytes(const std::string& bytes) {
  io::detail::MemorySource source(bytes.data(), bytes.size());
  return io::detail::read_safetensors(source, "mem.safetensors", nullptr);
}

// The error message of loading `bytes`, checked to be short; "" if it loaded.
std::string error_of(const std::string& bytes) {
  try {
    load_bytes(bytes);
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_LE(m.size(), kMaxMessage) << m.substr(0, 300);
    EXPECT_EQ(m.find('\n'), std::string::npos) << "one line: " << m.substr(0, 300);
    EXPECT_EQ(m.rfind("load_safetensors: mem.safetensors: ", 0), 0u) << m.substr(0, 300);
    return m;
  }
  return "";
}

void expect_refused(const std::string& bytes, std::initializer_list<std::string> needles) {
  const std::string m = error_of(bytes);
  ASSERT_FALSE(m.empty()) << "loaded without an error";
  for (const std::string& n : needles) EXPECT_NE(m.find(n), std::string::npos) << m;
}

const std::string kEntry = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
const std::string kData(8, '\0');

TEST(SafetensorsHostile, DeepNestingIsRefusedBeforeAnythingRecurses) {
  // 200,000 levels used to overflow the stack in the error message's recursive JSON dump.
  const size_t depth = 200000;
  const std::string deep = std::string(depth, '[') + std::string(depth, ']');
  expect_refused(image(R"({"a":{"dtype":)" + deep + "}}"), {"deeper than 8 levels"});
  expect_refused(image(R"({"__metadata__":{"k":)" + deep + "}}"), {"deeper than 8 levels"});
  std::string objects;
  for (size_t i = 0; i < depth; ++i) objects += R"({"k":)";
  expect_refused(image(objects + "1" + std::string(depth, '}')), {"deeper than 8 levels"});
  // Nine levels: refused; the format's three (object, entry, shape): fine.
  expect_refused(image(R"({"a":{"shape":[[[[[[[[1]]]]]]]]}})"), {"deeper than 8 levels"});
  EXPECT_EQ(load_bytes(image(kEntry, kData)).at("a").shape(), Shape{2});
}

TEST(SafetensorsHostile, TheHeaderIsExactlyOneObjectPaddedWithSpaces) {
  // nlohmann stops at a NUL byte: the junk after it used to be ignored.
  expect_refused(image(kEntry + std::string("\0junk", 5), kData), {"NUL byte at offset 54"});
  expect_refused(image(kEntry + std::string("\0", 1) + "   ", kData), {"NUL byte"});
  expect_refused(image(kEntry + "\t", kData), {"followed only by spaces", "'\\x09'"});
  expect_refused(image(kEntry + "\n", kData), {"followed only by spaces"});
  expect_refused(image(" " + kEntry, kData), {"starting with '{' at its first byte"});
  expect_refused(image(kEntry + "}", kData), {"not valid JSON"});
  expect_refused(image(kEntry + " x ", kData), {"followed only by spaces", "'x'"});
  // Trailing spaces are the format's padding.
  EXPECT_EQ(load_bytes(image(kEntry + "      ", kData)).size(), 1u);
}

TEST(SafetensorsHostile, UserDataInMessagesIsCut) {
  const std::string huge(100000, 'z');
  expect_refused(image(R"({")" + huge + R"(":{"dtype":"F99","shape":[2],"data_offsets":[0,8]}})",
                       kData),
                 {"tensor 'zzzz", "...'", "not a safetensors dtype"});
  expect_refused(image(R"({"a":{"dtype":")" + huge + R"(","shape":[2],"data_offsets":[0,8]}})",
                       kData),
                 {"dtype 'zzz", "...'"});
  expect_refused(image(R"({"a":{"dtype":"F32","shape":")" + huge + R"(","data_offsets":[0,8]}})",
                       kData),
                 {"shape must be an array", "..."});
  // An unterminated string: nlohmann's own message quotes the whole token.
  expect_refused(image(R"({"a":")" + huge + "}"), {"not valid JSON", "..."});
  // Control bytes are shown escaped, so the message stays one line.
  expect_refused(image("{\"a\\n\":{\"dtype\":\"F\\u0001\",\"shape\":[2],\"data_offsets\":[0,8]}}", kData),
                 {"tensor 'a\\x0a'", "dtype 'F\\x01'"});
}

TEST(SafetensorsHostile, ShapesWhoseStridesWouldOverflowAreRefused) {
  // Empty (numel 0), but the product of the other dims overflows a tensor's int64 strides.
  expect_refused(image(R"({"a":{"dtype":"F32","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}})"),
                 {"too many elements"});
}

// Found by safetensors_fuzz (fuzz_targets/): an empty tensor whose zero dim is not the first
// loaded with the right shape, but reported itself non-contiguous (Tensor::is_contiguous
// multiplied the sizes, contiguous_strides skips zeros).
TEST(SafetensorsHostile, FuzzFoundEmptyTensorWithInnerZeroDimIsContiguous) {
  const Shape shape{0, 4294, 966792429, 0, 7295};
  StateDict sd = load_bytes(image(
      R"({"a":{"dtype":"F32","shape":[0,4294,966792429,0,7295],"data_offsets":[0,0]}}    )"));
  ASSERT_EQ(sd.size(), 1u);
  EXPECT_EQ(sd.at("a").shape(), shape);
  EXPECT_EQ(sd.at("a").numel(), 0);
  EXPECT_TRUE(sd.at("a").is_contiguous());
  EXPECT_TRUE(zeros({2, 0, 3}).is_contiguous());
  EXPECT_TRUE(zeros({0, 5}).is_contiguous());
}

class SafetensorsHostileFile : public testing::TempDirTest {};

TEST_F(SafetensorsHostileFile, FileErrorsAreBoundedToo) {
  const std::string p = path("deep.safetensors");
  const std::string bytes =
      image(R"({"a":)" + std::string(100000, '[') + std::string(100000, ']') + "}");
  std::ofstream(p, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  testing::expect_error([&] { io::load_safetensors(p); }, {p, "deeper than 8 levels"});
}

}  // namespace
}  // namespace smelt
