// The rows of the op table that users register at run time (smelt/custom_op.h): ids from
// kOpCount on, so that everything keyed by OpId (the IR, the tracer, passes, plans) holds them as
// it holds built-ins. op_table.cpp answers op_info / op_impl / op_from_name for them from here;
// the dispatcher runs their rules through the checked wrappers below.
#pragma once

#include <string>
#include <vector>

#include "ops/op_table.h"
#include "ops/views.h"
#include "smelt/custom_op.h"

namespace smelt::ops {

struct CustomOpRecord {
  OpDefinition def;
  OpInfo info;  // kind Opaque; name points into def.name
  OpImpl impl;  // `saves` only: the rules are def's functions
};

// The record of a registered op; null for a built-in (or an id nobody registered).
const CustomOpRecord* custom_op(OpId op);
bool custom_op_from_name(const std::string& name, OpId* out);
// The op registered for ONNX nodes of `domain` and `op_type`; false when none.
bool custom_op_for_onnx(const std::string& domain, const std::string& op_type, OpId* out);

// The user's rules with the checks the dispatcher makes of built-ins by construction: the right
// number of outputs and gradients, shapes that fit, inputs the kernel left alone; any exception
// becomes a smelt::Error that names the op.
std::vector<TensorMeta> custom_shape(const CustomOpRecord& op, const std::vector<TensorMeta>& in,
                                     const Attrs& attrs);
void custom_kernel(const CustomOpRecord& op, const std::vector<Tensor>& in, const Attrs& attrs,
                   const std::vector<Tensor>& out);
std::vector<Tensor> custom_grad(const CustomOpRecord& op, const GradContext& ctx);
// A view op's layout (OpDefinition::view) with its checks: affine in the input's layout, no
// negative strides, every element within the input. ops::view_layout answers with it for
// registered view ops; the dispatcher makes eager views with it (custom_view).
ViewLayout custom_view_layout(const CustomOpRecord& op, const Attrs& attrs, const Shape& in_shape,
                              const Shape& in_strides, int64_t in_offset, const Shape& out_shape);
Tensor custom_view(const CustomOpRecord& op, const Tensor& in, const Attrs& attrs,
                   const TensorMeta& out);

// Runs `f`, turning whatever a user's function throws into a smelt::Error whose message starts with
// `where` ("custom op 'x': forward"), the original message after it.
template <class F>
auto with_context(const std::string& where, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    throw Error(where + ": " + e.what(), e.internal());
  } catch (const std::exception& e) {
    throw Error(where + " threw: " + e.what());
  } catch (...) {
    throw Error(where + " threw an exception that is not a std::exception");
  }
}

// A hand-written gradient for input `i` (of `input`'s meta) as autograd needs it: of the input's
// shape or one the input broadcasts to, floating point; cast to the input's dtype. `where` starts
// the error message ("custom op 'x': backward"). Shared with apply_function (ops/function.cpp).
Tensor checked_gradient(const std::string& where, Tensor grad, const TensorMeta& input, size_t i);

}  // namespace smelt::ops
