// Operator fusion: turns groups of nodes into group nodes (ir::Node::body), each to become one
// loop kernel. Runs after the canonical passes (passes/pass_manager.h) and before scheduling and
// memory planning; it needs nothing else before it (it runs dce first itself). Registered as the
// pass `fuse` (fusion/fuse_pass.cpp), so `smelt opt --passes ...,fuse` and the fuzzer run it.
//
// THE CONTRACT WITH THE LOWERING (codegen/): every group node fuse() makes carries the string
// attribute `fusion` naming one pattern below, and its body satisfies that pattern exactly
// (fusion/pattern.h checks it: check_group). Words used:
//   external   a body input or a body constant (fuse copies constants of at most one element
//              into the body; larger constants are body inputs);
//   view op    reshape, permute, slice, expand, contiguous;
//   load view  a view op whose operand is external or another load view: an addressing of an
//              argument buffer, never computed;
//   squeeze reshape  a reshape that only inserts or removes dims of size 1;
//   pointwise node   an Elementwise op (NumPy broadcasting allowed), a load view, or a permute,
//              slice, expand, contiguous or squeeze reshape of any value. A general reshape of a
//              computed value is never in a body (its index map is not affine);
//   depends on X     reachable from X's outputs through body nodes.
// Body nodes are in topological order; every body node has an output that a body node reads or
// the body returns.
//
//  fusion="pointwise"  every node is a pointwise node. All body outputs have one shape D, the
//      iteration space: one loop over D; every value is evaluated at the index of D its
//      consumers' index maps ask for (a value read through two different views is evaluated
//      twice; intermediates never reach memory).
//  fusion="reduction"  one or more reduce nodes (sum, mean, amax, amin) with equal `dims` (as
//      the normalized sorted set) and `keepdim`, whose inputs have one shape R (the reduce
//      domain) and a floating dtype; no reduce node depends on another. Every other node is
//        - prologue: a pointwise node that does not depend on a reduce node and whose value is
//          read only by prologue nodes and reduce nodes (evaluated over R), or
//        - a load view read by epilogue nodes, or
//        - epilogue: an Elementwise node that depends on a reduce node, with output shape equal
//          to the reduced shape; its operands are reduce results, epilogue values or externals
//          (broadcast to the reduced shape) and load views.
//      Outputs: reduce results and epilogue values only (all of the reduced shape).
//      Broadcast epilogue (a row group: softmax's and log_softmax's backward rules, layer_norm's,
//      x - mean(x, keepdim)): when the reduce nodes keep their dims, an epilogue node may also
//      have the shape R; it reads reduce results and reduced-shape epilogue values (broadcast
//      over the row), R-shaped epilogue values, externals, load views, and prologue values (a
//      prologue value read by a broadcast epilogue node is evaluated again in the second pass,
//      never stored; a prologue node may be read by broadcast epilogue nodes only). One kernel:
//      per row, pass 1 folds the reductions, pass 2 evaluates the epilogue. Outputs may then also
//      be R-shaped epilogue values.
//  fusion="row"  exactly one row node: softmax or log_softmax over the last dim, or layer_norm
//      (normalizing its last `ndim` dims); its input 0 (x) has a floating dtype. Prologue:
//      pointwise nodes that the row node's input 0 depends on, not depending on the row node,
//      read only by prologue nodes and by the row node's input 0 (evaluated over x's shape).
//      layer_norm's inputs 1 and 2 (weight, bias) are external or load views. Epilogue:
//      Elementwise nodes depending on the row node, with output shape equal to x's shape,
//      reading the row node's output 0 only (never layer_norm's mean/rstd), epilogue values,
//      externals and load views. Outputs: any output of the row node, and epilogue values.
//      nll_loss (a gather: fusion/pattern.h Role::Gather) over (N, C) log-probabilities joins the
//      row group of the log_softmax (over the last dim) computing its input 0: its target is
//      external or a load view, and nothing in the group reads its loss (a group output). The
//      row kernel picks logp[n, target[n]] in its row expressions and, for sum or mean, folds
//      the rows after them (codegen/loop_kernel.h: Access::index, LoopKernel::folds).
//  fusion="contraction"  the FIRST body node is the only matmul or conv2d; both its operands are
//      external (no prologue); its output dtype is floating. Every other node is an Elementwise
//      epilogue node depending on it with output shape equal to its output shape (bias add with
//      a broadcast bias, activation, residual add, scale, ...) or a load view read by epilogue
//      nodes. Outputs: the contraction's output (when something outside reads it) and epilogue
//      values, all of the contraction's output shape.
//
// LEGALITY (fusion/planner.cpp): groups never create a cycle (each group gets a position in a
// schedule of the whole graph, and every edge between groups and unfused nodes must run forward
// in it: checked exactly on every extension); a value that is a graph output or read outside
// its group becomes a group output (or the node stays out); random ops, ops that write their
// input (ops::mutates), impure ops, Opaque ops and nodes reading storage that some op writes in
// place are never fused.
//
// COST MODEL for a broadcast epilogue (a row group): one kernel reads what the reduction kernel
// and the pointwise kernel after it read (pass 2 rereads the row, from cache when it fits; never
// more than a second kernel reads) and writes no statistics, so it always saves memory traffic —
// but it parallelizes over rows only. With fewer than kMinRowsForBroadcastEpilogue rows and more
// than kMaxSerialRowElements elements it is refused (planner.cpp): the epilogue then runs as its
// own pointwise kernel, parallel over all elements.
//
// COST MODEL for a value v with readers outside the group being built (recompute or
// materialize): only an Elementwise producer may be recomputed (views are always duplicated:
// they are addressing), at most `max_recompute_ops` recomputed ops per group. With |in| the
// bytes of the producer's operands (a view's bytes are those of its source) and k the number of
// readers of v: if v must be materialized anyway (a graph output, or read by an op that cannot
// take it in a prologue: an unfusable op or a contraction), recompute iff |in| <= |v| (the group
// reads no more than it would reading v); otherwise recompute iff k |in| <= (k + 1) |v| (k
// recomputations read no more than one write of v and k reads). A pointwise group prefers making
// v one of its outputs (one kernel less) when v has the group's shape.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace smelt::fusion {

