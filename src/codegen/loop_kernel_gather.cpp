#include "codegen/loop_kernel_gather.h"

#include <algorithm>
#include <string>

#include "ops/op_util.h"
#include "smelt/error.h"

namespace smelt::codegen {
namespace detail {
namespace {

bool all_zero(const std::vector<int64_t>& v) {
  return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 0; });
}

void validate_gather(const LoopKernel& k, int index) {
  const Access& a = k.accesses[size_t(index)];
  const std::string where = "kernel '" + k.name + "' access " + std::to_string(index);
  SMELT_CHECK(a.index >= 0 && a.index < int(k.accesses.size()) && a.index != index)
      << where << ": gathers through access " << a.index << "; valid: another access in [0, "
      << k.accesses.size() << ")";
  const Access& ix = k.accesses[size_t(a.index)];
  SMELT_CHECK(ix.index < 0 && k.args[size_t(ix.arg)].dtype == DType::Int64 && all_zero(ix.inner_strides))
      << where << ": its index access " << a.index << " is "
      << (ix.index >= 0 ? "a gather" : "not a row access of an int64 argument")
      << "; valid: a plain access of an int64 argument with inner strides 0 (one index per row)";
  SMELT_CHECK(all_zero(a.inner_strides))
      << where << ": a gather walks the inner dims; valid: inner strides 0 (one element per row)";
  SMELT_CHECK(a.index_extent >= 0) << where << ": index extent " << a.index_extent << "; valid: >= 0";
  for (const Store& s : k.stores) {
    SMELT_CHECK(s.access != index) << where << ": a store through a gather; valid: gathers are loads only";
  }
  for (size_t e = 0; e < k.exprs.size(); ++e) {
    const Expr& ex = k.exprs[e];
    SMELT_CHECK(ex.kind != ExprKind::Load || ex.access != index || ex.stage == k.stages)
        << where << ": expression " << e << " of stage " << ex.stage << " gathers; valid: only the row "
        << "expressions (stage " << k.stages << ")";
  }
}

}  // namespace

void validate_gathers_and_folds(const LoopKernel& k, std::vector<bool>& stored) {
  const std::string where = "kernel '" + k.name + "'";
  for (int a = 0; a < int(k.accesses.size()); ++a) {
    if (k.accesses[size_t(a)].index >= 0) validate_gather(k, a);
  }
  for (size_t i = 0; i < k.folds.size(); ++i) {
    const RowFold& f = k.folds[i];
    const std::string fw = where + " fold " + std::to_string(i);
    for (int e : {f.value, f.count}) {
      if (e == f.count && e == -1) continue;  // a sum: no count
      SMELT_CHECK(e >= 0 && e < int(k.exprs.size()) && k.exprs[size_t(e)].stage == k.stages &&
                  k.exprs[size_t(e)].dtype == DType::Float64)
          << fw << ": expression " << e << " is not a float64 row expression; valid: the row "
          << "expressions' (stage " << k.stages << ") float64 values";
    }
    SMELT_CHECK(f.access >= 0 && f.access < int(k.accesses.size()))
        << fw << ": access " << f.access << " out of range; valid: [0, " << k.accesses.size() << ")";
    const Access& a = k.accesses[size_t(f.access)];
    SMELT_CHECK(k.args[size_t(a.arg)].output && a.index < 0 && all_zero(a.outer_strides) &&
                all_zero(a.inner_strides))
        << fw << ": stores through access " << f.access << "; valid: one element of an output (all strides 0)";
    for (const Store& s : k.stores) {
      SMELT_CHECK(k.accesses[size_t(s.access)].arg != a.arg)
          << fw << ": argument " << a.arg << " is also written by a store; valid: a fold's own output";
    }
    stored[size_t(a.arg)] = true;
  }
  for (size_t i = 0; i < k.index_checks.size(); ++i) {
    const IndexCheck& c = k.index_checks[i];
    SMELT_CHECK(c.arg >= 0 && c.arg < int(k.args.size()) && k.args[size_t(c.arg)].dtype == DType::Int64 &&
                !k.args[size_t(c.arg)].output && c.extent >= 0 && !c.op.empty())
        << where << " index check " << i << " (argument " << c.arg << ", extent " << c.extent
        << "); valid: an int64 input argument, an extent >= 0 and the op's name";
  }
}

void print_gather(std::ostream& out, const Access& a) {
  if (a.index >= 0) out << " gather=" << a.index << ":" << a.index_stride << ":" << a.index_extent;
}

void print_folds_and_checks(std::ostream& out, const LoopKernel& k) {
  for (const RowFold& f : k.folds) {
    out << "fold " << (f.count >= 0 ? "mean e" : "sum e") << f.value;
    if (f.count >= 0) out << " / e" << f.count;
    out << " -> access " << f.access << "\n";
  }
  for (const IndexCheck& c : k.index_checks) {
    out << "check arg " << c.arg << " in [0," << c.extent << ") or " << c.ignore << " (" << c.op << ")\n";
  }
}

}  // namespace detail

void check_indices(const LoopKernel& kernel, void* const* args) {
  for (const IndexCheck& c : kernel.index_checks) {
    ops::check_class_indices(static_cast<const int64_t*>(args[c.arg]), kernel.args[size_t(c.arg)].numel,
                             c.extent, c.ignore, c.op.c_str());
  }
}

}  // namespace smelt::codegen
