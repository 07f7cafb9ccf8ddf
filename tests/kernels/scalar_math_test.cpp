// Accuracy of the float32 transcendental functions in kernels/scalar.h against float64 std::
// references, over a strided sweep of every float bit pattern (both signs, subnormals to inf),
// plus their special values, plus the same functions through the eager ops (which are compiled
// with -march=native and vectorized, unlike this test).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kernels/scalar.h"
#include "smelt/smelt.h"
#include "support/ulp.h"
#include "support/helpers.h"

namespace smelt {
namespace {

using testing::bits_of;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

using testing::gelu_erf_ref;
using testing::gelu_tanh_ref;
using testing::sigmoid_ref;
using testing::silu_ref;
using testing::softplus_ref;
using testing::ulp_error;

struct MathCase {
  std::string name;
  std::function<float(float)> f;
  std::function<double(double)> ref;
  // The exhaustive maximum over all finite floats of the -march=native build (see scalar.h); this
  // test is built without -march=native (no FMA contraction) and stays within it too.
  int64_t max_ulps;
};

std::vector<MathCase> cases() {
  return {
      {"exp", [](float x) { return scalar::exp(x); }, [](double x) { return std::exp(x); }, 1},
      {"log", [](float x) { return scalar::log(x); }, [](double x) { return std::log(x); }, 1},
      {"tanh", [](float x) { return scalar::tanh(x); }, [](double x) { return std::tanh(x); }, 1},
      {"erf", [](float x) { return scalar::erf(x); }, [](double x) { return std::erf(x); }, 1},
      {"sigmoid", [](float x) { return scalar::sigmoid(x); }, sigmoid_ref, 3},
      {"silu", [](float x) { return scalar::silu(x); }, silu_ref, 4},
      {"gelu_erf", [](float x) { return scalar::gelu_erf(x); }, gelu_erf_ref, 5},
      {"gelu_tanh", [](float x) { return scalar::gelu_tanh(x); }, gelu_tanh_ref, 4},
      {"softplus", [](float x) { return scalar::softplus(x, 1.0f, 20.0f); }, softplus_ref, 3},
  };
}

// Every `stride`-th bit pattern over all 2^32 (stride odd, so both signs and all exponents are
// hit), plus every float in [-16, 16] at a finer stride, where the functions are not saturated.
template <class Visit>
void sweep(uint64_t stride, const Visit& visit) {
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += stride) {
    float x;
    uint32_t b = uint32_t(u);
    std::memcpy(&x, &b, sizeof x);
    visit(x);
  }
  for (float x = 1e-3f; x < 16.0f; x *= 1.0f + 1e-5f) {
    visit(x);
    visit(-x);
  }
}

TEST(ScalarMath, Float32AccuracySweep) {
  for (const MathCase& c : cases()) {
    int64_t worst = 0;
    float worst_x = 0;
    sweep(2053, [&](float x) {
      if (std::isnan(x)) return;
      int64_t e = ulp_error(c.f(x), c.ref(double(x)));
      if (e > worst) worst = e, worst_x = x;
    });
    EXPECT_LE(worst, c.max_ulps) << c.name << ": " << worst << " ulp at x = " << worst_x << " (got "
                                 << c.f(worst_x) << ", want " << float(c.ref(worst_x)) << ")";
  }
}

TEST(ScalarMath, NaNPropagates) {
  for (const MathCase& c : cases()) {
    EXPECT_TRUE(std::isnan(c.f(kNaN))) << c.name;
    EXPECT_TRUE(std::isnan(c.f(-kNaN))) << c.name;
  }
}

TEST(ScalarMath, ExpSpecialValues) {
  EXPECT_EQ(scalar::exp(kInf), kInf);
  EXPECT_EQ(scalar::exp(-kInf), 0.0f);
  EXPECT_EQ(scalar::exp(0.0f), 1.0f);
  EXPECT_EQ(scalar::exp(-0.0f), 1.0f);
  EXPECT_EQ(scalar::exp(88.72f), float(std::exp(double(88.72f))));  // just below overflow
  EXPECT_EQ(scalar::exp(88.73f), kInf);
  EXPECT_EQ(scalar::exp(1000.0f), kInf);
  EXPECT_EQ(scalar::exp(-103.0f), float(std::exp(-103.0)));  // subnormal, correctly rounded
  EXPECT_GT(scalar::exp(-103.0f), 0.0f);
  EXPECT_EQ(scalar::exp(-104.0f), 0.0f);
  EXPECT_EQ(scalar::exp(-1000.0f), 0.0f);
}

// exp_nonpositive (softmax's terms) gives exp's bits for every x <= 0 and NaN: a strided sweep of
// all non-positive floats, every float whose exp is subnormal or underflows ([-105, -86]), and the
// special values. (bench/scalar_ulp_sweep.cpp checks all 2^31 non-positive floats at once.)
TEST(ScalarMath, ExpNonpositiveIsExpBitForBit) {
  auto check = [](float x) {
    const float got = scalar::exp_nonpositive(x), want = scalar::exp(x);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "x = " << x;
    } else {
      EXPECT_EQ(bits_of(got), bits_of(want)) << "x = " << x << ": got " << got << ", want " << want;
    }
    return bits_of(got) == bits_of(want) || (std::isnan(got) && std::isnan(want));
  };
  int64_t mismatches = 0;
  for (uint64_t u = 0x80000000u; u <= 0xffffffffu && mismatches < 5; u += 127) {
    float x;
    const uint32_t b = uint32_t(u);
    std::memcpy(&x, &b, sizeof x);
    mismatches += !check(x);
  }
  for (float x = -105.0f; x <= -86.0f && mismatches < 5; x = std::nextafter(x, 0.0f)) mismatches += !check(x);
  for (float x : {-0.0f, 0.0f, -kInf, kNaN, -kNaN, -150.0f, -149.99998f, -150.00002f, -1e-45f, -87.33655f,
                  -103.97208f, -103.27893f, -1000.0f}) {
    mismatches += !check(x);
  }
  EXPECT_EQ(scalar::exp_nonpositive(-kInf), 0.0f);
  EXPECT_EQ(scalar::exp_nonpositive(-0.0f), 1.0f);
  EXPECT_GT(scalar::exp_nonpositive(-103.0f), 0.0f);  // subnormal, not flushed
  EXPECT_EQ(scalar::exp_nonpositive(-103.0f), float(std::exp(-103.0)));
  EXPECT_EQ(scalar::exp_nonpositive(2.0), std::exp(2.0));  // other types: exp itself
}

