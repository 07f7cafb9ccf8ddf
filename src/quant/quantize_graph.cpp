// The quantize pass (quant/quantize_graph.h): products to integer ops, then the dequantize ->
// quantize pairs between them cancelled.
#include "quant/quantize_graph.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "ir/printer.h"
#include "ops/attrs.h"
#include "passes/dce.h"
#include "passes/sink_dequantize.h"
#include "smelt/creation.h"
#include "smelt/ops.h"
#include "smelt/quantize.h"

namespace smelt::quant {
namespace {

using ops::OpId;

struct WeightQuant {
  Tensor values;  // int8, the weight's shape
  Tensor scale;   // float32 (channels)
  std::vector<float> scales;
};

// Symmetric int8 per output channel (`axis` of w), by max |w|: no weight saturates.
WeightQuant quantize_weight(const Tensor& w, int64_t axis) {
  const int64_t channels = w.size(axis);
  std::vector<int64_t> other;
  for (int64_t d = 0; d < w.dim(); ++d) {
    if (d != axis) other.push_back(d);
  }
  const Tensor max_abs = amax(abs(w), other, false);
  WeightQuant q;
  for (int64_t c = 0; c < channels; ++c) {
    const float m = max_abs.data<float>()[c];
    const float s = m / 127.0f;
    q.scales.push_back(std::isfinite(s) && s > 0 ? s : 1.0f);  // an all-zero channel: any scale
  }
  q.scale = from_vector(q.scales, {channels});
  q.values = quantize_linear(w, q.scale, zeros({channels}, DType::Int8), axis);
  return q;
}

}  // namespace

Tensor bias_as_int32(const Tensor& bias, float sx, const std::vector<float>& sw) {
  const Tensor b = contiguous(bias.reshape({int64_t(sw.size())}));
  Tensor out = empty({int64_t(sw.size())}, DType::Int32);
  for (size_t c = 0; c < sw.size(); ++c) {
    const double v = std::nearbyint(double(b.data<float>()[c]) / (double(sx) * double(sw[c])));
    out.data<int32_t>()[c] = int32_t(std::clamp(v, -2147483648.0, 2147483647.0));
  }
  return out;
}

std::string rectifier_stays(const QuantizableOp& op, const QuantParams& y) {
  if (!op.relu) return "";
  // A relu folds into the requantization's saturation only at a zero point of the dtype's minimum
  // (calibration gives that; a hand-edited file or a QDQ model might not).
  const int32_t qmin = y.dtype == DType::UInt8 ? 0 : -128;
  if (y.zero_point != qmin) {
    return "its relu output's zero point " + std::to_string(y.zero_point) + " is not the dtype's minimum";
  }
  // An upper bound folds too when it never binds within the dtype: round(c / s) + zp >= qmax,
  // so that the saturation at qmax is where the bound would have put every value above it (in
  // float, as quantize_linear divides the bounded float32 value).
  const int32_t qmax = y.dtype == DType::UInt8 ? 255 : 127;
  if (std::isfinite(op.relu_max) && std::nearbyint(float(op.relu_max) / y.scale) + float(y.zero_point) < float(qmax)) {
    return "its rectifier's upper bound " + std::to_string(op.relu_max) + " is inside the output's range (scale " +
           std::to_string(y.scale) + ")";
  }
  return "";
}

namespace {

struct Rewriter {
  ir::Graph& g;
  const Calibration& cal;
  QuantizeReport& report;
  std::map<const ir::Value*, ir::Value*> quantized_input;  // x -> quantize_linear(x)

  // The calibration of `v`; a file from another graph (or pass pipeline) labels the id otherwise.
  const CalibratedValue* calibrated(const ir::Value* v) const {
    auto it = cal.values.find(v->id);
    if (it == cal.values.end()) return nullptr;
    SMELT_CHECK(it->second.label == ir::value_ref(v))
        << "quantize: the calibration of value " << v->id << " is labelled " << it->second.label << " but the graph's is "
        << ir::value_ref(v) << "; valid: a calibration of this graph, after the same passes";
    return &it->second;
  }
  ir::Value* scale_of(const QuantParams& p) { return g.add_constant(full({}, p.scale, DType::Float32)); }
  ir::Value* zero_point_of(const QuantParams& p) { return g.add_constant(full({}, p.zero_point, p.dtype)); }