enum class Pattern : uint8_t { Pointwise, Reduction, Row, Contraction };
const char* pattern_name(Pattern p);  // "pointwise", ...
bool pattern_from_name(const std::string& name, Pattern* out);
// The pattern of a group node fuse() made (its `fusion` attribute, read here only); nullopt for
// any other node.
std::optional<Pattern> group_pattern(const ir::Node& node);

struct FusionOptions {
  // Ops per group that is not pointwise (contractions, reductions, row ops; a row group with a
  // broadcast epilogue has max_row_ops), not counting view ops (they are addressing, not work). 8 lets a contraction keep bias + activation + residual + scale and a reduction keep a
  // prologue, two reductions and an epilogue; 12 lets an LSTM cell's gates (3 sigmoids, 2 tanh, 3
  // products, a sum: 9 ops) be one kernel per time step (the bench's LSTM tagger 5.3 -> 4.5 ms;
  // the transformer and CNN workloads unchanged, bench/README.md).
  int max_ops = 12;
  // Longest chain of non-view ops inside a group that is not pointwise, casts not counted
  // (register pressure inside the GEMM's tiles, expression size). 6: a contraction's bias then
  // hard-swish (x * clamp(x / 6 + 1/2, 0, 1), as PyTorch exports it below opset 14) is one
  // epilogue (MobileNetV3-small 1.62 -> 1.33 ms; the other bench models unchanged,
  // bench/README.md), as is a GRU cell's new state. 7: the bias then exact GELU as exported below
  // opset 20 ((x * (1 + erf(x / sqrt 2))) * 0.5) is one epilogue; at 6 the final * 0.5 ran as an
  // op step over the whole output (ConvNeXt-T's 18: 4.3 ms of its plan; ViT-tiny's 12: 0.5 ms;
  // the fused epilogue itself no slower, `build/smelt bench --profile` with SMELT_FUSE_MAX_DEPTH
  // 6 and 7 in one session).
  int max_depth = 7;
  // The same for pointwise groups (loops over elements: no tile's registers to share). 16 and 8
  // let a residual add between quantized tensors (dequantize both: cast, sub, mul; add;
  // requantize: div, round, clamp, cast, add, cast: 13 ops, a chain of 7) read the two byte
  // tensors; at 12 and 6 each dequantized operand was a kernel of its own writing float32 (4
  // bytes per element written, then read, instead of 1 read).
  int max_pointwise_ops = 16;
  int max_pointwise_depth = 8;
  // Recomputed (duplicated) ops per group at most.
  int max_recompute_ops = 4;
  // Ops per group when it is a row group (a reduction group whose reductions keep their dims, so
  // that it may take a broadcast epilogue): instead of max_ops. layer_norm's backward rule is 14 ops in one row kernel (two row means of
  // prologues recomputed from x, the statistics' algebra, the epilogue); as two or three
  // kernels it writes and re-reads R-sized intermediates. max_depth counts each pass's chain
  // (a reduction result starts a new chain: it is read back from its accumulator).
  int max_row_ops = 16;
  // Longest chain of non-view ops in a row group, instead of max_depth: layer_norm's backward
  // chains xhat = (x - mu) rstd, xhat * scale, - , + shift and the residual gradient's add in its
  // second pass (6 ops).
  int max_row_depth = 8;
  // false: no broadcast epilogues (the reduction and the pointwise kernel after it stay two
  // kernels, and max_row_ops and the depth restart do not apply): the A/B switch for bench/.
  bool row_groups = true;
  // nll_loss in the row group of its log_softmax: 0 never (it runs its eager kernel after the
  // row op stores the log-probabilities: the A/B switch for bench/), 1 when the cost model says
  // so (CostModel::gather_pays: the row group is a generated kernel anyway), 2 always.
  int gathers = 1;
  // A contraction's epilogue also takes the elementwise producers of its other operands that only
  // it reads (an optimizer's beta1 * m next to the weight gradient's GEMM): computed in the tile
  // instead of a pass of their own. false: the A/B switch for bench/ (SMELT_FUSE_EPILOGUE_OPERANDS=0).
  bool epilogue_operands = true;
  // Set: a graph of the same structure as the one fused, node for node (the same graph at another
  // batch size, runtime/shape_fit.h), whose value sizes the cost model reads instead. A dynamic
  // batch fuses each probe batch size with the sizes at one large batch, so that every batch size
  // gets the same groups (the cost model compares bytes that are affine in the batch size: with
  // constant terms, a comparison can flip between two small batch sizes).
  const ir::Graph* cost_shapes = nullptr;
  // Set: whether a planned group's body lowers to one kernel ("" when it does, else why not), asked
  // before the group is made (runtime/pipeline.cpp passes codegen's lowering; fusion cannot
  // include codegen). A group that would not lower is not made: its nodes stay unfused and run
  // as the plan's op steps, instead of a group interpreted node by node. For a contraction group
  // the question is its epilogue's (codegen/lower_contraction.h: the product runs as an op).
  std::function<std::string(const ir::Graph& body, Pattern pattern)> lowers;
};

