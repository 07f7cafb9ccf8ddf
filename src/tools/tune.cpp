// smelt tune: measures the implementations of every convolution in an ONNX model ahead of time
// and stores the fastest per shape in the tuning file (runtime/tuning_file.h), so later runs of
// the model (any process on this machine, same thread count) start with the tuned choice.
//
//   smelt tune model.onnx                       batch and other symbolic dims: --dim NAME=VALUE
//   OMP_NUM_THREADS=2 smelt tune model.onnx     tune for 2 threads (the thread count is in the key)
//
// One line per distinct shape: the candidates' best times and the choice. Then the model itself,
// compiled with and without the blocked channel layout (runtime/layout_choice.h) and run with
// random inputs: the faster layout is recorded for the whole graph.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <sstream>

#include "ir/graph.h"
#include "kernels/conv_select.h"
#include "kernels/quantize.h"
#include "ops/conv_geometry.h"
#include "passes/pass_manager.h"
#include "runtime/layout_choice.h"
#include "runtime/pipeline.h"
#include "runtime/tuning_file.h"
#include "smelt/creation.h"
#include "smelt/onnx.h"
#include "tools/commands.h"

namespace smelt::tools {
namespace {

struct TuneArgs {
  std::string model;
  std::vector<std::string> dims;  // NAME=VALUE
  int runs = 3;
};

void collect(const ir::Graph& g, std::vector<std::pair<kernels::Conv2dGeometry, DType>>* out, std::set<std::string>* seen) {
  for (const auto& n : g.nodes()) {
    if (n->body) collect(*n->body, out, seen);
    if (n->op != ops::OpId::conv2d || n->inputs.size() != 2) continue;
    const DType dtype = n->inputs[0]->meta.dtype;
    const kernels::Conv2dGeometry geo = ops::conv2d_geometry(n->inputs[0]->meta.shape, n->inputs[1]->meta.shape, n->attrs);
    if (seen->insert(kernels::conv_tuning_key(geo, dtype)).second) out->push_back({geo, dtype});
  }
}

// The compiled plan of `graph` with or without the blocked layout, on the C++ backend.
runtime::CompiledGraph compile_layout(const ir::Graph& graph, bool blocked) {
  runtime::PipelineOptions options;
  options.backend = runtime::KernelBackend::Compiled;
  options.follow_layout_tuning = false;  // both ways, whatever is recorded
  if (!blocked) options.passes = runtime::pipeline_without(passes::kDefaultPipeline, "blocked_layout");
  return runtime::compile_graph(graph.clone(), options);
}

// Random inputs for the graph's inputs (floating: normal; integer: zeros).
std::vector<Tensor> random_inputs(const ir::Graph& graph) {
  Generator gen(1);
  std::vector<Tensor> inputs;
  for (const ir::Value* v : graph.inputs()) {
    inputs.push_back(dtype_is_floating(v->meta.dtype) ? randn(v->meta.shape, v->meta.dtype, &gen)
                                                      : zeros(v->meta.shape, v->meta.dtype));
  }
  return inputs;
}

// A quantized model's convolutions run smelt's kernels or oneDNN's (kernels/qconv.cpp), chosen by
// measuring each shape on its first call: measured again here, with the model compiled as it runs.
void tune_quantized(const ir::Graph& graph) {
  runtime::PipelineOptions options;
  options.backend = runtime::KernelBackend::Compiled;
  runtime::CompiledGraph compiled = runtime::compile_graph(graph.clone(), options);
  if (!ir::holds_op(*compiled.graph, ops::OpId::qlinear_conv2d)) return;
  kernels::qconv_remeasure_choices(true);
  compiled.plan->run(random_inputs(graph));
  kernels::qconv_remeasure_choices(false);
  const std::vector<std::string> lines = kernels::qconv_take_measurements();
  for (const std::string& line : lines) std::printf("%s\n", line.c_str());
  std::printf("%zu quantized convolution shapes measured (smelt's kernels against oneDNN's)\n", lines.size());
}

// Measures the graph both ways (alternating, the best run of each counts) and records the faster.
void tune_layout(const ir::Graph& graph, int runs) {
  const std::string key = runtime::layout_tuning_key(graph);
  if (key.empty()) return;
  runtime::CompiledGraph blocked = compile_layout(graph, true), plain = compile_layout(graph, false);
  if (!ir::holds_op(*blocked.graph, ops::OpId::conv2d_blocked)) {
    std::printf("layout: the blocked layout pass keeps this graph plain (fewer than two convolutions it "
                "can take); nothing to choose\n");
    return;
  }
  const std::vector<Tensor> inputs = random_inputs(graph);
  auto time_once = [&](runtime::Plan& plan) {
    const auto start = std::chrono::steady_clock::now();
    plan.run(inputs);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  for (int warm = 0; warm < 2; ++warm) time_once(*blocked.plan), time_once(*plain.plan);
  double blocked_ms = 1e300, plain_ms = 1e300;
  for (int run = 0; run < 3 * runs; ++run) {
    blocked_ms = std::min(blocked_ms, time_once(*blocked.plan));
    plain_ms = std::min(plain_ms, time_once(*plain.plan));
  }
  const runtime::LayoutChoice choice = blocked_ms <= plain_ms ? runtime::LayoutChoice::Blocked : runtime::LayoutChoice::Plain;
  std::ostringstream detail;
  detail << "blocked=" << blocked_ms << "ms plain=" << plain_ms << "ms";
  runtime::record_layout_choice(key, choice, detail.str());
  std::printf("%s: blocked %.3f ms plain %.3f ms -> %s\n", key.c_str(), blocked_ms, plain_ms,
              runtime::layout_choice_name(choice));
}

void run_tune(const TuneArgs& args) {
  onnx::ImportOptions options;
  for (const std::string& d : args.dims) {
    const size_t eq = d.rfind('=');
    SMELT_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < d.size())
        << "tune: --dim '" << d.substr(0, 80) << "' must be NAME=VALUE";
    options.dims[d.substr(0, eq)] = std::stoll(d.substr(eq + 1));
  }
  onnx::Model model = onnx::import_model(args.model, options);
  std::vector<std::pair<kernels::Conv2dGeometry, DType>> shapes;
  std::set<std::string> seen;
  collect(model.graph.ir_graph(), &shapes, &seen);
  for (const auto& [geo, dtype] : shapes) {
    if (!dtype_is_floating(dtype)) continue;
    // Both ways a model's convolutions run: with the weight as a compiled plan's constant, and
    // as a plain tensor (eager or interpreted graphs).
    for (bool weight_constant : {true, false}) {
      const kernels::ConvTuneResult r = kernels::conv_tune(geo, dtype, args.runs, weight_constant);
      std::printf("%s:", r.key.c_str());
      for (const kernels::ConvCandidateTime& t : r.times) std::printf(" %s %.3f ms", kernels::conv_impl_name(t.impl), t.ms);
      std::printf(" -> %s\n", kernels::conv_impl_name(r.best));
    }
  }
  tune_layout(model.graph.ir_graph(), args.runs);
  tune_quantized(model.graph.ir_graph());
  std::printf("%zu convolution shapes tuned; tuning file %s\n", shapes.size(), runtime::tuning_file_path().c_str());
}

}  // namespace

void register_tune(CLI::App& app) {
  auto args = std::make_shared<TuneArgs>();
  CLI::App* cmd = app.add_subcommand("tune", "measure each convolution of an ONNX model and store the fastest implementation");
  cmd->add_option("model", args->model, "the .onnx file")->required();
  cmd->add_option("--dim", args->dims, "NAME=VALUE for a symbolic dim");
  cmd->add_option("--runs", args->runs, "timed runs per candidate (the best counts)")->check(CLI::Range(1, 1000));
  cmd->callback([args] { run_tune(*args); });
}

}  // namespace smelt::tools
