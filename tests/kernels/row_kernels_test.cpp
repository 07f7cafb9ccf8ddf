// The row kernels (kernels/row_kernels.h) against their naive float64 references: random rows of
// many lengths (block and chunk boundaries, rows long enough for longer blocks), rows whose maximum
// grows block after block (the online rescaling), special values, row strides and in-place calls,
// empty rows; and bitwise determinism over row splits and thread counts.
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/row_kernels.h"
#include "support/row_kernels_reference.h"

namespace smelt::kernels {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Lengths around the kernels' lane (16, 64), chunk (256) and block (1024) sizes, and one row past
// 256 blocks of 1024, where blocks get longer.
const std::vector<int64_t> kLengths = {1, 2, 15, 16, 17, 63, 64, 65, 255, 256, 257, 1000,
                                       1023, 1024, 1025, 2048, 3000, 5000, 300001};

template <class T>
std::vector<T> random_values(int64_t n, double mean, double spread, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(mean, spread);
  std::vector<T> v(static_cast<size_t>(n));
  for (T& e : v) e = T(d(rng));
  return v;
}

// |got - want| <= rel * scale + abs per element, NaN exactly where the reference has NaN, and
// infinities equal. Returns a description of the first mismatch, or "".
template <class T>
std::string compare(const std::vector<T>& got, const std::vector<T>& want,
                    const std::vector<double>& scale, double rel, double abs) {
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = double(got[i]), w = double(want[i]);
    bool ok;
    if (std::isnan(w) || std::isnan(g)) {
      ok = std::isnan(w) && std::isnan(g);
    } else if (std::isinf(w) || std::isinf(g)) {
      ok = g == w;
    } else {
      ok = std::fabs(g - w) <= rel * scale[i] + abs;
    }
    if (!ok) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "element %zu: got %.9g, want %.9g (error %.3g x the bound)", i,
                    g, w, std::fabs(g - w) / (rel * scale[i] + abs));
      return buf;
    }
  }
  return "";
}

// The unit roundoff of T.
template <class T>
constexpr double kEps = std::numeric_limits<T>::epsilon() / 2;

// Rounding bounds, from the kernels' error analysis. Softmax: exp's 1 ulp, the chunk sums' 15
// roundings on non-negative terms, two roundings of the scale; and x - max rounded in T, which
// exp turns into a relative error of |x - max| * eps (the float64 reference subtracts exactly).
template <class T>
constexpr double kSoftmaxRel = std::is_same_v<T, float> ? 24 * kEps<float> : 64 * kEps<double>;

template <class T>
void check_softmax(const std::vector<T>& x, int64_t rows, int64_t cols, const std::string& what) {
  for (bool log : {false, true}) {
    std::vector<T> got(x.size()), want(x.size());
    softmax_rows(x.data(), got.data(), rows, cols, cols, cols, log);
    softmax_rows_reference(x.data(), want.data(), rows, cols, cols, cols, log);
    // softmax: relative to the value. log_softmax = (x - max) - log(sum): relative to |x - max|
    // and |log(sum)| (x - max is exact in the kernel; log(sum) carries the sum's error).
    // Both sum in double in different orders: up to (cols + 64) double roundoffs apart.
    const double rel = kSoftmaxRel<T> + double(cols + 64) * kEps<double>;
    std::vector<double> scale(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      double m = -kInf, s = 0;
      for (int64_t i = 0; i < cols; ++i) m = std::max(m, double(x[size_t(r * cols + i)]));
      for (int64_t i = 0; i < cols; ++i) s += std::exp(double(x[size_t(r * cols + i)]) - m);
      for (int64_t i = 0; i < cols; ++i) {
        const size_t at = size_t(r * cols + i);
        const double d = std::fabs(double(x[at]) - m);
        if (log) {
          scale[at] = d + std::fabs(std::log(s)) + 1.0;
        } else {
          scale[at] = want[at] == 0 ? 0.0 : std::fabs(double(want[at])) * (1 + d * kEps<T> / rel);
        }
      }
    }
    // Below the smallest normal, absolute: a float result there has no relative precision.
    const double abs = double(std::numeric_limits<T>::min());
    EXPECT_EQ(compare(got, want, scale, rel, abs), "")
        << (log ? "log_softmax " : "softmax ") << what << " rows " << rows << " cols " << cols;
  }
}

