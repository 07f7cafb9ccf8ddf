#include "passes/transpose_sink.h"

#include <algorithm>

#include "kernels/transpose.h"
#include "ops/op_util.h"
#include "passes/permutation.h"

namespace smelt::passes {
namespace {

using ops::OpId;

bool is_permute(const ir::Value* v) { return v->producer && v->producer->op == OpId::permute; }

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
    } else if (!ops::all_size_one(in->meta.shape) &&
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
    } else if (ops::all_size_one(in->meta.shape)) {
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

// The permutation of a rank-`rank` tensor that swaps its last two dims.
Permutation swap_last_two(size_t rank) {
  Permutation p(rank);
  for (size_t i = 0; i < rank; ++i) p[i] = int64_t(i);
  std::swap(p[rank - 2], p[rank - 1]);
  return p;
}

bool swaps_last_two(const ir::Value* v) {
  return is_permute(v) && v->meta.shape.size() >= 2 &&
         permutation_of(v->producer) == swap_last_two(v->meta.shape.size());
}

// Used by `node` alone (and not a graph output): moving it leaves no second copy.
bool only_used_by(const ir::Graph& g, const ir::Value* v, const ir::Node* node) {
  return !g.is_output(v) && std::all_of(v->uses.begin(), v->uses.end(),
                                        [&](const ir::Use& u) { return u.node == node; });
}

// permute(matmul(a, b), swap) -> matmul(b^T, a^T) when an operand is itself a transpose that goes
// away: a gradient computed directly in the layout its consumer wants (a weight's gradient
// x^T dy, transposed to the weight's (out, in), becomes dy^T x: no copy of the whole matrix). The
// GEMM reads transposed operands through their strides. Permutes never grow in number.
bool pull_through_matmul(ir::Graph& g, ir::Node* node) {
  ir::Value* product = node->inputs[0];
  if (!product->producer || product->producer->op != OpId::matmul) return false;
  ir::Node* matmul = product->producer;
  if (!swaps_last_two(node->outputs[0]) || !only_used_by(g, product, node)) return false;
  ir::Value* a = matmul->inputs[0];
  ir::Value* b = matmul->inputs[1];
  if (a->meta.shape.size() < 2 || b->meta.shape.size() < 2) return false;
  const bool a_goes = swaps_last_two(a) && only_used_by(g, a, matmul);
  const bool b_goes = swaps_last_two(b) && only_used_by(g, b, matmul);
  if (!a_goes && !b_goes) return false;
  auto transposed = [&](ir::Value* v) {
    if (swaps_last_two(v)) return v->producer->inputs[0];
    return g.insert_node(node, OpId::permute, {v}, {{"dims", swap_last_two(v->meta.shape.size())}})
        ->outputs[0];
  };
  ir::Value* lhs = transposed(b);
  ir::Value* rhs = transposed(a);
  ir::Value* swapped = g.insert_node(node, OpId::matmul, {lhs, rhs}, matmul->attrs)->outputs[0];
  g.replace_all_uses(node->outputs[0], swapped);
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
      changed |= compose_permutes(graph, node) || pull_through_matmul(graph, node);
    } else if (ops::op_info(node->op).kind == ops::OpKind::Elementwise) {
      changed |= sink_through(graph, node);
    }
  }
  return changed;
}

}  // namespace smelt::passes
