// Dynamic shapes (issue 8's dynamic batch, issue 22's any dim): one optimized, fused graph and one
// set of kernels for every size of a compiled function's dynamic dims, the symbols S0, S1, ...
// (runtime/compile_dynamic.cpp chooses them; codegen/size_poly.h).
//
// GraphFit fits the graphs a function gives (traced, optimized and fused) at the points of a
// grid of probe sizes: they must be the same graph — nodes, edges, ops, dtypes, constants (bit for
// bit), float and string attributes — except for integers (shape dims, int attributes), each of
// which must be a polynomial in the symbols with integer coefficients. at(p) then makes the graph
// at sizes p without tracing again. The grid's check point checks the fit (compare): an integer
// that only looked polynomial on the grid (a reshape to a fixed batch of 64, a strided conv's
// floor division) shows there. One-element floating constants and float attributes may differ
// too when the trace computes them from such a polynomial (codegen/size_float.h: a mean's
// 1 / count in its gradient): at(p) re-evaluates them as the trace would at p, bit for bit, and
// compare checks those bits.
//
// KernelFit does the same for the kernels a plan lowers: it records the lowerings of a plan
// built at each probe (in build order, with LowerOptions::size_generic), fits dynamic-shape
// kernels (codegen/loop_kernel.h SizeTerms) through the grid, checks them at the check point, and
// then lowers for a plan at any sizes p by handing out those kernels at p (PlanOptions::lower):
// every size shares their cache keys, so no new compiler run.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/size_float.h"
#include "codegen/lower.h"
#include "codegen/size_poly.h"
#include "ir/graph.h"
#include "runtime/plan.h"

namespace smelt::runtime {

class GraphFit {
 public:
  // nullopt, with `why` set, when `graphs` (one at each grid.points()) differ beyond polynomial
  // integers and floats.
  static std::optional<GraphFit> fit(const std::vector<const ir::Graph*>& graphs, const codegen::SymbolGrid& grid,
                                       std::string* why);
  // The graph at sizes `p`; a smelt::Error when a dim would be negative there.
  std::unique_ptr<ir::Graph> at(const codegen::SymbolPoint& p) const;
  // "" when `g` (at sizes p) is at(p), else the first difference.
  std::string compare(const ir::Graph& g, const codegen::SymbolPoint& p) const;

 private:
  std::shared_ptr<const ir::Graph> base_;  // the graph at the first grid point
  std::vector<codegen::SizePoly> ints_;    // per integer, in walk order (shape_fit.cpp)
  std::vector<std::pair<size_t, codegen::SizeFloat>> floats_;  // (float in walk order, its term)
};

class KernelFit {
 public:
  // The lowering for a plan built at probe sizes `p`: codegen::lower, size-generic, recorded.
  // Probes are recorded at the grid's points in order, then at its check point.
  LowerFn record(const codegen::SymbolPoint& p);
  // Fits the kernels recorded at the grid's points and checks them against those at the check
  // point; "" or why the kernels are not polynomial in the sizes.
  std::string fit(const codegen::SymbolGrid& grid);
  // The lowering for a plan at sizes `p` (after fit): the fitted kernels at p, in build order. A
  // build that asks for other lowerings than the probes did is a smelt::Error (the caller then
  // specializes); `used` counts the lowerings asked for, which after the build must be size().
  LowerFn replay(const codegen::SymbolPoint& p, std::shared_ptr<const size_t>* used = nullptr) const;
  size_t size() const { return fitted_.size(); }

 private:
  struct Probe {
    codegen::SymbolPoint sizes;
    std::vector<codegen::LowerResult> lowered;
    std::vector<int> tile_col_dims;  // what each lowering asked for
    std::vector<std::string> names;
  };
  std::vector<std::shared_ptr<Probe>> probes_;
  std::vector<codegen::LowerResult> fitted_;  // kernels with SizeTerms (or the reason none)
  std::vector<int> tile_col_dims_;
  std::vector<std::string> names_;
};

}  // namespace smelt::runtime
