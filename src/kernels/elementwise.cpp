#include "kernels/elementwise.h"

#include <cinttypes>
#include <cstdio>

#include "kernels/loops.h"

namespace smelt::kernels {
namespace {

// scalar_dtypes_visit, where a dtype the row does not accept is smelt's bug: the shape rules
// refuse it first.
template <ScalarDTypes kAccepts, class F>
void dispatch_dtype(DType dtype, F&& f) {
  SMELT_INTERNAL_CHECK(scalar_dtypes_visit<kAccepts>(dtype, f))
      << "elementwise: dtype " << dtype_name(dtype) << " reached a row that does not accept it";
}

const char* accepted_names(ScalarDTypes d) {
  switch (d) {
    case ScalarDTypes::Floating: return "float32, float64";
    case ScalarDTypes::Numeric: return "float32, float64, int64, int32";
    case ScalarDTypes::All: return "any dtype";
  }
  return "";
}

template <ScalarFn kFn, class F>
void run_row(F f, const ScalarCall& call, const Tensor& out, const std::vector<Tensor>& in) {
  constexpr ScalarFnInfo kInfo = kScalarFnInfo[int(kFn)];
  if constexpr (kFn == ScalarFn::cast) {
    dispatch_dtype<ScalarDTypes::All>(out.dtype(), [&](auto to_tag) {
      using To = decltype(to_tag);
      dispatch_dtype<ScalarDTypes::All>(in[0].dtype(), [&](auto from_tag) {
        using From = decltype(from_tag);
        map1<To, From>(out, in[0], [](From x) { return scalar::cast<To>(x); });
      });
    });
  } else {
    const DType value_dtype = in[kInfo.arity == 3 ? 1 : 0].dtype();
    dispatch_dtype<kInfo.dtypes>(value_dtype, [&](auto tag) {
      using T = decltype(tag);
      using R = std::conditional_t<kInfo.result == ScalarResult::Bool, bool, T>;
      // Parameters convert like a cast, so an infinite bound saturates for int64.
      const T p0 = scalar::cast<T>(call.params[0]), p1 = scalar::cast<T>(call.params[1]);
      if constexpr (kInfo.arity == 1 && kInfo.params == 0) {
        map1<R, T>(out, in[0], [f](T x) { return f(x); });
      } else if constexpr (kInfo.arity == 1 && kInfo.params == 1) {
        map1<R, T>(out, in[0], [f, p0](T x) { return f(x, p0); });
      } else if constexpr (kInfo.arity == 1 && kInfo.params == 2) {
        map1<R, T>(out, in[0], [f, p0, p1](T x) { return f(x, p0, p1); });
      } else if constexpr (kInfo.arity == 2) {
        static_assert(kInfo.params == 0);
        map2<R, T, T>(out, in[0], in[1], [f](T a, T b) { return f(a, b); });
      } else {
        static_assert(kInfo.arity == 3 && kInfo.params == 0);
        map3<R, bool, T, T>(out, in[0], in[1], in[2], [f](bool c, T a, T b) { return f(c, a, b); });
      }
      (void)p0;
      (void)p1;
    });
  }
}

// A double as exact C++ source.
std::string double_text(double v) {
  if (v != v) return "NAN";
  if (v == INFINITY) return "INFINITY";
  if (v == -INFINITY) return "-INFINITY";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

}  // namespace

bool scalar_fn_accepts(ScalarFn fn, DType dtype) {
  switch (scalar_fn_info(fn).dtypes) {
    case ScalarDTypes::Floating: return dtype_is_floating(dtype);
    case ScalarDTypes::Numeric: return dtype_is_floating(dtype) || dtype_is_signed_integer(dtype);
    case ScalarDTypes::All: return true;
  }
  return false;
}

DType scalar_call_result(const ScalarCall& call, DType dtype) {
  switch (scalar_fn_info(call.fn).result) {
    case ScalarResult::SameAsOperand: return dtype;
    case ScalarResult::Bool: return DType::Bool;
    case ScalarResult::CastTarget: return call.cast_to;
  }
  return dtype;
}

const char* dtype_cpp_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float";
    case DType::Float64: return "double";
    case DType::Int64: return "int64_t";
    case DType::Int32: return "int32_t";
    case DType::Bool: return "bool";
    case DType::UInt8: return "uint8_t";
    case DType::Int8: return "int8_t";
  }
  return "?";
}

std::string scalar_call_text(const ScalarCall& call, DType dtype, const std::vector<std::string>& args,
                             const std::vector<std::string>& params) {
  const ScalarFnInfo& info = scalar_fn_info(call.fn);
  SMELT_INTERNAL_CHECK(int(args.size()) == info.arity)
      << "scalar_call_text: " << info.name << " takes " << info.arity << " operands, got " << args.size();
  std::string s = std::string("smelt::scalar::") + info.name;
  if (call.fn == ScalarFn::cast) s += std::string("<") + dtype_cpp_type(call.cast_to) + ">";
  s += "(";
  for (size_t i = 0; i < args.size(); ++i) s += (i ? ", " : "") + args[i];
  for (int p = 0; p < info.params; ++p) {
    const bool given = size_t(p) < params.size() && !params[p].empty();
    s += std::string(", smelt::scalar::cast<") + dtype_cpp_type(dtype) + ">(" +
         (given ? params[p] : double_text(call.params[p])) + ")";
  }
  return s + ")";
}

void elementwise_forward(const ScalarCall& call, const Tensor& out, const std::vector<Tensor>& in) {
  const ScalarFnInfo& info = scalar_fn_info(call.fn);
  SMELT_INTERNAL_CHECK(int(in.size()) == info.arity)
      << info.name << ": " << in.size() << " operands, the function takes " << info.arity;
  const DType value_dtype = in[info.arity == 3 ? 1 : 0].dtype();
  SMELT_CHECK(scalar_fn_accepts(call.fn, value_dtype))
      << info.name << ": dtype " << dtype_name(value_dtype) << " is not supported; valid: "
      << accepted_names(info.dtypes);
  scalar_fn_visit(call.fn, [&](auto f, auto id) { run_row<decltype(id)::value>(f, call, out, in); });
}

}  // namespace smelt::kernels
