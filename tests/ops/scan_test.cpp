// cumsum and topk against naive references (every dim, exclusive/reverse, largest/smallest,
// strided inputs), their edges (ties, NaN, empty and size-1 dims, k = 0 and k = N, int64) and
// finite-difference gradients.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ops/reference.h"

namespace smelt {
namespace {

using testing::all_close;
using testing::flat_index;
using testing::gradcheck;
using testing::positions;
using testing::random_leaf;
using testing::tensor_from;

// Element p of the running sum: the elements of p's line at or before p (strictly, when
// exclusive; after, when reversed), summed one by one.
Tensor ref_cumsum(const Tensor& x, int64_t dim, bool exclusive, bool reverse) {
  std::vector<double> xv = x.to_vector();
  return tensor_from(x.shape(), x.dtype(), [&](const Shape& p) {
    double s = 0;
    Shape q = p;
    for (int64_t j = 0; j < x.size(dim); ++j) {
      q[dim] = j;
      const bool in = reverse ? (exclusive ? j > p[dim] : j >= p[dim])
                              : (exclusive ? j < p[dim] : j <= p[dim]);
      if (in) s += xv[size_t(flat_index(x.shape(), q))];
    }
    return s;
  });
}

TEST(Cumsum, EveryDimAndModeAgainstReference) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Generator gen(3);
    Tensor x = randn({3, 4, 5}, dtype, &gen);
    Tensor strided = x.permute({2, 0, 1}).contiguous().permute({1, 2, 0});
    const double tol = dtype == DType::Float32 ? 1e-5 : 1e-12;
    for (int64_t dim : {0, 1, 2, -1}) {
      for (bool exclusive : {false, true}) {
        for (bool reverse : {false, true}) {
          Tensor want = ref_cumsum(x, dim < 0 ? dim + 3 : dim, exclusive, reverse);
          EXPECT_TRUE(all_close(cumsum(x, dim, exclusive, reverse), want, tol, tol))
              << dim << exclusive << reverse;
          EXPECT_TRUE(all_close(cumsum(strided, dim, exclusive, reverse), want, tol, tol)) << "strided";
        }
      }
    }
  }
}

TEST(Cumsum, Gradcheck) {
  for (int64_t dim : {0, 1}) {
    for (bool exclusive : {false, true}) {
      for (bool reverse : {false, true}) {
        EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) { return cumsum(v[0].t(), dim, exclusive, reverse); },
                              {random_leaf({4, 3}, -1, 1, 7)}))
            << dim << exclusive << reverse;
      }
    }
  }
  // second order: the gradient rule is itself a cumsum
  auto f = [](const std::vector<Tensor>& v) {
    return testing::grad_of([](const Tensor& x) { return sum(cumsum(x * x, 1) * x); }, v[0]);
  };
  EXPECT_TRUE(gradcheck(f, {random_leaf({2, 4}, -1, 1, 8)}));
}

TEST(Cumsum, EdgesIntNaNEmpty) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  Tensor i = from_vector(std::vector<int64_t>{big, 1, -5}, {3});
  Tensor y = cumsum(i, 0);
  ASSERT_EQ(y.dtype(), DType::Int64);
  EXPECT_EQ(y.data<int64_t>()[0], big);
  EXPECT_EQ(y.data<int64_t>()[1], std::numeric_limits<int64_t>::min());  // wraps, as PyTorch
  EXPECT_EQ(y.data<int64_t>()[2], int64_t(uint64_t(std::numeric_limits<int64_t>::min()) - 5));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> n = cumsum(from_vector(std::vector<double>{1, nan, 2}, {3}), 0).to_vector();
  EXPECT_EQ(n[0], 1);
  EXPECT_TRUE(std::isnan(n[1]) && std::isnan(n[2]));
  n = cumsum(from_vector(std::vector<double>{1, nan, 2}, {3}), 0, false, true).to_vector();
  EXPECT_TRUE(std::isnan(n[0]) && std::isnan(n[1]));
  EXPECT_EQ(n[2], 2);
  EXPECT_EQ(cumsum(zeros({3, 0}), 1).shape(), (Shape{3, 0}));
  EXPECT_EQ(cumsum(zeros({0, 2}), 1, true).shape(), (Shape{0, 2}));
  EXPECT_EQ(cumsum(scalar_tensor(2.5), 0).item(), 2.5);
  EXPECT_EQ(cumsum(scalar_tensor(2.5), -1, true).item(), 0);
  testing::expect_error([] { cumsum(ones({2, 3}), 2); }, "cumsum");
  testing::expect_error([] { cumsum(ones({2}, DType::Bool), 0); }, "cumsum: dtype bool is not supported");
}

