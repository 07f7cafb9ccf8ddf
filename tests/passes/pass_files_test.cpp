// Lit-style pass tests: each tests/passes/*.ir file holds
//   # PIPELINE: <passes>
//   # REQUIRES: <op>, <op>      (optional: the ops the case needs; a name the op table does not
//                               know fails the case, never skips it)
//   <input IR>
//   # EXPECT:
//   <expected IR after the pipeline>
// The input runs through the pipeline (verifier on) and must print exactly as the expected IR
// (which is itself normalized by parse + print, so spacing in the file does not matter). The
// optimized graph must also compute the same values as the input graph on random inputs.
//
// Fusion cases (files fusion_*.ir, whose pipeline runs `fuse`) are checked harder: every group node satisfies its
// pattern's contract (fusion/pattern.h), and the fused graph computes the unfused graph's values
// BIT FOR BIT (fusion moves no arithmetic; any NaN matches any NaN) on random inputs with special
// values (NaN, ±inf, ±0, subnormals, extremes) drawn with several probabilities. Lines
//   # EXPLAIN-CONTAINS: <text>
// require fuse()'s explanation (FusionReport::explain, default options, on the input graph) to
// contain <text>: which rule or limit kept a node out.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "fusion/fuse.h"
#include "fusion/pattern.h"
#include "fuzz/special_values.h"
#include "ir/constant.h"
#include "ir/printer.h"
#include "passes/pass_manager.h"
#include "support/check.h"
#include "trace/interpreter.h"

namespace smelt {
namespace {

using testing::same_bits;

struct PassCase {
  std::string file;
  std::string pipeline;
  std::string input;
  std::string expected;
  std::vector<std::string> required_ops;
  std::vector<std::string> explain_contains;
};

void PrintTo(const PassCase& c, std::ostream* os) { *os << c.file; }

std::vector<PassCase> load_cases() {
  std::vector<PassCase> cases;
  std::filesystem::path dir = std::filesystem::path(SMELT_TEST_DIR) / "passes";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".ir") continue;
    std::ifstream f(entry.path());
    std::stringstream ss;
    ss << f.rdbuf();
    std::string text = ss.str();
    PassCase c;
    c.file = entry.path().filename().string();
    const std::string kPipe = "# PIPELINE:", kExpect = "# EXPECT:";
    size_t p = text.find(kPipe), e = text.find(kExpect);
    if (p == std::string::npos || e == std::string::npos) {
      c.pipeline = "<missing # PIPELINE: or # EXPECT: line>";
    } else {
      size_t eol = text.find('\n', p);
      c.pipeline = text.substr(p + kPipe.size(), eol - p - kPipe.size());
      c.input = text.substr(eol + 1, e - eol - 1);
      c.expected = text.substr(e + kExpect.size());
    }
    const std::string kRequires = "# REQUIRES:";
    if (size_t r = text.find(kRequires); r != std::string::npos) {
      std::stringstream names(text.substr(r + kRequires.size(), text.find('\n', r) - r - kRequires.size()));
      for (std::string name; std::getline(names >> std::ws, name, ',');) {
        name.erase(name.find_last_not_of(" \t") + 1);
        c.required_ops.push_back(name);
      }
    }
    const std::string kExplain = "# EXPLAIN-CONTAINS:";
    for (size_t r = text.find(kExplain); r != std::string::npos; r = text.find(kExplain, r + 1)) {
      std::string line = text.substr(r + kExplain.size(), text.find('\n', r) - r - kExplain.size());
      line.erase(0, line.find_first_not_of(" \t"));
      line.erase(line.find_last_not_of(" \t\r") + 1);
      c.explain_contains.push_back(line);
    }
    cases.push_back(c);
  }
  std::sort(cases.begin(), cases.end(), [](const PassCase& a, const PassCase& b) { return a.file < b.file; });
  return cases;
}

Tensor random_input(const ops::TensorMeta& m, uint64_t seed) {
  Generator gen(seed);
  if (dtype_is_floating(m.dtype)) return uniform(m.shape, -2.0, 2.0, m.dtype, &gen);
  if (m.dtype == DType::Int64) return randint(0, 3, m.shape, &gen);
  return cast(randint(0, 2, m.shape, &gen), m.dtype);
}

