#include "fusion/pattern.h"

#include <algorithm>
#include <unordered_map>

#include "ir/printer.h"
#include "ops/op_util.h"

namespace smelt::fusion {
namespace {

using ops::OpId;

bool is_simple_reduce(OpId op) {
  return op == OpId::sum || op == OpId::mean || op == OpId::amax || op == OpId::amin;
}

Shape without_ones(const Shape& s) {
  Shape out;
  for (int64_t d : s) if (d != 1) out.push_back(d);
  return out;
}

}  // namespace

const char* pattern_name(Pattern p) {
  switch (p) {
    case Pattern::Pointwise: return "pointwise";
    case Pattern::Reduction: return "reduction";
    case Pattern::Row: return "row";
    case Pattern::Contraction: return "contraction";
  }
  return "?";
}

bool pattern_from_name(const std::string& name, Pattern* out) {
  for (Pattern p : {Pattern::Pointwise, Pattern::Reduction, Pattern::Row, Pattern::Contraction}) {
    if (name == pattern_name(p)) {
      *out = p;
      return true;
    }
  }
  return false;
}

std::optional<Pattern> group_pattern(const ir::Node& node) {
  Pattern p;
  if (!node.is_group() || !node.attrs.has("fusion") || !pattern_from_name(node.attrs.get_string("fusion"), &p)) {
    return std::nullopt;
  }
  return p;
}

bool is_view(const ir::Node& n) { return !n.is_group() && ops::is_view_op(n.op); }  // the views column

bool is_squeeze_reshape(const ir::Node& n) {
  return n.op == OpId::reshape && without_ones(n.inputs[0]->meta.shape) == without_ones(n.outputs[0]->meta.shape);
}

std::vector<int64_t> reduce_signature(const ir::Node& n) {
  std::vector<int64_t> sig = ops::reduce_dims(n.attrs, int64_t(n.inputs[0]->meta.shape.size()), n.name());
  sig.push_back(n.attrs.get_int("keepdim", 0) ? -2 : -1);  // below every dim: keepdim apart
  return sig;
}

Role classify(const ir::Node& n, std::string* why) {
  auto none = [&](const std::string& reason) {
    if (why) *why = reason;
    return Role::None;
  };
  const ops::OpInfo& info = ops::op_info(n.op);
  const std::string name = n.name();
  if (n.body || n.op == OpId::group) return none("a group node (already fused)");
  if (info.flags & ops::kRandom) return none("random op: each draw must run exactly once, so it is never fused");
  if (ops::mutates_any(n.op)) return none("writes an input in place (ops::mutates): never fused");
  if (!ops::is_pure(n.op)) return none("impure op: never fused");
  // An op that may refuse its operands' values raises in eager even when nothing reads it, so it
  // stays in the graph unread (Node::must_run); a group would drop it with its unread value.
  if (n.must_run() && std::all_of(n.outputs.begin(), n.outputs.end(), [](const ir::Value* v) { return v->is_dead(); })) {
    return none("nothing reads it, but it may refuse its operands' values: it runs on its own so that its error stays");
  }
  // A generated kernel's integer x / 0 is 0 (kernels/scalar.h) and its divisor may be computed in
  // the kernel, where nothing checks it first: only the eager div refuses a zero divisor.
  if (n.op == OpId::div && n.must_run()) {
    return none("an integer division whose divisor may hold 0: its eager kernel refuses a zero divisor");
  }
  const bool floating = !n.inputs.empty() && dtype_is_floating(n.inputs[0]->meta.dtype);
  switch (info.kind) {
    case ops::OpKind::Elementwise: return Role::Pointwise;
    case ops::OpKind::Broadcast:
    case ops::OpKind::Injective:
      if (is_view(n)) return Role::View;
      return none(name + " copies data (an Injective op that is not a view): no pattern takes it");
    case ops::OpKind::Reduce:
      if (is_simple_reduce(n.op)) {
        return floating ? Role::Reduce : none("a reduction over a non-floating dtype: not fused");
      }
      if (n.op == OpId::softmax || n.op == OpId::log_softmax) {
        const int64_t rank = int64_t(n.inputs[0]->meta.shape.size());
        int64_t dim = n.attrs.get_int("dim");
        if (dim < 0) dim += rank;
        if (rank == 0 || dim != rank - 1) {
          return none(name + " over dim " + std::to_string(dim) + ", not the last dim: no row pattern");
        }
        return floating ? Role::Row : none(name + " over a non-floating dtype: not fused");
      }
      if (n.op == OpId::layer_norm) return floating ? Role::Row : none("layer_norm over a non-floating dtype");
      if (n.op == OpId::nll_loss) {
        if (n.inputs[0]->meta.shape.size() != 2) {
          return none("nll_loss over " + shape_str(n.inputs[0]->meta.shape) +
                      ": only (N, C) log-probabilities are gathered by row (the row pattern)");
        }
        return floating ? Role::Gather : none("nll_loss over a non-floating dtype");
      }
      return none(name + ": a reduction no pattern covers (reduction: sum, mean, amax, amin; row: softmax, "
                         "log_softmax, layer_norm, and nll_loss after log_softmax)");
    case ops::OpKind::Contraction:
      if ((n.op == OpId::matmul || n.op == OpId::conv2d || n.op == OpId::conv2d_blocked) && dtype_is_floating(n.outputs[0]->meta.dtype)) {
        return Role::Contraction;
      }
      return none(name + ": the contraction pattern covers floating matmul and conv2d only");
    case ops::OpKind::Opaque: return none(name + " is Opaque in the op table: it runs its own kernel");
  }
  return none("unknown kind");
}

std::string check_pattern(Pattern p, const GroupView& g) {
  const size_t n = g.nodes.size();
  if (n == 0) return "the group is empty";
  if (g.outputs.empty()) return "the group returns nothing";
  std::unordered_map<const ir::Node*, size_t> index;
  for (size_t i = 0; i < n; ++i) index[g.nodes[i]] = i;
  auto producer_index = [&](const ir::Value* v) -> long {
    if (!v->producer) return -1;
    auto it = index.find(v->producer);
    return it == index.end() ? -1 : long(it->second);
  };
  std::unordered_map<const ir::Value*, int> returned;
  for (const ir::Value* v : g.outputs) {
    if (producer_index(v) < 0) return ir::value_ref(v) + " is returned but not computed in the group";
    returned[v]++;
  }

  // The anchors of the pattern, and per node: a load view? depends on an anchor? who reads it.
  std::vector<bool> anchor(n), load(n), dep(n), gather(n);
  std::vector<std::vector<std::pair<size_t, size_t>>> readers(n);  // (reader, operand index)
  size_t num_anchors = 0;
  for (size_t i = 0; i < n; ++i) {
    const ir::Node& node = *g.nodes[i];
    std::string why;
    const Role role = classify(node, &why);
    if (role == Role::None) return ir::node_ref(node) + " is never fused: " + why;
    gather[i] = role == Role::Gather;
    anchor[i] = (p == Pattern::Reduction && role == Role::Reduce) || (p == Pattern::Row && role == Role::Row) ||
                (p == Pattern::Contraction && role == Role::Contraction);
    num_anchors += anchor[i];
    bool operands_external_or_load = true;
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const long j = producer_index(node.inputs[k]);
      if (j >= long(i)) return ir::node_ref(node) + " comes before the node computing its operand";
      if (j < 0) continue;
      readers[size_t(j)].push_back({i, k});
      operands_external_or_load &= bool(load[size_t(j)]);
      if (anchor[size_t(j)] || dep[size_t(j)]) dep[i] = true;
    }
    load[i] = is_view(node) && operands_external_or_load;
  }
  for (size_t i = 0; i < n; ++i) {
    bool used = false;
    for (const ir::Value* out : g.nodes[i]->outputs) used |= returned.count(out) > 0;
    if (!used && readers[i].empty()) return ir::node_ref(*g.nodes[i]) + " computes nothing the group reads or returns";
  }
  auto pointwise_node = [&](size_t i) {
    const ir::Node& node = *g.nodes[i];
    return ops::op_info(node.op).kind == ops::OpKind::Elementwise || load[i] ||
           (is_view(node) && (node.op != OpId::reshape || is_squeeze_reshape(node)));
  };
  auto elementwise = [&](size_t i) { return ops::op_info(g.nodes[i]->op).kind == ops::OpKind::Elementwise; };

