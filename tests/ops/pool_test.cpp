// max_pool2d, avg_pool2d, adaptive_avg_pool2d and their gradient ops: forward against naive
// references, gradchecks (stride / padding / dilation, non-contiguous input, the gradient ops
// themselves, second order) and error messages.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "ops/dispatch.h"
#include "support/check.h"
#include "support/errors.h"

namespace smelt {
namespace {

using testing::all_close;
using testing::expect_error;
using testing::gradcheck;
using testing::random_leaf;

struct Window {
  std::vector<int64_t> kernel, stride, padding, dilation;
};

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

// Values and flat indices ih * W + iw; the first maximum wins.
std::pair<Tensor, Tensor> naive_max_pool(const Tensor& x, const Window& w) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t Ho = out_size(H, w.kernel[0], w.stride[0], w.padding[0], w.dilation[0]);
  const int64_t Wo = out_size(W, w.kernel[1], w.stride[1], w.padding[1], w.dilation[1]);
  std::vector<double> xv = x.to_vector(), y;
  std::vector<int64_t> idx;
  for (int64_t p = 0; p < N * C; ++p)
    for (int64_t i = 0; i < Ho; ++i)
      for (int64_t j = 0; j < Wo; ++j) {
        double best = -std::numeric_limits<double>::infinity();
        int64_t at = -1;
        for (int64_t ki = 0; ki < w.kernel[0]; ++ki)
          for (int64_t kj = 0; kj < w.kernel[1]; ++kj) {
            int64_t ih = i * w.stride[0] - w.padding[0] + ki * w.dilation[0];
            int64_t iw = j * w.stride[1] - w.padding[1] + kj * w.dilation[1];
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            double v = xv[size_t((p * H + ih) * W + iw)];
            if (at < 0 || v > best) { best = v; at = ih * W + iw; }
          }
        y.push_back(best);
        idx.push_back(at);
      }
  return {from_vector(y, {N, C, Ho, Wo}, DType::Float64).to(x.dtype()),
          from_vector(idx, {N, C, Ho, Wo})};
}

Tensor naive_avg_pool(const Tensor& x, const Window& w, bool include_pad) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t Ho = out_size(H, w.kernel[0], w.stride[0], w.padding[0], w.dilation[0]);
  const int64_t Wo = out_size(W, w.kernel[1], w.stride[1], w.padding[1], w.dilation[1]);
  std::vector<double> xv = x.to_vector(), y;
  for (int64_t p = 0; p < N * C; ++p)
    for (int64_t i = 0; i < Ho; ++i)
      for (int64_t j = 0; j < Wo; ++j) {
        double acc = 0;
        int64_t valid = 0, padded = 0;
        for (int64_t ki = 0; ki < w.kernel[0]; ++ki)
          for (int64_t kj = 0; kj < w.kernel[1]; ++kj) {
            int64_t ih = i * w.stride[0] - w.padding[0] + ki * w.dilation[0];
            int64_t iw = j * w.stride[1] - w.padding[1] + kj * w.dilation[1];
            // Positions beyond the padded image do not count, even with count_include_pad.
            if (ih >= H + w.padding[0] || iw >= W + w.padding[1]) continue;
            ++padded;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            acc += xv[size_t((p * H + ih) * W + iw)];
            ++valid;
          }
        y.push_back(acc / double(include_pad ? padded : valid));
      }
  return from_vector(y, {N, C, Ho, Wo}, DType::Float64).to(x.dtype());
}

Tensor naive_adaptive(const Tensor& x, int64_t Ho, int64_t Wo) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  std::vector<double> xv = x.to_vector(), y;
  for (int64_t p = 0; p < N * C; ++p)
    for (int64_t i = 0; i < Ho; ++i)
      for (int64_t j = 0; j < Wo; ++j) {
        int64_t h0 = int64_t(std::floor(double(i * H) / double(Ho)));
        int64_t h1 = int64_t(std::ceil(double((i + 1) * H) / double(Ho)));
        int64_t w0 = int64_t(std::floor(double(j * W) / double(Wo)));
        int64_t w1 = int64_t(std::ceil(double((j + 1) * W) / double(Wo)));
        double acc = 0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) acc += xv[size_t((p * H + ih) * W + iw)];
        y.push_back(acc / double((h1 - h0) * (w1 - w0)));
      }
  return from_vector(y, {N, C, Ho, Wo}, DType::Float64).to(x.dtype());
}

