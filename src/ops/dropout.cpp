// dropout: zeroes each element with probability p and scales the kept ones by 1 / (1 - p).
// The mask comes from the default generator, one 32-bit Philox word per element in row-major
// order, so it depends only on the seed and the shape (not on strides or thread count).
#include <algorithm>

#include "kernels/loops.h"
#include "kernels/reduce.h"
#include "ops/op_util.h"

namespace smelt::ops {
namespace {

// Kept elements are scaled by this; p = 1 keeps nothing, and 0 keeps the gradient finite.
double keep_scale(double p) { return p < 1.0 ? 1.0 / (1.0 - p) : 0.0; }

void check_probability(double p) {
  SMELT_CHECK(p >= 0.0 && p <= 1.0) << "dropout: p must be in [0, 1], got " << p;
}

// (x) -> (y, mask Bool); attrs p, training
std::vector<TensorMeta> dropout_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  check_floating(in[0], "dropout");
  check_probability(attrs.get_float("p"));
  attrs.get_int("training");
  return {in[0], {in[0].shape, DType::Bool}};
}

void dropout_kernel(const std::vector<Tensor>& in, const Attrs& attrs,
                    const std::vector<Tensor>& out) {
  const double p = attrs.get_float("p");
  const Tensor& mask = out[1];
  bool* keep = mask.data<bool>();
  const int64_t n = mask.numel();
  if (!attrs.get_int("training") || p == 0.0) {  // the identity: y is a copy of x
    std::fill(keep, keep + n, true);
    kernels::copy_strided(out[0], in[0]);
    return;
  }
  Tensor x = in[0];
  if (!x.is_contiguous()) {
    x = empty(x.shape(), x.dtype());
    kernels::copy_strided(x, in[0]);
  }
  const Tensor& y = out[0];
  // Threads must use the caller's generator (it is thread-local); block() is a pure function.
  const Generator& gen = default_generator();
  const uint64_t first = default_generator().reserve(uint64_t((n + 3) / 4));
  SMELT_DISPATCH_FLOATING(x.dtype(), "dropout", [&] {
    using T = scalar_t;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    const T scale = T(keep_scale(p));
    parallel_for((n + 3) / 4, kParallelGrain / 4, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        uint32_t words[4];
        gen.block(first + uint64_t(b), words);
        for (int64_t k = 0; k < 4 && 4 * b + k < n; ++k) {
          const int64_t i = 4 * b + k;
          keep[i] = double(words[k]) * (1.0 / 4294967296.0) >= p;
          py[i] = keep[i] ? px[i] * scale : T(0);
        }
      }
    });
  });
}

// dx = g mask / (1 - p)
std::vector<Tensor> dropout_grad(const GradContext& c) {
  const Tensor& g = c.grads[0];
  if (!c.attrs.get_int("training")) return {g};
  const Tensor& mask = c.outputs[1];
  return {where(mask, g * keep_scale(c.attrs.get_float("p")), zero_like_scalar(g))};
}

}  // namespace

SMELT_OP_IMPL(dropout) = {dropout_shape, dropout_kernel, dropout_grad, kSaveOutputs};

}  // namespace smelt::ops

namespace smelt {

Tensor dropout(const Tensor& x, double p, bool training) {
  ops::check_probability(p);
  if (!training || p == 0.0) return x;  // as PyTorch: the input itself
  return ops::call(ops::OpId::dropout, {x}, {{"p", p}, {"training", int64_t(training)}})[0];
}

}  // namespace smelt
