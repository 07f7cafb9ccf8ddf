// smelt quantize: post-training INT8 quantization of an ONNX model (docs/quantization.md).
//
//   smelt quantize model.onnx --calibration DIR -o model.int8.onnx [--method entropy|percentile|
//                  max|mse] [--percentile P] [--save-calibration FILE] [--load-calibration FILE]
//                  [--format qoperator|qdq]
//
// DIR holds the calibration batches: either one file per batch (.npy or ONNX TensorProto .pb)
// for a model with one input, or one subdirectory per batch holding each input as NAME.npy or
// input_K.pb (ONNX's test_data_set_N layout). It prints each quantized layer's threshold, scale,
// zero point and its signal-to-quantization-noise ratio over the calibration batches, and the
// ops left in float.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/npy.h"
#include "smelt/onnx.h"
#include "smelt/quantize.h"
#include "tools/commands.h"
#include "tools/read_text.h"

namespace smelt::tools {
namespace {

namespace fs = std::filesystem;

struct QuantizeArgs {
  std::string model, calibration, out, method = "entropy", save_calibration, load_calibration, format = "qoperator";
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

void run_quantize(const QuantizeArgs& args) {
  const onnx::Model model = onnx::import_model(args.model);
  const std::vector<std::vector<Tensor>> batches = read_batches(args.calibration, model.input_names);
  QuantizeOptions options;
  options.method = calibration_method(args.method);
  options.percentile = args.percentile;
  if (!args.load_calibration.empty()) options.calibration_json = read_text(args.load_calibration, "quantize");
  const QuantizeResult result = quantize(model.graph, batches, options);
  if (!args.save_calibration.empty()) {
    std::ofstream f(args.save_calibration);
    f << result.calibration_json;
    SMELT_CHECK(f.good()) << "quantize: cannot write '" << args.save_calibration << "'";
  }
  std::printf("%zu calibration batches, %s thresholds\n", batches.size(),
              args.load_calibration.empty() ? args.method.c_str() : "loaded");
  std::printf("%s\n", result.report().c_str());
  onnx::ExportOptions save_options;
  save_options.quantized_as_qdq = args.format == "qdq";
  onnx::save(result.graph, args.out, save_options);
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
  cmd->add_option("--format", args->format,
                  "the integer ops as qoperator (QLinearConv, QLinearMatMul; default) or qdq (DequantizeLinear -> "
                  "Conv/MatMul -> QuantizeLinear, as ONNX Runtime's quantize_static writes)")
      ->check(CLI::IsMember({"qoperator", "qdq"}));
  cmd->callback([args] { run_quantize(*args); });
}

}  // namespace smelt::tools