class PassFile : public ::testing::TestWithParam<PassCase> {};

TEST_P(PassFile, PipelineGivesExpectedIR) {
  const PassCase& c = GetParam();
  ASSERT_FALSE(c.input.empty()) << c.file << ": " << c.pipeline;
  for (const std::string& name : c.required_ops) {
    ops::OpId op;
    ASSERT_TRUE(ops::op_from_name(name, &op)) << c.file << " needs op '" << name << "', which the op table does not have";
  }
  auto graph = ir::parse(c.input);
  auto reference = graph->clone();
  passes::PassOptions options;
  options.verify = true;
  auto result = passes::run_pipeline(*graph, c.pipeline, options);
  EXPECT_TRUE(result.converged) << result.report();
  EXPECT_EQ(ir::print(*graph), ir::print(*ir::parse(c.expected))) << c.file;

  std::vector<Tensor> inputs;
  for (size_t i = 0; i < graph->inputs().size(); ++i) inputs.push_back(random_input(graph->inputs()[i]->meta, 100 + i));
  auto want = trace::interpret(*reference, inputs);
  auto got = trace::interpret(*graph, inputs);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(testing::all_close(got[i], want[i], 1e-5, 1e-6)) << "output " << i;
}

bool runs_fuse(const PassCase& c) {
  for (const passes::PassInfo* p : passes::parse_pipeline(c.pipeline)) {
    if (std::string(p->name) == "fuse") return true;
  }
  return false;
}

class FusionFile : public ::testing::TestWithParam<PassCase> {};

std::vector<PassCase> fusion_cases() {
  std::vector<PassCase> cases;
  for (const PassCase& c : load_cases()) {
    if (c.file.rfind("fusion_", 0) == 0) cases.push_back(c);
  }
  return cases;
}

TEST_P(FusionFile, FusedGraphIsBitExactAndKeepsTheContract) {
  const PassCase& c = GetParam();
  ASSERT_FALSE(c.input.empty()) << c.file << ": " << c.pipeline;
  ASSERT_TRUE(runs_fuse(c)) << c.file << ": a fusion_*.ir case must run the pass fuse";
  auto graph = ir::parse(c.input);
  auto reference = graph->clone();
  passes::PassOptions options;
  options.verify = true;
  passes::run_pipeline(*graph, c.pipeline, options);
  for (const auto& n : graph->nodes()) {
    if (n->body) {
      EXPECT_EQ(fusion::check_group(*n), "") << c.file << "\n" << ir::print(*graph);
    }
  }
  for (double special : {0.0, 0.05, 0.3, 0.7}) {
    std::mt19937_64 rng(uint64_t(special * 1000) + 7);
    fuzz::ElementDraw draw;
    draw.special = special;
    std::vector<Tensor> inputs;
    for (const ir::Value* v : graph->inputs()) {
      fuzz::ElementDraw d = draw;
      if (v->meta.dtype == DType::Int64) d.low = 0, d.high = 2, d.special = 0;  // indices stay valid
      inputs.push_back(fuzz::random_tensor(v->meta.shape, v->meta.dtype, d, rng));
    }
    auto want = trace::interpret(*reference, inputs);
    auto got = trace::interpret(*graph, inputs);
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_TRUE(same_bits(got[i], want[i])) << c.file << " output " << i << " special=" << special;
    }
  }
  if (!c.explain_contains.empty()) {
    auto g = ir::parse(c.input);
    const std::string explain = fusion::fuse(*g, fusion::FusionOptions{}).explain();
    for (const std::string& text : c.explain_contains) {
      EXPECT_NE(explain.find(text), std::string::npos) << c.file << ": the explanation lacks '" << text << "':\n" << explain;
    }
  }
}

std::string case_name(const ::testing::TestParamInfo<PassCase>& info) {
  std::string name = info.param.file.substr(0, info.param.file.size() - 3);
  for (char& ch : name) if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Files, PassFile, ::testing::ValuesIn(load_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Files, FusionFile, ::testing::ValuesIn(fusion_cases()), case_name);

}  // namespace
}  // namespace smelt
