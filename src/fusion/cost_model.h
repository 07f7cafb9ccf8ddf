// The fusion planner's cost model (fusion/fuse.h states it): how many bytes a value costs, and the
// three decisions made from them — recompute an elementwise producer in a group or read it from
// memory, take a broadcast epilogue into a row kernel, fuse a row op that is alone. With
// FusionOptions::cost_shapes (a dynamic batch's probe graph) every size is read from that graph,
// so every batch size is fused alike.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "ir/graph.h"

namespace smelt::fusion::detail {

class CostModel {
 public:
  // `cost` (may be null): the same graph at another batch size, whose sizes the model reads.
  CostModel(const ir::Graph& graph, const ir::Graph* cost);

  // The bytes the model counts for v: its own, or its counterpart's in the cost graph.
  int64_t bytes(const ir::Value* v) const;

  // An elementwise node `n` whose value `readers` nodes outside a group also read: recompute it
  // in the group (true) or materialize it once? `must_store`: its value is stored anyway (a graph
  // output, or read by a node no group takes). `why` says why not.
  bool recompute_pays(const ir::Node& n, bool must_store, int64_t readers, std::string* why) const;

  // A reduction's broadcast epilogue in its row kernel: the kernel is parallel over rows only, so
  // few long rows keep the epilogue in a pointwise kernel of its own. `why` gets a clause to append.
  bool broadcast_epilogue_pays(const ir::Node& reduce, std::string* why) const;

  // A row op (softmax, log_softmax, layer_norm) with nothing to fuse: its generated kernel
  // against the eager row kernel. `why` gets a clause to append.
  static bool lone_row_kernel_pays(const ir::Node& n, std::string* why);

  // A pointwise op with nothing to fuse: its generated kernel pays where the eager loop's runs
  // (trailing dims merged until an operand switches between broadcast and read) are shorter than
  // kShortBroadcastRun elements, as for a squeeze-excitation scale over blocked channels,
  // (N, C/16, 1, 1, 16) against (N, C/16, H, W, 16): the eager loop pays its per-run overhead
  // every 16 elements. Long runs (a per-channel scale on NCHW) keep the eager kernel.
  static bool lone_pointwise_kernel_pays(const ir::Node& n);

  // nll_loss gathering in the row kernel of its log_softmax, whose group has `row_ops` non-view
  // ops without it: with 1 (log_softmax alone) the gather would replace the eager row kernel and
  // the eager nll_loss by one generated kernel, which is slower. `why` gets the reason.
  static bool gather_pays(int row_ops, std::string* why);

 private:
  std::unordered_map<const ir::Value*, int64_t> cost_bytes_;  // empty: every value's own size
};

}  // namespace smelt::fusion::detail
