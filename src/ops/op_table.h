// The op table (generated from ops.def) and the per-op implementation record.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "ops/attrs.h"
#include "smelt/tensor.h"

namespace smelt::ops {

enum class OpId : uint16_t {
#define SMELT_OP(name, kind, arity, flags) name,
#include "ops/ops.def"
#undef SMELT_OP
};

inline constexpr int kOpCount = 0
#define SMELT_OP(name, kind, arity, flags) +1
#include "ops/ops.def"
#undef SMELT_OP
    ;

enum class OpKind : uint8_t { Elementwise, Broadcast, Injective, Reduce, Contraction, Opaque };
const char* op_kind_name(OpKind kind);

enum OpFlags : uint32_t {
  kCommutative = 1u << 0,
  kAssociative = 1u << 1,
  kInPlace = 1u << 2,
  kNoGrad = 1u << 3,
  kRandom = 1u << 4,
};

struct OpInfo {
  const char* name;
  OpKind kind;
  int arity;  // -1: variadic
  uint32_t flags;
};

const OpInfo& op_info(OpId op);
const char* op_name(OpId op);
// Looks an op up by name; false when there is none.
bool op_from_name(const std::string& name, OpId* out);

// Shape and dtype of a tensor, without data: what shape rules compute.
struct TensorMeta {
  Shape shape;
  DType dtype = DType::Float32;
  bool operator==(const TensorMeta& o) const { return shape == o.shape && dtype == o.dtype; }
};

// What a gradient rule sees. `grads[k]` is the gradient of output k (zeros when none flowed).
struct GradContext {
  const std::vector<Tensor>& inputs;
  const std::vector<Tensor>& outputs;
  const std::vector<Tensor>& grads;
  const Attrs& attrs;
  const std::vector<bool>& needs_input_grad;
  bool needs(size_t i) const { return i < needs_input_grad.size() && needs_input_grad[i]; }
};

// Output metas from input metas and attributes; throws smelt::Error on invalid input.
using ShapeFn = std::vector<TensorMeta> (*)(const std::vector<TensorMeta>& in, const Attrs& attrs);
// Computes the outputs (allocating them, or returning views of an input).
using KernelFn = std::vector<Tensor> (*)(const std::vector<Tensor>& in, const Attrs& attrs,
                                         const std::vector<TensorMeta>& out);
// One gradient per input (undefined where there is none), written with smelt ops so that it runs
// eagerly, records IR under the tracer, and differentiates again for higher-order gradients.
// Gradients may have the broadcast shape; the engine reduces them to the input's shape.
using GradRuleFn = std::vector<Tensor> (*)(const GradContext& ctx);

enum SaveFlags : uint8_t { kSaveNothing = 0, kSaveInputs = 1, kSaveOutputs = 2, kSaveBoth = 3 };

struct OpImpl {
  ShapeFn shape;
  KernelFn kernel;
  GradRuleFn grad;  // null for kNoGrad ops
  uint8_t saves;    // which tensors the gradient rule reads
  // Bitmask of inputs the gradient rule never reads even with kSaveInputs: they are kept as
  // shape/dtype only, so that updating them in place after the call (batch norm's running
  // statistics) does not invalidate the node.
  uint32_t unread_inputs = 0;
};

const OpImpl& op_impl(OpId op);

}  // namespace smelt::ops

// Defines the implementation record of op `name` in a family file:
//   SMELT_OP_IMPL(add) = {add_shape, add_kernel, add_grad, kSaveInputs};
#define SMELT_OP_IMPL(name) extern const ::smelt::ops::OpImpl kOpImpl_##name; \
  const ::smelt::ops::OpImpl kOpImpl_##name
