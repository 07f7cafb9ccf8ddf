#include "ir/graph.h"

#include <algorithm>
#include <unordered_map>

#include "ir/constant.h"
#include "ir/printer.h"
#include "ops/dispatch.h"

namespace smelt::ir {

const char* value_kind_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::Input: return "input";
    case ValueKind::Param: return "param";
    case ValueKind::Constant: return "constant";
    case ValueKind::Computed: return "computed";
  }
  return "?";
}

Node::Node() = default;
Node::~Node() = default;
Graph::Graph() = default;
Graph::~Graph() = default;

Value* Graph::new_value(ValueKind kind, const ops::TensorMeta& meta) {
  SMELT_CHECK(next_id_ < kMaxValueId) << "a graph holds at most " << kMaxValueId << " values";
  auto v = std::make_unique<Value>();
  v->id = next_id_++;
  v->kind = kind;
  v->meta = meta;
  values_.push_back(std::move(v));
  return values_.back().get();
}

Value* Graph::add_input(const ops::TensorMeta& meta, const std::string& name, ValueKind kind) {
  SMELT_INTERNAL_CHECK(kind == ValueKind::Input || kind == ValueKind::Param);
  Value* v = new_value(kind, meta);
  v->name = name;
  inputs_.push_back(v);
  return v;
}

Value* Graph::add_constant(const Tensor& value) {
  Value* v = new_value(ValueKind::Constant, {value.shape(), value.dtype()});
  v->constant = value;
  constants_.push_back(v);
  return v;
}

Node* Graph::add_node(ops::OpId op, const std::vector<Value*>& inputs, const ops::Attrs& attrs) {
  return insert_node(nullptr, op, inputs, attrs);
}

Node* Graph::insert_node(Node* before, ops::OpId op, const std::vector<Value*>& inputs,
                         const ops::Attrs& attrs) {
  std::vector<ops::TensorMeta> in_metas;
  in_metas.reserve(inputs.size());
  for (Value* v : inputs) in_metas.push_back(v->meta);
  return link_node(before, op, inputs, attrs, ops::infer_shape(op, in_metas, attrs));
}

Node* Graph::add_group(const std::vector<Value*>& inputs, std::unique_ptr<Graph> body, Node* before,
                       const ops::Attrs& attrs) {
  SMELT_CHECK(body) << "group: a group node needs a body graph";
  SMELT_CHECK(body->inputs().size() == inputs.size())
      << "group: the body has " << body->inputs().size() << " inputs, the node passes " << inputs.size();
  for (size_t i = 0; i < inputs.size(); ++i) {
    SMELT_CHECK(body->inputs()[i]->meta == inputs[i]->meta)
        << "group: input " << i << " is " << meta_str(inputs[i]->meta) << " but the body's input "
        << value_ref(body->inputs()[i]) << " is " << meta_str(body->inputs()[i]->meta);
  }
  std::vector<ops::TensorMeta> out_metas;
  for (const Value* out : body->outputs()) out_metas.push_back(out->meta);
  Node* node = link_node(before, ops::OpId::group, inputs, attrs, out_metas);
  node->body = std::move(body);
  return node;
}

Node* Graph::link_node(Node* before, ops::OpId op, const std::vector<Value*>& inputs,
                       const ops::Attrs& attrs, const std::vector<ops::TensorMeta>& out_metas) {
  // Element counts must fit in int64 everywhere (strides, sizes, fold's limits); a shape rule
  // may combine valid inputs into a shape that does not (one_hot, embedding, expand).
  for (const ops::TensorMeta& m : out_metas) {
    int64_t numel = 1;
    for (int64_t d : m.shape) {
      SMELT_CHECK(d >= 0 && (d == 0 || !__builtin_mul_overflow(numel, d, &numel)))
          << ops::op_name(op) << ": output shape " << shape_str(m.shape) << " has more elements than int64 counts (size overflow)";
    }
  }
  auto owned = std::make_unique<Node>();
  Node* node = owned.get();
  node->op = op;
  node->attrs = attrs;
  node->inputs = inputs;
  node->use_slot_.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) add_use(node, i, inputs[i]);
  for (size_t k = 0; k < out_metas.size(); ++k) {
    Value* out = new_value(ValueKind::Computed, out_metas[k]);
    out->producer = node;
    out->output_index = int(k);
    node->outputs.push_back(out);
  }
  auto pos = before ? before->self_ : nodes_.end();
  node->self_ = nodes_.insert(pos, std::move(owned));
  return node;
}

void Graph::add_use(Node* node, size_t index, Value* v) {
  node->use_slot_[index] = v->uses.size();
  v->uses.push_back({node, int(index)});
}

void Graph::remove_use(Node* node, size_t index) {
  Value* v = node->inputs[index];
  size_t slot = node->use_slot_[index];
  SMELT_INTERNAL_CHECK(slot < v->uses.size() && v->uses[slot] == (Use{node, int(index)}))
      << "use list of " << value_ref(v) << " out of sync";
  Use last = v->uses.back();
  v->uses[slot] = last;
  last.node->use_slot_[size_t(last.index)] = slot;
  v->uses.pop_back();
}

