#include <cmath>

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

// ---- layer norm

// Naive layer norm over rows of m trailing elements, in double; w/b empty means none.
Tensor layer_norm_ref(const Tensor& x, int64_t m, const std::vector<double>& w,
                      const std::vector<double>& b, double eps) {
  std::vector<double> v = x.to_vector(), out(v.size());
  for (size_t r = 0; r < v.size() / size_t(m); ++r) {
    double mu = 0, var = 0;
    for (int64_t i = 0; i < m; ++i) mu += v[r * m + i];
    mu /= double(m);
    for (int64_t i = 0; i < m; ++i) var += (v[r * m + i] - mu) * (v[r * m + i] - mu);
    var /= double(m);
    for (int64_t i = 0; i < m; ++i) {
      double y = (v[r * m + i] - mu) / std::sqrt(var + eps);
      out[r * m + i] = y * (w.empty() ? 1.0 : w[size_t(i)]) + (b.empty() ? 0.0 : b[size_t(i)]);
    }
  }
  return from_vector(out, x.shape(), x.dtype());
}

TEST(LayerNorm, ForwardMatchesReference) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Tensor x = normal({4, 5, 6}, 0.5, 2.0, dtype);
    Tensor w = normal({5, 6}, 1.0, 0.5, dtype), b = normal({5, 6}, 0.0, 0.5, dtype);
    const double tol = dtype == DType::Float32 ? 1e-5 : 1e-12;
    EXPECT_TRUE(all_close(layer_norm(x, {5, 6}, w, b), layer_norm_ref(x, 30, w.to_vector(), b.to_vector(), 1e-5), tol, tol));
    EXPECT_TRUE(all_close(layer_norm(x, {6}, Tensor(), Tensor(), 1e-3), layer_norm_ref(x, 6, {}, {}, 1e-3), tol, tol));
    // non-contiguous input
    Tensor xp = x.permute({1, 0, 2});
    EXPECT_TRUE(all_close(layer_norm(xp, {6}), layer_norm_ref(xp.contiguous(), 6, {}, {}, 1e-5), tol, tol));
  }
}

TEST(LayerNorm, StatisticsOutputsAndLargeOffset) {
  // float32 rows around 1e4 with unit spread: a one-pass E[x^2] - E[x]^2 would lose the variance.
  Tensor x = normal({3, 64}, 1e4, 1.0, DType::Float32);
  Tensor w = ones({64}), b = zeros({64});
  auto out = ops::call(ops::OpId::layer_norm, {x, w, b}, {{"ndim", int64_t(1)}, {"eps", 1e-5}});
  EXPECT_EQ(out[1].shape(), (Shape{3, 1}));
  EXPECT_EQ(out[2].shape(), (Shape{3, 1}));
  Tensor x64 = x.to(DType::Float64);
  Tensor mu = mean(x64, {1}, true), var = ::smelt::var(x64, {1}, 0, true);
  EXPECT_TRUE(all_close(out[1].to(DType::Float64), mu, 1e-7, 0));
  EXPECT_TRUE(all_close(out[2].to(DType::Float64), rsqrt(var + 1e-5), 1e-5, 0));
  EXPECT_TRUE(all_close(out[0], layer_norm_ref(x, 64, {}, {}, 1e-5), 1e-4, 1e-4));
}

TEST(LayerNorm, Gradcheck) {
  Tensor x = random_leaf({3, 2, 4}, -2, 2, 1), w = random_leaf({2, 4}, 0.5, 1.5, 2),
         b = random_leaf({2, 4}, -1, 1, 3);
  auto f = [](const std::vector<Tensor>& v) { return layer_norm(v[0], {2, 4}, v[1], v[2]); };
  EXPECT_TRUE(gradcheck(f, {x, w, b}));
  Tensor w1 = random_leaf({3}, 0.5, 1.5, 4);
  // normalizing a permuted (non-contiguous) input's last dim
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& v) {
    return layer_norm(v[0].permute({1, 2, 0}), {3}, v[1]);
  }, {x, w1}));
}

TEST(LayerNorm, GradientThroughStatistics) {
  Tensor x = random_leaf({3, 5}, -2, 2, 5), w = random_leaf({5}, 0.5, 1.5, 6), b = random_leaf({5}, -1, 1, 7);
  auto f = [](const std::vector<Tensor>& v) {
    auto out = ops::call(ops::OpId::layer_norm, v, {{"ndim", int64_t(1)}, {"eps", 1e-5}});
    return sum(out[0] * out[0], {1}, true) + 3.0 * out[1] + 2.0 * out[2];
  };
  EXPECT_TRUE(gradcheck(f, {x, w, b}));
}

