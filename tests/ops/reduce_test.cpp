// Reductions against a naive reference over every dim set, keepdim, ties; gradchecks.
#include <algorithm>
#include <cmath>

#include "ops/reference.h"

namespace smelt {
namespace {

using testing::all_close;
using testing::flat_index;
using testing::grad_of;
using testing::gradcheck;
using testing::positions;
using testing::random_leaf;

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using Fold = std::function<double(const std::vector<double>&)>;

// Groups x's elements by their position with `dims` removed, folds each group.
Tensor ref_reduce(const Tensor& x, std::vector<int64_t> dims, bool keepdim, const Fold& fold) {
  if (dims.empty()) for (int64_t d = 0; d < x.dim(); ++d) dims.push_back(d);
  for (int64_t& d : dims) d = d < 0 ? d + x.dim() : d;
  auto reduced = [&](int64_t d) { return std::find(dims.begin(), dims.end(), d) != dims.end(); };
  Shape kept, out;
  for (int64_t d = 0; d < x.dim(); ++d) {
    kept.push_back(reduced(d) ? 1 : x.size(d));
    if (!reduced(d) || keepdim) out.push_back(kept.back());
  }
  std::vector<std::vector<double>> groups(size_t(shape_numel(kept)));
  std::vector<double> xv = x.to_vector();
  for (const Shape& p : positions(x.shape())) {
    Shape q = p;
    for (int64_t d : dims) q[d] = 0;
    groups[size_t(flat_index(kept, q))].push_back(xv[size_t(flat_index(x.shape(), p))]);
  }
  std::vector<double> values;
  for (const auto& g : groups) values.push_back(fold(g));
  return from_vector(values, out, x.dtype());
}

double fold_sum(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += e;
  return s;
}
double fold_mean(const std::vector<double>& v) { return fold_sum(v) / double(v.size()); }
double fold_max(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }
double fold_min(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double fold_prod(const std::vector<double>& v) {
  double p = 1;
  for (double e : v) p *= e;
  return p;
}
Fold fold_var(int64_t correction) {
  return [correction](const std::vector<double>& v) {
    double m = fold_mean(v), ss = 0;
    for (double e : v) ss += (e - m) * (e - m);
    return ss / double(int64_t(v.size()) - correction);
  };
}

const std::vector<std::vector<int64_t>> kDimSets = {{}, {0}, {1}, {2}, {-1}, {0, 2}, {2, 0}, {0, 1, 2}};

struct ReduceCase {
  const char* name;
  std::function<Tensor(const Tensor&, const std::vector<int64_t>&, bool)> op;
  Fold fold;
};

std::vector<ReduceCase> reduce_cases() {
  return {
      {"sum", [](const Tensor& x, const std::vector<int64_t>& d, bool k) { return sum(x, d, k); }, fold_sum},
      {"mean", [](const Tensor& x, const std::vector<int64_t>& d, bool k) { return mean(x, d, k); }, fold_mean},
      {"amax", [](const Tensor& x, const std::vector<int64_t>& d, bool k) { return amax(x, d, k); }, fold_max},
      {"amin", [](const Tensor& x, const std::vector<int64_t>& d, bool k) { return amin(x, d, k); }, fold_min},
      {"prod", [](const Tensor& x, const std::vector<int64_t>& d, bool k) { return prod(x, d, k); }, fold_prod},
      {"var", [](const Tensor& x, const std::vector<int64_t>& d, bool k) { return var(x, d, 1, k); }, fold_var(1)},
      {"var0", [](const Tensor& x, const std::vector<int64_t>& d, bool k) { return var(x, d, 0, k); }, fold_var(0)},
  };
}

TEST(Reduce, EveryDimSetAndKeepdim) {
  for (const ReduceCase& c : reduce_cases()) {
    for (DType dtype : {DType::Float32, DType::Float64}) {
      Generator gen(4);
      Tensor x = randn({3, 4, 5}, dtype, &gen);
      double tol = dtype == DType::Float32 ? 1e-5 : 1e-12;
      for (const auto& dims : kDimSets) {
        for (bool keepdim : {false, true}) {
          Tensor want = ref_reduce(x, dims, keepdim, c.fold);
          EXPECT_TRUE(all_close(c.op(x, dims, keepdim), want, tol, tol))
              << c.name << " dims " << shape_str(dims) << " keepdim " << keepdim;
          Tensor xp = x.permute({1, 2, 0}).contiguous().permute({2, 0, 1});  // same values, strided
          EXPECT_TRUE(all_close(c.op(xp, dims, keepdim), want, tol, tol)) << c.name << " strided";
        }
      }
    }
  }
}

TEST(Reduce, IntegerSumAndExtremes) {
  Tensor x = arange(12).reshape({3, 4});
  EXPECT_EQ(sum(x).item(), 66);
  EXPECT_EQ(sum(x, {0}).to_vector(), (std::vector<double>{12, 15, 18, 21}));
  EXPECT_EQ(amax(x, {1}).to_vector(), (std::vector<double>{3, 7, 11}));
  EXPECT_EQ(amin(x, {1}, true).shape(), (Shape{3, 1}));
  EXPECT_EQ(sum(x).dtype(), DType::Int64);
}

TEST(Reduce, LargeRowsStayAccurate) {
  // float32 accumulation over 10^6 elements: a naive float sum drifts by ~1e-3 relative.
  Tensor x = full({1000, 1000}, 0.1, DType::Float32);
  EXPECT_NEAR(sum(x).item(), 1e6 * double(0.1f), 1e-1);
  EXPECT_TRUE(all_close(mean(x, {0}), full({1000}, 0.1)));
  Tensor y = randn({300, 200});
  EXPECT_TRUE(all_close(sum(y.t(), {1}), ref_reduce(y.t(), {1}, false, fold_sum), 1e-5, 1e-5));
}

TEST(Reduce, EmptyAndScalarInputs) {
  Tensor e = zeros({0, 3});
  EXPECT_EQ(sum(e, {0}).to_vector(), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(sum(e).item(), 0);
  Tensor s = scalar_tensor(2.5);
  EXPECT_EQ(sum(s).item(), 2.5);
  EXPECT_EQ(amax(s).item(), 2.5);
  EXPECT_EQ(sum(s, {0}).item(), 2.5);  // a 0-dim tensor accepts dim 0, as in PyTorch
  EXPECT_EQ(sum(s, {-1}, true).shape(), Shape{});
}

TEST(Reduce, NaNPropagatesThroughExtremes) {
  Tensor x = from_vector(std::vector<float>{1, NAN, 3, 4}, {2, 2});
  auto mx = amax(x, {1}).to_vector(), mn = amin(x, {1}).to_vector();
  EXPECT_TRUE(std::isnan(mx[0]));
  EXPECT_EQ(mx[1], 4);
  EXPECT_TRUE(std::isnan(mn[0]));
  EXPECT_EQ(mn[1], 3);
}

TEST(Reduce, NaNPropagatesFromAnyPositionOfALongRow) {
  // Rows of 37: the kernel's vectorized lanes cover 32 elements and a scalar tail the rest.
  for (int64_t at : {0, 5, 17, 31, 32, 36}) {
    std::vector<double> v(37);
    for (size_t i = 0; i < v.size(); ++i) v[i] = double(i) - 10;
    v[size_t(at)] = NAN;
    for (DType dtype : {DType::Float32, DType::Float64}) {
      Tensor x = from_vector(v, {1, 37}, dtype);
      EXPECT_TRUE(std::isnan(amax(x, {1}).item())) << at;
      EXPECT_TRUE(std::isnan(amin(x, {1}).item())) << at;
    }
  }
  std::vector<double> v(37);
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(i) - 10;
  EXPECT_EQ(amax(from_vector(v, {37}), {0}).item(), 26);
  EXPECT_EQ(amin(from_vector(v, {37}), {0}).item(), -10);
}

TEST(Reduce, Int64SumIsExactBeyondDoublePrecision) {
  // 2^53 + 1 has no double representation: the sum must not pass through double.
  const int64_t big = int64_t(1) << 53;
  Tensor x = from_vector(std::vector<int64_t>(20, 1), {20});
  Tensor y = cat({from_vector(std::vector<int64_t>{big}, {1}), x}, 0);
  EXPECT_EQ(sum(y).data<int64_t>()[0], big + 20);
}

TEST(Reduce, Gradcheck) {
  for (const ReduceCase& c : reduce_cases()) {
    for (const auto& dims : kDimSets) {
      for (bool keepdim : {false, true}) {
        Tensor x = random_leaf({3, 4, 2}, -1, 1, 9);  // distinct values: no ties for amax/amin
        EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) { return c.op(v[0], dims, keepdim); }, {x}))
            << c.name << " " << shape_str(dims) << " " << keepdim;
      }
    }
    Tensor y = random_leaf({4, 6}, -1, 1, 10);
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& v) { return c.op(v[0].t().slice(0, 0, 6, 2), {1}, false) * v[0].select(0, 0).slice(0, 0, 3); },
        {y}))
        << c.name << " strided + broadcast";
  }
}

