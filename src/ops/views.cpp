// View and movement ops. reshape/permute/slice/expand return views that share storage (reshape
// copies only when no strides can describe the result); contiguous copies to row-major. Their
// layouts come from view_layout (ops/views.h), which the tracer and the plan ask too; it answers
// for registered view ops (OpDefinition::view) through their rule.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "ops/views.h"

#include "kernels/loops.h"
#include "ops/custom_ops.h"
#include "kernels/transpose.h"
#include "ops/op_util.h"

namespace smelt::ops {

// Strides that view `old_shape`/`old_strides` data as `new_shape`, or false when the layout makes
// that impossible (the new shape would have to split or merge dims that are not adjacent in
// memory). Walks both shapes chunk by chunk: each chunk of old dims that is contiguous in memory
// may be re-split freely.
bool view_strides(const Shape& old_shape, const Shape& old_strides, const Shape& new_shape,
                  Shape* out) {
  Shape strides(new_shape.size());
  if (shape_numel(old_shape) == 0) {
    *out = contiguous_strides(new_shape);
    return true;
  }
  int64_t view_d = int64_t(new_shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.empty() ? 1 : old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = int64_t(old_shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_shape[d];
    // end of a contiguous chunk of old dims
    if (d == 0 ||
        (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return false;
  *out = strides;
  return true;
}

std::optional<ViewLayout> view_layout(OpId op, const Attrs& attrs, const Shape& in_shape,
                                      const Shape& in_strides, int64_t in_offset,
                                      const Shape& out_shape) {
  const int64_t rank = int64_t(in_shape.size());
  auto in_range = [&](int64_t d) { return d >= -rank && d < rank; };
  auto wrapped = [&](int64_t d) { return size_t(d < 0 ? d + rank : d); };
  ViewLayout v;
  v.offset = in_offset;
  switch (op) {
    case OpId::reshape:
      if (!view_strides(in_shape, in_strides, out_shape, &v.strides)) return std::nullopt;
      return v;
    case OpId::permute:  // dims may count from the end
      for (int64_t d : attrs.get_ints("dims")) {
        if (!in_range(d)) return std::nullopt;
        v.strides.push_back(in_strides[wrapped(d)]);
      }
      return v;
    case OpId::slice: {
      const int64_t dim = attrs.get_int("dim");
      if (!in_range(dim)) return std::nullopt;
      v.strides = in_strides;
      v.offset += attrs.get_int("start") * in_strides[wrapped(dim)];
      v.strides[wrapped(dim)] *= attrs.get_int("step");
      return v;
    }
    case OpId::expand: {  // stride 0 in the broadcast dims
      if (out_shape.size() < in_shape.size()) return std::nullopt;
      const size_t lead = out_shape.size() - in_shape.size();
      v.strides.assign(out_shape.size(), 0);
      for (size_t i = 0; i < in_shape.size(); ++i) {
        v.strides[lead + i] = in_shape[i] == out_shape[lead + i] ? in_strides[i] : 0;
      }
      return v;
    }
    default:
      if (const CustomOpRecord* custom = custom_op(op); custom && custom->def.view) {
        return custom_view_layout(*custom, attrs, in_shape, in_strides, in_offset, out_shape);
      }
      return std::nullopt;
  }
}

namespace {

Tensor view_of(const Tensor& x, Shape shape, Shape strides, int64_t offset) {
  Tensor v = make_tensor(x.storage(), std::move(shape), std::move(strides), offset, x.dtype());
  v.impl()->trace_id = -1;
  return v;
}

// Normalized (size-1 dims dropped, adjacent dims merged) and copied by rows or tiles.
Tensor copy_contiguous(const Tensor& x) { return kernels::contiguous_copy(x); }

// ---- reshape
std::vector<TensorMeta> reshape_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const auto& shape = get_shape_attr(attrs, "reshape", "shape");
  SMELT_CHECK(shape_numel(shape) == shape_numel(in[0].shape))
      << "reshape: cannot reshape " << shape_str(in[0].shape) << " (" << shape_numel(in[0].shape)
      << " elements) to " << shape_str(shape) << " (" << shape_numel(shape) << " elements)";
  return {{shape, in[0].dtype}};
}
std::vector<Tensor> reshape_view(const std::vector<Tensor>& in, const Attrs& attrs,
                                 const std::vector<TensorMeta>& out) {
  const Tensor& x = in[0];
  if (auto v =
          view_layout(OpId::reshape, attrs, x.shape(), x.strides(), x.offset(), out[0].shape)) {
    return {view_of(x, out[0].shape, v->strides, v->offset)};
  }
  Tensor c = copy_contiguous(x);
  return {view_of(c, out[0].shape, contiguous_strides(out[0].shape), 0)};
}
std::vector<Tensor> reshape_grad(const GradContext& c) {
  return {c.grads[0].reshape(c.inputs[0].shape())};
}

// ---- permute
std::vector<TensorMeta> permute_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const auto& dims = attrs.get_ints("dims");
  const int64_t rank = int64_t(in[0].shape.size());
  SMELT_CHECK(int64_t(dims.size()) == rank)
      << "permute: got " << dims.size() << " dims for a tensor " << shape_str(in[0].shape)
      << " with " << rank << "; give a permutation of 0.." << rank - 1;
  std::vector<bool> seen(size_t(rank), false);
  Shape shape;
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, rank, "permute");
    SMELT_CHECK(!seen[w]) << "permute: dim " << d << " appears twice; give a permutation of 0.."
                          << rank - 1;
    seen[w] = true;
    shape.push_back(in[0].shape[w]);
  }
  return {{shape, in[0].dtype}};
}
// The view `op` makes of in[0] (a permute, slice or expand: always a view).
std::vector<Tensor> strided_view(OpId op, const std::vector<Tensor>& in, const Attrs& attrs,
                                 const std::vector<TensorMeta>& out) {
  const Tensor& x = in[0];
  std::optional<ViewLayout> v =
      view_layout(op, attrs, x.shape(), x.strides(), x.offset(), out[0].shape);
  SMELT_INTERNAL_CHECK(v) << op_name(op) << ": no view layout after its shape rule passed";
  return {view_of(x, out[0].shape, v->strides, v->offset)};
}
std::vector<Tensor> permute_view(const std::vector<Tensor>& in, const Attrs& attrs,
                                 const std::vector<TensorMeta>& out) {
  return strided_view(OpId::permute, in, attrs, out);
}
std::vector<Tensor> permute_grad(const GradContext& c) {
  const auto& dims = c.attrs.get_ints("dims");
  Shape inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    inverse[size_t(wrap_dim(dims[i], int64_t(dims.size()), "permute"))] = int64_t(i);
  }
  return {c.grads[0].permute(inverse)};
}

// ---- slice: attrs already normalized (0 <= start <= end <= size, step >= 1)
Shape slice_result(const Shape& shape, const Attrs& attrs, const char* op) {
  SMELT_CHECK(!shape.empty()) << op << ": cannot slice a 0-dim tensor";
  int64_t dim = wrap_dim(attrs.get_int("dim"), int64_t(shape.size()), op);
  int64_t start = attrs.get_int("start"), end = attrs.get_int("end"), step = attrs.get_int("step");
  SMELT_CHECK(step >= 1) << op << ": step must be >= 1, got " << step;
  SMELT_CHECK(0 <= start && start <= end && end <= shape[dim])
      << op << ": range [" << start << ", " << end << ") is not within dim " << dim << " of size "
      << shape[dim];
  Shape out = shape;
  out[dim] = end == start ? 0 : (end - start - 1) / step + 1;  // no overflow for a huge step
  return out;
}
std::vector<TensorMeta> slice_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  return {{slice_result(in[0].shape, attrs, "slice"), in[0].dtype}};
}
std::vector<Tensor> slice_view(const std::vector<Tensor>& in, const Attrs& attrs,
                               const std::vector<TensorMeta>& out) {
  return strided_view(OpId::slice, in, attrs, out);
}
std::vector<Tensor> slice_grad(const GradContext& c) {
  Attrs attrs = c.attrs;
  attrs.set("input_shape", c.inputs[0].shape());
  return {call1(OpId::slice_grad, {c.grads[0]}, attrs)};
}

