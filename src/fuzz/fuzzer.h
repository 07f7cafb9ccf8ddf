// The differential fuzzer: random graphs through the pass pipeline, compared against the
// unoptimized graph on the interpreter and against eager execution through the dispatcher.
// A failing graph is minimized (outputs dropped, nodes bypassed, while it still fails) and can be
// written as a text-IR regression case for tests/fuzz/.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "fuzz/random_graph.h"

namespace smelt::fuzz {

struct CaseResult {
  bool passed = true;
  std::string message;  // what differed, for a failure
};

// Runs `graph` unoptimized (interpreter and eager) and after `pipeline`; compares the results on
// random inputs drawn from `input_seed`.
CaseResult check_graph(const ir::Graph& graph, const std::string& pipeline, uint64_t input_seed);

// Shrinks a failing graph while check_graph keeps failing.
std::unique_ptr<ir::Graph> minimize(const ir::Graph& failing, const std::string& pipeline,
                                    uint64_t input_seed);

// A regression file: "# PIPELINE:" line, the graph, and "# EXPECT: same-as-interpreter".
std::string regression_text(const ir::Graph& graph, const std::string& pipeline, uint64_t input_seed,
                            const std::string& message);

}  // namespace smelt::fuzz