void Graph::reorder_inputs(const std::vector<Value*>& order) {
  std::vector<Value*> sorted = order, current = inputs_;
  std::sort(sorted.begin(), sorted.end());
  std::sort(current.begin(), current.end());
  SMELT_INTERNAL_CHECK(sorted == current) << "Graph::reorder_inputs: not a permutation of the inputs";
  inputs_ = order;
}

void Graph::add_output(Value* v) {
  outputs_.push_back(v);
  ++v->output_refs;
}

void Graph::set_output(size_t i, Value* v) {
  --outputs_.at(i)->output_refs;
  outputs_[i] = v;
  ++v->output_refs;
}

void Graph::set_outputs(std::vector<Value*> outputs) {
  for (Value* v : outputs_) --v->output_refs;
  outputs_ = std::move(outputs);
  for (Value* v : outputs_) ++v->output_refs;
}

void Graph::set_input(Node* node, int index, Value* v) {
  remove_use(node, size_t(index));
  node->inputs[size_t(index)] = v;
  add_use(node, size_t(index), v);
}

void Graph::replace_all_uses(Value* from, Value* to) {
  if (from == to) return;
  // set_input swaps the last use into the removed slot: taking from the back moves nothing.
  while (!from->uses.empty()) {
    Use u = from->uses.back();
    set_input(u.node, u.index, to);
  }
  if (from->output_refs == 0) return;
  for (Value*& out : outputs_) {
    if (out == from) out = to;
  }
  to->output_refs += from->output_refs;
  from->output_refs = 0;
}

bool holds_op(const Graph& g, ops::OpId op) {
  for (const auto& n : g.nodes()) {
    if (n->op == op || (n->body && holds_op(*n->body, op))) return true;
  }
  return false;
}

bool Node::must_run() const {
  if (body) {
    for (const auto& n : body->nodes()) if (n->must_run()) return true;
    return false;
  }
  if (ops::mutates_any(op)) return true;
  if (op == ops::OpId::div && inputs.size() == 2 && is_integer_constant_without_zeros(inputs[1])) return false;
  if (quantized_op_cannot_refuse(op, inputs)) return false;
  std::vector<ops::TensorMeta> in;
  for (const Value* v : inputs) in.push_back(v->meta);
  return ops::may_refuse_values(op, in);
}

void Graph::erase_node(Node* node) {
  for (Value* out : node->outputs) {
    SMELT_INTERNAL_CHECK(out->is_dead())
        << "erase_node: %" << out->id << " of " << node->name() << " is still used";
  }
  for (size_t i = 0; i < node->inputs.size(); ++i) remove_use(node, i);
  for (Value* out : node->outputs) out->producer = nullptr;
  nodes_.erase(node->self_);
}

bool Graph::erase_unused_constants() {
  size_t before = constants_.size();
  constants_.erase(std::remove_if(constants_.begin(), constants_.end(), [](Value* c) { return c->is_dead(); }),
                   constants_.end());
  return constants_.size() != before;
}

void Graph::set_id(Value* v, int id) {
  SMELT_CHECK(id >= 0 && id < kMaxValueId) << "value id " << id << " is out of range [0, " << kMaxValueId << ")";
  v->id = id;
  next_id_ = std::max(next_id_, id + 1);
}

void Graph::set_output_updates(size_t output, size_t input) {
  SMELT_CHECK(output < outputs_.size() && input < inputs_.size())
      << "graph: output " << output << " updates input " << input << ", but the graph has "
      << outputs_.size() << " outputs and " << inputs_.size() << " inputs";
  for (const auto& [o, i] : updates_) {
    SMELT_CHECK(o != output && i != input)
        << "graph: output " << output << " updates input " << input << ", but output " << o
        << " already updates input " << i << "; one update per output and per input";
  }
  updates_.emplace_back(output, input);
}

void Graph::move_node(Node* node, Node* before) {
  nodes_.splice(before ? before->self_ : nodes_.end(), nodes_, node->self_);
}

std::unique_ptr<Graph> Graph::clone() const {
  auto g = std::make_unique<Graph>();
  std::unordered_map<const Value*, Value*> map;
  auto copy_value = [&](const Value* v, Value* nv) {
    nv->id = v->id;
    nv->name = v->name;
    map[v] = nv;
  };
  for (Value* v : inputs_) copy_value(v, g->add_input(v->meta, v->name, v->kind));
  for (Value* v : constants_) copy_value(v, g->add_constant(v->constant));
  for (const auto& n : nodes_) {
    std::vector<Value*> ins;
    for (Value* v : n->inputs) ins.push_back(map.at(v));
    Node* nn;
    if (n->body) {
      nn = g->add_group(ins, n->body->clone(), nullptr, n->attrs);
    } else {
      std::vector<ops::TensorMeta> metas;
      for (const Value* out : n->outputs) metas.push_back(out->meta);
      nn = g->link_node(nullptr, n->op, ins, n->attrs, metas);
    }
    for (size_t k = 0; k < n->outputs.size(); ++k) copy_value(n->outputs[k], nn->outputs[k]);
  }
  for (Value* v : outputs_) g->add_output(map.at(v));
  g->updates_ = updates_;
  g->next_id_ = next_id_;
  return g;
}

}  // namespace smelt::ir
