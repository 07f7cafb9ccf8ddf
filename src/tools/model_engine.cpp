#include "tools/model_engine.h"

#include <CLI/CLI.hpp>

#include "ir/graph.h"
#include "smelt/ops.h"

namespace smelt::tools {

std::map<std::string, int64_t> parse_dims(const std::vector<std::string>& texts, const char* command) {
  std::map<std::string, int64_t> dims;
  for (const std::string& text : texts) {
    const size_t eq = text.rfind('=');
    SMELT_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < text.size())
        << command << ": --dim '" << text.substr(0, 80) << "' must be NAME=VALUE";
    const std::string value = text.substr(eq + 1);
    int64_t v = -1;
    try {
      size_t used = 0;
      v = std::stoll(value, &used);
      if (used != value.size()) v = -1;
    } catch (const std::exception&) {
    }
    SMELT_CHECK(v >= 0) << command << ": --dim " << text.substr(0, eq) << " must be a non-negative integer, got '"
                        << value.substr(0, 40) << "'";
    dims[text.substr(0, eq)] = v;
  }
  return dims;
}

Shape declared_shape(const onnx::ValueInfo& v, const std::map<std::string, int64_t>& dims, const char* command) {
  Shape shape;
  for (size_t i = 0; i < v.dims.size(); ++i) {
    if (v.dims[i] >= 0) {
      shape.push_back(v.dims[i]);
      continue;
    }
    const std::string& name = v.dim_names[i];
    auto it = dims.find(name);
    SMELT_CHECK(it != dims.end()) << command << ": input '" << v.name << "' dim " << i << " is symbolic"
                                  << (name.empty() ? " and unnamed" : " ('" + name + "')") << "; give its value with --dim "
                                  << (name.empty() ? "NAME" : name) << "=VALUE"
                                  << (name.empty() ? " (unnamed dims need --input files instead)" : "");
    shape.push_back(it->second);
  }
  return shape;
}

Tensor random_model_input(const Shape& shape, const std::string& dtype, Generator& gen) {
  if (dtype == "float32" || dtype == "float64") {
    return randn(shape, dtype == "float32" ? DType::Float32 : DType::Float64, &gen);
  }
  if (dtype == "int64") return randint(0, 2, shape, &gen);
  if (dtype == "int32") return cast(randint(0, 2, shape, &gen), DType::Int32);
  if (dtype == "bool") return cast(randint(0, 2, shape, &gen), DType::Bool);
  if (dtype == "uint8") return cast(randint(0, 256, shape, &gen), DType::UInt8);
  throw onnx::Unsupported("cannot make random inputs of dtype " + dtype);
}

void add_engine_options(CLI::App* cmd, EngineOptions* options) {
  cmd->add_flag("--optimize", options->optimize, "run the default pass pipeline, then the interpreter");
  cmd->add_flag("--compile", options->compile,
                "compile: passes, fusion, memory plan, generated kernels, a replayed plan (as smelt::compile)");
  cmd->add_option("--backend", options->backend,
                  "with --compile: who runs the fused kernels: auto (interpreter until the generated C++ "
                  "is ready), interpreter, cpp (compiled before the first run)")
      ->check(CLI::IsMember({"auto", "interpreter", "cpp"}));
}

ModelEngine::ModelEngine(Graph graph, const EngineOptions& options) : graph_(std::move(graph)), options_(options) {
  SMELT_CHECK(!(options.optimize && options.compile))
      << "--optimize and --compile exclude each other (--compile runs the pass pipeline itself)";
  if (options.compile) {
    runtime::PipelineOptions pipeline;
    pipeline.backend = runtime::backend_from_name(options.backend);
    compiled_ = std::make_unique<runtime::CompiledGraph>(runtime::compile_graph(graph_.ir_graph().clone(), pipeline));
  } else if (options.optimize) {
    graph_.optimize();
  }
}

std::vector<Tensor> ModelEngine::run(const std::vector<Tensor>& inputs) {
  if (compiled_) return compiled_->plan->run(inputs);
  return graph_.run(inputs);
}

std::string ModelEngine::name() const {
  if (compiled_) return "compiled plan (backend " + options_.backend + ")";
  return options_.optimize ? "optimized graph on the interpreter" : "interpreter";
}

}  // namespace smelt::tools
