// The iteration-space helpers of the lowering (codegen/lower.cpp), private to codegen: the affine
// index map of a value, how a reshape of a computed value maps onto its input, and the final
// shaping of a kernel's loops (simplified, or in tile form).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/loop_kernel.h"
#include "smelt/tensor.h"

namespace smelt::codegen::detail {

// Thrown inside the lowerer for a group it cannot express; becomes LowerResult::reason.
struct CannotLower {
  std::string reason;
};

// Where each element of a value of rank k is read, as an affine function of the iteration
// index i (rank r): index[d] = base[d] + sum_j rows[d][j] * i[j].
// A gathered read (nll_loss's pick, Access::index) adds gather[d] times the row's index — read
// through access `gather_access`, valid in [0, gather_extent) — to index[d]; `gather` is empty
// when no dim gathers.
struct Map {
  std::vector<std::vector<int64_t>> rows;
  std::vector<int64_t> base;
  std::vector<int64_t> gather;
  int gather_access = -1;
  int64_t gather_extent = 0;
};

// The map of a reshape's input (shape `in`) given the map `m` of its output (shape `out`).
// A reshape of a computed value is affine when every chunk of input dims it regroups holds one
// dim of size > 1 (so output dims only split it): that dim's index is then a linear combination
// of the chunk's output indices. Throws CannotLower when it merges dims. `space` is the number of
// loop dims (each row's length): a rank-0 output's map has no row to tell it.
Map reshape_input_map(const Shape& in, const Shape& out, const Map& m, size_t space);

// Sets k.outer and k.inner from the lowerer's iteration space (`space`, its first `n_outer` dims
// outer; k.accesses hold one stride per space dim, outer ones in outer_strides): drops size-1
// dims and merges adjacent dims (within outer, within inner) that every access walks as one;
// then, without reductions, makes the last dim the inner loop and splits a long single dim so
// that the outer loop can run in parallel (unless `split` is false: the block would depend on the
// extent's factors, which a dynamic batch changes).
void simplify_space(LoopKernel& k, const std::vector<int64_t>& space, size_t n_outer, bool reductions,
                    bool split = true);

// The tile form (LowerOptions::tile_col_dims): the space uncollapsed (all of it outer in
// k.accesses on entry), except that the last `cols` dims become the one inner (column) dim.
// Nothing else merges: a tile's rows are the flattened outer index, which the GEMM's output rows
// must be. Throws CannotLower with reductions or when an access does not walk the column dims as
// one.
void tile_space(LoopKernel& k, const std::vector<int64_t>& space, size_t cols, bool reductions);

}  // namespace smelt::codegen::detail
