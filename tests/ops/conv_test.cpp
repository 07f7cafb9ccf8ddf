// conv2d, conv2d_grad_input, conv2d_grad_weight: forward against a direct 7-loop reference,
// gradchecks over stride / padding / dilation / groups / non-contiguous inputs, second order,
// and error messages.
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

struct ConvCase {
  Shape x, w;
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups;
};

// y[n, o, i, j] = sum_{c, ki, kj} x[n, g Cg + c, i s - p + ki d, j s - p + kj d] w[o, c, ki, kj]
Tensor naive_conv2d(const Tensor& x, const Tensor& w, const ConvCase& cc) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t O = w.size(0), Cg = w.size(1), kH = w.size(2), kW = w.size(3);
  const int64_t Og = O / cc.groups;
  const int64_t Ho = (H + 2 * cc.padding[0] - cc.dilation[0] * (kH - 1) - 1) / cc.stride[0] + 1;
  const int64_t Wo = (W + 2 * cc.padding[1] - cc.dilation[1] * (kW - 1) - 1) / cc.stride[1] + 1;
  std::vector<double> xv = x.to_vector(), wv = w.to_vector();
  std::vector<double> y(size_t(N * O * Ho * Wo), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < Ho; ++i)
        for (int64_t j = 0; j < Wo; ++j) {
          double acc = 0;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t ki = 0; ki < kH; ++ki)
              for (int64_t kj = 0; kj < kW; ++kj) {
                int64_t ih = i * cc.stride[0] - cc.padding[0] + ki * cc.dilation[0];
                int64_t iw = j * cc.stride[1] - cc.padding[1] + kj * cc.dilation[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                int64_t ci = (o / Og) * Cg + c;
                acc += xv[((n * C + ci) * H + ih) * W + iw] * wv[((o * Cg + c) * kH + ki) * kW + kj];
              }
          y[((n * O + o) * Ho + i) * Wo + j] = acc;
        }
  return from_vector(y, {N, O, Ho, Wo}, DType::Float64).to(x.dtype());
}

Tensor conv(const Tensor& x, const Tensor& w, const ConvCase& cc) {
  return conv2d(x, w, Tensor(), cc.stride, cc.padding, cc.dilation, cc.groups);
}

