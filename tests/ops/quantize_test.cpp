// The quantized ops (smelt/quantize.h) against naive references written here from ONNX's
// definitions: exact bytes, per-tensor and per-axis parameters, both signednesses, conv
// geometry (asymmetric padding, stride, dilation, groups), broadcast batches, special values,
// empty tensors, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "ops/dispatch.h"
#include "smelt/creation.h"
#include "smelt/ops.h"
#include "smelt/quantize.h"
#include "support/check.h"
#include "support/errors.h"

namespace smelt {
namespace {

using testing::expect_error;

std::mt19937 rng(20261128);

Tensor random_bytes(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::uniform_int_distribution<int> d(0, 255);
  auto* p = static_cast<uint8_t*>(t.raw_data());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = uint8_t(d(rng));
  return t;
}

int32_t byte_value(const Tensor& t, int64_t i) {
  return t.dtype() == DType::UInt8 ? int32_t(t.data<uint8_t>()[i]) : int32_t(t.data<int8_t>()[i]);
}

Tensor f32(const std::vector<float>& v, const Shape& shape) { return from_vector(v, shape); }

Tensor scalar_zp(int32_t v, DType dtype) { return full({}, double(v), dtype); }

// round half to even, saturated to the dtype, NaN -> zero point
int32_t quantize_ref(float x, float scale, int32_t zp, DType dtype) {
  const int32_t lo = dtype == DType::UInt8 ? 0 : -128, hi = dtype == DType::UInt8 ? 255 : 127;
  if (std::isnan(x)) return zp;
  const double v = std::nearbyint(double(x / scale)) + zp;
  return int32_t(std::min<double>(std::max<double>(v, lo), hi));
}

TEST(Quantize, PerTensorMatchesTheDefinitionOnSpecialValues) {
  const std::vector<float> xs = {0.0f, -0.0f, 0.25f, 0.75f, -0.25f, 1.25f, 2.5f, -2.5f, 1e-40f,
                                 -1e-40f, INFINITY, -INFINITY, NAN, 1e30f, -1e30f, 12.7f, -12.8f, 3.0f};
  for (DType dtype : {DType::UInt8, DType::Int8}) {
    for (int32_t zp : dtype == DType::UInt8 ? std::vector<int32_t>{0, 128, 255} : std::vector<int32_t>{-128, 0, 5}) {
      const float scale = 0.5f;
      const Tensor q = quantize_linear(f32(xs, {int64_t(xs.size())}), full({}, scale, DType::Float32),
                                       scalar_zp(zp, dtype));
      ASSERT_EQ(q.dtype(), dtype);
      for (size_t i = 0; i < xs.size(); ++i) {
        EXPECT_EQ(byte_value(q, int64_t(i)), quantize_ref(xs[i], scale, zp, dtype))
            << "x=" << xs[i] << " zp=" << zp << " " << dtype_name(dtype);
      }
      // dequantize: (q - zp) * scale
      const Tensor back = dequantize_linear(q, full({}, scale, DType::Float32), scalar_zp(zp, dtype));
      for (size_t i = 0; i < xs.size(); ++i) {
        EXPECT_EQ(back.data<float>()[i], float(byte_value(q, int64_t(i)) - zp) * scale);
      }
    }
  }
}

TEST(Quantize, PerAxisOnEveryAxisAndStridedInputs) {
  const Tensor x = uniform({3, 4, 5}, -3, 3, DType::Float32).permute({2, 0, 1});  // (5, 3, 4), strided
  for (int64_t axis : {0, 1, 2, -1}) {
    const int64_t a = axis < 0 ? axis + 3 : axis;
    const int64_t c = x.size(a);
    std::vector<float> scales;
    std::vector<int8_t> zps;
    for (int64_t i = 0; i < c; ++i) {
      scales.push_back(0.01f + 0.02f * float(i));
      zps.push_back(int8_t(i * 7 - 10));
    }
    const Tensor s = from_vector(scales, {c});
    Tensor z = empty({c}, DType::Int8);
    for (int64_t i = 0; i < c; ++i) z.data<int8_t>()[i] = zps[size_t(i)];
    const Tensor q = quantize_linear(x, s, z, axis);
    const Tensor xc = contiguous(x);
    const Tensor back = dequantize_linear(q, s, z, axis);
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t idx[3] = {i / 12, (i / 4) % 3, i % 4};
      const int64_t ch = idx[a];
      const int32_t want = quantize_ref(xc.data<float>()[i], scales[size_t(ch)], zps[size_t(ch)], DType::Int8);
      ASSERT_EQ(byte_value(q, i), want) << "axis " << axis << " at " << i;
      ASSERT_EQ(back.data<float>()[i], float(want - zps[size_t(ch)]) * scales[size_t(ch)]);
    }
  }
}

// y[m][n] = requantize(sum_k (a - za)(b - zb)) by the definition, in int64 and float32 as the
// kernels state it.
int64_t acc_ref(const Tensor& a, const Tensor& b, int64_t M, int64_t K, int64_t N, int64_t ia, int64_t ib,
                int64_t m, int64_t n, const std::vector<int32_t>& za, const std::vector<int32_t>& zb) {
  int64_t acc = 0;
  for (int64_t k = 0; k < K; ++k) {
    acc += int64_t(byte_value(a, ia * M * K + m * K + k) - za[za.size() == 1 ? 0 : size_t(m)]) *
           (byte_value(b, ib * K * N + k * N + n) - zb[zb.size() == 1 ? 0 : size_t(n)]);
  }
  return acc;
}

std::vector<int32_t> values_of(const Tensor& zp) {
  std::vector<int32_t> v;
  for (int64_t i = 0; i < zp.numel(); ++i) v.push_back(byte_value(zp, i));
  return v;
}

TEST(Quantize, QLinearMatMulAndMatMulIntegerMatchTheDefinition) {
  struct Case {
    Shape a, b;
    DType da, db, dy;
    bool per_row, per_column;
  };
  const std::vector<Case> cases = {
      {{5, 7}, {7, 9}, DType::UInt8, DType::Int8, DType::UInt8, false, false},
      {{2, 5, 33}, {33, 17}, DType::Int8, DType::UInt8, DType::Int8, true, true},
      {{3, 1, 4, 6}, {2, 6, 5}, DType::UInt8, DType::UInt8, DType::UInt8, false, true},  // broadcast batch
      {{0, 4}, {4, 3}, DType::UInt8, DType::Int8, DType::UInt8, false, false},           // empty
      {{2, 0}, {0, 3}, DType::UInt8, DType::Int8, DType::Int8, false, false},            // K = 0
  };
  for (const Case& c : cases) {
    const Tensor a = random_bytes(c.a, c.da), b = random_bytes(c.b, c.db);
    const int64_t M = c.a[c.a.size() - 2], K = c.a.back(), N = c.b.back();
    const Tensor za = c.per_row ? random_bytes({M}, c.da) : random_bytes({}, c.da);
    const Tensor zb = c.per_column ? random_bytes({N}, c.db) : random_bytes({}, c.db);
    const Tensor sa = c.per_row ? uniform({M}, 0.01, 0.1, DType::Float32) : full({}, 0.03, DType::Float32);
    const Tensor sb = c.per_column ? uniform({N}, 0.01, 0.1, DType::Float32) : full({}, 0.02, DType::Float32);
    const Tensor sy = full({}, 0.4, DType::Float32);
    const Tensor zy = random_bytes({}, c.dy);
    const Tensor y = qlinear_matmul({a, sa, za}, {b, sb, zb}, sy, zy);
    const Tensor bias = cast(randint(-20000, 20000, {N}), DType::Int32);
    const Tensor yb = qlinear_matmul({a, sa, za}, {b, sb, zb}, sy, zy, bias);  // a linear layer's
    const Tensor acc = matmul_integer(a, b, za, zb);
    const Shape want_shape = matmul(zeros(c.a), zeros(c.b)).shape();
    ASSERT_EQ(y.shape(), want_shape);
    ASSERT_EQ(acc.shape(), want_shape);
    ASSERT_EQ(acc.dtype(), DType::Int32);
    const std::vector<int32_t> zav = values_of(za), zbv = values_of(zb);
    const Tensor a3 = contiguous(expand(a, [&] { Shape s = want_shape; s[s.size() - 1] = K; return s; }()));
    const Tensor b3 = contiguous(expand(b, [&] { Shape s = want_shape; s[s.size() - 2] = K; return s; }()));
    const int64_t batches = want_shape.size() > 2 ? y.numel() / std::max<int64_t>(M * N, 1) : 1;
    for (int64_t i = 0; i < batches; ++i) {
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
          const int64_t want = acc_ref(a3, b3, M, K, N, i, i, m, n, zav, zbv);
          const int64_t at = (i * M + m) * N + n;
          ASSERT_EQ(acc.data<int32_t>()[at], want);
          const float sam = sa.numel() == 1 ? sa.data<float>()[0] : sa.data<float>()[m];
          const float sbn = sb.numel() == 1 ? sb.data<float>()[0] : sb.data<float>()[n];
          // the kernels' multiplier: (sa * sb) / sy per tensor, sa[m] * (sb / sy) per row
          const float mult = sa.numel() == 1 ? sam * sbn / 0.4f : sam * (sbn / 0.4f);
          const int32_t zyv = byte_value(zy, 0);
          const int32_t lo = c.dy == DType::UInt8 ? 0 : -128, hi = c.dy == DType::UInt8 ? 255 : 127;
          const double r = std::nearbyint(double(float(int32_t(want)) * mult)) + zyv;
          ASSERT_EQ(byte_value(y, at), int32_t(std::clamp<double>(r, lo, hi))) << "at " << at;
          const int32_t with_bias = int32_t(want) + bias.data<int32_t>()[n];
          const double rb = std::nearbyint(double(float(with_bias) * mult)) + zyv;
          ASSERT_EQ(byte_value(yb, at), int32_t(std::clamp<double>(rb, lo, hi))) << "bias, at " << at;
        }
      }
    }
  }
}

