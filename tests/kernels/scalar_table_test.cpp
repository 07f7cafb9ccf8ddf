// The elementwise table (kernels/scalar_table.h + ops/elementwise_bind.h): every Elementwise op
// of the op table binds to a row; the generic eager kernel computes, for every row and accepted
// dtype, exactly the row's scalar function on random strided and broadcast inputs (empty dims and
// special values included); the emitter's call text names the same function with exact params.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/loop_core.h"
#include "ops/elementwise_bind.h"
#include "ops/op_table.h"
#include "ops/reference.h"

namespace smelt {
namespace {

using kernels::ScalarCall;
using kernels::ScalarFn;

// Attributes that bind every op's required parameters.
ops::Attrs attrs_for(ops::OpId op) {
  ops::Attrs a;
  switch (op) {
    case ops::OpId::leaky_relu: a.set("negative_slope", 0.25); break;
    case ops::OpId::gelu: a.set("approximate", int64_t(1)); break;
    case ops::OpId::softplus: a.set("beta", 2.0); a.set("threshold", 15.0); break;
    case ops::OpId::clamp: a.set("min", -0.5); a.set("max", 0.75); break;
    case ops::OpId::cast: a.set("dtype", DType::Int64); break;
    default: break;
  }
  return a;
}

TEST(ScalarTable, EveryElementwiseOpBindsToARowAndEveryRowIsUsed) {
  std::set<int> used;
  for (int i = 0; i < ops::kOpCount; ++i) {
    const ops::OpId op = ops::OpId(i);
    const bool elementwise = ops::op_info(op).kind == ops::OpKind::Elementwise;
    auto call = ops::elementwise_scalar_call(op, attrs_for(op), DType::Float32);
    EXPECT_EQ(bool(call), elementwise) << ops::op_name(op);
    if (!call) continue;
    used.insert(int(call->fn));
    EXPECT_EQ(kernels::scalar_fn_info(call->fn).arity, ops::op_info(op).arity) << ops::op_name(op);
  }
  // gelu's other form
  ops::Attrs erf_form;
  erf_form.set("approximate", int64_t(0));
  used.insert(int(ops::elementwise_scalar_call(ops::OpId::gelu, erf_form, DType::Float32)->fn));
  EXPECT_EQ(int(used.size()), kernels::kScalarFnCount);
}

TEST(ScalarTable, CallTextNamesTheScalarFunctionWithExactParameters) {
  auto text = [](ops::OpId op, const ops::Attrs& a, DType dtype, std::vector<std::string> args) {
    return kernels::scalar_call_text(*ops::elementwise_scalar_call(op, a, dtype), dtype, args);
  };
  ops::Attrs slope;
  slope.set("negative_slope", 0.01);
  EXPECT_EQ(text(ops::OpId::leaky_relu, slope, DType::Float32, {"x"}),
            "smelt::scalar::leaky_relu(x, smelt::scalar::cast<float>(0x1.47ae147ae147bp-7))");
  ops::Attrs lower;
  lower.set("min", 0.0);
  EXPECT_EQ(text(ops::OpId::clamp, lower, DType::Float64, {"v"}),
            "smelt::scalar::clamp(v, smelt::scalar::cast<double>(0x0p+0), "
            "smelt::scalar::cast<double>(INFINITY))");
  ops::Attrs to_u8;
  to_u8.set("dtype", DType::UInt8);
  EXPECT_EQ(text(ops::OpId::cast, to_u8, DType::Float32, {"x"}), "smelt::scalar::cast<uint8_t>(x)");
  EXPECT_EQ(text(ops::OpId::where, {}, DType::Int64, {"c", "a", "b"}), "smelt::scalar::where(c, a, b)");
  ops::Attrs tanh_form;
  tanh_form.set("approximate", int64_t(1));
  EXPECT_EQ(text(ops::OpId::gelu, tanh_form, DType::Float32, {"x"}), "smelt::scalar::gelu_tanh(x)");
}

// ---- the generic kernel against the row's scalar function, element by element

const std::vector<double> kSpecial = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e30, -1e30, 1e-310};

// Random values of `dtype` (as doubles) for `n` elements.
std::vector<double> random_values(int64_t n, DType dtype, std::mt19937_64& rng) {
  std::vector<double> v(static_cast<size_t>(n));
  std::uniform_real_distribution<double> u(-3, 3);
  for (double& e : v) {
    switch (dtype) {
      case DType::Bool: e = double(rng() % 2); break;
      case DType::UInt8: e = double(rng() % 256); break;
      case DType::Int8: e = double(int64_t(rng() % 256) - 128); break;
      case DType::Int64: e = double(int64_t(rng() % 21) - 10); break;
      case DType::Int32: e = double(int64_t(rng() % 21) - 10); break;
      default: e = rng() % 6 == 0 ? kSpecial[rng() % kSpecial.size()] : u(rng);
    }
  }
  return v;
}

// A tensor of `shape` and `dtype`, through a random layout: contiguous, sliced with a step, or
// broadcast from a size-1 dim.
Tensor random_operand(const Shape& shape, DType dtype, std::mt19937_64& rng) {
  auto make = [&](const Shape& s) {
    std::vector<double> v = random_values(shape_numel(s), dtype, rng);
    Tensor t = empty(s, dtype);
    for (size_t i = 0; i < v.size(); ++i) {
      switch (dtype) {
        case DType::Float32: t.data<float>()[i] = float(v[i]); break;
        case DType::Float64: t.data<double>()[i] = v[i]; break;
        case DType::Int64: t.data<int64_t>()[i] = int64_t(v[i]); break;
        case DType::Int32: t.data<int32_t>()[i] = int32_t(v[i]); break;
        case DType::Bool: t.data<bool>()[i] = v[i] != 0; break;
        case DType::UInt8: t.data<uint8_t>()[i] = uint8_t(v[i]); break;
        case DType::Int8: t.data<int8_t>()[i] = int8_t(v[i]); break;
      }
    }
    return t;
  };
  if (shape.empty()) return make(shape);
  const size_t d = size_t(rng() % shape.size());
  switch (rng() % 3) {
    case 0: return make(shape);
    case 1: {
      Shape longer = shape;
      longer[d] *= 2;
      return make(longer).slice(int64_t(d), 0, longer[d], 2);
    }
    default: {
      Shape one = shape;
      one[d] = 1;
      return make(one).expand(shape);
    }
  }
}

template <class T>
DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::Float32;
  else if constexpr (std::is_same_v<T, double>) return DType::Float64;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::Int64;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::Int32;
  else if constexpr (std::is_same_v<T, bool>) return DType::Bool;
  else if constexpr (std::is_same_v<T, int8_t>) return DType::Int8;
  else return DType::UInt8;
}

