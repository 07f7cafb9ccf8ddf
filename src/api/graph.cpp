// smelt::Graph (include/smelt/graph.h): the installed face of ir/, trace/ and passes/. It lives in
// a folder of its own, below passes/ in the layer order, because it is the first place that sees
// all three; it adds no behaviour of its own, only checks that a handle is usable.
#include "smelt/graph.h"

#include "ir/graph.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass_manager.h"
#include "trace/interpreter.h"
#include "trace/trace.h"

namespace smelt {

Graph::Graph(std::unique_ptr<ir::Graph> graph) : graph_(std::move(graph)) {
  SMELT_INTERNAL_CHECK(graph_) << "smelt::Graph made from a null ir::Graph";
}
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&&) noexcept = default;
Graph::~Graph() = default;

ir::Graph& Graph::ir_graph() {
  SMELT_CHECK(graph_) << "smelt::Graph: this graph was moved from; use the graph it was moved to";
  return *graph_;
}

const ir::Graph& Graph::ir_graph() const {
  SMELT_CHECK(graph_) << "smelt::Graph: this graph was moved from; use the graph it was moved to";
  return *graph_;
}

Graph Graph::trace(const Fn& fn, const std::vector<Tensor>& example_inputs,
                   const std::vector<Tensor>& params) {
  SMELT_CHECK(fn) << "smelt::Graph::trace: the function is empty";
  return Graph(smelt::trace::trace(fn, example_inputs, params));
}

Graph Graph::trace_joint(const Fn& fn, const std::vector<Tensor>& example_inputs,
                         const std::vector<Tensor>& params) {
  SMELT_CHECK(fn) << "smelt::Graph::trace_joint: the function is empty";
  return Graph(smelt::trace::trace_joint(fn, example_inputs, params));
}

Graph Graph::parse(const std::string& text) { return Graph(ir::parse(text)); }

Graph Graph::clone() const { return Graph(ir_graph().clone()); }

std::string Graph::print() const { return ir::print(ir_graph()); }

void Graph::verify() const { ir::verify(ir_graph()); }

size_t Graph::num_nodes() const { return ir_graph().num_nodes(); }
size_t Graph::num_inputs() const { return ir_graph().inputs().size(); }
size_t Graph::num_outputs() const { return ir_graph().outputs().size(); }

std::vector<std::string> Graph::op_names() const {
  std::vector<std::string> names;
  for (const auto& node : ir_graph().nodes()) names.push_back(node->name());
  return names;
}

OptimizeReport Graph::optimize(const std::string& pipeline) {
  ir::Graph& g = ir_graph();
  OptimizeReport report;
  report.nodes_before = g.num_nodes();
  passes::PipelineResult result =
      passes::run_pipeline(g, pipeline.empty() ? default_pipeline() : pipeline, passes::options_from_env());
  report.converged = result.converged;
  report.iterations = result.iterations;
  report.nodes_after = g.num_nodes();
  report.table = result.report();
  return report;
}

std::string Graph::default_pipeline() { return passes::kDefaultPipeline; }

std::vector<std::string> Graph::pass_names() {
  std::vector<std::string> names;
  for (const passes::PassInfo& p : passes::pass_registry()) names.push_back(p.name);
  return names;
}

std::vector<Tensor> Graph::run(const std::vector<Tensor>& inputs) const {
  return smelt::trace::interpret(ir_graph(), inputs);
}

}  // namespace smelt