// qlinear_conv2d and conv2d_integer against conv2d in float64 over (x - zx) and (w - zw).
struct QConvCase {
  Shape x, w;
  QConvOptions o;
  DType dx, dw;
  bool per_channel;
  bool symmetric_weights = false;  // weight zero points 0 (as smelt quantize writes them)
};

QConvOptions conv_options(std::vector<int64_t> s, std::vector<int64_t> p, std::vector<int64_t> d, int64_t g) {
  QConvOptions o;
  o.stride = s;
  o.padding = p;
  o.dilation = d;
  o.groups = g;
  return o;
}

void check_conv(const QConvCase& c) {
  const Tensor x = random_bytes(c.x, c.dx), w = random_bytes(c.w, c.dw);
  const int64_t O = c.w[0];
  const Tensor zx = random_bytes({}, c.dx);
  Tensor zw = c.per_channel ? random_bytes({O}, c.dw) : random_bytes({}, c.dw);
  if (c.symmetric_weights) zw = zeros(zw.shape(), c.dw);
  const Tensor sx = full({}, 0.05, DType::Float32), sy = full({}, 0.7, DType::Float32);
  const Tensor sw = c.per_channel ? uniform({O}, 0.005, 0.05, DType::Float32) : full({}, 0.02, DType::Float32);
  Tensor bias = empty({O}, DType::Int32);
  // biases at int32's ends too: the accumulator wraps as int32 (and must, with no undefined
  // signed overflow on any path)
  for (int64_t o = 0; o < O; ++o) {
    bias.data<int32_t>()[o] = o % 5 == 3   ? std::numeric_limits<int32_t>::max() - int32_t(o)
                              : o % 5 == 4 ? std::numeric_limits<int32_t>::min() + int32_t(o)
                                           : int32_t(o * 97 - 150);
  }
  const Tensor zy = scalar_zp(c.dx == DType::UInt8 ? 17 : -3, c.dx);
  const Tensor y = qlinear_conv2d({x, sx, zx}, {w, sw, zw}, sy, zy, bias, c.o);
  const Tensor acc = conv2d_integer(x, w, zx, zw, c.o);
  // the reference: conv2d in float64 over (x - zx) and (w - zw), exact for these sizes
  Tensor xf = cast(x, DType::Float64) - double(byte_value(zx, 0));
  const Tensor zwf = reshape(cast(zw, DType::Float64), {zw.numel() == 1 ? 1 : O, 1, 1, 1});
  const Tensor wf = cast(w, DType::Float64) - zwf;
  const std::vector<int64_t>& p = c.o.padding;
  // asymmetric padding by zeros (the zero point, after the shift)
  xf = cat({zeros({xf.size(0), xf.size(1), p[0], xf.size(3)}, DType::Float64), xf,
            zeros({xf.size(0), xf.size(1), p[2], xf.size(3)}, DType::Float64)}, 2);
  xf = cat({zeros({xf.size(0), xf.size(1), xf.size(2), p[1]}, DType::Float64), xf,
            zeros({xf.size(0), xf.size(1), xf.size(2), p[3]}, DType::Float64)}, 3);
  const Tensor ref = conv2d(xf, wf, Tensor(), {c.o.stride[0], c.o.stride[1]}, {0, 0},
                            {c.o.dilation[0], c.o.dilation[1]}, c.o.groups);
  ASSERT_EQ(acc.shape(), ref.shape());
  ASSERT_EQ(y.shape(), ref.shape());
  const int64_t P = ref.numel() / std::max<int64_t>(ref.size(0) * O, 1);
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const int64_t want = int64_t(ref.data<double>()[i]);
    ASSERT_EQ(acc.data<int32_t>()[i], want) << "at " << i;
    const int64_t o = (i / P) % O;
    const float mult = 0.05f * sw.data<float>()[sw.numel() == 1 ? 0 : o] / 0.7f;
    const int32_t lo = c.dx == DType::UInt8 ? 0 : -128, hi = c.dx == DType::UInt8 ? 255 : 127;
    const double r = std::nearbyint(double(float(int32_t(want + bias.data<int32_t>()[o])) * mult)) +
                     byte_value(zy, 0);
    ASSERT_EQ(byte_value(y, i), int32_t(std::clamp<double>(r, lo, hi))) << "at " << i;
  }
}

