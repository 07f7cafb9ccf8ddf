// A dynamic batch (issue 8, "symbolic batch size allowed where shapes differ only there"): one
// optimized, fused graph and one set of kernels for every batch size.
//
// BatchGraph fits the graphs a function gives (traced, optimized and fused) at two probe batch
// sizes: they must be the same graph — nodes, edges, ops, dtypes, constants (bit for bit), float
// and string attributes — except for integers (shape dims, int attributes), each of which must be
// affine in the batch size with an integer slope. at(b) then makes the graph at batch b without
// tracing again. A third probe checks the fit (compare): an integer that only looked affine at two
// sizes (a batch squared, a reshape to a fixed batch of 64) shows there. One-element floating
// constants and float attributes may differ too when the trace computes them from an integer
// affine in the batch (codegen/batch_float.h: a mean's 1 / count in its gradient): at(b)
// re-evaluates them as the trace would at b, bit for bit, and compare checks those bits.
//
// BatchKernels does the same for the kernels a plan lowers: it records the lowerings of a plan
// built at each probe (in build order, with LowerOptions::batch_generic), fits dynamic-batch
// kernels (codegen/loop_kernel.h BatchTerms) through the first two, checks them against the third,
// and then lowers for a plan at any batch b by handing out those kernels at b (PlanOptions::lower):
// every batch size shares their cache keys, so no new compiler run.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/batch_float.h"
#include "codegen/lower.h"
#include "ir/graph.h"
#include "runtime/plan.h"

namespace smelt::runtime {

class BatchGraph {
 public:
  // nullopt, with `why` set, when g1 (at batch b1) and g2 (at b2) differ beyond affine integers.
  static std::optional<BatchGraph> fit(const ir::Graph& g1, int64_t b1, const ir::Graph& g2, int64_t b2,
                                       std::string* why);
  // The graph at batch `b`; a smelt::Error when a dim would be negative there.
  std::unique_ptr<ir::Graph> at(int64_t b) const;
  // "" when `g` (at batch b) is at(b), else the first difference.
  std::string compare(const ir::Graph& g, int64_t b) const;

 private:
  std::shared_ptr<const ir::Graph> base_;  // the graph at b1_
  int64_t b1_ = 0;
  std::vector<int64_t> slopes_;  // per integer, in walk order (batch_graph.cpp)
  std::vector<std::pair<size_t, codegen::BatchFloat>> floats_;  // (float in walk order, its term at b1_)
};

class BatchKernels {
 public:
  // The lowering for a plan built at probe batch `b`: codegen::lower, batch-generic, recorded.
  LowerFn record(int64_t b);
  // Fits the kernels recorded at the first two probes and checks them against the third; "" or
  // why the kernels are not affine in the batch.
  std::string fit();
  // The lowering for a plan at batch `b` (after fit): the fitted kernels at b, in build order. A
  // build that asks for other lowerings than the probes did is a smelt::Error (the caller then
  // specializes); `used` counts the lowerings asked for, which after the build must be size().
  LowerFn replay(int64_t b, std::shared_ptr<const size_t>* used = nullptr) const;
  size_t size() const { return fitted_.size(); }

 private:
  struct Probe {
    int64_t batch = 0;
    std::vector<codegen::LowerResult> lowered;
    std::vector<int> tile_col_dims;  // what each lowering asked for
    std::vector<std::string> names;
  };
  std::vector<std::shared_ptr<Probe>> probes_;
  std::vector<codegen::LowerResult> fitted_;  // kernels with BatchTerms (or the reason none)
  std::vector<int> tile_col_dims_;
  std::vector<std::string> names_;
};

}  // namespace smelt::runtime
