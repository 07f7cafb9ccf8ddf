// One benchmark workload of smelt_bench: a name shared with bench/torch_bench.py, the work it
// does (for GB/s, GFLOP/s and the roofline) and how to build its timed step.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>


namespace smelt::bench {

using Step = std::function<void()>;

struct Workload {
  std::string name;          // exactly as in torch_bench.py: run.py pairs the two by name
  double bytes = 0;          // bytes a perfect kernel must move (0: not memory-bound)
  double flops = 0;          // floating-point operations (0: not counted)
  std::string impl = "smelt-eager";  // "limit" for the machine's ceilings
  // Empty when the workload runs; else the capability it still needs (ONNX import, the
  // compiler), shown in the results table instead of a number.
  std::string missing;
  bool training = false;     // a training step: its peak memory is measured too
  // Allocates the inputs (and model) once and returns the step that is timed.
  std::function<Step()> build;
};

std::vector<Workload> op_workloads();        // elementwise, softmax, norm, GEMM, conv, dispatch
std::vector<Workload> training_workloads();  // MLP, CNN, transformer block
std::vector<Workload> limit_workloads();     // STREAM copy/triad, OpenBLAS sgemm
// Workloads of the issue that need a capability smelt does not have yet (listed, never run).
std::vector<Workload> future_workloads();


}  // namespace smelt::bench
