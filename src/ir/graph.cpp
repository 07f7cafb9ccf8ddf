#include "ir/graph.h"

#include <algorithm>
#include <unordered_map>

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

Value* Graph::new_value(ValueKind kind, const ops::TensorMeta& meta) {
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
  for (Value* v : inputs) in_metas.push_back(v->meta);
  std::vector<ops::TensorMeta> out_metas = ops::infer_shape(op, in_metas, attrs);
  auto node = std::make_unique<Node>();
  node->op = op;
  node->attrs = attrs;
  node->inputs = inputs;
  for (size_t i = 0; i < inputs.size(); ++i) inputs[i]->uses.push_back({node.get(), int(i)});
  for (size_t k = 0; k < out_metas.size(); ++k) {
    Value* out = new_value(ValueKind::Computed, out_metas[k]);
    out->producer = node.get();
    out->output_index = int(k);
    node->outputs.push_back(out);
  }
  Node* raw = node.get();
  auto pos = nodes_.end();
  if (before) {
    pos = std::find_if(nodes_.begin(), nodes_.end(), [&](const auto& n) { return n.get() == before; });
  }
  nodes_.insert(pos, std::move(node));
  return raw;
}

bool Graph::is_output(const Value* v) const {
  return std::find(outputs_.begin(), outputs_.end(), v) != outputs_.end();
}

void Graph::set_input(Node* node, int index, Value* v) {
  Value* old = node->inputs[size_t(index)];
  auto it = std::find(old->uses.begin(), old->uses.end(), Use{node, index});
  SMELT_INTERNAL_CHECK(it != old->uses.end()) << "use list out of sync";
  old->uses.erase(it);
  node->inputs[size_t(index)] = v;
  v->uses.push_back({node, index});
}

void Graph::replace_all_uses(Value* from, Value* to) {
  if (from == to) return;
  std::vector<Use> uses = from->uses;
  for (const Use& u : uses) set_input(u.node, u.index, to);
  for (Value*& out : outputs_) {
    if (out == from) out = to;
  }
}

void Graph::erase_node(Node* node) {
  for (Value* out : node->outputs) {
    SMELT_INTERNAL_CHECK(out->uses.empty() && !is_output(out))
        << "erase_node: %" << out->id << " of " << node->name() << " is still used";
  }
  for (size_t i = 0; i < node->inputs.size(); ++i) {
    Value* in = node->inputs[i];
    auto it = std::find(in->uses.begin(), in->uses.end(), Use{node, int(i)});
    if (it != in->uses.end()) in->uses.erase(it);
  }
  for (Value* out : node->outputs) out->producer = nullptr;
  nodes_.remove_if([&](const auto& n) { return n.get() == node; });
}

bool Graph::erase_unused_constants() {
  size_t before = constants_.size();
  constants_.erase(std::remove_if(constants_.begin(), constants_.end(),
                                  [&](Value* c) { return c->uses.empty() && !is_output(c); }),
                   constants_.end());
  return constants_.size() != before;
}

void Graph::set_id(Value* v, int id) {
  v->id = id;
  next_id_ = std::max(next_id_, id + 1);
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
    Node* nn = g->add_node(n->op, ins, n->attrs);
    for (size_t k = 0; k < n->outputs.size(); ++k) copy_value(n->outputs[k], nn->outputs[k]);
  }
  for (Value* v : outputs_) g->add_output(map.at(v));
  g->next_id_ = next_id_;
  return g;
}

}  // namespace smelt::ir
