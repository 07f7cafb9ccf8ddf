// Layer forwards against naive references written here, and gradients through modules.
#include <cmath>

#include "support/check.h"
#include "support/errors.h"

namespace smelt {
namespace {

using testing::all_close;
using testing::expect_error;
using testing::gradcheck;
using testing::random_leaf;
using testing::random_tensor;

// y[n, o] = sum_i x[n, i] w[o, i] + b[o]
Tensor linear_reference(const Tensor& x, const Tensor& w, const Tensor& b) {
  const int64_t n = x.size(0), in = x.size(1), out = w.size(0);
  std::vector<double> xv = x.to_vector(), wv = w.to_vector(), bv = b.to_vector(),
                      y(size_t(n * out));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double acc = bv[size_t(o)];
      for (int64_t i = 0; i < in; ++i) acc += xv[size_t(r * in + i)] * wv[size_t(o * in + i)];
      y[size_t(r * out + o)] = acc;
    }
  }
  return from_vector(y, {n, out});
}

TEST(Linear, ForwardMatchesReference) {
  manual_seed(5);
  nn::Linear lin(6, 3, true, DType::Float64);
  Tensor x = random_tensor({4, 6}, -1, 1, 1);
  EXPECT_TRUE(all_close(lin(x), linear_reference(x, lin.weight, lin.bias), 1e-12, 1e-12));
  // Leading batch dims are kept.
  EXPECT_EQ(lin(random_tensor({2, 5, 6}, -1, 1, 2)).shape(), (Shape{2, 5, 3}));
}

TEST(Linear, GradientsReachParameters) {
  nn::Linear lin(4, 3, true, DType::Float64);
  Tensor x = random_leaf({5, 4});
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) { return lin(v[0]); }, {x}));
  sum(lin(x.detach())).backward();
  // d sum(x W^T + b) / d b = number of rows; / d W[o, i] = sum_n x[n, i].
  EXPECT_TRUE(all_close(lin.bias.grad(), full({3}, 5.0, DType::Float64)));
  EXPECT_TRUE(all_close(lin.weight.grad(), sum(x.detach(), {0}).unsqueeze(0).expand({3, 4})));
}

TEST(Linear, WrongInputIsAnError) {
  nn::Linear lin(4, 3);
  expect_error([&] { lin(zeros({2, 5})); }, {"Linear", "(..., 4)", "(2, 5)"});
}

TEST(Activations, MatchFunctionalOps) {
  Tensor x = random_tensor({3, 5}, -3, 3, 7);
  EXPECT_TRUE(all_close(nn::ReLU()(x), relu(x), 0, 0));
  EXPECT_TRUE(all_close(nn::GELU()(x), gelu(x), 0, 0));
  EXPECT_TRUE(all_close(nn::GELU(GeluApprox::Tanh)(x), gelu(x, GeluApprox::Tanh), 0, 0));
  EXPECT_TRUE(all_close(nn::Tanh()(x), tanh(x), 0, 0));
  EXPECT_TRUE(all_close(nn::Sigmoid()(x), sigmoid(x), 0, 0));
  EXPECT_TRUE(all_close(nn::SiLU()(x), silu(x), 0, 0));
  EXPECT_TRUE(all_close(nn::LeakyReLU(0.2)(x), leaky_relu(x, 0.2), 0, 0));
  std::vector<double> xv = x.to_vector(), yv = nn::LeakyReLU(0.2)(x).to_vector();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_DOUBLE_EQ(yv[i], xv[i] > 0 ? xv[i] : 0.2 * xv[i]);
}

TEST(Flatten, KeepsTheBatchDim) {
  Tensor x = random_tensor({2, 3, 4, 5}, -1, 1, 3);
  EXPECT_EQ(nn::Flatten()(x).shape(), (Shape{2, 60}));
  EXPECT_EQ(nn::Flatten(0)(x).shape(), (Shape{120}));
  EXPECT_EQ(nn::Flatten(1, 2)(x).shape(), (Shape{2, 12, 5}));
}