// The k best of each line: a stable sort of the indices by value, NaN highest.
std::pair<Tensor, Tensor> ref_topk(const Tensor& x, int64_t k, int64_t dim, bool largest) {
  std::vector<double> xv = x.to_vector();
  Shape out = x.shape();
  out[dim] = k;
  auto line = [&](const Shape& p) {
    std::vector<int64_t> idx(size_t(x.size(dim)));
    std::iota(idx.begin(), idx.end(), 0);
    auto value = [&](int64_t j) {
      Shape q = p;
      q[dim] = j;
      double v = xv[size_t(flat_index(x.shape(), q))];
      return std::isnan(v) ? std::numeric_limits<double>::infinity() * 2 : v;  // inf * 2 = inf
    };
    auto rank = [&](int64_t j) {  // NaN above +inf: a pair (is_nan, value)
      Shape q = p;
      q[dim] = j;
      double v = xv[size_t(flat_index(x.shape(), q))];
      return std::make_pair(std::isnan(v) ? 1 : 0, std::isnan(v) ? 0.0 : value(j));
    };
    std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
      return largest ? rank(a) > rank(b) : rank(a) < rank(b);
    });
    return idx;
  };
  Tensor values = tensor_from(out, x.dtype(), [&](const Shape& p) {
    Shape q = p;
    q[dim] = line(p)[size_t(p[dim])];
    return xv[size_t(flat_index(x.shape(), q))];
  });
  Tensor indices = tensor_from(out, DType::Int64, [&](const Shape& p) { return double(line(p)[size_t(p[dim])]); });
  return {values, indices};
}

bool same(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  std::vector<double> x = a.to_vector(), y = b.to_vector();
  for (size_t i = 0; i < x.size(); ++i) {
    if (!(x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i])))) return false;
  }
  return true;
}

TEST(TopK, AgainstReferenceWithTiesNaNAndEveryK) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  // small integers: many ties; NaN and ±inf sprinkled in
  Generator gen(5);
  Tensor x = cast(randint(-2, 3, {3, 4, 6}, &gen), DType::Float64);
  std::vector<double> v = x.to_vector();
  v[1] = nan, v[7] = inf, v[8] = -inf, v[30] = nan, v[31] = nan, v[50] = -0.0;
  x = from_vector(v, {3, 4, 6});
  for (int64_t dim : {0, 1, 2}) {
    for (int64_t k = 0; k <= x.size(dim); ++k) {
      for (bool largest : {true, false}) {
        auto [want_v, want_i] = ref_topk(x, k, dim, largest);
        TopKResult got = topk(x, k, dim, largest);
        EXPECT_TRUE(same(got.values, want_v)) << dim << " k " << k << " " << largest;
        EXPECT_TRUE(same(got.indices, want_i)) << dim << " k " << k << " " << largest;
        TopKResult strided = topk(x.permute({2, 1, 0}).contiguous().permute({2, 1, 0}), k, dim, largest);
        EXPECT_TRUE(same(strided.indices, want_i)) << "strided";
      }
    }
  }
  // ties: the lower index first, as ONNX TopK requires
  TopKResult t = topk(from_vector(std::vector<double>{1, 3, 3, 1, 3}, {5}), 4);
  EXPECT_EQ(t.indices.to_vector(), (std::vector<double>{1, 2, 4, 0}));
  t = topk(from_vector(std::vector<double>{1, 3, 3, 1, 3}, {5}), 2, 0, false);
  EXPECT_EQ(t.indices.to_vector(), (std::vector<double>{0, 3}));
}

TEST(TopK, Int64EmptyAndErrors) {
  Tensor i = from_vector(std::vector<int64_t>{5, std::numeric_limits<int64_t>::min(), 9,
                                              std::numeric_limits<int64_t>::max()}, {4});
  TopKResult r = topk(i, 2);
  ASSERT_EQ(r.values.dtype(), DType::Int64);
  EXPECT_EQ(r.values.data<int64_t>()[0], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(r.indices.to_vector(), (std::vector<double>{3, 2}));
  EXPECT_EQ(topk(zeros({3, 0}), 0, 1).values.shape(), (Shape{3, 0}));
  EXPECT_EQ(topk(zeros({0, 4}), 2, 1).indices.shape(), (Shape{0, 2}));
  testing::expect_error([] { topk(ones({2, 3}), 4, 1); }, "topk: k = 4 is out of range");
  testing::expect_error([] { topk(ones({2, 3}), -1, 1); }, "valid: 0 <= k <= 3");
  testing::expect_error([] { topk(scalar_tensor(1.0), 1); }, "topk: x must have at least one dim");
}

TEST(TopK, GradientScattersToThePickedElements) {
  for (bool largest : {true, false}) {
    for (int64_t k : {0, 2, 5}) {
      EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) { return topk(v[0].t(), k, 0, largest).values; },
                            {random_leaf({3, 5}, -1, 1, 11)}))
          << largest << " k " << k;
    }
  }
  auto f = [](const std::vector<Tensor>& v) {
    return testing::grad_of([](const Tensor& x) { return sum(topk(x * x, 2, 1).values * x.slice(1, 0, 2)); }, v[0]);
  };
  EXPECT_TRUE(gradcheck(f, {random_leaf({3, 4}, 0.1, 1, 12)}));
}

}  // namespace
}  // namespace smelt
