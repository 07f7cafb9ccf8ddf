// Exact text: every constant's bits survive print -> parse (random bit patterns, specials, int64
// extremes), printed text parses back to itself, and numbers that do not fit their dtype, bad
// value names and impossible shapes are parse errors with a line and column.
#include <cstring>
#include <random>

#include "ir/constant.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "support/check.h"

namespace smelt {
namespace {

// A graph returning one constant of `dtype` whose bytes are `bytes`.
std::unique_ptr<ir::Graph> constant_graph(DType dtype, const std::string& bytes) {
  const int64_t n = int64_t(bytes.size() / dtype_size(dtype));
  Tensor t = empty({n}, dtype);
  std::memcpy(t.raw_data(), bytes.data(), bytes.size());
  auto g = std::make_unique<ir::Graph>();
  g->add_output(g->add_constant(t));
  return g;
}

void expect_round_trip(DType dtype, const std::string& bytes) {
  auto g = constant_graph(dtype, bytes);
  const std::string text = ir::print(*g);
  auto back = ir::parse(text);
  ir::verify(*back);
  ASSERT_EQ(back->constants().size(), 1u);
  EXPECT_EQ(ir::constant_bytes(back->constants()[0]->constant), bytes) << text;
  EXPECT_EQ(ir::print(*back), text);
}

TEST(NumberText, RandomBitPatternsRoundTrip) {
  std::mt19937_64 rng(20261122);
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int64, DType::UInt8}) {
    SCOPED_TRACE(dtype_name(dtype));
    for (int round = 0; round < 50; ++round) {
      std::string bytes(64 * dtype_size(dtype), '\0');
      for (size_t i = 0; i < bytes.size(); i += 8) {
        uint64_t r = rng();
        std::memcpy(bytes.data() + i, &r, std::min<size_t>(8, bytes.size() - i));
      }
      // Exponent bits all ones now and then: infinities and NaNs with random payloads.
      if (round % 5 == 0 && dtype == DType::Float32) bytes[3] = char(0x7f), bytes[2] = char(bytes[2] | 0x80);
      if (round % 5 == 0 && dtype == DType::Float64) bytes[7] = char(0xff), bytes[6] = char(bytes[6] | 0xf0);
      expect_round_trip(dtype, bytes);
    }
  }
  expect_round_trip(DType::Bool, std::string("\x00\x01\x01\x00", 4));
}

template <class T>
std::string bytes_of(std::initializer_list<T> values) {
  std::string s;
  for (T v : values) s.append(reinterpret_cast<const char*>(&v), sizeof v);
  return s;
}

TEST(NumberText, SpecialValuesRoundTrip) {
  const float f_nan_payload = [] { uint32_t b = 0xffc00001u; float f; std::memcpy(&f, &b, 4); return f; }();
  expect_round_trip(DType::Float32, bytes_of<float>({-0.0f, 0.0f, 1e-45f, -1.17549421e-38f, INFINITY, -INFINITY,
                                                      NAN, f_nan_payload, 3.4028235e38f, 0.1f}));
  expect_round_trip(DType::Float64, bytes_of<double>({-0.0, 0.0, 4.9e-324, 2.2250738585072009e-308, INFINITY,
                                                       -INFINITY, NAN, -NAN, 1.7976931348623157e308, 0.1}));
  expect_round_trip(DType::Int64, bytes_of<int64_t>({INT64_MIN, INT64_MAX, INT64_MAX - 1, (int64_t(1) << 53) + 1, 0, -1}));
  expect_round_trip(DType::Int32, bytes_of<int32_t>({INT32_MIN, INT32_MAX, INT32_MIN + 1, 0, -1, 16777217}));
}

TEST(NumberText, SpellingsAreDocumented) {
  auto g = ir::parse(
      "graph() {\n"
      "  %a: f32[6] = constant [nan, -inf, inf, -0, nan:0x7fc00001, 1e-45]\n"
      "  %b: i64[] = constant 9223372036854775807\n"
      "  return %a, %b\n}\n");
  const std::string text = ir::print(*g);
  EXPECT_NE(text.find("[nan, -inf, inf, -0, nan:0x7fc00001, 1e-45]"), std::string::npos) << text;
  EXPECT_EQ(g->constants()[1]->constant.data<int64_t>()[0], INT64_MAX);
  EXPECT_EQ(ir::print(*ir::parse(text)), text);
}

// Text with one statement `line`; the parse must fail naming `message` and a line number.
void expect_parse_error(const std::string& line, const std::string& message) {
  std::string text = "graph(%x: f32[2]) {\n  " + line + "\n  return %x\n}\n";
  try {
    ir::parse(text);
    ADD_FAILURE() << "no error for: " << line;
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(message), std::string::npos) << line << "\n" << msg;
    EXPECT_NE(msg.find("IR parse error at line "), std::string::npos) << msg;
    EXPECT_FALSE(e.internal()) << msg;
  }
}

