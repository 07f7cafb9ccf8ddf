// Backward passes on several threads at once through shared nodes (a weight every thread reads,
// a subexpression of it they all use): each run keeps its own dependency counts and gradient
// buffers, so every thread gets exactly the gradients it gets alone, and a shared leaf's .grad
// gets every thread's contribution.
#include <string>
#include <thread>
#include <vector>

#include "smelt/autograd.h"
#include "support/check.h"

namespace smelt {
namespace {

TEST(AutogradThreads, SharedLeavesAndSharedSubgraphs) {
  Tensor w = testing::random_leaf({5}, -1, 1, 1);
  Tensor b = testing::random_leaf({5}, -1, 1, 2);
  const Tensor shared = tanh(w * 2.0) + b;  // one subgraph every thread's graph ends in
  auto loss = [&](const Tensor& x) { return sum(exp(x * shared) * w); };
  std::vector<Tensor> inputs;
  std::vector<std::vector<Tensor>> want;
  for (int t = 0; t < 4; ++t) {
    inputs.push_back(testing::random_leaf({3, 5}, -1, 1, uint64_t(10 + t)));
    want.push_back(autograd::grad({loss(inputs.back())}, {inputs.back(), w, b}, {}, /*retain_graph=*/true));
  }
  std::vector<std::string> errors(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 200 && errors[size_t(t)].empty(); ++round) {
        const std::vector<Tensor> got = autograd::grad({loss(inputs[size_t(t)])}, {inputs[size_t(t)], w, b},
                                                       {}, /*retain_graph=*/true);
        for (size_t k = 0; k < got.size(); ++k) {
          if (!got[k].defined() || !testing::same_bits(got[k], want[size_t(t)][k]))
            errors[size_t(t)] = "round " + std::to_string(round) + ": gradient " + std::to_string(k);
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(errors[size_t(t)], "") << "thread " << t;
  threads.clear();
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 50; ++round) loss(inputs[size_t(t)]).backward({}, /*retain_graph=*/true);
    });
  }
  for (std::thread& th : threads) th.join();
  Tensor expected = zeros_like(w);
  for (int t = 0; t < 4; ++t) expected = expected + want[size_t(t)][1] * 50.0;
  EXPECT_TRUE(testing::all_close(w.grad(), expected, 1e-9, 1e-9));
}

}  // namespace
}  // namespace smelt
