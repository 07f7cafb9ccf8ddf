#include "codegen/loop_kernel.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <functional>
#include <sstream>

#include "codegen/loop_kernel_gather.h"
#include "smelt/error.h"

namespace smelt::codegen {
namespace {


// The dtype whose values a call's result follows: where's value operands, else its first.
int value_operand(const kernels::ScalarFnInfo& info) { return info.arity == 3 ? 1 : 0; }

// [lowest, highest] element offset of `a` over the iteration space; an empty inner space counts as
// its first index, which the row stage still addresses (callers skip an empty outer space).
void offset_range(const LoopKernel& k, const Access& a, int64_t* lo, int64_t* hi) {
  *lo = *hi = a.offset;
  auto extend = [&](int64_t extent, int64_t stride) {
    int64_t reach = (extent > 0 ? extent - 1 : 0) * stride;
    (reach < 0 ? *lo : *hi) += reach;
  };
  for (size_t d = 0; d < k.outer.size(); ++d) extend(k.outer[d], a.outer_strides[d]);
  for (size_t d = 0; d < k.inner.size(); ++d) extend(k.inner[d], a.inner_strides[d]);
}

void validate_access(const LoopKernel& k, int index, bool empty_outer, bool empty_inner) {
  const Access& a = k.accesses[index];
  const std::string where = "kernel '" + k.name + "' access " + std::to_string(index);
  SMELT_CHECK(a.arg >= 0 && a.arg < int(k.args.size()))
      << where << ": argument " << a.arg << " out of range; valid: [0, " << k.args.size() << ")";
  SMELT_CHECK(a.outer_strides.size() == k.outer.size() && a.inner_strides.size() == k.inner.size())
      << where << ": " << a.outer_strides.size() << " outer and " << a.inner_strides.size()
      << " inner strides for a kernel of " << k.outer.size() << " outer and " << k.inner.size()
      << " inner dims; valid: one stride per dim";
  if (empty_outer) return;
  if (empty_inner) {  // only row stores run
    bool row_store = false;
    for (const Store& s : k.stores) row_store |= s.access == index && s.stage == k.stages;
    if (!row_store) return;
  }
  int64_t lo, hi;
  offset_range(k, a, &lo, &hi);
  if (a.index >= 0 && a.index_extent > 0) {  // a gather reaches every index in range
    const int64_t reach = (a.index_extent - 1) * a.index_stride;
    (reach < 0 ? lo : hi) += reach;
  }
  SMELT_CHECK(lo >= 0 && hi < k.args[a.arg].numel)
      << where << ": touches elements [" << lo << ", " << hi << "] of argument " << a.arg
      << ", which has " << k.args[a.arg].numel << "; valid: offsets within [0, numel)";
}

void validate_expr(const LoopKernel& k, int index) {
  const Expr& e = k.exprs[index];
  const std::string where = "kernel '" + k.name + "' expression " + std::to_string(index);
  SMELT_CHECK(e.stage >= 0 && e.stage <= k.stages)
      << where << ": stage " << e.stage << " out of range; valid: [0, " << k.stages << "]";
  const bool row = e.stage == k.stages;
  switch (e.kind) {
    case ExprKind::Load: {
      SMELT_CHECK(e.access >= 0 && e.access < int(k.accesses.size()))
          << where << ": access " << e.access << " out of range; valid: [0, " << k.accesses.size() << ")";
      if (row) {  // a row expression reads one element per row (a bias of the reduced shape)
        for (int64_t s : k.accesses[e.access].inner_strides) {
          SMELT_CHECK(s == 0) << where << ": a load in the row expressions walks the inner dims; valid: "
                              << "row loads have inner strides 0 (one element per row)";
        }
      }
      DType arg_dtype = k.args[k.accesses[e.access].arg].dtype;
      SMELT_CHECK(arg_dtype == e.dtype) << where << ": loads " << dtype_name(e.dtype)
                                        << " from an argument of dtype " << dtype_name(arg_dtype);
      break;
    }
    case ExprKind::Constant:
      if (e.dtype == DType::Float32) {
        SMELT_CHECK(e.fvalue != e.fvalue || double(float(e.fvalue)) == e.fvalue)
            << where << ": float32 constant " << e.fvalue << " is not exactly a float; valid: "
            << "a value float32 represents";
      }
      break;
    case ExprKind::Call: {
      const kernels::ScalarFnInfo& info = kernels::scalar_fn_info(e.call.fn);
      SMELT_CHECK(int(e.operands.size()) == info.arity)
          << where << ": " << info.name << " takes " << info.arity << " operands, got " << e.operands.size();
      for (int op : e.operands) {
        SMELT_CHECK(op >= 0 && op < index)
            << where << ": operand " << op << " is not an earlier expression; valid: [0, " << index << ")";
        const Expr& o = k.exprs[op];
        SMELT_CHECK(o.stage == e.stage || o.kind == ExprKind::Constant)
            << where << " (stage " << e.stage << "): operand " << op << " belongs to stage " << o.stage
            << "; valid: operands of the same stage, constants, or a ReductionResult re-read in this stage";
      }
      DType value = k.exprs[e.operands[value_operand(info)]].dtype;
      SMELT_CHECK(kernels::scalar_fn_accepts(e.call.fn, value))
          << where << ": " << info.name << " does not accept " << dtype_name(value);
      for (int i = 0; i < info.arity; ++i) {
        DType want = info.arity == 3 && i == 0 ? DType::Bool : value;
        if (e.call.fn == kernels::ScalarFn::cast) break;
        SMELT_CHECK(k.exprs[e.operands[i]].dtype == want)
            << where << ": " << info.name << " operand " << i << " is " << dtype_name(k.exprs[e.operands[i]].dtype)
            << "; valid: " << dtype_name(want) << " (operands are converted only by cast)";
      }
      DType result = kernels::scalar_call_result(e.call, value);
      SMELT_CHECK(result == e.dtype) << where << ": " << info.name << " gives " << dtype_name(result)
                                     << " but the expression says " << dtype_name(e.dtype);
      break;
    }
    case ExprKind::ReductionResult: {
      SMELT_CHECK(e.reduction >= 0 && e.reduction < int(k.reductions.size()))
          << where << ": reduction " << e.reduction << " out of range; valid: [0, " << k.reductions.size() << ")";
      const Reduction& r = k.reductions[e.reduction];
      SMELT_CHECK(r.stage < e.stage) << where << " (stage " << e.stage << ") reads reduction " << e.reduction
                                     << " of stage " << r.stage << "; valid: only in a later stage";
      SMELT_CHECK(r.dtype == e.dtype) << where << ": reads reduction " << e.reduction << " ("
                                      << dtype_name(r.dtype) << ") as " << dtype_name(e.dtype);
      break;
    }
  }
}

void hex_double(std::ostream& out, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  char buf[64];
  if (v != v) std::snprintf(buf, sizeof buf, "nan:%016" PRIx64, bits);
  else std::snprintf(buf, sizeof buf, "%a", v);
  out << buf;
}

// One integer of a kernel: its value, or for a dynamic-shape kernel its polynomial (the same text
// at every size).
void print_num(std::ostream& out, int64_t value, const SizePoly* poly) {
  if (!poly || poly->constant()) {
    out << value;
    return;
  }
  std::string t = poly->text();  // "(3 + 2 * S0)" -> "3+2*S0"
  std::string compact;
  for (char c : t) {
    if (c != ' ' && c != '(' && c != ')') compact += c;
  }
  out << compact;
}

void print_strides(std::ostream& out, const std::vector<int64_t>& v, const std::vector<SizePoly>* polys = nullptr) {
  out << "[";
  for (size_t i = 0; i < v.size(); ++i) {
    out << (i ? "," : "");
    print_num(out, v[i], polys ? &(*polys)[i] : nullptr);
  }
  out << "]";
}

// The kernel with every size-dependent integer zeroed: two kernels with equal skeletons differ
// only where kernel_fit fits polynomials.
std::string skeleton(LoopKernel k) {
  for (auto& v : k.outer) v = 0;
  for (auto& v : k.inner) v = 0;
  for (Access& a : k.accesses) {
    a.offset = 0;
    for (auto& v : a.outer_strides) v = 0;
    for (auto& v : a.inner_strides) v = 0;
  }
  for (Expr& e : k.exprs) {
    if (e.kind == ExprKind::Constant && dtype_is_floating(e.dtype)) e.fvalue = 0;
    if (e.kind == ExprKind::Call) std::fill(std::begin(e.call.params), std::end(e.call.params), 0.0);
  }
  k.sizes.reset();
  return k.name + "\n" + print_kernel(k);
}

}  // namespace

void validate(const LoopKernel& k) {
  const std::string where = "kernel '" + k.name + "'";
  SMELT_CHECK(k.stages >= 1) << where << ": " << k.stages << " stages; valid: at least 1";
  bool empty_outer = false, empty_inner = false;
  for (int64_t e : k.outer) {
    SMELT_CHECK(e >= 0) << where << ": outer extent " << e << "; valid: >= 0";
    empty_outer |= e == 0;
  }
  for (int64_t e : k.inner) {
    SMELT_CHECK(e >= 0) << where << ": inner extent " << e << "; valid: >= 0";
    empty_inner |= e == 0;
  }
  for (size_t i = 0; i < k.args.size(); ++i) {
    SMELT_CHECK(k.args[i].numel >= 0) << where << ": argument " << i << " has numel " << k.args[i].numel;
  }
  if (k.tiled) {
    bool row_store = false;
    for (const Store& s : k.stores) row_store |= s.stage == k.stages;
    SMELT_CHECK(k.stages == 1 && k.reductions.empty() && !row_store && k.inner.size() == 1)
        << where << ": tiled with " << k.stages << " stages, " << k.reductions.size() << " reductions and "
        << k.inner.size() << " inner dims; valid: the tile form has one stage, no reductions or row "
        << "stores, and one inner dim (the columns)";
  }
  for (int i = 0; i < int(k.accesses.size()); ++i) validate_access(k, i, empty_outer, empty_inner);
  for (int i = 0; i < int(k.exprs.size()); ++i) validate_expr(k, i);
  for (size_t i = 0; i < k.reductions.size(); ++i) {
    const Reduction& r = k.reductions[i];
    const std::string rw = where + " reduction " + std::to_string(i);
    SMELT_CHECK(r.stage >= 0 && r.stage < k.stages)
        << rw << ": stage " << r.stage << "; valid: [0, " << k.stages << ") (not the row expressions)";
    SMELT_CHECK(r.value >= 0 && r.value < int(k.exprs.size()))
        << rw << ": value " << r.value << " out of range; valid: [0, " << k.exprs.size() << ")";
    const Expr& v = k.exprs[r.value];
    SMELT_CHECK(v.stage == r.stage || v.kind == ExprKind::Constant)
        << rw << " (stage " << r.stage << ") folds expression " << r.value << " of stage " << v.stage;
    if (r.op == ReduceOp::SumExp) {
      SMELT_CHECK(r.dtype == DType::Float64 && (v.dtype == DType::Float32 || v.dtype == DType::Float64))
          << rw << ": a sumexp of " << dtype_name(r.dtype) << " over " << dtype_name(v.dtype)
          << " values; valid: float64, over float32 or float64 values";
    } else {
      SMELT_CHECK(v.dtype == r.dtype) << rw << " is " << dtype_name(r.dtype) << " but folds a "
                                      << dtype_name(v.dtype) << " value; valid: the value's dtype";
      SMELT_CHECK(dtype_is_floating(r.dtype) || dtype_is_signed_integer(r.dtype))
          << rw << ": dtype " << dtype_name(r.dtype) << "; valid: float32, float64, int64, int32";
    }
  }
  std::vector<bool> stored(k.args.size(), false);
  for (size_t i = 0; i < k.stores.size(); ++i) {
    const Store& s = k.stores[i];
    const std::string sw = where + " store " + std::to_string(i);
    SMELT_CHECK(s.stage >= 0 && s.stage <= k.stages)
        << sw << ": stage " << s.stage << "; valid: [0, " << k.stages << "]";
    SMELT_CHECK(s.value >= 0 && s.value < int(k.exprs.size()))
        << sw << ": value " << s.value << " out of range; valid: [0, " << k.exprs.size() << ")";
    SMELT_CHECK(s.access >= 0 && s.access < int(k.accesses.size()))
        << sw << ": access " << s.access << " out of range; valid: [0, " << k.accesses.size() << ")";
    const Expr& v = k.exprs[s.value];
    const Access& a = k.accesses[s.access];
    SMELT_CHECK(v.stage == s.stage || v.kind == ExprKind::Constant)
        << sw << " (stage " << s.stage << ") stores expression " << s.value << " of stage " << v.stage;
    SMELT_CHECK(k.args[a.arg].output) << sw << ": writes argument " << a.arg << ", an input; valid: an output";
    SMELT_CHECK(v.dtype == k.args[a.arg].dtype) << sw << ": stores " << dtype_name(v.dtype) << " into argument "
                                                << a.arg << " of dtype " << dtype_name(k.args[a.arg].dtype);
    // Different (o, i) must write different elements, or parallel/vector lanes race.
    for (size_t d = 0; d < k.outer.size(); ++d) {
      SMELT_CHECK(k.outer[d] <= 1 || a.outer_strides[d] != 0)
          << sw << ": outer dim " << d << " (extent " << k.outer[d] << ") has stride 0, so rows race on one "
          << "element; valid: a nonzero stride";
    }
    for (size_t d = 0; d < k.inner.size(); ++d) {
      bool row = s.stage == k.stages;
      SMELT_CHECK(row ? a.inner_strides[d] == 0 : (k.inner[d] <= 1 || a.inner_strides[d] != 0))
          << sw << ": inner dim " << d << " has stride " << a.inner_strides[d] << "; valid: "
          << (row ? "0 for a row store" : "nonzero (a stride-0 store writes one element many times)");
    }
    stored[a.arg] = true;
  }
  // In place: a written argument is read only where the same (o, i) writes it, so no position
  // reads what another writes (parallel rows, vector lanes and interpreter tiles stay independent).
  auto same_place = [](const Access& a, const Access& b) {
    return a.arg == b.arg && a.offset == b.offset && a.outer_strides == b.outer_strides &&
           a.inner_strides == b.inner_strides;
  };
  for (size_t i = 0; i < k.exprs.size(); ++i) {
    const Expr& e = k.exprs[i];
    if (e.kind != ExprKind::Load || !stored[k.accesses[e.access].arg]) continue;
    bool matched = false;
    for (const Store& s : k.stores) matched |= same_place(k.accesses[s.access], k.accesses[e.access]);
    SMELT_CHECK(matched) << where << " expression " << i << " reads argument " << k.accesses[e.access].arg
                         << ", which the kernel writes, through another access than its stores; valid: "
                         << "read a written argument only at the element the same (o, i) writes";
  }
  detail::validate_gathers_and_folds(k, stored);
  for (size_t i = 0; i < k.args.size(); ++i) {
    SMELT_CHECK(!k.args[i].output || stored[i])
        << where << ": output argument " << i << " is never stored; valid: every output is written";
  }
}

std::vector<bool> row_invariant_exprs(const LoopKernel& k, bool loads) {
  std::vector<bool> inv(k.exprs.size(), false);
  for (size_t i = 0; i < k.exprs.size(); ++i) {
    const Expr& e = k.exprs[i];
    if (e.kind == ExprKind::Constant || e.kind == ExprKind::ReductionResult) {
      inv[i] = true;
    } else if (e.kind == ExprKind::Load && loads) {
      // one element per row (a row statistic, a per-row scale): inner strides all 0, also in B
      const auto zero = [](const std::vector<int64_t>& v) {
        return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 0; });
      };
      const auto zero_polys = [](const std::vector<SizePoly>& v) {
        return std::all_of(v.begin(), v.end(), [](const SizePoly& x) { return x == SizePoly(0); });
      };
      inv[i] = zero(k.accesses[size_t(e.access)].inner_strides) &&
               (!k.sizes || zero_polys(k.sizes->inner_strides[size_t(e.access)]));
    } else if (e.kind == ExprKind::Call) {
      bool all = true;
      for (int o : e.operands) all = all && inv[size_t(o)];
      inv[i] = all;
    }
  }
  return inv;
}

