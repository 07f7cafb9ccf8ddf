// Reductions at the edges: var with N - correction <= 0, zero-element tensors and size-1 dims,
// compared with what PyTorch 1.13 gives for the same calls (noted next to each).
#include <cmath>
#include <limits>
#include <vector>

#include "support/check.h"
#include "support/errors.h"

namespace smelt {
namespace {

using testing::expect_error;

constexpr double kPosInf = std::numeric_limits<double>::infinity();

::testing::AssertionResult same_reduced_values(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "got " << got.size() << " values, want " << want.size();
  }
  for (size_t i = 0; i < got.size(); ++i) {
    bool ok = std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i];
    if (!ok) return ::testing::AssertionFailure() << "element " << i << ": got " << got[i] << ", want " << want[i];
  }
  return ::testing::AssertionSuccess();
}

Tensor arange_f64(int64_t n) { return arange(0, double(n), 1, DType::Float64); }

// ---- var

TEST(VarEdges, DividesByMaxOfZeroAndNMinusCorrection) {
  // torch.var(torch.arange(n), 0, correction=c): ss / max(0, n - c) in IEEE arithmetic
  struct Case {
    int64_t n, correction;
    double want;
  };
  for (const Case& c : std::vector<Case>{{1, 1, NAN},   // 0 / 0
                                         {1, 2, NAN},   // 0 / 0
                                         {2, 2, kPosInf},  // 0.5 / 0
                                         {3, 5, kPosInf},  // 2 / 0
                                         {0, 0, NAN},   // no values
                                         {0, 1, NAN},
                                         {3, 1, 1.0},
                                         {3, 0, 2.0 / 3.0}}) {
    for (DType dtype : {DType::Float64, DType::Float32}) {
      Tensor x = cast(arange_f64(c.n), dtype);
      const double want = dtype == DType::Float32 ? double(float(c.want)) : c.want;
      EXPECT_TRUE(same_reduced_values(var(x, {0}, c.correction).to_vector(), {want}))
          << "n " << c.n << " correction " << c.correction << " " << dtype_name(dtype);
    }
  }
  // all values equal with N - c == 0: 0 / 0 (PyTorch: nan)
  EXPECT_TRUE(same_reduced_values(var(ones({3}, DType::Float64), {0}, 3).to_vector(), {NAN}));
}

TEST(VarEdges, BackwardAgreesWithForward) {
  // n = 2, c = 2: forward ss / 0 = inf; gradient 2 (x - mean) / 0 = [-inf, inf] (PyTorch: the same)
  Tensor x = arange_f64(2);
  x.set_requires_grad();
  var(x, {0}, 2).backward();
  EXPECT_TRUE(same_reduced_values(x.grad().to_vector(), {-kPosInf, kPosInf}));
  // n - c < 0 divides by 0 too (PyTorch's backward divides by the negative n - c instead, which
  // disagrees with its own forward)
  Tensor y = arange_f64(3);
  y.set_requires_grad();
  var(y, {0}, 5).backward();
  EXPECT_TRUE(same_reduced_values(y.grad().to_vector(), {-kPosInf, NAN, kPosInf}));
  // where the forward is finite, finite differences agree, for every correction up to n - 1
  for (int64_t c = 0; c < 4; ++c) {
    Tensor leaf = testing::random_leaf({2, 4}, -1, 1, uint64_t(7 + c));
    EXPECT_TRUE(testing::gradcheck([c](const std::vector<Tensor>& v) { return var(v[0], {1}, c); }, {leaf}))
        << "correction " << c;
  }
}

// ---- zero-element tensors

TEST(EmptyReductions, ExtremesOverNonEmptyDimsAreEmpty) {
  Tensor e = zeros({0, 3});
  // the regression: this was an error; PyTorch returns an empty tensor
  for (Tensor r : {amax(e, {1}), amin(e, {1})}) {
    EXPECT_EQ(r.shape(), (Shape{0}));
  }
  EXPECT_EQ(amax(e, {1}, /*keepdim=*/true).shape(), (Shape{0, 1}));
  EXPECT_EQ(amin(zeros({2, 0, 3}), {0, 2}).shape(), (Shape{0}));
  // reducing over the empty dim has no value: an error, as PyTorch
  expect_error([&] { amax(e, {0}); }, {"amax", "dim 0", "size 0"});
  expect_error([&] { amin(e, {}); }, {"amin", "size 0"});
  expect_error([&] { argmax(e, 0); }, {"argmax", "empty"});
}

TEST(EmptyReductions, SumMeanVarArgmaxMatchPyTorch) {
  Tensor e = zeros({0, 3}, DType::Float64);
  EXPECT_TRUE(same_reduced_values(sum(e, {0}).to_vector(), {0, 0, 0}));
  EXPECT_TRUE(same_reduced_values(mean(e, {0}).to_vector(), {NAN, NAN, NAN}));
  EXPECT_TRUE(same_reduced_values(var(e, {0}, 1).to_vector(), {NAN, NAN, NAN}));
  EXPECT_EQ(sum(e, {1}).shape(), (Shape{0}));
  EXPECT_EQ(mean(e, {1}).shape(), (Shape{0}));
  EXPECT_EQ(var(e, {1}, 1).shape(), (Shape{0}));
  EXPECT_EQ(argmax(e, 1).shape(), (Shape{0}));
  EXPECT_TRUE(same_reduced_values(sum(e).to_vector(), {0}));
  EXPECT_TRUE(same_reduced_values(mean(e).to_vector(), {NAN}));
  // gradients of empty reductions are empty
  Tensor leaf = zeros({0, 3}, DType::Float64);
  leaf.set_requires_grad();
  sum(amax(leaf, {1})).backward();
  EXPECT_EQ(leaf.grad().shape(), (Shape{0, 3}));
}

TEST(EmptyReductions, SoftmaxAndLayerNormKeepEmptyShapes) {
  // PyTorch: softmax/log_softmax/layer_norm of (0, 3) and (3, 0) return the same empty shapes
  Tensor a = zeros({0, 3}), b = zeros({3, 0});
  EXPECT_EQ(softmax(a, 1).shape(), (Shape{0, 3}));
  EXPECT_EQ(softmax(a, 0).shape(), (Shape{0, 3}));
  EXPECT_EQ(log_softmax(b, 1).shape(), (Shape{3, 0}));
  EXPECT_EQ(layer_norm(a, {3}).shape(), (Shape{0, 3}));
}

TEST(SizeOneDims, ReductionsOverSizeOneDims) {
  Tensor x = from_vector(std::vector<double>{1, NAN, -kPosInf}, {3, 1}, DType::Float64);
  EXPECT_TRUE(same_reduced_values(amax(x, {1}).to_vector(), {1, NAN, -kPosInf}));
  EXPECT_TRUE(same_reduced_values(sum(x, {1}).to_vector(), {1, NAN, -kPosInf}));
  EXPECT_TRUE(same_reduced_values(var(x, {1}, 0).to_vector(), {0, NAN, NAN}));  // PyTorch: -inf - -inf = nan
  EXPECT_TRUE(same_reduced_values(var(x, {1}, 1).to_vector(), {NAN, NAN, NAN}));
  EXPECT_TRUE(same_reduced_values(argmax(x, 1).to_vector(), {0, 0, 0}));
  EXPECT_TRUE(same_reduced_values(softmax(x, 1).to_vector(), {1, NAN, NAN}));
}

}  // namespace
}  // namespace smelt
