// How `smelt run`, `smelt check` and `smelt bench` execute an imported model, in one place:
//
//   interpreted  the IR interpreter: one eager kernel per node, every intermediate allocated
//   --optimize   the default pass pipeline first, then the interpreter (checks the passes alone)
//   --compile    the compile pipeline (runtime/pipeline.h): passes, fusion, memory plan, kernels,
//                and a Plan replayed per call, as smelt::compile does for traced functions;
//                --backend picks who runs the fused kernels (auto, interpreter, cpp)
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/pipeline.h"
#include "smelt/creation.h"
#include "smelt/graph.h"
#include "smelt/onnx.h"

namespace CLI {
class App;
}

namespace smelt::tools {

struct EngineOptions {
  bool optimize = false;
  bool compile = false;
  std::string backend = "auto";
};

// Adds --optimize, --compile and --backend to a subcommand (a mistake in them is a CLI error).
void add_engine_options(CLI::App* cmd, EngineOptions* options);

// Values of symbolic dims from NAME=VALUE texts (--dim); `command` names the command in errors.
std::map<std::string, int64_t> parse_dims(const std::vector<std::string>& texts, const char* command);
// The shape `v` declares, its symbolic dims taken from `dims` (a missing one is a smelt::Error
// that says which --dim to give).
Shape declared_shape(const onnx::ValueInfo& v, const std::map<std::string, int64_t>& dims, const char* command);
// A random input of the ONNX dtype `dtype`: normal floats, 0/1 integers and bools, any uint8.
Tensor random_model_input(const Shape& shape, const std::string& dtype, Generator& gen);

// One imported graph, ready to run as the options say.
class ModelEngine {
 public:
  // Consumes `graph` (an imported model's). Compiles at once with --compile.
  ModelEngine(Graph graph, const EngineOptions& options);

  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  // "interpreter", "optimized graph on the interpreter", "compiled plan (backend auto)".
  std::string name() const;
  // With --compile: the pipeline's result (the plan, its stats, the fused graph); else null.
  runtime::CompiledGraph* compiled() { return compiled_.get(); }
  const Graph& graph() const { return graph_; }

 private:
  Graph graph_;
  EngineOptions options_;
  std::unique_ptr<runtime::CompiledGraph> compiled_;
};

}  // namespace smelt::tools