TEST(Reduce, SecondOrderGradcheck) {
  Fn f = [](const std::vector<Tensor>& v) {
    return grad_of([](const Tensor& x) { return sum(var(x, {1}) * mean(x * x, {0}, true)); }, v[0]);
  };
  EXPECT_TRUE(gradcheck(f, {random_leaf({3, 3}, -1, 1, 3)}));
}

TEST(Reduce, TiedExtremesShareTheGradient) {
  Tensor x = from_vector(std::vector<double>{1, 3, 3, 2, 2, 2}, {2, 3});
  x.set_requires_grad();
  sum(amax(x, {1})).backward();
  EXPECT_TRUE(all_close(x.grad(), from_vector(std::vector<double>{0, 0.5, 0.5, 1.0 / 3, 1.0 / 3, 1.0 / 3}, {2, 3})));
  x.zero_grad();
  sum(amin(x)).backward();
  EXPECT_TRUE(all_close(x.grad(), from_vector(std::vector<double>{1, 0, 0, 0, 0, 0}, {2, 3})));
}

TEST(Argmax, DimsKeepdimTiesAndNaN) {
  Generator gen(2);
  Tensor x = randn({3, 4, 5}, DType::Float32, &gen);
  for (int64_t dim : {0, 1, 2, -1}) {
    for (bool keepdim : {false, true}) {
      Tensor want = ref_reduce(x, {dim}, keepdim, [](const std::vector<double>& v) {
        return double(std::max_element(v.begin(), v.end()) - v.begin());
      });
      Tensor got = argmax(x, dim, keepdim);
      EXPECT_EQ(got.dtype(), DType::Int64);
      EXPECT_EQ(got.shape(), want.shape());
      EXPECT_EQ(got.to_vector(), want.to_vector()) << dim;
      EXPECT_EQ(argmax(x.permute({2, 0, 1}), dim, keepdim).to_vector(),
                argmax(x.permute({2, 0, 1}).contiguous(), dim, keepdim).to_vector());
    }
  }
  Tensor ties = from_vector(std::vector<float>{1, 5, 5, 0}, {4});
  EXPECT_EQ(argmax(ties, 0).item(), 1);  // the first maximum
  Tensor nan = from_vector(std::vector<float>{1, NAN, 5, NAN}, {4});
  EXPECT_EQ(argmax(nan, 0).item(), 1);  // NaN counts as the maximum
  EXPECT_EQ(argmax(arange(5), 0).item(), 4);
  EXPECT_EQ(argmax(scalar_tensor(3), 0).item(), 0);
}

}  // namespace
}  // namespace smelt
