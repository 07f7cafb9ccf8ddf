// The graph compiler's public face: capture a C++ function as a graph, print it, parse it back,
// optimize it with the pass pipeline and run it.
//
//   smelt::Graph g = smelt::Graph::trace(mlp, {x}, {w1, b1, w2, b2});
//   std::cout << g.print();
//   g.optimize();                                      // the default pipeline
//   std::vector<smelt::Tensor> y = g.run({x, w1, b1, w2, b2});
//   smelt::Graph same = smelt::Graph::parse(g.print());
//
// Why a handle and not the IR classes themselves: the IR (`ir::Graph`, `Node`, `Value`, the op
// table they are built on) is the compiler's working material and keeps changing shape as fusion,
// memory planning and code generation arrive; installing it would make every such change a break
// for users, and would drag in the op table's X-macro file and other private headers. What a user
// of the compiler needs — capture, the text form, passes by name, running — is stable, so this
// header offers exactly that and includes nothing but smelt's public headers. The text form
// (`print` / `parse`) is the way to look inside a graph; it is the same text `smelt opt` reads
// and writes.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "smelt/tensor.h"

namespace smelt {

namespace ir {
class Graph;  // the IR itself: private to the library (src/ir/graph.h)
}  // namespace ir

// What optimize() did.
struct OptimizeReport {
  bool converged = false;  // an iteration changed nothing before the iteration limit
  int iterations = 0;
  size_t nodes_before = 0;
  size_t nodes_after = 0;
  std::string table;       // per pass: runs, changes, nodes before -> after, time
};

class Graph {
 public:
  // The traced function: graph inputs are `inputs` (one per example input) then `params` (one
  // per parameter, marked `param` in the text); it returns the graph's outputs.
  using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs,
                                               const std::vector<Tensor>& params)>;

  // Runs `fn` once on symbolic tensors with the shapes and dtypes of the examples and records the
  // ops it calls. Tensors `fn` creates itself become constants. Reading data while tracing
  // (item(), to_vector()) is an error: the graph cannot depend on values.
  static Graph trace(const Fn& fn, const std::vector<Tensor>& example_inputs,
                     const std::vector<Tensor>& params = {});
  // The joint forward+backward graph of a function returning one scalar loss. Inputs: the
  // example inputs, the parameters, then the loss tangent (a scalar; pass 1 for plain training).
  // Outputs: the loss, then d loss / d param for each parameter.
  static Graph trace_joint(const Fn& fn, const std::vector<Tensor>& example_inputs,
                           const std::vector<Tensor>& params);
  // Reads the text form that print() writes; errors name the line and column.
  static Graph parse(const std::string& text);

  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;
  ~Graph();
  Graph clone() const;  // an independent deep copy

  // The text form, one node per line with shapes: parse(g.print()).print() == g.print().
  std::string print() const;
  // Checks the graph's invariants (shape rules, order, uses); smelt::Error names the first problem.
  void verify() const;

  size_t num_nodes() const;
  size_t num_inputs() const;
  size_t num_outputs() const;
  // The op of each node, in order ("matmul", "add", ...): the names the text form uses.
  std::vector<std::string> op_names() const;

  // Runs the pass pipeline to a fixed point, in place. `pipeline` names passes separated by
  // commas (see pass_names()); empty means default_pipeline(). The environment variables
  // SMELT_PRINT_IR_AFTER and SMELT_DISABLE_PASSES apply (docs/env.md); the verifier runs after
  // every pass. An unknown pass name is a smelt::Error listing the valid ones.
  OptimizeReport optimize(const std::string& pipeline = "");
  static std::string default_pipeline();
  static std::vector<std::string> pass_names();

  // Executes the graph with the eager kernels: `inputs` in the order of the graph's inputs (for a
  // traced graph: example inputs, then params); shapes and dtypes are checked.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;

  // For code inside smelt that works on the IR directly (the command-line tool, tests).
  explicit Graph(std::unique_ptr<ir::Graph> graph);
  ir::Graph& ir_graph();
  const ir::Graph& ir_graph() const;

 private:
  std::unique_ptr<ir::Graph> graph_;  // null only after a move
};

}  // namespace smelt