std::vector<Tensor> max_pool_op(const Tensor& x, const Window& w) {
  return ops::call(ops::OpId::max_pool2d, {x},
                   {{"kernel", w.kernel}, {"stride", w.stride}, {"padding", w.padding},
                    {"dilation", w.dilation}});
}

const std::vector<Window> kMaxWindows = {
    {{2, 2}, {2, 2}, {0, 0}, {1, 1}},
    {{3, 3}, {2, 2}, {1, 1}, {1, 1}},
    {{3, 2}, {1, 2}, {1, 0}, {2, 1}},
    {{2, 3}, {3, 1}, {0, 1}, {1, 2}},
};

TEST(MaxPool2d, ForwardValuesAndIndicesMatchNaive) {
  for (const Window& w : kMaxWindows) {
    for (DType dt : {DType::Float32, DType::Float64}) {
      Tensor x = randn({2, 3, 9, 8}, dt);
      auto out = max_pool_op(x, w);
      auto [y_ref, idx_ref] = naive_max_pool(x, w);
      EXPECT_TRUE(all_close(out[0], y_ref)) << shape_str(w.kernel);
      EXPECT_EQ(out[1].dtype(), DType::Int64);
      EXPECT_EQ(out[1].to_vector(), idx_ref.to_vector()) << shape_str(w.kernel);
    }
  }
  // Default stride = kernel.
  Tensor x = randn({1, 2, 6, 6});
  EXPECT_TRUE(all_close(max_pool2d(x, {2, 2}), naive_max_pool(x, kMaxWindows[0]).first));
}

// Ties, -inf and NaN in every window shape, rows wide enough for the vectorized row sweep: the
// first maximum (or the first NaN) wins, as a scalar walk of the window in (ki, kj) order.
TEST(MaxPool2d, TiesInfAndNaNPickTheFirstInWindowOrder) {
  for (const Window& w : kMaxWindows) {
    Tensor x = randn({2, 2, 11, 37});
    float* xp = x.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (i % 13 == 5) xp[i] = std::numeric_limits<float>::quiet_NaN();
      else if (i % 7 == 3) xp[i] = -std::numeric_limits<float>::infinity();
      else xp[i] = float(int(std::floor(xp[i] * 2)));  // few distinct values: many ties
    }
    auto out = max_pool_op(x, w);
    // The reference with NaN winning: first NaN in window order, else the first maximum.
    const int64_t H = 11, W = 37, Ho = out[0].size(2), Wo = out[0].size(3);
    const std::vector<double> idx = out[1].to_vector(), y = out[0].to_vector();
    for (int64_t p = 0; p < 4; ++p)
      for (int64_t i = 0; i < Ho; ++i)
        for (int64_t j = 0; j < Wo; ++j) {
          float best = -std::numeric_limits<float>::infinity();
          int64_t at = -1;
          for (int64_t ki = 0; ki < w.kernel[0]; ++ki)
            for (int64_t kj = 0; kj < w.kernel[1]; ++kj) {
              int64_t ih = i * w.stride[0] - w.padding[0] + ki * w.dilation[0];
              int64_t iw = j * w.stride[1] - w.padding[1] + kj * w.dilation[1];
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              float v = xp[(p * H + ih) * W + iw];
              if (at < 0 || v > best || (std::isnan(v) && !std::isnan(best))) { best = v; at = ih * W + iw; }
            }
          const size_t o = size_t((p * Ho + i) * Wo + j);
          ASSERT_EQ(int64_t(idx[o]), at) << shape_str(w.kernel) << " plane " << p << " at " << i << "," << j;
          ASSERT_TRUE(y[o] == double(best) || (std::isnan(y[o]) && std::isnan(best))) << y[o] << " vs " << best;
        }
  }
}

TEST(MaxPool2d, NaNPropagates) {
  Tensor x = zeros({1, 1, 2, 2});
  x.data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(max_pool2d(x, {2, 2}).item()));
}