  if (p == Pattern::Pointwise) {
    for (size_t i = 0; i < n; ++i) {
      if (!pointwise_node(i)) {
        return ir::node_ref(*g.nodes[i]) + " is not a pointwise node (a general reshape of a computed value, or not "
                                       "an elementwise/view op)";
      }
    }
    for (const ir::Value* v : g.outputs) {
      if (v->meta.shape != g.outputs[0]->meta.shape) {
        return "outputs of a pointwise group must share one shape: " + ir::value_ref(v) + " is " +
               shape_str(v->meta.shape) + ", " + ir::value_ref(g.outputs[0]) + " is " +
               shape_str(g.outputs[0]->meta.shape);
      }
    }
    return "";
  }

  const char* pname = pattern_name(p);
  if (num_anchors == 0) return std::string("a ") + pname + " group needs its anchor node";
  if (p != Pattern::Reduction && num_anchors != 1) return std::string("a ") + pname + " group has exactly one anchor";
  size_t first = 0;
  while (!anchor[first]) ++first;
  const ir::Node& a0 = *g.nodes[first];
  // The shape epilogue nodes produce: the reduced shape, the row's shape, the product's shape.
  const Shape& domain = a0.outputs[0]->meta.shape;
  // A reduction group whose reductions keep their dims may also have a broadcast epilogue: nodes
  // of the reduce domain R (the rows), evaluated in a second pass over each row.
  const bool broadcast_ok = p == Pattern::Reduction && a0.attrs.get_int("keepdim", 0) != 0;
  const Shape& rows = a0.inputs[0]->meta.shape;
  auto broadcast_epilogue = [&](size_t i) {
    return broadcast_ok && dep[i] && !anchor[i] && g.nodes[i]->outputs[0]->meta.shape == rows;
  };

