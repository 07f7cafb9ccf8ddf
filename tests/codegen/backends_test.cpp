// Both backends (tile interpreter, generated C++) against the eager ops computing the same thing:
// bit-exact wherever nothing is reassociated (elementwise, max, min), special values included.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "codegen/kernel_builder.h"
#include "fuzz/special_values.h"
#include "support/check.h"

namespace smelt::codegen::testing {
namespace {

using kernels::ScalarFn;

// Checks every output of `r` bit-exactly against `expected` (interpreter and compiled).
void expect_bit_exact(const RunResult& r, const std::vector<Tensor>& expected, const std::vector<std::string>& names) {
  ASSERT_EQ(r.interpreted.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    Tensor want = expected[i].contiguous().reshape({-1});
    EXPECT_TRUE(bit_equal(r.interpreted[i].reshape({-1}), want)) << "interpreter, output " << names[i];
    EXPECT_TRUE(bit_equal(r.compiled[i].reshape({-1}), want)) << "compiled, output " << names[i];
  }
}

// out[o, i] = f(e) for e = x * a + b with x (M, N), a broadcast along rows (N), b along columns
// (M): one kernel with an output per scalar function, so one compile covers the table.
TEST(CodegenBackends, Float32ElementwiseBroadcastSpecialValuesBitExact) {
  const int64_t M = 64, N = 600;  // 38400 elements: above the parallel grain; 600 % 16 != 0
  std::mt19937_64 rng(7);
  fuzz::ElementDraw draw{-4, 4, 0.2};
  Tensor x = fuzz::random_tensor({M, N}, DType::Float32, draw, rng);
  Tensor a = fuzz::random_tensor({N}, DType::Float32, draw, rng);
  Tensor b = fuzz::random_tensor({M}, DType::Float32, draw, rng);
  Tensor minus_zero = from_vector(std::vector<float>{-0.0f}, {1});

  KernelBuilder kb({M}, {N});
  int ax = kb.access(kb.arg(DType::Float32, M * N, false), 0, {N}, {1});
  int aa = kb.access(kb.arg(DType::Float32, N, false), 0, {0}, {1});
  int ab = kb.access(kb.arg(DType::Float32, M, false), 0, {1}, {0});
  int lx = kb.load(ax), la = kb.load(aa), lb = kb.load(ab);
  int e = kb.call(ScalarFn::add, {kb.call(ScalarFn::mul, {lx, la}), lb});
  int mz = kb.constant(DType::Float32, -0.0);

  Tensor xa = mul(x, a.reshape({1, N})), er = add(xa, b.reshape({M, 1}));
  std::vector<std::pair<std::string, std::pair<int, Tensor>>> outs = {
      {"e", {e, er}},
      {"gelu_erf", {kb.call(ScalarFn::gelu_erf, {e}), gelu(er)}},
      {"gelu_tanh", {kb.call(ScalarFn::gelu_tanh, {e}), gelu(er, GeluApprox::Tanh)}},
      {"silu", {kb.call(ScalarFn::silu, {e}), silu(er)}},
      {"softplus", {kb.call(ScalarFn::softplus, {e}, 2.0, 15.0), softplus(er, 2.0, 15.0)}},
      {"erf", {kb.call(ScalarFn::erf, {e}), smelt::erf(er)}},
      {"tanh", {kb.call(ScalarFn::tanh, {e}), smelt::tanh(er)}},
      {"sigmoid", {kb.call(ScalarFn::sigmoid, {e}), sigmoid(er)}},
      {"exp", {kb.call(ScalarFn::exp, {e}), smelt::exp(er)}},
      {"log", {kb.call(ScalarFn::log, {e}), smelt::log(er)}},
      {"sqrt", {kb.call(ScalarFn::sqrt, {e}), smelt::sqrt(er)}},
      {"rsqrt", {kb.call(ScalarFn::rsqrt, {e}), rsqrt(er)}},
      {"abs", {kb.call(ScalarFn::abs, {e}), smelt::abs(er)}},
      {"sign", {kb.call(ScalarFn::sign, {e}), sign(er)}},
      {"relu", {kb.call(ScalarFn::relu, {e}), relu(er)}},
      {"neg", {kb.call(ScalarFn::neg, {e}), neg(er)}},
      {"leaky_relu", {kb.call(ScalarFn::leaky_relu, {e}, 0.01), leaky_relu(er, 0.01)}},
      {"clamp", {kb.call(ScalarFn::clamp, {e}, -1.0, INFINITY), clamp(er, -1.0, std::nullopt)}},
      {"div", {kb.call(ScalarFn::div, {e, lx}), div(er, x)}},
      {"pow", {kb.call(ScalarFn::pow, {lx, la}), pow(x, a.reshape({1, N}))}},
      {"maximum", {kb.call(ScalarFn::maximum, {e, mz}), maximum(er, minus_zero)}},
      {"minimum", {kb.call(ScalarFn::minimum, {lb, lx}), minimum(b.reshape({M, 1}), x)}},
      {"where", {kb.call(ScalarFn::where, {kb.call(ScalarFn::gt, {lx, la}), e, lx}),
                 where(gt(x, a.reshape({1, N})), er, x)}},
      {"eq", {kb.call(ScalarFn::eq, {e, lx}), eq(er, x)}},
      {"cast_f64", {kb.call(ScalarFn::cast, {e}, 0, 0, DType::Float64), cast(er, DType::Float64)}},
  };
  std::vector<Tensor> args = {x, a, b}, expected;
  std::vector<std::string> names;
  for (auto& [name, out] : outs) {
    DType dtype = kb.k.exprs[out.first].dtype;
    kb.store(out.first, kb.access(kb.arg(dtype, M * N, true), 0, {N}, {1}));
    args.push_back(zeros({M, N}, dtype));
    expected.push_back(out.second);
    names.push_back(name);
  }
  kb.k.name = "broadcast_table";
  expect_bit_exact(run_both(kb.k, args), expected, names);
}

// Permuted reads, reversed (negative-stride) reads and a transposed store, in float64.
TEST(CodegenBackends, Float64PermutedAndNegativeStridesBitExact) {
  const int64_t R = 40, C = 70;
  std::mt19937_64 rng(11);
  fuzz::ElementDraw draw{-3, 3, 0.1};
  Tensor x = fuzz::random_tensor({R, C}, DType::Float64, draw, rng);
  Tensor y = fuzz::random_tensor({C * R}, DType::Float64, draw, rng);

  KernelBuilder kb({}, {C, R});  // iterates x transposed
  int lx = kb.load(kb.access(kb.arg(DType::Float64, R * C, false), 0, {}, {1, C}));
  int ly = kb.load(kb.access(kb.arg(DType::Float64, C * R, false), C * R - 1, {}, {-R, -1}));
  int v0 = kb.call(ScalarFn::add, {kb.call(ScalarFn::mul, {lx, ly}), kb.call(ScalarFn::exp, {lx})});
  int v1 = kb.call(ScalarFn::sub, {lx, ly});
  kb.store(v0, kb.access(kb.arg(DType::Float64, C * R, true), 0, {}, {R, 1}));
  kb.store(v1, kb.access(kb.arg(DType::Float64, R * C, true), 0, {}, {1, C}));  // transposed back

  Tensor xt = x.permute({1, 0});
  Tensor rev_c = arange(double(C - 1), -1.0, -1.0), rev_r = arange(double(R - 1), -1.0, -1.0);
  Tensor yrev = index_select(index_select(y.reshape({C, R}), 0, rev_c), 1, rev_r);
  Tensor ref0 = add(mul(xt, yrev), smelt::exp(xt));
  Tensor ref1 = sub(xt, yrev).permute({1, 0});
  RunResult r = run_both(kb.k, {x, y, zeros({C, R}, DType::Float64), zeros({R, C}, DType::Float64)});
  expect_bit_exact(r, {ref0, ref1}, {"mul_add_exp", "sub_transposed"});
}

// int64 wrap-around, division, clamps with infinite bounds, bool comparisons and where, and casts
// between every kind (saturating float -> int64, NaN -> 0, modulo-256 uint8).
TEST(CodegenBackends, Int64BoolCastWhereBitExact) {
  const int64_t K = 1000;
  std::mt19937_64 rng(5);
  fuzz::ElementDraw draw{-1000, 1000, 0.3};
  Tensor xi = fuzz::random_tensor({K}, DType::Int64, draw, rng);
  Tensor yi = fuzz::random_tensor({K}, DType::Int64, draw, rng);
  for (int64_t i = 0; i < K; ++i) {
    if (yi.data<int64_t>()[i] == 0) yi.data<int64_t>()[i] = 1;  // the eager div refuses 0
  }
  Tensor f = fuzz::random_tensor({K}, DType::Float32, fuzz::ElementDraw{-300, 300, 0.3}, rng);
  Tensor big = from_vector(std::vector<int64_t>{std::numeric_limits<int64_t>::max()}, {1});

  KernelBuilder kb({}, {K});
  int lx = kb.load(kb.access(kb.arg(DType::Int64, K, false), 0, {}, {1}));
  int ly = kb.load(kb.access(kb.arg(DType::Int64, K, false), 0, {}, {1}));
  int lf = kb.load(kb.access(kb.arg(DType::Float32, K, false), 0, {}, {1}));
  int cmax = kb.constant(DType::Int64, 0);
  kb.k.exprs[cmax].ivalue = std::numeric_limits<int64_t>::max();
  int lt = kb.call(ScalarFn::lt, {lx, ly});
  std::vector<std::pair<std::string, std::pair<int, Tensor>>> outs = {
      {"add_max", {kb.call(ScalarFn::add, {lx, cmax}), add(xi, big)}},
      {"sub", {kb.call(ScalarFn::sub, {lx, ly}), sub(xi, yi)}},
      {"mul", {kb.call(ScalarFn::mul, {lx, ly}), mul(xi, yi)}},
      {"div", {kb.call(ScalarFn::div, {lx, ly}), div(xi, yi)}},
      {"neg", {kb.call(ScalarFn::neg, {lx}), neg(xi)}},
      {"abs", {kb.call(ScalarFn::abs, {lx}), smelt::abs(xi)}},
      {"maximum", {kb.call(ScalarFn::maximum, {lx, ly}), maximum(xi, yi)}},
      {"clamp", {kb.call(ScalarFn::clamp, {lx}, -INFINITY, 1e30), clamp(xi, -INFINITY, 1e30)}},
      {"lt", {lt, smelt::lt(xi, yi)}},
      {"where", {kb.call(ScalarFn::where, {lt, lx, ly}), where(smelt::lt(xi, yi), xi, yi)}},
      {"f_to_i64", {kb.call(ScalarFn::cast, {lf}, 0, 0, DType::Int64), cast(f, DType::Int64)}},
      {"i64_to_f", {kb.call(ScalarFn::cast, {lx}, 0, 0, DType::Float32), cast(xi, DType::Float32)}},
      {"f_to_bool", {kb.call(ScalarFn::cast, {lf}, 0, 0, DType::Bool), cast(f, DType::Bool)}},
      {"i64_to_u8", {kb.call(ScalarFn::cast, {lx}, 0, 0, DType::UInt8), cast(xi, DType::UInt8)}},
      {"f_to_u8", {kb.call(ScalarFn::cast, {lf}, 0, 0, DType::UInt8), cast(f, DType::UInt8)}},
      {"bool_eq", {kb.call(ScalarFn::eq, {lt, kb.call(ScalarFn::cast, {lf}, 0, 0, DType::Bool)}),
                   eq(smelt::lt(xi, yi), cast(f, DType::Bool))}},
  };
  std::vector<Tensor> args = {xi, yi, f}, expected;
  std::vector<std::string> names;
  for (auto& [name, out] : outs) {
    DType dtype = kb.k.exprs[out.first].dtype;
    kb.store(out.first, kb.access(kb.arg(dtype, K, true), 0, {}, {1}));
    args.push_back(zeros({K}, dtype));
    expected.push_back(out.second);
    names.push_back(name);
  }
  expect_bit_exact(run_both(kb.k, args), expected, names);
}

// float64 -> float32 -> float64 inside one kernel keeps float32's rounding, for every inner
// extent a tail can have: GCC 12's basic-block vectorizer dropped the round trip in the
// straight-line code a small constant extent unrolls into (fuzz --compile seed 20025699; the
// generated code is compiled with -fno-tree-slp-vectorize since, codegen/compiler.cpp).
TEST(CodegenBackends, Float64ToFloat32RoundTripKeepsItsRounding) {
  std::mt19937_64 rng(11);
  for (int64_t inner = 1; inner <= 19; ++inner) {
    const int64_t rows = 3, K = rows * inner;
    Tensor x = fuzz::random_tensor({K}, DType::Float64, fuzz::ElementDraw{-2, 2, 0.2}, rng);
    Tensor c = fuzz::random_tensor({inner}, DType::Float64, fuzz::ElementDraw{-2, 2, 0.0}, rng);
    KernelBuilder kb({rows}, {inner});
    int lx = kb.load(kb.access(kb.arg(DType::Float64, K, false), 0, {inner}, {1}));
    int lc = kb.load(kb.access(kb.arg(DType::Float64, inner, false), 0, {0}, {1}));
    int narrow = kb.call(ScalarFn::cast, {kb.call(ScalarFn::add, {lx, lc})}, 0, 0, DType::Float32);
    int wide = kb.call(ScalarFn::cast, {narrow}, 0, 0, DType::Float64);
    int out = kb.call(ScalarFn::cast, {kb.call(ScalarFn::sub, {wide, lc})}, 0, 0, DType::Float32);
    kb.store(out, kb.access(kb.arg(DType::Float32, K, true), 0, {inner}, {1}));
    Tensor cr = c.reshape({1, inner});
    Tensor rounded = cast(cast(add(x.reshape({rows, inner}), cr), DType::Float32), DType::Float64);
    Tensor want = cast(sub(rounded, cr), DType::Float32);
    expect_bit_exact(run_both(kb.k, {x, c, zeros({K}, DType::Float32)}), {want},
                     {"inner extent " + std::to_string(inner)});
  }
}

// softplus(x) - sigmoid(minimum(x, 0.25)) over one value broadcast along the row (fuzz --compile
// seed 20299646): GCC 12 with AVX-512 vectorized the loop with a select whose branches code
// hoisting had merged, and took sigmoid of 0.25's magnitude with x's sign (0.4378 for 0.1802 at
// x = -1.515); generated code is compiled with -fno-code-hoisting since (codegen/compiler.cpp).
// Every row extent up to 19 and values on both sides of the clamp, bit for bit against eager.
TEST(CodegenBackends, SoftplusMinusSigmoidOfAClampKeepsEachLane) {
  std::mt19937_64 rng(12);
  for (int64_t inner = 1; inner <= 19; ++inner) {
    const int64_t rows = 5;
    Tensor x = fuzz::random_tensor({rows}, DType::Float32, fuzz::ElementDraw{-3, 3, 0.2}, rng);
    x.data<float>()[0] = -1.515281081199646f;
    KernelBuilder kb({rows}, {inner});
    int lx = kb.load(kb.access(kb.arg(DType::Float32, rows, false), 0, {1}, {0}));  // broadcast along the row
    int sp = kb.call(ScalarFn::softplus, {lx}, 1.0, 20.0);
    int clamped = kb.call(ScalarFn::minimum, {lx, kb.constant(DType::Float32, 0.25)});
    int out = kb.call(ScalarFn::sub, {sp, kb.call(ScalarFn::sigmoid, {clamped})});
    kb.store(out, kb.access(kb.arg(DType::Float32, rows * inner, true), 0, {inner}, {1}));
    Tensor xb = x.reshape({rows, 1}).expand({rows, inner});
    Tensor want = sub(softplus(xb, 1.0, 20.0), sigmoid(minimum(xb, full({}, 0.25, DType::Float32))));
    expect_bit_exact(run_both(kb.k, {x, zeros({rows * inner}, DType::Float32)}), {want.contiguous().reshape({rows * inner})},
                     {"inner extent " + std::to_string(inner)});
  }
}

// int32 through both backends: 32-bit wrap-around (INT32_MAX + 1, INT32_MIN / -1), saturating
// float -> int32 (NaN -> 0, ±inf and beyond ±2^31 to the extremes), wrapping int64 -> int32 and
// the integer reduction start values (max of no element: INT32_MIN).
TEST(CodegenBackends, Int32WrapCastBitExact) {
  const int64_t K = 1000;
  std::mt19937_64 rng(11);
  Tensor xi = cast(fuzz::random_tensor({K}, DType::Int64, fuzz::ElementDraw{-1000, 1000, 0.3}, rng), DType::Int32);
  Tensor yi = cast(fuzz::random_tensor({K}, DType::Int64, fuzz::ElementDraw{-1000, 1000, 0.3}, rng), DType::Int32);
  for (int64_t i = 0; i < K; ++i) {
    if (yi.data<int32_t>()[i] == 0) yi.data<int32_t>()[i] = -1;  // the eager div refuses 0
  }
  Tensor f = fuzz::random_tensor({K}, DType::Float32, fuzz::ElementDraw{-3e9, 3e9, 0.3}, rng);
  Tensor wide = fuzz::random_tensor({K}, DType::Int64, fuzz::ElementDraw{-1e12, 1e12, 0.3}, rng);
  Tensor big = from_vector(std::vector<double>{2147483647.0}, {1}, DType::Int32);

  KernelBuilder kb({}, {K});
  int lx = kb.load(kb.access(kb.arg(DType::Int32, K, false), 0, {}, {1}));
  int ly = kb.load(kb.access(kb.arg(DType::Int32, K, false), 0, {}, {1}));
  int lf = kb.load(kb.access(kb.arg(DType::Float32, K, false), 0, {}, {1}));
  int lw = kb.load(kb.access(kb.arg(DType::Int64, K, false), 0, {}, {1}));
  int cmax = kb.constant(DType::Int32, 0);
  kb.k.exprs[cmax].ivalue = std::numeric_limits<int32_t>::max();
  int lt = kb.call(ScalarFn::lt, {lx, ly});
  std::vector<std::pair<std::string, std::pair<int, Tensor>>> outs = {
      {"add_max", {kb.call(ScalarFn::add, {lx, cmax}), add(xi, big)}},
      {"sub", {kb.call(ScalarFn::sub, {lx, ly}), sub(xi, yi)}},
      {"mul", {kb.call(ScalarFn::mul, {lx, ly}), mul(xi, yi)}},
      {"div", {kb.call(ScalarFn::div, {lx, ly}), div(xi, yi)}},
      {"neg", {kb.call(ScalarFn::neg, {lx}), neg(xi)}},
      {"abs", {kb.call(ScalarFn::abs, {lx}), smelt::abs(xi)}},
      {"minimum", {kb.call(ScalarFn::minimum, {lx, ly}), minimum(xi, yi)}},
      {"clamp", {kb.call(ScalarFn::clamp, {lx}, -5, INFINITY), clamp(xi, -5, INFINITY)}},
      {"where", {kb.call(ScalarFn::where, {lt, lx, ly}), where(smelt::lt(xi, yi), xi, yi)}},
      {"f_to_i32", {kb.call(ScalarFn::cast, {lf}, 0, 0, DType::Int32), cast(f, DType::Int32)}},
      {"i64_to_i32", {kb.call(ScalarFn::cast, {lw}, 0, 0, DType::Int32), cast(wide, DType::Int32)}},
      {"i32_to_i64", {kb.call(ScalarFn::cast, {lx}, 0, 0, DType::Int64), cast(xi, DType::Int64)}},
      {"i32_to_f", {kb.call(ScalarFn::cast, {lx}, 0, 0, DType::Float32), cast(xi, DType::Float32)}},
      {"i32_to_u8", {kb.call(ScalarFn::cast, {lx}, 0, 0, DType::UInt8), cast(xi, DType::UInt8)}},
  };
  std::vector<Tensor> args = {xi, yi, f, wide}, expected;
  std::vector<std::string> names;
  for (auto& [name, out] : outs) {
    DType dtype = kb.k.exprs[out.first].dtype;
    kb.store(out.first, kb.access(kb.arg(dtype, K, true), 0, {}, {1}));
    args.push_back(zeros({K}, dtype));
    expected.push_back(out.second);
    names.push_back(name);
  }
  expect_bit_exact(run_both(kb.k, args), expected, names);
}

// Equal as values: NaN matches NaN, -0 matches +0 (max/min of ±0 in one row may keep either
// zero in the eager kernel, which folds in lane order).
::testing::AssertionResult same_values(const Tensor& got, const Tensor& want) {
  std::vector<double> g = got.to_vector(), w = want.to_vector();
  if (g.size() != w.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < g.size(); ++i) {
    if (!(g[i] == w[i] || (g[i] != g[i] && w[i] != w[i]))) {
      return ::testing::AssertionFailure() << "element " << i << ": " << g[i] << " vs " << w[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// sum, max and min over the rows of x (R, C) in one kernel of three reductions, plus an int64 sum
// (exact in any order: it wraps). Rows 0..9 hold special values; the rest are finite.
TEST(CodegenBackends, RowReductionsSumMaxMin) {
  const int64_t R = 512, C = 300;
  std::mt19937_64 rng(3);
  Tensor x = fuzz::random_tensor({R, C}, DType::Float32, fuzz::ElementDraw{-5, 5, 0}, rng);
  Tensor specials = fuzz::random_tensor({10, C}, DType::Float32, fuzz::ElementDraw{-5, 5, 0.05}, rng);
  std::memcpy(x.raw_data(), specials.raw_data(), sizeof(float) * 10 * C);
  Tensor xi = fuzz::random_tensor({R, C}, DType::Int64, fuzz::ElementDraw{-1000, 1000, 0.2}, rng);

  KernelBuilder kb({R}, {C});
  int lx = kb.load(kb.access(kb.arg(DType::Float32, R * C, false), 0, {C}, {1}));
  int li = kb.load(kb.access(kb.arg(DType::Int64, R * C, false), 0, {C}, {1}));
  int rs = kb.reduce(ReduceOp::Sum, lx), rmax = kb.reduce(ReduceOp::Max, lx), rmin = kb.reduce(ReduceOp::Min, lx);
  int ri = kb.reduce(ReduceOp::Sum, li);
  for (int r : {rs, rmax, rmin}) kb.store_row(kb.result(r, 1), kb.access(kb.arg(DType::Float32, R, true), 0, {1}, {0}));
  kb.store_row(kb.result(ri, 1), kb.access(kb.arg(DType::Int64, R, true), 0, {1}, {0}));

  RunResult r = run_both(kb.k, {x, xi, zeros({R}), zeros({R}), zeros({R}), zeros({R}, DType::Int64)});
  Tensor want_sum = sum(x, {1});
  for (const auto& got : {r.interpreted, r.compiled}) {
    // sum: reassociated (tolerance relative to the sum of magnitudes); NaN and inf rows exact
    std::vector<double> g = got[0].to_vector(), w = want_sum.to_vector();
    std::vector<double> mag = sum(smelt::abs(x), {1}).to_vector();
    for (int64_t i = 0; i < R; ++i) {
      if (std::isfinite(w[i])) EXPECT_NEAR(g[i], w[i], 1e-6 * mag[i] + 1e-6) << "row " << i;
      else EXPECT_TRUE(g[i] == w[i] || (g[i] != g[i] && w[i] != w[i])) << "row " << i << ": " << g[i] << " vs " << w[i];
    }
    EXPECT_TRUE(same_values(got[1], amax(x, {1})));
    EXPECT_TRUE(same_values(got[2], amin(x, {1})));
    EXPECT_TRUE(bit_equal(got[3], sum(xi, {1})));
  }
  EXPECT_TRUE(bit_equal(r.interpreted[1], r.compiled[1]));  // the same maximum() in any order
  EXPECT_TRUE(bit_equal(r.interpreted[2], r.compiled[2]));
}

// max and min over dims 1 and 3 of x (D, A, B, C): two outer dims and two inner dims that do not
// merge (nested loops with per-level offsets), plus a row epilogue (2 * max - min).
TEST(CodegenBackends, NestedReductionOverNonAdjacentDims) {
  const int64_t D = 3, A = 5, B = 7, C = 33;
  std::mt19937_64 rng(9);
  Tensor x = fuzz::random_tensor({D, A, B, C}, DType::Float64, fuzz::ElementDraw{-9, 9, 0.02}, rng);
  KernelBuilder kb({D, B}, {A, C});
  int lx = kb.load(kb.access(kb.arg(DType::Float64, D * A * B * C, false), 0, {A * B * C, C}, {B * C, 1}));
  int rmax = kb.reduce(ReduceOp::Max, lx), rmin = kb.reduce(ReduceOp::Min, lx);
  int mx = kb.result(rmax, 1), mn = kb.result(rmin, 1);
  int two = kb.constant(DType::Float64, 2.0, 1);
  int epilogue = kb.call(ScalarFn::sub, {kb.call(ScalarFn::mul, {two, mx}), mn});
  kb.store_row(mx, kb.access(kb.arg(DType::Float64, D * B, true), 0, {B, 1}, {0, 0}));
  kb.store_row(epilogue, kb.access(kb.arg(DType::Float64, D * B, true), 0, {B, 1}, {0, 0}));
  RunResult r = run_both(kb.k, {x, zeros({D, B}, DType::Float64), zeros({D, B}, DType::Float64)});
  Tensor want_max = amax(x, {1, 3}), want_min = amin(x, {1, 3});
  Tensor want_epilogue = sub(mul(scalar_tensor(2.0, DType::Float64), want_max), want_min);
  for (const auto& got : {r.interpreted, r.compiled}) {
    EXPECT_TRUE(same_values(got[0], want_max));
    EXPECT_TRUE(same_values(got[1], want_epilogue));
  }
  EXPECT_TRUE(bit_equal(r.interpreted[0], r.compiled[0]));
  EXPECT_TRUE(bit_equal(r.interpreted[1], r.compiled[1]));
}

// In place: x = relu(x) * 2 reads and writes one buffer through one access (as a memory plan
// reusing a dying input would).
TEST(CodegenBackends, InPlaceElementwise) {
  const int64_t R = 50, C = 999;
  std::mt19937_64 rng(13);
  Tensor x = fuzz::random_tensor({R, C}, DType::Float32, fuzz::ElementDraw{-3, 3, 0.2}, rng);
  KernelBuilder kb({R}, {C});
  int a = kb.access(kb.arg(DType::Float32, R * C, true), 0, {C}, {1});
  int y = kb.call(ScalarFn::mul, {kb.call(ScalarFn::relu, {kb.load(a)}), kb.constant(DType::Float32, 2.0)});
  kb.store(y, a);
  RunResult r = run_both(kb.k, {x});
  Tensor want = mul(relu(x), scalar_tensor(2.0));
  EXPECT_TRUE(bit_equal(r.interpreted[0], want));
  EXPECT_TRUE(bit_equal(r.compiled[0], want));
}

// A kernel without dims: one element (int64 wrap-around at the edge).
TEST(CodegenBackends, DimensionlessKernel) {
  KernelBuilder kb({}, {});
  int a = kb.load(kb.access(kb.arg(DType::Int64, 1, false), 0, {}, {}));
  int one = kb.constant(DType::Int64, 1);
  kb.store(kb.call(ScalarFn::add, {a, one}), kb.access(kb.arg(DType::Int64, 1, true), 0, {}, {}));
  Tensor x = from_vector(std::vector<int64_t>{std::numeric_limits<int64_t>::max()}, {1});
  RunResult r = run_both(kb.k, {x, zeros({1}, DType::Int64)});
  Tensor want = from_vector(std::vector<int64_t>{std::numeric_limits<int64_t>::min()}, {1});
  EXPECT_TRUE(bit_equal(r.interpreted[0], want));
  EXPECT_TRUE(bit_equal(r.compiled[0], want));
}

// An empty reduced dim: the row stage still runs and stores the reductions' starting values.
TEST(CodegenBackends, InterpreterEmptyRowsGiveStartValues) {
  KernelBuilder kb({4}, {0});
  int lx = kb.load(kb.access(kb.arg(DType::Float32, 0, false), 0, {0}, {1}));
  int rs = kb.reduce(ReduceOp::Sum, lx), rm = kb.reduce(ReduceOp::Max, lx);
  kb.store_row(kb.result(rs, 1), kb.access(kb.arg(DType::Float32, 4, true), 0, {1}, {0}));
  kb.store_row(kb.result(rm, 1), kb.access(kb.arg(DType::Float32, 4, true), 0, {1}, {0}));
  validate(kb.k);
  Tensor x = zeros({1}), s = full({4}, 7.0), m = full({4}, 7.0);
  void* args[] = {x.raw_data(), s.raw_data(), m.raw_data()};
  run_interpreted(kb.k, args);
  EXPECT_TRUE(bit_equal(s, sum(zeros({4, 0}), {1})));
  EXPECT_EQ(m.to_vector(), std::vector<double>(4, -INFINITY));
}

// softmax over rows as three stages: max; sum of exp(x - max); exp(x - max) / sum.
TEST(CodegenBackends, ThreeStageSoftmaxMatchesEager) {
  const int64_t R = 256, C = 1000;
  Tensor x = mul(randn({R, C}), scalar_tensor(4.0));
  x.slice(0, 0, 1).copy_(add(x.slice(0, 0, 1), scalar_tensor(90.0)));  // exp would overflow unshifted

  KernelBuilder kb({R}, {C}, 3);
  int ax = kb.access(kb.arg(DType::Float32, R * C, false), 0, {C}, {1});
  int out = kb.arg(DType::Float32, R * C, true);
  int rmax = kb.reduce(ReduceOp::Max, kb.load(ax, 0));
  auto shifted_exp = [&](int stage) {
    return kb.call(ScalarFn::exp, {kb.call(ScalarFn::sub, {kb.load(ax, stage), kb.result(rmax, stage)})});
  };
  int rsum = kb.reduce(ReduceOp::Sum, shifted_exp(1));
  int y = kb.call(ScalarFn::div, {shifted_exp(2), kb.result(rsum, 2)});
  kb.store(y, kb.access(out, 0, {C}, {1}));
  kb.k.name = "softmax";
  RunResult r = run_both(kb.k, {x, zeros({R, C})});
  Tensor want = softmax(x, 1);
  EXPECT_TRUE(smelt::testing::all_close(r.interpreted[0].reshape({R, C}), want, 1e-5, 1e-7));
  EXPECT_TRUE(smelt::testing::all_close(r.compiled[0].reshape({R, C}), want, 1e-5, 1e-7));
}

}  // namespace
}  // namespace smelt::codegen::testing