template <class T>
void check_layer_norm(const std::vector<T>& x, int64_t rows, int64_t cols, bool affine,
                      const std::string& what) {
  std::vector<T> w = random_values<T>(cols, 1.0, 0.5, 7), b = random_values<T>(cols, 0.0, 0.5, 8);
  const T* pw = affine ? w.data() : nullptr;
  const T* pb = affine ? b.data() : nullptr;
  std::vector<T> got(x.size()), want(x.size()), mean(static_cast<size_t>(rows)), rstd(static_cast<size_t>(rows));
  std::vector<T> want_mean(static_cast<size_t>(rows)), want_rstd(static_cast<size_t>(rows));
  layer_norm_rows(x.data(), pw, pb, got.data(), mean.data(), rstd.data(), rows, cols, cols, cols, 1e-5);
  layer_norm_rows_reference(x.data(), pw, pb, want.data(), want_mean.data(), want_rstd.data(), rows,
                            cols, cols, cols, 1e-5);
  // y = xhat * w + b, xhat = (x - mean) * rstd: T rounds x - mean twice (as hi and lo parts),
  // rstd once, the product, * w and + b once each: a few units of roundoff of |xhat w| + |b|.
  // Both compute the statistics with double sums, in different orders: the mean may differ by the
  // summation error, (cols + 64) double roundoffs of the mean of |x|, which y sees times rstd |w|.
  constexpr double kDoubleEps = kEps<double>;
  const double rel = 6 * kEps<T>;
  std::vector<double> scale(x.size()), mean_scale(static_cast<size_t>(rows));
  std::vector<double> rstd_scale(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    double mu = 0, var = 0, abs_mean = 0;
    for (int64_t i = 0; i < cols; ++i) mu += double(x[size_t(r * cols + i)]);
    mu /= double(cols);
    for (int64_t i = 0; i < cols; ++i) abs_mean += std::fabs(double(x[size_t(r * cols + i)]));
    abs_mean /= double(cols);
    for (int64_t i = 0; i < cols; ++i) var += std::pow(double(x[size_t(r * cols + i)]) - mu, 2);
    const double inv = 1 / std::sqrt(var / double(cols) + 1e-5);
    const double mean_error = double(cols + 64) * kDoubleEps * abs_mean;
    for (int64_t i = 0; i < cols; ++i) {
      const size_t at = size_t(r * cols + i);
      const double xhat = (double(x[at]) - mu) * inv, wi = affine ? double(w[size_t(i)]) : 1.0;
      scale[at] = std::fabs(xhat * wi) + (affine ? std::fabs(double(b[size_t(i)])) : 0.0) +
                  mean_error * inv * std::fabs(wi) / rel;
    }
    mean_scale[size_t(r)] = std::fabs(mu) + mean_error / (2 * kEps<T>);
    rstd_scale[size_t(r)] = inv * (1 + double(cols + 64) * kDoubleEps / (2 * kEps<T>));
  }
  EXPECT_EQ(compare(got, want, scale, rel, 0.0), "") << "layer_norm " << what << " cols " << cols;
  // The statistics are rounded to T once: within 2 units of roundoff, plus the summation order.
  EXPECT_EQ(compare(mean, want_mean, mean_scale, 2 * kEps<T>, 0.0), "")
      << "layer_norm mean " << what << " cols " << cols;
  EXPECT_EQ(compare(rstd, want_rstd, rstd_scale, 2 * kEps<T>, 0.0), "")
      << "layer_norm rstd " << what << " cols " << cols;
}

template <class T>
void random_rows_match_reference() {
  for (int64_t cols : kLengths) {
    const int64_t rows = cols > 10000 ? 1 : 3;
    check_softmax(random_values<T>(rows * cols, 0.0, 3.0, uint64_t(cols)), rows, cols, "normal(0, 3)");
    check_softmax(random_values<T>(rows * cols, 50.0, 30.0, uint64_t(cols) + 1), rows, cols,
                  "normal(50, 30)");
    for (bool affine : {false, true}) {
      check_layer_norm(random_values<T>(rows * cols, 0.5, 2.0, uint64_t(cols) + 2), rows, cols,
                       affine, "normal(0.5, 2)");
      // Far from zero: the mean must not cancel the spread away.
      check_layer_norm(random_values<T>(rows * cols, 1e4, 1.0, uint64_t(cols) + 3), rows, cols,
                       affine, "normal(1e4, 1)");
    }
  }
}