// Which tap wins where values compare equal or not at all: the first of equal maxima (-0 and
// +0 included), the first NaN (value and index), -inf windows, padding never.
TEST(MaxPool2d, TiesNaNAndInfinitiesPickTheFirstTap) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // One 2x4 plane, windows 2x2 with stride 2: taps (row-major) of window 0 are x[0], x[1], x[4],
  // x[5]; of window 1: x[2], x[3], x[6], x[7].
  struct Case {
    std::vector<float> x;
    float y0, y1;
    int64_t i0, i1;
  };
  const std::vector<Case> cases = {
      {{1, 3, 2, 2, 3, 0, 2, 1}, 3, 2, 1, 2},                   // ties: the first maximum
      {{-0.f, 0.f, 0.f, -0.f, -1, -1, -1, -1}, -0.f, 0.f, 0, 2},  // -0 and +0 compare equal
      {{1, nan, 5, 5, nan, 9, 5, 4}, nan, 5, 1, 2},             // the first NaN; no NaN: the max
      {{-inf, -inf, nan, -inf, -inf, -inf, -inf, nan}, -inf, nan, 0, 2},
  };
  for (const Case& c : cases) {
    Tensor x = from_vector(std::vector<double>(c.x.begin(), c.x.end()), {1, 1, 2, 4}, DType::Float32);
    auto out = max_pool_op(x, {{2, 2}, {2, 2}, {0, 0}, {1, 1}});
    const std::vector<double> y = out[0].to_vector(), i = out[1].to_vector();
    for (int w = 0; w < 2; ++w) {
      const float want = w ? c.y1 : c.y0;
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(y[size_t(w)])) << w;
      } else {
        EXPECT_EQ(y[size_t(w)], want) << w;
        EXPECT_EQ(std::signbit(y[size_t(w)]), std::signbit(want)) << w;
      }
      EXPECT_EQ(i[size_t(w)], w ? c.i1 : c.i0) << w;
    }
  }
  // Padding is skipped, never the maximum, also when every real tap is -inf.
  Tensor x = full({1, 1, 3, 3}, -inf);
  auto out = max_pool_op(x, {{3, 3}, {1, 1}, {1, 1}, {1, 1}});
  EXPECT_EQ(out[0].to_vector(), std::vector<double>(9, -inf));
  EXPECT_EQ(out[1].to_vector(), (std::vector<double>{0, 0, 1, 0, 0, 1, 3, 3, 4}));
}