std::string print_kernel(const LoopKernel& k) {
  std::ostringstream out;
  const SizeTerms* b = k.sizes ? &*k.sizes : nullptr;
  out << "loop_kernel stages=" << k.stages << (k.tiled ? " tiled" : "");
  if (b) out << " symbols=" << b->at.size();
  out << " outer=";
  print_strides(out, k.outer, b ? &b->outer : nullptr);
  out << " inner=";
  print_strides(out, k.inner, b ? &b->inner : nullptr);
  out << "\n";
  for (size_t i = 0; i < k.args.size(); ++i) {
    out << "arg " << i << " " << dtype_name(k.args[i].dtype) << (k.args[i].output ? " out" : " in") << "\n";
  }
  for (size_t i = 0; i < k.accesses.size(); ++i) {
    const Access& a = k.accesses[i];
    out << "access " << i << " arg=" << a.arg << " offset=";
    print_num(out, a.offset, b ? &b->offset[i] : nullptr);
    out << " outer=";
    print_strides(out, a.outer_strides, b ? &b->outer_strides[i] : nullptr);
    out << " inner=";
    print_strides(out, a.inner_strides, b ? &b->inner_strides[i] : nullptr);
    detail::print_gather(out, a);
    out << "\n";
  }
  // a number that follows the sizes: the same text at every size
  auto print_term = [&](const SizeConstant& term) {
    out << size_float_form_name(term.value.form) << "(";
    if (term.value.scale != 1) {
      hex_double(out, term.value.scale);
      out << ", ";
    }
    out << term.value.n.text();
    out << ")";
  };
  for (size_t i = 0; i < k.exprs.size(); ++i) {
    const Expr& e = k.exprs[i];
    out << "e" << i << " s" << e.stage << " " << dtype_name(e.dtype) << " = ";
    const SizeConstant* term = size_term(k, int(i));
    switch (e.kind) {
      case ExprKind::Load: out << "load " << e.access; break;
      case ExprKind::Constant:
        out << "const ";
        if (term) {
          print_term(*term);
        } else if (dtype_is_floating(e.dtype)) {
          hex_double(out, e.fvalue);
        } else {
          out << e.ivalue;
        }
        break;
      case ExprKind::Call: {
        const kernels::ScalarFnInfo& info = kernels::scalar_fn_info(e.call.fn);
        out << info.name;
        if (e.call.fn == kernels::ScalarFn::cast) out << "<" << dtype_name(e.call.cast_to) << ">";
        out << "(";
        for (size_t j = 0; j < e.operands.size(); ++j) out << (j ? ", e" : "e") << e.operands[j];
        for (int p = 0; p < info.params; ++p) {
          out << ", ";
          if (const SizeConstant* param = size_term(k, int(i), p)) print_term(*param);
          else hex_double(out, e.call.params[p]);
        }
        out << ")";
        break;
      }
      case ExprKind::ReductionResult: out << "result r" << e.reduction; break;
    }
    out << "\n";
  }
  for (size_t i = 0; i < k.reductions.size(); ++i) {
    const Reduction& r = k.reductions[i];
    out << "r" << i << " s" << r.stage << " " << dtype_name(r.dtype) << " = " << reduce_op_name(r.op) << " e"
        << r.value << "\n";
  }
  for (const Store& s : k.stores) out << "store s" << s.stage << " e" << s.value << " -> access " << s.access << "\n";
  detail::print_folds_and_checks(out, k);
  return out.str();
}