// ldexp_down (one exact step and a constant) rounds v * 2^n as ldexp2 (two variable steps) does,
// subnormal and underflowing results included, over its range of n for the magnitudes of v its
// callers scale (below 16); and keeps 0, inf and NaN.
TEST(ScalarMath, LdexpDownIsLdexp2BitForBit) {
  int64_t mismatches = 0;
  for (float v = 0.2f; v < 16.0f && mismatches < 5; v *= 1.0001373f) {
    for (int32_t n = -218; n <= 31; ++n) {  // v * 2^(n + 92) stays below 2^128
      for (float sv : {v, -v}) {
        const float got = scalar::f32::ldexp_down(sv, n), want = scalar::f32::ldexp2(sv, n);
        if (bits_of(got) != bits_of(want)) {
          ++mismatches;
          ADD_FAILURE() << sv << " * 2^" << n << ": got " << got << ", want " << want;
        }
      }
    }
  }
  EXPECT_EQ(bits_of(scalar::f32::ldexp_down(-0.0f, -100)), bits_of(-0.0f));
  EXPECT_EQ(scalar::f32::ldexp_down(kInf, -100), kInf);
  EXPECT_TRUE(std::isnan(scalar::f32::ldexp_down(kNaN, -100)));
  EXPECT_GT(scalar::f32::ldexp_down(1.0f, -149), 0.0f);  // the smallest subnormal, not flushed
}

