// A contraction group (fusion/fuse.h, fusion="contraction") as one plan step: the matmul/conv
// runs with its epilogue's tile entry (codegen/loop_kernel.h, the tile form) called on each output
// tile the GEMM finishes (ops/contraction_tiles.h), so the product is read back from cache, not
// memory. Plan::Impl::add_group (plan.cpp) tries this first and falls back to two steps (product
// into a temporary, then the epilogue kernel) when it does not apply.
//
// Where the product lands: in the group's output when the group returns it; else in an output of
// the product's shape and dtype that the epilogue writes exactly where it reads the product (the
// epilogue then finishes C in place, and the product never exists anywhere else); else in an
// arena temporary. The values are the two-step path's: the same GEMM, and the epilogue's scalar
// math on the same products.
//
// The step's outputs must never share memory with its inputs (no in-place offers to the memory
// planner): the GEMM writes C at a tile before the epilogue reads the other inputs there.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "codegen/lower_contraction.h"
#include "kernels/gemm.h"
#include "ir/graph.h"
#include "runtime/kernel_step.h"

namespace smelt::runtime {

using codegen::TiledContraction;

// A blocked conv group whose epilogue is y = min(max((y + bias) + residual, lo), hi) (an add of a
// per-channel constant, an add of a group input of y's shape, then relu, clamp, maximum or minimum
// with scalar constants, each optional), finished in place in the product: that epilogue as data
// (kernels/gemm.h EpilogueAsPostOps). `bias` keeps the constant's memory; the residual's memory is
// the plan's to bind on each run (ops.residual).
struct ConvPostOps {
  Tensor bias;  // (1, Cb, 1, 1, B) float32, or undefined
  int residual_input = -1;  // the body input added as the residual; -1: none
  kernels::EpilogueAsPostOps ops;
};
// nullopt unless `body` (a contraction group's, its first node a conv2d_blocked) is exactly that,
// its one output the epilogue's result. `constant_of` gives the value of a body input bound to a
// plan constant (or nullptr): fusion leaves a bias either there or in the body.
std::optional<ConvPostOps> conv_epilogue_as_post_ops(const ir::Graph& body,
                                                     const std::function<const Tensor*(const ir::Value*)>& constant_of);

// Runs `op` on `operands` into `product` with `epilogue` (bound to its arguments) on every tile.
// `post_ops`: the epilogue as data too (may be nullptr).
void run_tiled_contraction(ops::OpId op, const ops::Attrs& attrs, const std::vector<Tensor>& operands,
                           const Tensor& product, const KernelStep& epilogue,
                           const kernels::EpilogueAsPostOps* post_ops = nullptr);

}  // namespace smelt::runtime
