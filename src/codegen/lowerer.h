// The lowering of one fused group to a LoopKernel (codegen/lower.h): the Lowerer class, private to
// codegen. lower.cpp finds the iteration space, binds arguments and stores outputs; lower_expr.cpp
// builds the expression DAG (views, broadcasts, reductions, nll_loss's gather and fold).
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "codegen/lower.h"
#include "codegen/lower_space.h"

namespace smelt::codegen::detail {

using ops::OpId;

inline bool is_reduce(OpId op) {
  return op == OpId::sum || op == OpId::mean || op == OpId::amax || op == OpId::amin;
}

inline bool gathers(const Map& m) {
  return std::any_of(m.gather.begin(), m.gather.end(), [](int64_t g) { return g != 0; });
}

inline bool inner_invariant(const Map& m, size_t n_outer) {
  for (const auto& row : m.rows) {
    for (size_t j = n_outer; j < row.size(); ++j) {
      if (row[j] != 0) return false;
    }
  }
  return true;
}

class Lowerer {
 public:
  Lowerer(const ir::Graph& body, LowerResult& result, const LowerOptions& options = {})
      : body_(body), result_(result), options_(options) {}

  LoopKernel run(const std::string& name);

 private:
  static constexpr int kRowStage = 1 << 20;

  // The iteration space: without reductions the shape of the outputs; with them the reduced
  // input's shape, reduced dims moved inner. space_dim_[j] is the dim of that shape at position j.
  void find_space();
  std::vector<int64_t> reduce_dims_of(const ir::Node& n) const;
  void bind_args();
  // stage_of_[reduce node]: the loop stage folding it, one after the last reduction it reads; an
  // online sum of exponentials folds in the stage of the maximum it subtracts.
  void assign_stages();
  // x of an online sum of exponentials (codegen/online_sumexp.h), its amax in online_max_.
  const ir::Value* online_sumexp_source(const ir::Node& n);
  int after_of(const ir::Value* v) const;
  // The map that reads a value of `shape` at the current iteration point: the row's position for
  // the reduced shape without kept dims, the identity for the space's own shape, broadcasting for
  // shapes that broadcast to it. The reduced shape is tested first: over [4, 4] reduced along dim
  // 1, a value of shape [4] is a row's result (indexed by dim 0), although [4] also broadcasts
  // along dim 1; read that way, a group returning the row sums was refused.
  Map natural_map(const Shape& shape) const;
  void store_output(size_t o);
  int add_expr(Expr e);
  // Zeroes the rows of size-1 dims (their index is always 0), so equal reads share one key.
  static void canonicalize(Map& m, const Shape& shape);
  int access_of(int arg, const Shape& shape, const Map& m);
  // The argument a value reads when it is an argument or reshapes/copies one (arguments are
  // contiguous, so a reshape of one is the same memory seen with another shape).
  int leaf_arg(const ir::Value* v) const;
  int expr_of(const ir::Value* v, Map m, int stage);
  int build(const ir::Value* v, const Map& m, int stage);
  // The map of an operand of shape `from` broadcast to `to` (right-aligned, size-1 dims repeat).
  static Map broadcast_map(const Map& m, const Shape& to, const Shape& from);
  // The map of a view op's input, given the map of its output.
  Map view_input_map(const ir::Node& n, const Map& m) const;
  // A reduce node's value read back in a later stage: its reduction (created once) and the row's
  // result, divided by the count for mean.
  int reduction_result(const ir::Value* v, const Map& m, int stage);
  // nll_loss over log-probabilities (N, C) that the group computes, its class dim the reduced one:
  // per row, the loss where(target == ignore, 0, -logp[n, target[n]]) — logp's expression
  // evaluated at the one column the target picks (a gather, codegen/loop_kernel.h) — as a row
  // expression; the targets checked before the kernel runs as the eager kernel checks them.
  int nll_row_loss(const ir::Node& n);
  // nll_loss of one row whose target is a literal (a body constant): no gather, and no check
  // before the kernel (a target out of range is refused here: node by node, the eager kernel
  // reports it when the group runs).
  int nll_constant_target(const ir::Node& n, const Map& row, int64_t t);
  // eq / ne of the row's target and ignore_index (a Bool row expression).
  int compare_target(OpId op, int t, int64_t ignore);
  // nll_loss's sum or mean over the rows: a fold of the row losses (and for mean of whether each
  // row counts) in double, in row order, as the eager kernel sums (LoopKernel::folds).
  void fold_nll_loss(const ir::Node& n, int arg);
  int call_expr(OpId op, std::vector<int> operands, DType dtype);
  int constant_expr(DType dtype, double f, int64_t i);
  // `operand` converted to `dtype` by the cast op's scalar function.
  int cast_expr(int operand, DType dtype, int stage);

  const ir::Graph& body_;
  LowerResult& result_;
  LowerOptions options_;
  LoopKernel k_;
  Shape shape_;
  std::vector<int64_t> dims_;
  std::vector<int64_t> space_;
  std::vector<int64_t> space_dim_;
  size_t n_outer_ = 0;
  int loop_stages_ = 1;
  int first_output_arg_ = 0;
  std::vector<const ir::Node*> reductions_;
  std::map<const ir::Value*, int> arg_of_;
  std::map<const ir::Value*, int> after_;
  std::map<const ir::Node*, int> stage_of_;
  std::map<const ir::Node*, int> reduction_index_;
  std::map<const ir::Node*, const ir::Value*> online_source_;  // SumExp sum node -> x
  std::map<const ir::Node*, const ir::Node*> online_max_;      // SumExp sum node -> its amax
  std::map<std::vector<int64_t>, int> memo_;
};

}  // namespace smelt::codegen::detail
