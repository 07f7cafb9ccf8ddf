// dropout: zeroes each element with probability p and scales the kept ones by 1 / (1 - p).
// The op is functional in the generator: it reads the state (seed, counter) as its last input and
// returns the advanced state as its last output (ops.def, kRandom). Element i is kept when word
// i % 4 of Philox block counter + i / 4 is at least p * 2^32, so the mask depends only on the
// state and the shape (not on strides, threads or which thread calls). Eager calls reserve their
// blocks from the default generator; traced calls thread the tracer's state value through the
// graph, so a replay with the same state draws the same mask.
#include <algorithm>

#include "kernels/loops.h"
#include "kernels/reduce.h"
#include "ops/dispatch.h"
#include "ops/op_util.h"
#include "smelt/creation.h"

namespace smelt::ops {
namespace {

// Kept elements are scaled by this; p = 1 keeps nothing, and 0 keeps the gradient finite.
double keep_scale(double p) { return p < 1.0 ? 1.0 / (1.0 - p) : 0.0; }

void check_probability(double p) {
  SMELT_CHECK(p >= 0.0 && p <= 1.0) << "dropout: p must be in [0, 1], got " << p;
}

// Philox blocks of 4 words one draw over n elements uses.
uint64_t dropout_blocks(int64_t n) { return uint64_t((n + 3) / 4); }

// (x, rng_state Int64 [2]) -> (y, mask Bool, rng_state Int64 [2]); attrs p, training
std::vector<TensorMeta> dropout_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  check_floating(in[0], "dropout");
  SMELT_CHECK(in[1].dtype == DType::Int64 && in[1].shape == Shape{2})
      << "dropout: the generator state (input 1) must be int64 [2] = {seed, counter}, got "
      << dtype_name(in[1].dtype) << " " << shape_str(in[1].shape);
  check_probability(attrs.get_float("p"));
  attrs.get_int("training");
  return {in[0], {in[0].shape, DType::Bool}, in[1]};
}

void dropout_kernel(const std::vector<Tensor>& in, const Attrs& attrs,
                    const std::vector<Tensor>& out) {
  const double p = attrs.get_float("p");
  const GeneratorState state = generator_state_from_tensor(in[1]);
  const Tensor& mask = out[1];
  bool* keep = mask.data<bool>();
  const int64_t n = mask.numel();
  if (!attrs.get_int("training") || p == 0.0) {  // the identity, drawing nothing: y is a copy of x
    std::fill(keep, keep + n, true);
    kernels::copy_strided(out[0], in[0]);
    kernels::copy_strided(out[2], in[1]);
    return;
  }
  Tensor x = in[0];
  if (!x.is_contiguous()) {
    x = empty(x.shape(), x.dtype());
    kernels::copy_strided(x, in[0]);
  }
  const Tensor& y = out[0];
  const int64_t blocks = int64_t(dropout_blocks(n));
  SMELT_DISPATCH_FLOATING(x.dtype(), "dropout", [&] {
    using T = scalar_t;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    const T scale = T(keep_scale(p));
    parallel_for(blocks, kParallelGrain / 4, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        uint32_t words[4];
        Generator::block(state.seed, state.counter + uint64_t(b), words);
        for (int64_t k = 0; k < 4 && 4 * b + k < n; ++k) {
          const int64_t i = 4 * b + k;
          keep[i] = double(words[k]) * (1.0 / 4294967296.0) >= p;
          py[i] = keep[i] ? px[i] * scale : T(0);
        }
      }
    });
  });
  kernels::copy_strided(out[2], generator_state_tensor({state.seed, state.counter + uint64_t(blocks)}));
}

// dx = g mask / (1 - p)
std::vector<Tensor> dropout_grad(const GradContext& c) {
  const Tensor& g = c.grads[0];
  if (!c.attrs.get_int("training")) return {g, Tensor()};
  const Tensor& mask = c.outputs[1];
  // The generator state has no gradient.
  return {where(mask, g * keep_scale(c.attrs.get_float("p")), zero_like_scalar(g)), Tensor()};
}

}  // namespace

SMELT_OP_IMPL(dropout) = {dropout_shape, dropout_kernel, dropout_grad, kSaveOutputs};

}  // namespace smelt::ops

namespace smelt {

Tensor dropout(const Tensor& x, double p, bool training) {
  ops::check_probability(p);
  SMELT_CHECK(x.defined()) << "dropout: input 0 is an undefined (default-constructed) tensor";
  if (!training || p == 0.0) return x;  // as PyTorch: the input itself
  const ops::Attrs attrs{{"p", p}, {"training", int64_t(training)}};
  if (ops::DispatchHook* hook = ops::dispatch_hook()) {
    // Recording: the state is a value of the graph, threaded from one random op to the next.
    std::vector<Tensor> out = ops::call(ops::OpId::dropout, {x, hook->random_state()}, attrs);
    hook->set_random_state(out[2]);
    return out[0];
  }
  // Eager: this call's blocks are reserved from the default generator in one atomic step (the
  // generator is then where the op's returned state says), so concurrent calls never overlap.
  const GeneratorState first = default_generator().reserve(ops::dropout_blocks(x.numel()));
  return ops::call(ops::OpId::dropout, {x, generator_state_tensor(first)}, attrs)[0];
}

}  // namespace smelt
