// The contraction ops (matmul, conv2d) with an epilogue on their output tiles: what a compiled
// plan runs for a contraction group whose elementwise epilogue is fused into the GEMM
// (runtime/plan.cpp), so that the product is finished while each tile is still in cache.
//
// The output y (contiguous) is seen as a matrix: its last `tile_col_dims` dims are the columns,
// the others, flattened, the rows — matmul (batch..., M, N): 1, rows batch... M; conv2d
// (N, O, Ho, Wo): 2, rows N O, columns Ho Wo; conv2d_blocked (N, Ob, Ho, Wo, B): 1, columns the
// lanes of a channel block (a per-channel bias is a row vector). The epilogue (kernels/gemm.h) is called on tiles of
// that matrix that cover it once, each right after its values are final, from the thread that
// computed them; y holds the product as the op's ordinary kernel computes it, bit for bit.
#pragma once

#include <vector>

#include "kernels/gemm.h"
#include "ops/op_table.h"
#include "smelt/tensor.h"

namespace smelt::ops {

// How many trailing dims of `op`'s output form the tile columns, or 0 when the op cannot run with
// a tile epilogue: not matmul or conv2d, not a floating dtype, or a matmul whose b is 1-D (its
// output has no N dim).
int contraction_tile_col_dims(OpId op, const std::vector<TensorMeta>& inputs);

// Runs `op` (contraction_tile_col_dims > 0) on `inputs` into `y` (contiguous, the op's output
// shape and dtype), calling `epilogue` on its tiles.
void contraction_with_epilogue(OpId op, const std::vector<Tensor>& inputs, const Attrs& attrs, const Tensor& y,
                               const kernels::GemmEpilogue& epilogue);

// The ops' own entries (matmul.cpp, conv.cpp).
void matmul_with_epilogue(const Tensor& y, const Tensor& a, const Tensor& b, const kernels::GemmEpilogue& epilogue);
void conv2d_with_epilogue(const Tensor& y, const Tensor& x, const Tensor& w, const Attrs& attrs,
                          const kernels::GemmEpilogue& epilogue);
void conv2d_blocked_with_epilogue(const Tensor& y, const Tensor& x, const Tensor& w, const Attrs& attrs,
                                  const kernels::GemmEpilogue& epilogue);

}  // namespace smelt::ops
