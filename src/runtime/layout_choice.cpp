#include "runtime/layout_choice.h"

#include <sstream>

#include "base/log.h"
#include "base/parallel.h"
#include "codegen/disk_cache.h"
#include "ir/printer.h"
#include "kernels/conv_select.h"

namespace smelt::runtime {
const char* layout_choice_name(LayoutChoice choice) {
  switch (choice) {
    case LayoutChoice::Heuristic: return "heuristic";
    case LayoutChoice::Blocked: return "blocked";
    case LayoutChoice::Plain: return "plain";
  }
  return "?";
}

std::string layout_tuning_key(const ir::Graph& graph) {
  if (!ir::holds_op(graph, ops::OpId::conv2d)) return "";
  ir::PrintOptions options;
  options.max_constant_elements = 0;  // shapes and dtypes only: weights do not change the choice
  return "layout threads=" + std::to_string(num_threads()) + " graph=" + codegen::disk::hash_hex(ir::print(graph, options));
}

LayoutChoice tuned_layout(const ir::Graph& graph) {
  const std::string key = layout_tuning_key(graph);
  if (key.empty()) return LayoutChoice::Heuristic;
  LayoutChoice choice = LayoutChoice::Heuristic;
  if (const std::optional<std::string> recorded = kernels::tuning_store_lookup(key)) {
    if (*recorded == "blocked") choice = LayoutChoice::Blocked;
    if (*recorded == "plain") choice = LayoutChoice::Plain;  // (anything else: a newer smelt's word)
  }
  debug_log(2, key + " -> " + layout_choice_name(choice) + (choice == LayoutChoice::Heuristic ? "" : " (tuning file)"));
  return choice;
}

void record_layout_choice(const std::string& key, LayoutChoice choice, const std::string& detail) {
  SMELT_CHECK(!key.empty() && choice != LayoutChoice::Heuristic)
      << "record_layout_choice: needs a graph key and a measured choice (blocked or plain)";
  kernels::tuning_store_record(key, layout_choice_name(choice), detail);
  debug_log(2, key + " -> " + layout_choice_name(choice) + " (tuned: " + detail + ")");
}

std::string pipeline_without(const std::string& pipeline, const std::string& pass) {
  std::string out, item;
  std::istringstream in(pipeline);
  while (std::getline(in, item, ',')) {
    if (item == pass) continue;
    out += (out.empty() ? "" : ",") + item;
  }
  return out;
}

}  // namespace smelt::runtime