TEST(RowKernels, Float32RandomRowsMatchReference) { random_rows_match_reference<float>(); }
TEST(RowKernels, Float64RandomRowsMatchReference) { random_rows_match_reference<double>(); }

// The running maximum rises in every block (ascending rows), only in the last block by far
// (earlier blocks' exponentials are rescaled to almost nothing), or never after the first.
template <class T>
void online_rescaling() {
  for (int64_t cols : {1025, 4096, 5000, 300001}) {
    std::vector<T> up(static_cast<size_t>(cols)), spike = random_values<T>(cols, 0.0, 1.0, 11), down(static_cast<size_t>(cols));
    for (int64_t i = 0; i < cols; ++i) {
      up[size_t(i)] = T(-20.0 + 40.0 * double(i) / double(cols));
      down[size_t(i)] = T(20.0 - 40.0 * double(i) / double(cols));
    }
    spike[size_t(cols - 3)] = T(80);
    check_softmax(up, 1, cols, "ascending");
    check_softmax(down, 1, cols, "descending");
    check_softmax(spike, 1, cols, "spike in the last block");
  }
}

TEST(RowKernels, Float32OnlineRescaling) { online_rescaling<float>(); }
TEST(RowKernels, Float64OnlineRescaling) { online_rescaling<double>(); }

// Terms exp(x - max) over exp's whole lower range: normal, subnormal (x - max in [-104, -87]),
// underflowing to 0 (below -104) and clamped (below -150), with -inf and -0 among them; the
// kernels' exponential takes a shorter path for these non-positive arguments (exp_nonpositive).
template <class T>
void terms_down_to_underflow() {
  for (int64_t cols : {17, 1024, 3000}) {
    std::vector<T> x(static_cast<size_t>(cols));
    for (int64_t i = 0; i < cols; ++i) x[size_t(i)] = T(5.0 - 170.0 * double(i) / double(cols - 1));
    x[size_t(cols / 2)] = T(-std::numeric_limits<T>::infinity());
    x[size_t(cols / 3)] = T(-0.0);
    check_softmax(x, 1, cols, "x - max from 0 to -170");
  }
}

TEST(RowKernels, Float32TermsDownToUnderflow) { terms_down_to_underflow<float>(); }
TEST(RowKernels, Float64TermsDownToUnderflow) { terms_down_to_underflow<double>(); }

