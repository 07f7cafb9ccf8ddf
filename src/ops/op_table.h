// The op table (generated from ops.def) and the per-op implementation record.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "ops/attrs.h"
#include "smelt/tensor.h"

namespace smelt::ops {

enum class OpId : uint16_t {
#define SMELT_OP(name, kind, arity, outputs, flags, views, writes) name,
#include "ops/ops.def"
#undef SMELT_OP
};

inline constexpr int kOpCount = 0
#define SMELT_OP(name, kind, arity, outputs, flags, views, writes) +1
#include "ops/ops.def"
#undef SMELT_OP
    ;

enum class OpKind : uint8_t { Elementwise, Broadcast, Injective, Reduce, Contraction, Opaque };

enum OpFlags : uint32_t {
  kCommutative = 1u << 0,
  kRandom = 1u << 1,
  kRefusesValues = 1u << 2,
};

// The memory columns of ops.def. `views` packs, per output k < kMaxViewOutputs, 4 bits holding
// (the input it may view) + 1, 0 for fresh memory; `writes` has bit j set when input j is written.
inline constexpr int kMaxViewOutputs = 8;
constexpr uint32_t view(int out, int in) { return uint32_t(in + 1) << (4 * out); }
constexpr uint32_t writes(int in) { return 1u << in; }

struct OpInfo {
  const char* name;
  OpKind kind;
  int arity;  // -1: variadic
  int num_outputs;  // -1: variable (a group returns what its body returns)
  uint32_t flags;
  uint32_t views;
  uint32_t writes;
};

const OpInfo& op_info(OpId op);
const char* op_name(OpId op);

// The input output `out` of `op` may share storage with (a view, or the input itself); -1 when
// the output is always fresh memory.
int aliases(OpId op, int out);
// Whether `op` stores into input `in` (a mutation a pass must not move, merge or drop).
bool mutates(OpId op, int in);
// Whether `op` writes any of its inputs.
bool mutates_any(OpId op);
// Whether CSE may merge two calls of `op` with equal inputs and attributes, and DCE drop one
// whose outputs are unused: neither random nor writing an input.
bool is_pure(OpId op);
// Whether `op` is a view op (its `views` column is non-zero): its outputs may alias its inputs, so
// it runs its view kernel and cannot write into caller-given buffers (ops::call_into refuses it).
bool is_view_op(OpId op);
// Whether `op` has a gradient rule.
bool is_differentiable(OpId op);
// Looks an op up by name; false when there is none.
bool op_from_name(const std::string& name, OpId* out);

using smelt::TensorMeta;

// Whether a call of `op` on operands `in` may refuse their values with an error (ops.def's
// kRefusesValues: an index out of range, a class target out of range; div only when its divisor
// is a signed integer, as its kernel checks). Such a call is an effect as well as a value: eager raises there, so a compiled
// graph must too — passes keep it when nothing reads it (ir::must_run), and a fused kernel runs it
// only where it checks the same values first.
bool may_refuse_values(OpId op, const std::vector<TensorMeta>& in);

using smelt::GradContext;

// Output metas from input metas and attributes; throws smelt::Error on invalid input.
using ShapeFn = std::vector<TensorMeta> (*)(const std::vector<TensorMeta>& in, const Attrs& attrs);
// The out-variant kernel of an op whose outputs are fresh memory (a zero `views` column): writes
// every element of out[k] for each output k. The caller allocates `out` from the shape rule's
// metas (the dispatcher for eager calls; a memory plan hands it slots of one arena): each is
// contiguous and may be a view at an offset into a larger storage whose bytes hold anything.
// So a kernel writes only through out[k]'s data pointer, never assumes zeroed memory (it clears
// what it accumulates into), and allocates nothing that it returns.
using KernelFn = void (*)(const std::vector<Tensor>& in, const Attrs& attrs,
                          const std::vector<Tensor>& out);
// The kernel of a view op (a non-zero `views` column): returns outputs that may share an input's
// storage (reshape, permute, slice, expand; contiguous), so it cannot write into given buffers.
using ViewKernelFn = std::vector<Tensor> (*)(const std::vector<Tensor>& in, const Attrs& attrs,
                                             const std::vector<TensorMeta>& out);
// One gradient per input (undefined where there is none), written with smelt ops so that it runs
// eagerly, records IR under the tracer, and differentiates again for higher-order gradients.
// Gradients may have the broadcast shape; the engine reduces them to the input's shape.
using GradRuleFn = std::vector<Tensor> (*)(const GradContext& ctx);

enum SaveFlags : uint8_t { kSaveNothing = 0, kSaveInputs = 1, kSaveOutputs = 2, kSaveBoth = 3 };

// The ops.def row's `views` column says which of `kernel` and `view_kernel` an op has: exactly
// one is set (tests/ops/out_variant_test.cpp checks every row).
struct OpImpl {
  ShapeFn shape;
  KernelFn kernel;  // null for view ops
  GradRuleFn grad;  // null for ops that are not differentiable (comparisons, argmax, ...)
  uint8_t saves;    // which tensors the gradient rule reads
  // Bitmask of inputs the gradient rule never reads even with kSaveInputs: they are kept as
  // shape/dtype only, so that the caller may update them in place after the call (nn::BatchNorm2d
  // writes batch_norm's new running statistics back into the buffers it passed in) without
  // invalidating the node.
  uint32_t unread_inputs = 0;
  ViewKernelFn view_kernel = nullptr;  // view ops only
};

const OpImpl& op_impl(OpId op);

}  // namespace smelt::ops

// Defines the implementation record of op `name` in a family file:
//   SMELT_OP_IMPL(add) = {add_shape, add_kernel, add_grad, kSaveInputs};
// and of a view op, with designated initializers so that the view kernel is visibly one:
//   SMELT_OP_IMPL(reshape) = {.shape = reshape_shape, .grad = reshape_grad, .saves = kSaveNothing,
//                             .view_kernel = reshape_view};
#define SMELT_OP_IMPL(name) extern const ::smelt::ops::OpImpl kOpImpl_##name; \
  const ::smelt::ops::OpImpl kOpImpl_##name
