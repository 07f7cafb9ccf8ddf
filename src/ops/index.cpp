// Indexing ops: embedding, index_select, index_add, gather, scatter_add, one_hot.
//
// Shape rules check shapes, dtypes and dims; kernels check index values (only they see data)
// before touching memory. Gradients pair up: index_select <-> index_add and gather <->
// scatter_add, each the other's adjoint, so every order of gradient stays within the family.
#include "kernels/index.h"
#include "ops/op_util.h"

namespace smelt::ops {
namespace {

int64_t dim_of(const Attrs& attrs, int64_t rank, const char* op) {
  return wrap_dim(attrs.get_int("dim"), rank, op);
}

std::string dim_target(int64_t dim, const char* name, const Shape& shape) {
  return "dim " + std::to_string(dim) + " of " + name + " " + shape_str(shape);
}

void check_has_dims(const TensorMeta& m, const char* op, const char* what) {
  SMELT_CHECK(!m.shape.empty()) << op << ": " << what
                                << " must have at least one dim, got a 0-dim tensor";
}

void check_index_1d(const TensorMeta& index, const char* op) {
  check_dtype(index, DType::Int64, op, "index");
  SMELT_CHECK(index.shape.size() == 1)
      << op << ": index must be 1-D, got " << shape_str(index.shape);
}

// ---- embedding: weight (V, D), indices Int64 (...) -> (..., D)
std::vector<TensorMeta> embedding_shape(const std::vector<TensorMeta>& in, const Attrs&) {
  const TensorMeta &weight = in[0], &indices = in[1];
  SMELT_CHECK(weight.shape.size() == 2)
      << "embedding: weight must be 2-D (num_embeddings, embedding_dim), got "
      << shape_str(weight.shape);
  check_dtype(indices, DType::Int64, "embedding", "indices");
  Shape out = indices.shape;
  out.push_back(weight.shape[1]);
  return {{out, weight.dtype}};
}
void embedding_kernel(const std::vector<Tensor>& in, const Attrs&, const std::vector<Tensor>& out) {
  const Tensor &weight = in[0], &indices = in[1];
  kernels::check_index_range(indices, weight.size(0), "embedding",
                             dim_target(0, "weight", weight.shape()));
  const Tensor& y = out[0];
  Shape rows{indices.numel(), weight.size(1)};  // (N, D): y seen as one row per index
  Tensor y_rows = make_tensor(y.storage(), rows, contiguous_strides(rows), y.offset(), y.dtype());
  kernels::index_select_forward(y_rows, weight, 0, indices);
}
// dweight = zeros (V, D) with row indices[n] += g[n] (repeated indices accumulate)
std::vector<Tensor> embedding_grad(const GradContext& c) {
  const Tensor &weight = c.inputs[0], &indices = c.inputs[1], &g = c.grads[0];
  const int64_t n = indices.numel();
  Tensor rows = g.reshape({n, weight.size(1)});
  return {index_add(zeros(weight.shape(), g.dtype()), 0, indices.reshape({n}), rows), Tensor()};
}

// ---- index_select: x (..., N, ...), index (K) -> (..., K, ...)
std::vector<TensorMeta> index_select_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const TensorMeta &x = in[0], &index = in[1];
  check_has_dims(x, "index_select", "x");
  check_index_1d(index, "index_select");
  Shape out = x.shape;
  out[dim_of(attrs, int64_t(x.shape.size()), "index_select")] = index.shape[0];
  return {{out, x.dtype}};
}
void index_select_kernel(const std::vector<Tensor>& in, const Attrs& attrs,
                         const std::vector<Tensor>& out) {
  const Tensor &x = in[0], &index = in[1];
  int64_t dim = dim_of(attrs, x.dim(), "index_select");
  kernels::check_index_range(index, x.size(dim), "index_select", dim_target(dim, "x", x.shape()));
  const Tensor& y = out[0];
  kernels::index_select_forward(y, x, dim, index);
}
std::vector<Tensor> index_select_grad(const GradContext& c) {
  const Tensor &x = c.inputs[0], &index = c.inputs[1], &g = c.grads[0];
  int64_t dim = dim_of(c.attrs, x.dim(), "index_select");
  return {index_add(zeros(x.shape(), g.dtype()), dim, index, g), Tensor()};
}

// ---- index_add: x (..., N, ...), index (K), src (..., K, ...) -> x with src's slices added
std::vector<TensorMeta> index_add_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const TensorMeta &x = in[0], &index = in[1], &src = in[2];
  check_has_dims(x, "index_add", "x");
  check_numeric(x, "index_add", "x");
  check_index_1d(index, "index_add");
  check_same_dtype(x, src, "index_add");
  Shape want = x.shape;
  want[dim_of(attrs, int64_t(x.shape.size()), "index_add")] = index.shape[0];
  SMELT_CHECK(src.shape == want)
      << "index_add: src has shape " << shape_str(src.shape) << " but x " << shape_str(x.shape)
      << " with " << index.shape[0] << " indices along dim " << attrs.get_int("dim")
      << " needs src of shape " << shape_str(want);
  return {x};
}
void index_add_kernel(const std::vector<Tensor>& in, const Attrs& attrs,
                      const std::vector<Tensor>& out) {
  const Tensor &x = in[0], &index = in[1], &src = in[2];
  int64_t dim = dim_of(attrs, x.dim(), "index_add");
  kernels::check_index_range(index, x.size(dim), "index_add", dim_target(dim, "x", x.shape()));
  const Tensor& y = out[0];
  kernels::index_add_forward(y, x, dim, index, src);
}
std::vector<Tensor> index_add_grad(const GradContext& c) {
  const Tensor &index = c.inputs[1], &g = c.grads[0];
  int64_t dim = dim_of(c.attrs, g.dim(), "index_add");
  return {g, Tensor(), c.needs(2) ? index_select(g, dim, index) : Tensor()};
}