TEST(Quantize, ConvolutionsMatchTheDefinitionOverTheirGeometry) {
  const std::vector<QConvCase> cases = {
      {{2, 3, 7, 6}, {4, 3, 3, 3}, conv_options({1, 1}, {1, 1, 1, 1}, {1, 1}, 1), DType::UInt8, DType::Int8, false},
      {{1, 4, 9, 8}, {6, 2, 3, 2}, conv_options({2, 1}, {0, 2, 1, 0}, {1, 2}, 2), DType::Int8, DType::UInt8, true},
      {{1, 6, 5, 5}, {6, 1, 3, 3}, conv_options({1, 2}, {2, 1, 0, 1}, {2, 1}, 6), DType::UInt8, DType::Int8, true},
      {{1, 2, 2, 2}, {3, 2, 1, 1}, conv_options({1, 1}, {0, 0, 0, 0}, {1, 1}, 1), DType::UInt8, DType::Int8, true},
      {{0, 2, 4, 4}, {3, 2, 3, 3}, conv_options({1, 1}, {1, 1, 1, 1}, {1, 1}, 1), DType::UInt8, DType::Int8, false},
      // shapes that fill whole register tiles and panels (and leave tails): every path of the
      // weights-left GEMM and of the phase split
      {{2, 40, 19, 37}, {36, 40, 3, 3}, conv_options({1, 1}, {1, 1, 1, 1}, {1, 1}, 1), DType::UInt8, DType::Int8, true},
      {{1, 33, 21, 40}, {17, 33, 1, 1}, conv_options({1, 1}, {0, 0, 0, 0}, {1, 1}, 1), DType::Int8, DType::Int8, false},
      {{1, 16, 23, 45}, {24, 16, 5, 5}, conv_options({2, 3}, {1, 0, 2, 1}, {1, 1}, 1), DType::UInt8, DType::UInt8, true},
      {{2, 12, 30, 34}, {20, 6, 3, 3}, conv_options({1, 1}, {2, 2, 2, 2}, {2, 2}, 2), DType::Int8, DType::Int8, true},
      {{1, 3, 47, 45}, {64, 3, 7, 7}, conv_options({2, 2}, {3, 3, 3, 3}, {1, 1}, 1), DType::UInt8, DType::Int8, true},
      {{1, 8, 33, 35}, {16, 1, 3, 3}, conv_options({2, 1}, {1, 1, 0, 1}, {1, 2}, 8), DType::UInt8, DType::Int8, true},
      {{2, 24, 9, 70}, {24, 1, 3, 3}, conv_options({1, 1}, {1, 1, 1, 1}, {1, 1}, 24), DType::Int8, DType::UInt8, false},
  };
  for (const QConvCase& c : cases) check_conv(c);
}

