// Where a view's elements lie: the one owner of the stride and offset arithmetic of the view
// ops (reshape, permute, slice, expand, and registered view ops through their OpDefinition::view
// rule). Eager view kernels (ops/views.cpp), the tracer (the layout of a symbolic view,
// trace/trace.cpp), the plan (strided views of arena memory, runtime/plan_views.cpp) and the
// lowering (codegen/lower_expr.cpp) all ask here.
#pragma once

#include <optional>

#include "ops/op_table.h"

namespace smelt::ops {

struct ViewLayout {
  Shape strides;
  int64_t offset = 0;  // in elements, from the start of the storage
};

// The layout `op` with `attrs` gives its output of `out_shape` when its input of `in_shape` lies
// at `in_strides` and `in_offset`, as the eager view kernel makes it; nullopt when the op copies
// there (a reshape no strides describe, contiguous) or is not a view op, or when its dims are out
// of range (the shape rule reports those).
std::optional<ViewLayout> view_layout(OpId op, const Attrs& attrs, const Shape& in_shape,
                                      const Shape& in_strides, int64_t in_offset,
                                      const Shape& out_shape);

// Strides that view data of `old_shape` laid out with `old_strides` as `new_shape` (reshape
// without a copy), or false when no strides can.
bool view_strides(const Shape& old_shape, const Shape& old_strides, const Shape& new_shape,
                  Shape* out);

}  // namespace smelt::ops
