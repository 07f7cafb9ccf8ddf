// Tensor's methods that are ops (views, copies) or drive autograd, and the in-place updates.
#include <atomic>
#include <cstring>
#include <type_traits>

#include "autograd/node.h"
#include "kernels/loops.h"
#include "kernels/reduce.h"
#include "ops/inplace.h"
#include "ops/op_util.h"
#include "smelt/autograd.h"

namespace smelt {

Tensor Tensor::reshape(const Shape& shape) const { return smelt::reshape(*this, shape); }

Tensor Tensor::view(const Shape& shape) const {
  Tensor r = smelt::reshape(*this, shape);
  SMELT_CHECK(r.storage() == storage())
      << "view: a tensor " << shape_str(this->shape()) << " with strides " << shape_str(strides())
      << " cannot be viewed as " << shape_str(shape)
      << " without a copy; use reshape() (which copies) or contiguous() first";
  return r;
}

Tensor Tensor::permute(const Shape& dims) const { return smelt::permute(*this, dims); }

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  if (dim() == 0) {  // as PyTorch: dims 0 / -1 name the tensor itself
    wrap_dim(d0, 0, "transpose");
    wrap_dim(d1, 0, "transpose");
    return *this;
  }
  Shape dims(static_cast<size_t>(this->dim()));
  for (int64_t i = 0; i < dim(); ++i) dims[i] = i;
  std::swap(dims[wrap_dim(d0, dim(), "transpose")], dims[wrap_dim(d1, dim(), "transpose")]);
  return permute(dims);
}

