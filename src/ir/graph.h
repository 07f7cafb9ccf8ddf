// The graph IR: SSA values produced by nodes, nodes kept in topological order.
//
// A Value is a graph input (a user input or a parameter), a constant (holding its tensor), or an
// output of a Node. A Node applies one op from the op table to input values. The same value may
// feed one node twice (x * x): use lists hold one entry per edge, so passes see both.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "ops/op_table.h"

namespace smelt::ir {

class Node;

enum class ValueKind : uint8_t { Input, Param, Constant, Computed };
const char* value_kind_name(ValueKind kind);

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
  std::vector<Use> uses;

  bool is_graph_input() const { return kind == ValueKind::Input || kind == ValueKind::Param; }
};

class Node {
 public:
  ops::OpId op;
  ops::Attrs attrs;
  std::vector<Value*> inputs;
  std::vector<Value*> outputs;

  const char* name() const { return ops::op_name(op); }
};

class Graph {
 public:
  Graph() = default;
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
  void add_output(Value* v) { outputs_.push_back(v); }
  void set_output(size_t i, Value* v) { outputs_[i] = v; }
  void set_outputs(std::vector<Value*> outputs) { outputs_ = std::move(outputs); }

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
  bool is_output(const Value* v) const;

  // Gives `v` a specific id (the parser keeps the ids of the text); later ids stay above it.
  void set_id(Value* v, int id);
  int next_id() const { return next_id_; }

  // Deep copy (new ids are the same as the old ones).
  std::unique_ptr<Graph> clone() const;

 private:
  Value* new_value(ValueKind kind, const ops::TensorMeta& meta);
  int next_id_ = 0;
  std::list<std::unique_ptr<Node>> nodes_;
  std::vector<std::unique_ptr<Value>> values_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::vector<Value*> constants_;
};

}  // namespace smelt::ir
