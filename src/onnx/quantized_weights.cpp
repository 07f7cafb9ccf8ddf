// Weights read back through their dequantize_linear (onnx/quantized_weights.h).
#include "onnx/quantized_weights.h"

#include <map>

namespace smelt::onnx_import {
namespace {

using ops::OpId;

bool same_layout(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.strides() == b.strides() && a.offset() == b.offset();
}

// `t` is the 2-D transpose of `of` (a view of the same memory).
bool transposed(const Tensor& t, const Tensor& of) {
  return t.dim() == 2 && of.dim() == 2 && t.size(0) == of.size(1) && t.size(1) == of.size(0) &&
         t.stride(0) == of.stride(1) && t.stride(1) == of.stride(0) && t.offset() == of.offset();
}

}  // namespace

void restore_quantized_weights(ir::Graph& graph, const std::vector<DequantizedWeight>& weights) {
  if (weights.empty()) return;
  std::map<const Storage*, const DequantizedWeight*> by_storage;
  for (const DequantizedWeight& w : weights) by_storage[w.value.storage().get()] = &w;
  std::map<const DequantizedWeight*, ir::Value*> dequantized;  // one node per weight
  std::vector<ir::Node*> products;
  for (const auto& node : graph.nodes()) {
    if (!node->is_group() && (node->op == OpId::conv2d || node->op == OpId::matmul)) products.push_back(node.get());
  }
  for (ir::Node* product : products) {
    const ir::Value* v = product->inputs[1];
    if (v->kind != ir::ValueKind::Constant || !v->constant.storage()) continue;
    auto it = by_storage.find(v->constant.storage().get());
    if (it == by_storage.end()) continue;
    const DequantizedWeight& w = *it->second;
    const bool same = same_layout(v->constant, w.value);
    const bool transpose = !same && product->op == OpId::matmul && transposed(v->constant, w.value);
    if (!same && !transpose) continue;
    ir::Value*& dq = dequantized[&w];
    if (!dq) {
      dq = graph.insert_node(graph.nodes().front().get(), OpId::dequantize_linear,
                             {graph.add_constant(w.q), graph.add_constant(w.scale), graph.add_constant(w.zero_point)},
                             {{"axis", w.axis}})
               ->outputs[0];
    }
    ir::Value* operand = dq;
    if (transpose) {
      operand = graph.insert_node(product, OpId::permute, {dq}, {{"dims", std::vector<int64_t>{1, 0}}})->outputs[0];
    }
    graph.set_input(product, 1, operand);
  }
}

}  // namespace smelt::onnx_import
