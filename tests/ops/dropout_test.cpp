#include <omp.h>

#include "ops/dispatch.h"
#include "ops/second_order.h"
#include "support/check.h"
#include "support/errors.h"

namespace smelt {
namespace {

using testing::all_close;
using testing::expect_error;
using testing::gradcheck;
using testing::gradgradcheck;
using testing::random_leaf;

TEST(Dropout, IdentityInEvalAndForZeroP) {
  Tensor x = randn({3, 4});
  EXPECT_TRUE(dropout(x, 0.5, /*training=*/false).same(x));
  EXPECT_TRUE(dropout(x, 0.0, /*training=*/true).same(x));
  // the op itself, in eval: y equals x and the mask keeps everything
  const Tensor state = generator_state_tensor({17, 40});
  auto out = ops::call(ops::OpId::dropout, {x, state}, {{"p", 0.5}, {"training", int64_t(0)}});
  EXPECT_TRUE(all_close(out[0], x));
  EXPECT_EQ(out[1].dtype(), DType::Bool);
  for (double k : out[1].to_vector()) EXPECT_EQ(k, 1.0);
  // ...and draws nothing: the state comes back unchanged
  EXPECT_EQ(generator_state_from_tensor(out[2]), (GeneratorState{17, 40}));
}

TEST(Dropout, PEqualOneGivesZerosAndZeroGradient) {
  Tensor x = random_leaf({5});
  Tensor y = dropout(x, 1.0, true);
  EXPECT_TRUE(all_close(y, zeros({5}, DType::Float64)));
  sum(y).backward();
  EXPECT_TRUE(all_close(x.grad(), zeros({5}, DType::Float64)));
}

TEST(Dropout, KeptElementsScaledAndRateAboutRight) {
  const double p = 0.3;
  Tensor x = uniform({200, 500}, 1.0, 2.0);
  auto out = ops::call(ops::OpId::dropout, {x, generator_state_tensor({123, 0})},
                       {{"p", p}, {"training", int64_t(1)}});
  std::vector<double> xv = x.to_vector(), yv = out[0].to_vector(), mv = out[1].to_vector();
  int64_t kept = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    if (mv[i] != 0) {
      ++kept;
      EXPECT_NEAR(yv[i], xv[i] / (1 - p), 1e-5);
    } else {
      EXPECT_EQ(yv[i], 0.0);
    }
  }
  // 100000 Bernoulli(0.7) draws: the standard deviation of the rate is 0.0014.
  EXPECT_NEAR(double(kept) / double(xv.size()), 0.7, 0.01);
}

TEST(Dropout, MaskFollowsTheDefaultGenerator) {
  Tensor x = ones({64, 64});
  manual_seed(7);
  Tensor a = dropout(x, 0.5, true);
  Tensor b = dropout(x, 0.5, true);  // the generator moved on: another mask
  manual_seed(7);
  Tensor c = dropout(x, 0.5, true);
  EXPECT_TRUE(all_close(a, c));
  EXPECT_FALSE(all_close(a, b));
}

TEST(Dropout, MaskIndependentOfLayoutAndThreads) {
  Tensor base = randn({300, 400});
  Tensor permuted = base.t();  // non-contiguous
  manual_seed(9);
  Tensor a = dropout(permuted, 0.4, true);
  manual_seed(9);
  Tensor b = dropout(permuted.contiguous(), 0.4, true);
  EXPECT_TRUE(all_close(a, b, 0, 0));

  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  manual_seed(9);
  Tensor single = dropout(base, 0.4, true);
  omp_set_num_threads(std::max(2, threads));
  manual_seed(9);
  Tensor multi = dropout(base, 0.4, true);
  omp_set_num_threads(threads);
  EXPECT_TRUE(all_close(single, multi, 0, 0));
}

TEST(Dropout, GradientIsMaskOverKeepProbability) {
  Tensor x = random_leaf({4, 6});
  auto out = ops::call(ops::OpId::dropout, {x, generator_state_tensor({3, 0})},
                       {{"p", 0.25}, {"training", int64_t(1)}});
  sum(out[0]).backward();
  EXPECT_TRUE(all_close(x.grad(), cast(out[1], DType::Float64) / 0.75));

  auto f = [](const std::vector<Tensor>& v) {
    manual_seed(5);  // the same mask on every evaluation
    return dropout(v[0].t(), 0.4, true) * v[0].t();
  };
  Tensor y = random_leaf({3, 5}, -1, 1, 2);
  EXPECT_TRUE(gradcheck(f, {y}));
  EXPECT_TRUE(gradgradcheck(f, {y}));
}

// The op is a pure function of (x, state): it returns the state advanced by one Philox block per 4
// elements, and eager dropout draws exactly what the op draws from the default generator's state.
TEST(Dropout, OpReadsTheStateAndReturnsItAdvanced) {
  Tensor x = randn({7, 5});  // 35 elements: 9 blocks
  const ops::Attrs attrs{{"p", 0.5}, {"training", int64_t(1)}};
  auto a = ops::call(ops::OpId::dropout, {x, generator_state_tensor({77, 1000})}, attrs);
  auto b = ops::call(ops::OpId::dropout, {x, generator_state_tensor({77, 1000})}, attrs);
  EXPECT_EQ(generator_state_from_tensor(a[2]), (GeneratorState{77, 1009}));
  EXPECT_TRUE(all_close(a[0], b[0], 0, 0));
  EXPECT_TRUE(all_close(cast(a[1], DType::Float32), cast(b[1], DType::Float32), 0, 0));
  auto c = ops::call(ops::OpId::dropout, {x, a[2]}, attrs);
  EXPECT_FALSE(all_close(a[0], c[0], 0, 0)) << "the advanced state draws a new mask";

  manual_seed(77);
  default_generator().reserve(1000);
  Tensor eager = dropout(x, 0.5, true);
  EXPECT_TRUE(all_close(eager, a[0], 0, 0));
  EXPECT_EQ(default_generator().state(), (GeneratorState{77, 1009}));
}

TEST(Dropout, Errors) {
  const ops::Attrs attrs{{"p", 0.5}, {"training", int64_t(1)}};
  expect_error([&] { ops::call(ops::OpId::dropout, {randn({3}), zeros({2})}, attrs); },
               "generator state (input 1) must be int64 [2]");
  expect_error([&] { ops::call(ops::OpId::dropout, {randn({3}), zeros({3}, DType::Int64)}, attrs); },
               "generator state (input 1) must be int64 [2]");
  expect_error([&] { ops::call(ops::OpId::dropout, {randn({3})}, attrs); }, "expected 2 inputs");
  expect_error([] { dropout(randn({3}), 1.5, true); }, "dropout");
  expect_error([] { dropout(randn({3}), -0.1, false); }, "dropout");
  expect_error([] { dropout(arange(3), 0.5, true); }, "dropout");
}

}  // namespace
}  // namespace smelt