// ---- gather: out[p] = x[p with p[dim] := index[p]]; out has index's shape
void check_gather_index(const TensorMeta& x, const TensorMeta& index, int64_t dim, const char* op) {
  check_dtype(index, DType::Int64, op, "index");
  SMELT_CHECK(index.shape.size() == x.shape.size())
      << op << ": index " << shape_str(index.shape) << " must have as many dims as x "
      << shape_str(x.shape);
  for (size_t d = 0; d < x.shape.size(); ++d) {
    SMELT_CHECK(int64_t(d) == dim || index.shape[d] <= x.shape[d])
        << op << ": index " << shape_str(index.shape) << " is larger than x " << shape_str(x.shape)
        << " in dim " << d << " (" << index.shape[d] << " > " << x.shape[d]
        << "); index may exceed x only in the indexed dim " << dim;
  }
}
std::vector<TensorMeta> gather_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const TensorMeta &x = in[0], &index = in[1];
  check_has_dims(x, "gather", "x");
  check_gather_index(x, index, dim_of(attrs, int64_t(x.shape.size()), "gather"), "gather");
  return {{index.shape, x.dtype}};
}
void gather_kernel(const std::vector<Tensor>& in, const Attrs& attrs,
                   const std::vector<Tensor>& out) {
  const Tensor &x = in[0], &index = in[1];
  int64_t dim = dim_of(attrs, x.dim(), "gather");
  kernels::check_index_range(index, x.size(dim), "gather", dim_target(dim, "x", x.shape()));
  const Tensor& y = out[0];
  kernels::gather_forward(y, x, dim, index);
}
std::vector<Tensor> gather_grad(const GradContext& c) {
  const Tensor &x = c.inputs[0], &index = c.inputs[1], &g = c.grads[0];
  int64_t dim = dim_of(c.attrs, x.dim(), "gather");
  return {scatter_add(zeros(x.shape(), g.dtype()), dim, index, g), Tensor()};
}

// ---- scatter_add: out = x; out[p with p[dim] := index[p]] += src[p] for p in index's shape
std::vector<TensorMeta> scatter_add_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const TensorMeta &x = in[0], &index = in[1], &src = in[2];
  check_has_dims(x, "scatter_add", "x");
  check_numeric(x, "scatter_add", "x");
  check_same_dtype(x, src, "scatter_add");
  int64_t dim = dim_of(attrs, int64_t(x.shape.size()), "scatter_add");
  check_gather_index(x, index, dim, "scatter_add");
  SMELT_CHECK(src.shape.size() == index.shape.size())
      << "scatter_add: src " << shape_str(src.shape) << " must have as many dims as index "
      << shape_str(index.shape);
  for (size_t d = 0; d < src.shape.size(); ++d) {
    SMELT_CHECK(index.shape[d] <= src.shape[d])
        << "scatter_add: index " << shape_str(index.shape) << " is larger than src "
        << shape_str(src.shape) << " in dim " << d << " (" << index.shape[d] << " > "
        << src.shape[d] << "); src must cover every index position";
  }
  return {x};
}
void scatter_add_kernel(const std::vector<Tensor>& in, const Attrs& attrs,
                        const std::vector<Tensor>& out) {
  const Tensor &x = in[0], &index = in[1], &src = in[2];
  int64_t dim = dim_of(attrs, x.dim(), "scatter_add");
  kernels::check_index_range(index, x.size(dim), "scatter_add", dim_target(dim, "x", x.shape()));
  const Tensor& y = out[0];
  kernels::scatter_add_forward(y, x, dim, index, src);
}
// dsrc = gather(g) at index positions, zero where src reaches beyond index.
std::vector<Tensor> scatter_add_grad(const GradContext& c) {
  const Tensor &index = c.inputs[1], &src = c.inputs[2], &g = c.grads[0];
  Tensor gsrc;
  if (c.needs(2)) {
    gsrc = gather(g, dim_of(c.attrs, g.dim(), "scatter_add"), index);
    for (int64_t d = 0; d < src.dim(); ++d) {
      if (gsrc.size(d) == src.size(d)) continue;
      Shape pad = gsrc.shape();
      pad[d] = src.size(d) - gsrc.size(d);
      gsrc = cat({gsrc, zeros(pad, gsrc.dtype())}, d);
    }
  }
  return {g, Tensor(), gsrc};
}

