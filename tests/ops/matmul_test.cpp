// matmul and linear: forward against a naive reference (NumPy semantics: 1-D promotion, broadcast
// batch dims), gradchecks (broadcast, non-contiguous, second order) and error messages.
#include <string>
#include <vector>

#include "smelt/compile.h"

#include "support/check.h"
#include "support/errors.h"

namespace smelt {
namespace {

using testing::all_close;
using testing::expect_error;
using testing::gradcheck;
using testing::random_leaf;

// Naive (B, M, K) x (B, K, N) on float64 row-major data after broadcasting batch dims by hand.
Tensor naive_matmul(const Tensor& a_in, const Tensor& b_in) {
  const bool a_vec = a_in.dim() == 1, b_vec = b_in.dim() == 1;
  Tensor a = a_vec ? a_in.reshape({1, a_in.size(0)}) : a_in;
  Tensor b = b_vec ? b_in.reshape({b_in.size(0), 1}) : b_in;
  Shape batch = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                                 Shape(b.shape().begin(), b.shape().end() - 2), "naive");
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  Shape ae = batch, be = batch;
  ae.insert(ae.end(), {M, K});
  be.insert(be.end(), {K, N});
  std::vector<double> av = a.expand(ae).to_vector(), bv = b.expand(be).to_vector();
  const int64_t count = shape_numel(batch);
  std::vector<double> out(size_t(count * M * N), 0.0);
  for (int64_t p = 0; p < count; ++p) {
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += av[(p * M + i) * K + k] * bv[(p * K + k) * N + j];
        out[(p * M + i) * N + j] = acc;
      }
    }
  }
  Shape shape = batch;
  if (!a_vec) shape.push_back(M);
  if (!b_vec) shape.push_back(N);
  return from_vector(out, shape, DType::Float64).to(a_in.dtype());
}

TEST(Matmul, ForwardShapesMatchNaive) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {4, 5}},       {{4}, {4, 5}},          {{3, 4}, {4}},         {{4}, {4}},
      {{2, 3, 4}, {4, 5}},    {{3, 4}, {2, 4, 5}},    {{2, 1, 3, 4}, {5, 4, 6}}, {{7}, {2, 7, 3}},
      {{2, 3, 7}, {7}},       {{1, 1}, {1, 1}},       {{0, 4}, {4, 3}},      {{3, 0}, {0, 2}}};
  for (const auto& [sa, sb] : cases) {
    for (DType dt : {DType::Float32, DType::Float64}) {
      Tensor a = randn(sa, dt), b = randn(sb, dt);
      Tensor y = matmul(a, b);
      Tensor ref = naive_matmul(a, b);
      EXPECT_EQ(y.shape(), ref.shape()) << shape_str(sa) << " @ " << shape_str(sb);
      EXPECT_TRUE(all_close(y, ref, 1e-4, 1e-5)) << shape_str(sa) << " @ " << shape_str(sb);
    }
  }
}

TEST(Matmul, LargeAndNonContiguousOperands) {
  Tensor a = randn({70, 300}), b = randn({200, 300});
  // b^T is a transposed view; a sliced with a step is neither row- nor column-major.
  EXPECT_TRUE(all_close(matmul(a, b.t()), naive_matmul(a, b.t()), 1e-4, 1e-4));
  Tensor s = randn({140, 300}).slice(0, 0, 140, 2);
  EXPECT_TRUE(all_close(matmul(s, b.t()), naive_matmul(s, b.t()), 1e-4, 1e-4));
  Tensor big_a = randn({3, 130, 150}), big_b = randn({150, 170});
  EXPECT_TRUE(all_close(matmul(big_a, big_b), naive_matmul(big_a, big_b), 1e-4, 1e-4));
}