TEST(Sequential, ChainsItsLayers) {
  manual_seed(9);
  auto l1 = std::make_shared<nn::Linear>(4, 8, true, DType::Float64);
  auto l2 = std::make_shared<nn::Linear>(8, 2, true, DType::Float64);
  nn::Sequential seq(std::vector<nn::ModulePtr>{l1, std::make_shared<nn::Tanh>(), l2});
  Tensor x = random_tensor({3, 4}, -1, 1, 4);
  EXPECT_TRUE(all_close(seq(x), (*l2)(tanh((*l1)(x))), 0, 0));
  EXPECT_EQ(seq.size(), 3u);
  EXPECT_TRUE(seq[0] == l1);
  expect_error([&] { seq[3]; }, {"Sequential", "index 3"});
  auto extra = seq.push_back(std::make_shared<nn::ReLU>());
  EXPECT_EQ(seq.named_children().back().first, "3");
}

// ---- layers over ops that live in other branches (conv2d, batch_norm, layer_norm, dropout,
// embedding): their references are written here.

// y[n, o, i, j] = b[o] + sum_{c, ki, kj} x[n, g*cpg + c, i*s + ki, j*s + kj] w[o, c, ki, kj]
Tensor conv2d_reference(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride,
                        int64_t pad, int64_t groups) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t O = w.size(0), CG = w.size(1), KH = w.size(2), KW = w.size(3);
  const int64_t OH = (H + 2 * pad - KH) / stride + 1, OW = (W + 2 * pad - KW) / stride + 1;
  std::vector<double> xv = x.to_vector(), wv = w.to_vector(), bv = b.to_vector();
  std::vector<double> y(size_t(N * O * OH * OW));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) {
          double acc = bv[size_t(o)];
          const int64_t g = o / (O / groups);
          for (int64_t c = 0; c < CG; ++c)
            for (int64_t ki = 0; ki < KH; ++ki)
              for (int64_t kj = 0; kj < KW; ++kj) {
                int64_t hi = i * stride - pad + ki, wj = j * stride - pad + kj;
                if (hi < 0 || hi >= H || wj < 0 || wj >= W) continue;
                acc += xv[size_t(((n * C + g * CG + c) * H + hi) * W + wj)] *
                       wv[size_t(((o * CG + c) * KH + ki) * KW + kj)];
              }
          y[size_t(((n * O + o) * OH + i) * OW + j)] = acc;
        }
  return from_vector(y, {N, O, OH, OW});
}

TEST(Conv2d, ForwardMatchesReference) {
  manual_seed(11);
  nn::Conv2d conv(4, 6, {3, 3},
                  {.stride = {2, 2}, .padding = {1, 1}, .groups = 2, .dtype = DType::Float64});
  Tensor x = random_tensor({2, 4, 7, 6}, -1, 1, 5);
  EXPECT_TRUE(
      all_close(conv(x), conv2d_reference(x, conv.weight, conv.bias, 2, 1, 2), 1e-10, 1e-12));
  expect_error([&] { conv(zeros({2, 3, 7, 6}, DType::Float64)); }, {"Conv2d", "(N, 4, H, W)"});
}

TEST(BatchNorm2d, TrainingNormalizesAndTracksStatistics) {
  nn::BatchNorm2d bn(3, {.dtype = DType::Float64});
  Tensor x = random_tensor({4, 3, 2, 5}, -2, 5, 6);
  Tensor y = bn(x);
  // Per channel over (N, H, W): the output has mean 0 and (biased) variance 1.
  std::vector<double> yv = y.to_vector(), xv = x.to_vector();
  for (int64_t c = 0; c < 3; ++c) {
    double sum = 0, sum_sq = 0, xs = 0, xs_sq = 0;
    const double m = 4 * 2 * 5;
    for (int64_t n = 0; n < 4; ++n)
      for (int64_t k = 0; k < 10; ++k) {
        size_t idx = size_t((n * 3 + c) * 10 + k);
        sum += yv[idx], sum_sq += yv[idx] * yv[idx];
        xs += xv[idx], xs_sq += xv[idx] * xv[idx];
      }
    EXPECT_NEAR(sum / m, 0.0, 1e-9);
    EXPECT_NEAR(sum_sq / m, 1.0, 1e-3);  // eps makes it slightly less than 1
    double mean = xs / m, unbiased = (xs_sq - m * mean * mean) / (m - 1);
    EXPECT_NEAR(bn.running_mean.to_vector()[size_t(c)], 0.1 * mean, 1e-12);
    EXPECT_NEAR(bn.running_var.to_vector()[size_t(c)], 0.9 + 0.1 * unbiased, 1e-12);
  }
  EXPECT_EQ(bn.num_batches_tracked.item(), 1.0);
}

