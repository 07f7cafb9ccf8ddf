#include "passes/sink_dequantize.h"

#include <cmath>

#include "ops/dispatch.h"

namespace smelt::passes {
namespace {

using ops::OpId;

bool one_value(const ir::Value* v) { return v->kind == ir::ValueKind::Constant && v->constant.numel() == 1; }

// A per-tensor dequantize of bytes with a positive finite constant scale.
bool monotone_dequantize(const ir::Node* n) {
  if (!n || n->op != OpId::dequantize_linear) return false;
  const DType q = n->inputs[0]->meta.dtype;
  if (q != DType::UInt8 && q != DType::Int8) return false;
  if (!one_value(n->inputs[1]) || !one_value(n->inputs[2]) || n->inputs[1]->meta.dtype != DType::Float32) return false;
  const double s = n->inputs[1]->constant.to_vector()[0];
  return std::isfinite(s) && s > 0;
}

// Every window of the pooling holds a tap inside the image.
bool windows_touch_the_image(const ir::Node* pool) {
  const ops::Attrs& a = pool->attrs;
  const std::vector<int64_t> kernel = a.get_ints("kernel"), padding = a.get_ints("padding");
  const std::vector<int64_t> dilation = a.has("dilation") ? a.get_ints("dilation") : std::vector<int64_t>{1, 1};
  for (size_t d = 0; d < 2; ++d) {
    const int64_t k = kernel[kernel.size() == 1 ? 0 : d], p = padding[padding.size() == 1 ? 0 : d];
    const int64_t dil = dilation[dilation.size() == 1 ? 0 : d];
    if (dil != 1 || p >= k) return false;
  }
  return true;
}

}  // namespace

bool sink_dequantize(ir::Graph& graph) {
  std::vector<ir::Node*> pools;
  for (const auto& node : graph.nodes()) {
    if (node->op == OpId::max_pool2d) pools.push_back(node.get());
  }
  bool changed = false;
  for (ir::Node* pool : pools) {
    ir::Node* dq = pool->inputs[0]->producer;
    if (!monotone_dequantize(dq) || !windows_touch_the_image(pool)) continue;
    if (!pool->outputs[1]->uses.empty() || graph.is_output(pool->outputs[1])) continue;
    ir::Node* bytes = graph.insert_node(pool, OpId::max_pool2d, {dq->inputs[0]}, pool->attrs);
    ir::Node* out = graph.insert_node(pool, OpId::dequantize_linear, {bytes->outputs[0], dq->inputs[1], dq->inputs[2]},
                                      dq->attrs);
    graph.replace_all_uses(pool->outputs[0], out->outputs[0]);
    graph.erase_node(pool);
    if (dq->outputs[0]->uses.empty() && !graph.is_output(dq->outputs[0])) graph.erase_node(dq);
    changed = true;
  }
  return changed;
}

}  // namespace smelt::passes
