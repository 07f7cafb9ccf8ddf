// The pass registry: every pass once, name -> one-line description -> function.
#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/pass_manager.h"

namespace smelt::passes {

namespace {

std::vector<PassInfo>& registry() {
  static std::vector<PassInfo> passes = {
      {"dce", "remove nodes whose results are never used, and unused constants", dce},
      {"cse", "merge nodes that compute the same op on the same inputs, and equal constants", cse},
  };
  return passes;
}

}  // namespace

const std::vector<PassInfo>& pass_registry() { return registry(); }

void register_pass(const PassInfo& pass) {
  SMELT_CHECK(!find_pass(pass.name)) << "register_pass: a pass named '" << pass.name << "' already exists";
  registry().push_back(pass);
}

}  // namespace smelt::passes
