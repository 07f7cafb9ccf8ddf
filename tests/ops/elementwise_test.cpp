// Elementwise ops: forward against std:: math in double, gradchecks (broadcast, non-contiguous),
// a few second-order checks, and the NaN / tie conventions.
#include <cmath>

#include "ops/reference.h"

namespace smelt {
namespace {

using testing::all_close;
using testing::grad_of;
using testing::gradcheck;
using testing::random_leaf;
using testing::tensor_from;

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// The elementwise image of x under f, computed in double, stored as `dtype`.
Tensor map_ref(const Tensor& x, const std::function<double(double)>& f, DType dtype) {
  std::vector<double> v = x.to_vector();
  for (double& e : v) e = f(e);
  return from_vector(v, x.shape(), dtype);
}

// f(a, b) with NumPy broadcasting, in double.
Tensor zip_ref(const Tensor& a, const Tensor& b, const std::function<double(double, double)>& f,
               DType dtype) {
  Shape out = broadcast_shapes(a.shape(), b.shape(), "zip_ref");
  Tensor ae = a.expand(out).contiguous(), be = b.expand(out).contiguous();
  std::vector<double> x = ae.to_vector(), y = be.to_vector();
  for (size_t i = 0; i < x.size(); ++i) x[i] = f(x[i], y[i]);
  return from_vector(x, out, dtype);
}

double tolerance(DType t) { return t == DType::Float32 ? 1e-5 : 1e-12; }

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  double low, high;
  bool differentiable = true;
};

double ref_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double ref_softplus(double x, double beta, double threshold) {
  return beta * x > threshold ? x : std::log(1.0 + std::exp(beta * x)) / beta;
}

std::vector<UnaryCase> unary_cases() {
  const double k = std::sqrt(2.0 / M_PI);
  return {
      {"neg", [](const Tensor& x) { return neg(x); }, [](double x) { return -x; }, -2, 2},
      {"exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, -3, 3},
      {"log", [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); }, 0.1, 4},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, 0.1, 4},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); }, 0.1, 4},
      {"abs", [](const Tensor& x) { return abs(x); }, [](double x) { return std::fabs(x); }, -2, 2},
      {"sign", [](const Tensor& x) { return sign(x); },
       [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }, -2, 2, false},
      {"erf", [](const Tensor& x) { return erf(x); }, [](double x) { return std::erf(x); }, -2, 2},
      {"relu", [](const Tensor& x) { return relu(x); }, [](double x) { return std::max(x, 0.0); }, -2, 2},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.1); },
       [](double x) { return x > 0 ? x : 0.1 * x; }, -2, 2},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, ref_sigmoid, -6, 6},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); }, -3, 3},
      {"gelu", [](const Tensor& x) { return gelu(x); },
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, -4, 4},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, GeluApprox::Tanh); },
       [k](double x) { return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x))); }, -4, 4},
      {"silu", [](const Tensor& x) { return silu(x); }, [](double x) { return x * ref_sigmoid(x); }, -5, 5},
      {"softplus", [](const Tensor& x) { return softplus(x); },
       [](double x) { return ref_softplus(x, 1, 20); }, -5, 5},
      {"softplus_threshold", [](const Tensor& x) { return softplus(x, 2.0, 1.5); },
       [](double x) { return ref_softplus(x, 2, 1.5); }, -2, 2},
      {"clamp", [](const Tensor& x) { return clamp(x, -0.3, 0.5); },
       [](double x) { return std::min(std::max(x, -0.3), 0.5); }, -1, 1},
      {"clamp_min", [](const Tensor& x) { return clamp(x, -0.3, std::nullopt); },
       [](double x) { return std::max(x, -0.3); }, -1, 1},
      {"clamp_max", [](const Tensor& x) { return clamp(x, std::nullopt, 0.5); },
       [](double x) { return std::min(x, 0.5); }, -1, 1},
  };
}

