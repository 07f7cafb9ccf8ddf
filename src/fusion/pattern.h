// The fusion kinds of single nodes, and the checker of the pattern contract (fusion/fuse.h) — one
// function used twice: on a candidate member set while the planner grows a group, and on the
// body of every group node fuse() makes.
#pragma once

#include <string>
#include <vector>

#include "fusion/fuse.h"
#include "ir/graph.h"

namespace smelt::fusion {

// What a node can be inside a group.
enum class Role : uint8_t {
  None,         // never fused; classify() says why
  Pointwise,    // an Elementwise op
  View,         // reshape, permute, slice, expand, contiguous
  Reduce,       // sum, mean, amax, amin over a floating input
  Row,          // softmax / log_softmax over the last dim, layer_norm
  Contraction,  // matmul, conv2d
  Gather,       // nll_loss over (N, C) log-probabilities: joins the row group of its log_softmax
};

// The node's role from the op table (kind, flags, memory columns) and its attributes; for None,
// `*why` says which rule keeps it out.
Role classify(const ir::Node& node, std::string* why);

bool is_view(const ir::Node& node);               // a view op of the contract
bool is_squeeze_reshape(const ir::Node& node);    // reshape inserting/removing size-1 dims only
// The reduce signature: normalized dims and keepdim (Reduce role only).
std::vector<int64_t> reduce_signature(const ir::Node& node);

// A group as the checker sees it: nodes in topological order; a value is internal when a node of
// `nodes` produces it, external otherwise.
struct GroupView {
  std::vector<const ir::Node*> nodes;
  std::vector<const ir::Value*> outputs;
};

// Empty when `g` satisfies the contract of `p`, else the first violation in words.
std::string check_pattern(Pattern p, const GroupView& g);

// Checks a group node's body against its `fusion` attribute (also: the contraction is the first
// body node); empty when it holds, else the violation.
std::string check_group(const ir::Node& group);

}  // namespace smelt::fusion
