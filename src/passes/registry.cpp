// The pass registry: every pass once, name -> one-line description -> function.
#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/pass_manager.h"

namespace smelt::passes {

const std::vector<PassInfo>& pass_registry() {
  static const std::vector<PassInfo> kPasses = {
      {"dce", "remove nodes whose results are never used, and unused constants", dce},
      {"cse", "merge nodes that compute the same op on the same inputs, and equal constants", cse},
  };
  return kPasses;
}

}  // namespace smelt::passes