namespace {
// The reduction table, in ReduceOp's order.
struct ReduceOpInfo {
  ReduceOp op;
  const char* name;
  const char* fold;
};
constexpr ReduceOpInfo kReduceOps[] = {{ReduceOp::Sum, "sum", "add"},
                                       {ReduceOp::Max, "max", "maximum"},
                                       {ReduceOp::Min, "min", "minimum"},
                                       {ReduceOp::SumExp, "sumexp", "add"}};
const ReduceOpInfo& reduce_info(ReduceOp op) {
  const ReduceOpInfo& info = kReduceOps[size_t(op)];
  SMELT_INTERNAL_CHECK(info.op == op) << "the reduction table is out of ReduceOp's order";
  return info;
}
}  // namespace

const char* reduce_op_name(ReduceOp op) { return reduce_info(op).name; }
const char* reduce_fold_fn(ReduceOp op) { return reduce_info(op).fold; }

const SizeConstant* size_term(const LoopKernel& kernel, int expr, int param) {
  if (!kernel.sizes) return nullptr;
  for (const SizeConstant& c : kernel.sizes->constants) {
    if (c.expr == expr && c.param == param) return &c;
  }
  return nullptr;
}

LoopKernel kernel_at(const LoopKernel& kernel, const SymbolPoint& p) {
  SMELT_INTERNAL_CHECK(kernel.sizes) << "kernel_at: kernel '" << kernel.name << "' is not a dynamic-shape kernel";
  LoopKernel k = kernel;
  SizeTerms& t = *k.sizes;
  SMELT_INTERNAL_CHECK(p.size() == t.at.size()) << "kernel_at: " << p.size() << " sizes for " << t.at.size() << " symbols";
  auto set = [&](std::vector<int64_t>& v, const std::vector<SizePoly>& poly) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = poly[i].at(p);
  };
  set(k.outer, t.outer);
  set(k.inner, t.inner);
  for (size_t i = 0; i < k.args.size(); ++i) k.args[i].numel = t.numel[i].at(p);
  for (size_t i = 0; i < k.accesses.size(); ++i) {
    k.accesses[i].offset = t.offset[i].at(p);
    set(k.accesses[i].outer_strides, t.outer_strides[i]);
    set(k.accesses[i].inner_strides, t.inner_strides[i]);
  }
  for (const SizeConstant& c : t.constants) {
    const int64_t n = c.value.n.at(p);
    Expr& e = k.exprs[size_t(c.expr)];
    if (c.param < 0) e.fvalue = size_float_value(c.value, n, e.dtype);
    else e.call.params[c.param] = size_float_value(c.value, n, DType::Float64);  // a double
  }
  t.at = p;
  return k;
}

