// Tensor: a refcounted view (shape, strides, offset, dtype) onto refcounted Storage.
//
// Views (reshape of contiguous data, permute, slice, expand, squeeze/unsqueeze) share storage and
// never copy; contiguous() copies only when the layout is not already row-major. Storage buffers
// are 64-byte aligned. Strides and offsets count elements, not bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "smelt/dtype.h"
#include "smelt/error.h"
#include "smelt/ref.h"
#include "smelt/scalar.h"
#include "smelt/tensor_index.h"
#include "smelt/tensor_options.h"

namespace smelt {

using Shape = std::vector<int64_t>;

inline constexpr size_t kTensorAlignment = 64;

// A refcounted, 64-byte aligned buffer. `version` counts in-place writes, so autograd can detect
// a tensor that changed after it was saved for backward; all views of one storage share it.
class Storage : public RefCounted {
 public:
  explicit Storage(size_t nbytes);  // allocates, aligned, uninitialized
  // Wraps memory the caller owns; `release` (may be empty) runs when the storage dies.
  Storage(void* data, size_t nbytes, std::function<void(void*)> release);
  ~Storage() override;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }
  // False for memory wrapped from the caller (from_blob, NumPy arrays): it may change without a
  // version bump, so no cache may key on its version.
  bool owned() const { return owned_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  uint64_t version_ = 0;
  std::function<void(void*)> release_;
  bool owned_ = false;
};

// Base of autograd's graph node, so a tensor can hold its grad_fn without this layer knowing
// the autograd engine.
class GradNode : public RefCounted {
 public:
  virtual const char* name() const = 0;
};

// Base of the record of how a view is made from its base tensor (ops/ defines it), so that a
// view's history can be rebuilt after an in-place write changed its base's.
class ViewFn : public RefCounted {};

class TensorImpl;
class Tensor;
class RetainedGrad;
struct TopKResult;

using GradHook = std::function<Tensor(const Tensor&)>;  // returns the replacement (or undefined)
// Runs on a leaf after a backward added into its .grad, with the leaf itself (read .grad()).
using PostAccumulateGradHook = std::function<void(const Tensor& leaf)>;

enum class GeluApprox { None, Tanh };  // gelu's formula: exact (erf) or tanh approximation

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Ref<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return bool(impl_); }
  TensorImpl* impl() const { return impl_.get(); }
  const Ref<TensorImpl>& impl_ref() const { return impl_; }
  bool same(const Tensor& o) const { return impl_.get() == o.impl_.get(); }

  // ---- metadata
  const Shape& shape() const;
  const Shape& strides() const;
  int64_t dim() const;
  int64_t size(int64_t d) const;    // negative d counts from the end
  int64_t stride(int64_t d) const;
  int64_t numel() const;
  int64_t nbytes() const;  // of the elements: numel() * dtype_size(dtype()) (not of the storage)
  int64_t offset() const;
  DType dtype() const;
  bool is_contiguous() const;
  const Ref<Storage>& storage() const;

  // ---- data (CPU memory; the pointer includes the storage offset)
  void* raw_data() const;
  // The elements in row-major order: an error for a non-contiguous view (a transpose, a strided
  // slice, an expand), whose memory is not in that order; call contiguous() first.
  template <class T>
  T* data() const {
    check_data_dtype(DTypeOf<T>::value, "data");
    check_data_contiguous();
    return static_cast<T*>(raw_data());
  }
  // The first element of any layout: element (i, j, ...) is at i * stride(0) + j * stride(1) ...
  // For code that walks strides itself (kernels).
  template <class T>
  T* strided_data() const {
    check_data_dtype(DTypeOf<T>::value, "strided_data");
    return static_cast<T*>(raw_data());
  }
  double item() const;  // a one-element tensor's value, as double
  template <class T>
  T item() const { return static_cast<T>(item()); }
  std::vector<double> to_vector() const;  // all elements in row-major order, as double

  // ---- autograd
  bool requires_grad() const;
  Tensor& set_requires_grad(bool on = true);  // leaves only
  bool is_leaf() const;
  // Undefined until a backward reaches this leaf (or this non-leaf that retains its gradient).
  // Reading it on a non-leaf that does not retain it warns (once per process), as PyTorch does.
  Tensor grad() const;
  // Makes a non-leaf keep the gradient that flows into it in grad() (leaves always do).
  void retain_grad() const;
  bool retains_grad() const;
  void set_grad(const Tensor& g);
  void zero_grad();                          // drops .grad
  GradNode* grad_fn() const;
  Tensor detach() const;                     // shares data, no history
  // Runs the backward pass from this tensor. A non-scalar tensor needs `grad_output`.
  void backward(const Tensor& grad_output = Tensor(), bool retain_graph = false,
                bool create_graph = false) const;
  // Hook on the gradient flowing into this tensor; may return a replacement gradient.
  void register_hook(GradHook hook) const;
  // Leaves: `hook` runs each time a backward has added into .grad (after the GradHooks), on the
  // thread running that backward, as PyTorch's register_post_accumulate_grad_hook (data-parallel
  // training starts a bucket's all-reduce from it). Returns an id for the removal.
  uint64_t register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const;
  void remove_post_accumulate_grad_hook(uint64_t id) const;  // an unknown id is ignored

  // ---- views (share storage)
  Tensor reshape(const Shape& shape) const;  // copies only when a view is impossible
  Tensor view(const Shape& shape) const;     // never copies; error when impossible
  Tensor permute(const Shape& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;                          // 2-D transpose
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;  // slice + squeeze
  Tensor expand(const Shape& shape) const;
  Tensor squeeze(int64_t dim) const;
  Tensor squeeze() const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(DType dtype) const;
  // Python-style indexing (see smelt/tensor_index.h): a view.
  Tensor index(const std::vector<TensorIndex>& indices) const;

  // ---- ops as methods: each calls the free function of the same name (smelt/ops.h), so
  // `a.exp().sum({1}, true)` is `sum(exp(a), {1}, true)`. tests/api/tensor_methods_test.cpp checks
  // that every row of the op table has a method here or is listed there as functional-only.
  Tensor neg() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor abs() const;
  Tensor sign() const;
  Tensor erf() const;
  Tensor relu() const;
  Tensor leaky_relu(double negative_slope = 0.01) const;
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor gelu(GeluApprox approximate = GeluApprox::None) const;
  Tensor silu() const;
  Tensor floor() const;
  Tensor ceil() const;
  Tensor round() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tan() const;
  Tensor asin() const;
  Tensor acos() const;
  Tensor atan() const;
  Tensor sinh() const;
  Tensor cosh() const;
  Tensor asinh() const;
  Tensor acosh() const;
  Tensor atanh() const;
  Tensor softplus(double beta = 1.0, double threshold = 20.0) const;
  Tensor clamp(std::optional<double> min, std::optional<double> max) const;
  Tensor add(const Tensor& other) const;
  Tensor add(const Scalar& other) const;
  Tensor sub(const Tensor& other) const;
  Tensor sub(const Scalar& other) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(const Scalar& other) const;
  Tensor div(const Tensor& other) const;
  Tensor div(const Scalar& other) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor pow(const Scalar& exponent) const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  Tensor eq(const Tensor& other) const;
  Tensor eq(const Scalar& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor ne(const Scalar& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor lt(const Scalar& other) const;
  Tensor le(const Tensor& other) const;
  Tensor le(const Scalar& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor gt(const Scalar& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor ge(const Scalar& other) const;
  // As PyTorch's x.where(condition, y): x where condition holds, else y.
  Tensor where(const Tensor& condition, const Tensor& other) const;
  Tensor sum(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor mean(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor amax(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor amin(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor prod(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor max(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;  // amax
  Tensor min(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;  // amin
  Tensor var(const std::vector<int64_t>& dims = {}, int64_t correction = 1,
             bool keepdim = false) const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor cumsum(int64_t dim, bool exclusive = false, bool reverse = false) const;
  TopKResult topk(int64_t k, int64_t dim = -1, bool largest = true) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  Tensor matmul(const Tensor& other) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor index_add(int64_t dim, const Tensor& index, const Tensor& source) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& source) const;

  // ---- in-place updates
  // Each writes the result of its functional form (add_ writes add(*this, other * alpha), ...)
  // into this tensor's memory, bumps the version counter and, when autograd records (grad mode
  // on and this tensor, its base or an operand requires grad), rebases the history: the tensor's
  // grad_fn becomes the op's, and a write through a view also rebases the viewed base. Errors:
  // a leaf (or a view of a leaf) that requires grad, under grad mode; a tensor whose elements
  // share memory (expand); an operand whose broadcast result does not fit this tensor's shape.
  // An operand that overlaps this tensor in another layout (x.add_(x.t())) is read as it was
  // before the write.
  Tensor& copy_(const Tensor& src);  // src broadcast to this shape and cast to this dtype
  // A number operand follows PyTorch's promotion (smelt/scalar.h), and a result dtype other than
  // this tensor's is an error (int64 += 1.5), as in PyTorch.
  Tensor& fill_(const Scalar& value);
  Tensor& zero_();
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& add_(const Scalar& value);
  Tensor& sub_(const Tensor& other, double alpha = 1.0);
  Tensor& sub_(const Scalar& value);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(const Scalar& value);
  Tensor& div_(const Tensor& other);
  Tensor& div_(const Scalar& value);
  Tensor& neg_();
  Tensor& exp_();
  Tensor& relu_();
  Tensor& clamp_(std::optional<double> min, std::optional<double> max);

  // a += b is a.add_(b): the same tensor (and its views) written in place.
  Tensor& operator+=(const Tensor& other) { return add_(other); }
  Tensor& operator+=(const Scalar& other) { return add_(other); }
  Tensor& operator-=(const Tensor& other) { return sub_(other); }
  Tensor& operator-=(const Scalar& other) { return sub_(other); }
  Tensor& operator*=(const Tensor& other) { return mul_(other); }
  Tensor& operator*=(const Scalar& other) { return mul_(other); }
  Tensor& operator/=(const Tensor& other) { return div_(other); }
  Tensor& operator/=(const Scalar& other) { return div_(other); }

  std::string to_string() const;

 private:
  const TensorImpl& checked_impl() const;
  void check_data_dtype(DType requested, const char* accessor) const;
  void check_data_contiguous() const;
  Ref<TensorImpl> impl_;
};

// The state behind a Tensor. Kernels read it through Tensor; autograd fields live here so that
// views and detach() can choose what to share.
class TensorImpl : public RefCounted {
 public:
  Ref<Storage> storage;  // null while tracing (the tensor is symbolic)
  Shape shape;
  Shape strides;
  int64_t offset = 0;
  DType dtype = DType::Float32;

  bool requires_grad = false;
  Ref<GradNode> grad_fn;        // null for leaves
  uint32_t output_nr = 0;       // which output of grad_fn this is
  Tensor grad;                  // leaves: accumulated gradient
  GradNode* grad_accumulator = nullptr;  // weak: the leaf's accumulate node, while one exists
  std::vector<GradHook> hooks;  // leaves: run before accumulation
  std::vector<std::pair<uint64_t, PostAccumulateGradHook>> post_accumulate_hooks;  // leaves: after
  // Non-leaves after retain_grad(): where the gradient flowing into this tensor is kept (shared
  // with the hook that fills it, which must not own this TensorImpl: that would be a cycle).
  Ref<RetainedGrad> retained_grad;
  int64_t trace_id = -1;        // while tracing: the IR value this tensor stands for

  // Views (set by the dispatcher for ops whose output shares an input's memory): the root tensor
  // viewed (never itself a view) and how this view is made from it. An in-place write through a
  // view rebases the root's history; a view whose root was rebased after its own history was
  // taken (`view_history` != the root's `history_version`) rebuilds its history on next use.
  Ref<TensorImpl> view_base;
  Ref<ViewFn> view_fn;
  uint64_t view_history = 0;     // views: the root's history_version this view's grad_fn reflects
  uint64_t history_version = 0;  // roots: bumped each time an in-place op rebases the history
};

// A non-leaf's retained gradient (Tensor::retain_grad).
class RetainedGrad : public RefCounted {
 public:
  Tensor grad;
};

// `view_history` of a view made under no_grad: it never takes its base's history.
inline constexpr uint64_t kViewWithoutHistory = ~uint64_t(0);

// ---- shape helpers
// Element count of `shape`; an error (naming `where`) for a negative size or a count, or product
// of the non-zero sizes, beyond 2^63 - 1.
int64_t shape_numel(const Shape& shape, const char* where = "shape");
Shape contiguous_strides(const Shape& shape);
std::string shape_str(const Shape& shape);  // "(2, 3)"
// Wraps a possibly negative dim into [0, rank); error names `where` and the valid range.
int64_t wrap_dim(int64_t dim, int64_t rank, const char* where);

// ---- construction
// A new contiguous tensor, uninitialized.
Tensor empty(const Shape& shape, DType dtype = DType::Float32);
// A tensor viewing `storage` with the given layout.
Tensor make_tensor(Ref<Storage> storage, Shape shape, Shape strides, int64_t offset, DType dtype);

std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace smelt