// Convolutions with weight zero points 0 and enough channels, which CPUs with AMX run straight
// from 4-channel-interleaved frames (kernels/qconv_amx.cpp): channels a whole block of 64 or padded
// to one (48, 100), rows of output channels past a tile of 32, 2x1 to 5x5 kernels, strides,
// dilation, asymmetric padding, both activation dtypes, two images; a 1x1 kernel, 130 channels
// (padded past a third) and int8 weights with a zero point take the GEMM path and must agree too.
TEST(Quantize, ConvolutionsWithSymmetricWeightsOverManyChannelsMatchTheDefinition) {
  const std::vector<QConvCase> cases = {
      {{2, 64, 9, 11}, {33, 64, 3, 3}, conv_options({1, 1}, {1, 1, 1, 1}, {1, 1}, 1), DType::UInt8, DType::Int8, true, true},
      {{1, 48, 12, 10}, {70, 48, 2, 1}, conv_options({1, 1}, {0, 1, 0, 0}, {1, 1}, 1), DType::Int8, DType::Int8, true, true},
      {{1, 64, 5, 6}, {20, 64, 1, 1}, conv_options({1, 1}, {0, 0, 0, 0}, {1, 1}, 1), DType::UInt8, DType::Int8, true, true},
      {{1, 100, 13, 17}, {8, 100, 5, 5}, conv_options({2, 2}, {2, 1, 2, 3}, {1, 1}, 1), DType::UInt8, DType::Int8, false, true},
      // 50 channels: a last group of 4 with two channels (its other two padded with zero weights)
      {{1, 50, 9, 9}, {33, 50, 3, 3}, conv_options({1, 1}, {1, 1, 1, 1}, {1, 1}, 1), DType::Int8, DType::Int8, true, true},
      {{1, 64, 15, 15}, {40, 64, 3, 3}, conv_options({1, 2}, {2, 2, 2, 2}, {2, 2}, 1), DType::Int8, DType::Int8, true, true},
      {{1, 128, 7, 7}, {65, 128, 3, 3}, conv_options({1, 1}, {1, 1, 1, 1}, {1, 1}, 1), DType::UInt8, DType::Int8, true, true},
      {{1, 130, 6, 6}, {9, 130, 3, 3}, conv_options({1, 1}, {1, 1, 1, 1}, {1, 1}, 1), DType::UInt8, DType::Int8, true, true},
      {{1, 64, 8, 8}, {16, 64, 3, 3}, conv_options({1, 1}, {1, 1, 1, 1}, {1, 1}, 1), DType::UInt8, DType::Int8, true, false},
  };
  for (const QConvCase& c : cases) check_conv(c);
}

