// The strided reductions (kernels/reduce_core.h, read in place without a permuted copy) against
// naive references: random shapes (empty and size-1 dims included), random sets of reduced dims,
// permuted, sliced and broadcast (stride-0) inputs, NaN and ±inf.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/reduce_core.h"
#include "ops/reference.h"

namespace smelt {
namespace {

using testing::positions;

struct Layout {
  Tensor x;  // the view the reductions read
  const char* how;
};

// A random float64 tensor of `shape` seen through a random layout: contiguous, permuted
// (transposed storage), sliced with a step, or broadcast along one dim.
Layout random_layout(const Shape& shape, std::mt19937_64& rng, bool with_specials) {
  std::uniform_real_distribution<double> value(-2, 2);
  auto fill = [&](const Shape& s) {
    std::vector<double> v(size_t(shape_numel(s)));
    for (double& e : v) {
      e = std::round(value(rng) * 8) / 8;  // ties are common, so are NaN and inf when asked
      uint64_t r = rng() % 40;
      if (with_specials && r == 0) e = NAN;
      if (with_specials && r == 1) e = std::numeric_limits<double>::infinity();
      if (with_specials && r == 2) e = -std::numeric_limits<double>::infinity();
    }
    return from_vector(v, s, DType::Float64);
  };
  const int64_t rank = int64_t(shape.size());
  switch (rng() % 4) {
    case 0: return {fill(shape), "contiguous"};
    case 1: {  // stored reversed, viewed back: every stride is "wrong"
      Shape reversed(shape.rbegin(), shape.rend()), order(static_cast<size_t>(rank));
      for (int64_t d = 0; d < rank; ++d) order[size_t(d)] = rank - 1 - d;
      return {fill(reversed).permute(order), "permuted"};
    }
    case 2: {  // every other element of a longer dim
      if (rank == 0) return {fill(shape), "contiguous"};
      int64_t d = int64_t(rng() % uint64_t(rank));
      Shape longer = shape;
      longer[size_t(d)] = shape[size_t(d)] * 2;
      return {fill(longer).slice(d, 0, longer[size_t(d)], 2), "sliced"};
    }
    default: {  // one dim broadcast (stride 0)
      if (rank == 0) return {fill(shape), "contiguous"};
      int64_t d = int64_t(rng() % uint64_t(rank));
      Shape one = shape;
      one[size_t(d)] = 1;
      return {fill(one).expand(shape), "broadcast"};
    }
  }
}

// Naive reductions: gather the reduced elements of every output position, in row-major order.
std::vector<std::vector<double>> groups(const Tensor& x, const std::vector<int64_t>& dims) {
  const Shape& s = x.shape();
  std::vector<bool> reduced(s.size(), false);
  for (int64_t d : dims) reduced[size_t(d)] = true;
  Shape kept_shape;
  for (size_t d = 0; d < s.size(); ++d) if (!reduced[d]) kept_shape.push_back(s[d]);
  std::vector<std::vector<double>> out(size_t(shape_numel(kept_shape)));
  std::vector<double> values = x.to_vector();
  std::vector<Shape> pos = positions(s);
  for (size_t i = 0; i < pos.size(); ++i) {
    int64_t o = 0;
    for (size_t d = 0; d < s.size(); ++d) if (!reduced[d]) o = o * s[d] + pos[i][d];
    out[size_t(o)].push_back(values[i]);
  }
  return out;
}

double ref_sum(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += e;
  return s;
}
double ref_extreme(const std::vector<double>& v, bool is_max) {
  double best = is_max ? -INFINITY : INFINITY;
  for (double e : v) {
    if (std::isnan(e)) return e;
    best = is_max ? std::max(best, e) : std::min(best, e);
  }
  return best;
}
double ref_var(const std::vector<double>& v, int64_t correction) {
  double mean = ref_sum(v) / double(v.size()), ss = 0;
  for (double e : v) ss += (e - mean) * (e - mean);
  return ss / double(std::max<int64_t>(int64_t(v.size()) - correction, 0));
}

::testing::AssertionResult near_all(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]) || std::isinf(want[i])) {
      bool same = std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i];
      if (!same) return ::testing::AssertionFailure() << i << ": got " << got[i] << ", want " << want[i];
    } else if (std::abs(got[i] - want[i]) > 1e-12 * (1 + std::abs(want[i]))) {
      return ::testing::AssertionFailure() << i << ": got " << got[i] << ", want " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(ReduceCore, RandomShapesLayoutsAndDimsAgainstNaiveReferences) {
  std::mt19937_64 rng(20261122);
  int cases = 0;
  for (int iter = 0; iter < 400; ++iter) {
    const int64_t rank = int64_t(rng() % 5);
    Shape shape(static_cast<size_t>(rank));
    for (int64_t& s : shape) s = int64_t(rng() % 5) + (rng() % 8 == 0 ? 0 : 1);  // some 0s and 1s
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < rank; ++d) if (rng() % 2) dims.push_back(d);
    Layout l = random_layout(shape, rng, /*with_specials=*/iter % 2 == 1);
    const Tensor& x = l.x;
    auto g = groups(x, dims.empty() ? [&] {
      std::vector<int64_t> all(static_cast<size_t>(rank));
      for (int64_t d = 0; d < rank; ++d) all[size_t(d)] = d;
      return all;
    }() : dims);
    bool any_empty_group = shape_numel(shape) == 0 || g.empty() || g[0].empty();
    std::vector<double> want_sum, want_mean, want_max, want_min, want_var;
    for (const auto& v : g) {
      want_sum.push_back(ref_sum(v));
      want_mean.push_back(ref_sum(v) / double(v.size()));
      want_max.push_back(ref_extreme(v, true));
      want_min.push_back(ref_extreme(v, false));
      want_var.push_back(ref_var(v, 1));
    }
    SCOPED_TRACE(::testing::Message() << "shape " << shape_str(shape) << " " << l.how << " dims "
                                      << ::testing::PrintToString(dims));
    EXPECT_TRUE(near_all(sum(x, dims).to_vector(), want_sum));
    EXPECT_TRUE(near_all(mean(x, dims).to_vector(), want_mean));
    EXPECT_TRUE(near_all(var(x, dims, 1).to_vector(), want_var));
    if (!any_empty_group) {
      EXPECT_TRUE(near_all(amax(x, dims).to_vector(), want_max));
      EXPECT_TRUE(near_all(amin(x, dims).to_vector(), want_min));
    }
    ++cases;
  }
  EXPECT_EQ(cases, 400);
}

