// Whether a graph's convolutions run in the blocked channel layout (passes/blocked_layout.h): a
// choice for the whole graph, since the conversions the pass places and cancels serve every conv
// at once (choosing per conv would put a pair of conversions around each one that disagrees).
//
// The pass's own rule (every conv oneDNN can run blocked, when a graph has two or more) is the
// heuristic. `smelt tune model.onnx` compiles the model both ways, runs each, and records the
// faster in the tuning file (runtime/tuning_file.h) under the graph's key: its text with constants
// elided (their values do not change what is fast) and the thread count. A later compile of the
// same graph, in any process on this machine, follows that record; SMELT_BLOCKED_LAYOUT=0 still
// turns the pass off everywhere. SMELT_DEBUG=2 logs each choice and its source.
#pragma once

#include <string>

#include "ir/graph.h"

namespace smelt::runtime {

enum class LayoutChoice { Heuristic, Blocked, Plain };

// "layout threads=<T> graph=<32 hex digits>" for `graph` as the pipeline receives it (before any
// pass); "" when the graph holds no conv2d (no choice to make).
std::string layout_tuning_key(const ir::Graph& graph);
// The recorded choice for `graph`, or Heuristic when none is recorded (or no conv, or no store).
LayoutChoice tuned_layout(const ir::Graph& graph);
// Records the measured choice for the graph whose key is `key`; `detail` says what was measured.
void record_layout_choice(const std::string& key, LayoutChoice choice, const std::string& detail);
const char* layout_choice_name(LayoutChoice choice);

// `pipeline` (comma-separated passes) without every occurrence of `pass`.
std::string pipeline_without(const std::string& pipeline, const std::string& pass);

}  // namespace smelt::runtime