// Rows of special values, each placed in the first, a middle and the last block of a long row.
template <class T>
void special_values() {
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  const T huge = std::numeric_limits<T>::max(), tiny = std::numeric_limits<T>::denorm_min();
  for (int64_t cols : {1, 5, 17, 3000}) {
    std::vector<std::pair<std::string, std::vector<T>>> rows;
    auto row = [&](const std::string& name, auto at) {
      std::vector<T> v = random_values<T>(cols, 0.0, 2.0, uint64_t(cols) + rows.size());
      for (int64_t i = 0; i < cols; ++i) at(v, i);
      rows.emplace_back(name, v);
    };
    for (int64_t pos : {int64_t(0), cols / 2, cols - 1}) {
      const std::string where = " at " + std::to_string(pos);
      row("NaN" + where, [&](std::vector<T>& v, int64_t i) { if (i == pos) v[size_t(i)] = nan; });
      row("+inf" + where, [&](std::vector<T>& v, int64_t i) { if (i == pos) v[size_t(i)] = inf; });
      row("-inf" + where, [&](std::vector<T>& v, int64_t i) { if (i == pos) v[size_t(i)] = -inf; });
      // Only -inf before pos: the kernel shifts by 0 until a finite maximum turns up.
      row("-inf before a finite value" + where,
          [&](std::vector<T>& v, int64_t i) { if (i != pos) v[size_t(i)] = -inf; });
      row("+huge" + where, [&](std::vector<T>& v, int64_t i) { if (i == pos) v[size_t(i)] = huge; });
      row("-huge" + where, [&](std::vector<T>& v, int64_t i) { if (i == pos) v[size_t(i)] = -huge; });
    }
    row("all -inf", [&](std::vector<T>& v, int64_t i) { v[size_t(i)] = -inf; });
    row("all NaN", [&](std::vector<T>& v, int64_t i) { v[size_t(i)] = nan; });
    row("all +inf", [&](std::vector<T>& v, int64_t i) { v[size_t(i)] = inf; });
    row("+-huge", [&](std::vector<T>& v, int64_t i) { v[size_t(i)] = i % 2 ? huge : -huge; });
    row("+-0", [&](std::vector<T>& v, int64_t i) { v[size_t(i)] = i % 2 ? T(0) : -T(0); });
    row("subnormal", [&](std::vector<T>& v, int64_t i) { v[size_t(i)] = tiny * T(i % 7); });
    for (const auto& [name, v] : rows) {
      check_softmax(v, 1, cols, name);
      // layer norm: finite rows against the reference; rows with NaN or inf must give NaN where
      // the reference does. float64 rows near the largest double are left out: their sums overflow
      // or not depending on the summation order, so neither order is the right answer.
      bool finite = true, huge_double = false;
      for (T e : v) {
        finite = finite && std::isfinite(double(e));
        huge_double = huge_double || (std::is_same_v<T, double> && std::fabs(double(e)) > 1e300);
      }
      if (huge_double) continue;
      if (finite) {
        check_layer_norm(v, 1, cols, true, name);
      } else {
        std::vector<T> got(v.size()), want(v.size()), m(1), r(1), wm(1), wr(1);
        layer_norm_rows(v.data(), nullptr, nullptr, got.data(), m.data(), r.data(), 1, cols, cols,
                        cols, 1e-5);
        layer_norm_rows_reference(v.data(), (const T*)nullptr, (const T*)nullptr, want.data(),
                                  wm.data(), wr.data(), 1, cols, cols, cols, 1e-5);
        for (size_t i = 0; i < v.size(); ++i) {
          EXPECT_EQ(std::isnan(double(got[i])), std::isnan(double(want[i]))) << name << " " << i;
        }
        EXPECT_EQ(std::isnan(double(m[0])), std::isnan(double(wm[0]))) << name;
      }
    }
  }
}

TEST(RowKernels, Float32SpecialValues) { special_values<float>(); }
TEST(RowKernels, Float64SpecialValues) { special_values<double>(); }

TEST(RowKernels, SpecialValueResultsAreExact) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {-inf, 2.0f, -inf, 2.0f}, y(4);
  softmax_rows(x.data(), y.data(), 1, 4, 4, 4, false);
  EXPECT_EQ(y, (std::vector<float>{0.0f, 0.5f, 0.0f, 0.5f}));
  softmax_rows(x.data(), y.data(), 1, 4, 4, 4, true);
  EXPECT_EQ(y[0], -inf);
  EXPECT_FLOAT_EQ(y[1], -std::log(2.0f));
  std::vector<float> one = {123.0f}, out(1);
  softmax_rows(one.data(), out.data(), 1, 1, 1, 1, false);
  EXPECT_EQ(out[0], 1.0f);
  softmax_rows(one.data(), out.data(), 1, 1, 1, 1, true);
  EXPECT_EQ(out[0], 0.0f);
}

