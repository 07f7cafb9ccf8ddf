// Finding the quantizable products of a graph, and calibrating their activations
// (quant/quantize_graph.h).
#include <nlohmann/json.hpp>

#include "ir/printer.h"
#include "quant/quantize_graph.h"
#include "smelt/ops.h"
#include "trace/interpreter.h"

namespace smelt::quant {
namespace {

using ops::OpId;

bool is_f32(const ir::Value* v) { return v->meta.dtype == DType::Float32; }

// The single node reading `v`, when `v` has exactly one use and is not a graph output.
ir::Node* only_reader(const ir::Value* v) {
  if (v->uses.size() != 1 || v->is_output()) return nullptr;
  return v->uses[0].node;
}

// Whether constant `c` is a bias of `channels` values along a conv's channel dim (N, O, H, W):
// (O, 1, 1) or (1, O, 1, 1); or along a matmul's last dim (.., N): (N) or (1, .., N).
bool is_channel_bias(const ir::Value* c, int64_t channels, bool conv) {
  if (c->kind != ir::ValueKind::Constant || !is_f32(c) || shape_numel(c->meta.shape) != channels) return false;
  const Shape& s = c->meta.shape;
  if (!conv) return !s.empty() && s.back() == channels;
  return (s.size() == 3 && s[0] == channels) || (s.size() == 4 && s[0] == 1 && s[1] == channels);
}

// The value of a one-element float constant.
bool scalar_constant(const ir::Value* v, double* out) {
  if (v->kind != ir::ValueKind::Constant || v->constant.numel() != 1 || !dtype_is_floating(v->meta.dtype)) return false;
  *out = v->constant.to_vector()[0];
  return true;
}

// The other operand of a binary node, as a scalar constant.
bool scalar_operand(const ir::Node* n, const ir::Value* x, double* out) {
  return n->inputs.size() == 2 && scalar_constant(n->inputs[0] == x ? n->inputs[1] : n->inputs[0], out);
}

}  // namespace

bool find_rectifier(ir::Value* y, QuantizableOp* q) {
  ir::Node* n = only_reader(y);
  // (a bound of higher rank would broadcast the result to another shape)
  if (!n || n->outputs[0]->meta.shape != y->meta.shape) return false;
  double zero = 0;
  if (n->op == OpId::relu) {
    q->relu = n;
  } else if (n->op == OpId::clamp && n->attrs.has("min") && n->attrs.get_float("min") == 0) {
    q->relu = n;
    if (n->attrs.has("max")) q->relu_max = n->attrs.get_float("max");
    q->output = n->outputs[0];
    return true;
  } else if (n->op == OpId::maximum && scalar_operand(n, y, &zero) && zero == 0) {
    q->relu = n;
  } else {
    return false;
  }
  q->output = n->outputs[0];
  double top = 0;
  if (ir::Node* m = only_reader(q->output); m && m->op == OpId::minimum && scalar_operand(m, q->output, &top) &&
                                              top > 0 && m->outputs[0]->meta.shape == y->meta.shape) {
    q->relu_max = top;
    q->output = m->outputs[0];
  }
  return true;
}

std::vector<QuantizableOp> find_quantizable(const ir::Graph& graph) {
  std::vector<QuantizableOp> found;
  for (const auto& node : graph.nodes()) {
    const bool conv = node->op == OpId::conv2d, mm = node->op == OpId::matmul;
    if (!conv && !mm) continue;
    ir::Value *x = node->inputs[0], *w = node->inputs[1];
    if (!is_f32(x) || !is_f32(w)) continue;
    if (conv ? x->meta.shape.size() != 4 : (x->meta.shape.size() < 2 || w->meta.shape.size() != 2)) continue;
    Tensor weight;
    if (w->kind == ir::ValueKind::Constant) {
      weight = w->constant;
    } else if (mm && w->producer && w->producer->op == OpId::permute &&
               w->producer->inputs[0]->kind == ir::ValueKind::Constant) {
      weight = contiguous(w->producer->inputs[0]->constant.permute(w->producer->attrs.get_ints("dims")));
    } else {
      continue;
    }
    QuantizableOp q;
    q.weight = weight;
    q.product = node.get();
    q.input = x;
    q.output = node->outputs[0];
    const int64_t channels = conv ? w->meta.shape[0] : weight.size(1);
    if (ir::Node* add = only_reader(q.output); add && add->op == OpId::add) {
      const ir::Value* other = add->inputs[0] == q.output ? add->inputs[1] : add->inputs[0];
      if (is_channel_bias(other, channels, conv) && add->outputs[0]->meta.shape == q.output->meta.shape) {
        q.bias = add;
        q.output = add->outputs[0];
      }
    }
    find_rectifier(q.output, &q);
    found.push_back(q);
  }
  return found;
}

Calibration calibrate(const ir::Graph& graph, const std::vector<std::vector<Tensor>>& batches,
                      const ThresholdOptions& options) {
  SMELT_CHECK(!batches.empty()) << "calibration: no batches; valid: at least one set of graph inputs";
  std::map<const ir::Value*, Observer> observers;
  for (const QuantizableOp& q : find_quantizable(graph)) {
    observers[q.input];
    observers[q.output];
  }
  for (int pass = 0; pass < 2; ++pass) {
    auto observe = [&](const ir::Value* v, const Tensor& t) {
      auto it = observers.find(v);
      if (it == observers.end()) return;
      const Tensor c = contiguous(t);
      try {
        if (pass == 0) {
          it->second.observe_range(c.data<float>(), c.numel());
        } else {
          it->second.observe_histogram(c.data<float>(), c.numel());
        }
      } catch (const Error& e) {
        SMELT_CHECK(false) << "calibration of " << ir::value_ref(v) << ": " << e.what();
      }
    };
    for (const std::vector<Tensor>& inputs : batches) {
      for (size_t i = 0; i < inputs.size() && i < graph.inputs().size(); ++i) observe(graph.inputs()[i], inputs[i]);
      trace::interpret(graph, inputs, [&](const ir::Node& node, const std::vector<Tensor>&, const std::vector<Tensor>& outs) {
        for (size_t k = 0; k < outs.size(); ++k) observe(node.outputs[k], outs[k]);
        return true;
      });
    }
  }
  Calibration cal;
  cal.options = options;
  cal.batches = int64_t(batches.size());
  for (const auto& [v, o] : observers) {
    CalibratedValue c;
    c.label = ir::value_ref(v);
    c.min = o.min();
    c.max = o.max();
    ThresholdOptions t = options;
    t.levels = o.min() >= 0 ? 256 : 128;  // the levels [0, T] gets (calibration.h)
    c.threshold = choose_threshold(o, t);
    c.params = activation_params(o, c.threshold);
    cal.values[v->id] = c;
  }
  return cal;
}

std::string Calibration::to_json() const {
  nlohmann::json j;
  j["method"] = method_name(options.method);
  j["percentile"] = options.percentile;
  j["batches"] = batches;
  nlohmann::json& vals = j["values"];
  vals = nlohmann::json::object();
  for (const auto& [id, c] : values) {
    vals[std::to_string(id)] = {{"label", c.label}, {"min", c.min}, {"max", c.max},
                                {"threshold", c.threshold}, {"scale", c.params.scale},
                                {"zero_point", c.params.zero_point},
                                {"dtype", dtype_name(c.params.dtype)}};
  }
  return j.dump(1) + "\n";
}

Calibration Calibration::from_json(const std::string& text) {
  Calibration cal;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    cal.options.method = method_from_name(j.at("method").get<std::string>());
    cal.options.percentile = j.at("percentile").get<double>();
    cal.batches = j.at("batches").get<int64_t>();
    for (const auto& [key, v] : j.at("values").items()) {
      CalibratedValue c;
      c.label = v.at("label").get<std::string>();
      c.min = v.at("min").get<double>();
      c.max = v.at("max").get<double>();
      c.threshold = v.at("threshold").get<double>();
      c.params.scale = v.at("scale").get<float>();
      c.params.zero_point = v.at("zero_point").get<int32_t>();
      c.params.dtype = dtype_from_name(v.at("dtype").get<std::string>());
      SMELT_CHECK(std::isfinite(c.params.scale) && c.params.scale > 0)
          << "scale " << c.params.scale << " of " << c.label << " is not positive and finite";
      SMELT_CHECK(c.params.dtype == DType::UInt8 || c.params.dtype == DType::Int8)
          << c.label << " has dtype " << dtype_name(c.params.dtype) << "; valid: uint8, int8";
      const int32_t lo = c.params.dtype == DType::UInt8 ? 0 : -128;
      SMELT_CHECK(c.params.zero_point >= lo && c.params.zero_point <= lo + 255)
          << "zero point " << c.params.zero_point << " of " << c.label << " is outside its dtype";
      cal.values[std::stoi(key)] = c;
    }
  } catch (const nlohmann::json::exception& e) {
    SMELT_CHECK(false) << "calibration file: " << e.what()
                       << "; valid: the JSON Calibration::to_json writes";
  } catch (const std::logic_error& e) {  // stoi
    SMELT_CHECK(false) << "calibration file: a value key is not a number (" << e.what() << ")";
  }
  return cal;
}

}  // namespace smelt::quant