Tensor Tensor::t() const {
  SMELT_CHECK(dim() == 2) << "t(): expects a 2-D tensor, got " << shape_str(shape())
                          << "; use transpose(d0, d1) or permute()";
  return transpose(0, 1);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  return smelt::slice(*this, d, start, end, step);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  SMELT_CHECK(dim() > 0) << "narrow: cannot narrow a 0-dim tensor";
  int64_t w = wrap_dim(d, dim(), "narrow");
  SMELT_CHECK(start >= 0 && length >= 0 && start + length <= size(w))
      << "narrow: [" << start << ", " << start + length << ") is outside dim " << w << " of size "
      << size(w);
  return slice(w, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  SMELT_CHECK(dim() > 0) << "select: cannot select from a 0-dim tensor";
  int64_t w = wrap_dim(d, dim(), "select");
  int64_t n = size(w);
  SMELT_CHECK(index >= -n && index < n)
      << "select: index " << index << " is out of range for dim " << w << " of size " << n;
  if (index < 0) index += n;
  return slice(w, index, index + 1).squeeze(w);
}

Tensor Tensor::expand(const Shape& shape) const { return smelt::expand(*this, shape); }

Tensor Tensor::squeeze(int64_t d) const {
  int64_t w = wrap_dim(d, dim(), "squeeze");
  if (dim() == 0 || size(w) != 1) return *this;
  Shape s = shape();
  s.erase(s.begin() + w);
  return reshape(s);
}

Tensor Tensor::squeeze() const {
  Shape s;
  for (int64_t v : shape()) if (v != 1) s.push_back(v);
  return reshape(s);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  int64_t w = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape s = shape();
  s.insert(s.begin() + w, 1);
  return reshape(s);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  int64_t a = wrap_dim(start_dim, dim(), "flatten"), b = wrap_dim(end_dim, dim(), "flatten");
  SMELT_CHECK(a <= b) << "flatten: start_dim " << a << " is after end_dim " << b;
  Shape s(shape().begin(), shape().begin() + a);
  int64_t n = 1;
  for (int64_t i = a; i <= b; ++i) n *= size(i);
  s.push_back(n);
  s.insert(s.end(), shape().begin() + b + 1, shape().end());
  return reshape(s);
}

Tensor Tensor::contiguous() const { return smelt::contiguous(*this); }

Tensor Tensor::clone() const { return ops::call1(ops::OpId::contiguous, {*this}); }

Tensor Tensor::to(DType dtype) const { return cast(*this, dtype); }

// ---- autograd

void Tensor::backward(const Tensor& grad_output, bool retain_graph, bool create_graph) const {
  autograd::backward({*this}, grad_output.defined() ? std::vector<Tensor>{grad_output}
                                                    : std::vector<Tensor>{},
                     retain_graph, create_graph);
}

void Tensor::register_hook(GradHook hook) const {
  if (defined()) autograd::refresh_view_history(*this);
  SMELT_CHECK(requires_grad()) << "register_hook: the tensor does not require grad, so no "
                                  "gradient will ever reach a hook on it";
  if (impl_->grad_fn) {
    auto* node = static_cast<autograd::Node*>(impl_->grad_fn.get());
    node->hooks[impl_->output_nr].push_back(std::move(hook));
  } else {
    impl_->hooks.push_back(std::move(hook));
  }
}

uint64_t Tensor::register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const {
  SMELT_CHECK(defined() && requires_grad() && is_leaf())
      << "register_post_accumulate_grad_hook: the tensor must be a leaf that requires grad (a "
         "parameter); only leaves accumulate into .grad";
  static std::atomic<uint64_t> next_id{1};
  const uint64_t id = next_id++;
  impl_->post_accumulate_hooks.emplace_back(id, std::move(hook));
  return id;
}

void Tensor::remove_post_accumulate_grad_hook(uint64_t id) const {
  if (!defined()) return;
  auto& hooks = impl_->post_accumulate_hooks;
  std::erase_if(hooks, [id](const auto& h) { return h.first == id; });
}

void Tensor::retain_grad() const {
  if (defined()) autograd::refresh_view_history(*this);
  SMELT_CHECK(requires_grad()) << "retain_grad: the tensor does not require grad, so no gradient "
                                  "will ever flow into it";
  if (is_leaf() || impl_->retained_grad) return;  // leaves keep their gradient anyway
  impl_->retained_grad = make_ref<RetainedGrad>();
  // The hook holds the slot, not the TensorImpl (which owns the node: a cycle). It runs on the
  // summed gradient of this output, once per backward, and accumulates as a leaf's .grad does.
  Ref<RetainedGrad> slot = impl_->retained_grad;
  auto* node = static_cast<autograd::Node*>(impl_->grad_fn.get());
  node->hooks[impl_->output_nr].push_back([slot](const Tensor& g) {
    // owned plain data unless create_graph (grad mode on) asks for history
    Tensor kept = autograd::grad_enabled() ? g : g.detach().clone();
    slot->grad = slot->grad.defined() ? smelt::add(slot->grad, kept) : kept;
    return Tensor();
  });
}

// ---- in-place updates: each is its functional form written back (ops/inplace.h)

namespace {

// Whether writing `self` with these operands records autograd history.
bool records(const Tensor& self, std::initializer_list<const Tensor*> operands) {
  if (!autograd::grad_enabled()) return false;
  bool any = self.requires_grad() ||
             (self.impl()->view_base && self.impl()->view_base->requires_grad);
  for (const Tensor* t : operands) any |= t->requires_grad();
  return any;
}

// where(true, value, self): the value everywhere, and a zero gradient for self's old history
// (so the written tensor keeps requiring grad, as its consumers expect).
Tensor overwrite(const Tensor& self, const Tensor& value) {
  Tensor yes = empty({}, DType::Bool);
  yes.data<bool>()[0] = true;
  return where(yes, value, self);
}

// An in-place op keeps the written tensor's dtype, so a number that would promote it (int64 += 1.5
// is float32 in the functional form) is an error, as in PyTorch.
void check_scalar_keeps_dtype(const Tensor& self, const Scalar& value, const char* op) {
  SMELT_CHECK(self.defined()) << op << ": the tensor is undefined (default-constructed)";
  const DType result = promote_with_scalar(self.dtype(), value);
  SMELT_CHECK(result == self.dtype())
      << op << ": the result type " << dtype_name(result) << " (a " << dtype_name(self.dtype())
      << " tensor and the number " << value.to_double() << ") cannot be written into the "
      << dtype_name(self.dtype()) << " tensor; use the out-of-place form, or cast first";
}

void check_broadcasts_to(const Tensor& self, const Tensor& other, const char* op) {
  Shape b = broadcast_shapes(self.shape(), other.shape(), op);
  SMELT_CHECK(b == self.shape()) << op << ": " << shape_str(other.shape())
                                 << " does not broadcast to the written tensor's shape "
                                 << shape_str(self.shape());
}

}  // namespace

Tensor& Tensor::copy_(const Tensor& src) {
  ops::check_inplace_target(*this, "copy_");
  SMELT_CHECK(src.defined()) << "copy_: the source is undefined (default-constructed)";
  check_broadcasts_to(*this, src, "copy_");
  if (records(*this, {&src})) {
    return ops::inplace_apply(*this, "copy_", {src}, [&](const Tensor& self) {
      return overwrite(self, smelt::cast(src, self.dtype()));
    });
  }
  ops::EagerWhileTracing eager("copy_", {src});
  NoGradGuard no_grad;
  ops::write_into(*this, smelt::cast(src, dtype()));
  return *this;
}

Tensor& Tensor::fill_(const Scalar& value) {
  ops::check_inplace_target(*this, "fill_");
  if (records(*this, {})) {
    return ops::inplace_apply(*this, "fill_", {}, [&](const Tensor& self) {
      return overwrite(self, scalar_like(self, value));
    });
  }
  SMELT_DISPATCH_ALL(dtype(), "fill_", [&] {
    using T = scalar_t;
    // integers straight into the integer type (exact at the int64 extremes, wrapping like a cast
    // into narrower ones), everything else through double
    constexpr bool kInteger = std::is_integral_v<T> && !std::is_same_v<T, bool>;
    T v = kInteger && !value.is_floating() ? static_cast<T>(value.to_int())
                                           : static_cast<T>(value.to_double());
    // The old contents are not read, but the loop loads them: as bytes for bool, whose fresh
    // memory may hold a byte that is no bool (UB to load as one; UBSan saw 0xbe).
    using Old = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
    kernels::map1<T, Old>(*this, *this, [v](Old) { return v; });
  });
  storage()->bump_version();
  return *this;
}

Tensor& Tensor::zero_() { return fill_(0.0); }

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  check_broadcasts_to(*this, other, "add_");
  ops::check_same_dtype(ops::meta_of(*this), ops::meta_of(other), "add_");
  return ops::inplace_apply(*this, "add_", {other}, [&](const Tensor& self) {
    return alpha == 1.0 ? smelt::add(self, other) : smelt::add(self, other * alpha);
  });
}