  ir::Value* quantize_input(ir::Node* before, ir::Value* x, const QuantParams& p) {
    auto it = quantized_input.find(x);
    if (it != quantized_input.end()) return it->second;
    ir::Node* q = g.insert_node(before, OpId::quantize_linear, {x, scale_of(p), zero_point_of(p)}, {{"axis", int64_t(1)}});
    quantized_input[x] = q->outputs[0];
    return q->outputs[0];
  }

  // What an output is requantized to: its own calibration, unless it reaches a calibrated value
  // (the input of a later product) only through concatenations and max poolings: that value's,
  // shared by every input of a concatenation, so that the concatenation and the pooling move
  // bytes between the products (passes/sink_dequantize.h) instead of dequantizing and quantizing
  // again (a pooling's output lies within its input's range, a concatenation's holds each input's).
  const CalibratedValue* output_calibration(const QuantizableOp& op) const {
    const ir::Value* y = op.output;
    const ir::Value* v = y;
    while (v->uses.size() == 1 && !g.is_output(v)) {
      const ir::Node* reader = v->uses[0].node;
      const bool moves_bytes =
          reader->op == OpId::cat || (reader->op == OpId::max_pool2d && reader->outputs[1]->uses.empty() &&
                                      !g.is_output(reader->outputs[1]));
      if (!moves_bytes) break;
      v = reader->outputs[0];
    }
    const CalibratedValue* shared = v != y ? calibrated(v) : nullptr;
    // (a rectifier folds only into an output range that starts at the real 0: a concatenation
    // with signed values may not, and then the output keeps its own calibration)
    if (shared && rectifier_stays(op, shared->params).empty()) return shared;
    return calibrated(y);
  }

  void rewrite(const QuantizableOp& op) {
    const CalibratedValue* cx = calibrated(op.input);
    const CalibratedValue* cy = output_calibration(op);
    if (!cx || !cy) {
      report.skipped.push_back(std::string(op.product->name()) + " " + ir::value_ref(op.product->outputs[0]) +
                               ": not calibrated");
      return;
    }
    if (const std::string why = rectifier_stays(op, cy->params); !why.empty()) {
      report.skipped.push_back(std::string(op.product->name()) + " " + ir::value_ref(op.product->outputs[0]) + ": " +
                               why + " (threshold " + std::to_string(cy->threshold) + ")");
      return;
    }
    const bool conv = op.product->op == OpId::conv2d;
    ir::Node* at = op.product;
    const Tensor& w = op.weight;
    const WeightQuant wq = quantize_weight(w, conv ? 0 : 1);
    const int64_t channels = int64_t(wq.scales.size());
    // The product reads its input now through what an earlier rewrite put there (a dequantize),
    // calibrated as the value it replaced (op.input).
    ir::Value* xq = quantize_input(at, op.product->inputs[0], cx->params);
    ir::Value* w_values = g.add_constant(wq.values);
    ir::Value* w_scale = g.add_constant(wq.scale);
    ir::Value* w_zero = g.add_constant(zeros({channels}, DType::Int8));
    ir::Value* y_scale = scale_of(cy->params);
    ir::Value* y_zero = zero_point_of(cy->params);
    Tensor bias = zeros({channels}, DType::Int32);
    if (op.bias) {
      const ir::Value* b = op.bias->inputs[0] == op.product->outputs[0] ? op.bias->inputs[1] : op.bias->inputs[0];
      bias = bias_as_int32(b->constant, cx->params.scale, wq.scales);
    }
    ir::Node* product;
    if (conv) {
      const ops::Attrs& a = op.product->attrs;
      const std::vector<int64_t>& p = a.get_ints("padding");
      product = g.insert_node(at, OpId::qlinear_conv2d,
                              {xq, scale_of(cx->params), zero_point_of(cx->params), w_values, w_scale, w_zero,
                               y_scale, y_zero, g.add_constant(bias)},
                              {{"stride", a.get_ints("stride")},
                               {"padding", std::vector<int64_t>{p[0], p[1], p[0], p[1]}},
                               {"dilation", a.get_ints("dilation")},
                               {"groups", a.get_int("groups")}});
    } else {
      product = g.insert_node(at, OpId::qlinear_matmul,
                              {xq, scale_of(cx->params), zero_point_of(cx->params), w_values, w_scale, w_zero,
                               y_scale, y_zero, g.add_constant(bias)},
                              {});
    }
    ir::Node* dq = g.insert_node(at, OpId::dequantize_linear, {product->outputs[0], y_scale, y_zero},
                                 {{"axis", int64_t(1)}});
    g.replace_all_uses(op.output, dq->outputs[0]);
    ++report.quantized;
    QuantizedLayer layer;
    const std::string rectifier = !op.relu                        ? ""
                                  : std::isfinite(op.relu_max) ? "+relu(max " + ops::float_str(op.relu_max) + ")"
                                                               : "+relu";
    layer.op = std::string(op.product->name()) + (op.bias ? "+bias" : "") + rectifier;
    layer.float_value = op.output->id;
    layer.quantized_value = product->outputs[0]->id;
    layer.output = *cy;
    report.layers.push_back(layer);
  }

