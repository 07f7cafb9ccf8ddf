// Real models from ONNX files (tests/models/make_models.py large, in $SMELT_BENCH_MODELS; run.py
// makes them in build/models), as bench/models.json lists them: the model zoo at batch 1 (CNNs at
// 224x224, a UNet, vision and text transformers, recurrent taggers and classifiers) and the INT8
// QDQ files of three CNNs.
//   smelt-eager     the imported graph on the IR interpreter (one eager kernel per node: what
//                   `smelt run` does without --compile)
//   smelt-compiled  the compile pipeline (passes with batch-norm folding, fusion, memory plan,
//                   generated C++ kernels compiled before the first call, the plan replayed), as
//                   `smelt run --compile --backend cpp`
// The same files run in ONNX Runtime (bench/ort_bench.js); torch_bench.py builds the same
// architectures.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/pipeline.h"
#include "smelt/creation.h"
#include "smelt/error.h"
#include "smelt/onnx.h"
#include "suite/workload.h"

namespace smelt::bench {
namespace {

namespace fs = std::filesystem;

// One model of bench/models.json (the list the three harnesses share).
struct ModelCase {
  std::string name;  // as torch_bench.py and ort_bench.js name it
  std::string dir;   // under the models directory
  double flops;      // 2 x multiply-adds
  // Text models: token ids below `vocab`, of this shape (their batch and sequence dims are
  // symbolic in the file). Empty: random normal inputs of the declared shapes.
  std::vector<int64_t> tokens = {};
  int64_t vocab = 0;
};

std::vector<ModelCase> model_cases() {
  const fs::path list = fs::path(SMELT_BENCH_DIR) / "models.json";
  std::ifstream in(list);
  SMELT_CHECK(in) << "smelt_bench: cannot read " << list.string() << " (the list of real models)";
  const nlohmann::json doc = nlohmann::json::parse(in);
  std::vector<ModelCase> cases;
  for (const nlohmann::json& m : doc.at("models")) {
    ModelCase c{m.at("name").get<std::string>(), m.at("dir").get<std::string>(), m.at("flops").get<double>()};
    if (m.contains("tokens")) {
      c.tokens = m.at("tokens").get<std::vector<int64_t>>();
      c.vocab = m.at("vocab").get<int64_t>();
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

fs::path models_dir() {
  const char* env = std::getenv("SMELT_BENCH_MODELS");
  return env && *env ? fs::path(env) : fs::path("build") / "models";
}

// The model imported for its declared input shape, with a random input of that shape.
struct Loaded {
  onnx::Model model;
  std::vector<Tensor> inputs;
};

Loaded load(const fs::path& file, const ModelCase& m) {
  Generator gen(1);
  if (!m.tokens.empty()) {
    const onnx::ModelInfo info = onnx::inspect(file.string());
    onnx::ImportOptions options;
    options.input_shapes[info.inputs.at(0).name] = m.tokens;
    Loaded l{onnx::import_model(file.string(), options), {}};
    l.inputs.push_back(randint(0, m.vocab, Shape(m.tokens.begin(), m.tokens.end()), &gen));
    return l;
  }
  Loaded l{onnx::import_model(file.string()), {}};
  const onnx::ModelInfo info = onnx::inspect(file.string());
  for (const onnx::ValueInfo& v : info.inputs) l.inputs.push_back(randn(Shape(v.dims.begin(), v.dims.end()), DType::Float32, &gen));
  return l;
}

std::string plan_note(const runtime::CompiledGraph& c) {
  const runtime::PlanStats& s = c.plan->stats();
  std::ostringstream os;
  os << s.kernels << " kernels (" << s.tiled_contractions << " conv/matmul epilogues in tiles), " << s.op_steps
     << " op steps";
  if (s.interpreted) os << ", " << s.interpreted << " interpreted groups";
  os << "; " << c.nodes_before << " -> " << c.nodes_after << " nodes; arena " << s.arena_bytes / 1024 << " KiB (naive "
     << s.naive_bytes / 1024 << " KiB); compiled in " << int(c.compile_ms) << " ms";
  return os.str();
}

}  // namespace

std::vector<Workload> model_workloads() {
  std::vector<Workload> all;
  for (const ModelCase& m : model_cases()) {
    const fs::path file = models_dir() / m.dir / "model.onnx";
    const std::string missing =
        fs::exists(file) ? "" : "no " + file.string() + " (tests/models/make_models.py large " + models_dir().string() + ")";
    all.push_back({.name = m.name, .flops = m.flops, .impl = "smelt-eager", .missing = missing, .build = [file, m] {
                     auto l = std::make_shared<Loaded>(load(file, m));
                     return Step([l] { l->model.graph.run(l->inputs); });
                   }});
    auto compiled = std::make_shared<std::shared_ptr<runtime::CompiledGraph>>();
    auto loaded = std::make_shared<std::shared_ptr<Loaded>>();
    all.push_back({.name = m.name, .flops = m.flops, .impl = "smelt-compiled", .missing = missing,
                   .build =
                       [file, m, compiled, loaded] {
                         auto l = std::make_shared<Loaded>(load(file, m));
                         runtime::PipelineOptions options;
                         options.backend = runtime::KernelBackend::Compiled;
                         *compiled = std::make_shared<runtime::CompiledGraph>(
                             runtime::compile_graph(l->model.graph.ir_graph().clone(), options));
                         *loaded = l;
                         std::shared_ptr<runtime::CompiledGraph> c = *compiled;
                         return Step([l, c] { c->plan->run(l->inputs); });
                       },
                   .note = [compiled] { return *compiled ? plan_note(**compiled) : std::string("not built"); },
                   .plan =
                       [compiled] {
                         if (!*compiled) return std::string("not built");
                         const runtime::CompiledGraph& c = **compiled;
                         return c.fusion_explain + "\n" + c.plan->describe();
                       },
                   .profile =
                       [compiled, loaded](int runs) {
                         std::vector<runtime::KernelProfile> kernels;
                         if (!*compiled) return kernels;
                         runtime::Plan& plan = *(*compiled)->plan;
                         plan.set_profiling(true);
                         for (int i = 0; i < runs; ++i) plan.run((*loaded)->inputs);
                         plan.set_profiling(false);
                         kernels = plan.profile().kernels();
                         return kernels;
                       }});
  }
  return all;
}

}  // namespace smelt::bench