// The values-only kernel (a graph runner's "indices_unused", when no one reads the indices) against
// the kernel with indices, bit for bit: the same winner also among -0 / +0 ties and NaNs that
// differ in their payload, with -inf, padding, dilation, strides 1, 2 (specialized) and 3
// (generic), rows narrower and wider than a vector, -inf borders as the ONNX importer adds for
// ceil_mode, and planes of one pixel.
TEST(MaxPool2d, ValuesOnlyKernelIsBitIdentical) {
  std::vector<Window> windows = kMaxWindows;
  windows.push_back({{3, 3}, {2, 2}, {0, 0}, {1, 1}});  // SqueezeNet's pools
  windows.push_back({{3, 3}, {1, 1}, {1, 1}, {1, 1}});
  windows.push_back({{1, 1}, {1, 1}, {0, 0}, {1, 1}});
  windows.push_back({{2, 3}, {3, 3}, {1, 1}, {2, 1}});
  windows.push_back({{3, 3}, {2, 2}, {1, 1}, {2, 2}});
  const float inf = std::numeric_limits<float>::infinity();
  uint32_t state = 7;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  for (const Shape& shape : {Shape{2, 3, 9, 8}, Shape{1, 2, 13, 41}, Shape{1, 1, 5, 5}, Shape{3, 1, 4, 70}}) {
    for (const Window& w : windows) {
      if (out_size(shape[2], w.kernel[0], w.stride[0], w.padding[0], w.dilation[0]) < 1 ||
          out_size(shape[3], w.kernel[1], w.stride[1], w.padding[1], w.dilation[1]) < 1) {
        continue;
      }
      for (DType dt : {DType::Float32, DType::Float64}) {
        Tensor x = randn(shape, dt);
        // Few distinct values (many ties), signed zeros, NaNs with distinct payloads, -inf, and the
        // last two columns -inf (ceil_mode's border).
        const int64_t W = shape[3];
        for (int64_t i = 0; i < x.numel(); ++i) {
          const uint32_t r = next() >> 8;
          double v = double(int(r % 5)) - 3.0;
          if (r % 17 == 0) v = -inf;
          if (r % 11 == 0) v = (r & 1) ? -0.0 : 0.0;
          if (i % W >= W - 2) v = -inf;
          if (dt == DType::Float32) {
            float f = float(v);
            if (r % 23 == 0) {
              uint32_t bits = 0x7fc00000u | (r & 0xffff);  // NaN, payload from r
              std::memcpy(&f, &bits, 4);
            }
            x.data<float>()[i] = f;
          } else {
            if (r % 23 == 0) {
              uint64_t bits = 0x7ff8000000000000ull | (r & 0xffff);
              std::memcpy(&v, &bits, 8);
            }
            x.data<double>()[i] = v;
          }
        }
        const ops::Attrs attrs{{"kernel", w.kernel}, {"stride", w.stride}, {"padding", w.padding},
                          {"dilation", w.dilation}};
        ops::Attrs values_only = attrs;
        ASSERT_TRUE(ops::mark_unused_outputs(ops::OpId::max_pool2d, {true, false}, &values_only));
        const std::vector<ops::TensorMeta> metas = ops::infer_shape(ops::OpId::max_pool2d, {ops::meta_of(x)}, attrs);
        const Tensor want = ops::compute(ops::OpId::max_pool2d, {x}, attrs, metas)[0];
        const Tensor got = ops::compute(ops::OpId::max_pool2d, {x}, values_only, metas)[0];
        ASSERT_EQ(got.shape(), want.shape());
        const size_t bytes = size_t(want.numel()) * dtype_size(dt);
        EXPECT_EQ(std::memcmp(got.raw_data(), want.raw_data(), bytes), 0)
            << shape_str(shape) << " kernel " << shape_str(w.kernel) << " stride " << shape_str(w.stride)
            << " padding " << shape_str(w.padding) << " dilation " << shape_str(w.dilation) << " " << dtype_name(dt);
      }
    }
  }
  // Only max_pool2d with its indices unread is marked.
  ops::Attrs a;
  EXPECT_FALSE(ops::mark_unused_outputs(ops::OpId::max_pool2d, {true, true}, &a));
  EXPECT_FALSE(ops::mark_unused_outputs(ops::OpId::relu, {false}, &a));
  EXPECT_FALSE(a.has("indices_unused"));
}

TEST(MaxPool2d, Gradcheck) {
  for (const Window& w : kMaxWindows) {
    Tensor x = random_leaf({2, 2, 7, 6}, -1, 1, 1);
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& v) {
          return max_pool2d(v[0], w.kernel, w.stride, w.padding, w.dilation);
        },
        {x}))
        << shape_str(w.kernel);
  }
  // Non-contiguous input: a channels-last tensor permuted to (N, C, H, W).
  Tensor nhwc = random_leaf({2, 6, 5, 3}, -1, 1, 2);
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& v) { return max_pool2d(v[0].permute({0, 3, 1, 2}), {2, 2}, {1, 1}); },
      {nhwc}));
}

TEST(MaxPool2d, GradOpsGradcheck) {
  const Window& w = kMaxWindows[1];
  Tensor x = randn({2, 2, 7, 6}, DType::Float64);
  Tensor indices = max_pool_op(x, w)[1];
  Tensor dy = random_leaf(indices.shape(), -1, 1, 3), g = random_leaf(x.shape(), -1, 1, 4);
  EXPECT_TRUE(gradcheck(
      [&](const std::vector<Tensor>& v) {
        return ops::call1(ops::OpId::max_pool2d_grad, {v[0], indices}, {{"input_shape", x.shape()}});
      },
      {dy}));
}

