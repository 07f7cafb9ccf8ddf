// smelt run: imports an ONNX model and runs it once.
//
//   smelt run model.onnx --random                      random inputs (symbolic dims: --dim)
//   smelt run model.onnx --input x=x.npy               inputs from .npy files, by input name
//   smelt run model.onnx --random --dim batch=8 --save-outputs out/
//
// Prints the model's inputs, each output's name, dtype, shape and first values, and the time of
// the import and of the run (the median of --repeat runs). --save-outputs writes <name>.npy per
// output (names made file-safe).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

#include "io/npy.h"
#include "smelt/creation.h"
#include "smelt/ops.h"
#include "smelt/onnx.h"
#include "tools/commands.h"

namespace smelt::tools {
namespace {

struct RunArgs {
  std::string model;
  std::vector<std::string> inputs;  // NAME=FILE.npy
  std::vector<std::string> dims;    // NAME=VALUE
  bool random = false;
  bool optimize = false;
  int repeat = 1;
  uint64_t seed = 1;
  std::string save_dir;
};

std::pair<std::string, std::string> split_assignment(const std::string& text, const char* option) {
  const size_t eq = text.rfind('=');
  SMELT_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < text.size())
      << "run: " << option << " '" << text.substr(0, 80) << "' must be NAME=VALUE";
  return {text.substr(0, eq), text.substr(eq + 1)};
}

std::string first_values(const Tensor& t, size_t n) {
  const Tensor head = t.numel() > int64_t(n) ? t.reshape({t.numel()}).slice(0, 0, int64_t(n)) : t;
  const std::vector<double> v = head.to_vector();
  std::string s = "[";
  char buf[32];
  for (size_t i = 0; i < v.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s%.6g", i ? ", " : "", v[i]);
    s += buf;
  }
  return s + (t.numel() > int64_t(n) ? ", ...]" : "]");
}

std::string file_safe(const std::string& name) {
  std::string s;
  for (char ch : name) s += std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.' ? ch : '_';
  return s.empty() ? "output" : s.substr(0, 100);
}

Tensor random_input(const Shape& shape, const std::string& dtype, Generator& gen) {
  if (dtype == "float32" || dtype == "float64") {
    return randn(shape, dtype == "float32" ? DType::Float32 : DType::Float64, &gen);
  }
  if (dtype == "int64") return randint(0, 2, shape, &gen);
  if (dtype == "int32") return cast(randint(0, 2, shape, &gen), DType::Int32);
  if (dtype == "bool") return cast(randint(0, 2, shape, &gen), DType::Bool);
  if (dtype == "uint8") return cast(randint(0, 256, shape, &gen), DType::UInt8);
  throw onnx::Unsupported("run: cannot make random inputs of dtype " + dtype);
}

int run_model(const RunArgs& args) {
  SMELT_CHECK(args.random != !args.inputs.empty() || (!args.random && args.inputs.empty()))
      << "run: give either --input NAME=FILE.npy for every input or --random, not both";
  const onnx::ModelInfo info = onnx::inspect(args.model);
  onnx::ImportOptions options;
  for (const std::string& d : args.dims) {
    auto [name, value] = split_assignment(d, "--dim");
    int64_t v = -1;
    try {
      v = std::stoll(value);
    } catch (const std::exception&) {
    }
    SMELT_CHECK(v >= 0) << "run: --dim " << name << " must be a non-negative integer, got '" << value.substr(0, 40) << "'";
    options.dims[name] = v;
  }
  std::map<std::string, Tensor> given;
  for (const std::string& a : args.inputs) {
    auto [name, file] = split_assignment(a, "--input");
    auto it = std::find_if(info.inputs.begin(), info.inputs.end(), [&](const onnx::ValueInfo& v) { return v.name == name; });
    SMELT_CHECK(it != info.inputs.end()) << "run: the model has no input '" << name << "'";
    Tensor t = io::read_npy(file);
    options.input_shapes[name] = std::vector<int64_t>(t.shape().begin(), t.shape().end());
    given[name] = t;
  }
  std::printf("model %s: ir_version %lld, opset %lld, %zu nodes, %zu initializers%s%s\n", args.model.c_str(),
              static_cast<long long>(info.ir_version), static_cast<long long>(info.opsets.count("") ? info.opsets.at("") : 0),
              info.num_nodes, info.num_initializers, info.producer.empty() ? "" : ", from ", info.producer.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  onnx::Model m = onnx::import_model(args.model, options);
  if (args.optimize) m.graph.optimize();
  const double import_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  Generator gen(args.seed);
  std::vector<Tensor> inputs;
  for (const onnx::ValueInfo& v : info.inputs) {
    Tensor t;
    if (given.count(v.name)) {
      t = given[v.name];
    } else {
      SMELT_CHECK(args.random) << "run: input '" << v.name << "' is not given (--input " << v.name << "=FILE.npy, or --random)";
      Shape shape;
      for (size_t i = 0; i < v.dims.size(); ++i) {
        shape.push_back(v.dims[i] >= 0 ? v.dims[i] : options.dims.at(v.dim_names[i]));
      }
      t = random_input(shape, v.dtype, gen);
    }
    std::printf("input  %s: %s %s\n", v.name.c_str(), dtype_name(t.dtype()), shape_str(t.shape()).c_str());
    inputs.push_back(t);
  }
  std::vector<Tensor> outputs;
  std::vector<double> times;
  for (int r = 0; r < std::max(1, args.repeat); ++r) {
    const auto s = std::chrono::steady_clock::now();
    outputs = m.graph.run(inputs);
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count());
  }
  std::sort(times.begin(), times.end());
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& t = outputs[k];
    std::printf("output %s: %s %s %s\n", m.output_names[k].c_str(), dtype_name(t.dtype()), shape_str(t.shape()).c_str(),
                first_values(t, 6).c_str());
  }
  std::printf("import %.2f ms (%zu graph nodes), run %.3f ms (median of %zu)\n", import_ms, m.graph.num_nodes(),
              times[times.size() / 2], times.size());
  if (!args.save_dir.empty()) {
    std::filesystem::create_directories(args.save_dir);
    for (size_t k = 0; k < outputs.size(); ++k) {
      const std::string path = (std::filesystem::path(args.save_dir) / (file_safe(m.output_names[k]) + ".npy")).string();
      io::write_npy(path, outputs[k]);
      std::printf("saved %s\n", path.c_str());
    }
  }
  return 0;
}

}  // namespace

void register_run(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "import an ONNX model and run it on given or random inputs");
  cmd->add_option("model", args->model, "the .onnx file")->required();
  cmd->add_option("--input", args->inputs, "NAME=FILE.npy, one per model input");
  cmd->add_flag("--random", args->random, "random inputs (normal floats, 0/1 ints and bools)");
  cmd->add_option("--dim", args->dims, "NAME=VALUE for a symbolic dim");
  cmd->add_option("--save-outputs", args->save_dir, "write each output as DIR/<name>.npy");
  cmd->add_option("--repeat", args->repeat, "runs to time (the median is shown)")->check(CLI::Range(1, 100000));
  cmd->add_option("--seed", args->seed, "seed of --random");
  cmd->add_flag("--optimize", args->optimize, "run the default pass pipeline before running");
  cmd->callback([args] { run_model(*args); });
}

}  // namespace smelt::tools