// Whether a row accepts operands of C++ type T (decided at compile time, so the reference below
// instantiates scalar functions only for the types they are defined for).
template <class T>
constexpr bool row_accepts(kernels::ScalarDTypes d) {
  if constexpr (std::is_floating_point_v<T>) return true;
  else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, int32_t>) {
    return d != kernels::ScalarDTypes::Floating;
  }
  else return d == kernels::ScalarDTypes::All;
}

// Element i of t (row-major), as T.
template <class T>
T element(const Tensor& t, int64_t i) {
  Tensor c = t.contiguous();
  return c.data<T>()[i];
}

bool same_bits(double got, double want) {
  if (std::isnan(want)) return std::isnan(got);
  return got == want && std::signbit(got) == std::signbit(want);
}

template <class T>
void check_row(ScalarFn fn, const ScalarCall& call, std::mt19937_64& rng, int* checked) {
  const auto& info = kernels::scalar_fn_info(fn);
  const DType dtype = dtype_of<T>();
  for (int iter = 0; iter < 6; ++iter) {
    Shape shape;
    const int rank = int(rng() % 4);
    for (int d = 0; d < rank; ++d) shape.push_back(int64_t(rng() % 4) + (iter == 5 && d == 0 ? 0 : 1));
    std::vector<Tensor> in;
    for (int k = 0; k < info.arity; ++k) {
      in.push_back(random_operand(shape, info.arity == 3 && k == 0 ? DType::Bool : dtype, rng));
    }
    Tensor out = empty(shape, kernels::scalar_call_result(call, dtype));
    kernels::elementwise_forward(call, out, in);
    std::vector<double> got = out.to_vector();
    for (int64_t i = 0; i < shape_numel(shape); ++i) {
      // 1. the same call on this element alone (contiguous, one element: the loop's scalar tail),
      // bit for bit: a value's result does not depend on its position, layout or neighbours
      std::vector<Tensor> alone;
      for (int k = 0; k < info.arity; ++k) {
        const DType dk = in[size_t(k)].dtype();
        Tensor one = empty({1}, dk);
        std::memcpy(one.raw_data(), static_cast<const char*>(in[size_t(k)].contiguous().raw_data()) +
                                        i * int64_t(dtype_size(dk)), dtype_size(dk));
        alone.push_back(one);
      }
      Tensor out_alone = empty({1}, out.dtype());
      kernels::elementwise_forward(call, out_alone, alone);
      ASSERT_TRUE(same_bits(got[size_t(i)], out_alone.to_vector()[0]))
          << info.name << " " << dtype_name(dtype) << " shape " << shape_str(shape) << " element " << i;
      // 2. the row's function called here. This file is compiled without -march=native, so where
      // the compiler may contract a * b + c into an FMA in the library (the floating rows that
      // do more than one operation), the bits may differ; those are compared in step 1 only.
      const bool single_operation = !std::is_floating_point_v<T> || !(kernels::scalar_fn_info(fn).dtypes ==
                                    kernels::ScalarDTypes::Floating);
      if (!single_operation) {
        ++*checked;
        continue;
      }
      double want = kernels::scalar_fn_visit(fn, [&](auto f, auto id) -> double {
        constexpr ScalarFn kFn = decltype(id)::value;
        constexpr auto kInfo = kernels::kScalarFnInfo[int(kFn)];
        if constexpr (!row_accepts<T>(kInfo.dtypes)) {
          return NAN;  // never reached: check_row runs only for accepted dtypes
        } else if constexpr (kFn == ScalarFn::cast) {
          return double(scalar::cast<int64_t>(element<T>(in[0], i)));
        } else if constexpr (kInfo.arity == 1 && kInfo.params == 0) {
          return double(f(element<T>(in[0], i)));
        } else if constexpr (kInfo.arity == 1 && kInfo.params == 1) {
          return double(f(element<T>(in[0], i), scalar::cast<T>(call.params[0])));
        } else if constexpr (kInfo.arity == 1 && kInfo.params == 2) {
          return double(f(element<T>(in[0], i), scalar::cast<T>(call.params[0]),
                          scalar::cast<T>(call.params[1])));
        } else if constexpr (kInfo.arity == 2) {
          return double(f(element<T>(in[0], i), element<T>(in[1], i)));
        } else {
          return double(f(element<bool>(in[0], i), element<T>(in[1], i), element<T>(in[2], i)));
        }
      });
      ASSERT_TRUE(same_bits(got[size_t(i)], want))
          << info.name << " " << dtype_name(dtype) << " shape " << shape_str(shape) << " element " << i
          << ": got " << got[size_t(i)] << ", want " << want;
      ++*checked;
    }
  }
}

