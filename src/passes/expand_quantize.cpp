#include "passes/expand_quantize.h"

#include <cmath>
#include <limits>

#include "ops/dispatch.h"
#include "smelt/creation.h"

namespace smelt::passes {
namespace {

using ops::OpId;

// The one value of a one-element constant, as a double; false otherwise.
bool scalar_constant(const ir::Value* v, double* out) {
  if (v->kind != ir::ValueKind::Constant || v->constant.numel() != 1) return false;
  *out = v->constant.to_vector()[0];
  return true;
}

// The op's parameters when it can be expanded: a positive finite float32 scale and a zero point
// of one element each, constants.
bool expandable(const ir::Node* node, double* scale, double* zero_point) {
  if (node->inputs.size() != 3 || node->inputs[1]->meta.dtype != DType::Float32) return false;
  // dequantize_linear of int32 accumulators stays an op (float32(q) would round there).
  const DType q = node->op == ops::OpId::dequantize_linear ? node->inputs[0]->meta.dtype : node->outputs[0]->meta.dtype;
  if (q != DType::UInt8 && q != DType::Int8) return false;
  if (!scalar_constant(node->inputs[1], scale) || !scalar_constant(node->inputs[2], zero_point)) return false;
  return std::isfinite(*scale) && *scale > 0;
}

void byte_range(DType d, double* lo, double* hi) {
  *lo = d == DType::UInt8 ? 0 : -128;
  *hi = d == DType::UInt8 ? 255 : 127;
}

ir::Value* scalar(ir::Graph& g, double v, DType d) { return g.add_constant(full({}, v, d)); }

ir::Value* expand_dequantize(ir::Graph& g, ir::Node* n, double scale, double zero_point) {
  ir::Value* q = n->inputs[0];
  ir::Value* f = g.insert_node(n, OpId::cast, {q}, {{"dtype", DType::Float32}})->outputs[0];
  if (zero_point != 0) f = g.insert_node(n, OpId::sub, {f, scalar(g, zero_point, DType::Float32)}, {})->outputs[0];
  // A rank-0 scale (the op's may be shaped (1), which would broadcast a rank-0 q to (1)).
  return g.insert_node(n, OpId::mul, {f, scalar(g, scale, DType::Float32)}, {})->outputs[0];
}

ir::Value* expand_quantize_one(ir::Graph& g, ir::Node* n, double scale, double zero_point) {
  ir::Value* x = n->inputs[0];
  const DType out = n->outputs[0]->meta.dtype;
  double lo, hi;
  byte_range(out, &lo, &hi);
  // The division in x's dtype, as the op's kernel divides (a float64 x by the float32 scale
  // widened, exactly), by a rank-0 scale (the op's may be shaped (1): no broadcast may change x's
  // shape).
  ir::Value* s = scalar(g, scale, x->meta.dtype);
  // A relu before it is the clamp's own lower bound when that bound is 0 (zero point = the dtype's
  // minimum): negatives, -0 and +0 all land on 0, NaN stays NaN (relu passes it).
  if (lo - zero_point == 0 && x->producer && x->producer->op == OpId::relu) x = x->producer->inputs[0];
  ir::Value* v = g.insert_node(n, OpId::div, {x, s}, {})->outputs[0];
  v = g.insert_node(n, OpId::round, {v}, {})->outputs[0];
  v = g.insert_node(n, OpId::clamp, {v}, {{"min", lo - zero_point}, {"max", hi - zero_point}})->outputs[0];
  // With zero point 0 the clamped value is the stored one, and the cast's NaN -> 0 is the zero
  // point already.
  if (zero_point == 0) return g.insert_node(n, OpId::cast, {v}, {{"dtype", out}})->outputs[0];
  v = g.insert_node(n, OpId::cast, {v}, {{"dtype", DType::Int32}})->outputs[0];
  v = g.insert_node(n, OpId::add, {v, scalar(g, zero_point, DType::Int32)}, {})->outputs[0];
  return g.insert_node(n, OpId::cast, {v}, {{"dtype", out}})->outputs[0];
}

}  // namespace

bool expand_quantize(ir::Graph& graph) {
  std::vector<ir::Node*> candidates;
  for (const auto& node : graph.nodes()) {
    if (node->op == OpId::quantize_linear || node->op == OpId::dequantize_linear) candidates.push_back(node.get());
  }
  bool changed = false;
  for (ir::Node* n : candidates) {
    double scale, zero_point;
    if (!expandable(n, &scale, &zero_point)) continue;
    const bool quantize = n->op == OpId::quantize_linear;
    // quantize_linear of a float64 x divides in float64 (the op's kernel too); float16 and the
    // like are not quantizable inputs.
    if (quantize && !dtype_is_floating(n->inputs[0]->meta.dtype)) continue;
    ir::Value* y = quantize ? expand_quantize_one(graph, n, scale, zero_point)
                            : expand_dequantize(graph, n, scale, zero_point);
    graph.replace_all_uses(n->outputs[0], y);
    graph.erase_node(n);
    changed = true;
  }
  if (changed) graph.erase_unused_constants();
  return changed;
}

}  // namespace smelt::passes
