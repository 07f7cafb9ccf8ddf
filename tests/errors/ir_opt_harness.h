// What `smelt opt` does with a text, every way at once: parse, verify, print -> parse -> print,
// each registered pass alone (verifier after it), the default pipeline, DOT. Used by the
// malformed-IR tests (tests/errors/malformed_ir_test.cpp) and the libFuzzer target
// (fuzz_targets/ir_opt_fuzz.cpp); header-only so both build it.
//
// run_ir_text returns "" when every step either succeeded or threw a user error (smelt::Error not
// marked internal), and otherwise describes the first internal error. Any other exception, and
// any crash, escapes: that is the bug the callers look for.
#pragma once

#include <sstream>
#include <string>

#include "ir/dot.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass_manager.h"

namespace smelt::ir_opt_harness {

inline bool is_internal(const Error& e) { return e.internal(); }

// print(parse(print(g))) == print(g); "" or what differs.
inline std::string check_round_trip(const ir::Graph& g, const char* where) {
  const std::string printed = ir::print(g);
  std::unique_ptr<ir::Graph> back;
  try {
    back = ir::parse(printed);
    ir::verify(*back);
  } catch (const Error& e) {
    return std::string(where) + ": printed IR does not parse back: " + e.what() + "\n" + printed;
  }
  if (ir::print(*back) != printed) return std::string(where) + ": print(parse(text)) != text\n" + printed;
  return "";
}

inline std::string run_ir_text(const std::string& text) {
  std::unique_ptr<ir::Graph> g;
  try {
    g = ir::parse(text);
    ir::verify(*g);
  } catch (const Error& e) {
    return is_internal(e) ? std::string("parse/verify: ") + e.what() : "";
  }
  if (std::string p = check_round_trip(*g, "parsed"); !p.empty()) return p;
  try {
    ir::to_dot(*g, "fuzz");
  } catch (const Error& e) {
    if (is_internal(e)) return std::string("dot: ") + e.what();
  }
  for (const passes::PassInfo& pass : passes::pass_registry()) {
    auto copy = g->clone();
    try {
      if (pass.run(*copy)) {
        try {
          ir::verify(*copy);
        } catch (const Error& e) {
          return std::string("the IR is invalid after pass ") + pass.name + ": " + e.what();
        }
        if (std::string p = check_round_trip(*copy, pass.name); !p.empty()) return p;
      }
    } catch (const Error& e) {
      if (is_internal(e)) return std::string("pass ") + pass.name + ": " + e.what();
    }
  }
  auto copy = g->clone();
  std::ostringstream log;
  passes::PassOptions options;
  options.log = &log;
  try {
    passes::run_pipeline(*copy, passes::kDefaultPipeline, options);
  } catch (const Error& e) {
    if (is_internal(e)) return std::string("default pipeline: ") + e.what();
    return "";
  }
  return check_round_trip(*copy, "default pipeline");
}

}  // namespace smelt::ir_opt_harness
