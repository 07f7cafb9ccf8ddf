#include "passes/fold.h"

#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "base/env.h"
#include "ops/dispatch.h"
#include "smelt/autograd.h"
#include "trace/interpreter.h"

namespace smelt::passes {
namespace {

// Integer division by zero (and INT64_MIN / -1) traps in the eager kernel; the compiler must not
// crash on a graph that would only fail if it ran, so such nodes stay computed.
bool integer_division_may_trap(const ir::Node& node) {
  if (node.op != ops::OpId::div || dtype_is_floating(node.inputs[1]->meta.dtype)) return false;
  // As doubles, values next to INT64_MIN round onto it: a conservative test.
  const double kMin = double(std::numeric_limits<int64_t>::min());
  bool dividend_has_min = false;
  for (double a : node.inputs[0]->constant.to_vector()) dividend_has_min |= a <= kMin;
  for (double d : node.inputs[1]->constant.to_vector()) {
    if (d == 0 || (d == -1 && dividend_has_min)) return true;
  }
  return false;
}

bool pure_graph(const ir::Graph& g) {
  for (const auto& n : g.nodes()) {
    if (n->body ? !pure_graph(*n->body) : !ops::is_pure(n->op)) return false;
  }
  return true;
}

bool foldable(const ir::Graph& graph, const ir::Node& node, const FoldOptions& options) {
  // a group (after fusion) is interpreted when hoisting; the passes before fusion see none
  if (node.body ? !options.hoist || !pure_graph(*node.body) : !ops::is_pure(node.op)) return false;
  for (const ir::Value* in : node.inputs) {
    if (in->kind != ir::ValueKind::Constant) return false;
  }
  for (const ir::Value* out : node.outputs) {
    if (options.hoist ? graph.is_output(out) : shape_numel(out->meta.shape) > options.max_elements) return false;
  }
  return node.body || !integer_division_may_trap(node);
}

// Kernels may return views of their inputs (reshape, slice, expand); a constant owns a dense copy
// so it neither pins a larger buffer nor carries stride-0 dims.
Tensor materialize(const Tensor& t, const ir::Node& node) {
  bool shares_input = false;
  for (const ir::Value* in : node.inputs) shares_input |= in->constant.storage().get() == t.storage().get();
  if (!shares_input && t.is_contiguous() && t.offset() == 0) return t;
  ops::TensorMeta meta{t.shape(), t.dtype()};
  return ops::compute(ops::OpId::contiguous, {t}, {}, {meta})[0];
}

}  // namespace

FoldOptions fold_options_from_env() {
  FoldOptions o;
  o.max_elements = env_int("SMELT_FOLD_MAX_ELEMENTS", o.max_elements, 0,
                           std::numeric_limits<int64_t>::max());
  return o;
}

bool fold(ir::Graph& graph) { return fold(graph, fold_options_from_env()); }

bool fold(ir::Graph& graph, const FoldOptions& options) {
  bool changed = false;
  // In order, so a folded output already counts as a constant for the nodes after it: a whole
  // constant chain folds in one sweep.
  std::vector<ir::Node*> order;
  for (const auto& n : graph.nodes()) order.push_back(n.get());
  for (ir::Node* node : order) {
    bool live = false;
    for (const ir::Value* out : node->outputs) live |= !out->uses.empty() || graph.is_output(out);
    if (!live || !foldable(graph, *node, options)) continue;
    std::vector<Tensor> args;
    for (const ir::Value* in : node->inputs) args.push_back(in->constant);
    std::vector<ops::TensorMeta> metas;
    for (const ir::Value* out : node->outputs) metas.push_back(out->meta);
    // A kernel may refuse the data (an index out of range, a zero integer divisor): the graph
    // fails when it runs, not when it is compiled, so the node stays computed and raises the
    // same error then (the fuzzer checks that every run of such a graph fails alike). A smelt
    // bug is not hidden that way.
    std::vector<Tensor> results;
    NoGradGuard no_grad;  // (a frozen parameter's transpose is a constant, not a graph to record)
    try {
      results = node->body ? trace::interpret(*node->body, args) : ops::compute(node->op, args, node->attrs, metas);
    } catch (const Error& e) {
      if (e.internal()) throw;
      continue;
    }
    for (size_t k = 0; k < node->outputs.size(); ++k) {
      ir::Value* out = node->outputs[k];
      if (out->uses.empty() && !graph.is_output(out)) continue;
      graph.replace_all_uses(out, graph.add_constant(materialize(results[k], *node)));
    }
    changed = true;
    if (options.folded) ++*options.folded;
  }
  return changed;
}

}  // namespace smelt::passes
