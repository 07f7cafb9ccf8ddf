// The memory planner: places the intermediate buffers of a schedule in one arena so that buffers
// live at the same step never share memory, and buffers that are never live together do. It
// knows nothing of the IR: the caller (the Plan) turns its schedule into buffer requests.
//
// A schedule is steps 0..N-1. Buffer i is written by step first_step and read for the last time
// by step last_step (inclusive); it occupies memory over [first_step, last_step]. Graph inputs,
// parameters and outputs are never requests, so the planner cannot overwrite them.
//
// In-place reuse: `inplace_of = j` offers buffer j's memory to buffer i, because the step that
// writes i is j's last reader and may write its output over its input (an elementwise op, same
// byte size). The caller decides that this is legal; the planner takes the offer when i fits in
// j's region and nobody else took j, and then i and j share memory exactly at that step.
//
// Sizes are rounded up to kArenaAlignment everywhere (naive total, lower bound, arena), so every
// buffer starts 64-byte aligned when the arena does.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace smelt::runtime {

constexpr int64_t kArenaAlignment = 64;

struct BufferRequest {
  int64_t bytes = 0;        // >= 0; zero-byte buffers get offset 0 and conflict with nothing
  int64_t first_step = 0;   // the step that writes it; >= 0
  int64_t last_step = 0;    // the last step that reads it (inclusive); >= first_step
  int64_t inplace_of = -1;  // a request whose memory this one may take over, or -1; that
                            // request's last_step must equal this one's first_step
  std::string label;        // for the report and the SVG only; may be empty
};

enum class MemoryStrategy {
  BySize,   // largest first, each at the lowest-waste free gap over its lifetime
  ByOrder,  // in first_step order (an online allocator with coalescing), best-fit gap
  BySizePerturbed,  // by size with sizes jittered (seeded), tried while above the lower bound
  None,     // planning off: each buffer its own region, laid out in request order
};
const char* memory_strategy_name(MemoryStrategy s);

// Buffer `buffer` was given the memory of buffer `reused` (its inplace_of).
struct InplaceReuse {
  int64_t buffer = 0;
  int64_t reused = 0;
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // per request: multiple of kArenaAlignment, in [0, arena_bytes]
  int64_t arena_bytes = 0;       // multiple of kArenaAlignment
  int64_t naive_bytes = 0;       // sum of all (rounded) sizes: one allocation per buffer
  // Most bytes live at any one step, a buffer and the one it takes over in place counted once at
  // their handover step: no plan that takes those reuses can use less. With planning off it still
  // assumes the reuses a plan would take. `lower_bound_step` is that step (-1 when none).
  int64_t lower_bound_bytes = 0;
  int64_t lower_bound_step = -1;
  int64_t num_steps = 0;  // 1 + the largest last_step (0 for no requests)
  MemoryStrategy strategy = MemoryStrategy::None;
  int64_t by_size_bytes = 0;   // the arena each strategy needed (0 when not tried)
  int64_t by_order_bytes = 0;
  int64_t perturbed_bytes = 0;  // the best perturbed order's arena, over perturbed_tries tries
  int perturbed_tries = 0;
  std::vector<InplaceReuse> inplace;  // the reuses taken, by increasing `buffer`
};

struct MemoryPlanOptions {
  bool enabled = true;  // false: every buffer its own region (arena = naive), no in-place reuse
  bool inplace = true;  // take the in-place offers
  bool by_size = true;  // the strategies to try (at least one when enabled); the smaller arena wins
  bool by_order = true;
  // Up to this many perturbed by-size orders, tried only while the arena exceeds the lower bound
  // (each costs as much as one strategy).
  int perturbed_tries = 16;
};
// `enabled` is false when SMELT_NO_MEMPLAN=1 (0 or unset: true; anything else is an error).
MemoryPlanOptions memory_plan_options_from_env();

// Plans the requests; throws smelt::Error naming the request on a malformed one (negative size,
// last_step < first_step, a bad inplace_of). Each strategy is O(n^2) in the number of buffers.
MemoryPlan plan_memory(const std::vector<BufferRequest>& requests,
                       const MemoryPlanOptions& options = memory_plan_options_from_env());

// Throws smelt::Error (internal) unless `plan` is a valid placement of `requests`: offsets
// aligned and inside the arena, and no two buffers live at a common step overlap in memory,
// except an in-place reuse the plan lists, at the same offset, sharing only the handover step.
void check_plan(const std::vector<BufferRequest>& requests, const MemoryPlan& plan);

// Plain-text summary: naive total, planned arena (and each strategy's), lower bound and ratios.
std::string memory_plan_report(const std::vector<BufferRequest>& requests, const MemoryPlan& plan);
// The arena over time as standalone SVG: x is the step, y the offset, one labelled rectangle per
// buffer, the lower bound as a dashed line.
std::string memory_plan_svg(const std::vector<BufferRequest>& requests, const MemoryPlan& plan,
                            std::string_view title = "arena timeline");
// Writes memory_plan_svg(...) to `path`; throws smelt::Error naming the path on failure.
void write_memory_plan_svg(const std::string& path, const std::vector<BufferRequest>& requests,
                           const MemoryPlan& plan, std::string_view title = "arena timeline");

}  // namespace smelt::runtime