// ---- slice_grad: zeros of input_shape with the slice set to the gradient
std::vector<TensorMeta> slice_grad_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const auto& shape = get_shape_attr(attrs, "slice_grad", "input_shape");
  SMELT_CHECK(slice_result(shape, attrs, "slice_grad") == in[0].shape)
      << "slice_grad: gradient " << shape_str(in[0].shape) << " does not match the slice of "
      << shape_str(shape);
  return {{shape, in[0].dtype}};
}
void slice_grad_kernel(const std::vector<Tensor>& in, const Attrs& attrs,
                       const std::vector<Tensor>& out) {
  const Tensor& y = out[0];  // contiguous, but its memory holds anything: cleared first
  std::memset(y.raw_data(), 0, size_t(y.nbytes()));
  std::vector<Tensor> window = slice_view({y}, attrs, {TensorMeta{in[0].shape(), in[0].dtype()}});
  SMELT_DISPATCH_ALL(y.dtype(), "slice_grad", [&] {
    using T = scalar_t;
    kernels::map1<T, T>(window[0], in[0], [](T v) { return v; });
  });
}
std::vector<Tensor> slice_grad_grad(const GradContext& c) {
  return {call1(OpId::slice, {c.grads[0]},
                {{"dim", c.attrs.get_int("dim")},
                 {"start", c.attrs.get_int("start")},
                 {"end", c.attrs.get_int("end")},
                 {"step", c.attrs.get_int("step")}})};
}

