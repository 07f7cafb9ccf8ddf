// One benchmark workload of smelt_bench: a name shared with bench/torch_bench.py, the work it
// does (for GB/s, GFLOP/s and the roofline) and how to build its timed step. A name may appear
// once per impl (smelt-eager and smelt-compiled rows of the same workload).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/profile.h"
#include "smelt/compile.h"

namespace smelt::bench {

// The op workloads' sizes, the same for their eager and compiled rows and for the GEMM limit.
inline constexpr int64_t kChainElements = int64_t(16) << 20;
inline constexpr int64_t kRows = 2048, kCols = 1024;  // softmax, log_softmax, layer_norm
inline constexpr int64_t kGemm = 1024;

using Step = std::function<void()>;

struct Workload {
  std::string name;          // exactly as in torch_bench.py: run.py pairs the two by name
  double bytes = 0;          // bytes a perfect kernel must move (0: not memory-bound)
  double flops = 0;          // floating-point operations (0: not counted)
  // "smelt-eager", "smelt-compiled" (smelt::compile, generated C++ kernels compiled before the
  // first timed call) or "limit" (the machine's ceilings).
  std::string impl = "smelt-eager";
  // Empty when the workload runs; else the capability it still needs (ONNX import, the
  // compiler), shown in the results table instead of a number.
  std::string missing;
  bool training = false;     // a training step: its peak memory is measured too
  // Allocates the inputs (and model) once and returns the step that is timed.
  std::function<Step()> build;
  // smelt-compiled only, after the first call: one line on what the compile produced (note, sent
  // to run.py with the times) and the fusion report and plan (`smelt_bench --describe <name>`).
  std::function<std::string()> note, plan;
  // smelt-compiled models only, after the first call: `runs` more calls with the plan's per-step
  // profile on (`smelt_bench` "profile" request), most time first.
  std::function<std::vector<runtime::KernelProfile>(int runs)> profile;
};

// What one first call of a compiled function cost, in a fresh process (`--compile-time`).
struct CompileTime {
  double first_call_ms = 0;  // trace + passes + fusion + plan + kernels + one run
  double pipeline_ms = 0;    // CompileReport::compile_ms (the pipeline, without the trace)
  double replay_ms = 0;      // the fastest of a few later calls (one run, no compile)
  int kernels = 0;
  double kernels_compiled = 0;  // kernel cache misses (g++ runs) in this process
  double disk_hits = 0;
  double compile_seconds = 0;   // time in the C++ compiler (kernel cache stats)
};

struct CompileTimeCase {
  std::string name;
  std::function<CompileTime()> measure;  // builds the model, then times the first call
};

std::vector<Workload> op_workloads();        // elementwise, softmax, norm, GEMM, conv, dispatch
std::vector<Workload> training_workloads();  // MLP, CNN, transformer: training steps and forwards
std::vector<Workload> compiled_workloads();  // smelt::compile versions, impl "smelt-compiled"
std::vector<Workload> limit_workloads();     // STREAM copy/triad, OpenBLAS sgemm
// ResNet-18, MobileNetV2, SqueezeNet 1.1 from ONNX files: interpreted (smelt-eager) and compiled.
std::vector<Workload> model_workloads();
// Compile time of smelt::compile, one fresh process per measurement (run.py: cold, then warm).
std::vector<CompileTimeCase> compile_time_cases();
std::vector<CompileTimeCase> training_compile_time_cases();  // compile_training_step's, part of the above
// The first call of `f` on `inputs` (trace, pipeline, kernels, one run), then the fastest of a few
// replays, with the kernel cache's counts. The caller runs the computation eagerly once before
// (untimed): the per-process choices of the eager kernels are not the compiler's cost.
CompileTime measure_first_call(CompiledFunction f, const std::vector<Tensor>& inputs);


}  // namespace smelt::bench
