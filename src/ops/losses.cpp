// Losses: the nll_loss op, and cross_entropy, mse_loss and binary_cross_entropy_with_logits
// composed of smelt ops (their gradients come from the ops they are made of).
#include <algorithm>

#include "kernels/loops.h"
#include "kernels/reduce.h"
#include "ops/op_util.h"

namespace smelt::ops {
namespace {

enum ReductionCode : int64_t { kNone = 0, kMean = 1, kSum = 2 };

Tensor row_major(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor copy = empty(t.shape(), t.dtype());
  kernels::copy_strided(copy, t);
  return copy;
}

// target must be logp's shape without the class dim 1.
void check_class_target(const TensorMeta& logp, const TensorMeta& target, const char* op) {
  check_dtype(target, DType::Int64, op, "target (class indices)");
  Shape want = logp.shape;
  want.erase(want.begin() + 1);
  SMELT_CHECK(target.shape == want) << op << ": target " << shape_str(target.shape)
                                    << " does not match input " << shape_str(logp.shape)
                                    << "; class indices must have shape " << shape_str(want);
}

// ---- nll_loss: (logp (N, C, d...), target Int64 (N, d...)) -> loss; ignore_index, reduction

std::vector<TensorMeta> nll_loss_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const TensorMeta& logp = in[0];
  check_floating(logp, "nll_loss", "log-probabilities");
  SMELT_CHECK(logp.shape.size() >= 2) << "nll_loss: log-probabilities must be (N, C) or (N, C, d...), got "
                                      << shape_str(logp.shape);
  check_class_target(logp, in[1], "nll_loss");
  attrs.get_int("ignore_index");
  const int64_t reduction = attrs.get_int("reduction");
  SMELT_CHECK(reduction >= kNone && reduction <= kSum)
      << "nll_loss: reduction must be 0 (none), 1 (mean) or 2 (sum), got " << reduction;
  return {{reduction == kNone ? in[1].shape : Shape{}, logp.dtype}};
}

void nll_loss_kernel(const std::vector<Tensor>& in, const Attrs& attrs,
                     const std::vector<Tensor>& out) {
  const Tensor logp = row_major(in[0]), target = row_major(in[1]);
  const int64_t ignore = attrs.get_int("ignore_index"), reduction = attrs.get_int("reduction");
  const int64_t batch = logp.size(0), classes = logp.size(1);
  const int64_t spatial = target.numel() / std::max<int64_t>(batch, 1);  // product of d...
  const int64_t* t = target.data<int64_t>();
  // Values are checked before any work (and outside threads, which must not throw).
  check_class_indices(t, target.numel(), classes, ignore, "nll_loss");
  const Tensor& loss = out[0];
  SMELT_DISPATCH_FLOATING(logp.dtype(), "nll_loss", [&] {
    using T = scalar_t;
    const T* p = logp.data<T>();  // (N, C, S)
    T* l = loss.data<T>();
    double total = 0;
    int64_t counted = 0;
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t s = 0; s < spatial; ++s) {
        const int64_t i = n * spatial + s;
        const T v = t[i] == ignore ? T(0) : -p[(n * classes + t[i]) * spatial + s];
        if (reduction == kNone) l[i] = v;
        total += double(v);
        counted += t[i] != ignore;
      }
    }
    // Mean over zero counted targets is 0/0 = NaN, as PyTorch reports it.
    if (reduction == kSum) l[0] = T(total);
    if (reduction == kMean) l[0] = T(total / double(counted));
  });
}

// d loss / d logp[n, c, s] = -g[n, s] [c == target[n, s] and target not ignored]
// (/ the number of counted targets for mean). Built from eq/ne/cast so that it runs under the
// tracer and differentiates again (it is linear in g).
std::vector<Tensor> nll_loss_grad(const GradContext& c) {
  const Tensor& logp = c.inputs[0];
  const Tensor& target = c.inputs[1];
  const DType dtype = logp.dtype();
  Shape class_shape(size_t(logp.dim()), 1);
  class_shape[1] = logp.size(1);
  Tensor classes = arange(0, double(logp.size(1)), 1, DType::Int64).reshape(class_shape);
  Tensor t = target.unsqueeze(1);  // (N, 1, d...)
  Tensor counted = cast(ne(t, scalar_like(t, c.attrs.get_int("ignore_index"))), dtype);
  Tensor pick = cast(eq(t, classes), dtype) * counted;  // (N, C, d...)
  const Tensor& g = c.grads[0];
  switch (c.attrs.get_int("reduction")) {
    case kNone: return {-(pick * g.unsqueeze(1)), Tensor()};
    case kSum: return {pick * (-g), Tensor()};
    default: {
      // No counted target: the forward is NaN and the gradient zero (as PyTorch).
      Tensor n = maximum(sum(counted), scalar_like(counted, 1.0));
      return {pick * (-g / n), Tensor()};
    }
  }
}

}  // namespace