TEST(Unary, ForwardMatchesStdMath) {
  for (const UnaryCase& c : unary_cases()) {
    for (DType dtype : {DType::Float32, DType::Float64}) {
      Generator gen(7);
      Tensor x = uniform({3, 4, 5}, c.low, c.high, dtype, &gen);
      Tensor y = c.op(x);
      EXPECT_EQ(y.dtype(), dtype) << c.name;
      EXPECT_TRUE(all_close(y, map_ref(x, c.ref, dtype), tolerance(dtype), tolerance(dtype)))
          << c.name << " " << dtype_name(dtype);
      // Non-contiguous: permuted and step-sliced views.
      Tensor xv = x.permute({2, 0, 1}).slice(0, 0, 5, 2);
      EXPECT_TRUE(all_close(c.op(xv), map_ref(xv, c.ref, dtype), tolerance(dtype), tolerance(dtype)))
          << c.name << " strided";
    }
  }
}

TEST(Unary, LargeParallelMatchesStdMath) {
  Tensor x = uniform({300, 257}, -3, 3, DType::Float32);
  EXPECT_TRUE(all_close(tanh(x), map_ref(x, [](double v) { return std::tanh(v); }, DType::Float32)));
  Tensor xt = x.t();
  EXPECT_TRUE(all_close(exp(xt), map_ref(xt, [](double v) { return std::exp(v); }, DType::Float32)));
}

TEST(Unary, Gradcheck) {
  for (const UnaryCase& c : unary_cases()) {
    if (!c.differentiable) continue;
    Tensor x = random_leaf({4, 6}, c.low, c.high, 3);
    // Through a strided view, and scaled so the incoming gradient is not all ones.
    EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) { return c.op(v[0].t().slice(0, 1, 6, 2)); },
                          {x}))
        << c.name;
  }
}

TEST(Unary, SecondOrderGradcheck) {
  for (const char* name : {"tanh", "sigmoid", "gelu", "gelu_tanh", "silu", "log", "rsqrt", "softplus"}) {
    for (const UnaryCase& c : unary_cases()) {
      if (std::string(c.name) != name) continue;
      Fn f = [&](const std::vector<Tensor>& v) {
        return grad_of([&](const Tensor& x) { return sum(c.op(x) * c.op(x)); }, v[0]);
      };
      EXPECT_TRUE(gradcheck(f, {random_leaf({5}, c.low, c.high, 4)})) << name;
    }
  }
}

TEST(Unary, IntegerOps) {
  Tensor x = from_vector(std::vector<int64_t>{-3, -1, 0, 2, 5}, {5});
  EXPECT_EQ(neg(x).to_vector(), (std::vector<double>{3, 1, 0, -2, -5}));
  EXPECT_EQ(abs(x).to_vector(), (std::vector<double>{3, 1, 0, 2, 5}));
  EXPECT_EQ(sign(x).to_vector(), (std::vector<double>{-1, -1, 0, 1, 1}));
  EXPECT_EQ(relu(x).to_vector(), (std::vector<double>{0, 0, 0, 2, 5}));
  EXPECT_EQ(clamp(x, -1, 2).to_vector(), (std::vector<double>{-1, -1, 0, 2, 2}));
  EXPECT_EQ(neg(x).dtype(), DType::Int64);
}

// abs clears the sign bit of floats, as PyTorch: abs(-0) is +0 and abs(-NaN) a NaN without sign
// (found by the graph fuzzer's special values), in float32 and float64, strided or not.
TEST(Unary, AbsClearsTheSignOfZeroAndNaN) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor x = cast(from_vector(std::vector<double>{-0.0, -NAN, -1.5, 0.0}, {4}), dt);
    for (const Tensor& in : {x, x.reshape({2, 2}).t()}) {
      std::vector<double> r = abs(in).to_vector();
      for (double v : r) EXPECT_FALSE(std::signbit(v)) << dtype_name(dt);
    }
    std::vector<double> r = abs(x).to_vector();
    EXPECT_EQ(r[0], 0.0);
    EXPECT_TRUE(std::isnan(r[1]));
    EXPECT_EQ(r[2], 1.5);
  }
}