// Pooling a blocked activation (N, C/16, H, W, 16) over (H, W): neighbouring outputs are the 16
// lanes, which take a loop of known trip count. float32 sums accumulate in double, element by
// element in row-major order: the results must be those bits exactly, specials included.
TEST(ReduceCore, BlockedPoolingSumsInOrderBitForBit) {
  std::mt19937_64 rng(20261126);
  std::uniform_real_distribution<float> value(-3, 3);
  for (const Shape& shape : {Shape{1, 5, 7, 7, 16}, Shape{2, 3, 4, 5, 16}, Shape{1, 2, 1, 3, 16}}) {
    std::vector<float> v(size_t(shape_numel(shape)));
    for (float& e : v) {
      e = value(rng);
      const uint64_t r = rng() % 50;
      if (r == 0) e = NAN;
      if (r == 1) e = std::numeric_limits<float>::infinity();
      if (r == 2) e = -std::numeric_limits<float>::infinity();
      if (r == 3) e = -0.0f;
      if (r == 4) e = 3e38f;  // sums past float's range are fine in double
    }
    const Tensor x = from_vector(std::vector<double>(v.begin(), v.end()), shape, DType::Float32);
    const int64_t N = shape[0], Cb = shape[1], HW = shape[2] * shape[3], B = shape[4];
    std::vector<float> want_sum, want_mean;
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t c = 0; c < Cb; ++c) {
        for (int64_t l = 0; l < B; ++l) {
          double acc = 0;
          for (int64_t p = 0; p < HW; ++p) acc += double(v[size_t(((n * Cb + c) * HW + p) * B + l)]);
          want_sum.push_back(float(acc));
          want_mean.push_back(float(acc / double(HW)));
        }
      }
    }
    for (bool is_mean : {false, true}) {
      const Tensor got = is_mean ? mean(x, {2, 3}) : sum(x, {2, 3});
      const std::vector<float>& want = is_mean ? want_mean : want_sum;
      ASSERT_EQ(got.numel(), int64_t(want.size()));
      const float* g = got.contiguous().data<float>();
      int64_t same = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        same += (std::isnan(want[i]) && std::isnan(g[i])) || std::memcmp(&want[i], &g[i], sizeof(float)) == 0;
      }
      EXPECT_EQ(same, int64_t(want.size())) << shape_str(shape) << (is_mean ? " mean" : " sum");
    }
  }
}

