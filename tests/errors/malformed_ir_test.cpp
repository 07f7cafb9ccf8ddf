// Malformed IR never crashes `smelt opt` and is never called a smelt bug: a list of hand-written
// bad inputs (each must be a user error from parse + verify), then a deterministic mutator that
// corrupts the tests/passes/*.ir files byte-wise and token-wise and runs every pass on whatever
// still parses (tests/errors/ir_opt_harness.h). Only smelt::Error may escape, never marked
// internal.
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "errors/ir_opt_harness.h"
#include "support/check.h"
#include "support/errors.h"
#include "trace/interpreter.h"

namespace smelt {
namespace {

std::string with_line(const std::string& line, const std::string& inputs = "%x: f32[2,3]") {
  return "graph(" + inputs + ") {\n  " + line + "\n  return %x\n}\n";
}

struct BadIr {
  std::string text;
  std::string message;  // part of the error
};

std::vector<BadIr> bad_inputs() {
  const std::string img = "%x: f32[1,1,4,4]";
  return {
      // the crash of issue 7: slice_grad read input_shape[dim] of an empty list
      {with_line("%1: f32[2,3] = slice_grad(%x) {input_shape=[], dim=0, start=0, end=2, step=1}"), "slice_grad"},
      {with_line("%1: f32[4,3] = slice_grad(%x) {input_shape=[4,3], dim=5, start=0, end=2, step=1}"), "slice_grad"},
      {with_line("%1: f32[4,3] = slice_grad(%x) {input_shape=[4,3], dim=0, start=0, end=2, step=0}"), "slice_grad"},
      {with_line("%1: f32[2,3] = slice_grad(%x) {input_shape=[2,3], dim=0, start=0, end=2}"), "'step'"},
      {with_line("%c: f32[4294967296,4294967296] = constant []"), "overflows"},
      {with_line("%c: i64[] = constant nan"), "integers"},
      {with_line("%c: i64[2] = constant [1, 2.5]"), "integers"},
      {with_line("%c: i64[] = constant 9223372036854775808"), "range"},
      {with_line("%1: f32[2,3] = cast(%x) {dtype=99}"), "dtype"},
      {with_line("%1: f32[2,3] = cast(%x) {dtype=\"f32\"}"), "dtype"},
      {with_line("%1: f32[2,3] = cast(%x)"), "'dtype' is missing"},
      // attributes: missing, mistyped, out of range, wrong length
      {with_line("%1: f32[3,2] = permute(%x)"), "'dims' is missing"},
      {with_line("%1: f32[3,2] = permute(%x) {dims=1}"), "int list"},
      {with_line("%1: f32[3,2] = permute(%x) {dims=[0,0]}"), "permute"},
      {with_line("%1: f32[3,2] = permute(%x) {dims=[0,9]}"), "permute"},
      {with_line("%1: f32[3,2] = permute(%x) {dims=[0]}"), "permute"},
      {with_line("%1: f32[6] = reshape(%x) {shape=[-1,-1]}"), "reshape"},
      {with_line("%1: f32[7] = reshape(%x) {shape=[7]}"), "reshape"},
      {with_line("%1: f32[6] = reshape(%x) {shape=6}"), "int list"},
      {with_line("%1: f32[2,3] = expand(%x) {shape=[3]}"), "expand"},
      {with_line("%1: f32[2,3] = slice(%x) {dim=9, start=0, end=1, step=1}"), "slice"},
      {with_line("%1: f32[2,3] = slice(%x) {dim=0, start=0, end=1, step=0}"), "slice"},
      {with_line("%1: f32[2,3] = slice(%x) {dim=0, start=0, end=1, step=-1}"), "slice"},
      {with_line("%1: f32[2] = sum(%x) {dims=[7], keepdim=0}"), "sum"},
      {with_line("%1: f32[2] = sum(%x) {dims=[1], keepdim=\"no\"}"), "keepdim"},
      {with_line("%1: f32[2,3] = softmax(%x) {dim=5}"), "softmax"},
      {with_line("%1: i64[2] = argmax(%x) {dim=5, keepdim=0}"), "argmax"},
      {with_line("%1: f32[2,3] = leaky_relu(%x) {negative_slope=\"a\"}"), "negative_slope"},
      {with_line("%1: f32[2,3] = gelu(%x) {approximate=7}"), "gelu"},
      {with_line("%1: f32[2,3] = clamp(%x) {min=[1]}"), "min"},
      {with_line("%1: f32[2,3], %2: bool[2,3], %3: i64[2] = dropout(%x, %s) {p=2.0, training=1}", "%x: f32[2,3], %s: i64[2]"), "p must be in [0, 1]"},
      {with_line("%1: f32[2,3], %2: bool[2,3], %3: i64[2] = dropout(%x, %s) {p=nan, training=1}", "%x: f32[2,3], %s: i64[2]"), "p must be in [0, 1]"},
      {with_line("%1: f32[2,3], %2: bool[2,3], %3: f32[2,3] = dropout(%x, %x) {p=0.5, training=1}"), "generator state"},
      {with_line("%1: f32[2,3], %2: bool[2,3] = dropout(%x) {p=0.5, training=1}"), "expected 2 inputs"},
      {with_line("%1: f32[2,3], %2: f32[2,3], %3: f32[2,3] = layer_norm(%x, %x, %x) {ndim=5, eps=0.00001}"), "layer_norm"},
      {with_line("%1: f32[6] = cat(%x) {dim=9}"), "cat"},
      {with_line("%1: f32[6] = cat() {dim=0}"), "cat"},
      {with_line("%1: f32[2,3,-1] = one_hot(%x) {num_classes=-1}"), "negative"},
      {with_line("%1: f32[2,3] = var(%x) {dims=[1], keepdim=0, correction=\"s\"}"), "correction"},
      {with_line("%1: f32[1,1,4,4] = conv2d(%x, %x) {stride=[0,0], padding=[0,0], dilation=[1,1], groups=1}", img), "conv2d"},
      {with_line("%1: f32[1,1,4,4] = conv2d(%x, %x) {stride=[1], padding=[0,0], dilation=[1,1], groups=1}", img), "conv2d"},
      {with_line("%1: f32[1,1,4,4] = conv2d(%x, %x) {stride=[1,1], padding=[-1,0], dilation=[1,1], groups=1}", img), "conv2d"},
      {with_line("%1: f32[1,1,4,4] = conv2d(%x, %x) {stride=[1,1], padding=[0,0], dilation=[1,1], groups=0}", img), "conv2d"},
      {with_line("%1: f32[1,1,4,4] = conv2d(%x, %x) {stride=[1,1], padding=[0,0], dilation=[0,1], groups=1}", img), "conv2d"},
      {with_line("%1: f32[1,1,4,4] = conv2d_grad_input(%x, %x) {input_shape=[1], stride=[1,1], padding=[0,0], dilation=[1,1], groups=1}", img), "conv2d_grad_input"},
      {with_line("%1: f32[1,1,4,4] = conv2d_grad_weight(%x, %x) {weight_shape=[], stride=[1,1], padding=[0,0], dilation=[1,1], groups=1}", img), "conv2d_grad_weight"},
      {with_line("%1: f32[1,1,2,2], %2: i64[1,1,2,2] = max_pool2d(%x) {kernel=[0,0], stride=[2,2], padding=[0,0], dilation=[1,1]}", img), "max_pool2d"},
      {with_line("%1: f32[1,1,2,2], %2: i64[1,1,2,2] = max_pool2d(%x) {kernel=[2,2], stride=[2,2], padding=[5,5], dilation=[1,1]}", img), "max_pool2d"},
      {with_line("%1: f32[1,1,2,2] = avg_pool2d(%x) {kernel=[2], stride=[2,2], padding=[0,0], count_include_pad=0}", img), "avg_pool2d"},
      {with_line("%1: f32[1,1,2,2] = avg_pool2d_grad(%x) {input_shape=[], kernel=[2,2], stride=[2,2], padding=[0,0], count_include_pad=0}", img), "avg_pool2d_grad"},
      {with_line("%1: f32[1,1,0,0] = adaptive_avg_pool2d(%x) {output_size=[0,0]}", img), "adaptive_avg_pool2d"},
      {with_line("%1: f32[1,1,4,4] = adaptive_avg_pool2d_grad(%x) {input_shape=[1,2]}", img), "adaptive_avg_pool2d_grad"},
      {with_line("%1: f32[1,1,4,4] = max_pool2d_grad(%x, %x) {input_shape=[]}", img), "max_pool2d_grad"},
      // structure
      {"", "expected 'graph'"},
      {"graph(", "expected"},
      {"graph(%x: f32[2]) {\n  return %y\n}\n", "undefined"},
      {"graph(%x: f32[2]) {\n  %x: f32[2] = relu(%x)\n  return %x\n}\n", "twice"},
      {"graph(%x: f32[2]) {\n  %1: f32[2] = relu(%x)\n", "expected 'return'"},
      {"graph(%x: f32[2]) {\n  %1: f32[2] = relu(%x) {a=\"unterminated}\n  return %1\n}\n", "unterminated"},
      {"graph(%x: f32[2]) {\n  %1: f32[2] = relu(%x)\n  return %1\n}\n}", "after the closing"},
      {"graph(%x: f32[2]) {\n  %c: f32[2] = constant [[1, 2]]\n  return %x\n}\n", "number"},
      {"graph(%x: f32[2]) {\n  %1: f32[2] = group(%x)\n  return %1\n}\n", "graph"},
  };
}

TEST(MalformedIr, EachIsAUserError) {
  for (const BadIr& bad : bad_inputs()) {
    SCOPED_TRACE(bad.text);
    try {
      auto g = ir::parse(bad.text);
      ir::verify(*g);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_FALSE(e.internal()) << msg;
      EXPECT_NE(msg.find(bad.message), std::string::npos) << msg;
      EXPECT_NE(msg.find("line "), std::string::npos) << msg;
    }
    EXPECT_EQ(ir_opt_harness::run_ir_text(bad.text), "");
  }
}

TEST(MalformedIr, LargeInputsAreHandled) {
  // 100,000 dead nodes (dce was quadratic) and 100,000 opening brackets.
  std::ostringstream os;
  os << "graph(%x: f32[2]) {\n  %1: f32[2] = relu(%x)\n";
  for (int i = 2; i <= 100000; ++i) os << "  %" << i << ": f32[2] = relu(%" << i - 1 << ")\n";
  std::string text = os.str();
  text += "  return %x\n}\n";
  auto g = ir::parse(text);
  passes::PassOptions options;
  passes::run_pipeline(*g, passes::kDefaultPipeline, options);
  EXPECT_EQ(g->num_nodes(), 0u);
  std::string brackets = "graph(%x: f32[2]) {\n  %c: f32[2] = constant ";
  brackets.append(100000, '[');
  EXPECT_THROW(ir::parse(brackets), Error);
}

TEST(MalformedIr, FoldChecksConstantIndices) {
  // fold runs the kernel on constant operands: indices that max_pool2d never made must be
  // checked there, not scattered out of bounds. The kernel's refusal does not fail compilation:
  // fold leaves the node, and the graph raises the same error when it runs.
  const std::string text =
      "graph() {\n"
      "  %dy: f32[1,1,1,1] = constant [1]\n"
      "  %i: i64[1,1,1,1] = constant [1000000]\n"
      "  %1: f32[1,1,2,2] = max_pool2d_grad(%dy, %i) {input_shape=[1,1,2,2]}\n"
      "  return %1\n"
      "}\n";
  auto g = ir::parse(text);
  ir::verify(*g);
  EXPECT_FALSE(passes::find_pass("fold")->run(*g));
  EXPECT_NE(ir::print(*g).find("max_pool2d_grad("), std::string::npos);
  testing::expect_error([&] { trace::interpret(*g, {}); }, {"max_pool2d_grad", "1000000"});
  EXPECT_EQ(ir_opt_harness::run_ir_text(text), "");
}

// ---- the mutator

std::vector<std::string> seed_texts() {
  std::vector<std::string> texts;
  for (const char* dir : {"passes", "fuzz/regressions"}) {
    for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(SMELT_TEST_DIR) / dir)) {
      if (entry.path().extension() != ".ir") continue;
      std::ifstream f(entry.path());
      std::stringstream ss;
      ss << f.rdbuf();
      std::string text = ss.str();
      if (size_t e = text.find("# EXPECT:"); e != std::string::npos) text.resize(e);  // the input graph
      texts.push_back(text);
    }
  }
  std::sort(texts.begin(), texts.end());
  return texts;
}