TEST(Unary, ExtremeInputsStayFinite) {
  Tensor x = from_vector(std::vector<double>{-1000, -50, 50, 1000}, {4});
  EXPECT_TRUE(all_close(sigmoid(x), from_vector(std::vector<double>{0, ref_sigmoid(-50), 1, 1}, {4})));
  EXPECT_TRUE(all_close(softplus(x), map_ref(x, [](double v) { return v > 20 ? v : std::log1p(std::exp(v)); },
                                             DType::Float64)));
  EXPECT_TRUE(all_close(silu(x), from_vector(std::vector<double>{0, -50 * ref_sigmoid(-50), 50, 1000}, {4})));
  // Above the threshold softplus is the identity, and so is its gradient.
  Tensor t = from_vector(std::vector<double>{0.76, 0.74}, {2});
  t.set_requires_grad();
  sum(softplus(t, 2.0, 1.5)).backward();
  EXPECT_DOUBLE_EQ(t.grad().to_vector()[0], 1.0);
  EXPECT_NEAR(t.grad().to_vector()[1], ref_sigmoid(1.48), 1e-12);
}

TEST(Unary, ClampWithMinAboveMaxGivesMax) {
  // PyTorch's rule: min > max sets everything to max.
  Tensor x = from_vector(std::vector<float>{0, 1, 5}, {3});
  EXPECT_EQ(clamp(x, 3.0, 2.0).to_vector(), (std::vector<double>{2, 2, 2}));
  Tensor nan = from_vector(std::vector<float>{NAN}, {1});
  EXPECT_TRUE(std::isnan(clamp(nan, 0.0, 1.0).item()));
}

TEST(Cast, ConvertsAndDifferentiates) {
  Tensor x = from_vector(std::vector<float>{-1.7f, 0.0f, 2.5f}, {3});
  EXPECT_EQ(cast(x, DType::Int64).to_vector(), (std::vector<double>{-1, 0, 2}));
  EXPECT_EQ(cast(x, DType::Bool).to_vector(), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(cast(cast(x, DType::Bool), DType::Float32).to_vector(), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(cast(arange(3), DType::Float64).dtype(), DType::Float64);
  EXPECT_TRUE(cast(x, DType::Float32).same(x));  // no-op cast returns the tensor itself
  EXPECT_TRUE(all_close(cast(x.slice(0, 0, 3, 2), DType::Float64),
                        from_vector(std::vector<double>{-1.7f, 2.5f}, {2})));
  Tensor leaf = random_leaf({2, 3});
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& v) { return cast(cast(v[0], DType::Float32) * 2.0, DType::Float64); },
      {leaf}, 1e-3, 1e-3, 1e-4));
}

// ---- binary

struct BinaryCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<double(double, double)> ref;
  double low, high;  // operand range (both sides)
  bool integer = true;
};

std::vector<BinaryCase> binary_cases() {
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, [](double a, double b) { return a + b; }, -2, 2},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, [](double a, double b) { return a - b; }, -2, 2},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, [](double a, double b) { return a * b; }, -2, 2},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, [](double a, double b) { return a / b; }, 0.5, 2, false},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); },
       [](double a, double b) { return std::pow(a, b); }, 0.5, 2, false},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
       [](double a, double b) { return std::max(a, b); }, -2, 2},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); },
       [](double a, double b) { return std::min(a, b); }, -2, 2},
  };
}