TEST(MaxPool2d, SecondOrder) {
  Tensor x = random_leaf({1, 2, 6, 6}, -1, 1, 5);
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& v) {
        autograd::EnableGradGuard enable;
        Tensor a = v[0].requires_grad() ? v[0] : v[0].detach().set_requires_grad();
        Tensor y = sum(tanh(max_pool2d(a, {3, 3}, {2, 2}, {1, 1})));
        return autograd::grad({y}, {a}, {}, false, /*create_graph=*/true)[0];
      },
      {x}));
}

TEST(AvgPool2d, ForwardMatchesNaive) {
  const std::vector<Window> windows = {{{2, 2}, {2, 2}, {0, 0}, {1, 1}},
                                       {{3, 3}, {2, 2}, {1, 1}, {1, 1}},
                                       {{3, 2}, {1, 3}, {1, 1}, {1, 1}},
                                       // dilated: taps skip rows and columns; pads up to half
                                       // the dilated window (5 x 3), so edge windows keep 1 tap
                                       {{3, 3}, {1, 1}, {2, 1}, {2, 1}},
                                       {{2, 3}, {2, 1}, {1, 2}, {3, 2}},
                                       {{3, 1}, {1, 2}, {0, 0}, {4, 1}}};
  for (const Window& w : windows) {
    for (bool include_pad : {true, false}) {
      Tensor x = randn({2, 3, 9, 8}, DType::Float64);
      EXPECT_TRUE(all_close(avg_pool2d(x, w.kernel, w.stride, w.padding, include_pad, w.dilation),
                            naive_avg_pool(x, w, include_pad)))
          << shape_str(w.kernel) << " dilation " << shape_str(w.dilation) << " include_pad " << include_pad;
    }
  }
}

// Windows that all lie inside the image (no padding, no dilation) are summed row by row over the
// whole output row (kernels/pool.cpp): the same additions in the same order per output as one
// window at a time, so the float32 bits equal a plain loop's, also where rounding differs by order.
TEST(AvgPool2d, FullWindowsGiveTheBitsOfAPlainLoop) {
  struct Case { int64_t kh, kw, sh, sw; };
  for (const Case& c : {Case{2, 2, 2, 2}, Case{3, 3, 1, 1}, Case{3, 2, 2, 3}, Case{1, 4, 1, 4}}) {
    Tensor x = randn({2, 3, 11, 13}, DType::Float32) * 1000.0;
    Tensor y = avg_pool2d(x, {c.kh, c.kw}, {c.sh, c.sw}).contiguous();
    const int64_t H = 11, W = 13, Ho = (H - c.kh) / c.sh + 1, Wo = (W - c.kw) / c.sw + 1;
    ASSERT_EQ(y.shape(), (Shape{2, 3, Ho, Wo}));
    const Tensor xc = x.contiguous();
    const float* xp = xc.data<float>();
    const float* yp = y.data<float>();
    for (int64_t p = 0; p < 6; ++p) {
      for (int64_t oh = 0; oh < Ho; ++oh) {
        for (int64_t ow = 0; ow < Wo; ++ow) {
          float acc = 0;
          for (int64_t i = 0; i < c.kh; ++i) {
            for (int64_t j = 0; j < c.kw; ++j) acc += xp[(p * H + oh * c.sh + i) * W + ow * c.sw + j];
          }
          const float want = acc / float(c.kh * c.kw);
          ASSERT_EQ(std::memcmp(&want, &yp[(p * Ho + oh) * Wo + ow], sizeof want), 0)
              << "kernel " << c.kh << "x" << c.kw << " at " << p << "," << oh << "," << ow;
        }
      }
    }
  }
}

TEST(AvgPool2d, GradcheckAndGradOp) {
  for (bool include_pad : {true, false}) {
    Tensor x = random_leaf({2, 2, 7, 6}, -1, 1, 6);
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& v) {
          return avg_pool2d(v[0].slice(3, 0, 6), {3, 3}, {2, 1}, {1, 1}, include_pad);
        },
        {x}));
    Tensor dy = random_leaf({2, 2, 4, 6}, -1, 1, 7);
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& v) {
          return ops::call1(ops::OpId::avg_pool2d_grad, {v[0]},
                            {{"kernel", std::vector<int64_t>{3, 3}}, {"stride", std::vector<int64_t>{2, 1}},
                             {"padding", std::vector<int64_t>{1, 1}},
                             {"count_include_pad", int64_t(include_pad)},
                             {"input_shape", Shape{2, 2, 7, 6}}});
        },
        {dy}));
  }
}

