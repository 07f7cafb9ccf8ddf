#include "fuzz/judge.h"

#include "codegen/decompose.h"
#include "fuzz/compare.h"
#include "ops/op_util.h"
#include "smelt/creation.h"
#include "trace/interpreter.h"

namespace smelt::fuzz {
namespace {

// ---------------------------------------------------------------------------------------------
// The comparison rule for compiled plans (the graph fuzzer's rule, compare.cpp, applied to a
// plan instead of an optimized graph):
//
// BIT-EXACT for every output that no lowered reduction reaches (NaN matching any NaN, the sign
// of zero checked, integers exact). A Kernel step evaluates the same scalar functions
// (kernels/scalar.h, through the elementwise table) as the eager kernels the interpreter runs, in
// both backends (generated C++ is built with -ffp-contract=off), and views are index maps, so
// elementwise results are the same bits; Op steps run the eager kernels themselves.
//
// TOLERANCE (|got - want| <= kAtol + kRtol |want|, NaN matching NaN, an infinity only the same
// infinity) for outputs that a group holding sum, mean, softmax, log_softmax or layer_norm
// can reach: the lowering folds a row in its own order (the interpreter: in inner
// order; generated C++: as the compiler vectorizes it) where the eager kernels sum in lanes. Both
// accumulate float32 in double and the row ops decompose into the eager kernels' arithmetic
// (codegen/decompose.h), so almost all of these outputs are still the same bits (the CLI counts
// those that are not); and for outputs fold_batchnorm may reach (compare.cpp). amax and amin are
// exact: the lowering folds with scalar maximum / minimum and the eager row kernels pick alike
// (+0 above -0, NaN wins), so any order of folding gives the same bits.
//
// Two ways a correct plan still differs, each re-checked before a case fails:
//   - layout: Op steps (matmul, conv, pools, unfused reductions) read contiguous arena slots and
//     contiguous copies of strided inputs, where the interpreter may hand the same eager kernel a
//     strided view, and their accumulation order follows the layout (compare.cpp). When every
//     difference is within the tolerance, the reference runs again with contiguous operands for
//     every reduction and contraction; matching it by the rule passes (layout_rounding).
//   - conditioning: a reordered sum of terms that cancel (1e30 + 1 - 1e30, FLT_MAX + FLT_MAX -
//     FLT_MAX), or a sum whose last bit a later cancellation magnifies (softplus(y) with beta 1
//     minus softplus(y) with beta 1 + 2^-52, then rsqrt), differs by far more than the
//     tolerance, or in being finite, in every correct order. When only tolerant outputs differ,
//     the reference runs again with its sums folded in another order (row ops decomposed, sum
//     operands transposed: with_reordered_sums); outputs that then move beyond the tolerance are
//     ones no reference pins down, and are left out if the rest match. Failing that, the case
//     runs again on ordinary inputs (the same shapes and layouts, no special values), judged the
//     same way. Either passes as ill_conditioned; the exact outputs were still compared bit for
//     bit on the special values.
// ---------------------------------------------------------------------------------------------

// `got` with the outputs `keep` does not select replaced by `want`'s: compare() then judges only
// the selected outputs and still names them by their index.
std::vector<Tensor> only(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                         const std::vector<bool>& keep) {
  std::vector<Tensor> out = got;
  for (size_t i = 0; i < out.size() && i < want.size(); ++i) {
    if (!keep[i]) out[i] = want[i];
  }
  return out;
}

}  // namespace

std::unique_ptr<ir::Graph> with_reordered_sums(const ir::Graph& g, bool reverse) {
  std::unique_ptr<ir::Graph> out = codegen::decompose_row_ops(g);
  std::vector<ir::Node*> order;
  for (const auto& n : out->nodes()) order.push_back(n.get());
  for (ir::Node* n : order) {
    if (n->op != ops::OpId::sum && n->op != ops::OpId::mean) continue;
    ir::Value* x = n->inputs[0];
    const int64_t rank = int64_t(x->meta.shape.size());
    if (!dtype_is_floating(x->meta.dtype)) continue;
    ir::Value* t = x;
    // Each reduced dim reversed (index_select of n-1 .. 0): the sum then folds its terms in another
    // order even where the kernel's order follows the logical index only (a row of 3).
    for (int64_t d : reverse ? ops::reduce_dims(n->attrs, rank, "with_reordered_sums") : std::vector<int64_t>{}) {
      const int64_t extent = x->meta.shape[size_t(d)];
      if (extent < 2) continue;
      std::vector<int64_t> backwards;
      for (int64_t i = extent - 1; i >= 0; --i) backwards.push_back(i);
      ir::Value* index = out->add_constant(from_vector(backwards, {extent}, DType::Int64));
      t = out->insert_node(n, ops::OpId::index_select, {t, index}, {{"dim", d}})->outputs[0];
    }
    if (rank >= 2) {  // and handed over transposed: another layout for the lanes
      std::vector<int64_t> reversed;  // its own inverse
      for (int64_t d = rank - 1; d >= 0; --d) reversed.push_back(d);
      t = out->insert_node(n, ops::OpId::permute, {t}, {{"dims", reversed}})->outputs[0];
      t = out->insert_node(n, ops::OpId::contiguous, {t}, {})->outputs[0];
      t = out->insert_node(n, ops::OpId::permute, {t}, {{"dims", reversed}})->outputs[0];
    }
    if (t != x) out->set_input(n, 0, t);
  }
  return out;
}

Judge::Judge(const ir::Graph& reference, std::vector<bool> tolerant)
    : reference_(reference), tolerant_(std::move(tolerant)) {}

// The rule at the top, for one set of inputs: `keep` selects the outputs judged.
std::string Judge::judge(const std::vector<Tensor>& in, const std::vector<Tensor>& got,
                         const std::vector<Tensor>& want, const std::vector<bool>& keep, int* rounded) {
  const std::vector<Tensor> mine = only(got, want, keep);
  std::string d = compare(mine, want, "compiled vs interpreter", tolerant_, rounded);
  if (d.empty()) return d;
  // (also beyond the tolerance: a sum that cancels, 1e300 + 1e30 - 1e300, differs by any amount
  // between two orders, and the plan's contiguous operands fold in the contiguous one)
  try {
    const std::vector<Tensor> want_c = trace::interpret(*with_contiguous_operands(reference_), in);
    if (compare(only(got, want_c, keep), want_c, "", tolerant_).empty()) {
      layout_rounding_ = true;
      return std::string();
    }
  } catch (const Error&) {
  }
  return d;
}

// The tolerant outputs; those that the reference itself cannot pin down within the tolerance
// (they move beyond it when only the order of its sums changes) are left out.
std::string Judge::judge_tolerant(const std::vector<Tensor>& in, const std::vector<Tensor>& got,
                                  const std::vector<Tensor>& want, int* rounded) {
  std::string d = judge(in, got, want, tolerant_, rounded);
  if (d.empty()) return d;
  if (reordered_.empty()) {
    for (bool reverse : {false, true}) reordered_.push_back(with_reordered_sums(reference_, reverse));
  }
  std::vector<bool> stable = tolerant_;
  for (const auto& reordered : reordered_) {
    const std::vector<Tensor> probe = trace::interpret(*reordered, in);
    for (size_t i = 0; i < tolerant_.size(); ++i) {
      if (tolerant_[i] && !compare({probe[i]}, {want[i]}, "", {true}).empty()) stable[i] = false;
    }
  }
  if (stable != tolerant_ && judge(in, got, want, stable, nullptr).empty()) {
    ill_conditioned_ = true;
    return std::string();
  }
  return d;
}

std::string Judge::verdict(const std::vector<Tensor>& in, const std::vector<Tensor>& got,
                           const std::vector<Tensor>& want, const Run& run, const std::vector<Tensor>& ordinary,
                           int* rounded) {
  std::vector<bool> exact(tolerant_.size());
  for (size_t i = 0; i < tolerant_.size(); ++i) exact[i] = !tolerant_[i];
  first_difference_ = judge(in, got, want, exact, nullptr);
  if (!first_difference_.empty()) return first_difference_;
  first_difference_ = judge_tolerant(in, got, want, rounded);
  if (first_difference_.empty()) return "";
  // Still beyond the tolerance: cancellation in a reordered sum, or a bug. The same case on
  // ordinary inputs tells them apart.
  int ordinary_rounded = 0;
  const std::string again =
      judge_tolerant(ordinary, run(ordinary), trace::interpret(reference_, ordinary), &ordinary_rounded);
  if (again.empty()) {
    ill_conditioned_ = true;
    return "";
  }
  return first_difference_ + "; on ordinary inputs: " + again;
}

}  // namespace smelt::fuzz