const std::vector<ConvCase> kCases = {
    {{2, 3, 7, 6}, {4, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1},
    {{1, 3, 8, 9}, {2, 3, 3, 2}, {2, 3}, {1, 2}, {1, 1}, 1},
    {{2, 4, 9, 9}, {6, 2, 3, 3}, {1, 1}, {2, 1}, {2, 3}, 2},
    {{3, 4, 5, 5}, {4, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 4},   // depthwise
    {{2, 5, 4, 6}, {3, 5, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1},   // pointwise: no im2col
    {{2, 6, 6, 5}, {4, 3, 1, 1}, {2, 1}, {0, 0}, {1, 1}, 2},   // 1x1 strided, grouped
    {{4, 1, 12, 12}, {5, 1, 5, 5}, {1, 1}, {2, 2}, {1, 1}, 1}, // MNIST-style first layer
    // The depthwise kernels (kernels/conv_depthwise.h): each specialization and the generic loops.
    {{2, 3, 9, 8}, {3, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 3},   // 3x3 stride 1
    {{2, 3, 9, 8}, {3, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 3},   // 3x3 stride 2
    {{1, 2, 7, 19}, {2, 1, 5, 5}, {1, 1}, {2, 2}, {1, 1}, 2},  // 5x5 stride 1, rows past 16 lanes
    {{1, 2, 11, 10}, {2, 1, 5, 5}, {2, 2}, {2, 2}, {1, 1}, 2}, // 5x5 stride 2
    {{2, 3, 8, 7}, {3, 1, 3, 2}, {1, 2}, {2, 0}, {2, 1}, 3},   // generic: dilation, uneven
};

TEST(Conv2d, ForwardMatchesNaive) {
  for (const ConvCase& cc : kCases) {
    for (DType dt : {DType::Float32, DType::Float64}) {
      Tensor x = randn(cc.x, dt), w = randn(cc.w, dt);
      EXPECT_TRUE(all_close(conv(x, w, cc), naive_conv2d(x, w, cc), 1e-4, 1e-5))
          << shape_str(cc.x) << " * " << shape_str(cc.w);
    }
  }
}

TEST(Conv2d, ForwardLargerImagesAndBatches) {
  ConvCase cc{{3, 16, 20, 20}, {16, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1};
  Tensor x = randn(cc.x), w = randn(cc.w);
  EXPECT_TRUE(all_close(conv(x, w, cc), naive_conv2d(x, w, cc), 1e-4, 1e-4));
  cc.x = {1, 16, 30, 30};  // one image: threads go into the GEMM
  x = randn(cc.x);
  EXPECT_TRUE(all_close(conv(x, w, cc), naive_conv2d(x, w, cc), 1e-4, 1e-4));
}

TEST(Conv2d, BiasBroadcastsOverChannels) {
  ConvCase cc = kCases[0];
  Tensor x = randn(cc.x), w = randn(cc.w), b = randn({cc.w[0]});
  Tensor y = conv2d(x, w, b, cc.stride, cc.padding, cc.dilation, cc.groups);
  EXPECT_TRUE(all_close(y, naive_conv2d(x, w, cc) + b.reshape({1, cc.w[0], 1, 1}), 1e-4, 1e-5));
}

TEST(Conv2d, Gradcheck) {
  for (const ConvCase& cc : kCases) {
    Shape xs = cc.x;
    xs[0] = std::min<int64_t>(xs[0], 2);
    Tensor x = random_leaf(xs, -1, 1, 1), w = random_leaf(cc.w, -1, 1, 2);
    Tensor b = random_leaf({cc.w[0]}, -1, 1, 3);
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& v) {
          return conv2d(v[0], v[1], v[2], cc.stride, cc.padding, cc.dilation, cc.groups);
        },
        {x, w, b}))
        << shape_str(cc.x) << " * " << shape_str(cc.w);
  }
}

TEST(Conv2d, GradcheckNonContiguousInputs) {
  ConvCase cc = kCases[2];
  // x given as a permuted view, w as a strided slice.
  Tensor x_nhwc = random_leaf({2, 9, 9, 4}, -1, 1, 4);
  Tensor w_wide = random_leaf({6, 4, 3, 3}, -1, 1, 5);
  EXPECT_TRUE(gradcheck(
      [&](const std::vector<Tensor>& v) {
        return conv(v[0].permute({0, 3, 1, 2}), v[1].slice(1, 0, 4, 2), cc);
      },
      {x_nhwc, w_wide}));
}

// The gradient ops directly, both inputs each: exercises their own gradient rules.
TEST(Conv2d, GradOpsGradcheck) {
  for (const ConvCase& cc : {kCases[1], kCases[2], kCases[4]}) {
    ops::Attrs attrs{{"stride", cc.stride}, {"padding", cc.padding}, {"dilation", cc.dilation},
                     {"groups", cc.groups}};
    Tensor y_probe = conv(randn(cc.x, DType::Float64), randn(cc.w, DType::Float64), cc);
    Tensor dy = random_leaf(y_probe.shape(), -1, 1, 6), w = random_leaf(cc.w, -1, 1, 7);
    Tensor x = random_leaf(cc.x, -1, 1, 8);
    ops::Attrs in_attrs = attrs, w_attrs = attrs;
    in_attrs.set("input_shape", cc.x);
    w_attrs.set("weight_shape", cc.w);
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& v) {
          return ops::call1(ops::OpId::conv2d_grad_input, {v[0], v[1]}, in_attrs);
        },
        {dy, w}))
        << shape_str(cc.x);
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& v) {
          return ops::call1(ops::OpId::conv2d_grad_weight, {v[0], v[1]}, w_attrs);
        },
        {x, dy}))
        << shape_str(cc.x);
  }
}

TEST(Conv2d, SecondOrder) {
  ConvCase cc = kCases[1];
  Tensor x = random_leaf(cc.x, -1, 1, 9), w = random_leaf(cc.w, -1, 1, 10);
  // d/dx and d/dw of sum(tanh(conv(x, w))), differentiated again.
  for (int wrt = 0; wrt < 2; ++wrt) {
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& v) {
          autograd::EnableGradGuard enable;
          std::vector<Tensor> in = v;
          if (!in[wrt].requires_grad()) in[wrt] = in[wrt].detach().set_requires_grad();
          Tensor y = sum(tanh(conv(in[0], in[1], cc)));
          return autograd::grad({y}, {in[wrt]}, {}, false, /*create_graph=*/true)[0];
        },
        {x, w}))
        << "wrt " << wrt;
  }
}

