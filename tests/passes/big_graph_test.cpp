// 100,000-node graphs go through the default pipeline (linear-time passes and verifier) and come
// out right: the expected number of nodes, and the same values as before, bit for bit (NaN
// matched as NaN). No time limit is asserted; bench/ir_pipeline_bench.cpp measures it.
#include <cmath>
#include <cstring>

#include "ir/verifier.h"
#include "passes/big_graphs.h"
#include "passes/pass_manager.h"
#include "support/check.h"
#include "trace/interpreter.h"

namespace smelt {
namespace {

std::vector<Tensor> inputs_for(const ir::Graph& g) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    inputs.push_back(testing::random_tensor(g.inputs()[i]->meta.shape, -1.5, 1.5, 40 + i).to(DType::Float32));
  }
  return inputs;
}

void expect_same_values(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    std::vector<double> g = got[i].to_vector(), w = want[i].to_vector();
    ASSERT_EQ(g.size(), w.size());
    for (size_t k = 0; k < w.size(); ++k) {
      bool same = (std::isnan(g[k]) && std::isnan(w[k])) ||
                  (g[k] == w[k] && std::signbit(g[k]) == std::signbit(w[k]));
      ASSERT_TRUE(same) << "output " << i << " element " << k << ": " << g[k] << " instead of " << w[k];
    }
  }
}

passes::PassOptions quiet() {
  passes::PassOptions o;  // the verifier stays on
  return o;
}

TEST(BigGraph, ChainOf100kNodes) {
  auto g = big_graphs::chain(20000);
  ASSERT_EQ(g->num_nodes(), 100000u);
  auto inputs = inputs_for(*g);
  auto want = trace::interpret(*g, inputs);
  passes::PipelineResult r = passes::run_pipeline(*g, passes::kDefaultPipeline, quiet());
  EXPECT_TRUE(r.converged);
  ir::verify(*g);
  EXPECT_EQ(g->num_nodes(), 60000u);  // mul, add, tanh per step
  EXPECT_EQ(g->constants().size(), 7u);
  expect_same_values(trace::interpret(*g, inputs), want);
}

TEST(BigGraph, WideDagOf100kNodes) {
  auto g = big_graphs::wide(100000);
  ASSERT_EQ(g->num_nodes(), 100000u);
  auto inputs = inputs_for(*g);
  auto want = trace::interpret(*g, inputs);
  passes::PipelineResult r = passes::run_pipeline(*g, passes::kDefaultPipeline, quiet());
  EXPECT_TRUE(r.converged);
  ir::verify(*g);
  EXPECT_LT(g->num_nodes(), 100000u);
  EXPECT_GT(g->num_nodes(), 0u);
  expect_same_values(trace::interpret(*g, inputs), want);
}

}  // namespace
}  // namespace smelt
