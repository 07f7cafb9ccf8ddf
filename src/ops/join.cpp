// Joining and splitting: cat (an op), and the composites stack (unsqueeze + cat) and split
// (narrow views).
#include "kernels/index.h"
#include "ops/op_util.h"

namespace smelt::ops {
namespace {

// ---- cat: inputs equal in every dim but `dim`, which adds up
std::vector<TensorMeta> cat_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  SMELT_CHECK(!in.empty()) << "cat: needs at least one input";
  const TensorMeta& first = in[0];
  for (size_t i = 0; i < in.size(); ++i) {
    SMELT_CHECK(!in[i].shape.empty())
        << "cat: input " << i << " is a 0-dim tensor; only tensors with at least one dim can be "
           "joined (unsqueeze it, or use stack)";
  }
  const int64_t rank = int64_t(first.shape.size());
  const int64_t dim = wrap_dim(attrs.get_int("dim"), rank, "cat");
  Shape out = first.shape;
  out[dim] = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const TensorMeta& m = in[i];
    SMELT_CHECK(m.dtype == first.dtype)
        << "cat: input " << i << " has dtype " << dtype_name(m.dtype) << " but input 0 has "
        << dtype_name(first.dtype) << "; all inputs must have the same dtype";
    SMELT_CHECK(int64_t(m.shape.size()) == rank)
        << "cat: input " << i << " " << shape_str(m.shape) << " has " << m.shape.size()
        << " dims but input 0 " << shape_str(first.shape) << " has " << rank;
    for (int64_t d = 0; d < rank; ++d) {
      SMELT_CHECK(d == dim || m.shape[d] == first.shape[d])
          << "cat: input " << i << " has shape " << shape_str(m.shape) << " but input 0 has "
          << shape_str(first.shape) << "; sizes must match except in the joined dim " << dim
          << " (they differ in dim " << d << ")";
    }
    SMELT_CHECK(!__builtin_add_overflow(out[dim], m.shape[dim], &out[dim]))
        << "cat: size overflow: the joined dim " << dim << " adds up beyond 2^63 - 1";
  }
  return {{out, first.dtype}};
}
void cat_kernel(const std::vector<Tensor>& in, const Attrs& attrs, const std::vector<Tensor>& out) {
  const Tensor& y = out[0];
  kernels::cat_forward(y, in, wrap_dim(attrs.get_int("dim"), y.dim(), "cat"));
}
// Each input's gradient is its window of g.
std::vector<Tensor> cat_grad(const GradContext& c) {
  const Tensor& g = c.grads[0];
  const int64_t dim = wrap_dim(c.attrs.get_int("dim"), g.dim(), "cat");
  std::vector<Tensor> grads(c.inputs.size());
  int64_t at = 0;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const int64_t n = c.inputs[i].size(dim);
    if (c.needs(i)) grads[i] = g.narrow(dim, at, n);
    at += n;
  }
  return grads;
}

}  // namespace

SMELT_OP_IMPL(cat) = {cat_shape, cat_kernel, cat_grad, kSaveNothing};

}  // namespace smelt::ops

// ---- public API
namespace smelt {

Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  SMELT_CHECK(!xs.empty()) << "cat: expected at least one tensor, got an empty list";
  int64_t d = xs[0].defined() && xs[0].dim() > 0 ? wrap_dim(dim, xs[0].dim(), "cat") : dim;
  return ops::call1(ops::OpId::cat, xs, {{"dim", d}});
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  SMELT_CHECK(!xs.empty()) << "stack: expected at least one tensor, got an empty list";
  for (size_t i = 0; i < xs.size(); ++i) {
    SMELT_CHECK(xs[i].defined()) << "stack: input " << i << " is an undefined tensor";
    SMELT_CHECK(xs[i].shape() == xs[0].shape())
        << "stack: input " << i << " has shape " << shape_str(xs[i].shape()) << " but input 0 has "
        << shape_str(xs[0].shape()) << "; stack needs tensors of equal shape";
  }
  const int64_t d = wrap_dim(dim, xs[0].dim() + 1, "stack");
  std::vector<Tensor> columns;
  columns.reserve(xs.size());
  for (const Tensor& x : xs) columns.push_back(x.unsqueeze(d));
  return cat(columns, d);
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  SMELT_CHECK(x.defined() && x.dim() > 0)
      << "split: expects a tensor with at least one dim, got "
      << (x.defined() ? "a 0-dim tensor" : "an undefined tensor");
  const int64_t d = wrap_dim(dim, x.dim(), "split");
  const int64_t n = x.size(d);
  SMELT_CHECK(split_size > 0 || (split_size == 0 && n == 0))
      << "split: split_size must be positive, got " << split_size << " for dim " << d
      << " of size " << n;
  if (n == 0) return {x.narrow(d, 0, 0)};
  std::vector<Tensor> pieces;
  for (int64_t start = 0; start < n; start += split_size) {
    pieces.push_back(x.narrow(d, start, std::min(split_size, n - start)));
  }
  return pieces;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  SMELT_CHECK(x.defined() && x.dim() > 0)
      << "split: expects a tensor with at least one dim, got "
      << (x.defined() ? "a 0-dim tensor" : "an undefined tensor");
  const int64_t d = wrap_dim(dim, x.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    SMELT_CHECK(s >= 0) << "split: sizes must be >= 0, got " << s << " in " << shape_str(sizes);
    total += s;
  }
  SMELT_CHECK(total == x.size(d))
      << "split: sizes " << shape_str(sizes) << " add up to " << total << " but dim " << d
      << " of " << shape_str(x.shape()) << " has size " << x.size(d);
  std::vector<Tensor> pieces;
  int64_t start = 0;
  for (int64_t s : sizes) {
    pieces.push_back(x.narrow(d, start, s));
    start += s;
  }
  return pieces;
}

}  // namespace smelt
