// The graph IR: SSA values produced by nodes, nodes kept in topological order.
//
// A Value is a graph input (a user input or a parameter), a constant (holding its tensor), or an
// output of a Node. A Node applies one op from the op table to input values. The same value may
// feed one node twice (x * x): use lists hold one entry per edge, so passes see both.
//
// Costs, so that passes stay linear on 100,000-node graphs: inserting or erasing a node is O(1)
// (each node keeps its own position in the node list), removing one edge from a use list is O(1)
// (each node remembers where its edges sit in its inputs' use lists; removal swaps with the last
// entry, so use lists are unordered), and `is_output` is a counter on the value that
// add_output / set_output / set_outputs / replace_all_uses keep in sync.
//
// Group nodes (the fusion groups of the compiler) hold a subgraph: `Node::body`. The op table has
// a row `group` (Opaque, variadic, no gradient) so every pass that asks op_info() about a node
// keeps working; its shape rule cannot see the body and refuses to run, so a group's output metas
// come from its body (Graph::add_group), never from ops::infer_shape. Body inputs correspond to
// the node's inputs and body outputs to the node's outputs, one for one with equal metas (the
// verifier checks it, recursively). A body is a complete graph of its own: its constants live in
// it, and it never reads values of the enclosing graph except through its inputs.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ops/op_table.h"

namespace smelt::ir {

class Node;
class Graph;

enum class ValueKind : uint8_t { Input, Param, Constant, Computed };
const char* value_kind_name(ValueKind kind);

// Value ids stay below this bound, so they and the ids above them never overflow an int; the
// parser rejects larger value numbers.
inline constexpr int kMaxValueId = 1 << 30;

// One edge: input `index` of `node` reads the value.
struct Use {
  Node* node;
  int index;
  bool operator==(const Use& o) const { return node == o.node && index == o.index; }
};

class Value {
 public:
  int id = 0;                 // unique in the graph; printed as %<id> (or %<name>)
  std::string name;           // optional, for inputs and parameters
  ValueKind kind = ValueKind::Computed;
  ops::TensorMeta meta;
  Node* producer = nullptr;   // Computed only
  int output_index = 0;
  Tensor constant;            // Constant only
  std::vector<Use> uses;      // unordered; change only through Graph (set_input, ...)
  int output_refs = 0;        // how many graph output slots name this value (kept by Graph)

  bool is_graph_input() const { return kind == ValueKind::Input || kind == ValueKind::Param; }
  bool is_output() const { return output_refs > 0; }
  bool is_dead() const { return uses.empty() && output_refs == 0; }
};

class Node {
 public:
  Node();
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  ops::OpId op;
  ops::Attrs attrs;
  std::vector<Value*> inputs;
  std::vector<Value*> outputs;
  std::unique_ptr<Graph> body;  // group nodes only

  const char* name() const { return ops::op_name(op); }
  bool is_group() const { return body != nullptr; }
  // Whether the node must run even when nothing reads its outputs: it writes an input, or it may
  // refuse its operands' values with an error (ops::may_refuse_values: eager raises there, so the
  // compiled graph must too; not a division by an integer constant without zeros); a group when a
  // node of its body must. dce and fusion keep it.
  bool must_run() const;

 private:
  friend class Graph;
  // use_slot[i]: where edge i sits in inputs[i]->uses.
  std::vector<size_t> use_slot_;
  std::list<std::unique_ptr<Node>>::iterator self_;

 public:
  size_t use_slot(size_t i) const { return use_slot_[i]; }  // for the verifier
};

// Whether a node of `g`, or of a group body inside it, runs `op`.
bool holds_op(const Graph& g, ops::OpId op);

class Graph {
 public:
  Graph();
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  Value* add_input(const ops::TensorMeta& meta, const std::string& name = "",
                   ValueKind kind = ValueKind::Input);
  Value* add_constant(const Tensor& value);
  // Appends a node at the end (inputs must already exist); its output metas come from the op's
  // shape rule.
  Node* add_node(ops::OpId op, const std::vector<Value*>& inputs, const ops::Attrs& attrs = {});
  // Same, inserting before `before` (null: at the end).
  Node* insert_node(Node* before, ops::OpId op, const std::vector<Value*>& inputs,
                    const ops::Attrs& attrs);
  // A group node running `body` on `inputs`, inserted before `before` (null: at the end). Its
  // outputs take the metas of the body's outputs; the body's inputs must match `inputs` in number
  // and meta (smelt::Error otherwise).
  Node* add_group(const std::vector<Value*>& inputs, std::unique_ptr<Graph> body,
                  Node* before = nullptr, const ops::Attrs& attrs = {});
  // Puts the graph inputs in `order`, a permutation of inputs() (a tracer adds inputs as it
  // meets them and orders them once the trace is done).
  void reorder_inputs(const std::vector<Value*>& order);
  void add_output(Value* v);
  void set_output(size_t i, Value* v);
  void set_outputs(std::vector<Value*> outputs);

  // Functional state (docs/design.md "Purity"): graph output `output` is the new value of graph
  // input `input` (a parameter after an optimizer step, a moment buffer). The graph stays pure;
  // a plan writes that output straight into the input's memory where its schedule allows, and
  // copies it there at the end of the run otherwise (runtime/plan.h). At most one output per
  // input; equal metas (the verifier checks both).
  void set_output_updates(size_t output, size_t input);
  // (output, input) pairs, in the order set.
  const std::vector<std::pair<size_t, size_t>>& updates() const { return updates_; }
  // Moves `node` before `before` (null: to the end), keeping everything else in order. The
  // caller keeps the order topological.
  void move_node(Node* node, Node* before);

  // Points every use of `from` (and graph outputs) at `to`.
  void replace_all_uses(Value* from, Value* to);
  void set_input(Node* node, int index, Value* v);
  // Removes a node whose outputs have no uses and are not graph outputs.
  void erase_node(Node* node);
  // Removes constants that nothing uses.
  bool erase_unused_constants();

  const std::list<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  const std::vector<Value*>& constants() const { return constants_; }
  size_t num_nodes() const { return nodes_.size(); }
  bool is_output(const Value* v) const { return v->output_refs > 0; }

  // Gives `v` a specific id (the parser keeps the ids of the text); later ids stay above it.
  void set_id(Value* v, int id);

  // Deep copy (new ids are the same as the old ones; group bodies are copied too).
  std::unique_ptr<Graph> clone() const;

 private:
  Value* new_value(ValueKind kind, const ops::TensorMeta& meta);
  Node* link_node(Node* before, ops::OpId op, const std::vector<Value*>& inputs, const ops::Attrs& attrs,
                  const std::vector<ops::TensorMeta>& out_metas);
  void add_use(Node* node, size_t index, Value* v);
  void remove_use(Node* node, size_t index);
  int next_id_ = 0;
  std::list<std::unique_ptr<Node>> nodes_;
  std::vector<std::unique_ptr<Value>> values_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::vector<Value*> constants_;
  std::vector<std::pair<size_t, size_t>> updates_;
};

}  // namespace smelt::ir
