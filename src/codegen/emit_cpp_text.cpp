#include "codegen/emit_cpp_text.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "kernels/scalar_table.h"
#include "smelt/error.h"

namespace smelt::codegen::emit {

using kernels::dtype_cpp_type;

// Drops size-1 dims and merges neighbours that every access walks as one (stride[d] ==
// stride[d + 1] * extent[d + 1], as polynomials in B), so that the innermost loop is as long as
// the layout allows.
Dims merge_dims(const Dims& in) {
  Dims out;
  out.stride.resize(in.stride.size());
  for (size_t d = 0; d < in.extent.size(); ++d) {
    if (in.extent[d] == Num(1)) continue;
    bool merge = !out.extent.empty();
    for (size_t a = 0; merge && a < in.stride.size(); ++a) {
      merge = out.stride[a].back() == in.stride[a][d] * in.extent[d];
    }
    if (merge) {
      out.extent.back() = out.extent.back() * in.extent[d];
      for (size_t a = 0; a < in.stride.size(); ++a) out.stride[a].back() = in.stride[a][d];
    } else {
      out.extent.push_back(in.extent[d]);
      for (size_t a = 0; a < in.stride.size(); ++a) out.stride[a].push_back(in.stride[a][d]);
    }
  }
  return out;
}

Num product(const std::vector<Num>& v) {
  Num n = 1;
  for (const Num& e : v) n = n * e;
  return n;
}

std::string cat(const std::string& a, int64_t b) { return a + std::to_string(b); }

// `base + index * stride` as short as the constants allow.
std::string add_scaled(const std::string& base, const std::string& index, const Num& stride) {
  if (!stride.constant()) return base + " + " + index + " * " + stride.text();
  if (stride.value() == 0) return base;
  if (stride.value() == 1) return base + " + " + index;
  return base + " + " + index + " * " + std::to_string(stride.value());
}

std::string Spelling::fn(const char* name, DType dtype) const {
  if (dialect == Dialect::Cpp) return std::string("smelt::scalar::") + name;
  return std::string("smelt_") + name + "_" + dtype_name(dtype);
}

std::string Spelling::call(const kernels::ScalarCall& call, DType dtype, const std::vector<std::string>& args,
                           const std::vector<std::string>& params) const {
  if (dialect == Dialect::Cpp) return kernels::scalar_call_text(call, dtype, args, params);
  const kernels::ScalarFnInfo& info = kernels::scalar_fn_info(call.fn);
  SMELT_INTERNAL_CHECK(int(args.size()) == info.arity) << "emit_c: " << info.name << " takes " << info.arity
                                                       << " operands, got " << args.size();
  if (call.fn == kernels::ScalarFn::cast) return cast(call.cast_to, dtype, args[0]);
  std::string s = fn(info.name, dtype) + "(";
  for (size_t i = 0; i < args.size(); ++i) s += (i ? ", " : "") + args[i];
  for (int p = 0; p < info.params; ++p) {
    SMELT_INTERNAL_CHECK(size_t(p) >= params.size() || params[p].empty())
        << "emit_c: a parameter that follows the sizes (a dynamic-shape kernel)";
    char c[40];
    std::snprintf(c, sizeof c, "%a", call.params[p]);
    const double v = call.params[p];
    const std::string literal = v != v ? "NAN" : v == INFINITY ? "INFINITY" : v == -INFINITY ? "-INFINITY" : c;
    s += ", " + cast(dtype, DType::Float64, literal);
  }
  return s + ")";
}

std::string Spelling::cast(DType to, DType from, const std::string& x) const {
  if (dialect == Dialect::Cpp) return std::string("smelt::scalar::cast<") + dtype_cpp_type(to) + ">(" + x + ")";
  return std::string("smelt_cast_") + dtype_name(to) + "_" + dtype_name(from) + "(" + x + ")";
}

std::string Spelling::ref(const std::string& x) const { return dialect == Dialect::Cpp ? x : "&" + x; }

std::string Spelling::unused() const { return dialect == Dialect::Cpp ? "[[maybe_unused]] " : "SMELT_UNUSED "; }

std::string Spelling::entry(const std::string& symbol) const {
  // C: file-local, SMELT_KERNEL (export_c/runtime/scalar.h: may go unused, as a kernel's tile
  // entry does where the export runs an epilogue whole; its scalar functions inlined)
  return (dialect == Dialect::Cpp ? "extern \"C\" void " : "SMELT_KERNEL static void ") + symbol;
}

std::string Spelling::omp(const std::string& directive) const {
  if (dialect == Dialect::Cpp) return "#pragma omp " + directive;
  const std::string parallel = "parallel for ";
  if (directive.rfind(parallel, 0) == 0) return "SMELT_OMP_FOR(" + directive.substr(parallel.size()) + ")";
  return "SMELT_OMP(" + directive + ")";
}

std::string constant_text(const Spelling& sp, const Expr& e) {
  const std::string type = dtype_cpp_type(e.dtype);
  char buf[96];
  if (!dtype_is_floating(e.dtype)) {
    std::snprintf(buf, sizeof buf, "(int64_t)(uint64_t)0x%" PRIx64 "ull", uint64_t(e.ivalue));
    return sp.cast(e.dtype, DType::Int64, buf);
  }
  double v = e.fvalue;
  if (v != v) {  // the exact NaN, payload and sign included, as the interpreter converts it
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    std::snprintf(buf, sizeof buf, "(%s)(smelt_f64_from_bits(0x%" PRIx64 "ull))", type.c_str(), bits);
  } else if (v == INFINITY || v == -INFINITY) {
    std::snprintf(buf, sizeof buf, "(%s)(%sINFINITY)", type.c_str(), v < 0 ? "-" : "");
  } else {
    std::snprintf(buf, sizeof buf, "(%s)(%a)", type.c_str(), v);
  }
  return buf;
}

std::string size_constant_text(DType dtype, const SizeFloat& value) {
  const std::string n = "double(" + value.n.text() + ")";
  char c[40];
  std::snprintf(c, sizeof c, "%a", value.scale);  // exact (size_float_fit's c is finite)
  const std::string x = std::string(c) + (value.form == SizeFloatForm::Count ? " * " : " / ") + n;
  return dtype_cpp_type(dtype) + std::string("(") + x + ")";
}

std::string reduce_start(const Spelling& sp, ReduceOp op, DType dtype) {
  const std::string t = dtype_cpp_type(dtype);
  const bool cpp = sp.dialect == Dialect::Cpp;
  switch (op) {
    case ReduceOp::Sum: return "(" + t + ")(0)";
    case ReduceOp::Max: return cpp ? "smelt::scalar::extreme_identity<" + t + ", true>()" : sp.fn("lowest", dtype) + "()";
    case ReduceOp::Min: return cpp ? "smelt::scalar::extreme_identity<" + t + ", false>()" : sp.fn("highest", dtype) + "()";
    case ReduceOp::SumExp: return "0.0";
  }
  return "";
}


std::string udr_name(const Reduction& r) {
  return std::string("smelt_") + reduce_op_name(r.op) + "_" + dtype_name(r.dtype);
}

// The block maximum of a SumExp over values of `dtype` (scalar::sumexp_block_max).
std::string block_max_udr(DType dtype) { return std::string("smelt_blockmax_") + dtype_name(dtype); }

}  // namespace smelt::codegen::emit
