#include "ops/op_util.h"

#include <algorithm>

#include "kernels/reduce.h"

namespace smelt::ops {

std::vector<TensorMeta> same_as_first(const std::vector<TensorMeta>& in, const Attrs&) {
  return {in[0]};
}

void check_floating(const TensorMeta& m, const char* op, const char* what) {
  SMELT_CHECK(dtype_is_floating(m.dtype)) << op << ": " << what << " must be float32 or float64, got "
                                          << dtype_name(m.dtype) << " " << shape_str(m.shape);
}

void check_numeric(const TensorMeta& m, const char* op, const char* what) {
  SMELT_CHECK(dtype_is_floating(m.dtype) || dtype_is_signed_integer(m.dtype))
      << op << ": dtype " << dtype_name(m.dtype) << " is not supported (" << what << " "
      << shape_str(m.shape) << "); valid: float32, float64, int64, int32";
}

void check_dtype(const TensorMeta& m, DType want, const char* op, const char* what) {
  SMELT_CHECK(m.dtype == want) << op << ": " << what << " must be " << dtype_name(want) << ", got "
                               << dtype_name(m.dtype) << " " << shape_str(m.shape);
}

void check_same_dtype(const TensorMeta& a, const TensorMeta& b, const char* op) {
  SMELT_CHECK(a.dtype == b.dtype) << op << ": operands have different dtypes, " << dtype_name(a.dtype)
                                  << " " << shape_str(a.shape) << " and " << dtype_name(b.dtype)
                                  << " " << shape_str(b.shape)
                                  << "; convert one with .to() so both match";
}

std::vector<int64_t> reduce_dims(const Attrs& attrs, int64_t rank, const char* op) {
  std::vector<int64_t> dims;
  if (attrs.has("dims")) {
    for (int64_t d : attrs.get_ints("dims")) dims.push_back(wrap_dim(d, rank, op));
  }
  if (rank == 0) return {};  // a 0-dim tensor accepts dim 0 / -1 but has no dim to index
  if (dims.empty()) {
    for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
  }
  std::sort(dims.begin(), dims.end());
  SMELT_CHECK(std::adjacent_find(dims.begin(), dims.end()) == dims.end())
      << op << ": a dim appears twice in the reduction dims";
  return dims;
}

Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced) out.push_back(shape[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

Tensor expand_reduced(const Tensor& g, const Shape& shape, const std::vector<int64_t>& dims,
                      bool keepdim) {
  Tensor r = g;
  if (!keepdim) r = r.reshape(reduced_shape(shape, dims, true));
  return r.expand(shape);
}

std::vector<int64_t> pair_attr(const Attrs& attrs, const char* name, const char* op, int64_t min) {
  const auto& v = attrs.get_ints(name);
  SMELT_CHECK(v.size() == 2) << op << ": " << name << " must have 2 values (h, w), got "
                             << shape_str(v);
  // The upper bound keeps window and output-size arithmetic far from overflow.
  constexpr int64_t kMax = (int64_t(1) << 31) - 1;
  SMELT_CHECK(v[0] >= min && v[1] >= min && v[0] <= kMax && v[1] <= kMax)
      << op << ": " << name << " must be in [" << min << ", " << kMax << "], got " << shape_str(v);
  return v;
}

Tensor dense(const Tensor& x) {
  if (x.is_contiguous()) return x;
  Tensor c = empty(x.shape(), x.dtype());
  kernels::copy_strided(c, x);
  return c;
}

Tensor zero_like_scalar(const Tensor& like) { return scalar_like(like, 0.0); }

void check_class_indices(const int64_t* t, int64_t n, int64_t classes, int64_t ignore, const char* op) {
  for (int64_t i = 0; i < n; ++i) {
    SMELT_CHECK(t[i] == ignore || (t[i] >= 0 && t[i] < classes))
        << op << ": target " << t[i] << " at flat index " << i << " is out of range for " << classes
        << " classes; valid: [0, " << classes - 1 << "] or ignore_index " << ignore;
  }
}

}  // namespace smelt::ops
