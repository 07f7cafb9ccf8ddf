// conv2d forward and backward (both gradient ops) through the public API, and every forward
// implementation (kernels/conv_select.h) side by side on the shapes of ResNet-18, MobileNetV2 and
// SqueezeNet 1.1 at batch 1, 224x224, so a comparison is always from the same run.
//
//   OMP_NUM_THREADS=2 build/bench/conv_bench --benchmark_filter=conv_impl
//
// Counter GFLOPS = 2 N O Ho Wo C/groups kH kW / time. conv_impl rows name the implementation;
// one that does not apply to the shape is skipped.
#include <benchmark/benchmark.h>

#include "kernels/conv_select.h"
#include "smelt/smelt.h"

namespace {

using smelt::Tensor;
using smelt::kernels::ConvImpl;

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

// One implementation on one shape: args C, HW, O, k, stride, groups, implementation index
// (into kConvImpls), batch 1, padding k / 2.
void conv_impl(benchmark::State& state) {
  smelt::kernels::Conv2dGeometry g;
  g.N = 1, g.C = state.range(0), g.H = g.W = state.range(1), g.O = state.range(2);
  g.kH = g.kW = state.range(3), g.stride_h = g.stride_w = state.range(4), g.groups = state.range(5);
  g.pad_h = g.pad_w = g.kH / 2;
  g.Ho = smelt::kernels::conv_output_size(g.H, g.kH, g.stride_h, g.pad_h, 1);
  g.Wo = smelt::kernels::conv_output_size(g.W, g.kW, g.stride_w, g.pad_w, 1);
  const ConvImpl impl = smelt::kernels::kConvImpls[state.range(6)];
  state.SetLabel(smelt::kernels::conv_impl_name(impl));
  if (!smelt::kernels::conv_impl_supports(impl, g, smelt::DType::Float32)) {
    state.SkipWithError("does not apply");
    return;
  }
  Tensor x = smelt::randn({1, g.C, g.H, g.W}), w = smelt::randn({g.O, g.C / g.groups, g.kH, g.kW});
  Tensor y = smelt::empty({1, g.O, g.Ho, g.Wo});
  for (auto _ : state) {
    smelt::kernels::conv2d_forward_with(impl, g, y, x, w);
    benchmark::DoNotOptimize(y.raw_data());
  }
  const double flops = 2.0 * double(g.O * g.Ho * g.Wo * (g.C / g.groups) * g.kH * g.kW);
  state.counters["GFLOPS"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

void model_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"C", "HW", "O", "k", "s", "g", "impl"});
  const std::vector<std::vector<int64_t>> rows = {
      // ResNet-18
      {3, 224, 64, 7, 2, 1}, {64, 56, 64, 3, 1, 1}, {64, 56, 128, 3, 2, 1}, {64, 56, 128, 1, 2, 1},
      {128, 28, 128, 3, 1, 1}, {256, 14, 256, 3, 1, 1}, {512, 7, 512, 3, 1, 1},
      // MobileNetV2: depthwise and pointwise
      {32, 112, 32, 3, 1, 32}, {96, 112, 96, 3, 2, 96}, {144, 56, 144, 3, 1, 144}, {576, 14, 576, 3, 1, 576},
      {960, 7, 960, 3, 1, 960}, {32, 112, 16, 1, 1, 1}, {16, 112, 96, 1, 1, 1}, {144, 56, 24, 1, 1, 1},
      {960, 7, 320, 1, 1, 1},
      // SqueezeNet 1.1: squeeze and the two expands
      {128, 55, 16, 1, 1, 1}, {16, 55, 64, 1, 1, 1}, {16, 55, 64, 3, 1, 1},
  };
  for (const auto& r : rows) {
    for (int64_t impl = 0; impl < int64_t(std::size(smelt::kernels::kConvImpls)); ++impl) {
      std::vector<int64_t> args = r;
      args.push_back(impl);
      b->Args(args);
    }
  }
  b->Unit(benchmark::kMicrosecond)->UseRealTime()->MinTime(0.1);
}

BENCHMARK(conv_impl)->Apply(model_shapes);

}  // namespace

BENCHMARK_MAIN();