// Depthwise convolutions with weight zero points 0, the common case, which CPUs with VNNI and
// VBMI run from the image through byte permutations (kernels/qconv_depthwise.cpp): strides 1-3,
// dilation, 1 to 8 taps across (one or two groups of 4), rows of one to several 16-output chunks,
// padding wider than the image, both activation dtypes, a depth multiplier; and 9 taps across
// (past the permutation's reach).
TEST(Quantize, DepthwiseConvolutionsWithSymmetricWeightsMatchTheDefinition) {
  const std::vector<QConvCase> cases = {
      {{1, 4, 12, 40}, {4, 1, 3, 3}, conv_options({1, 1}, {1, 1, 1, 1}, {1, 1}, 4), DType::UInt8, DType::Int8, true, true},
      {{2, 3, 13, 37}, {3, 1, 3, 3}, conv_options({2, 2}, {1, 1, 1, 1}, {1, 1}, 3), DType::Int8, DType::Int8, true, true},
      {{1, 5, 9, 50}, {5, 1, 5, 5}, conv_options({1, 3}, {2, 2, 2, 2}, {1, 1}, 5), DType::UInt8, DType::Int8, false, true},
      {{1, 2, 11, 29}, {4, 1, 3, 8}, conv_options({1, 1}, {0, 3, 1, 4}, {2, 1}, 2), DType::UInt8, DType::Int8, true, true},
      {{1, 3, 10, 33}, {3, 1, 2, 3}, conv_options({1, 2}, {1, 0, 0, 1}, {1, 3}, 3), DType::Int8, DType::Int8, false, true},
      {{1, 2, 1, 1}, {2, 1, 3, 3}, conv_options({1, 1}, {2, 2, 2, 2}, {1, 1}, 2), DType::UInt8, DType::Int8, true, true},
      {{1, 2, 6, 7}, {2, 1, 1, 1}, conv_options({1, 1}, {0, 0, 0, 0}, {1, 1}, 2), DType::UInt8, DType::Int8, true, true},
      {{1, 2, 8, 30}, {2, 1, 3, 9}, conv_options({1, 1}, {1, 4, 1, 4}, {1, 1}, 2), DType::UInt8, DType::Int8, true, true},
      {{1, 3, 7, 7}, {3, 1, 3, 3}, conv_options({1, 1}, {1, 1, 1, 1}, {1, 1}, 3), DType::UInt8, DType::UInt8, true, true},
      // wide outputs, and (70 x 67, stride 2) more than kFlatOutputs of them: the row layout
      {{1, 2, 33, 40}, {2, 1, 3, 3}, conv_options({1, 1}, {1, 1, 1, 1}, {1, 1}, 2), DType::UInt8, DType::Int8, true, true},
      {{2, 2, 70, 67}, {4, 1, 3, 3}, conv_options({2, 2}, {0, 1, 1, 0}, {1, 1}, 2), DType::Int8, DType::Int8, true, true},
  };
  for (const QConvCase& c : cases) check_conv(c);
}

