#include "passes/partition.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "ir/printer.h"
#include "passes/dce.h"
#include "passes/min_cut.h"

namespace smelt::passes {
namespace {

using ValueSet = std::unordered_set<const ir::Value*>;
using NodeSet = std::unordered_set<const ir::Node*>;

// Free to the backward: graph inputs (the caller holds them anyway) and constants.
bool is_free(const ir::Value* v) { return v->producer == nullptr; }

std::string describe(const ir::Value* v) {
  std::string s = ir::value_ref(v) + " " + ir::meta_str(v->meta);
  if (v->producer) s += std::string(" (") + v->producer->name() + ")";
  return s;
}

// The nodes of `joint` that compute `wanted`, walking back from it and stopping at the values
// `available` says are there already (and at inputs and constants).
NodeSet producers_of(const std::vector<const ir::Value*>& wanted,
                     const std::function<bool(const ir::Value*)>& available) {
  NodeSet nodes;
  std::vector<const ir::Value*> stack(wanted.begin(), wanted.end());
  while (!stack.empty()) {
    const ir::Value* v = stack.back();
    stack.pop_back();
    if (is_free(v) || available(v) || !nodes.insert(v->producer).second) continue;
    for (const ir::Value* u : v->producer->inputs) stack.push_back(u);
  }
  return nodes;
}

// A graph of the nodes `keep` of `joint`, in its order, reading `inputs` (made its inputs, in
// this order) and the constants it meets, returning `outputs`.
std::unique_ptr<ir::Graph> extract(const ir::Graph& joint, const std::vector<const ir::Value*>& inputs,
                                   const NodeSet& keep, const std::vector<const ir::Value*>& outputs) {
  auto graph = std::make_unique<ir::Graph>();
  std::unordered_map<const ir::Value*, ir::Value*> map;
  for (const ir::Value* v : inputs) {
    map[v] = graph->add_input(v->meta, v->is_graph_input() ? v->name : "",
                              v->is_graph_input() ? v->kind : ir::ValueKind::Input);
  }
  auto mapped = [&](const ir::Value* v) {
    auto it = map.find(v);
    if (it != map.end()) return it->second;
    SMELT_INTERNAL_CHECK(v->kind == ir::ValueKind::Constant)
        << "partition: " << ir::value_ref(v) << " is read by a part that neither computes it nor "
        << "takes it as an input";
    return map[v] = graph->add_constant(v->constant);
  };
  for (const auto& node : joint.nodes()) {
    if (!keep.count(node.get())) continue;
    std::vector<ir::Value*> args;
    for (const ir::Value* v : node->inputs) args.push_back(mapped(v));
    const ir::Node* copy = graph->add_node(node->op, args, node->attrs);
    for (size_t k = 0; k < node->outputs.size(); ++k) map[node->outputs[k]] = copy->outputs[k];
  }
  for (const ir::Value* v : outputs) graph->add_output(mapped(v));
  return graph;
}

// What recomputing a value costs against the bytes saving it would keep (partition.h).
int64_t recompute_penalty(const ir::Value* v, double memory_budget) {
  // A view costs nothing to recompute (its operand is kept or recomputed anyway), and saving it
  // would copy it: at every budget it is remade where the backward reads it.
  if (ops::is_view_op(v->producer->op)) return 1;
  if (memory_budget >= 1) return FlowNetwork::kInfinite;
  const double alpha = memory_budget <= 0 ? 0 : memory_budget / (1 - memory_budget);
  const double bytes = alpha * double(v->meta.nbytes());
  // + 1: between cuts of equal bytes, the one that recomputes less
  return 1 + int64_t(std::min(bytes, double(FlowNetwork::kInfinite)));
}

}  // namespace

bool recomputable(ops::OpId op) {
  const ops::OpInfo& info = ops::op_info(op);
  if (info.flags & ops::kRandom) return false;
  switch (info.kind) {
    case ops::OpKind::Elementwise:
    case ops::OpKind::Broadcast:
    case ops::OpKind::Injective:
    case ops::OpKind::Reduce:
      return true;
    case ops::OpKind::Contraction:
    case ops::OpKind::Opaque:
      return false;
  }
  return false;
}

namespace {

// The min cut's answer for one budget (partition.h): which forward nodes the backward recomputes
// and which forward values it keeps.
struct Cut {
  ValueSet dependent;      // the backward's values: those that read a tangent, directly or not
  NodeSet backward_nodes;  // the nodes computing them
  std::vector<const ir::Value*> needs;  // forward values the backward reads, in first-read order
  NodeSet recompute;
  std::vector<const ir::Value*> saved;  // forward values and inputs the backward keeps
  int64_t saved_bytes = 0;              // of the computed ones
};

// `tangents` are the graph inputs from that index on; `backward_outputs` what the backward
// returns; `kept` values stay alive anyway (graph outputs of a single plan: free to keep).
// `views_alias`: a view keeps its operand's memory alive (one plan), so it is never saved on its
// own (its operand is, or it is recomputed from a recomputed one); otherwise (a forward plan's
// outputs) a saved view is a copy of its own bytes.
Cut choose_cut(const ir::Graph& joint, size_t tangents,
               const std::vector<const ir::Value*>& backward_outputs, const ValueSet& kept,
               double memory_budget, bool views_alias) {
  Cut cut;
  cut.dependent.insert(joint.inputs().begin() + std::ptrdiff_t(tangents), joint.inputs().end());
  for (const auto& node : joint.nodes()) {
    const bool reads_tangent =
        std::any_of(node->inputs.begin(), node->inputs.end(),
                    [&](const ir::Value* v) { return cut.dependent.count(v) > 0; });
    if (!reads_tangent) continue;
    cut.backward_nodes.insert(node.get());
    cut.dependent.insert(node->outputs.begin(), node->outputs.end());
  }
  ValueSet needed;
  auto need = [&](const ir::Value* v) {
    if (!cut.dependent.count(v) && v->kind != ir::ValueKind::Constant && needed.insert(v).second) {
      cut.needs.push_back(v);
    }
  };
  for (const auto& node : joint.nodes()) {
    if (!cut.backward_nodes.count(node.get())) continue;
    for (const ir::Value* v : node->inputs) need(v);
  }
  for (const ir::Value* v : backward_outputs) need(v);

  // The network over the forward values the backward may need: value i is the edge
  // 2i -> 2i+1 (cut: saved, its bytes); a recomputed one (2i on the sink side) needs its operands.
  auto kept_anyway = [&](const ir::Value* v) { return is_free(v) || kept.count(v) > 0; };
  std::vector<const ir::Value*> candidates;
  std::unordered_map<const ir::Value*, int> index;
  for (std::vector<const ir::Value*> stack = cut.needs; !stack.empty();) {
    const ir::Value* v = stack.back();
    stack.pop_back();
    if (kept_anyway(v) || !index.emplace(v, int(candidates.size())).second) continue;
    candidates.push_back(v);
    for (const ir::Value* u : v->producer->inputs) stack.push_back(u);
  }
  const int n = int(candidates.size()), source = 2 * n, sink = 2 * n + 1;
  FlowNetwork network(2 * n + 2);
  for (int i = 0; i < n; ++i) {
    const ir::Value* v = candidates[size_t(i)];
    const bool view = ops::is_view_op(v->producer->op);
    network.add_edge(2 * i, 2 * i + 1, view && views_alias ? FlowNetwork::kInfinite : v->meta.nbytes());
    network.add_edge(source, 2 * i,
                     recomputable(v->producer->op) ? recompute_penalty(v, memory_budget)
                                                    : FlowNetwork::kInfinite);
    for (const ir::Value* u : v->producer->inputs) {
      if (!kept_anyway(u)) network.add_edge(2 * index.at(u) + 1, 2 * i, FlowNetwork::kInfinite);
    }
    if (needed.count(v)) network.add_edge(2 * i + 1, sink, FlowNetwork::kInfinite);
  }
  network.max_flow(source, sink);
  for (int i = 0; i < n; ++i) {
    if (!network.source_side(2 * i)) cut.recompute.insert(candidates[size_t(i)]->producer);
  }
  ValueSet saved;
  auto save = [&](const ir::Value* v) {
    if (cut.dependent.count(v) || v->kind == ir::ValueKind::Constant) return;
    if (v->producer && cut.recompute.count(v->producer)) return;
    if (!saved.insert(v).second) return;
    cut.saved.push_back(v);
    if (!kept_anyway(v)) cut.saved_bytes += v->meta.nbytes();
  };
  for (const ir::Value* v : cut.needs) save(v);
  for (const auto& node : joint.nodes()) {
    if (!cut.recompute.count(node.get())) continue;
    for (const ir::Value* u : node->inputs) save(u);
  }
  return cut;
}

// What the cut keeps and recomputes, for the explanation (kept values are not listed).
void describe_cut(const ir::Graph& joint, const Cut& cut, const ValueSet& kept,
                  std::vector<std::string>* saved, std::vector<std::string>* recomputed) {
  for (const ir::Value* v : cut.saved) {
    if (!is_free(v) && !kept.count(v)) saved->push_back(describe(v));
  }
  for (const auto& node : joint.nodes()) {
    if (cut.recompute.count(node.get())) recomputed->push_back(describe(node->outputs[0]));
  }
}

}  // namespace

Partition partition(const ir::Graph& joint, size_t forward_inputs, size_t forward_outputs,
                    double memory_budget) {
  SMELT_INTERNAL_CHECK(forward_inputs <= joint.inputs().size() &&
                       forward_outputs <= joint.outputs().size())
      << "partition: " << forward_inputs << " forward inputs of " << joint.inputs().size()
      << ", " << forward_outputs << " forward outputs of " << joint.outputs().size();
  const std::vector<const ir::Value*> gradients(
      joint.outputs().begin() + std::ptrdiff_t(forward_outputs), joint.outputs().end());
  const Cut cut = choose_cut(joint, forward_inputs, gradients, {}, memory_budget, false);
  Partition result;
  result.saved_bytes = cut.saved_bytes;
  result.saved_bytes_no_recompute =
      choose_cut(joint, forward_inputs, gradients, {}, 1, false).saved_bytes;
  describe_cut(joint, cut, {}, &result.saved_values, &result.recomputed);

  // The forward: its outputs, then the saved values it computes that are not among them.
  const auto& ins = joint.inputs();
  const auto forward_end = ins.begin() + std::ptrdiff_t(forward_inputs);
  std::vector<const ir::Value*> forward_outs(
      joint.outputs().begin(), joint.outputs().begin() + std::ptrdiff_t(forward_outputs));
  for (const ir::Value* v : cut.saved) {
    if (is_free(v)) {
      const auto it = std::find(ins.begin(), forward_end, v);
      SMELT_INTERNAL_CHECK(it != forward_end)
          << "partition: the backward reads " << ir::value_ref(v) << ", not a forward input";
      result.saved.push_back({true, size_t(it - ins.begin())});
      continue;
    }
    auto it = std::find(forward_outs.begin(), forward_outs.end(), v);
    if (it == forward_outs.end()) it = forward_outs.insert(forward_outs.end(), v);
    result.saved.push_back({false, size_t(it - forward_outs.begin())});
  }
  // What the forward computes: its outputs and the saved values, and every node that must run
  // even unread (ir::Node::must_run: a call that may refuse its operands raises as in eager).
  std::vector<const ir::Value*> forward_wanted = forward_outs, backward_wanted = gradients;
  for (const auto& node : joint.nodes()) {
    if (!node->must_run()) continue;
    auto& wanted = cut.backward_nodes.count(node.get()) ? backward_wanted : forward_wanted;
    wanted.insert(wanted.end(), node->outputs.begin(), node->outputs.end());
  }
  const NodeSet forward_nodes = producers_of(forward_wanted, [](const ir::Value*) { return false; });
  for (const ir::Node* node : forward_nodes) {
    SMELT_INTERNAL_CHECK(!cut.backward_nodes.count(node))
        << "partition: a forward output depends on a tangent (" << node->name() << ")";
  }
  result.forward = extract(joint, {ins.begin(), forward_end}, forward_nodes, forward_outs);

  // The backward: the saved values and the tangents in, the recomputed and backward nodes.
  std::vector<const ir::Value*> backward_ins = cut.saved;
  backward_ins.insert(backward_ins.end(), forward_end, ins.end());
  const ValueSet backward_in_set(backward_ins.begin(), backward_ins.end());
  const NodeSet backward_run =
      producers_of(backward_wanted, [&](const ir::Value* v) { return backward_in_set.count(v) > 0; });
  for (const ir::Node* node : backward_run) {
    SMELT_INTERNAL_CHECK(cut.backward_nodes.count(node) || cut.recompute.count(node))
        << "partition: the backward would compute " << node->name()
        << " that is neither saved nor recomputable";
  }
  result.backward = extract(joint, backward_ins, backward_run, gradients);
  return result;
}

Recomputation recompute_in_backward(ir::Graph& joint, size_t tangents, double memory_budget) {
  // The graph's outputs stay alive to the end anyway: keeping them costs the arena nothing.
  const ValueSet kept(joint.outputs().begin(), joint.outputs().end());
  const Cut cut = choose_cut(joint, tangents, {}, kept, memory_budget, true);
  Recomputation result;
  result.saved_bytes = cut.saved_bytes;
  result.saved_bytes_no_recompute = choose_cut(joint, tangents, {}, kept, 1, true).saved_bytes;
  describe_cut(joint, cut, kept, &result.saved_values, &result.recomputed);
  // Each recomputed node is cloned once, just before the first backward node that reads it (or
  // reads a clone made from it), so that it lives from there to its last backward use.
  std::unordered_map<const ir::Node*, ir::Node*> clone_of;
  std::function<ir::Node*(const ir::Node*, ir::Node*)> clone = [&](const ir::Node* node,
                                                                  ir::Node* before) {
    auto it = clone_of.find(node);
    if (it != clone_of.end()) return it->second;
    std::vector<ir::Value*> args;
    for (ir::Value* u : node->inputs) {
      const bool remade = u->producer && cut.recompute.count(u->producer);
      args.push_back(remade ? clone(u->producer, before)->outputs[size_t(u->output_index)] : u);
    }
    // Marked, so that fusion puts it with the backward kernels that read it, never back with the
    // forward group computing its operands (fusion/planner.cpp).
    ops::Attrs attrs = node->attrs;
    attrs.set(kRecomputeAttr, int64_t(1));
    ir::Node* copy = joint.insert_node(before, node->op, args, attrs);
    clone_of.emplace(node, copy);
    return copy;
  };
  std::vector<ir::Node*> backward;
  for (const auto& node : joint.nodes()) {
    if (cut.backward_nodes.count(node.get())) backward.push_back(node.get());
  }
  for (ir::Node* node : backward) {
    for (size_t i = 0; i < node->inputs.size(); ++i) {
      const ir::Value* v = node->inputs[i];
      if (!v->producer || !cut.recompute.count(v->producer)) continue;
      joint.set_input(node, int(i), clone(v->producer, node)->outputs[size_t(v->output_index)]);
    }
  }
  dce(joint);
  return result;
}

std::string Recomputation::explain() const {
  std::string s = "saved for the backward: " + std::to_string(saved_values.size()) + " values, " +
                  std::to_string(saved_bytes) + " bytes (" + std::to_string(saved_bytes_no_recompute) +
                  " bytes without recomputation)\n";
  for (const std::string& v : saved_values) s += "  saved " + v + "\n";
  for (const std::string& v : recomputed) s += "  recomputed " + v + "\n";
  return s;
}

}  // namespace smelt::passes