TEST(ReduceCore, ArgmaxAlongAnyDimOfAnyLayout) {
  std::mt19937_64 rng(7);
  for (int iter = 0; iter < 200; ++iter) {
    const int64_t rank = 1 + int64_t(rng() % 4);
    Shape shape(static_cast<size_t>(rank));
    for (int64_t& s : shape) s = 1 + int64_t(rng() % 4);
    const int64_t dim = int64_t(rng() % uint64_t(rank));
    Layout l = random_layout(shape, rng, iter % 2 == 1);
    // reference: first index of the maximum, NaN counting as the maximum
    std::vector<int64_t> others;
    for (int64_t d = 0; d < rank; ++d) if (d != dim) others.push_back(d);
    Tensor moved = l.x.permute([&] {
      Shape order(others.begin(), others.end());
      order.push_back(dim);
      return order;
    }()).contiguous();
    std::vector<double> v = moved.to_vector();
    const int64_t n = shape[size_t(dim)];
    std::vector<double> want;
    for (size_t o = 0; o * size_t(n) < v.size(); ++o) {
      int64_t best = 0;
      for (int64_t i = 0; i < n; ++i) {
        double b = v[o * size_t(n) + size_t(best)], e = v[o * size_t(n) + size_t(i)];
        if (std::isnan(b)) break;
        if (std::isnan(e) || e > b) best = i;
      }
      want.push_back(double(best));
    }
    EXPECT_EQ(argmax(l.x, dim).to_vector(), want) << shape_str(shape) << " " << l.how << " dim " << dim;
  }
}

TEST(ReduceCore, RawPointerCoreWithoutTensors) {
  // a (3, 4) array stored column-major, reduced over dim 0 and over dim 1, through the raw core
  double storage[12];
  for (int i = 0; i < 12; ++i) storage[i] = double(i * i % 7);
  const int64_t shape[2] = {3, 4}, strides[2] = {1, 3};  // x[r][c] = storage[r + 3c]
  for (int reduced_dim = 0; reduced_dim < 2; ++reduced_dim) {
    bool is_reduced[2] = {reduced_dim == 0, reduced_dim == 1};
    kernels::ReduceGeometry g = kernels::reduce_geometry(2, shape, strides, is_reduced);
    std::vector<double> out(size_t(g.outer()));
    kernels::reduce_range(storage, g, out.data(), kernels::SumOp<double>{}, 0, g.outer());
    for (int64_t o = 0; o < g.outer(); ++o) {
      double want = 0;
      for (int64_t i = 0; i < shape[reduced_dim]; ++i) {
        int64_t r = reduced_dim == 0 ? i : o, c = reduced_dim == 0 ? o : i;
        want += storage[r + 3 * c];
      }
      EXPECT_EQ(out[size_t(o)], want) << "dim " << reduced_dim << " output " << o;
    }
  }
}

TEST(ReduceCore, Int64SumsAreExactInAnyLayout) {
  const int64_t big = int64_t(1) << 60;
  Tensor x = from_vector(std::vector<int64_t>{big, 1, big, 2, big, 3, big, 4}, {4, 2});
  Tensor t = x.t();  // (2, 4), strided
  EXPECT_EQ(sum(t, {1}).data<int64_t>()[0], 4 * big);
  EXPECT_EQ(sum(t, {1}).data<int64_t>()[1], 10);
  EXPECT_EQ(sum(x, {0}).data<int64_t>()[0], 4 * big);
}

}  // namespace
}  // namespace smelt