// Depthwise convolutions with narrow outputs (kernels/qconv_windows.cpp, flat windows: where
// 16-output chunks of a row would leave a quarter of the lanes idle): 16 consecutive outputs of
// the flattened channel at a time, across row ends, from a window of 64 bytes or, where the rows
// a chunk reads lie further apart, 128 (a row stride of 2 over 32 columns, one channel alone
// and a block of four plus one); 5x5 and 8 taps
// across (two groups), dilation, padding on one side only, an image smaller than the kernel,
// both activation dtypes, two images; and the cases the row kernel keeps: a window past 128 bytes (row strides of 4 and
// 3), more than kFlatOutputs outputs.
TEST(Quantize, DepthwiseConvolutionsWithNarrowOutputsMatchTheDefinition) {
  const std::vector<QConvCase> cases = {
      {{1, 5, 7, 7}, {5, 1, 3, 3}, conv_options({1, 1}, {1, 1, 1, 1}, {1, 1}, 5), DType::UInt8, DType::Int8, true, true},
      {{2, 4, 14, 14}, {4, 1, 3, 3}, conv_options({2, 2}, {1, 1, 1, 1}, {1, 1}, 4), DType::Int8, DType::Int8, true, true},
      {{1, 3, 10, 10}, {3, 1, 5, 5}, conv_options({1, 1}, {2, 2, 2, 2}, {1, 1}, 3), DType::Int8, DType::Int8, true, true},
      {{1, 2, 9, 11}, {4, 1, 3, 8}, conv_options({1, 1}, {1, 3, 1, 4}, {2, 1}, 2), DType::UInt8, DType::Int8, true, true},
      {{1, 2, 8, 9}, {2, 1, 3, 3}, conv_options({1, 1}, {2, 2, 2, 2}, {2, 2}, 2), DType::UInt8, DType::Int8, true, true},
      {{1, 3, 2, 3}, {3, 1, 5, 5}, conv_options({1, 1}, {2, 2, 2, 2}, {1, 1}, 3), DType::Int8, DType::Int8, true, true},
      {{1, 2, 20, 32}, {2, 1, 3, 3}, conv_options({2, 4}, {1, 1, 1, 1}, {1, 1}, 2), DType::Int8, DType::Int8, true, true},
      {{1, 5, 20, 32}, {5, 1, 3, 3}, conv_options({2, 4}, {1, 0, 1, 1}, {1, 1}, 5), DType::UInt8, DType::Int8, true, true},
      {{1, 2, 32, 8}, {2, 1, 3, 3}, conv_options({1, 1}, {0, 1, 1, 0}, {1, 1}, 2), DType::UInt8, DType::Int8, false, true},
      {{1, 1, 40, 30}, {1, 1, 3, 3}, conv_options({1, 3}, {1, 1, 1, 1}, {1, 1}, 1), DType::UInt8, DType::Int8, true, true},
      {{1, 3, 28, 28}, {3, 1, 3, 3}, conv_options({4, 4}, {0, 0, 1, 1}, {1, 1}, 3), DType::UInt8, DType::Int8, true, true},
      {{1, 2, 12, 30}, {2, 1, 3, 3}, conv_options({3, 3}, {1, 1, 1, 1}, {1, 1}, 2), DType::Int8, DType::Int8, true, true},
      {{1, 1, 130, 8}, {1, 1, 3, 3}, conv_options({1, 1}, {1, 1, 1, 1}, {1, 1}, 1), DType::UInt8, DType::Int8, true, true},
  };
  for (const QConvCase& c : cases) check_conv(c);
}