Tensor& Tensor::add_(const Scalar& value) {
  check_scalar_keeps_dtype(*this, value, "add_");
  return ops::inplace_apply(*this, "add_", {}, [&](const Tensor& self) { return self + value; });
}

Tensor& Tensor::sub_(const Tensor& other, double alpha) {
  check_broadcasts_to(*this, other, "sub_");
  ops::check_same_dtype(ops::meta_of(*this), ops::meta_of(other), "sub_");
  return ops::inplace_apply(*this, "sub_", {other}, [&](const Tensor& self) {
    return alpha == 1.0 ? smelt::sub(self, other) : smelt::sub(self, other * alpha);
  });
}

Tensor& Tensor::sub_(const Scalar& value) {
  check_scalar_keeps_dtype(*this, value, "sub_");
  return ops::inplace_apply(*this, "sub_", {}, [&](const Tensor& self) { return self - value; });
}

Tensor& Tensor::mul_(const Tensor& other) {
  check_broadcasts_to(*this, other, "mul_");
  return ops::inplace_apply(*this, "mul_", {other},
                            [&](const Tensor& self) { return smelt::mul(self, other); });
}

Tensor& Tensor::mul_(const Scalar& value) {
  check_scalar_keeps_dtype(*this, value, "mul_");
  return ops::inplace_apply(*this, "mul_", {}, [&](const Tensor& self) { return self * value; });
}

Tensor& Tensor::div_(const Tensor& other) {
  check_broadcasts_to(*this, other, "div_");
  return ops::inplace_apply(*this, "div_", {other},
                            [&](const Tensor& self) { return smelt::div(self, other); });
}

Tensor& Tensor::div_(const Scalar& value) {
  check_scalar_keeps_dtype(*this, value, "div_");
  return ops::inplace_apply(*this, "div_", {}, [&](const Tensor& self) { return self / value; });
}

Tensor& Tensor::neg_() {
  return ops::inplace_apply(*this, "neg_", {}, [](const Tensor& self) { return smelt::neg(self); });
}

Tensor& Tensor::exp_() {
  return ops::inplace_apply(*this, "exp_", {}, [](const Tensor& self) { return smelt::exp(self); });
}

Tensor& Tensor::relu_() {
  return ops::inplace_apply(*this, "relu_", {}, [](const Tensor& self) { return smelt::relu(self); });
}

Tensor& Tensor::clamp_(std::optional<double> min, std::optional<double> max) {
  return ops::inplace_apply(*this, "clamp_", {},
                            [&](const Tensor& self) { return smelt::clamp(self, min, max); });
}

}  // namespace smelt