TEST(Binary, ForwardBroadcastAndStrided) {
  for (const BinaryCase& c : binary_cases()) {
    for (DType dtype : {DType::Float32, DType::Float64}) {
      Generator gen(9);
      Tensor a = uniform({3, 1, 4}, c.low, c.high, dtype, &gen);
      Tensor b = uniform({2, 4}, c.low, c.high, dtype, &gen);
      double tol = tolerance(dtype);
      EXPECT_TRUE(all_close(c.op(a, b), zip_ref(a, b, c.ref, dtype), tol, tol)) << c.name;
      EXPECT_TRUE(all_close(c.op(b, a), zip_ref(b, a, c.ref, dtype), tol, tol)) << c.name;
      Tensor at = uniform({4, 3}, c.low, c.high, dtype, &gen).t();  // (3, 4) strided
      Tensor bs = uniform({3, 8}, c.low, c.high, dtype, &gen).slice(1, 0, 8, 2);
      EXPECT_TRUE(all_close(c.op(at, bs), zip_ref(at, bs, c.ref, dtype), tol, tol)) << c.name;
      Tensor s = scalar_tensor(1.5, dtype);  // 0-dim operand
      EXPECT_TRUE(all_close(c.op(at, s), zip_ref(at, s, c.ref, dtype), tol, tol)) << c.name;
    }
    if (c.integer) {
      Tensor a = from_vector(std::vector<int64_t>{-3, 0, 4, 7}, {2, 2});
      Tensor b = from_vector(std::vector<int64_t>{2, -5}, {2});
      EXPECT_TRUE(all_close(c.op(a, b), zip_ref(a, b, c.ref, DType::Int64))) << c.name;
    }
  }
}

TEST(Binary, LargeParallelBroadcast) {
  Tensor a = randn({200, 300}), b = randn({300});
  EXPECT_TRUE(all_close(a * b, zip_ref(a, b, [](double x, double y) { return x * y; }, DType::Float32)));
  Tensor col = randn({200, 1});
  EXPECT_TRUE(all_close(col - a.t().t(), zip_ref(col, a, [](double x, double y) { return x - y; },
                                                 DType::Float32)));
}

TEST(Binary, Gradcheck) {
  for (const BinaryCase& c : binary_cases()) {
    Tensor a = random_leaf({3, 1, 4}, c.low, c.high, 5), b = random_leaf({2, 4}, c.low, c.high, 6);
    EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) { return c.op(v[0], v[1]); }, {a, b})) << c.name;
    Tensor at = random_leaf({4, 3}, c.low, c.high, 7);
    EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) { return c.op(v[0].t(), v[1].slice(1, 0, 8, 2)); },
                          {at, random_leaf({3, 8}, c.low, c.high, 8)}))
        << c.name;
  }
}

TEST(Binary, SecondOrderGradcheck) {
  Tensor b = random_leaf({3}, 0.5, 2, 12);
  for (const BinaryCase& c : binary_cases()) {
    std::string name = c.name;
    if (name != "mul" && name != "div" && name != "pow") continue;
    Fn f = [&](const std::vector<Tensor>& v) {
      return grad_of([&](const Tensor& x) { return sum(c.op(x, b) * c.op(b, x)); }, v[0]);
    };
    EXPECT_TRUE(gradcheck(f, {random_leaf({3}, 0.5, 2, 13)})) << name;
  }
}

TEST(Binary, ScalarOperators) {
  Tensor x = from_vector(std::vector<double>{1, 2, 4}, {3});
  EXPECT_EQ((x + 1.0).to_vector(), (std::vector<double>{2, 3, 5}));
  EXPECT_EQ((1.0 - x).to_vector(), (std::vector<double>{0, -1, -3}));
  EXPECT_EQ((x * 2.0).to_vector(), (std::vector<double>{2, 4, 8}));
  EXPECT_EQ((8.0 / x).to_vector(), (std::vector<double>{8, 4, 2}));
  EXPECT_EQ((x / 2.0 - x * x).to_vector(), (std::vector<double>{-0.5, -3, -14}));
  EXPECT_EQ((-x).to_vector(), (std::vector<double>{-1, -2, -4}));
  EXPECT_EQ(pow(x, 2.0).to_vector(), (std::vector<double>{1, 4, 16}));
  EXPECT_EQ((x + 1.0).dtype(), DType::Float64);
}

