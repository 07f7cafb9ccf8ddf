// The compile fuzzers' verdict on a plan's outputs (compile_fuzzer.h, second_batch.h): the
// comparison rule of compare.h applied to outputs of a compiled plan, with the two re-checks a
// correct plan may need before a case fails (layout, conditioning). The rule and why: judge.cpp.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace smelt::fuzz {

class Judge {
 public:
  using Run = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

  // `reference`: the unoptimized graph the outputs are judged against (on the IR interpreter);
  // `tolerant[i]`: output i is compared within the tolerance (a lowered reduction or a
  // rounding-changing pass reaches it), every other output bit for bit.
  Judge(const ir::Graph& reference, std::vector<bool> tolerant);

  // Empty when the plan's outputs `got` on `in` match `want` (the reference on `in`) by the rule;
  // else the first difference. Tolerant outputs beyond the tolerance are re-judged: without those
  // the reference itself cannot pin down (with its sums folded in another order), then on
  // `ordinary` inputs (the same shapes, no special values; `run` computes the plan's outputs).
  // `*rounded` counts the tolerant outputs that matched only within the tolerance.
  std::string verdict(const std::vector<Tensor>& in, const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                      const Run& run, const std::vector<Tensor>& ordinary, int* rounded);

  bool layout_rounding() const { return layout_rounding_; }  // matched only with contiguous operands
  bool ill_conditioned() const { return ill_conditioned_; }  // passed by the conditioning re-check
  const std::string& first_difference() const { return first_difference_; }

 private:
  std::string judge(const std::vector<Tensor>& in, const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                    const std::vector<bool>& keep, int* rounded);
  std::string judge_tolerant(const std::vector<Tensor>& in, const std::vector<Tensor>& got,
                             const std::vector<Tensor>& want, int* rounded);

  const ir::Graph& reference_;
  std::vector<bool> tolerant_;
  std::vector<std::unique_ptr<ir::Graph>> reordered_;  // with_reordered_sums' two, made when first needed
  bool layout_rounding_ = false;
  bool ill_conditioned_ = false;
  std::string first_difference_;
};

// `g` with its row ops decomposed into the eager kernels' arithmetic (codegen/decompose.h) and
// every floating operand of rank >= 2 of a sum or mean handed over transposed (permuted, copied,
// permuted back); with `reverse`, also each reduced dim reversed first (a short row's sum folds in
// its logical order whatever the layout): the same function, its sums folded by the eager
// kernels in another order. An output either order moves beyond the tolerance is one no
// reference pins down.
std::unique_ptr<ir::Graph> with_reordered_sums(const ir::Graph& g, bool reverse);

}  // namespace smelt::fuzz
