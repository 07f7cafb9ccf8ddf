// Real models from ONNX files (tests/models/make_models.py large, in $SMELT_BENCH_MODELS; run.py
// makes them in build/models): ResNet-18, MobileNetV2 and SqueezeNet 1.1, batch 1, 224x224, a
// transformer encoder (d 256, 4 layers) over one sequence of 128 tokens, and an LSTM tagger over
// one sequence of 64 tokens.
//   smelt-eager     the imported graph on the IR interpreter (one eager kernel per node: what
//                   `smelt run` does without --compile)
//   smelt-compiled  the compile pipeline (passes with batch-norm folding, fusion, memory plan,
//                   generated C++ kernels compiled before the first call, the plan replayed), as
//                   `smelt run --compile --backend cpp`
// The same files run in ONNX Runtime (bench/ort_bench.js); torch_bench.py builds the same
// torchvision architectures.
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>

#include "runtime/pipeline.h"
#include "smelt/creation.h"
#include "smelt/onnx.h"
#include "suite/workload.h"

namespace smelt::bench {
namespace {

namespace fs = std::filesystem;

struct ModelCase {
  const char* name;  // as torch_bench.py and ort_bench.js name it
  const char* dir;   // under the models directory
  double flops;      // 2 x multiply-adds
  // Text models: token ids below `vocab`, of this shape (their batch and sequence dims are
  // symbolic in the file). Empty: random normal inputs of the declared shapes.
  std::vector<int64_t> tokens = {};
  int64_t vocab = 0;
};

const ModelCase kModels[] = {
    {"ResNet-18 inference b1 224x224", "resnet18", 2 * 1.814e9},
    {"MobileNetV2 inference b1 224x224", "mobilenetv2", 2 * 0.300e9},
    {"SqueezeNet 1.1 inference b1 224x224", "squeezenet1_1", 2 * 0.349e9},
    // 4 post-norm layers, d 256, 4 heads, FFN 1024, over one sequence of 128 tokens: per layer the
    // QKV, output and two FFN projections (2 x 128 x 256 x (768 + 256 + 2 x 1024)) and attention's
    // two batched products (2 x 2 x 4 x 128 x 128 x 64).
    {"Transformer encoder d256 l4 s128 inference b1", "transformer_encoder_d256_l4_s128",
     4 * (2.0 * 128 * 256 * (768 + 256 + 2 * 1024) + 2.0 * 2 * 4 * 128 * 128 * 64)},
    // Embedding 5000x128, a 2-layer bidirectional LSTM (hidden 256), a linear head of 17 tags, over
    // one sequence of 64 tokens: per direction 2 x 64 x 4H x (I + H), I = 128 then 512.
    // Squeeze-excitation networks (1x1 convolutions on 1x1 images; hard-swish, SiLU).
    {"MobileNetV3-small inference b1 224x224", "mobilenetv3_small", 2 * 0.0566e9},
    {"EfficientNet-B0 inference b1 224x224", "efficientnet_b0", 2 * 0.386e9},
    {"LSTM tagger h256 l2 bidirectional s64 inference b1", "lstm_tagger_h256_s64",
     2 * 2.0 * 64 * 1024 * (128 + 256) + 2 * 2.0 * 64 * 1024 * (512 + 256) + 2.0 * 64 * 512 * 17,
     {1, 64}, 5000},
    // The three CNNs quantized by `smelt quantize --format qdq` (run.py makes them: entropy
    // thresholds on random-normal images): the QDQ file ONNX Runtime runs too (issue 25).
    {"ResNet-18 INT8 QDQ inference b1 224x224", "../models_int8/resnet18", 2 * 1.814e9},
    {"MobileNetV2 INT8 QDQ inference b1 224x224", "../models_int8/mobilenetv2", 2 * 0.300e9},
    {"SqueezeNet 1.1 INT8 QDQ inference b1 224x224", "../models_int8/squeezenet1_1", 2 * 0.349e9},
};

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
  for (const ModelCase& m : kModels) {
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