TEST(Binary, MaximumMinimumTiesAndNaN) {
  Tensor a = from_vector(std::vector<double>{1, 2, 3}, {3}), b = from_vector(std::vector<double>{1, 5, 0}, {3});
  a.set_requires_grad();
  b.set_requires_grad();
  sum(maximum(a, b)).backward();
  EXPECT_EQ(a.grad().to_vector(), (std::vector<double>{0.5, 0, 1}));  // a tie splits the gradient
  EXPECT_EQ(b.grad().to_vector(), (std::vector<double>{0.5, 1, 0}));
  a.zero_grad();
  b.zero_grad();
  sum(minimum(a, b)).backward();
  EXPECT_EQ(a.grad().to_vector(), (std::vector<double>{0.5, 1, 0}));
  EXPECT_EQ(b.grad().to_vector(), (std::vector<double>{0.5, 0, 1}));
  // NaN on either side propagates.
  Tensor n = from_vector(std::vector<float>{NAN, 1, NAN}, {3}), m = from_vector(std::vector<float>{1, NAN, NAN}, {3});
  for (const Tensor& r : {maximum(n, m), minimum(n, m), maximum(m, n), minimum(m, n)}) {
    for (double v : r.to_vector()) EXPECT_TRUE(std::isnan(v));
  }
}

TEST(Compare, AllSixWithTiesBroadcastAndNaN) {
  using CmpFn = Tensor (*)(const Tensor&, const Tensor&);
  struct Cmp { const char* name; CmpFn op; std::function<bool(double, double)> ref; };
  std::vector<Cmp> cmps = {
      {"eq", eq, [](double a, double b) { return a == b; }}, {"ne", ne, [](double a, double b) { return a != b; }},
      {"lt", lt, [](double a, double b) { return a < b; }}, {"le", le, [](double a, double b) { return a <= b; }},
      {"gt", gt, [](double a, double b) { return a > b; }}, {"ge", ge, [](double a, double b) { return a >= b; }},
  };
  Tensor a = from_vector(std::vector<float>{0, 1, 2, NAN, 1, 3}, {2, 3});
  Tensor b = from_vector(std::vector<float>{1, 1, NAN}, {3});
  for (const Cmp& c : cmps) {
    Tensor r = c.op(a, b);
    EXPECT_EQ(r.dtype(), DType::Bool) << c.name;
    Tensor want = zip_ref(a, b, [&](double x, double y) { return double(c.ref(x, y)); }, DType::Bool);
    EXPECT_EQ(r.to_vector(), want.to_vector()) << c.name;
    Tensor ai = from_vector(std::vector<int64_t>{1, 2, 3}, {3});
    EXPECT_EQ(c.op(ai, ai.slice(0, 0, 3, 1)).to_vector(),
              zip_ref(ai, ai, [&](double x, double y) { return double(c.ref(x, y)); }, DType::Bool).to_vector())
        << c.name;
  }
  Tensor x = random_leaf({3});
  EXPECT_FALSE(gt(x, x * 2.0).requires_grad());  // comparisons carry no gradient
}

TEST(Where, ForwardBroadcastAndGradient) {
  Tensor cond = from_vector(std::vector<float>{1, 0, 1}, {3}).to(DType::Bool);
  Tensor a = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}), b = scalar_tensor(-1, DType::Float64);
  EXPECT_EQ(where(cond, a, b).to_vector(), (std::vector<double>{1, -1, 3, 4, -1, 6}));
  EXPECT_EQ(where(cond.unsqueeze(1).slice(0, 0, 2), a.t().slice(0, 0, 2), b).shape(), (Shape{2, 2}));
  Tensor x = random_leaf({2, 3}), y = random_leaf({3}, -1, 1, 2);
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) { return where(cond, v[0], v[1] * v[1]); }, {x, y}));
}

}  // namespace
}  // namespace smelt
