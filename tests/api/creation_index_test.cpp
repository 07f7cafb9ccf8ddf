// Creation (nested lists, options, from_vector without ambiguity), Python-style indexing, 2-D
// sizes as one number, retain_grad, and data<T>() on views.
#include <cstdint>
#include <limits>
#include <type_traits>

#include "support/check.h"
#include "support/errors.h"
#include "support/helpers.h"

namespace smelt {
namespace {

using testing::values;

using testing::expect_error;

// These calls were ambiguous or did not compile before; they must stay unambiguous.
static_assert(requires { from_vector({1.0, 2.0}, {2}); });
static_assert(requires { from_vector({1, 2}, {2}); });
static_assert(requires { from_vector({1.f, 2.f}, {2}, Float64); });
static_assert(requires { tensor({{1, 2}, {3, 4}}, Float64); });
static_assert(requires(const Tensor& x, const Tensor& w) {
  conv2d(x, w, Tensor(), 2, 1);
  conv2d(x, w, Tensor(), {2, 1}, {1, 0}, 1, 1);
  max_pool2d(x, 2);
  avg_pool2d(x, {3, 2}, 1, 0);
  adaptive_avg_pool2d(x, 1);
});
static_assert(std::is_convertible_v<DType, TensorOptions>);

TEST(Creation, NestedListsInferDTypeAsPyTorch) {
  // torch.tensor([[1, 2], [3, 4]]).dtype == int64, [1, 2.5] float32, [True, False] bool,
  // [] float32 (shape (0,)), [True, 2] int64 (PyTorch 1.13)
  Tensor i = tensor({{1, 2}, {3, 4}});
  EXPECT_EQ(i.dtype(), DType::Int64);
  EXPECT_EQ(i.shape(), (Shape{2, 2}));
  EXPECT_EQ(values(i), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(tensor({1, 2.5}).dtype(), DType::Float32);
  EXPECT_EQ(tensor({true, false}).dtype(), DType::Bool);
  EXPECT_EQ(tensor({true, 2}).dtype(), DType::Int64);
  Tensor e = tensor({});
  EXPECT_EQ(e.shape(), (Shape{0}));
  EXPECT_EQ(e.dtype(), DType::Float32);
  EXPECT_EQ(tensor({{}, {}}).shape(), (Shape{2, 0}));
  Tensor s = tensor(2.5);
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.item(), 2.5);
  Tensor d = tensor({{1, 2}, {3, 4}}, Float64);
  EXPECT_EQ(d.dtype(), DType::Float64);
  EXPECT_EQ(tensor({{{1}, {2}}, {{3}, {4}}}).shape(), (Shape{2, 2, 1}));
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(tensor({kMax}).data<int64_t>()[0], kMax);  // exact, not through double
}

TEST(Creation, RaggedAndUnstorableListsAreErrors) {
  expect_error([] { tensor({{1, 2}, {3}}); }, {"tensor", "ragged", "[1]", "1 items", "2"});
  expect_error([] { tensor({{1, 2}, 3}); }, {"tensor", "ragged", "[1]"});
  expect_error([] { tensor({1, {2}}); }, {"tensor", "ragged"});
  expect_error([] { tensor({300}, UInt8); }, {"uint8", "300"});
  expect_error([] { tensor({1, 2}, TensorOptions().requires_grad(true)); },
               {"requires_grad", "int64"});
}

TEST(Creation, OptionsSetDTypeAndRequiresGrad) {
  Tensor z = zeros({2, 3}, TensorOptions().dtype(Float64).requires_grad(true));
  EXPECT_EQ(z.dtype(), DType::Float64);
  EXPECT_TRUE(z.requires_grad());
  EXPECT_TRUE(z.is_leaf());
  EXPECT_TRUE(ones({2}, TensorOptions().requires_grad(true)).requires_grad());
  EXPECT_EQ(ones({2}, Int64).dtype(), DType::Int64);
  EXPECT_EQ(full({2}, 7, Int64).data<int64_t>()[1], 7);
  EXPECT_TRUE(randn({3}, TensorOptions().requires_grad(true)).requires_grad());
  EXPECT_EQ(rand({3}, Float64).dtype(), DType::Float64);
  Tensor t = tensor({1.0, 2.0}, TensorOptions().requires_grad(true));
  (t * t).sum().backward();
  EXPECT_EQ(values(t.grad()), (std::vector<double>{2, 4}));
  EXPECT_EQ(full_like(t, 3).dtype(), DType::Float32);
  EXPECT_EQ(scalar_like(tensor({1, 2}), 5).dtype(), DType::Int64);
}

TEST(Creation, FromVectorTakesBracedListsAndVectors) {
  Tensor a = from_vector({1.0, 2.0}, {2});
  EXPECT_EQ(a.dtype(), DType::Float64);
  EXPECT_EQ(from_vector({1.f, 2.f}, {2}).dtype(), DType::Float32);
  EXPECT_EQ(from_vector({1, 2, 3}, {3}).dtype(), DType::Int64);
  EXPECT_EQ(from_vector(std::vector<float>{1, 2}, {2}).dtype(), DType::Float32);
  EXPECT_EQ(from_vector(std::vector<int>{-1, 2}, {2, 1}).dtype(), DType::Int64);
  EXPECT_EQ(from_vector({1.5, 2.5}, {2}, Float32).dtype(), DType::Float32);
  EXPECT_EQ(values(from_vector({1, 2}, {2}, Float64)), (std::vector<double>{1, 2}));
  EXPECT_EQ(from_vector(std::vector<double>{}, {0, 3}).shape(), (Shape{0, 3}));
  expect_error([] { from_vector({1.0, 2.0}, {3}); }, {"from_vector", "2 values", "(3,)"});
  expect_error([] { from_vector({1e30}, {1}, Int64); }, {"from_vector", "int64"});
}

TEST(Indexing, SlicesWithNoneAndStepsAsPython) {
  // Python: a = list(range(10)); a[1::2], a[-3:], a[:-1], a[8:100], a[5:2], a[-100:2]
  Tensor a = arange(10);
  EXPECT_EQ(values(a.index({Slice(1, None, 2)})), (std::vector<double>{1, 3, 5, 7, 9}));
  EXPECT_EQ(values(a.index({Slice(-3, None)})), (std::vector<double>{7, 8, 9}));
  EXPECT_EQ(values(a.index({Slice(None, -1)})), (std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(values(a.index({Slice(8, 100)})), (std::vector<double>{8, 9}));
  EXPECT_EQ(values(a.index({Slice(5, 2)})), std::vector<double>{});
  EXPECT_EQ(values(a.index({Slice(-100, 2)})), (std::vector<double>{0, 1}));
  EXPECT_EQ(values(a.index({Slice()})), values(a));
}

TEST(Indexing, IntegersDropDimsNoneAddsOneEllipsisFills) {
  Tensor m = arange(24).reshape({2, 3, 4});
  Tensor r = m.index({Slice(1, None, 2), 0});  // m[1::2, 0]
  EXPECT_EQ(r.shape(), (Shape{1, 4}));
  EXPECT_EQ(values(r), (std::vector<double>{12, 13, 14, 15}));
  EXPECT_EQ(m.index({-1, -1, -1}).item(), 23);
  EXPECT_EQ(m.index({-1, -1, -1}).shape(), Shape{});
  EXPECT_EQ(m.index({Ellipsis, 1}).shape(), (Shape{2, 3}));
  EXPECT_EQ(values(m.index({Ellipsis, 1}).index({1})), (std::vector<double>{13, 17, 21}));
  EXPECT_EQ(m.index({None, 0, Slice(), None}).shape(), (Shape{1, 3, 1, 4}));
  EXPECT_EQ(m.index({}).shape(), m.shape());
  // a view: writes show through
  Tensor f = zeros({3, 4});
  f.index({Slice(), Slice(1, None, 2)}).fill_(1);
  EXPECT_EQ(values(f.sum({0})), (std::vector<double>{0, 3, 0, 3}));
  EXPECT_EQ(f.index({Slice(), Slice(1, None, 2)}).storage(), f.storage());
  // empty dims and size-1 dims
  Tensor e = zeros({0, 3});
  EXPECT_EQ(e.index({Slice(), 1}).shape(), (Shape{0}));
  EXPECT_EQ(zeros({1, 3}).index({0}).shape(), (Shape{3}));
}

TEST(Indexing, GradientFlowsThroughIndexing) {
  Tensor x = testing::random_leaf({3, 4});
  x.index({Slice(1, None), -1}).sum().backward();
  std::vector<double> g = values(x.grad());
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(g[size_t(i)], (i / 4 >= 1 && i % 4 == 3) ? 1.0 : 0.0) << i;
}

TEST(Indexing, Errors) {
  Tensor m = zeros({2, 3});
  expect_error([&] { m.index({2}); }, {"index", "index 2", "dim 0", "size 2", "[-2, 1]"});
  expect_error([&] { m.index({0, -4}); }, {"index", "index -4", "dim 0", "size 3"});
  expect_error([&] { m.index({0, 0, 0}); }, {"index", "too many indices", "(2, 3)"});
  expect_error([&] { m.index({Slice(None, None, 0)}); }, {"index", "step", "positive"});
  expect_error([&] { m.index({Slice(None, None, -1)}); }, {"index", "step", "-1"});
  expect_error([&] { m.index({Ellipsis, Ellipsis}); }, {"index", "Ellipsis"});
  expect_error([&] { scalar_tensor(1.0).index({0}); }, {"index", "too many"});
}

TEST(Sizes, OneNumberMeansBothDims) {
  Tensor x = testing::random_tensor({1, 2, 7, 7}, -1, 1, 3), w = testing::random_tensor({3, 2, 3, 3}, -1, 1, 4);
  EXPECT_TRUE(testing::all_close(conv2d(x, w, Tensor(), 2, 1, 1), conv2d(x, w, Tensor(), {2, 2}, {1, 1}, {1, 1})));
  EXPECT_TRUE(testing::all_close(max_pool2d(x, 2), max_pool2d(x, {2, 2}, {2, 2})));
  EXPECT_TRUE(testing::all_close(avg_pool2d(x, 3, 2, 1), avg_pool2d(x, {3, 3}, {2, 2}, {1, 1})));
  EXPECT_EQ(adaptive_avg_pool2d(x, 1).shape(), (Shape{1, 2, 1, 1}));
  // a wrong length still reaches the op's own check, with the argument's name
  expect_error([&] { conv2d(x, w, Tensor(), {1, 1, 1}); }, {"conv2d", "stride"});
  expect_error([&] { max_pool2d(x, {2, 2, 2}); }, {"max_pool2d", "kernel"});
  // the modules take them too, as nn.Conv2d(2, 3, 3) and nn.MaxPool2d(2)
  nn::Conv2d conv(2, 3, 3);
  EXPECT_EQ(conv.weight.shape(), (Shape{3, 2, 3, 3}));
  EXPECT_EQ(nn::MaxPool2d(2).forward(x).shape(), (Shape{1, 2, 3, 3}));
  EXPECT_EQ(nn::AdaptiveAvgPool2d(1).forward(x).shape(), (Shape{1, 2, 1, 1}));
}

TEST(RetainGrad, NonLeafKeepsItsGradientWhenAsked) {
  Tensor x = tensor({1.0, 2.0, 3.0}, TensorOptions().requires_grad(true));
  Tensor y = x * 2;
  Tensor z = y * y;
  y.retain_grad();
  EXPECT_TRUE(y.retains_grad());
  EXPECT_FALSE(z.retains_grad());
  z.sum().backward(Tensor(), /*retain_graph=*/true);
  EXPECT_EQ(values(y.grad()), (std::vector<double>{4, 8, 12}));  // dz/dy = 2y
  EXPECT_EQ(values(x.grad()), (std::vector<double>{8, 16, 24}));
  // accumulates across backward calls, as a leaf's grad
  (y * 3).sum().backward();
  EXPECT_EQ(values(y.grad()), (std::vector<double>{7, 11, 15}));
  y.zero_grad();
  EXPECT_FALSE(y.grad().defined());
  // a leaf: a no-op; a tensor that requires no grad: an error
  x.retain_grad();
  expect_error([] { zeros({2}).retain_grad(); }, {"retain_grad", "does not require grad"});
}

TEST(RetainGrad, ReadingANonLeafGradWarnsOnceAndIsUndefined) {
  Tensor x = tensor({1.0}, TensorOptions().requires_grad(true));
  Tensor y = x * 2;
  y.sum().backward();
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(y.grad().defined());
  EXPECT_FALSE(y.grad().defined());
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("non-leaf"), std::string::npos) << err;
  EXPECT_NE(err.find("retain_grad()"), std::string::npos) << err;
  EXPECT_EQ(err.find("non-leaf"), err.rfind("non-leaf")) << "warned twice: " << err;
}

TEST(Data, NonContiguousViewsAreAnErrorThatNamesTheFix) {
  Tensor m = arange(0, 6, 1, Float32).reshape({2, 3});
  EXPECT_EQ(m.data<float>()[4], 4.0f);
  Tensor t = m.t();
  expect_error([&] { t.data<float>(); }, {"data<T>()", "non-contiguous", "(3, 2)", ".contiguous()"});
  EXPECT_EQ(t.contiguous().data<float>()[1], 3.0f);  // row-major (3, 2): [0, 3, 1, 4, 2, 5]
  EXPECT_EQ(t.strided_data<float>()[t.stride(0) * 1], 1.0f);  // element (1, 0) by strides
  expect_error([&] { m.index({Slice(), Slice(None, None, 2)}).data<float>(); }, "non-contiguous");
  expect_error([&] { m.index({Slice(0, 1)}).expand({4, 3}).data<float>(); }, "non-contiguous");
  // views that are contiguous are fine: a row, a size-1 dim with any stride, an empty tensor
  EXPECT_EQ(m.index({1}).data<float>()[0], 3.0f);
  EXPECT_EQ(m.index({Slice(), Slice(1, 2)}).t().index({0}).dim(), 1);
  EXPECT_NO_THROW(zeros({0, 3}).t().data<float>());
  expect_error([&] { m.strided_data<double>(); }, {"strided_data", "float64", "float32"});
}

}  // namespace
}  // namespace smelt
