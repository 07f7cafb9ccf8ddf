// QDQ chains to integer ops (passes/fold_qdq.h).
#include "passes/fold_qdq.h"

#include <cmath>
#include <optional>
#include <variant>

#include "ops/dispatch.h"
#include "passes/dce.h"
#include "quant/quantize_graph.h"
#include "smelt/creation.h"
#include "smelt/ops.h"
#include "smelt/quantize.h"

namespace smelt::passes {
namespace {

using ops::OpId;

// The single node reading `v`, when `v` has exactly one use and is not a graph output.
ir::Node* only_reader(const ir::Value* v) {
  if (v->uses.size() != 1 || v->is_output()) return nullptr;
  return v->uses[0].node;
}

bool is_quantized(DType t) { return t == DType::UInt8 || t == DType::Int8; }
bool is_constant(const ir::Value* v) { return v->kind == ir::ValueKind::Constant; }
bool is_scalar_constant(const ir::Value* v) { return is_constant(v) && shape_numel(v->meta.shape) == 1; }

// dequantize_linear(q, scale, zero_point) feeding a product: its three inputs and axis.
struct Dequantized {
  ir::Value* q = nullptr;
  ir::Value* scale = nullptr;
  ir::Value* zero_point = nullptr;
  int64_t axis = 1;
};

std::optional<Dequantized> dequantized(const ir::Value* v) {
  const ir::Node* n = v->producer;
  if (!n || n->op != OpId::dequantize_linear || n->inputs.size() != 3) return std::nullopt;
  if (!is_constant(n->inputs[1]) || !is_constant(n->inputs[2])) return std::nullopt;
  return Dequantized{n->inputs[0], n->inputs[1], n->inputs[2], n->attrs.get_int("axis", 1)};
}

// An activation's: per tensor, of uint8/int8 values.
std::optional<Dequantized> dequantized_activation(const ir::Value* v) {
  std::optional<Dequantized> d = dequantized(v);
  if (!d || !is_quantized(d->q->meta.dtype) || !is_scalar_constant(d->scale) || !is_scalar_constant(d->zero_point)) {
    return std::nullopt;
  }
  return d;
}

// A weight's: int8/uint8 constant values, per tensor or per channel along `axis`.
std::optional<Dequantized> dequantized_weight(const ir::Value* v, int64_t axis) {
  std::optional<Dequantized> d = dequantized(v);
  if (!d || !is_constant(d->q) || !is_quantized(d->q->meta.dtype)) return std::nullopt;
  const Shape& s = d->q->meta.shape;
  const int64_t rank = int64_t(s.size());
  const bool per_tensor = is_scalar_constant(d->scale) && is_scalar_constant(d->zero_point);
  const int64_t a = d->axis < 0 ? d->axis + rank : d->axis;
  const bool per_channel = a == axis && d->scale->meta.shape == Shape{s[size_t(axis)]} &&
                           d->zero_point->meta.shape == Shape{s[size_t(axis)]};
  if (!per_tensor && !per_channel) return std::nullopt;
  return d;
}

// The quantize_linear that alone reads `v`, per tensor with constant parameters.
ir::Node* requantizing_reader(const ir::Value* v) {
  ir::Node* q = only_reader(v);
  if (!q || q->op != OpId::quantize_linear || q->inputs[0] != v) return nullptr;
  if (!is_scalar_constant(q->inputs[1]) || !is_scalar_constant(q->inputs[2])) return nullptr;
  return q;
}

quant::QuantParams params_of(const ir::Node* quantize) {
  quant::QuantParams p;
  p.scale = float(quantize->inputs[1]->constant.to_vector()[0]);
  p.zero_point = int32_t(quantize->inputs[2]->constant.to_vector()[0]);
  p.dtype = quantize->outputs[0]->meta.dtype;
  return p;
}

// Per output channel: the weight's scales, `channels` of them (one repeated for per tensor).
std::vector<float> channel_scales(const Dequantized& w, int64_t channels) {
  const std::vector<double> v = w.scale->constant.to_vector();
  std::vector<float> out;
  for (int64_t c = 0; c < channels; ++c) out.push_back(float(v.size() == 1 ? v[0] : v[size_t(c)]));
  return out;
}

// Whether `b` adds one value per output channel to a product of `shape`: along dim 1 of a conv's
// (N, O, H, W), (1, O, 1, 1) or (O, 1, 1); along the last dim of a matmul's (.., N), (N) or (1, .., N).
bool per_channel_operand(const Shape& b, const Shape& shape, bool conv) {
  const int64_t channels = conv ? shape[1] : shape.back();
  if (shape_numel(b) != channels || b.size() > shape.size()) return false;
  if (conv) return (b.size() == 4 && b[0] == 1 && b[1] == channels) || (b.size() == 3 && b[0] == channels);
  return !b.empty() && b.back() == channels;
}

// A bias operand (a constant, a dequantized int32 constant, either reshaped) in int32 units of
// sx * sw: a dequantized int32 constant's integers when its scale is exactly that, else the float
// values rounded. Undefined when the operand is none of these.
Tensor bias_in_accumulator_units(const ir::Value* b, float sx, const std::vector<float>& sw) {
  const int64_t channels = int64_t(sw.size());
  if (shape_numel(b->meta.shape) != channels || b->meta.dtype != DType::Float32) return {};
  const ir::Value* source = b->producer && b->producer->op == OpId::reshape ? b->producer->inputs[0] : b;
  if (is_constant(source) && source->meta.dtype == DType::Float32) return quant::bias_as_int32(source->constant, sx, sw);
  const std::optional<Dequantized> d = dequantized(source);
  if (!d || !is_constant(d->q) || d->q->meta.shape != Shape{channels}) return {};
  const std::vector<double> scale = d->scale->constant.to_vector(), zero = d->zero_point->constant.to_vector();
  bool exact = d->q->meta.dtype == DType::Int32;
  for (int64_t c = 0; exact && c < channels; ++c) {
    const size_t i = scale.size() == 1 ? 0 : size_t(c);
    exact = zero[zero.size() == 1 ? 0 : size_t(c)] == 0 && float(scale[i]) == sx * sw[size_t(c)];
  }
  if (exact) return d->q->constant.contiguous();
  const Tensor values = dequantize_linear(d->q->constant, d->scale->constant, d->zero_point->constant, 0);
  return quant::bias_as_int32(values, sx, sw);
}

// An operand of the integer op: a value of the graph, or a constant to add.
using Operand = std::variant<ir::Value*, Tensor>;

Tensor scalar_f32(const ir::Value* v) { return full({}, v->constant.to_vector()[0], DType::Float32); }
Tensor scalar_like(const ir::Value* v) { return full({}, v->constant.to_vector()[0], v->meta.dtype); }
// A weight's parameter: rank 0 when per tensor, as the integer ops take it.
Operand weight_param(ir::Value* v) { return is_scalar_constant(v) ? Operand(scalar_like(v)) : Operand(v); }

// `op` on `operands`, inserted before `before`; null, with the graph untouched, when its shape
// rule refuses them (the chain then stays float).
ir::Node* insert_if_valid(ir::Graph& g, ir::Node* before, OpId op, const std::vector<Operand>& operands,
                          const ops::Attrs& attrs) {
  std::vector<ops::TensorMeta> metas;
  for (const Operand& o : operands) {
    metas.push_back(std::holds_alternative<Tensor>(o) ? ops::meta_of(std::get<Tensor>(o)) : std::get<ir::Value*>(o)->meta);
  }
  try {
    ops::infer_shape(op, metas, attrs);
  } catch (const Error& e) {
    if (e.internal()) throw;
    return nullptr;
  }
  std::vector<ir::Value*> inputs;
  for (const Operand& o : operands) {
    inputs.push_back(std::holds_alternative<Tensor>(o) ? g.add_constant(std::get<Tensor>(o)) : std::get<ir::Value*>(o));
  }
  return g.insert_node(before, op, inputs, attrs);
}

// The chain a product heads: [+ bias] [rectifier], then the quantize_linear that alone reads it.
// Its bias in accumulator units (zeros without one). False when the chain cannot fold.
bool find_chain(ir::Node* product, float sx, const std::vector<float>& sw, quant::QuantizableOp* chain,
                ir::Node** quantize, Tensor* bias) {
  const bool conv = product->op == OpId::conv2d;
  chain->product = product;
  chain->output = product->outputs[0];
  *bias = zeros({int64_t(sw.size())}, DType::Int32);
  if (ir::Node* add = only_reader(chain->output); add && add->op == OpId::add &&
                                                   add->outputs[0]->meta.shape == chain->output->meta.shape) {
    const ir::Value* other = add->inputs[0] == chain->output ? add->inputs[1] : add->inputs[0];
    if (!per_channel_operand(other->meta.shape, chain->output->meta.shape, conv)) return false;
    *bias = bias_in_accumulator_units(other, sx, sw);
    if (!bias->defined()) return false;
    chain->bias = add;
    chain->output = add->outputs[0];
  }
  quant::find_rectifier(chain->output, chain);
  *quantize = requantizing_reader(chain->output);
  return *quantize && quant::rectifier_stays(*chain, params_of(*quantize)).empty();
}

// conv2d(DQ(x), DQ(W)) [+ bias] [rectifier] -> quantize_linear: one qlinear_conv2d.
bool fold_conv(ir::Graph& g, ir::Node* conv) {
  const std::optional<Dequantized> x = dequantized_activation(conv->inputs[0]);
  const std::optional<Dequantized> w = dequantized_weight(conv->inputs[1], 0);
  if (!x || !w) return false;
  const float sx = float(x->scale->constant.to_vector()[0]);
  const std::vector<float> sw = channel_scales(*w, conv->inputs[1]->meta.shape[0]);
  quant::QuantizableOp chain;
  ir::Node* quantize = nullptr;
  Tensor bias;
  if (!find_chain(conv, sx, sw, &chain, &quantize, &bias)) return false;
  const ops::Attrs& a = conv->attrs;
  const std::vector<int64_t>& p = a.get_ints("padding");
  ir::Node* q = insert_if_valid(
      g, quantize, OpId::qlinear_conv2d,
      {x->q, scalar_f32(x->scale), scalar_like(x->zero_point), w->q, weight_param(w->scale), weight_param(w->zero_point),
       scalar_f32(quantize->inputs[1]), scalar_like(quantize->inputs[2]), bias},
      {{"stride", a.get_ints("stride")},
       {"padding", std::vector<int64_t>{p[0], p[1], p[0], p[1]}},
       {"dilation", a.get_ints("dilation")},
       {"groups", a.get_int("groups")}});
  if (!q) return false;
  g.replace_all_uses(quantize->outputs[0], q->outputs[0]);
  return true;
}

// matmul(DQ(x), W) [+ bias] [rectifier] -> quantize_linear with W = DQ(Wq) per column, or
// permute(DQ(Wq)) per row (a Gemm's transposed weight): one qlinear_matmul.
bool fold_matmul(ir::Graph& g, ir::Node* mm) {
  const std::optional<Dequantized> x = dequantized_activation(mm->inputs[0]);
  if (!x || mm->inputs[1]->meta.shape.size() != 2) return false;
  std::optional<Dequantized> w = dequantized_weight(mm->inputs[1], 1);
  Tensor values;
  if (w) {
    values = w->q->constant;
  } else if (const ir::Node* t = mm->inputs[1]->producer;
             t && t->op == OpId::permute && t->attrs.get_ints("dims") == std::vector<int64_t>{1, 0}) {
    w = dequantized_weight(t->inputs[0], 0);
    if (!w) return false;
    values = contiguous(w->q->constant.permute({1, 0}));
  } else {
    return false;
  }
  const float sx = float(x->scale->constant.to_vector()[0]);
  const std::vector<float> sw = channel_scales(*w, values.shape()[1]);
  quant::QuantizableOp chain;
  ir::Node* quantize = nullptr;
  Tensor bias;
  if (!find_chain(mm, sx, sw, &chain, &quantize, &bias)) return false;
  ir::Node* q = insert_if_valid(g, quantize, OpId::qlinear_matmul,
                                {x->q, scalar_f32(x->scale), scalar_like(x->zero_point), values, weight_param(w->scale),
                                 weight_param(w->zero_point), scalar_f32(quantize->inputs[1]),
                                 scalar_like(quantize->inputs[2]), bias},
                                {});
  if (!q) return false;
  g.replace_all_uses(quantize->outputs[0], q->outputs[0]);
  return true;
}

}  // namespace

bool fold_qdq(ir::Graph& graph) {
  std::vector<ir::Node*> products;
  for (const auto& node : graph.nodes()) {
    if (!node->is_group() && (node->op == OpId::conv2d || node->op == OpId::matmul)) products.push_back(node.get());
  }
  bool changed = false;
  for (ir::Node* p : products) changed |= p->op == OpId::conv2d ? fold_conv(graph, p) : fold_matmul(graph, p);
  if (changed) dce(graph);
  return changed;
}

}  // namespace smelt::passes