// Row strides: padded rows in and out (the padding is left alone), and in place.
TEST(RowKernels, RowStridesAndInPlace) {
  const int64_t rows = 5, cols = 1100, xs = 1203, ys = 1111;
  std::vector<float> x = random_values<float>(rows * xs, 0.0, 3.0, 21);
  std::vector<float> packed(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(&packed[size_t(r * cols)], &x[size_t(r * xs)], sizeof(float) * size_t(cols));
  }
  for (bool log : {false, true}) {
    std::vector<float> want(packed.size()), got(size_t(rows * ys), -7.0f);
    softmax_rows(packed.data(), want.data(), rows, cols, cols, cols, log);
    softmax_rows(x.data(), got.data(), rows, cols, xs, ys, log);
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_EQ(std::memcmp(&got[size_t(r * ys)], &want[size_t(r * cols)], sizeof(float) * size_t(cols)), 0);
      for (int64_t i = cols; i < ys; ++i) ASSERT_EQ(got[size_t(r * ys + i)], -7.0f);
    }
    std::vector<float> in_place = packed;
    softmax_rows(in_place.data(), in_place.data(), rows, cols, cols, cols, log);
    EXPECT_EQ(in_place, want) << "in place, log " << log;
  }
  std::vector<float> w = random_values<float>(cols, 1.0, 0.5, 3), b = random_values<float>(cols, 0.0, 0.5, 4);
  std::vector<float> want(packed.size()), got(size_t(rows * ys), -7.0f), m(rows), r(rows), m2(rows), r2(rows);
  layer_norm_rows(packed.data(), w.data(), b.data(), want.data(), m.data(), r.data(), rows, cols, cols, cols, 1e-5);
  layer_norm_rows(x.data(), w.data(), b.data(), got.data(), m2.data(), r2.data(), rows, cols, xs, ys, 1e-5);
  for (int64_t k = 0; k < rows; ++k) {
    EXPECT_EQ(std::memcmp(&got[size_t(k * ys)], &want[size_t(k * cols)], sizeof(float) * size_t(cols)), 0);
    for (int64_t i = cols; i < ys; ++i) ASSERT_EQ(got[size_t(k * ys + i)], -7.0f);
  }
  EXPECT_EQ(m, m2);
  EXPECT_EQ(r, r2);
  std::vector<float> in_place = packed;
  layer_norm_rows(in_place.data(), w.data(), b.data(), in_place.data(), nullptr, nullptr, rows, cols, cols, cols, 1e-5);
  EXPECT_EQ(in_place, want);
}

TEST(RowKernels, EmptyRowsAndNoRows) {
  std::vector<float> x(4, 1.0f), y(4, -7.0f), m(2, 0.0f), r(2, 0.0f);
  softmax_rows(x.data(), y.data(), 2, 0, 0, 0, false);
  softmax_rows(x.data(), y.data(), 0, 4, 4, 4, true);
  EXPECT_EQ(y, std::vector<float>(4, -7.0f));
  layer_norm_rows(x.data(), nullptr, nullptr, y.data(), m.data(), r.data(), 2, 0, 0, 0, 1e-5);
  EXPECT_EQ(y, std::vector<float>(4, -7.0f));
  EXPECT_TRUE(std::isnan(m[0]) && std::isnan(m[1]));  // 0 / 0, as PyTorch
  EXPECT_TRUE(std::isnan(r[0]) && std::isnan(r[1]));
}

// The same rows give the same bits however they are split into calls and across threads.
TEST(RowKernels, BitwiseIndependentOfRowSplitAndThreads) {
  const int64_t rows = 67, cols = 1500;
  std::vector<float> x = random_values<float>(rows * cols, 1.0, 4.0, 5);
  std::vector<float> w = random_values<float>(cols, 1.0, 0.5, 6), b = random_values<float>(cols, 0.0, 0.5, 9);
  auto run = [&](int kernel, int64_t step, int threads) {
    std::vector<float> y(x.size()), stats(static_cast<size_t>(2 * rows));
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    parallel_for(rows, step, [&](int64_t begin, int64_t end) {
      for (int64_t r0 = begin; r0 < end; r0 += step) {
        const int64_t n = std::min(step, end - r0);
        const float* xr = x.data() + r0 * cols;
        float* yr = y.data() + r0 * cols;
        if (kernel < 2) {
          softmax_rows(xr, yr, n, cols, cols, cols, kernel == 1);
        } else {
          layer_norm_rows(xr, w.data(), b.data(), yr, stats.data() + r0, stats.data() + rows + r0,
                          n, cols, cols, cols, 1e-5);
        }
      }
    });
    omp_set_num_threads(saved);
    y.insert(y.end(), stats.begin(), stats.end());
    return y;
  };
  for (int kernel : {0, 1, 2}) {
    const std::vector<float> once = run(kernel, rows, 1);
    for (auto [step, threads] : {std::pair{1, 1}, {1, 2}, {5, 2}, {7, 3}, {rows, 4}}) {
      EXPECT_EQ(std::memcmp(run(kernel, step, threads).data(), once.data(), once.size() * sizeof(float)), 0)
          << "kernel " << kernel << " step " << step << " threads " << threads;
    }
  }
}

}  // namespace
}  // namespace smelt::kernels
