#include "passes/transpose_normalize.h"

#include <algorithm>

#include "passes/permutation.h"

namespace smelt::passes {
namespace {

using ops::OpId;

// A permute of `in_shape` by `perm`, with size-1 dims dropped and adjacent dims merged: it moves
// the same data as permute(reshape(x, merged_in), perm) followed by a reshape.
struct MergedPermute {
  Shape merged_in;
  Permutation perm;
};

MergedPermute merge_dims(const Shape& in_shape, const Permutation& p) {
  // Positions of the non-size-1 input dims among themselves.
  std::vector<int64_t> compact(in_shape.size(), -1);
  int64_t kept = 0;
  for (size_t d = 0; d < in_shape.size(); ++d) {
    if (in_shape[d] != 1) compact[d] = kept++;
  }
  // Groups of output dims that read consecutive input dims, in output order.
  std::vector<std::pair<int64_t, int64_t>> groups;  // (first compact input dim, size)
  int64_t prev = -2;
  for (int64_t d : p) {
    if (compact[size_t(d)] < 0) continue;
    if (compact[size_t(d)] == prev + 1) {
      groups.back().second *= in_shape[size_t(d)];
    } else {
      groups.push_back({compact[size_t(d)], in_shape[size_t(d)]});
    }
    prev = compact[size_t(d)];
  }
  std::vector<size_t> by_input(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) by_input[g] = g;
  std::sort(by_input.begin(), by_input.end(),
            [&](size_t a, size_t b) { return groups[a].first < groups[b].first; });
  MergedPermute m;
  m.perm.resize(groups.size());
  for (size_t k = 0; k < by_input.size(); ++k) {
    m.merged_in.push_back(groups[by_input[k]].second);
    m.perm[by_input[k]] = int64_t(k);
  }
  return m;
}

ir::Value* reshape_to(ir::Graph& g, ir::Node* before, ir::Value* x, const Shape& shape) {
  if (x->meta.shape == shape) return x;
  return g.insert_node(before, OpId::reshape, {x}, {{"shape", shape}})->outputs[0];
}

bool only_used_by_reshapes(const ir::Graph& g, const ir::Value* v) {
  if (v->uses.empty() || g.is_output(v)) return false;
  return std::all_of(v->uses.begin(), v->uses.end(),
                     [](const ir::Use& u) { return u.node->op == OpId::reshape; });
}

// Rewrites one permute; returns whether the graph changed.
bool normalize_permute(ir::Graph& g, ir::Node* node) {
  ir::Value* x = node->inputs[0];
  ir::Value* out = node->outputs[0];
  const Permutation p = permutation_of(node);
  MergedPermute m = merge_dims(x->meta.shape, p);
  // permute(x, identity) -> x; a permute moving only size-1 dims -> reshape(x)
  if (m.perm.size() <= 1) {
    g.replace_all_uses(out, reshape_to(g, node, x, out->meta.shape));
    return true;
  }
  if (m.perm.size() == p.size()) return false;  // nothing merges
  // reshape(y) -> permute -> reshapes  =>  reshape(y) -> smaller permute -> reshapes
  ir::Node* producer = x->producer;
  bool input_free = producer && producer->op == OpId::reshape && x->uses.size() == 1 && !g.is_output(x);
  if (!input_free || !only_used_by_reshapes(g, out)) return false;
  ir::Value* merged = reshape_to(g, node, producer->inputs[0], m.merged_in);
  ir::Value* small = g.insert_node(node, OpId::permute, {merged}, {{"dims", m.perm}})->outputs[0];
  std::vector<ir::Use> uses = out->uses;
  for (const ir::Use& u : uses) g.set_input(u.node, u.index, small);
  return true;
}

// reshape(x, shape of x) -> x; reshape(reshape(y), s) -> reshape(y, s)
bool normalize_reshape(ir::Graph& g, ir::Node* node) {
  ir::Value* x = node->inputs[0];
  ir::Value* out = node->outputs[0];
  if (x->meta.shape == out->meta.shape) {
    g.replace_all_uses(out, x);
    return true;
  }
  if (x->producer && x->producer->op == OpId::reshape) {
    g.replace_all_uses(out, reshape_to(g, node, x->producer->inputs[0], out->meta.shape));
    return true;
  }
  return false;
}

}  // namespace

bool transpose_normalize(ir::Graph& graph) {
  bool changed = false;
  std::vector<ir::Node*> order;
  for (const auto& n : graph.nodes()) order.push_back(n.get());
  for (ir::Node* node : order) {
    ir::Value* out = node->outputs[0];
    if (out->uses.empty() && !graph.is_output(out)) continue;  // dead: dce's job
    if (node->op == OpId::permute) changed |= normalize_permute(graph, node);
    else if (node->op == OpId::reshape) changed |= normalize_reshape(graph, node);
  }
  return changed;
}

}  // namespace smelt::passes
