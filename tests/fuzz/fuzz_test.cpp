// The differential fuzzer in CI: a few thousand random graphs through the default pipeline, the
// regression cases found earlier, and a check that the fuzzer does catch a wrong pass.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "fuzz/fuzzer.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass_manager.h"
#include "support/check.h"

namespace smelt {
namespace {

constexpr int kCiCases = 3000;

TEST(Fuzz, RandomGraphsAreValidAndVaried) {
  size_t total_nodes = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    auto g = fuzz::random_graph(seed);
    ir::verify(*g);
    total_nodes += g->num_nodes();
    EXPECT_FALSE(g->outputs().empty());
  }
  EXPECT_GT(total_nodes, 200u * 3);  // not all trivial
}

// The generator reaches the op families it promises (so a change to it cannot quietly narrow
// what the fuzzer tests).
TEST(Fuzz, RandomGraphsCoverTheOpTable) {
  std::set<ops::OpId> seen;
  for (uint64_t seed = 1; seed <= 2000; ++seed) {
    auto g = fuzz::random_graph(seed);
    for (const auto& n : g->nodes()) seen.insert(n->op);
  }
  using ops::OpId;
  for (OpId op : {OpId::matmul, OpId::softmax, OpId::log_softmax, OpId::layer_norm, OpId::cat,
                  OpId::index_select, OpId::gather, OpId::pow, OpId::where, OpId::cast, OpId::amax,
                  OpId::amin, OpId::var, OpId::argmax, OpId::slice, OpId::conv2d, OpId::batch_norm,
                  OpId::max_pool2d, OpId::avg_pool2d, OpId::adaptive_avg_pool2d, OpId::dropout,
                  OpId::expand, OpId::permute, OpId::reshape, OpId::lt, OpId::sign}) {
    EXPECT_TRUE(seen.count(op)) << ops::op_name(op) << " never generated";
  }
  EXPECT_GE(seen.size(), 50u);
}

TEST(Fuzz, DefaultPipelineMatchesInterpreterAndEager) {
  int failed = 0;
  for (uint64_t seed = 1; seed <= kCiCases; ++seed) {
    auto g = fuzz::random_graph(seed);
    fuzz::CaseResult r = fuzz::check_graph(*g, passes::kDefaultPipeline, seed);
    if (!r.passed) {
      ++failed;
      ADD_FAILURE() << "seed " << seed << ": " << r.message << "\n" << ir::print(*fuzz::minimize(*g, passes::kDefaultPipeline, seed));
      if (failed > 5) break;
    }
  }
  EXPECT_EQ(failed, 0);
}

// A deliberately wrong pass: turns every add into sub.
bool break_adds(ir::Graph& g) {
  bool changed = false;
  for (const auto& n : g.nodes()) {
    if (n->op == ops::OpId::add) {
      n->op = ops::OpId::sub;
      changed = true;
    }
  }
  return changed;
}

TEST(Fuzz, CatchesAndMinimizesAWrongPass) {
  passes::register_pass({"test-break-adds", "turns add into sub (a wrong pass, for this test)", break_adds});
  int caught = 0;
  for (uint64_t seed = 1; seed <= 300 && caught < 3; ++seed) {
    auto g = fuzz::random_graph(seed);
    bool has_add = false;
    for (const auto& n : g->nodes()) has_add |= n->op == ops::OpId::add;
    if (!has_add) continue;
    fuzz::CaseResult r = fuzz::check_graph(*g, "test-break-adds", seed);
    if (r.passed) continue;  // e.g. add(x, 0) == sub(x, 0)
    ++caught;
    auto small = fuzz::minimize(*g, "test-break-adds", seed);
    EXPECT_LE(small->num_nodes(), g->num_nodes());
    EXPECT_FALSE(fuzz::check_graph(*small, "test-break-adds", seed).passed);
    bool small_has_add = false;
    for (const auto& n : small->nodes()) small_has_add |= n->op == ops::OpId::add;
    EXPECT_TRUE(small_has_add) << ir::print(*small);
  }
  EXPECT_EQ(caught, 3);
}

// Every minimized failure ever found stays fixed.
TEST(Fuzz, RegressionCases) {
  std::filesystem::path dir = std::filesystem::path(SMELT_TEST_DIR) / "fuzz" / "regressions";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".ir") continue;
    std::ifstream f(entry.path());
    std::stringstream ss;
    ss << f.rdbuf();
    std::string text = ss.str();
    auto field = [&](const std::string& key) {
      size_t p = text.find(key);
      EXPECT_NE(p, std::string::npos) << entry.path() << " has no " << key;
      size_t eol = text.find('\n', p);
      return text.substr(p + key.size(), eol - p - key.size());
    };
    std::string pipeline = field("# PIPELINE: ");
    uint64_t seed = std::stoull(field("# INPUT-SEED: "));
    auto g = ir::parse(text);
    fuzz::CaseResult r = fuzz::check_graph(*g, pipeline, seed);
    EXPECT_TRUE(r.passed) << entry.path() << ": " << r.message;
  }
}

}  // namespace
}  // namespace smelt