  for (size_t i = 0; i < n; ++i) {
    const ir::Node& node = *g.nodes[i];
    const std::string ref = ir::node_ref(node);
    if (gather[i]) {  // nll_loss: picks one log-probability per row of the row node's output
      if (p != Pattern::Row || a0.op != OpId::log_softmax || node.inputs[0] != a0.outputs[0]) {
        return ref + ": nll_loss joins only the row group of the log_softmax computing its input 0";
      }
      const long t = producer_index(node.inputs[1]);
      if (t >= 0 && !load[size_t(t)]) return ref + ": its target must be a group input or a load view";
      if (!readers[i].empty()) return ref + ": its loss is read inside the group; valid: a group output only";
      continue;
    }
    if (anchor[i]) {
      // A later statistic of the same rows may read a broadcast epilogue value (the variance
      // mean((x - m)^2) after the mean m): the lowering gives it a later pass over each row.
      const long in0 = producer_index(node.inputs[0]);
      if (dep[i] && !(p == Pattern::Reduction && in0 >= 0 && broadcast_epilogue(size_t(in0)))) {
        return ref + " depends on another anchor of the group" +
               (p == Pattern::Reduction ? std::string(" other than through a value of the rows' shape") : "");
      }
      if (p == Pattern::Reduction) {
        if (reduce_signature(node) != reduce_signature(a0) ||
            node.inputs[0]->meta.shape != a0.inputs[0]->meta.shape) {
          return ref + " reduces other dims or another input shape than " + ir::node_ref(a0);
        }
      } else if (p == Pattern::Row && node.op == OpId::layer_norm) {
        for (size_t k = 1; k < node.inputs.size(); ++k) {
          const long j = producer_index(node.inputs[k]);
          if (j >= 0 && !load[size_t(j)]) return ref + ": weight and bias must be group inputs or load views";
        }
      } else if (p == Pattern::Contraction) {
        for (const ir::Value* in : node.inputs) {
          if (producer_index(in) >= 0) return ref + ": a contraction's operands must be group inputs (no prologue)";
        }
      }
      continue;
    }
    if (dep[i]) {  // epilogue
      if (!elementwise(i)) return ref + ": an epilogue node must be elementwise";
      if (node.outputs[0]->meta.shape != domain && !broadcast_epilogue(i)) {
        return ref + ": an epilogue node must have the shape " + shape_str(domain) +
               (broadcast_ok ? " or the rows' " + shape_str(rows) : std::string()) + ", not " +
               shape_str(node.outputs[0]->meta.shape);
      }
      if (p == Pattern::Row) {
        for (const ir::Value* in : node.inputs) {
          if (in->producer == &a0 && in->output_index != 0) return ref + " reads a statistic of layer_norm";
        }
      }
      continue;
    }
    if (load[i]) {
      if (p == Pattern::Contraction) {
        for (auto [r, k] : readers[i]) {
          if (!dep[r]) return ref + ": a load view in a contraction group feeds only its epilogue";
        }
      }
      continue;
    }
    // prologue
    if (p == Pattern::Contraction) {
      // Elementwise work on the epilogue's other operands (beta1 * m beside a weight gradient's
      // GEMM) runs in the epilogue's tiles; the product's own operands take none.
      if (!elementwise(i)) return ref + ": a contraction group takes no prologue but elementwise work for its epilogue";
      for (auto [r, k] : readers[i]) {
        if (anchor[r]) return ref + ": a contraction group takes no prologue on its product's operands";
      }
      continue;
    }
    if (!pointwise_node(i)) return ref + " is not a pointwise node: it cannot be a prologue";
    for (auto [r, k] : readers[i]) {
      // A broadcast epilogue evaluates the value again in its pass (it never reaches memory).
      if (dep[r] && !broadcast_epilogue(r)) return ref + ": a prologue value is read by the epilogue";
      if (p == Pattern::Row && anchor[r] && k != 0) return ref + ": only the row node's input 0 takes a prologue";
    }
  }
  for (const ir::Value* v : g.outputs) {
    const size_t j = size_t(producer_index(v));
    if (!anchor[j] && !dep[j]) return ir::value_ref(v) + ": a prologue value cannot be a group output";
  }
  return "";
}

std::string check_group(const ir::Node& group) {
  if (!group.body) return "not a group node";
  if (!group.attrs.has("fusion")) return "a group node without a `fusion` attribute";
  Pattern p;
  if (!pattern_from_name(group.attrs.get_string("fusion"), &p)) {
    return "unknown fusion pattern '" + group.attrs.get_string("fusion") + "'";
  }
  GroupView view;
  for (const auto& node : group.body->nodes()) view.nodes.push_back(node.get());
  for (const ir::Value* v : group.body->outputs()) view.outputs.push_back(v);
  if (p == Pattern::Contraction && !view.nodes.empty() &&
      classify(*view.nodes[0], nullptr) != Role::Contraction) {
    return "the first node of a contraction group must be its matmul or conv2d";
  }
  return check_pattern(p, view);
}

}  // namespace smelt::fusion
