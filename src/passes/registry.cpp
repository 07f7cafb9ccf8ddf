// The pass registry: every pass once, name -> one-line description -> function.
#include "passes/canonicalize.h"
#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/fold.h"
#include "passes/pass_manager.h"
#include "passes/simplify.h"

namespace smelt::passes {

const std::vector<PassInfo>& pass_registry() {
  static const std::vector<PassInfo> kPasses = {
      {"dce", "remove nodes whose results are never used, and unused constants", dce},
      {"cse", "merge nodes that compute the same op on the same inputs, and equal constants", cse},
      {"canonicalize", "put commutative operands in canonical order (constants last)", canonicalize},
      {"fold", "evaluate nodes whose inputs are all constants (not random ops; size-limited)", fold},
      {"simplify", "algebraic identities: x+0, x*1, neg(neg(x)), permute/reshape chains, ...", simplify},
  };
  return kPasses;
}

}  // namespace smelt::passes