TEST(LayerNorm, SecondOrder) {
  Tensor x = random_leaf({2, 4}, -2, 2, 8), w = random_leaf({4}, 0.5, 1.5, 9), b = random_leaf({4}, -1, 1, 10);
  EXPECT_TRUE(gradgradcheck([](const std::vector<Tensor>& v) { return layer_norm(v[0], {4}, v[1], v[2]); },
                            {x, w, b}));
}

TEST(LayerNorm, Errors) {
  Tensor x = randn({2, 3, 4});
  expect_error([&] { layer_norm(x, {3}); }, "layer_norm");
  expect_error([&] { layer_norm(x, {}); }, "layer_norm");
  expect_error([&] { layer_norm(x, {1, 2, 3, 4}); }, "layer_norm");
  expect_error([&] { layer_norm(x, {4}, ones({3})); }, "layer_norm");
  expect_error([&] { layer_norm(x, {4}, ones({4}, DType::Float64)); }, "layer_norm");
  expect_error([&] { layer_norm(arange(4), {4}); }, "layer_norm");
}

// ---- batch norm

struct ChannelStats {
  std::vector<double> mean, biased_var, unbiased_var;
};

// Per-channel statistics of x (N, C, S...) in double.
ChannelStats channel_stats(const Tensor& x) {
  std::vector<double> v = x.to_vector();
  const int64_t n = x.size(0), c = x.size(1), s = x.numel() / (n * c), count = n * s;
  ChannelStats st;
  for (int64_t ch = 0; ch < c; ++ch) {
    double mu = 0, ss = 0;
    for (int64_t i = 0; i < n; ++i) for (int64_t j = 0; j < s; ++j) mu += v[size_t((i * c + ch) * s + j)];
    mu /= double(count);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < s; ++j) {
        double d = v[size_t((i * c + ch) * s + j)] - mu;
        ss += d * d;
      }
    }
    st.mean.push_back(mu);
    st.biased_var.push_back(ss / double(count));
    st.unbiased_var.push_back(ss / double(count - 1));
  }
  return st;
}

// y = (x - mean_c) / sqrt(var_c + eps) * w_c + b_c
Tensor batch_norm_ref(const Tensor& x, const std::vector<double>& mean, const std::vector<double>& var,
                      const std::vector<double>& w, const std::vector<double>& b, double eps) {
  std::vector<double> v = x.to_vector();
  const int64_t n = x.size(0), c = x.size(1), s = x.numel() / (n * c);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t j = 0; j < s; ++j) {
        double& e = v[size_t((i * c + ch) * s + j)];
        e = (e - mean[size_t(ch)]) / std::sqrt(var[size_t(ch)] + eps) * w[size_t(ch)] + b[size_t(ch)];
      }
    }
  }
  return from_vector(v, x.shape(), x.dtype());
}

TEST(BatchNorm, TrainingForwardAndRunningStatsUpdate) {
  for (Shape shape : {Shape{4, 3, 5, 2}, Shape{6, 3}}) {
    Tensor x = normal(shape, 2.0, 3.0, DType::Float64);
    Tensor w = normal({3}, 1, 0.3, DType::Float64), b = normal({3}, 0, 0.3, DType::Float64);
    Tensor rm = from_vector(std::vector<double>{0.5, -1, 2}, {3});
    Tensor rv = from_vector(std::vector<double>{1, 2, 0.5}, {3});
    const uint64_t rm_version = rm.storage()->version(), rv_version = rv.storage()->version();
    ChannelStats st = channel_stats(x);
    Tensor y = batch_norm(x, rm, rv, w, b, /*training=*/true, /*momentum=*/0.2, 1e-5);
    EXPECT_TRUE(all_close(y, batch_norm_ref(x, st.mean, st.biased_var, w.to_vector(), b.to_vector(), 1e-5), 1e-10, 1e-12));
    // running = 0.8 running + 0.2 batch, with the unbiased variance
    std::vector<double> want_rm, want_rv;
    const std::vector<double> rm0{0.5, -1, 2}, rv0{1, 2, 0.5};
    for (int c = 0; c < 3; ++c) {
      want_rm.push_back(0.8 * rm0[c] + 0.2 * st.mean[c]);
      want_rv.push_back(0.8 * rv0[c] + 0.2 * st.unbiased_var[c]);
    }
    EXPECT_TRUE(all_close(rm, from_vector(want_rm, {3}), 1e-12, 1e-12));
    EXPECT_TRUE(all_close(rv, from_vector(want_rv, {3}), 1e-12, 1e-12));
    EXPECT_GT(rm.storage()->version(), rm_version);
    EXPECT_GT(rv.storage()->version(), rv_version);
  }
}

