#include "smelt/tensor.h"

#include "base/buffer.h"
#include "base/log.h"
#include "tensor/capture.h"
#include "tensor/memory_tracking.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>


namespace smelt {

// ---- storage

Storage::Storage(size_t nbytes) : data_(buffer_alloc(nbytes)), nbytes_(nbytes), owned_(true) {
  detail::note_storage_created(this);
  detail::track_storage_created(this);
}

Storage::Storage(void* data, size_t nbytes, std::function<void(void*)> release)
    : data_(data), nbytes_(nbytes), release_(std::move(release)) {
  detail::note_storage_created(this);
  detail::track_storage_created(this);
}

Storage::~Storage() {
  detail::note_storage_destroyed(this);
  detail::track_storage_destroyed(this);
  if (owned_) buffer_free(data_, nbytes_);
  else if (release_) release_(data_);
}

// ---- shape helpers

// Every size is checked here, so that no shape with a negative size or an element count beyond
// int64 gets past a shape rule, a view or an allocation (the dispatcher checks every output shape
// through this). The product of the non-zero sizes must fit too, even when a 0 makes the count 0:
// contiguous strides are built from it.
int64_t shape_numel(const Shape& shape, const char* where) {
  int64_t n = 1;
  bool has_zero = false;
  for (int64_t s : shape) {
    SMELT_CHECK(s >= 0) << where << ": negative size " << s << " in shape " << shape_str(shape)
                        << "; sizes must be >= 0";
    if (s == 0) {
      has_zero = true;
      continue;
    }
    SMELT_CHECK(!__builtin_mul_overflow(n, s, &n))
        << where << ": size overflow: shape " << shape_str(shape) << " has more than 2^63 - 1 elements";
  }
  return has_zero ? 0 : n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

std::string shape_str(const Shape& shape) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  if (shape.size() == 1) os << ",";
  os << ")";
  return os.str();
}

int64_t wrap_dim(int64_t dim, int64_t rank, const char* where) {
  int64_t r = std::max<int64_t>(rank, 1);  // a 0-dim tensor accepts dim 0 and -1
  SMELT_CHECK(dim >= -r && dim < r) << where << ": dim " << dim << " is out of range for a tensor with "
                                    << rank << " dims; valid: [" << -r << ", " << r - 1 << "]";
  return dim < 0 ? dim + r : dim;
}

// ---- construction

Tensor make_tensor(Ref<Storage> storage, Shape shape, Shape strides, int64_t offset, DType dtype) {
  auto impl = make_ref<TensorImpl>();
  impl->storage = std::move(storage);
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor empty(const Shape& shape, DType dtype) {
  const int64_t n = shape_numel(shape, "empty");  // checks negative sizes and overflow
  int64_t nbytes = 0;
  SMELT_CHECK(!__builtin_mul_overflow(n, int64_t(dtype_size(dtype)), &nbytes))
      << "empty: size overflow: shape " << shape_str(shape) << " of " << dtype_name(dtype) << " needs more than "
      << "2^63 - 1 bytes";
  Ref<Storage> storage;
  try {
    storage = make_ref<Storage>(size_t(nbytes));
  } catch (const std::bad_alloc&) {
    SMELT_CHECK(false) << "out of memory: shape " << shape_str(shape) << " of " << dtype_name(dtype)
                       << " needs " << nbytes << " bytes";
  }
  return make_tensor(std::move(storage), shape, contiguous_strides(shape), 0, dtype);
}

// ---- metadata

// Every accessor goes through here: using an undefined (default-constructed) Tensor is a user
// error with a message, not a null dereference.
const TensorImpl& Tensor::checked_impl() const {
  SMELT_CHECK(impl_) << "the tensor is undefined (default-constructed, or a gradient that was "
                        "never computed); check defined() first";
  return *impl_;
}

const Shape& Tensor::shape() const { return checked_impl().shape; }
const Shape& Tensor::strides() const { return checked_impl().strides; }
int64_t Tensor::dim() const { return int64_t(checked_impl().shape.size()); }
int64_t Tensor::size(int64_t d) const {
  SMELT_CHECK(dim() > 0) << "Tensor::size: dim " << d << " of a 0-dim tensor, which has no dims";
  return impl_->shape[wrap_dim(d, dim(), "Tensor::size")];
}
int64_t Tensor::stride(int64_t d) const {
  SMELT_CHECK(dim() > 0) << "Tensor::stride: dim " << d << " of a 0-dim tensor, which has no dims";
  return impl_->strides[wrap_dim(d, dim(), "Tensor::stride")];
}
int64_t Tensor::numel() const { return shape_numel(checked_impl().shape); }
int64_t Tensor::nbytes() const { return numel() * int64_t(dtype_size(dtype())); }
int64_t Tensor::offset() const { return checked_impl().offset; }
DType Tensor::dtype() const { return checked_impl().dtype; }
const Ref<Storage>& Tensor::storage() const { return checked_impl().storage; }

bool Tensor::is_contiguous() const {
  checked_impl();
  // No element, no layout (as in PyTorch); contiguous_strides gives a 0 dim stride-weight 1, so
  // checking strides against the sizes below would call zeros({2, 0, 3}) non-contiguous.
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (size_t i = impl_->shape.size(); i-- > 0;) {
    if (impl_->shape[i] == 1) continue;  // any stride is fine for a size-1 dim
    if (impl_->strides[i] != expected) return false;
    expected *= impl_->shape[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  SMELT_CHECK(impl_) << "Tensor::data: the tensor is undefined (default-constructed)";
  SMELT_CHECK(impl_->storage)
      << "Tensor::data: the tensor " << dtype_name(impl_->dtype) << " " << shape_str(impl_->shape)
      << " has no data: it is symbolic, standing for a value of a function being traced (by "
         "smelt::compile or Graph::trace), and has values only when the compiled plan runs. A "
         "traced function must compute with smelt ops and not read values (item(), to_vector(), "
         "data()): a branch or number taken from them would be frozen into the graph. Valid: "
         "where() to choose between values, or read them outside the compiled function";
  SMELT_CHECK(!detail::captured_from_outside(impl_->storage.get()))
      << "Tensor::data: a compiled function read the values of a tensor it captured ("
      << dtype_name(impl_->dtype) << " " << shape_str(impl_->shape)
      << ") while it was being traced; the trace records ops, not values, so a branch or number "
         "taken from them would be frozen into the plan while the tensor may change between "
         "calls. Valid: compute with smelt ops (where() to choose between values), or read the "
         "values outside the compiled function and pass what depends on them as an input";
  return static_cast<char*>(impl_->storage->data()) + impl_->offset * int64_t(dtype_size(impl_->dtype));
}

namespace {

double load_as_double(const void* p, DType t) {
  switch (t) {
    case DType::Float32: return *static_cast<const float*>(p);
    case DType::Float64: return *static_cast<const double*>(p);
    case DType::Int64: return double(*static_cast<const int64_t*>(p));
    case DType::Bool: return *static_cast<const bool*>(p) ? 1.0 : 0.0;
    case DType::UInt8: return *static_cast<const uint8_t*>(p);
    case DType::Int8: return *static_cast<const int8_t*>(p);
    case DType::Int32: return *static_cast<const int32_t*>(p);
  }
  return 0;
}

}  // namespace

double Tensor::item() const {
  SMELT_CHECK(numel() == 1) << "Tensor::item: the tensor has " << numel() << " elements "
                            << shape_str(shape()) << "; item() needs exactly one";
  return load_as_double(raw_data(), dtype());
}

std::vector<double> Tensor::to_vector() const {
  std::vector<double> out;
  const int64_t n = numel();
  out.reserve(size_t(n));
  if (n == 0) return out;
  const char* base = static_cast<const char*>(raw_data());
  const int64_t esize = int64_t(dtype_size(dtype()));
  std::vector<int64_t> index(size_t(dim()), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (int64_t d = 0; d < dim(); ++d) off += index[d] * impl_->strides[d];
    out.push_back(load_as_double(base + off * esize, dtype()));
    for (int64_t d = dim() - 1; d >= 0; --d) {
      if (++index[d] < impl_->shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

// ---- autograd accessors

bool Tensor::requires_grad() const { return impl_ && impl_->requires_grad; }

Tensor& Tensor::set_requires_grad(bool on) {
  SMELT_CHECK(is_leaf()) << "set_requires_grad: only leaf tensors can change requires_grad; "
                            "use detach() to get a leaf from a computed tensor";
  SMELT_CHECK(!on || dtype_is_floating(dtype()))
      << "set_requires_grad: only floating-point tensors can require grad, this one is "
      << dtype_name(dtype());
  impl_->requires_grad = on;
  return *this;
}

bool Tensor::is_leaf() const { return !checked_impl().grad_fn; }
Tensor Tensor::grad() const {
  const TensorImpl& impl = checked_impl();
  if (!impl.grad_fn) return impl.grad;
  if (impl.retained_grad) return impl.retained_grad->grad;
  // As PyTorch (which warns on each access from Python, shown once per place): the backward
  // pass never fills a non-leaf's grad, so reading it is almost always a mistake.
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) {
    warn("Tensor::grad() of a non-leaf tensor (one computed by an op) is undefined: backward() "
         "fills grad() only for leaves. Call retain_grad() on it before backward() to keep its "
         "gradient, or read the gradient of the leaf you meant (this warning shows once)");
  }
  return Tensor();
}
bool Tensor::retains_grad() const {
  const TensorImpl& impl = checked_impl();
  return impl.grad_fn && impl.retained_grad;
}

void Tensor::check_data_dtype(DType requested, const char* accessor) const {
  SMELT_CHECK(requested == dtype()) << "Tensor::" << accessor << "<" << dtype_name(requested)
                                    << ">(): tensor has dtype " << dtype_name(dtype());
}
void Tensor::check_data_contiguous() const {
  SMELT_CHECK(is_contiguous())
      << "Tensor::data<T>(): the tensor " << shape_str(shape()) << " with strides "
      << shape_str(strides())
      << " is a non-contiguous view, so its elements are not in row-major order in memory; call "
         ".contiguous() first (a copy only when needed), or strided_data<T>() to walk the strides "
         "yourself";
}
void Tensor::set_grad(const Tensor& g) {
  checked_impl();
  if (impl_->grad_fn && impl_->retained_grad) impl_->retained_grad->grad = g;
  else impl_->grad = g;
}
void Tensor::zero_grad() {
  checked_impl();
  impl_->grad = Tensor();
  if (impl_->retained_grad) impl_->retained_grad->grad = Tensor();
}
GradNode* Tensor::grad_fn() const { return checked_impl().grad_fn.get(); }

Tensor Tensor::detach() const {
  checked_impl();
  Tensor t = make_tensor(impl_->storage, impl_->shape, impl_->strides, impl_->offset, impl_->dtype);
  t.impl()->trace_id = impl_->trace_id;
  return t;
}

}  // namespace smelt