// b shared by the whole batch and a's rows evenly spaced across it: one GEMM over count * M rows
// (a sequence-first transformer's (L, 1, K) @ (K, N)); rows that are not evenly spaced (a
// permuted batch, a broadcast one) still run per batch entry. Every case against the naive loop.
TEST(Matmul, BatchAgainstASharedMatrix) {
  struct Case {
    std::string what;
    Tensor a, b;
  };
  const std::vector<Case> cases = {
      {"(64, 1, 40) @ (40, 30)", randn({64, 1, 40}), randn({40, 30})},
      {"(2, 3, 4, 5) @ (5, 6)", randn({2, 3, 4, 5}), randn({5, 6})},
      {"(3, 4, 5) @ (1, 5, 6)", randn({3, 4, 5}), randn({1, 5, 6})},
      {"rows every other row of a (3, 8, 5)", randn({3, 8, 5}).slice(1, 0, 8, 2), randn({5, 6})},
      {"a permuted (6, 4, 5)", randn({4, 6, 5}).permute({1, 0, 2}), randn({5, 7})},
      {"a broadcast over the batch", randn({1, 4, 5}).expand({3, 4, 5}), randn({5, 6})},
      {"b transposed", randn({9, 2, 33}), randn({17, 33}).t()},
      {"(200, 1, 64) @ (64, 96): above the batch-parallel limit", randn({200, 1, 64}), randn({64, 96})},
      {"K = 0: zeros", randn({5, 1, 0}), randn({0, 3})},
      {"M = 0", randn({3, 0, 4}), randn({4, 2})},
      {"an empty batch", randn({0, 2, 4}), randn({4, 2})},
  };
  for (const Case& c : cases) {
    for (DType dt : {DType::Float32, DType::Float64}) {
      Tensor a = c.a.to(dt), b = c.b.to(dt);
      EXPECT_TRUE(all_close(matmul(a, b), naive_matmul(a, b), 1e-4, 1e-5)) << c.what;
    }
  }
}

// The same shapes compiled with a bias and ReLU applied in the GEMM's tiles: the epilogue's rows
// are those of the one (count * M, N) product, as they were of the batch's products.
TEST(Matmul, BatchAgainstASharedMatrixWithAnEpilogue) {
  Tensor x = randn({48, 1, 64}), w = randn({64, 96}), bias = randn({96});
  CompileOptions options;
  options.backend = "interpreter";
  CompiledFunction f = compile(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{relu(matmul(in[0], w) + bias)}; }, options);
  Tensor want;
  {
    NoGradGuard no_grad;
    want = relu(matmul(x, w) + bias);
  }
  EXPECT_TRUE(testing::same_bits(f({x})[0], want));
  EXPECT_TRUE(all_close(want, relu(naive_matmul(x, w) + bias), 1e-4, 1e-5));
}

TEST(Matmul, GradcheckMatrices) {
  Tensor a = random_leaf({3, 4}, -1, 1, 1), b = random_leaf({4, 5}, -1, 1, 2);
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& v) { return matmul(v[0], v[1]); }, {a, b}));
}

TEST(Matmul, GradcheckVectorPromotion) {
  Tensor v = random_leaf({4}, -1, 1, 3), m = random_leaf({2, 4, 3}, -1, 1, 4);
  Tensor w = random_leaf({3}, -1, 1, 5), u = random_leaf({4}, -1, 1, 6);
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); }, {v, m}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); }, {m, w}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); }, {v, u}));
}

TEST(Matmul, GradcheckBroadcastBatch) {
  Tensor a = random_leaf({2, 1, 3, 4}, -1, 1, 7), b = random_leaf({3, 4, 2}, -1, 1, 8);
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& v) { return matmul(v[0], v[1]); }, {a, b}));
  Tensor c = random_leaf({3, 4}, -1, 1, 9), d = random_leaf({5, 4, 2}, -1, 1, 10);
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& v) { return matmul(v[0], v[1]); }, {c, d}));
}