// The options with SMELT_FUSE_MAX_OPS, SMELT_FUSE_MAX_DEPTH, SMELT_FUSE_MAX_RECOMPUTE,
// SMELT_FUSE_MAX_ROW_OPS, SMELT_FUSE_MAX_ROW_DEPTH, SMELT_FUSE_ROW_GROUPS, SMELT_FUSE_GATHERS applied
// (docs/env.md); a bad value is a smelt::Error naming the variable.
FusionOptions fusion_options_from_env();

struct FusionGroupInfo {
  int id = 0;                     // the group's number in explain() and the DOT labels
  Pattern pattern = Pattern::Pointwise;
  std::vector<std::string> ops;   // fused node names with their first output, "%5 = add"
  std::vector<std::string> recomputed;  // of which duplicated here (their value also lives elsewhere)
  int outputs = 0;
};

struct UnfusedNode {
  std::string node;    // "%5 = softmax"
  std::string reason;  // the rule or limit that kept it out
};

struct FusionReport {
  std::vector<FusionGroupInfo> groups;
  std::vector<UnfusedNode> unfused;  // every node left running on its own, in graph order
  int fusable_ops = 0;     // non-view nodes of a kind some pattern accepts
  int fused_ops = 0;       // ... of which no longer run as their own kernel
  int kernels_before = 0;  // non-view nodes before fusion (a view runs no kernel)
  int kernels_after = 0;   // group nodes + non-view nodes left
  int recomputed_ops = 0;  // duplicated op copies inside groups
  int unlowered_groups = 0;  // planned groups not made because their body would not lower
  int64_t bytes_not_written = 0;  // intermediate values no longer stored to memory

  double fusion_rate() const { return fusable_ops ? double(fused_ops) / fusable_ops : 0.0; }
  // The metrics in one line.
  std::string summary() const;
  // The groups, then every unfused node with its reason, then the summary.
  std::string explain() const;
};

// Rewrites `graph` in place: fused nodes become group nodes (inserted where the schedule puts
// them), nodes recomputed everywhere disappear. The result passes ir::verify, computes exactly
// what the input computed (the same ops on the same values), and each group satisfies the
// contract above (checked; a violation is an internal error).
FusionReport fuse(ir::Graph& graph, const FusionOptions& options = fusion_options_from_env());

}  // namespace smelt::fusion