TEST(ScalarTable, GenericKernelComputesEachRowsFunctionOnStridedAndBroadcastInputs) {
  std::mt19937_64 rng(42);
  int checked = 0;
  for (int r = 0; r < kernels::kScalarFnCount; ++r) {
    const ScalarFn fn = ScalarFn(r);
    if (fn == ScalarFn::div) continue;  // integer division by zero: the op refuses it; floats below
    ScalarCall call{fn, {-0.5, 0.75}, DType::Int64};
    if (fn == ScalarFn::softplus) call.params[0] = 2.0, call.params[1] = 15.0;
    if (kernels::scalar_fn_accepts(fn, DType::Float32)) check_row<float>(fn, call, rng, &checked);
    if (kernels::scalar_fn_accepts(fn, DType::Float64)) check_row<double>(fn, call, rng, &checked);
    if (fn == ScalarFn::clamp) call.params[0] = -2, call.params[1] = 3;
    if (kernels::scalar_fn_accepts(fn, DType::Int64)) check_row<int64_t>(fn, call, rng, &checked);
    if (kernels::scalar_fn_accepts(fn, DType::Int32)) check_row<int32_t>(fn, call, rng, &checked);
    if (kernels::scalar_fn_accepts(fn, DType::Bool)) check_row<bool>(fn, call, rng, &checked);
    if (kernels::scalar_fn_accepts(fn, DType::UInt8)) check_row<uint8_t>(fn, call, rng, &checked);
    if (kernels::scalar_fn_accepts(fn, DType::Int8)) check_row<int8_t>(fn, call, rng, &checked);
  }
  check_row<float>(ScalarFn::div, {ScalarFn::div}, rng, &checked);
  check_row<double>(ScalarFn::div, {ScalarFn::div}, rng, &checked);
  EXPECT_GT(checked, 1000);
}

TEST(ScalarTable, DTypesOutsideARowAreUserErrors) {
  Tensor i = from_vector(std::vector<int64_t>{1, 2}, {2});
  Tensor out = empty({2}, DType::Int64);
  try {
    kernels::elementwise_forward({ScalarFn::exp}, out, {i});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exp: dtype int64 is not supported"), std::string::npos) << e.what();
  }
}

TEST(LoopCore, RawPointerLoopBroadcastsWithoutTensors) {
  // out (2, 3) = a (2, 3) strided by 2 in its last dim + b (3,) broadcast over rows
  float a_storage[12], b[3] = {10, 20, 30}, out[6];
  for (int i = 0; i < 12; ++i) a_storage[i] = float(i);
  const int64_t shape[2] = {2, 3};
  const int64_t strides[3][kernels::kMaxDims] = {{12, 4}, {24, 8}, {0, 4}};  // bytes
  char* bases[3] = {reinterpret_cast<char*>(out), reinterpret_cast<char*>(a_storage),
                    reinterpret_cast<char*>(b)};
  kernels::StridedLoop<3> loop(2, shape, strides, bases);
  auto add = [](float x, float y) { return scalar::add(x, y); };
  loop.run_range(kernels::Map2Inner<float, float, float, decltype(add)>{add}, 0, loop.numel());
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 3; ++c) EXPECT_EQ(out[r * 3 + c], a_storage[r * 6 + c * 2] + b[c]);
  }
  // a range that starts and ends mid-row touches exactly its elements
  float marked[6] = {-1, -1, -1, -1, -1, -1};
  bases[0] = reinterpret_cast<char*>(marked);
  kernels::StridedLoop<3>(2, shape, strides, bases)
      .run_range(kernels::Map2Inner<float, float, float, decltype(add)>{add}, 2, 5);
  EXPECT_EQ(marked[0], -1);
  EXPECT_EQ(marked[1], -1);
  EXPECT_EQ(marked[2], out[2]);
  EXPECT_EQ(marked[4], out[4]);
  EXPECT_EQ(marked[5], -1);
}

}  // namespace
}  // namespace smelt