// A matrix shared by a batch (a Linear weight over (batch, sequence, features)): its gradient is
// one GEMM over all rows; checked against finite differences, against the per-entry products
// summed, for a strided batch operand, and for second order (create_graph through the reshape).
TEST(Matmul, GradientOfAMatrixSharedByABatch) {
  Tensor a = random_leaf({2, 3, 4, 5}, -1, 1, 21), w = random_leaf({5, 3}, -1, 1, 22);
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& v) { return matmul(v[0], v[1]); }, {a, w}));
  const Tensor g = testing::random_tensor({2, 3, 4, 3}, -1, 1, 23);
  const Tensor dw = autograd::grad({matmul(a, w)}, {w}, {g})[0];
  Tensor want = zeros({5, 3}, DType::Float64);
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 3; ++j) want = want + matmul(a.detach().select(0, i).select(0, j).t(), g.select(0, i).select(0, j));
  }
  EXPECT_TRUE(testing::all_close(dw, want, 1e-12, 1e-12));
  Tensor wide = random_leaf({2, 5, 4}, -1, 1, 24);
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& v) { return matmul(v[0].transpose(1, 2), v[1]); }, {wide, w}));
  EXPECT_TRUE(gradcheck(  // second order: d/da of the weight's gradient
      [](const std::vector<Tensor>& v) {
        autograd::EnableGradGuard enable;
        Tensor shared = v[1];
        if (!shared.requires_grad()) shared = shared.detach().set_requires_grad();
        Tensor y = sum(tanh(matmul(v[0], shared)));
        return autograd::grad({y}, {shared}, {}, false, /*create_graph=*/true)[0];
      },
      {a, w}));
}

TEST(Matmul, GradcheckNonContiguous) {
  Tensor a = random_leaf({4, 3}, -1, 1, 11), b = random_leaf({5, 8}, -1, 1, 12);
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& v) {
        return matmul(v[0].t(), v[1].slice(1, 0, 8, 2).permute({1, 0}).slice(0, 0, 4));
      },
      {a, b}));
}

TEST(Matmul, SecondOrder) {
  Tensor a = random_leaf({3, 4}, -1, 1, 13), b = random_leaf({4, 2}, -1, 1, 14);
  // d/da of sum(tanh(a @ b)) differentiated again.
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& v) {
        // gradcheck's finite differences run without grad: differentiate a fresh leaf there.
        autograd::EnableGradGuard enable;
        Tensor a = v[0];
        if (!a.requires_grad()) a = a.detach().set_requires_grad();
        Tensor y = sum(tanh(matmul(a, v[1])));
        return autograd::grad({y}, {a}, {}, false, /*create_graph=*/true)[0];
      },
      {a, b}));
}

TEST(Linear, MatchesMatmulPlusBiasAndGradchecks) {
  Tensor x = random_leaf({2, 3, 4}, -1, 1, 15), w = random_leaf({5, 4}, -1, 1, 16);
  Tensor bias = random_leaf({5}, -1, 1, 17);
  Tensor y = linear(x, w, bias);
  EXPECT_TRUE(all_close(y, naive_matmul(x, w.t()) + bias));
  EXPECT_TRUE(all_close(linear(x, w), naive_matmul(x, w.t())));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& v) { return linear(v[0], v[1], v[2]); },
                        {x, w, bias}));
}

TEST(Matmul, Errors) {
  expect_error([] { matmul(randn({3, 4}), randn({5, 6})); }, "matmul: inner dims differ");
  expect_error([] { matmul(randn({2, 3, 4}), randn({3, 4, 5})); }, "matmul");
  expect_error([] { matmul(scalar_tensor(1.0), randn({3})); }, "matmul: operands must have at least 1 dim");
  expect_error([] { matmul(randn({3, 4}), randn({4, 2}, DType::Float64)); }, "matmul: operands have different dtypes");
  expect_error([] { matmul(arange(4).reshape({2, 2}), arange(4).reshape({2, 2})); }, "matmul");
  expect_error([] { linear(randn({2, 3}), randn({4, 5})); }, "linear: input");
  expect_error([] { linear(randn({2, 3}), randn({3})); }, "linear: weight must be 2-D");
  expect_error([] { linear(randn({2, 3}), randn({4, 3}), randn({3})); }, "linear: bias");
}

}  // namespace
}  // namespace smelt
