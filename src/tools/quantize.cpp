// smelt quantize: post-training INT8 quantization of an ONNX model (docs/quantization.md).
//
//   smelt quantize model.onnx --calibration DIR -o model.int8.onnx [--method entropy|percentile|
//                  max|mse] [--percentile P] [--save-calibration FILE] [--load-calibration FILE]
//
// DIR holds the calibration batches: either one file per batch (.npy or ONNX TensorProto .pb)
// for a model with one input, or one subdirectory per batch holding each input as NAME.npy or
// input_K.pb (ONNX's test_data_set_N layout). It prints each quantized layer's threshold, scale,
// zero point and its signal-to-quantization-noise ratio over the calibration batches, and the
// ops left in float.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "io/npy.h"
#include "passes/pass_manager.h"
#include "quant/quantize_graph.h"
#include "smelt/onnx.h"
#include "smelt/ops.h"
#include "tools/commands.h"
#include "trace/interpreter.h"

namespace smelt::tools {
namespace {

namespace fs = std::filesystem;

struct QuantizeArgs {
  std::string model, calibration, out, method = "entropy", save_calibration, load_calibration;
  double percentile = 99.99;
};

Tensor read_input_file(const fs::path& p) {
  if (p.extension() == ".npy") return io::read_npy(p.string());
  return onnx::read_tensor_file(p.string());
}

bool is_input_file(const fs::path& p) { return p.extension() == ".npy" || p.extension() == ".pb"; }

// The batches of DIR, each a vector of the model's inputs in order.
std::vector<std::vector<Tensor>> read_batches(const std::string& dir, const std::vector<std::string>& names) {
  SMELT_CHECK(fs::is_directory(dir)) << "quantize: --calibration '" << dir << "' is not a directory";
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(dir)) entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  std::vector<std::vector<Tensor>> batches;
  for (const fs::path& e : entries) {
    if (fs::is_directory(e)) {
      std::vector<Tensor> inputs;
      for (size_t k = 0; k < names.size(); ++k) {
        const fs::path npy = e / (names[k] + ".npy"), pb = e / ("input_" + std::to_string(k) + ".pb");
        SMELT_CHECK(fs::exists(npy) || fs::exists(pb))
            << "quantize: batch " << e.string() << " has no " << npy.filename().string() << " or "
            << pb.filename().string() << " for input '" << names[k] << "'";
        inputs.push_back(read_input_file(fs::exists(npy) ? npy : pb));
      }
      batches.push_back(inputs);
    } else if (is_input_file(e)) {
      SMELT_CHECK(names.size() == 1) << "quantize: " << e.string() << " is one file but the model has "
                                     << names.size() << " inputs; valid: one subdirectory per batch";
      batches.push_back({read_input_file(e)});
    }
  }
  SMELT_CHECK(!batches.empty()) << "quantize: --calibration '" << dir
                                << "' holds no batch (.npy or .pb files, or subdirectories of them)";
  return batches;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  SMELT_CHECK(f.good()) << "quantize: cannot open '" << path << "'";
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Every value of `graph` whose id is in `ids`, over all batches, concatenated per id.
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

void run_quantize(const QuantizeArgs& args) {
  onnx::Model model = onnx::import_model(args.model);
  Graph& g = model.graph;
  // The default pipeline without blocked_layout: the products must stay conv2d and matmul.
  g.optimize("inline_custom,dce,canonicalize,cse,fold,simplify,fold_batchnorm,transpose_sink,transpose_normalize,dce");
  const std::vector<std::vector<Tensor>> batches = read_batches(args.calibration, model.input_names);
  quant::Calibration cal;
  if (!args.load_calibration.empty()) {
    cal = quant::Calibration::from_json(read_text(args.load_calibration));
  } else {
    quant::ThresholdOptions options;
    options.method = quant::method_from_name(args.method);
    options.percentile = args.percentile;
    cal = quant::calibrate(g.ir_graph(), batches, options);
  }
  if (!args.save_calibration.empty()) {
    std::ofstream f(args.save_calibration);
    f << cal.to_json();
    SMELT_CHECK(f.good()) << "quantize: cannot write '" << args.save_calibration << "'";
  }
  std::unique_ptr<ir::Graph> float_graph = g.ir_graph().clone();
  const quant::QuantizeReport report = quant::quantize_graph(g.ir_graph(), cal);
  g.verify();
  // each layer's quantized output, dequantized, against the float graph's value
  std::set<int> float_ids, quantized_ids;
  for (const quant::QuantizedLayer& l : report.layers) {
    float_ids.insert(l.float_value);
    quantized_ids.insert(l.quantized_value);
  }
  const auto want = collect(*float_graph, batches, float_ids);
  const auto got = collect(g.ir_graph(), batches, quantized_ids);
  std::printf("%zu calibration batches, %s thresholds\n", batches.size(), quant::method_name(cal.options.method));
  std::printf("%-24s %-12s %10s %10s %11s %5s %9s\n", "layer", "op", "min", "max", "threshold", "zp", "SQNR dB");
  for (const quant::QuantizedLayer& l : report.layers) {
    const std::vector<float>& f = want.at(l.float_value);
    const std::vector<float>& q = got.at(l.quantized_value);
    double signal = 0, noise = 0;
    for (size_t i = 0; i < f.size() && i < q.size(); ++i) {
      const double d = (double(q[i]) - l.output.params.zero_point) * l.output.params.scale - f[i];
      signal += double(f[i]) * f[i];
      noise += d * d;
    }
    const double sqnr = noise > 0 ? 10 * std::log10(signal / noise) : INFINITY;
    std::printf("%-24s %-12s %10.4g %10.4g %11.4g %5d %9.1f\n", l.output.label.c_str(), l.op.c_str(), l.output.min,
                l.output.max, l.output.threshold, l.output.params.zero_point, sqnr);
  }
  std::printf("%s\n", report.str().c_str());
  onnx::save(g, args.out);
  std::printf("wrote %s\n", args.out.c_str());
}

}  // namespace

void register_quantize(CLI::App& app) {
  auto args = std::make_shared<QuantizeArgs>();
  CLI::App* cmd = app.add_subcommand("quantize", "post-training INT8 quantization of an ONNX model, calibrated on data");
  cmd->add_option("model", args->model, "the float ONNX model")->required();
  cmd->add_option("--calibration", args->calibration, "a directory of calibration batches (.npy/.pb files or subdirectories)")
      ->required();
  cmd->add_option("-o,--out", args->out, "the quantized ONNX model to write")->required();
  cmd->add_option("--method", args->method, "the activations' thresholds: entropy (default), percentile, max, mse")
      ->check(CLI::IsMember({"entropy", "percentile", "max", "mse"}));
  cmd->add_option("--percentile", args->percentile, "for --method percentile (default 99.99)")->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--save-calibration", args->save_calibration, "write the calibration (JSON) to FILE");
  cmd->add_option("--load-calibration", args->load_calibration, "use a calibration FILE instead of calibrating");
  cmd->callback([args] { run_quantize(*args); });
}

}  // namespace smelt::tools
