#include "ops/contraction_tiles.h"

#include "ops/dispatch.h"

namespace smelt::ops {

int contraction_tile_col_dims(OpId op, const std::vector<TensorMeta>& inputs) {
  if (inputs.size() != 2 || !dtype_is_floating(inputs[0].dtype)) return 0;
  if (op == OpId::matmul) return inputs[1].shape.size() >= 2 ? 1 : 0;
  if (op == OpId::conv2d) return 2;
  if (op == OpId::conv2d_blocked) return 1;  // (N, Ob, Ho, Wo, B): rows N Ob Ho Wo, columns the lanes
  return 0;
}

void contraction_with_epilogue(OpId op, const std::vector<Tensor>& inputs, const Attrs& attrs, const Tensor& y,
                               const kernels::GemmEpilogue& epilogue) {
  std::vector<TensorMeta> metas;
  for (const Tensor& t : inputs) metas.push_back(meta_of(t));
  SMELT_INTERNAL_CHECK(contraction_tile_col_dims(op, metas) > 0)
      << "contraction_with_epilogue: " << op_name(op) << " cannot run with a tile epilogue here";
  if (op == OpId::matmul) {
    matmul_with_epilogue(y, inputs[0], inputs[1], epilogue);
  } else if (op == OpId::conv2d_blocked) {
    conv2d_blocked_with_epilogue(y, inputs[0], inputs[1], attrs, epilogue);
  } else {
    conv2d_with_epilogue(y, inputs[0], inputs[1], attrs, epilogue);
  }
}

}  // namespace smelt::ops
