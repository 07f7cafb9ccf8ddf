// The C of the plan steps that run one op (matmul, convolution, pooling, copies, ...): a call of
// the op's portable loops in export_c/runtime (gemm.h, conv.h, ops.h) with the step's shapes,
// strides and attributes written in as constants. One entry per op in op_calls.cpp's table; any
// other op is lowered alone as a fused kernel, or is not exportable (export_graph names it).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "codegen/loop_kernel.h"
#include "ops/attrs.h"
#include "ops/op_table.h"

namespace smelt::export_c {

// One tensor a step reads or writes, as the plan binds it.
struct Operand {
  std::string ptr;  // a C expression of its first element's address, of type `T*`
  DType dtype = DType::Float32;
  Shape shape;
  Shape strides;  // in elements (a strided view of another slot's memory, or contiguous)
  Tensor constant;  // its value when it is a weight (a constant of the plan, whole), else undefined
};

struct OpCall {
  std::string code;           // statements
  int64_t scratch_bytes = 0;  // how much of the scratch region (the arena's end) they use
};

// The GEMM's blocking for a target (runtime/gemm.h SMELT_GEMM_MR, _NR, _KC, _MC, _NC, which model.c
// defines): an MR x NR register tile of as many accumulators as the target's vector registers hold
// with room for the operands, over KC steps, so that a packed NR-column panel of B (KC x NR floats)
// stays in the L1 cache while the tiles of A pass over it; blocks of MC rows of A and NC columns
// of B (multiples of MR and NR) packed at a time.
struct GemmTile {
  int mr = 4, nr = 8, kc = 256, mc = 48, nc = 128;
};
GemmTile gemm_tile(const std::string& target);

// What a call needs from the file it is written into: the C function of a fused kernel (written
// once per distinct kernel) and the symbol of a constant (a weight).
struct Sink {
  std::function<std::string(const codegen::LoopKernel&)> kernel;
  std::function<std::string(const Tensor&)> constant;
  GemmTile tile;  // the GEMM's blocking (gemm_tile): weights are packed for it
  bool winograd = true;  // 3x3 stride-1 convolutions by Winograd's F(2x2, 3x3)
};

// The C of `op` over `in` and `out`: the op's writer (op_calls.cpp), or else the op lowered alone to a
// LoopKernel (an elementwise op or reduction the plan left unfused) and emitted as C. `scratch` is
// an `unsigned char*` expression of a region of at least scratch_bytes (the largest any call asks
// for); `fail` the statement that ends the run on a bad index. `epilogue`, when not empty, is a
// `const smelt_epilogue*` expression (runtime/gemm.h): a contraction runs it on each tile of its
// product as the tile is finished; nullopt, with `why` empty, when this op cannot (the caller then
// runs the epilogue whole, after). nullopt, with `why` set where there is more to say than the
// op's name, when there is no C for the op.
std::optional<OpCall> op_call(ops::OpId op, const ops::Attrs& attrs, const std::vector<Operand>& in,
                              const std::vector<Operand>& out, const std::string& scratch, const std::string& fail,
                              const Sink& sink, std::string* why, const std::string& epilogue = "");

}  // namespace smelt::export_c