const char* const kTokens[] = {
    "0", "-0", "1", "-1", "2", "3", "1.5", "nan", "inf", "-inf", "1e308", "1e39", "-9223372036854775808",
    "9223372036854775807", "9223372036854775808", "2147483647", "2147483648", "4294967296", "99999999999999999999",
    "nan:0x7fc00001", "[]", "[0]", "[-1]", "[1,1,1,1,1]", "[0,0]", "[9223372036854775807]", "f32", "f64", "i64",
    "bool", "u8", "%0", "%00", "%x", "%1", "\"\"", "{", "}", "(", ")", ",", "=", ":", "group", "graph", "constant",
    "return", "param", "#", "\n"};

// Splits text into tokens: runs of word characters and '.', '-', ':'; every other byte alone.
std::vector<std::string> tokens_of(const std::string& text) {
  std::vector<std::string> tokens;
  for (size_t i = 0; i < text.size();) {
    size_t j = i;
    auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' || c == ':'; };
    while (j < text.size() && word(text[j])) ++j;
    if (j == i) j = i + 1;
    tokens.push_back(text.substr(i, j - i));
    i = j;
  }
  return tokens;
}

std::string mutate(const std::string& text, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return size_t(rng() % std::max<size_t>(n, 1)); };
  std::string out = text;
  int edits = 1 + int(pick(3));
  for (int e = 0; e < edits; ++e) {
    switch (pick(8)) {
      case 0:  // flip one byte
        if (!out.empty()) out[pick(out.size())] = char(rng());
        break;
      case 1:  // delete a span
        if (!out.empty()) {
          size_t at = pick(out.size());
          out.erase(at, 1 + pick(8));
        }
        break;
      case 2:  // duplicate a span
        if (!out.empty()) {
          size_t at = pick(out.size());
          out.insert(at, out.substr(at, 1 + pick(40)));
        }
        break;
      default: {  // token-wise: replace, delete or copy a token; swap ops; insert a token
        std::vector<std::string> tokens = tokens_of(out);
        if (tokens.empty()) break;
        size_t t = pick(tokens.size());
        switch (pick(5)) {
          case 0: tokens[t] = kTokens[pick(std::size(kTokens))]; break;
          case 1: tokens[t].clear(); break;
          case 2: tokens[t] = tokens[pick(tokens.size())]; break;
          case 3: tokens[t] = ops::op_name(static_cast<ops::OpId>(pick(ops::kOpCount))); break;
          default: tokens.insert(tokens.begin() + long(t), kTokens[pick(std::size(kTokens))]); break;
        }
        out.clear();
        for (const std::string& s : tokens) out += s;
      }
    }
  }
  return out;
}

TEST(MalformedIr, MutatedPassFilesOnlyGiveUserErrors) {
  std::vector<std::string> seeds = seed_texts();
  ASSERT_GT(seeds.size(), 30u);
  std::mt19937_64 rng(7);
  int parsed = 0, cases = 4000;
  for (int i = 0; i < cases; ++i) {
    std::string text = mutate(seeds[size_t(i) % seeds.size()], rng);
    std::string problem = ir_opt_harness::run_ir_text(text);
    ASSERT_EQ(problem, "") << "case " << i << ":\n" << text;
    try {
      ir::verify(*ir::parse(text));
      ++parsed;
    } catch (const Error&) {
    }
  }
  // The mutations must leave a good share of valid graphs, or the passes are not exercised.
  EXPECT_GT(parsed, cases / 10) << parsed << " of " << cases << " mutated texts were valid";
  std::printf("[ mutator  ] %d cases, %d valid after mutation\n", cases, parsed);
}

}  // namespace
}  // namespace smelt