SMELT_OP_IMPL(nll_loss) = {nll_loss_shape, nll_loss_kernel, nll_loss_grad, kSaveInputs};

}  // namespace smelt::ops

namespace smelt {
namespace {

int64_t reduction_code(Reduction r) {
  switch (r) {
    case Reduction::None: return 0;
    case Reduction::Mean: return 1;
    case Reduction::Sum: return 2;
  }
  return 1;
}

Tensor reduce_loss(const Tensor& loss, Reduction r) {
  switch (r) {
    case Reduction::None: return loss;
    case Reduction::Sum: return sum(loss);
    case Reduction::Mean: return mean(loss);
  }
  return loss;
}

void check_same_shape(const Tensor& input, const Tensor& target, const char* op) {
  SMELT_CHECK(input.defined() && target.defined()) << op << ": input and target must be defined";
  SMELT_CHECK(input.shape() == target.shape())
      << op << ": target " << shape_str(target.shape()) << " must have the input's shape "
      << shape_str(input.shape()) << " (reshape one of them; silent broadcasting hides bugs)";
  ops::check_floating(ops::meta_of(input), op);
  ops::check_same_dtype(ops::meta_of(input), ops::meta_of(target), op);
}

}  // namespace

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, int64_t ignore_index,
                Reduction reduction) {
  ops::Attrs attrs{{"ignore_index", ignore_index}, {"reduction", reduction_code(reduction)}};
  SMELT_CHECK(log_probs.defined() && target.defined()) << "nll_loss: undefined input";
  if (log_probs.dim() == 1) {  // one sample (C) with a 0-dim target: a batch of one
    SMELT_CHECK(target.dim() == 0) << "nll_loss: input (C) needs a 0-dim target, got "
                                   << shape_str(target.shape());
    Tensor loss = ops::call1(ops::OpId::nll_loss, {log_probs.unsqueeze(0), target.unsqueeze(0)}, attrs);
    return reduction == Reduction::None ? loss.squeeze(0) : loss;
  }
  return ops::call1(ops::OpId::nll_loss, {log_probs, target}, attrs);
}

// loss = (1 - s) nll(logp, t) + s / C * sum_c(-logp_c), with logp = log_softmax(logits) and
// s the label smoothing; ignored targets contribute nothing to either term, and mean divides
// both by the number of counted targets.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                     double label_smoothing, Reduction reduction) {
  SMELT_CHECK(logits.defined() && target.defined()) << "cross_entropy: undefined input";
  SMELT_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0)
      << "cross_entropy: label_smoothing must be in [0, 1], got " << label_smoothing;
  SMELT_CHECK(logits.dim() >= 1) << "cross_entropy: logits must be (C), (N, C) or (N, C, d...), got "
                                 << shape_str(logits.shape());
  const int64_t class_dim = logits.dim() == 1 ? 0 : 1;
  {
    ops::TensorMeta lm = ops::meta_of(logits), tm = ops::meta_of(target);
    if (class_dim == 0) {  // as a batch of one
      lm.shape.insert(lm.shape.begin(), 1);
      tm.shape.insert(tm.shape.begin(), 1);
    }
    ops::check_floating(lm, "cross_entropy", "logits");
    ops::check_class_target(lm, tm, "cross_entropy");
  }
  Tensor logp = log_softmax(logits, class_dim);
  Tensor nll = nll_loss(logp, target, ignore_index, reduction);
  if (label_smoothing == 0.0) return nll;

  const double classes = double(logits.size(class_dim));
  Tensor counted = ne(target, scalar_like(target, ignore_index));
  Tensor smooth = where(counted, -sum(logp, {class_dim}), scalar_like(logp, 0.0));
  switch (reduction) {
    case Reduction::None: break;
    case Reduction::Sum: smooth = sum(smooth); break;
    case Reduction::Mean: smooth = sum(smooth) / sum(cast(counted, logp.dtype())); break;
  }
  return (1.0 - label_smoothing) * nll + smooth * (label_smoothing / classes);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  check_same_shape(input, target, "mse_loss");
  Tensor d = input - target;
  return reduce_loss(d * d, reduction);
}

// log(1 + e^-x) + (1 - t) x: softplus never exponentiates a large positive number, and its
// derivative sigmoid(x) - t is exact at x = 0 (a max/abs form would take a subgradient there).
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        Reduction reduction) {
  check_same_shape(logits, target, "binary_cross_entropy_with_logits");
  return reduce_loss((1.0 - target) * logits + softplus(-logits), reduction);
}

}  // namespace smelt
