#include "trace/interpreter.h"

#include <algorithm>
#include <functional>
#include <unordered_map>

#include "ir/printer.h"
#include "ops/anomaly.h"
#include "ops/constant_weight.h"
#include "ops/dispatch.h"

namespace smelt::trace {
namespace {

// A node whose weight is one of the graph's constants may keep that weight converted or packed
// between runs (ops/constant_weight.h), as a compiled plan's steps do: an imported model run again
// and again converts its weights once. The caches check the weight's storage version, so an
// in-place smelt op on the constant is seen.
bool has_constant_weight(const ir::Node& node) {
  const int w = ops::constant_weight_input(node.op);
  return w >= 0 && size_t(w) < node.inputs.size() && node.inputs[size_t(w)]->kind == ir::ValueKind::Constant;
}

ops::Attrs constant_weight(const ir::Node& node) {
  ops::Attrs attrs = node.attrs;
  attrs.set("weight_constant", int64_t(1));
  return attrs;
}

// Runs `graph`; `visit(node, inputs, outs)` after each node may stop the run (returns false:
// then the result is empty).
std::vector<Tensor> run(const ir::Graph& graph, const std::vector<Tensor>& inputs, const NodeVisit& visit) {
  SMELT_CHECK(inputs.size() == graph.inputs().size())
      << "interpret: the graph has " << graph.inputs().size() << " inputs, got " << inputs.size();
  std::unordered_map<const ir::Value*, Tensor> env;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::Value* v = graph.inputs()[i];
    SMELT_CHECK(inputs[i].shape() == v->meta.shape && inputs[i].dtype() == v->meta.dtype)
        << "interpret: input " << i << " (" << ir::value_ref(v) << ") must be "
        << ir::meta_str(v->meta) << ", got " << dtype_name(inputs[i].dtype()) << " "
        << shape_str(inputs[i].shape());
    // The kernels below are called directly, not through the dispatcher that checks this.
    SMELT_CHECK(inputs[i].storage())
        << "interpret: input " << i << " (" << ir::value_ref(v)
        << ") is a symbolic tensor from a trace and has no data; pass tensors with data";
    env[v] = inputs[i];
  }
  for (const ir::Value* c : graph.constants()) env[c] = c->constant;
  for (const auto& node : graph.nodes()) {
    std::vector<Tensor> args;
    for (const ir::Value* v : node->inputs) args.push_back(env.at(v));
    std::vector<ops::TensorMeta> metas;
    for (const ir::Value* v : node->outputs) metas.push_back(v->meta);
    // A group node runs its body: a graph of its own whose inputs are the node's inputs.
    std::vector<Tensor> outs;
    if (node->body) {
      outs = run(*node->body, args, visit);
      if (outs.size() != node->outputs.size()) return {};  // the visit stopped inside
    } else {
      // Outputs no one reads may be skipped by the kernel (max_pool2d's indices); a conv2d whose
      // weight is a graph constant keeps it converted (weight_constant), as a plan step does.
      std::vector<bool> used;
      for (const ir::Value* v : node->outputs) used.push_back(!v->is_dead());
      const ops::Attrs* attrs = &node->attrs;
      ops::Attrs edited;  // a copy only for the nodes whose attributes change
      if (has_constant_weight(*node)) {
        edited = constant_weight(*node);
        attrs = &edited;
      }
      if (std::find(used.begin(), used.end(), false) != used.end()) {
        if (attrs != &edited) edited = node->attrs;
        if (ops::mark_unused_outputs(node->op, used, &edited)) attrs = &edited;
      }
      outs = ops::compute(node->op, args, *attrs, metas);
    }
    if (visit && !visit(*node, args, outs)) return {};
    for (size_t k = 0; k < outs.size(); ++k) env[node->outputs[k]] = outs[k];
  }
  std::vector<Tensor> results;
  for (const ir::Value* v : graph.outputs()) results.push_back(env.at(v));
  return results;
}

}  // namespace

std::vector<Tensor> interpret(const ir::Graph& graph, const std::vector<Tensor>& inputs) {
  return run(graph, inputs, nullptr);
}

std::vector<Tensor> interpret(const ir::Graph& graph, const std::vector<Tensor>& inputs, const NodeVisit& visit) {
  return run(graph, inputs, visit);
}

std::string first_non_finite(const ir::Graph& graph, const std::vector<Tensor>& inputs) {
  std::string found;
  run(graph, inputs, [&](const ir::Node& node, const std::vector<Tensor>& args, const std::vector<Tensor>& outs) {
    if (node.body) return true;  // its body's nodes were visited
    for (size_t k = 0; k < outs.size(); ++k) {
      if (ops::all_finite(outs[k])) continue;
      for (const Tensor& a : args) {
        if (!ops::all_finite(a)) return true;  // propagated, not produced here
      }
      found = std::string(node.name()) + " " + ir::value_ref(node.outputs[k]) + " (output " + std::to_string(k) +
              ", " + ir::meta_str(node.outputs[k]->meta) + "): a NaN or an infinity from finite operands";
      return false;
    }
    return true;
  });
  return found;
}

}  // namespace smelt::trace
