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
  // Empty when the workload runs in this build; else what it still needs (a PENDING op row, a
  // header not merged yet), shown in the results table instead of a number.
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

// ---- which ops.def rows this build implements (PENDING rows are comments and do not count)
namespace detail {
inline constexpr std::string_view kBuiltRows[] = {
#define SMELT_OP(name, kind, arity, flags) #name,
#include "ops/ops.def"
#undef SMELT_OP
};
}  // namespace detail

constexpr bool row_built(std::string_view row) {
  for (std::string_view built : detail::kBuiltRows) {
    if (built == row) return true;
  }
  return false;
}

// True when every space-separated row in `rows` is implemented.
constexpr bool rows_built(std::string_view rows) {
  while (!rows.empty()) {
    size_t end = rows.find(' ');
    if (!row_built(rows.substr(0, end))) return false;
    if (end == std::string_view::npos) break;
    rows.remove_prefix(end + 1);
  }
  return true;
}

// "" when built, else "needs op(s) <rows> (PENDING in src/ops/ops.def of this build)".
std::string missing_rows(std::string_view rows);

}  // namespace smelt::bench