TEST(NumberText, NumbersThatDoNotFitTheirDtypeAreErrors) {
  expect_parse_error("%c: i64[] = constant nan", "needs integers");
  expect_parse_error("%c: i64[] = constant 1.5", "needs integers");
  expect_parse_error("%c: i64[] = constant 1e3", "needs integers");
  expect_parse_error("%c: i64[] = constant 9223372036854775808", "out of the i64 range");
  expect_parse_error("%c: i64[] = constant -9223372036854775809", "out of the i64 range");
  expect_parse_error("%c: f32[] = constant 1e39", "out of the f32 range");
  expect_parse_error("%c: f64[] = constant 1e999", "out of the f64 range");
  expect_parse_error("%c: f32[] = constant nan:0x3f800000", "not the bit pattern");
  expect_parse_error("%c: f32[] = constant 1.5.5", "expected a f32 number");
  expect_parse_error("%c: bool[] = constant 2", "out of the bool range");
  expect_parse_error("%c: u8[] = constant 256", "out of the u8 range");
  expect_parse_error("%c: u8[] = constant -1", "out of the u8 range");
  expect_parse_error("%c: i32[] = constant 2147483648", "out of the i32 range");
  expect_parse_error("%c: i32[] = constant -2147483649", "out of the i32 range");
  expect_parse_error("%c: i32[] = constant 0.5", "needs integers");
  expect_parse_error("%c: f32[2] = constant [1, 2, 3]", "more elements");
  expect_parse_error("%c: f32[4294967296,4294967296] = constant []", "overflows");
  expect_parse_error("%c: f32[4294967296,4294967296,0] = constant []", "overflows");
  expect_parse_error("%1: f32[2] = relu(%x) {a=1, a=2}", "given twice");
  expect_parse_error("%1: f32[2] = reshape(%x) {shape=[99999999999999999999]}", "out of the int64 range");
}

TEST(NumberText, ValueNames) {
  // %0 and %00 would both be id 0: leading zeros are rejected.
  expect_parse_error("%00: f32[2] = relu(%x)", "leading zero");
  expect_parse_error("%0: f32[2] = relu(%x)\n  %00: f32[2] = relu(%x)", "leading zero");
  // Ids stay in range, so they never print as %-1.
  expect_parse_error("%2147483648: f32[2] = relu(%x)", "too large");
  expect_parse_error("%99999999999999999999: f32[2] = relu(%x)", "too large");
  auto g = ir::parse("graph(%x: f32[2]) {\n  %1073741823: f32[2] = relu(%x)\n  return %1073741823\n}\n");
  EXPECT_EQ(ir::value_ref(g->outputs()[0]), "%1073741823");
  // The named input takes a free id below instead of one beyond the range.
  EXPECT_EQ(g->inputs()[0]->id, 0);

  // Names with dots (module parameters) read back; a name that would not prints as the id.
  ir::Graph h;
  ir::Value* w = h.add_input({{2}, DType::Float32}, "fc.weight", ir::ValueKind::Param);
  ir::Value* odd = h.add_input({{2}, DType::Float32}, "7");
  ir::Value* spaced = h.add_input({{2}, DType::Float32}, "a b");
  h.add_output(h.add_node(ops::OpId::add, {w, odd})->outputs[0]);
  h.add_output(spaced);
  const std::string text = ir::print(h);
  EXPECT_NE(text.find("%fc.weight: f32[2] param"), std::string::npos) << text;
  EXPECT_EQ(ir::value_ref(odd), std::string("%") += std::to_string(odd->id));  // (+= : see autograd_program.cpp)
  EXPECT_EQ(ir::value_ref(spaced), std::string("%") += std::to_string(spaced->id));
  EXPECT_EQ(ir::print(*ir::parse(text)), text);
}

TEST(NumberText, DtypeAttributesPrintAsNames) {
  const char* text =
      "graph(%x: f32[2]) {\n"
      "  %1: f64[2] = cast(%x) {dtype=f64}\n"
      "  return %1\n"
      "}\n";
  auto g = ir::parse(text);
  EXPECT_EQ(ir::print(*g), text);
  EXPECT_EQ(g->nodes().front()->attrs.get_dtype("dtype"), DType::Float64);
  auto i32 = ir::parse("graph(%x: f32[2]) {\n  %1: i32[2] = cast(%x) {dtype=i32}\n  return %1\n}\n");
  EXPECT_EQ(i32->nodes().front()->attrs.get_dtype("dtype"), DType::Int32);
  expect_parse_error("%1: f32[2] = cast(%x) {dtype=99}", "must be a dtype");
  expect_parse_error("%1: f32[2] = cast(%x) {dtype=2}", "must be a dtype");
  expect_parse_error("%1: f32[2] = cast(%x) {dtype=q8}", "expected a float number");
  expect_parse_error("%1: f32[2] = cast(%x)", "attribute 'dtype' is missing");
}

TEST(NumberText, AttributeFloatsAndStringsRoundTrip) {
  ops::Attrs attrs{{"a", -0.0}, {"b", 1e-320}, {"c", double(INFINITY)}, {"d", 0.1}, {"s", std::string("q\"\\")}};
  for (const auto& [k, v] : attrs.items()) {
    std::string text = "graph(%x: f32[2]) {\n  %1: f32[2] = relu(%x) {" + k + "=" + ops::attr_value_str(v) +
                       "}\n  return %1\n}\n";
    // relu ignores unknown attributes; the value must come back identical.
    auto g = ir::parse(text);
    EXPECT_TRUE(g->nodes().front()->attrs.items()[0].second == v) << text;
    if (auto* d = std::get_if<double>(&v)) {
      double back = std::get<double>(g->nodes().front()->attrs.items()[0].second);
      EXPECT_EQ(std::memcmp(&back, d, sizeof back), 0) << text;
    }
    EXPECT_EQ(ir::print(*g), text);
  }
}

}  // namespace
}  // namespace smelt
