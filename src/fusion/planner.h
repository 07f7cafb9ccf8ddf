// The fusion planner: decides which nodes form which group (fusion/fuse.h states the patterns,
// the legality rules and the cost model, fusion/cost_model.h computes it); fuse.cpp then builds
// the group nodes. Needs a graph without dead nodes (fuse runs dce first).
//
// Order of decisions, each group grown completely (and kept only if it holds at least two
// non-view ops) before the next one starts, so a group's schedule position never depends on a
// group that is later dissolved:
//   1. contractions in graph order, each with its elementwise epilogue (consumers);
//   2. row ops (softmax, log_softmax, layer_norm), each with its prologue (producers of input 0)
//      and epilogue;
//   3. reductions, each with its prologue, sibling reductions of the same dims and input shape
//      found near its inputs (with their prologues), then the epilogue;
//   4. pointwise groups seeded at the last unfused elementwise node, grown through producers.
// Legality: each group has a position `qpos` in a schedule of the whole graph (an unfused node's
// is its index); every extension is checked to keep each edge between the group and the rest
// running forward (external operands produced before qpos, outside readers after), which makes
// the contracted graph acyclic. The check is exact for that schedule; a merge that would need
// other nodes moved is refused as a cycle (conservative, never wrong).
#pragma once

#include <string>
#include <vector>

#include "fusion/fuse.h"
#include "fusion/pattern.h"

namespace smelt::fusion::detail {

struct PlannedGroup {
  Pattern pattern = Pattern::Pointwise;
  int anchor = -1;               // the node it was grown from
  std::vector<int> owned;        // node indices whose original the group replaces
  std::vector<int> recomputed;   // node indices duplicated into the group
  double qpos = 0;
  bool alive = true;
};

struct GroupPlan {
  std::vector<ir::Node*> nodes;                  // the graph's nodes; index = position
  std::vector<Role> roles;
  std::vector<std::string> role_reasons;         // for Role::None
  std::vector<int> owner;                        // group index or -1
  std::vector<std::vector<std::string>> reasons; // why a node was refused, attempt by attempt
  std::vector<PlannedGroup> groups;              // dissolved ones have alive = false
};

GroupPlan plan_fusion(const ir::Graph& graph, const FusionOptions& options);

}  // namespace smelt::fusion::detail
