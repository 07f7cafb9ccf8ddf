// The differential fuzzer: random graphs through the pass pipeline, compared against the
// unoptimized graph on the interpreter and against eager execution through the dispatcher.
// A failing graph is minimized (outputs dropped, nodes bypassed, while it still fails) and can be
// written as a text-IR regression case for tests/fuzz/.
//
// Inputs are drawn with special values (fuzz/special_values.h) in a share of the cases, and the
// results are compared by the rule in fuzzer.cpp: bit for bit (any NaN matching any NaN, the sign
// of zero checked, integers exact), with a tolerance only for outputs that a rounding-changing
// pass (fold_batchnorm) may reach, and with canonical operand layouts for reductions and
// contractions whose accumulation order follows the memory layout.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "fuzz/random_graph.h"
#include "passes/pass_manager.h"

namespace smelt::fuzz {

// What `smelt fuzz` tests by default: the canonical passes to a fixed point, then fusion (the
// pass `fuse`, fusion/fuse.h), whose groups the interpreter runs by interpreting their bodies.
inline const std::string kFuzzPipeline = std::string(passes::kDefaultPipeline) + ",fuse";

struct CaseResult {
  bool passed = true;
  std::string message;         // what differed, for a failure
  int exact_outputs = 0;       // outputs compared bit for bit
  int tolerant_outputs = 0;    // outputs compared with the rounding tolerance
  int rounded_outputs = 0;     // ... of which differed in some bits (within the tolerance)
  bool layout_rounding = false;  // outputs matched only once reductions and contractions read
                                 // contiguous operands (an accumulation order, not a pass bug)
  bool runtime_error = false;  // the graph fails when run (integer division by zero), and every
                               // way of running it failed alike
};

// Runs `graph` unoptimized (interpreter and eager) and after `pipeline`; compares the results on
// random inputs drawn from `input_seed`.
CaseResult check_graph(const ir::Graph& graph, const std::string& pipeline, uint64_t input_seed);

// Shrinks a failing graph while check_graph keeps failing.
std::unique_ptr<ir::Graph> minimize(const ir::Graph& failing, const std::string& pipeline,
                                    uint64_t input_seed);

// Shrinks a failing graph while `still_fails` holds (the same moves for any check).
std::unique_ptr<ir::Graph> minimize(const ir::Graph& failing,
                                    const std::function<bool(const ir::Graph&)>& still_fails);

// A regression file: "# PIPELINE:" line, the graph, and "# EXPECT: same-as-interpreter".
std::string regression_text(const ir::Graph& graph, const std::string& pipeline, uint64_t input_seed,
                            const std::string& message);

}  // namespace smelt::fuzz