// Both gradients of conv2d at once, by the same 7 loops as the forward reference.
void naive_conv2d_grads(const Tensor& x, const Tensor& w, const Tensor& dy, const ConvCase& cc,
                        Tensor* dx_out, Tensor* dw_out) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t O = w.size(0), Cg = w.size(1), kH = w.size(2), kW = w.size(3);
  const int64_t Og = O / cc.groups, Ho = dy.size(2), Wo = dy.size(3);
  std::vector<double> xv = x.to_vector(), wv = w.to_vector(), gv = dy.to_vector();
  std::vector<double> dx(xv.size(), 0.0), dw(wv.size(), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < Ho; ++i)
        for (int64_t j = 0; j < Wo; ++j) {
          const double g = gv[((n * O + o) * Ho + i) * Wo + j];
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t ki = 0; ki < kH; ++ki)
              for (int64_t kj = 0; kj < kW; ++kj) {
                int64_t ih = i * cc.stride[0] - cc.padding[0] + ki * cc.dilation[0];
                int64_t iw = j * cc.stride[1] - cc.padding[1] + kj * cc.dilation[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const size_t xi = size_t(((n * C + (o / Og) * Cg + c) * H + ih) * W + iw);
                const size_t wi = size_t(((o * Cg + c) * kH + ki) * kW + kj);
                dx[xi] += g * wv[wi];
                dw[wi] += g * xv[xi];
              }
        }
  *dx_out = from_vector(dx, x.shape(), DType::Float64).to(x.dtype());
  *dw_out = from_vector(dw, w.shape(), DType::Float64).to(x.dtype());
}

// Problems big enough for the threaded paths (images in parallel, per-thread weight partials).
TEST(Conv2d, GradOpsMatchNaiveOnLargerProblems) {
  for (const ConvCase& cc : {ConvCase{{4, 16, 20, 20}, {16, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2},
                             ConvCase{{1, 16, 24, 24}, {16, 16, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1},
                             ConvCase{{6, 32, 16, 16}, {32, 32, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1}}) {
    Tensor x = randn(cc.x), w = randn(cc.w);
    Tensor y = conv(x, w, cc);
    Tensor dy = randn(y.shape());
    Tensor dx_ref, dw_ref;
    naive_conv2d_grads(x, w, dy, cc, &dx_ref, &dw_ref);
    ops::Attrs attrs{{"stride", cc.stride}, {"padding", cc.padding}, {"dilation", cc.dilation},
                     {"groups", cc.groups}};
    ops::Attrs in_attrs = attrs, w_attrs = attrs;
    in_attrs.set("input_shape", cc.x);
    w_attrs.set("weight_shape", cc.w);
    Tensor dx = ops::call1(ops::OpId::conv2d_grad_input, {dy, w}, in_attrs);
    Tensor dw = ops::call1(ops::OpId::conv2d_grad_weight, {x, dy}, w_attrs);
    EXPECT_TRUE(all_close(dx, dx_ref, 1e-4, 1e-4)) << shape_str(cc.x);
    EXPECT_TRUE(all_close(dw, dw_ref, 1e-4, 1e-3)) << shape_str(cc.x);
  }
}

TEST(Conv2d, Errors) {
  expect_error([] { conv2d(randn({1, 3, 5, 5}), randn({2, 4, 3, 3})); }, "conv2d: weight");
  expect_error([] { conv2d(randn({3, 5, 5}), randn({2, 3, 3, 3})); }, "conv2d: input must be 4-D");
  expect_error([] { conv2d(randn({1, 3, 5, 5}), randn({2, 1, 3, 3}), Tensor(), {1, 1}, {0, 0}, {1, 1}, 3); },
               "conv2d: groups = 3 must divide");
  expect_error([] { conv2d(randn({1, 3, 2, 2}), randn({2, 3, 3, 3})); }, "conv2d: the dilated kernel");
  expect_error([] { conv2d(randn({1, 3, 2, 2}), randn({2, 3, 3, 3}), Tensor(), {2, 2}); },
               "conv2d: the dilated kernel");
  expect_error([] { conv2d(randn({1, 3, 5, 5}), randn({2, 3, 3, 3}), Tensor(), {0, 1}); },
               "conv2d: stride must be in [1, ");
  expect_error([] { conv2d(randn({1, 3, 5, 5}), randn({2, 3, 3, 3}), Tensor(), {1, 1, 1}); },
               "conv2d: stride must have 2 values");  // one number ({1}) means both dims
  expect_error([] { conv2d(randn({1, 3, 5, 5}), randn({2, 3, 3, 3}), randn({3})); }, "conv2d: bias");
  expect_error([] { conv2d(randn({1, 3, 5, 5}), randn({2, 3, 3, 3}, DType::Float64)); },
               "conv2d: operands have different dtypes");
  expect_error(
      [] {
        ops::call1(ops::OpId::conv2d_grad_input, {randn({1, 2, 4, 4}), randn({2, 3, 3, 3})},
                   {{"stride", std::vector<int64_t>{1, 1}}, {"padding", std::vector<int64_t>{0, 0}},
                    {"dilation", std::vector<int64_t>{1, 1}}, {"groups", int64_t(1)},
                    {"input_shape", std::vector<int64_t>{1, 3, 5, 5}}});
      },
      "conv2d_grad_input: output gradient");
}

}  // namespace
}  // namespace smelt