TEST(BatchNorm2d, EvalUsesRunningStatistics) {
  nn::BatchNorm2d bn(2, {.dtype = DType::Float64});
  {
    NoGradGuard no_grad;
    bn.running_mean.copy_(from_vector(std::vector<double>{1.0, -2.0}, {2}));
    bn.running_var.copy_(from_vector(std::vector<double>{4.0, 0.25}, {2}));
    bn.weight.copy_(from_vector(std::vector<double>{2.0, 3.0}, {2}));
    bn.bias.copy_(from_vector(std::vector<double>{0.5, -0.5}, {2}));
  }
  bn.eval();
  Tensor x = random_tensor({3, 2, 2, 2}, -1, 1, 8);
  Tensor rm = from_vector(std::vector<double>{1.0, -2.0}, {1, 2, 1, 1});
  Tensor rv = from_vector(std::vector<double>{4.0, 0.25}, {1, 2, 1, 1});
  Tensor w = from_vector(std::vector<double>{2.0, 3.0}, {1, 2, 1, 1});
  Tensor b = from_vector(std::vector<double>{0.5, -0.5}, {1, 2, 1, 1});
  EXPECT_TRUE(all_close(bn(x), (x - rm) / sqrt(rv + 1e-5) * w + b, 1e-12, 1e-12));
  EXPECT_EQ(bn.num_batches_tracked.item(), 0.0);  // eval does not count batches
}

TEST(BatchNorm2d, CumulativeAverageWithoutMomentum) {
  nn::BatchNorm2d bn(1, {.momentum = std::nullopt, .dtype = DType::Float64});
  Tensor a = random_tensor({2, 1, 3, 3}, -1, 1, 9), b = random_tensor({2, 1, 3, 3}, 0, 4, 10);
  bn(a);
  bn(b);
  double mean_a = mean(a).item(), mean_b = mean(b).item();
  EXPECT_NEAR(bn.running_mean.item(), (mean_a + mean_b) / 2, 1e-12);
  EXPECT_EQ(bn.num_batches_tracked.item(), 2.0);
}

TEST(LayerNorm, ForwardMatchesReference) {
  nn::LayerNorm ln({4}, 1e-5, true, true, DType::Float64);
  {
    NoGradGuard no_grad;
    ln.weight.copy_(random_tensor({4}, -1, 1, 12));
    ln.bias.copy_(random_tensor({4}, -1, 1, 13));
  }
  Tensor x = random_tensor({3, 4}, -3, 3, 14);
  Tensor mu = mean(x, {-1}, true);
  Tensor biased_var = mean((x - mu) * (x - mu), {-1}, true);
  EXPECT_TRUE(
      all_close(ln(x), (x - mu) / sqrt(biased_var + 1e-5) * ln.weight + ln.bias, 1e-10, 1e-12));
  expect_error([&] { ln(zeros({3, 5}, DType::Float64)); }, {"LayerNorm", "(4,)"});
}

TEST(Dropout, TrainingDropsAndScalesEvalIsIdentity) {
  manual_seed(15);
  nn::Dropout drop(0.25);
  Tensor x = ones({100000});
  std::vector<double> y = drop(x).to_vector();
  int64_t zeros_seen = 0;
  for (double v : y) {
    if (v == 0)
      ++zeros_seen;
    else
      EXPECT_NEAR(v, 1.0 / 0.75, 1e-6);
  }
  EXPECT_NEAR(double(zeros_seen) / 100000.0, 0.25, 0.01);
  drop.eval();
  EXPECT_TRUE(all_close(drop(x), x, 0, 0));
}

TEST(Embedding, LooksUpRows) {
  manual_seed(16);
  nn::Embedding emb(10, 3, DType::Float64);
  Tensor idx = from_vector(std::vector<int64_t>{7, 0, 7, 9}, {2, 2});
  Tensor y = emb(idx);
  EXPECT_EQ(y.shape(), (Shape{2, 2, 3}));
  std::vector<double> w = emb.weight.to_vector(), yv = y.to_vector();
  const int64_t rows[] = {7, 0, 7, 9};
  for (int64_t k = 0; k < 4; ++k)
    for (int64_t d = 0; d < 3; ++d) EXPECT_EQ(yv[size_t(k * 3 + d)], w[size_t(rows[k] * 3 + d)]);
  expect_error([&] { emb(zeros({2})); }, {"Embedding", "int64"});
}

}  // namespace
}  // namespace smelt