TEST(Quantize, BadInputsAreClearErrors) {
  const Tensor x = uniform({2, 3}, -1, 1, DType::Float32);
  const Tensor s = full({}, 0.1, DType::Float32), z = zeros({}, DType::UInt8);
  expect_error([&] { quantize_linear(x, full({}, 0.0, DType::Float32), z); }, "positive finite");
  expect_error([&] { quantize_linear(x, full({}, NAN, DType::Float32), z); }, "positive finite");
  expect_error([&] { quantize_linear(x, full({}, -1.0, DType::Float32), z); }, "positive finite");
  expect_error([&] { quantize_linear(x, s, zeros({}, DType::Int64)); }, "uint8 or int8");
  expect_error([&] { quantize_linear(x, full({4}, 0.1, DType::Float32), zeros({4}, DType::UInt8), 1); }, "valid");
  expect_error([&] { quantize_linear(x, full({3}, 0.1, DType::Float32), zeros({3}, DType::UInt8), 5); }, "axis");
  expect_error([&] { dequantize_linear(zeros({2}, DType::Int32), s, full({}, 1.0, DType::Int32)); }, "zero point of 0");
  const Tensor q = zeros({2, 3}, DType::UInt8), w = zeros({4, 5}, DType::Int8);
  expect_error([&] { qlinear_matmul({q, s, z}, {w, s, zeros({}, DType::Int8)}, s, z); }, "inner dims");
  const Tensor w34 = zeros({3, 4}, DType::Int8), z8 = zeros({}, DType::Int8);
  expect_error([&] { qlinear_matmul({q, s, z}, {w34, s, z8}, s, z, zeros({3}, DType::Int32)); },
               {"bias (3,)", "valid: (4) or (0)"});
  expect_error([&] { qlinear_matmul({q, s, z}, {w34, s, z8}, s, z, zeros({4}, DType::Int64)); }, "bias");
  // each scale finite, the requantization multiplier not (1e20 * 1e20 / 1)
  const Tensor huge = full({}, 1e20, DType::Float32);
  expect_error(
      [&] {
        qlinear_matmul({q, huge, z}, {zeros({3, 4}, DType::Int8), huge, zeros({}, DType::Int8)},
                       full({}, 1.0, DType::Float32), z);
      },
      "requantization multiplier");
  expect_error([&] { qlinear_matmul({q, s, zeros({}, DType::Int8)}, {q.t(), s, z}, s, z); }, "zero point");
  const Tensor img = zeros({1, 3, 4, 4}, DType::UInt8), k = zeros({2, 2, 3, 3}, DType::Int8);
  expect_error([&] { conv2d_integer(img, k, z, zeros({}, DType::Int8)); }, "groups");
  QConvOptions bad;
  bad.padding = {1, 1};
  expect_error([&] { conv2d_integer(img, zeros({2, 3, 3, 3}, DType::Int8), z, zeros({}, DType::Int8), bad); },
               "padding");
}

}  // namespace
}  // namespace smelt

namespace smelt {
namespace {

// The packed weights kept between calls (kernels/quantize.cpp) for weights marked constant, as a
// plan marks its constants (ops/constant_weight.h), follow in-place smelt writes and views: a
// weight changed in place, or another view of the same storage, gives what a fresh weight does.
TEST(Quantize, KeptPackedWeightsFollowInPlaceWritesAndViews) {
  const Tensor s = full({}, 0.05, DType::Float32), zu = full({}, 9.0, DType::UInt8), zi = zeros({}, DType::Int8);
  const ops::Attrs constant{{"weight_constant", int64_t(1)}};
  auto kept = [&](const Tensor& a, const Tensor& w) { return ops::call1(ops::OpId::matmul_integer, {a, w, zu, zi}, constant); };
  const Tensor a = random_bytes({3, 6}, DType::UInt8);
  Tensor w = random_bytes({6, 4}, DType::Int8);
  const Tensor first = kept(a, w);
  EXPECT_EQ(first.to_vector(), matmul_integer(a, w.clone(), zu, zi).to_vector());
  EXPECT_EQ(kept(a, w).to_vector(), first.to_vector());         // kept
  w.copy_(random_bytes({6, 4}, DType::Int8));                    // a new version of the same storage
  EXPECT_EQ(kept(a, w).to_vector(), matmul_integer(a, w.clone(), zu, zi).to_vector());
  EXPECT_NE(kept(a, w).to_vector(), first.to_vector());
  // two views of one storage: each its own packing
  Tensor both = random_bytes({2, 6, 4}, DType::Int8);
  for (int64_t i = 0; i < 2; ++i) {
    const Tensor view = both.select(0, i);
    EXPECT_EQ(ops::call1(ops::OpId::qlinear_matmul, {a, s, zu, view, s, zi, s, zu, zeros({0}, DType::Int32)}, constant).to_vector(),
              qlinear_matmul({a, s, zu}, {view.clone(), s, zi}, s, zu).to_vector());
  }
  // a conv weight changed in place
  const Tensor img = random_bytes({1, 2, 4, 4}, DType::UInt8);
  Tensor k = random_bytes({3, 2, 3, 3}, DType::Int8);
  ops::Attrs conv = constant;
  for (const char* name : {"stride", "dilation"}) conv.set(name, std::vector<int64_t>{1, 1});
  conv.set("padding", std::vector<int64_t>{0, 0, 0, 0});
  conv.set("groups", int64_t(1));
  const Tensor before = ops::call1(ops::OpId::conv2d_integer, {img, k, zu, zi}, conv);
  EXPECT_EQ(before.to_vector(), conv2d_integer(img, k.clone(), zu, zi).to_vector());
  k.fill_(1);
  EXPECT_EQ(ops::call1(ops::OpId::conv2d_integer, {img, k, zu, zi}, conv).to_vector(),
            conv2d_integer(img, k.clone(), zu, zi).to_vector());
}

}  // namespace
}  // namespace smelt

