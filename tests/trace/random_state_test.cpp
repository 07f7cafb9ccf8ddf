// The generator state is an explicit input of traced graphs: the first random op makes it a graph
// input `rng_state`, each random op passes the advanced state on, and the last state is the
// graph's last output. So a replay with the state eager code starts from draws exactly what eager
// code draws, threading the output state into the next run draws fresh numbers, and no pass
// merges, folds or drops a random op.
#include <algorithm>
#include <cstring>
#include <thread>

#include "ir/verifier.h"
#include "passes/pass_manager.h"
#include "support/check.h"
#include "support/helpers.h"
#include "trace/interpreter.h"
#include "trace/trace.h"

namespace smelt {
namespace {

using testing::same_bits;

::testing::AssertionResult same_outputs(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) {
    return ::testing::AssertionFailure() << a.size() << " outputs vs " << b.size();
  }
  for (size_t k = 0; k < a.size(); ++k) {
    if (!same_bits(a[k], b[k])) return ::testing::AssertionFailure() << "output " << k << " differs";
  }
  return ::testing::AssertionSuccess();
}

// Two dropouts of the same value (a pass that merged them would be caught), one of a computed
// value, and math after them.
std::vector<Tensor> two_dropouts(const std::vector<Tensor>& in, const std::vector<Tensor>&) {
  Tensor a = dropout(in[0], 0.5, true);
  Tensor b = dropout(in[0], 0.5, true);
  Tensor c = dropout(relu(a + b), 0.25, true);
  return {a, b, c * 2.0};
}

// What eager execution of `fn` returns, followed by the default generator's state afterwards
// (the value the graph's last output must have).
std::vector<Tensor> eager_with_state(const trace::Fn& fn, const Tensor& x) {
  std::vector<Tensor> out = fn({x}, {});
  out.push_back(generator_state_tensor(default_generator().state()));
  return out;
}

TEST(RandomState, TracedGraphTakesAndReturnsTheState) {
  Tensor x = randn({6, 7});
  auto g = trace::trace(two_dropouts, {x});
  ir::verify(*g);
  ASSERT_EQ(g->inputs().size(), 2u);
  const ir::Value* state_in = g->inputs()[1];
  EXPECT_EQ(state_in->name, "rng_state");
  EXPECT_EQ(state_in->meta, (ops::TensorMeta{{2}, DType::Int64}));
  ASSERT_EQ(g->outputs().size(), 4u);
  EXPECT_EQ(g->outputs().back()->meta, (ops::TensorMeta{{2}, DType::Int64}));
  // Each dropout reads the state the previous one returned: a chain, not three reads of the input.
  int dropouts = 0;
  const ir::Value* expected_state = state_in;
  for (const auto& node : g->nodes()) {
    if (node->op != ops::OpId::dropout) continue;
    ++dropouts;
    EXPECT_EQ(node->inputs.back(), expected_state);
    expected_state = node->outputs.back();
  }
  EXPECT_EQ(dropouts, 3);
  EXPECT_EQ(g->outputs().back(), expected_state);
}

TEST(RandomState, NoRandomOpNoStateInput) {
  auto fn = [](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    // Eval mode and p = 0 are the identity and draw nothing.
    return std::vector<Tensor>{dropout(in[0], 0.5, false) + dropout(in[0], 0.0, true)};
  };
  auto g = trace::trace(fn, {randn({3})});
  EXPECT_EQ(g->inputs().size(), 1u);
  EXPECT_EQ(g->outputs().size(), 1u);
}

TEST(RandomState, InterpretedGraphEqualsEagerForTheSameSeed) {
  Tensor x = randn({33, 17});  // 561 elements: the last Philox block is partly used
  auto g = trace::trace(two_dropouts, {x});
  for (uint64_t seed : {1ull, 77ull, 0xffffffffffffffffull}) {
    manual_seed(seed);
    const std::vector<Tensor> eager = eager_with_state(two_dropouts, x);
    const std::vector<Tensor> replay =
        trace::interpret(*g, {x, generator_state_tensor({seed, 0})});
    EXPECT_TRUE(same_outputs(replay, eager)) << "seed " << seed;
  }
  // The masks really are random: another seed gives another result.
  manual_seed(1);
  auto one = two_dropouts({x}, {});
  manual_seed(2);
  EXPECT_FALSE(same_bits(one[0], two_dropouts({x}, {})[0]));
}

TEST(RandomState, ThreadedStateGivesFreshMasksLikeSuccessiveEagerCalls) {
  Tensor x = randn({40, 9});
  auto g = trace::trace(two_dropouts, {x});
  manual_seed(5);
  const std::vector<Tensor> eager1 = eager_with_state(two_dropouts, x);
  const std::vector<Tensor> eager2 = eager_with_state(two_dropouts, x);

  const std::vector<Tensor> run1 = trace::interpret(*g, {x, generator_state_tensor({5, 0})});
  const std::vector<Tensor> run2 = trace::interpret(*g, {x, run1.back()});
  EXPECT_TRUE(same_outputs(run1, eager1));
  EXPECT_TRUE(same_outputs(run2, eager2));
  EXPECT_FALSE(same_bits(run1[0], run2[0])) << "the second run must draw fresh masks";
  // Replaying with the same state repeats the run exactly.
  EXPECT_TRUE(same_outputs(trace::interpret(*g, {x, run1.back()}), run2));
}

TEST(RandomState, DefaultPipelineKeepsEveryRandomOpAndTheResults) {
  Tensor x = randn({12, 5});
  auto g = trace::trace(two_dropouts, {x});
  const Tensor state = generator_state_tensor({31, 4});
  const std::vector<Tensor> before = trace::interpret(*g, {x, state});
  passes::PassOptions options;
  passes::run_pipeline(*g, passes::kDefaultPipeline, options);
  ir::verify(*g);
  int dropouts = 0;
  for (const auto& node : g->nodes()) dropouts += node->op == ops::OpId::dropout;
  EXPECT_EQ(dropouts, 3) << "cse must not merge the two dropouts of the same value";
  EXPECT_TRUE(same_outputs(trace::interpret(*g, {x, state}), before));
}

// The joint graph differentiates through dropout's first output with the mask it drew; the
// state passes through untouched by the backward part.
TEST(RandomState, JointGraphGradientUsesTheMask) {
  auto fn = [](const std::vector<Tensor>& in, const std::vector<Tensor>& p) {
    Tensor h = dropout(tanh(in[0] * p[0]), 0.3, true);
    return std::vector<Tensor>{sum(h * h)};
  };
  Tensor x = randn({8, 6}, DType::Float64);
  Tensor w = randn({6}, DType::Float64);
  auto g = trace::trace_joint(fn, {x}, {w});
  ir::verify(*g);
  // Inputs: x, w, rng_state, tangent. Outputs: loss, dw, final state.
  ASSERT_EQ(g->inputs().size(), 4u);
  EXPECT_EQ(g->inputs()[2]->name, "rng_state");
  ASSERT_EQ(g->outputs().size(), 3u);

  manual_seed(9);
  Tensor w_leaf = w.clone();
  w_leaf.set_requires_grad();
  Tensor loss = fn({x}, {w_leaf})[0];
  loss.backward();
  const Tensor eager_state = generator_state_tensor(default_generator().state());

  const std::vector<Tensor> replay =
      trace::interpret(*g, {x, w, generator_state_tensor({9, 0}), ones({}, DType::Float64)});
  EXPECT_TRUE(same_bits(replay[0], loss.detach()));
  EXPECT_TRUE(same_bits(replay[1], w_leaf.grad())) << "the same kernels run in the same order";
  EXPECT_TRUE(same_bits(replay[2], eager_state));
  // Some elements were dropped, so the mask matters for the gradient: a graph run with another
  // state gives another gradient.
  const std::vector<Tensor> other =
      trace::interpret(*g, {x, w, generator_state_tensor({10, 0}), ones({}, DType::Float64)});
  EXPECT_FALSE(testing::all_close(other[1], w_leaf.grad()));
}

// Eager dropout from several threads at once: each call reserves its own range, so the masks are
// the masks of sequential calls, reordered.
TEST(RandomState, ConcurrentEagerDropoutsDrawDisjointMasks) {
  Tensor x = ones({64});
  constexpr int kThreads = 4, kPerThread = 50;
  manual_seed(3);
  std::vector<std::vector<double>> sequential, concurrent;
  for (int i = 0; i < kThreads * kPerThread; ++i) sequential.push_back(dropout(x, 0.5, true).to_vector());
  manual_seed(3);
  std::vector<std::vector<std::vector<double>>> per_thread(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) per_thread[size_t(t)].push_back(dropout(x, 0.5, true).to_vector());
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& v : per_thread) concurrent.insert(concurrent.end(), v.begin(), v.end());
  std::sort(sequential.begin(), sequential.end());
  std::sort(concurrent.begin(), concurrent.end());
  EXPECT_EQ(sequential, concurrent);
}

}  // namespace
}  // namespace smelt
