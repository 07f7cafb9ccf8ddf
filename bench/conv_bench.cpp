// conv2d forward and backward (both gradient ops) through the public API, float32.
//
//   build/bench/conv_bench
//
// Shapes: ResNet's 3x3 64 -> 64 on 56x56 (batch 1 and 8) and a small MNIST CNN's two layers
// (batch 64). Counter GFLOPS = 2 N O Ho Wo C/groups kH kW / time (per pass).
#include <benchmark/benchmark.h>

#include "smelt/smelt.h"

namespace {

using smelt::Tensor;

struct ConvShape {
  int64_t N, C, H, W, O, k, pad;
};

ConvShape shape_of(const benchmark::State& state) {
  return {state.range(0), state.range(1), state.range(2), state.range(2), state.range(3),
          state.range(4), state.range(4) / 2};
}

double conv_flops(const ConvShape& s) {
  return 2.0 * double(s.N * s.O * s.H * s.W * s.C * s.k * s.k);  // stride 1, "same" padding
}

void conv_forward(benchmark::State& state) {
  const ConvShape s = shape_of(state);
  Tensor x = smelt::randn({s.N, s.C, s.H, s.W}), w = smelt::randn({s.O, s.C, s.k, s.k});
  for (auto _ : state) {
    Tensor y = smelt::conv2d(x, w, Tensor(), {1, 1}, {s.pad, s.pad});
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.counters["GFLOPS"] = benchmark::Counter(conv_flops(s), benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
}

// Forward + both gradients: about 3 times the forward's flops.
void conv_forward_backward(benchmark::State& state) {
  const ConvShape s = shape_of(state);
  Tensor x = smelt::randn({s.N, s.C, s.H, s.W}), w = smelt::randn({s.O, s.C, s.k, s.k});
  x.set_requires_grad();
  w.set_requires_grad();
  for (auto _ : state) {
    Tensor y = smelt::conv2d(x, w, Tensor(), {1, 1}, {s.pad, s.pad});
    auto grads = smelt::autograd::grad({y}, {x, w}, {smelt::ones_like(y)});
    benchmark::DoNotOptimize(grads[0].raw_data());
  }
  state.counters["GFLOPS"] = benchmark::Counter(3.0 * conv_flops(s), benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"N", "C", "HW", "O", "k"});
  b->Args({1, 64, 56, 64, 3});
  b->Args({8, 64, 56, 64, 3});
  b->Args({64, 1, 28, 32, 3});   // MNIST CNN, layer 1
  b->Args({64, 32, 14, 64, 3});  // MNIST CNN, layer 2 (after 2x2 pooling)
  b->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.3);
}

BENCHMARK(conv_forward)->Apply(shapes);
BENCHMARK(conv_forward_backward)->Apply(shapes);

}  // namespace

BENCHMARK_MAIN();