#include "smelt/compile.h"
#include "trace/interpreter.h"
#include "trace/trace.h"

namespace smelt {
namespace {

// Found by review: packed weights were kept for weights that change unseen. A compiled plan's
// weight computed in the graph (its arena is written without version bumps), caller-owned memory
// (from_blob), and one constant weight packed two ways (groups) must each give fresh results.
TEST(Quantize, OnlyConstantWeightsKeepTheirPacking) {
  const Tensor zu = zeros({}, DType::UInt8), zi = zeros({}, DType::Int8);
  CompiledFunction f = compile([zu, zi](const std::vector<Tensor>& in) {
    const Tensor b = cast(in[1] * 2.0, DType::Int8);  // computed in the plan's arena
    return std::vector<Tensor>{matmul_integer(in[0], b, zu, zi)};
  });
  const Tensor a = full({1, 2}, 1.0, DType::UInt8);
  for (double v : {1.0, 10.0, 3.0}) {
    const Tensor b = full({2, 2}, v, DType::Float32);
    EXPECT_EQ(f({a, b})[0].to_vector(), matmul_integer(a, cast(b * 2.0, DType::Int8), zu, zi).to_vector()) << v;
  }
  int8_t raw[4] = {1, 2, 3, 4};
  const Tensor blob = from_blob(raw, {2, 2}, DType::Int8);
  EXPECT_EQ(matmul_integer(a, blob, zu, zi).to_vector(), (std::vector<double>{4, 6}));
  raw[0] = 100;
  EXPECT_EQ(matmul_integer(a, blob, zu, zi).to_vector(), (std::vector<double>{103, 6}));
  // one constant weight of a graph, read by convolutions of 2 groups and of 1 (the interpreter
  // marks both as constant weights)
  const Tensor w = cast(from_vector(std::vector<int64_t>{1, 2, 3, 4}, {4, 1, 1, 1}), DType::Int8);
  QConvOptions two, one;
  two.groups = 2;
  auto graph = trace::trace(
      [w, zu, zi, two, one](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
        return std::vector<Tensor>{conv2d_integer(in[0], w, zu, zi, two), conv2d_integer(in[1], w, zu, zi, one)};
      },
      {zeros({1, 2, 1, 1}, DType::UInt8), zeros({1, 1, 1, 1}, DType::UInt8)});
  const Tensor x2 = cast(from_vector(std::vector<int64_t>{10, 20}, {1, 2, 1, 1}), DType::UInt8);
  const Tensor x1 = full({1, 1, 1, 1}, 10.0, DType::UInt8);
  for (int run = 0; run < 2; ++run) {
    const std::vector<Tensor> got = trace::interpret(*graph, {x2, x1});
    EXPECT_EQ(got[0].to_vector(), (std::vector<double>{10, 20, 60, 80}));
    EXPECT_EQ(got[1].to_vector(), (std::vector<double>{10, 20, 30, 40}));
  }
}

}  // namespace
}  // namespace smelt