TEST(BatchNorm, EvalUsesRunningStatsAndLeavesThemAlone) {
  Tensor x = randn({3, 2, 4}), w = from_vector(std::vector<float>{2, -1}, {2}),
         b = from_vector(std::vector<float>{0.5, 0}, {2});
  Tensor rm = from_vector(std::vector<float>{1, -2}, {2}), rv = from_vector(std::vector<float>{4, 0.25}, {2});
  const uint64_t version = rm.storage()->version();
  Tensor y = batch_norm(x, rm, rv, w, b, /*training=*/false);
  EXPECT_TRUE(all_close(y, batch_norm_ref(x, {1, -2}, {4, 0.25}, {2, -1}, {0.5, 0}, 1e-5), 1e-5, 1e-5));
  EXPECT_TRUE(all_close(rm, from_vector(std::vector<float>{1, -2}, {2})));
  EXPECT_EQ(rm.storage()->version(), version);
  // strided running statistics (every other element of a buffer), no weight/bias
  Tensor buffer = from_vector(std::vector<float>{1, 9, -2, 9}, {4}), vbuffer = from_vector(std::vector<float>{4, 9, 0.25, 9}, {4});
  Tensor y2 = batch_norm(x, buffer.slice(0, 0, 4, 2), vbuffer.slice(0, 0, 4, 2), Tensor(), Tensor(), false);
  EXPECT_TRUE(all_close(y2, batch_norm_ref(x, {1, -2}, {4, 0.25}, {1, 1}, {0, 0}, 1e-5), 1e-5, 1e-5));
}

TEST(BatchNorm, TrainingWithoutRunningStatsAndStridedInput) {
  Tensor base = randn({3, 4, 5}, DType::Float64);
  Tensor x = base.permute({2, 1, 0});  // (5, 4, 3), channels 4, non-contiguous
  ChannelStats st = channel_stats(x.contiguous());
  Tensor y = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true);
  EXPECT_TRUE(all_close(y, batch_norm_ref(x.contiguous(), st.mean, st.biased_var, {1, 1, 1, 1}, {0, 0, 0, 0}, 1e-5), 1e-10, 1e-12));
}

TEST(BatchNorm, GradcheckTraining) {
  Tensor x = random_leaf({3, 2, 2, 2}, -2, 2, 11), w = random_leaf({2}, 0.5, 1.5, 12), b = random_leaf({2}, -1, 1, 13);
  Tensor rm = zeros({2}, DType::Float64), rv = ones({2}, DType::Float64);
  auto f = [&](const std::vector<Tensor>& v) { return batch_norm(v[0], rm, rv, v[1], v[2], true); };
  EXPECT_TRUE(gradcheck(f, {x, w, b}));
  // channels of a permuted input
  Tensor x2 = random_leaf({3, 4, 2}, -2, 2, 14);
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) {
    return batch_norm(v[0].permute({0, 2, 1}), rm, rv, v[1], v[2], true);
  }, {x2, w, b}));
}

TEST(BatchNorm, GradcheckEvalGivesNoGradToRunningStats) {
  Tensor x = random_leaf({3, 2, 3}, -2, 2, 15), w = random_leaf({2}, 0.5, 1.5, 16), b = random_leaf({2}, -1, 1, 17);
  Tensor rm = from_vector(std::vector<double>{0.3, -0.2}, {2}), rv = from_vector(std::vector<double>{1.5, 0.7}, {2});
  auto f = [&](const std::vector<Tensor>& v) { return batch_norm(v[0], rm, rv, v[1], v[2], false); };
  EXPECT_TRUE(gradcheck(f, {x, w, b}));
  EXPECT_TRUE(gradgradcheck(f, {x, w, b}));
  // dx = g * w / sqrt(rv + eps)
  Tensor x1 = random_leaf({2, 2}, -1, 1, 18);
  sum(batch_norm(x1, rm, rv, Tensor(), Tensor(), false)).backward();
  EXPECT_TRUE(all_close(x1.grad(), from_vector(std::vector<double>{1 / std::sqrt(1.5 + 1e-5), 1 / std::sqrt(0.7 + 1e-5),
                                                                   1 / std::sqrt(1.5 + 1e-5), 1 / std::sqrt(0.7 + 1e-5)}, {2, 2})));
}

