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
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/printer.h"
#include "passes/pass_manager.h"
#include "support/check.h"
#include "trace/interpreter.h"

namespace smelt {
namespace {

struct PassCase {
  std::string file;
  std::string pipeline;
  std::string input;
  std::string expected;
  std::vector<std::string> required_ops;
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
  passes::PipelineOptions options;
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

INSTANTIATE_TEST_SUITE_P(Files, PassFile, ::testing::ValuesIn(load_cases()),
                         [](const ::testing::TestParamInfo<PassCase>& info) {
                           std::string name = info.param.file.substr(0, info.param.file.size() - 3);
                           for (char& ch : name) if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

}  // namespace
}  // namespace smelt