  // The node after `n` in the graph's order (null: n is the last).
  ir::Node* next_node(const ir::Node* n) const {
    auto it = std::find_if(g.nodes().begin(), g.nodes().end(), [&](const auto& m) { return m.get() == n; });
    return ++it == g.nodes().end() ? nullptr : it->get();
  }

  // Every other reader of a quantized activation reads it back from its quantized form: a
  // residual add reads dequantize_linear(q) instead of the float value, as an int8 engine passes
  // it. The float value is then read by its quantize_linear alone, so fusion computes it, rounds
  // it and stores only uint8 (passes/expand_quantize.h); the residual gains the quantization error
  // (rounding, and clipping at the threshold) of the activation it adds.
  void read_quantized_forms() {
    // In graph order (the map is keyed by pointers), so that node order and value ids repeat.
    std::vector<ir::Node*> quantizes;
    for (const auto& node : g.nodes()) {
      if (node->op != OpId::quantize_linear) continue;
      auto it = quantized_input.find(node->inputs[0]);
      if (it != quantized_input.end() && it->second == node->outputs[0]) quantizes.push_back(node.get());
    }
    for (ir::Node* quantize : quantizes) {
      ir::Value* x = quantize->inputs[0];
      ir::Value* q = quantize->outputs[0];
      if (!x->producer || x->is_output()) continue;
      std::vector<std::pair<ir::Node*, int>> others;
      for (const ir::Use& use : x->uses) {
        if (use.node != quantize) others.emplace_back(use.node, use.index);
      }
      if (others.empty()) continue;
      // The quantize moves up to just after x's producer (its other inputs are constants), so
      // that the dequantize placed after it precedes every reader of x.
      g.move_node(quantize, next_node(x->producer));
      ir::Node* dq = g.insert_node(next_node(quantize), OpId::dequantize_linear,
                                   {q, quantize->inputs[1], quantize->inputs[2]}, {{"axis", int64_t(1)}});
      for (const auto& [node, index] : others) g.set_input(node, index, dq->outputs[0]);
    }
  }
};

}  // namespace

QuantizeReport quantize_graph(ir::Graph& graph, const Calibration& calibration) {
  QuantizeReport report;
  Rewriter r{graph, calibration, report, {}};
  for (const QuantizableOp& op : find_quantizable(graph)) r.rewrite(op);
  r.read_quantized_forms();
  passes::dce(graph);
  passes::cancel_requantize(graph);
  passes::dce(graph);
  for (const auto& node : graph.nodes()) {
    switch (node->op) {
      case OpId::quantize_linear: case OpId::dequantize_linear: case OpId::qlinear_conv2d:
      case OpId::qlinear_matmul:
        break;
      default:
        ++report.float_ops[node->name()];
    }
  }
  return report;
}

std::string QuantizeReport::str() const {
  std::ostringstream s;
  s << quantized << " products quantized";
  if (!float_ops.empty()) {
    s << "; left in float:";
    for (const auto& [op, n] : float_ops) s << " " << op << " x" << n;
  }
  for (const std::string& why : skipped) s << "\n  skipped " << why;
  return s.str();
}

}  // namespace smelt::quant