TEST(BatchNorm, GradientThroughStatisticsAndSecondOrder) {
  Tensor x = random_leaf({4, 2, 2}, -2, 2, 19), w = random_leaf({2}, 0.5, 1.5, 20), b = random_leaf({2}, -1, 1, 21);
  Tensor rm = zeros({2}, DType::Float64), rv = ones({2}, DType::Float64);
  auto stats = [&](const std::vector<Tensor>& v) {
    auto out = ops::call(ops::OpId::batch_norm, {v[0], v[1], v[2], rm, rv},
                         {{"training", int64_t(1)}, {"momentum", 0.1}, {"eps", 1e-5}});
    return sum(out[0] * out[0]) + sum(out[1] * 2.0) + sum(out[2] * 3.0);
  };
  EXPECT_TRUE(gradcheck(stats, {x, w, b}));
  EXPECT_TRUE(gradgradcheck([&](const std::vector<Tensor>& v) { return batch_norm(v[0], rm, rv, v[1], v[2], true); },
                            {x, w, b}));
}

TEST(BatchNorm, TwoForwardsThenOneBackward) {
  // The second step updates the running statistics before the first backward runs.
  Tensor w = random_leaf({2}, 0.5, 1.5, 22), b = random_leaf({2}, -1, 1, 23);
  Tensor rm = zeros({2}, DType::Float64), rv = ones({2}, DType::Float64);
  Tensor a = randn({4, 2}, DType::Float64), c = randn({4, 2}, DType::Float64);
  Tensor loss = sum(batch_norm(a, rm, rv, w, b, true) * a) + sum(batch_norm(c, rm, rv, w, b, true) * c);
  loss.backward();
  ASSERT_TRUE(w.grad().defined());
  // dL/dw_c = sum over both batches of xhat * x
  auto xhat_dot = [](const Tensor& x) {
    Tensor mu = mean(x, {0}, true), var = ::smelt::var(x, {0}, 0, true);
    return sum((x - mu) * rsqrt(var + 1e-5) * x, {0});
  };
  EXPECT_TRUE(all_close(w.grad(), xhat_dot(a) + xhat_dot(c), 1e-8, 1e-10));
}

TEST(BatchNorm, Errors) {
  Tensor rm = zeros({3}), rv = ones({3});
  expect_error([&] { batch_norm(randn({1, 3}), rm, rv, Tensor(), Tensor(), true); }, "batch_norm");
  expect_error([&] { batch_norm(randn({4, 3}), Tensor(), Tensor(), Tensor(), Tensor(), false); }, "batch_norm");
  expect_error([&] { batch_norm(randn({4, 2}), rm, rv, Tensor(), Tensor(), true); }, "batch_norm");
  expect_error([&] { batch_norm(randn({4}), rm, rv, Tensor(), Tensor(), true); }, "batch_norm");
  expect_error([&] { batch_norm(randn({4, 3}), rm, Tensor(), Tensor(), Tensor(), true); }, "batch_norm");
  expect_error([&] { batch_norm(randn({4, 3}), rm, rv, ones({3}, DType::Float64), Tensor(), true); }, "batch_norm");
  Tensor grad_rm = zeros({3});
  grad_rm.set_requires_grad();
  expect_error([&] { batch_norm(randn({4, 3}), grad_rm, rv, Tensor(), Tensor(), true); }, "batch_norm");
}

TEST(BatchNorm, Float32LargeOffsetKeepsPrecision) {
  Tensor x = normal({8, 2, 16}, 1e4, 1.0, DType::Float32);
  Tensor rm = zeros({2}), rv = ones({2});
  ChannelStats st = channel_stats(x);
  Tensor y = batch_norm(x, rm, rv, Tensor(), Tensor(), true);
  EXPECT_TRUE(all_close(y, batch_norm_ref(x, st.mean, st.biased_var, {1, 1}, {0, 0}, 1e-5), 1e-4, 1e-4));
}

}  // namespace
}  // namespace smelt
