// A contraction group's lowering (fusion/fuse.h, Pattern::Contraction: a matmul or conv, then an
// elementwise epilogue on its product): the product runs as an op (runtime/contraction_step.h),
// only the epilogue is lowered, either alone (the two-step plan: the product into a temporary,
// then the epilogue reading it) or in tile form, called on each tile the GEMM finishes. The
// split is codegen's, so that fusion asks the same question the plan lowers (runtime/pipeline.cpp
// FusionOptions::lowers).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/lower.h"
#include "ir/graph.h"

namespace smelt::codegen {

// A contraction group's body with the contraction (its first node) removed and its output turned
// into the last body input: the epilogue alone.
std::unique_ptr<ir::Graph> contraction_epilogue_body(const ir::Graph& body);

struct TiledContraction {
  // The epilogue in tile form. Arguments: the body's inputs, the product, the constants, the
  // body's outputs (as the two-step path's epilogue kernel).
  LowerResult lowered;
  std::vector<int> operand_inputs;  // the contraction's operands, as indices into the body's inputs
  int product_output = -1;          // the body output the GEMM writes the product into; -1: a temporary
};

// nullopt when the tile form does not apply to this group (the op cannot take a tile epilogue,
// or the epilogue does not lower to the tile form).
std::optional<TiledContraction> lower_tiled_contraction(const ir::Graph& body, const std::string& name,
                                                        const LowerFn& lower);

}  // namespace smelt::codegen
