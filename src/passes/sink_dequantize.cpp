#include "passes/sink_dequantize.h"

#include <algorithm>
#include <cmath>

#include "ops/dispatch.h"

namespace smelt::passes {
namespace {

using ops::OpId;

// |q - z| <= 255 times it stays below float32's largest value.
constexpr double kLargestExactScale = 3.4e38 / 256;

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

// Two constants of one value (per tensor), or the same value.
bool same_scalar(const ir::Value* a, const ir::Value* b) {
  if (a == b) return true;
  if (!one_value(a) || !one_value(b) || a->meta.dtype != b->meta.dtype) return false;
  return a->constant.to_vector()[0] == b->constant.to_vector()[0];
}

bool same_dequantize(const ir::Node* a, const ir::Node* b) {
  return a->inputs[0]->meta.dtype == b->inputs[0]->meta.dtype && same_scalar(a->inputs[1], b->inputs[1]) &&
         same_scalar(a->inputs[2], b->inputs[2]);
}

bool sink_through_cats(ir::Graph& graph) {
  std::vector<ir::Node*> cats;
  for (const auto& node : graph.nodes()) {
    if (node->op == OpId::cat && !node->inputs.empty()) cats.push_back(node.get());
  }
  bool changed = false;
  for (ir::Node* cat : cats) {
    const ir::Node* first = cat->inputs[0]->producer;
    if (!monotone_dequantize(first)) continue;
    std::vector<ir::Value*> bytes;
    for (const ir::Value* in : cat->inputs) {
      const ir::Node* dq = in->producer;
      if (!monotone_dequantize(dq) || !same_dequantize(dq, first)) break;
      bytes.push_back(dq->inputs[0]);
    }
    if (bytes.size() != cat->inputs.size()) continue;
    std::vector<ir::Node*> dequantizes;  // (one may feed the cat twice)
    for (const ir::Value* in : cat->inputs) {
      if (std::find(dequantizes.begin(), dequantizes.end(), in->producer) == dequantizes.end()) {
        dequantizes.push_back(in->producer);
      }
    }
    ir::Node* joined = graph.insert_node(cat, OpId::cat, bytes, cat->attrs);
    ir::Node* out = graph.insert_node(cat, OpId::dequantize_linear,
                                      {joined->outputs[0], first->inputs[1], first->inputs[2]}, first->attrs);
    graph.replace_all_uses(cat->outputs[0], out->outputs[0]);
    graph.erase_node(cat);
    for (ir::Node* dq : dequantizes) {
      if (dq->outputs[0]->uses.empty() && !graph.is_output(dq->outputs[0])) graph.erase_node(dq);
    }
    changed = true;
  }
  return changed;
}

bool sink_through_pools(ir::Graph& graph) {
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

}  // namespace

bool cancel_requantize(ir::Graph& graph) {
  bool changed = false;
  for (const auto& node : graph.nodes()) {
    if (node->op != OpId::quantize_linear) continue;
    if (node->outputs[0]->uses.empty() && !graph.is_output(node->outputs[0])) continue;  // (done, or dead)
    const ir::Node* dq = node->inputs[0]->producer;
    if (!dq || dq->op != OpId::dequantize_linear) continue;
    // a graph output stays a value some node computes (not an input returned as an output)
    if (graph.is_output(node->outputs[0]) && !dq->inputs[0]->producer) continue;
    if (dq->inputs[0]->meta.dtype != node->outputs[0]->meta.dtype) continue;
    if (!same_scalar(dq->inputs[1], node->inputs[1]) || !same_scalar(dq->inputs[2], node->inputs[2])) continue;
    // (q - z) * s must stay finite: past float32's range it would saturate to the dtype's end
    if (!one_value(node->inputs[1]) || !(std::fabs(node->inputs[1]->constant.to_vector()[0]) <= kLargestExactScale)) {
      continue;
    }
    graph.replace_all_uses(node->outputs[0], dq->inputs[0]);
    changed = true;
  }
  return changed;
}

bool sink_dequantize(ir::Graph& graph) {
  // Until neither moves: a pooling sunk may leave a concatenation of dequantizes (an SPP block,
  // cat(x, max_pool(x), ...)), and a concatenation sunk a pooling of a dequantize.
  bool changed = false;
  for (bool moved = true; moved;) {
    moved = sink_through_cats(graph);
    moved = sink_through_pools(graph) || moved;
    changed = changed || moved;
  }
  return cancel_requantize(graph) || changed;
}

}  // namespace smelt::passes