std::optional<LoopKernel> kernel_fit(const std::vector<const LoopKernel*>& kernels, const SymbolGrid& grid,
                                     std::string* why) {
  const std::vector<SymbolPoint> points = grid.points();
  SMELT_INTERNAL_CHECK(kernels.size() == points.size())
      << "kernel_fit: " << kernels.size() << " kernels for " << points.size() << " grid points";
  const LoopKernel& k0 = *kernels[0];
  const std::string shape = skeleton(k0);
  for (size_t j = 1; j < kernels.size(); ++j) {
    if (skeleton(*kernels[j]) != shape) {
      *why = "kernel '" + k0.name + "' differs between sizes " + point_str(points[0]) + " and " +
             point_str(points[j]) + " beyond its extents and strides";
      return std::nullopt;
    }
  }
  // Each integer field through the grid: `get` reads it off one kernel.
  bool polynomial = true;
  auto fit_one = [&](const std::function<int64_t(const LoopKernel&)>& get) {
    std::vector<int64_t> values;
    for (const LoopKernel* k : kernels) values.push_back(get(*k));
    std::optional<SizePoly> poly = fit_size(grid, values);
    if (!poly) polynomial = false;
    return poly ? *poly : SizePoly(values[0]);
  };
  auto fit_list = [&](const std::function<const std::vector<int64_t>&(const LoopKernel&)>& get) {
    std::vector<SizePoly> out;
    for (size_t d = 0; d < get(k0).size(); ++d) out.push_back(fit_one([&](const LoopKernel& k) { return get(k)[d]; }));
    return out;
  };
  LoopKernel k = k0;
  SizeTerms t;
  t.at = points[0];
  t.outer = fit_list([](const LoopKernel& x) -> const std::vector<int64_t>& { return x.outer; });
  t.inner = fit_list([](const LoopKernel& x) -> const std::vector<int64_t>& { return x.inner; });
  for (size_t i = 0; i < k0.args.size(); ++i) {
    t.numel.push_back(fit_one([i](const LoopKernel& x) { return x.args[i].numel; }));
  }
  for (size_t i = 0; i < k0.accesses.size(); ++i) {
    t.offset.push_back(fit_one([i](const LoopKernel& x) { return x.accesses[i].offset; }));
    t.outer_strides.push_back(
        fit_list([i](const LoopKernel& x) -> const std::vector<int64_t>& { return x.accesses[i].outer_strides; }));
    t.inner_strides.push_back(
        fit_list([i](const LoopKernel& x) -> const std::vector<int64_t>& { return x.accesses[i].inner_strides; }));
  }
  if (!polynomial) {
    *why = "kernel '" + k0.name + "': an extent or stride is not a polynomial in the sizes";
    return std::nullopt;
  }
  // Fits one number (a floating Constant's value, or a Call's parameter: a double) that differs.
  auto fit = [&](int expr, int param, DType dtype, const std::function<double(const LoopKernel&)>& get) {
    std::vector<double> values;
    bool same = true;
    for (const LoopKernel* x : kernels) {
      values.push_back(get(*x));
      same = same && size_float_same_bits(values[0], values.back());
    }
    if (same) return true;
    std::optional<SizeFloat> f = size_float_fit_grid(grid, values, dtype);
    if (!f) {
      char text[96];
      std::snprintf(text, sizeof text, "%.9g at %s, %.9g at %s", values[0], point_str(points[0]).c_str(), values[1],
                    point_str(points[1]).c_str());
      *why = "kernel '" + k0.name + "': a " + (param < 0 ? "constant" : "constant parameter") + " (" + text +
             ") is neither c * n nor c / n for an n polynomial in the sizes";
      return false;
    }
    t.constants.push_back({expr, param, *f});
    return true;
  };
  for (size_t i = 0; i < k0.exprs.size(); ++i) {
    const Expr& e0 = k0.exprs[i];
    if (e0.kind == ExprKind::Constant && dtype_is_floating(e0.dtype) &&
        !fit(int(i), -1, e0.dtype, [i](const LoopKernel& x) { return x.exprs[i].fvalue; })) {
      return std::nullopt;
    }
    if (e0.kind != ExprKind::Call) continue;
    for (int p = 0; p < kernels::scalar_fn_info(e0.call.fn).params; ++p) {
      if (!fit(int(i), p, DType::Float64, [i, p](const LoopKernel& x) { return x.exprs[i].call.params[p]; })) {
        return std::nullopt;
      }
    }
  }
  k.sizes = std::move(t);
  return k;
}

}  // namespace smelt::codegen
