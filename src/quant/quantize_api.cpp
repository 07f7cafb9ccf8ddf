// The public face of post-training quantization (smelt/quantize.h): passes, calibration, the
// quantize pass, and each layer's SQNR over the calibration batches (docs/quantization.md).
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

#include "ir/graph.h"
#include "quant/quantize_graph.h"
#include "smelt/ops.h"
#include "smelt/quantize.h"
#include "trace/interpreter.h"

namespace smelt {
namespace {

// The default pipeline without blocked_layout and expand_quantize: the products must stay conv2d
// and matmul, and the quantized graph keeps its quantize/dequantize ops (for export).
constexpr const char* kQuantizePipeline =
    "inline_custom,dce,canonicalize,cse,fold,simplify,fold_batchnorm,transpose_sink,transpose_normalize,dce";

quant::ThresholdMethod threshold_method(CalibrationMethod m) {
  switch (m) {
    case CalibrationMethod::Max: return quant::ThresholdMethod::Max;
    case CalibrationMethod::Percentile: return quant::ThresholdMethod::Percentile;
    case CalibrationMethod::Entropy: return quant::ThresholdMethod::Entropy;
    case CalibrationMethod::Mse: return quant::ThresholdMethod::Mse;
  }
  return quant::ThresholdMethod::Entropy;
}

// Every value of `graph` whose id is in `ids`, over all batches, concatenated per id, as float32.
std::map<int, std::vector<float>> collect(const ir::Graph& graph, const std::vector<std::vector<Tensor>>& batches,
                                          const std::set<int>& ids) {
  std::map<int, std::vector<float>> out;
  for (const std::vector<Tensor>& inputs : batches) {
    trace::interpret(graph, inputs, [&](const ir::Node& node, const std::vector<Tensor>&, const std::vector<Tensor>& outs) {
      for (size_t k = 0; k < outs.size(); ++k) {
        if (!ids.count(node.outputs[k]->id)) continue;
        const Tensor f = contiguous(cast(outs[k], DType::Float32));
        std::vector<float>& v = out[node.outputs[k]->id];
        v.insert(v.end(), f.data<float>(), f.data<float>() + f.numel());
      }
      return true;
    });
  }
  return out;
}

// 10 log10(signal / noise) of the quantized values (dequantized with `params`) against `want`.
double sqnr_db(const std::vector<float>& want, const std::vector<float>& quantized, const quant::QuantParams& params) {
  double signal = 0, noise = 0;
  for (size_t i = 0; i < want.size() && i < quantized.size(); ++i) {
    const double d = (double(quantized[i]) - params.zero_point) * params.scale - want[i];
    signal += double(want[i]) * want[i];
    noise += d * d;
  }
  return noise > 0 ? 10 * std::log10(signal / noise) : INFINITY;
}

}  // namespace

CalibrationMethod calibration_method(const std::string& name) {
  switch (quant::method_from_name(name)) {
    case quant::ThresholdMethod::Max: return CalibrationMethod::Max;
    case quant::ThresholdMethod::Percentile: return CalibrationMethod::Percentile;
    case quant::ThresholdMethod::Entropy: return CalibrationMethod::Entropy;
    case quant::ThresholdMethod::Mse: return CalibrationMethod::Mse;
  }
  return CalibrationMethod::Entropy;
}

QuantizeResult quantize(const Graph& graph, const std::vector<std::vector<Tensor>>& batches,
                        const QuantizeOptions& options) {
  SMELT_CHECK(!batches.empty()) << "quantize: no calibration batch; valid: at least one vector of the graph's inputs";
  Graph g = graph.clone();
  g.optimize(kQuantizePipeline);
  quant::Calibration cal;
  if (!options.calibration_json.empty()) {
    cal = quant::Calibration::from_json(options.calibration_json);
  } else {
    quant::ThresholdOptions threshold;
    threshold.method = threshold_method(options.method);
    threshold.percentile = options.percentile;
    cal = quant::calibrate(g.ir_graph(), batches, threshold);
  }
  std::unique_ptr<ir::Graph> float_graph = g.ir_graph().clone();
  const quant::QuantizeReport report = quant::quantize_graph(g.ir_graph(), cal);
  g.verify();
  std::set<int> float_ids, quantized_ids;
  for (const quant::QuantizedLayer& l : report.layers) {
    float_ids.insert(l.float_value);
    quantized_ids.insert(l.quantized_value);
  }
  const auto want = collect(*float_graph, batches, float_ids);
  const auto got = collect(g.ir_graph(), batches, quantized_ids);
  QuantizeResult result{std::move(g), {}, report.float_ops, report.skipped, cal.to_json()};
  for (const quant::QuantizedLayer& l : report.layers) {
    QuantizedLayerReport r;
    r.value = l.output.label;
    r.op = l.op;
    r.min = l.output.min, r.max = l.output.max, r.threshold = l.output.threshold;
    r.scale = l.output.params.scale;
    r.zero_point = l.output.params.zero_point;
    r.sqnr_db = sqnr_db(want.at(l.float_value), got.at(l.quantized_value), l.output.params);
    result.layers.push_back(r);
  }
  return result;
}

QuantizeResult quantize(const Graph& graph, const std::function<std::optional<std::vector<Tensor>>()>& next_batch,
                        const QuantizeOptions& options) {
  std::vector<std::vector<Tensor>> batches;
  while (std::optional<std::vector<Tensor>> b = next_batch()) batches.push_back(std::move(*b));
  return quantize(graph, batches, options);
}

QuantizeResult quantize(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                        const std::vector<std::vector<Tensor>>& batches, const QuantizeOptions& options) {
  SMELT_CHECK(!batches.empty()) << "quantize: no calibration batch; valid: at least one vector of the function's inputs";
  const Graph g = Graph::trace([&](const std::vector<Tensor>& in, const std::vector<Tensor>&) { return fn(in); },
                               batches[0]);
  return quantize(g, batches, options);
}

std::string QuantizeResult::report() const {
  std::ostringstream s;
  char line[256];
  std::snprintf(line, sizeof line, "%-24s %-24s %10s %10s %11s %5s %9s\n", "layer", "op", "min", "max", "threshold",
                "zp", "SQNR dB");
  s << line;
  for (const QuantizedLayerReport& l : layers) {
    std::snprintf(line, sizeof line, "%-24s %-24s %10.4g %10.4g %11.4g %5d %9.1f\n", l.value.c_str(), l.op.c_str(),
                  l.min, l.max, l.threshold, l.zero_point, l.sqnr_db);
    s << line;
  }
  s << layers.size() << " products quantized";
  if (!float_ops.empty()) {
    s << "; left in float:";
    for (const auto& [op, n] : float_ops) s << " " << op << " x" << n;
  }
  for (const std::string& why : skipped) s << "\n  skipped " << why;
  return s.str();
}

}  // namespace smelt