// ---- one_hot: Int64 (...) -> Int64 (..., C)
std::vector<TensorMeta> one_hot_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  check_dtype(in[0], DType::Int64, "one_hot", "indices");
  int64_t num_classes = attrs.get_int("num_classes");
  SMELT_CHECK(num_classes >= 1) << "one_hot: num_classes must be >= 1, got " << num_classes;
  Shape out = in[0].shape;
  out.push_back(num_classes);
  return {{out, DType::Int64}};
}
void one_hot_kernel(const std::vector<Tensor>& in, const Attrs& attrs,
                    const std::vector<Tensor>& out) {
  int64_t num_classes = attrs.get_int("num_classes");
  kernels::check_index_range(in[0], num_classes, "one_hot", "num_classes");
  const Tensor& y = out[0];
  kernels::one_hot_forward(y, in[0], num_classes);
}

}  // namespace

SMELT_OP_IMPL(embedding) = {embedding_shape, embedding_kernel, embedding_grad, kSaveInputs};
SMELT_OP_IMPL(index_select) = {index_select_shape, index_select_kernel, index_select_grad,
                               kSaveInputs};
SMELT_OP_IMPL(index_add) = {index_add_shape, index_add_kernel, index_add_grad, kSaveInputs};
SMELT_OP_IMPL(gather) = {gather_shape, gather_kernel, gather_grad, kSaveInputs};
SMELT_OP_IMPL(scatter_add) = {scatter_add_shape, scatter_add_kernel, scatter_add_grad, kSaveInputs};
SMELT_OP_IMPL(one_hot) = {one_hot_shape, one_hot_kernel, nullptr, kSaveNothing};

}  // namespace smelt::ops

// ---- public API
namespace smelt {

using ops::call1;
using ops::OpId;

namespace {
// The dim wrapped into [0, rank), so equal calls record equal attributes. An undefined x is left
// for the dispatcher to report.
int64_t canonical_dim(const Tensor& x, int64_t dim, const char* op) {
  return x.defined() ? wrap_dim(dim, x.dim(), op) : dim;
}
}  // namespace

// The op's inputs stay (weight, indices), as the IR has always spelled them; only the public
// order follows F.embedding.
Tensor embedding(const Tensor& input, const Tensor& weight) {
  SMELT_CHECK(input.defined() && weight.defined()) << "embedding: an argument is undefined";
  SMELT_CHECK(!(dtype_is_floating(input.dtype()) && weight.dtype() == DType::Int64))
      << "embedding: the arguments look swapped: input is " << dtype_name(input.dtype()) << " "
      << shape_str(input.shape()) << " and weight is " << dtype_name(weight.dtype()) << " "
      << shape_str(weight.shape())
      << "; the order is embedding(input, weight) as in F.embedding: Int64 indices first, then "
         "the (num_embeddings, embedding_dim) table";
  return call1(OpId::embedding, {weight, input});
}
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  return call1(OpId::index_select, {x, index}, {{"dim", canonical_dim(x, dim, "index_select")}});
}
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return call1(OpId::index_add, {x, index, src}, {{"dim", canonical_dim(x, dim, "index_add")}});
}
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  return call1(OpId::gather, {x, index}, {{"dim", canonical_dim(x, dim, "gather")}});
}
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return call1(OpId::scatter_add, {x, index, src},
               {{"dim", canonical_dim(x, dim, "scatter_add")}});
}
Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  return call1(OpId::one_hot, {indices}, {{"num_classes", num_classes}});
}

}  // namespace smelt