TEST(ScalarMath, LogSpecialValues) {
  EXPECT_EQ(scalar::log(0.0f), -kInf);
  EXPECT_EQ(scalar::log(-0.0f), -kInf);
  EXPECT_TRUE(std::isnan(scalar::log(-1.0f)));
  EXPECT_TRUE(std::isnan(scalar::log(-1e-40f)));
  EXPECT_TRUE(std::isnan(scalar::log(-kInf)));
  EXPECT_EQ(scalar::log(kInf), kInf);
  EXPECT_EQ(scalar::log(1.0f), 0.0f);
  const float tiny = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(scalar::log(tiny), float(std::log(double(tiny))));
  const float big = std::numeric_limits<float>::max();
  EXPECT_EQ(scalar::log(big), float(std::log(double(big))));
}

TEST(ScalarMath, SaturatingFunctions) {
  for (float x : {10.0f, 100.0f, 1e30f, kInf}) {
    EXPECT_EQ(scalar::tanh(x), 1.0f) << x;
    EXPECT_EQ(scalar::tanh(-x), -1.0f) << x;
    EXPECT_EQ(scalar::erf(x), 1.0f) << x;
    EXPECT_EQ(scalar::erf(-x), -1.0f) << x;
  }
  EXPECT_EQ(scalar::sigmoid(kInf), 1.0f);
  EXPECT_EQ(scalar::sigmoid(-kInf), 0.0f);
  EXPECT_EQ(scalar::sigmoid(0.0f), 0.5f);
  // x * (something -> 1) is x; x * (something -> 0) is -0, also at -inf (not inf * 0 = NaN)
  for (auto f : {+[](float x) { return scalar::silu(x); }, +[](float x) { return scalar::gelu_erf(x); },
                 +[](float x) { return scalar::gelu_tanh(x); }}) {
    EXPECT_EQ(f(kInf), kInf);
    EXPECT_EQ(f(1e30f), 1e30f);
    EXPECT_EQ(f(-kInf), 0.0f);
    EXPECT_TRUE(std::signbit(f(-kInf)));
    EXPECT_EQ(f(-1e30f), 0.0f);
    EXPECT_EQ(f(0.0f), 0.0f);
  }
  EXPECT_EQ(scalar::softplus(kInf, 1.0f, 20.0f), kInf);
  EXPECT_EQ(scalar::softplus(-kInf, 1.0f, 20.0f), 0.0f);
  EXPECT_EQ(scalar::softplus(30.0f, 1.0f, 20.0f), 30.0f);     // above the threshold: x
  EXPECT_EQ(scalar::softplus(200.0f, 1.0f, 1000.0f), 200.0f);  // below it, without overflow
  EXPECT_LE(ulp_error(scalar::softplus(-200.0f, 0.5f, 20.0f), std::log1p(std::exp(-100.0)) / 0.5), 2);
}

// erf at the edges of its range: signed zeros keep their sign, subnormals give 2/sqrt(pi) x
// correctly rounded (the near-zero polynomial, no underflow to 0), the infinities +-1, NaN itself;
// and erf is odd bit for bit (the far branch takes x's sign from its bits).
// gelu_erf's one path clamps a = |x| at 9 for x >= 0 (where 1 - e g is already 1) and at 14.8 for
// x < 0 (beyond, x Phi(x) underflows to -0), and its negative tail passes through the subnormal
// range: every float around those edges stays within the exhaustive bound (the strided sweep
// steps over most of them).
TEST(ScalarMath, GeluErfAtItsClampsAndInTheSubnormalTail) {
  std::vector<float> xs;
  for (float edge : {9.0f, -9.0f, -14.8f, -13.1905f /* result near the smallest normal */, -14.05f}) {
    float x = edge;
    for (int i = 0; i < 2000; ++i) x = std::nextafter(x, -kInf);
    for (int i = 0; i < 4000; ++i, x = std::nextafter(x, kInf)) xs.push_back(x);
  }
  for (float x = -14.9f; x < -12.0f; x += 1e-4f) xs.push_back(x);
  int64_t worst = 0;
  float at = 0;
  for (float x : xs) {
    const int64_t e = testing::ulp_error(scalar::gelu_erf(x), gelu_erf_ref(double(x)));
    if (e > worst) worst = e, at = x;
  }
  EXPECT_LE(worst, 5) << "at x = " << at;
}