// ---- expand (stride 0 in broadcast dims)
std::vector<TensorMeta> expand_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const auto& shape = get_shape_attr(attrs, "expand", "shape");
  const Shape& from = in[0].shape;
  SMELT_CHECK(shape.size() >= from.size())
      << "expand: cannot expand " << shape_str(from) << " to fewer dims " << shape_str(shape);
  size_t lead = shape.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    SMELT_CHECK(from[i] == shape[lead + i] || from[i] == 1)
        << "expand: cannot expand " << shape_str(from) << " to " << shape_str(shape) << " (dim "
        << lead + i << ": " << from[i] << " vs " << shape[lead + i]
        << "); only size-1 dims can grow";
  }
  return {{shape, in[0].dtype}};
}
std::vector<Tensor> expand_view(const std::vector<Tensor>& in, const Attrs& attrs,
                                const std::vector<TensorMeta>& out) {
  return strided_view(OpId::expand, in, attrs, out);
}
// The engine sums the broadcast gradient down to the input's shape.
std::vector<Tensor> expand_grad(const GradContext& c) { return {c.grads[0]}; }

// ---- contiguous
std::vector<Tensor> contiguous_view(const std::vector<Tensor>& in, const Attrs&,
                                    const std::vector<TensorMeta>&) {
  return {copy_contiguous(in[0])};
}
std::vector<Tensor> identity_grad(const GradContext& c) { return {c.grads[0]}; }

}  // namespace

// View ops (a non-zero views column) have a view kernel instead of an out-variant one.
SMELT_OP_IMPL(reshape) = {.shape = reshape_shape,
                          .kernel = nullptr,
                          .grad = reshape_grad,
                          .saves = kSaveNothing,
                          .view_kernel = reshape_view};
SMELT_OP_IMPL(permute) = {.shape = permute_shape,
                          .kernel = nullptr,
                          .grad = permute_grad,
                          .saves = kSaveNothing,
                          .view_kernel = permute_view};
SMELT_OP_IMPL(slice) = {.shape = slice_shape,
                        .kernel = nullptr,
                        .grad = slice_grad,
                        .saves = kSaveNothing,
                        .view_kernel = slice_view};
SMELT_OP_IMPL(slice_grad) = {slice_grad_shape, slice_grad_kernel, slice_grad_grad, kSaveNothing};
SMELT_OP_IMPL(expand) = {.shape = expand_shape,
                         .kernel = nullptr,
                         .grad = expand_grad,
                         .saves = kSaveNothing,
                         .view_kernel = expand_view};
// contiguous may return its input (the views column); today its view kernel always copies.
SMELT_OP_IMPL(contiguous) = {.shape = same_as_first,
                             .kernel = nullptr,
                             .grad = identity_grad,
                             .saves = kSaveNothing,
                             .view_kernel = contiguous_view};

}  // namespace smelt::ops

// ---- public API
namespace smelt {

using ops::call1;
using ops::OpId;

namespace {
// Resolves one -1 in a requested shape.
Shape infer_size(const Shape& shape, int64_t numel, const char* where) {
  Shape out = shape;
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      SMELT_CHECK(infer_at < 0) << where << ": only one dim can be -1, got " << shape_str(shape);
      infer_at = int64_t(i);
    } else {
      SMELT_CHECK(shape[i] >= 0) << where << ": invalid size " << shape[i] << " in "
                                 << shape_str(shape);
      SMELT_CHECK(!__builtin_mul_overflow(known, shape[i], &known))
          << where << ": size overflow: the sizes of " << shape_str(shape)
          << " multiply beyond int64";
    }
  }
  if (infer_at >= 0) {
    SMELT_CHECK(known != 0 && numel % known == 0)
        << where << ": cannot infer -1 in " << shape_str(shape) << " for " << numel << " elements";
    out[size_t(infer_at)] = numel / known;
  }
  return out;
}
}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape) {
  Shape s = infer_size(shape, x.numel(), "reshape");
  if (s == x.shape()) return x;
  return call1(OpId::reshape, {x}, {{"shape", s}});
}
Tensor permute(const Tensor& x, const Shape& dims) {
  return call1(OpId::permute, {x}, {{"dims", dims}});
}
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  SMELT_CHECK(x.dim() > 0) << "slice: cannot slice a 0-dim tensor";
  int64_t d = wrap_dim(dim, x.dim(), "slice");
  int64_t n = x.size(d);
  // Python-style bounds: negative counts from the end, out-of-range clamps.
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  return call1(OpId::slice, {x}, {{"dim", d}, {"start", start}, {"end", end}, {"step", step}});
}
Tensor expand(const Tensor& x, const Shape& shape) {
  Shape s = shape;
  size_t lead = s.size() >= size_t(x.dim()) ? s.size() - size_t(x.dim()) : 0;
  for (size_t i = lead; i < s.size(); ++i) {
    if (s[i] == -1) s[i] = x.shape()[i - lead];
  }
  if (s == x.shape()) return x;
  return call1(OpId::expand, {x}, {{"shape", s}});
}
Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  return call1(OpId::contiguous, {x});
}

}  // namespace smelt
