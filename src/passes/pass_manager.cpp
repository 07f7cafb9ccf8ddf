#include "passes/pass_manager.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "base/env.h"
#include "base/excerpt.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace smelt::passes {

const PassInfo* find_pass(const std::string& name) {
  for (const PassInfo& p : pass_registry()) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

std::vector<const PassInfo*> parse_pipeline(const std::string& pipeline) {
  std::vector<const PassInfo*> passes;
  std::stringstream ss(pipeline);
  std::string name;
  while (std::getline(ss, name, ',')) {
    name.erase(0, name.find_first_not_of(" \t"));
    name.erase(name.find_last_not_of(" \t") + 1);
    if (name.empty()) continue;
    const PassInfo* p = find_pass(name);
    if (!p) {
      std::string valid;
      for (const PassInfo& q : pass_registry()) valid += (valid.empty() ? "" : ", ") + std::string(q.name);
      SMELT_CHECK(false) << "unknown pass '" << name << "' in pipeline \"" << pipeline
                         << "\"; valid passes: " << valid;
    }
    passes.push_back(p);
  }
  return passes;
}

PassOptions options_from_env() {
  PassOptions o;
  if (std::optional<std::string> v = env_text("SMELT_PRINT_IR_AFTER")) {
    SMELT_CHECK(*v == "all" || find_pass(*v))
        << "environment variable SMELT_PRINT_IR_AFTER='" << excerpt(*v)
        << "' names no pass; valid: all, or a pass name (smelt opt --list-passes)";
    o.print_ir_after = *v;
  }
  if (std::optional<std::string> v = env_text("SMELT_DISABLE_PASSES")) {
    std::stringstream ss(*v);
    std::string name;
    while (std::getline(ss, name, ',')) {
      if (name.empty()) continue;
      SMELT_CHECK(find_pass(name))
          << "environment variable SMELT_DISABLE_PASSES='" << excerpt(*v) << "' names no pass '"
          << excerpt(name) << "'; valid: comma-separated pass names (smelt opt --list-passes)";
      o.disabled.insert(name);
    }
  }
  return o;
}

PipelineResult run_pipeline(ir::Graph& graph, const std::string& pipeline,
                            const PassOptions& options) {
  std::vector<const PassInfo*> passes = parse_pipeline(pipeline);
  for (const std::string& d : options.disabled) {
    SMELT_CHECK(find_pass(d)) << "SMELT_DISABLE_PASSES names an unknown pass '" << excerpt(d)
                              << "'; valid: the names smelt opt --list-passes shows";
  }
  PipelineResult result;
  for (const PassInfo* p : passes) result.stats.push_back({p->name});
  std::ostream& log = options.log ? *options.log : std::cerr;

  if (options.verify) ir::verify(graph);
  for (int iter = 0; iter < options.max_iterations; ++iter) {
    bool changed_any = false;
    for (size_t i = 0; i < passes.size(); ++i) {
      const PassInfo& pass = *passes[i];
      if (options.disabled.count(pass.name)) continue;
      PassStats& st = result.stats[i];
      if (st.runs == 0) st.nodes_before = graph.num_nodes();
      auto start = std::chrono::steady_clock::now();
      bool changed = pass.run(graph);
      st.milliseconds += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      ++st.runs;
      st.nodes_after = graph.num_nodes();
      if (!changed) continue;
      ++st.changes;
      changed_any = true;
      if (options.verify) {
        try {
          ir::verify(graph);
        } catch (const Error& e) {
          SMELT_INTERNAL_CHECK(false) << "the IR is invalid after pass '" << pass.name << "': " << e.what();
        }
      }
      if (options.print_ir_after == "all" || options.print_ir_after == pass.name) {
        log << "// IR after " << pass.name << " (iteration " << iter + 1 << ")\n"
            << ir::print(graph, ir::PrintOptions{options.print_max_constant_elements});
      }
    }
    result.iterations = iter + 1;
    if (!changed_any) {
      result.converged = true;
      break;
    }
  }
  if (!result.converged) {
    log << "smelt: pipeline \"" << pipeline << "\" did not reach a fixed point in "
        << options.max_iterations << " iterations; passes still changing the graph:";
    for (const PassStats& st : result.stats) {
      if (st.changes >= options.max_iterations) log << " " << st.name;
    }
    log << "\n";
  }
  return result;
}

std::string PipelineResult::report() const {
  std::ostringstream os;
  char line[160];
  std::snprintf(line, sizeof line, "%-14s %5s %8s %14s %10s\n", "pass", "runs", "changes", "nodes", "ms");
  os << line;
  for (const PassStats& st : stats) {
    std::snprintf(line, sizeof line, "%-14s %5d %8d %6zu -> %-5zu %10.3f\n", st.name.c_str(), st.runs,
                  st.changes, st.nodes_before, st.nodes_after, st.milliseconds);
    os << line;
  }
  os << (converged ? "converged" : "NOT converged") << " after " << iterations << " iteration(s)\n";
  return os.str();
}

}  // namespace smelt::passes