TEST(ScalarMath, ErfSpecialValues) {
  EXPECT_EQ(scalar::erf(0.0f), 0.0f);
  EXPECT_FALSE(std::signbit(scalar::erf(0.0f)));
  EXPECT_TRUE(std::signbit(scalar::erf(-0.0f)));
  for (float x : {std::numeric_limits<float>::denorm_min(), 1e-40f, 1e-38f, std::numeric_limits<float>::min()}) {
    EXPECT_LE(ulp_error(scalar::erf(x), std::erf(double(x))), 1) << x;
    EXPECT_LE(ulp_error(scalar::erf(-x), std::erf(-double(x))), 1) << x;
  }
  EXPECT_EQ(scalar::erf(kInf), 1.0f);
  EXPECT_EQ(scalar::erf(-kInf), -1.0f);
  EXPECT_TRUE(std::isnan(scalar::erf(kNaN)));
  for (uint64_t u = 0; u < (uint64_t(1) << 31); u += 4099) {
    float x;
    uint32_t b = uint32_t(u);
    std::memcpy(&x, &b, sizeof x);
    const float pos = scalar::erf(x), neg = scalar::erf(-x);
    EXPECT_EQ(bits_of(neg), bits_of(pos) ^ 0x80000000u) << x;
    if (bits_of(neg) != (bits_of(pos) ^ 0x80000000u)) break;
  }
}

// The eager ops run the same functions compiled with the library's flags (vectorized): a dense
// band of inputs through smelt::exp & co. against the same references.
TEST(ScalarMath, EagerOpsMatchReferences) {
  std::vector<float> xs;
  for (float x = -120.0f; x <= 120.0f; x += 0.00731f) xs.push_back(x);
  for (float x : {0.0f, -0.0f, kInf, -kInf, kNaN, 1e-40f, -1e-40f, 1e30f, -1e30f}) xs.push_back(x);
  const int64_t n = int64_t(xs.size());
  Tensor x = from_vector(xs, {n});
  struct OpCase {
    const char* name;
    std::function<Tensor(const Tensor&)> op;
    std::function<double(double)> ref;
    int64_t max_ulps;
  };
  const OpCase ops[] = {
      {"exp", [](const Tensor& t) { return smelt::exp(t); }, [](double v) { return std::exp(v); }, 1},
      {"log", [](const Tensor& t) { return smelt::log(t); }, [](double v) { return std::log(v); }, 1},
      {"tanh", [](const Tensor& t) { return smelt::tanh(t); }, [](double v) { return std::tanh(v); }, 1},
      {"erf", [](const Tensor& t) { return smelt::erf(t); }, [](double v) { return std::erf(v); }, 1},
      {"sigmoid", [](const Tensor& t) { return smelt::sigmoid(t); }, sigmoid_ref, 3},
      {"silu", [](const Tensor& t) { return smelt::silu(t); }, silu_ref, 4},
      {"gelu", [](const Tensor& t) { return smelt::gelu(t); }, gelu_erf_ref, 5},
      {"gelu_tanh", [](const Tensor& t) { return smelt::gelu(t, GeluApprox::Tanh); }, gelu_tanh_ref, 4},
      {"softplus", [](const Tensor& t) { return smelt::softplus(t); }, softplus_ref, 3},
  };
  for (const OpCase& c : ops) {
    std::vector<double> y = c.op(x).to_vector();  // float32 values, widened exactly
    ASSERT_EQ(int64_t(y.size()), n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_LE(ulp_error(float(y[i]), c.ref(double(xs[i]))), c.max_ulps)
          << c.name << "(" << xs[i] << ") = " << y[i] << ", want " << float(c.ref(double(xs[i])));
    }
  }
}

}  // namespace
}  // namespace smelt
