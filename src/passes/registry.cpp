// The pass registry: every pass once, name -> one-line description -> function.
#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/fold_batchnorm.h"
#include "passes/pass_manager.h"
#include "passes/transpose_normalize.h"
#include "passes/transpose_sink.h"

namespace smelt::passes {

const std::vector<PassInfo>& pass_registry() {
  static const std::vector<PassInfo> kPasses = {
      {"dce", "remove nodes whose results are never used, and unused constants", dce},
      {"cse", "merge nodes that compute the same op on the same inputs, and equal constants", cse},
      {"transpose_sink", "move permutes down through elementwise ops until they compose and cancel", transpose_sink},
      {"transpose_normalize", "permutes of size-1 dims become reshapes; merged dims give smaller permutes", transpose_normalize},
      {"fold_batchnorm", "fold eval-mode batch_norm into the constant weights of conv2d/matmul before it", fold_batchnorm},
  };
  return kPasses;
}

}  // namespace smelt::passes
