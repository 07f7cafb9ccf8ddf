#include "passes/transpose_sink.h"

#include <algorithm>

#include "kernels/transpose.h"
#include "passes/permutation.h"

namespace smelt::passes {
namespace {

using ops::OpId;

bool is_permute(const ir::Value* v) { return v->producer && v->producer->op == OpId::permute; }

bool all_ones(const Shape& shape) {
  return std::all_of(shape.begin(), shape.end(), [](int64_t n) { return n == 1; });
}

// c broadcast to `rank` dims (leading size-1 dims) and permuted by `perm`, as a new dense tensor
// (the eager views: ops::view_layout owns their arithmetic).
Tensor permuted_constant(const Tensor& c, int64_t rank, const Permutation& perm) {
  Shape shape(size_t(rank) - c.shape().size(), 1);
  shape.insert(shape.end(), c.shape().begin(), c.shape().end());
  return kernels::contiguous_copy(c.reshape(shape).permute(perm));
}

// permute(permute(x, p), q) -> permute(x, p then q), or x when that is the identity
bool compose_permutes(ir::Graph& g, ir::Node* node) {
  ir::Value* x = node->inputs[0];
  const Permutation p = permutation_of(node);
  if (is_identity(p)) {
    g.replace_all_uses(node->outputs[0], x);
    return true;
  }
  if (!is_permute(x)) return false;
  ir::Node* inner = x->producer;
  Permutation composed = compose(permutation_of(inner), p);
  ir::Value* replacement = inner->inputs[0];
  if (!is_identity(composed)) {
    replacement = g.insert_node(node, OpId::permute, {replacement}, {{"dims", composed}})->outputs[0];
  }
  g.replace_all_uses(node->outputs[0], replacement);
  return true;
}

// f(permute(a, p), ...) -> permute(f(a, ...), p); see the header for which operands qualify.
bool sink_through(ir::Graph& g, ir::Node* node) {
  ir::Value* out = node->outputs[0];
  const int64_t rank = int64_t(out->meta.shape.size());
  const Permutation* perm = nullptr;
  Permutation first;
  for (ir::Value* in : node->inputs) {
    if (is_permute(in) && int64_t(in->meta.shape.size()) == rank) {
      first = permutation_of(in->producer);
      perm = &first;
      break;
    }
  }
  if (!perm) return false;
  // Which operands change, and whether a permute goes away (all its uses are this node).
  bool frees_a_permute = false;
  for (ir::Value* in : node->inputs) {
    if (is_permute(in) && permutation_of(in->producer) == *perm) {
      bool only_here = !g.is_output(in) && std::all_of(in->uses.begin(), in->uses.end(),
                                                       [&](const ir::Use& u) { return u.node == node; });
      frees_a_permute |= only_here;
    } else if (!all_ones(in->meta.shape) &&
               (in->kind != ir::ValueKind::Constant || int64_t(in->meta.shape.size()) > rank)) {
      return false;  // an operand that would need a permute of its own
    }
  }
  if (!frees_a_permute) return false;
  const Permutation inv = inverse(*perm);
  std::vector<ir::Value*> operands;
  for (ir::Value* in : node->inputs) {
    if (is_permute(in) && permutation_of(in->producer) == *perm) {
      operands.push_back(in->producer->inputs[0]);
    } else if (all_ones(in->meta.shape)) {
      operands.push_back(in);
    } else {
      operands.push_back(g.add_constant(permuted_constant(in->constant, rank, inv)));
    }
  }
  ir::Value* f = g.insert_node(node, node->op, operands, node->attrs)->outputs[0];
  ir::Value* moved = g.insert_node(node, OpId::permute, {f}, {{"dims", *perm}})->outputs[0];
  g.replace_all_uses(out, moved);
  // An integer division must run even unread (ir::Node::must_run); its moved copy divides by the
  // same values, so the original goes now rather than stay for nothing.
  if (node->must_run()) g.erase_node(node);
  return true;
}

}  // namespace

bool transpose_sink(ir::Graph& graph) {
  bool changed = false;
  std::vector<ir::Node*> order;
  for (const auto& n : graph.nodes()) order.push_back(n.get());
  for (ir::Node* node : order) {
    if (node->outputs.size() != 1) continue;
    ir::Value* out = node->outputs[0];
    if (out->uses.empty() && !graph.is_output(out)) continue;  // dead: dce's job
    if (node->op == OpId::permute) {
      changed |= compose_permutes(graph, node);
    } else if (ops::op_info(node->op).kind == ops::OpKind::Elementwise) {
      changed |= sink_through(graph, node);
    }
  }
  return changed;
}

}  // namespace smelt::passes