TEST(AdaptiveAvgPool2d, ForwardMatchesNaive) {
  for (auto [ho, wo] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 2}, {7, 5}, {9, 11}}) {
    Tensor x = randn({2, 3, 7, 5}, DType::Float64);
    EXPECT_TRUE(all_close(adaptive_avg_pool2d(x, {ho, wo}), naive_adaptive(x, ho, wo)))
        << ho << "x" << wo;
  }
}

TEST(AdaptiveAvgPool2d, GradcheckAndGradOp) {
  Tensor x = random_leaf({2, 2, 7, 5}, -1, 1, 8);
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& v) { return adaptive_avg_pool2d(v[0], {3, 2}); },
                        {x}));
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& v) { return adaptive_avg_pool2d(v[0].transpose(2, 3), {4, 3}); },
      {x}));
  Tensor dy = random_leaf({2, 2, 3, 4}, -1, 1, 9);
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& v) {
        return ops::call1(ops::OpId::adaptive_avg_pool2d_grad, {v[0]}, {{"input_shape", Shape{2, 2, 7, 5}}});
      },
      {dy}));
}

TEST(Pool2d, Errors) {
  expect_error([] { max_pool2d(randn({3, 4, 4}), {2, 2}); }, "max_pool2d: input must be 4-D");
  expect_error([] { max_pool2d(randn({1, 1, 4, 4}), {2, 2}, {2, 2}, {2, 2}); },
               "max_pool2d: padding");
  expect_error([] { max_pool2d(randn({1, 1, 2, 2}), {3, 3}); }, "max_pool2d: the window");
  expect_error([] { max_pool2d(randn({1, 1, 4, 4}), {0, 2}); }, "max_pool2d: kernel must be in [1, ");
  expect_error([] { max_pool2d(arange(16).reshape({1, 1, 4, 4}), {2, 2}); }, "max_pool2d: input must be float");
  expect_error([] { avg_pool2d(randn({1, 1, 4, 4}), {2, 2, 2}); }, "avg_pool2d: kernel must have 2 values");
  expect_error([] { adaptive_avg_pool2d(randn({1, 1, 4, 4}), {0, 2}); },
               "adaptive_avg_pool2d: output_size must be in [1, ");
  expect_error(
      [] {
        ops::call1(ops::OpId::max_pool2d_grad, {randn({1, 1, 2, 2}), randn({1, 1, 2, 2})},
                   {{"input_shape", Shape{1, 1, 4, 4}}});
      },
      "max_pool2d_grad: indices must be int64");
}

TEST(AvgPool2d, DilatedGradcheckAndGradOp) {
  for (bool include_pad : {true, false}) {
    Tensor x = random_leaf({1, 2, 8, 7}, -1, 1, 10);
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& v) {
          return avg_pool2d(v[0].transpose(2, 3), {2, 3}, {2, 1}, {1, 2}, include_pad, {2, 2});
        },
        {x}));
    const ops::Attrs a{{"kernel", Shape{3, 2}}, {"stride", Shape{1, 2}}, {"padding", Shape{2, 1}},
                       {"dilation", Shape{2, 3}}, {"count_include_pad", int64_t(include_pad)},
                       {"input_shape", Shape{1, 2, 8, 7}}};
    Tensor dy = random_leaf({1, 2, 8, 3}, -1, 1, 11);
    EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) { return ops::call1(ops::OpId::avg_pool2d_grad, {v[0]}, a); },
                          {dy}));
  }
}

// A dilated window that leaves no room for an output, or pads beyond half of it: refused.
TEST(AvgPool2d, DilatedWindowErrors) {
  expect_error([] { avg_pool2d(randn({1, 1, 4, 9}), {2, 2}, 1, 0, true, {4, 1}); },
               {"avg_pool2d: the window (5, 2)", "(1, 1, 4, 9)"});
  expect_error([] { avg_pool2d(randn({1, 1, 9, 9}), {2, 2}, 1, {3, 0}, true, {2, 1}); },
               "avg_pool2d: padding");
}

}  // namespace
}  // namespace smelt
