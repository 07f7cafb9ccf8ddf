// The pass registry: every pass once, name -> one-line description -> function.
#include "passes/blocked_layout.h"
#include "passes/canonicalize.h"
#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/fold.h"
#include "passes/inline_custom.h"
#include "passes/pass_manager.h"
#include "passes/simplify.h"
#include "passes/expand_quantize.h"
#include "passes/fold_batchnorm.h"
#include "passes/fold_qdq.h"
#include "passes/sink_dequantize.h"
#include "passes/transpose_normalize.h"
#include "passes/transpose_sink.h"

namespace smelt::passes {

namespace {

std::vector<PassInfo>& registry() {
  static std::vector<PassInfo> passes = {
      {"inline_custom", "replace user-defined ops that have an expression by its ops (smelt/custom_op.h)", inline_custom},
      {"dce", "remove nodes whose results are never used, and unused constants", dce},
      {"cse", "merge nodes that compute the same op on the same inputs, and equal constants", cse},
      {"canonicalize", "put commutative operands in canonical order (constants last)", canonicalize},
      {"fold_qdq", "a QDQ model's dequantize -> conv2d/matmul -> quantize chains become qlinear_conv2d/qlinear_matmul", fold_qdq},
      {"fold", "evaluate nodes whose inputs are all constants (not random ops; size-limited)", fold},
      {"simplify", "algebraic identities: x+0, x*1, neg(neg(x)), permute/reshape chains, ...", simplify},
      {"transpose_sink", "move permutes down through elementwise ops until they compose and cancel", transpose_sink},
      {"transpose_normalize", "permutes of size-1 dims become reshapes; merged dims give smaller permutes", transpose_normalize},
      {"sink_dequantize", "max_pool2d of a dequantized value pools the bytes and dequantizes after", sink_dequantize},
      {"expand_quantize", "per-tensor quantize/dequantize as elementwise primitives, so that they fuse with the float ops beside them", expand_quantize},
      {"fold_batchnorm", "fold eval-mode batch_norm into the constant weights of conv2d/matmul before it, else into a per-channel scale and shift", fold_batchnorm},
      {"blocked_layout", "float32 convs on blocked channels (N, C/16, H, W, 16), conversions at the region's edges", blocked_layout},
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
