// oneDNN's int8 convolution (kernels/qconv_onednn.h) against smelt's own quantized convolution,
// byte for byte (smelt's kernels are checked against the definition in tests/ops/quantize_test.cpp):
// the choice between them is made by speed alone, so wherever oneDNN applies it must write the same
// bytes. Also: where it must not apply, and the choice (pinned, measured, kept).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <sstream>

#include "kernels/conv_onednn.h"
#include "kernels/qconv_onednn.h"
#include "kernels/qgemm.h"
#include "kernels/quantize.h"
#include "kernels/quantize_params.h"
#include "support/errors.h"
#include "support/helpers.h"

namespace smelt::kernels {
namespace {

using testing::ScopedEnv;

bool onednn_present() { return onednn_version()[0] != '\0' && qgemm_isa_supported(QGemmIsa::Avx512Vnni); }

struct QConvCase {
  int64_t N, C, H, W, O, k, stride, pad_lo, pad_hi, dilation, groups;
  DType x_dtype = DType::UInt8;
  int32_t zx = 3;
  DType y_dtype = DType::UInt8;
  int32_t zy = 0;
  bool bias = true;
  int32_t bias_bound = 100000;
};

Tensor qconv_bytes(DType dtype, const Shape& shape, std::mt19937& rng, bool extremes) {
  Tensor t = empty(shape, dtype);
  uint8_t* p = static_cast<uint8_t*>(t.raw_data());
  std::uniform_int_distribution<int> any(0, 255), pick(0, 7);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int r = pick(rng);
    p[i] = uint8_t(extremes && r == 0 ? 0 : extremes && r == 1 ? 255 : extremes && r == 2 ? 127 : extremes && r == 3 ? 128 : any(rng));
  }
  return t;
}

struct QConvOperands {
  QuantizedTensor x, w;
  Tensor bias, y_scale, y_zero_point;
  QConvGeometry g;
  Shape y_shape;
};

QConvOperands make_qconv(const QConvCase& c, uint64_t seed, bool extremes) {
  std::mt19937 rng{uint32_t(seed)};
  QConvOperands o;
  o.x = {qconv_bytes(c.x_dtype, {c.N, c.C, c.H, c.W}, rng, extremes), full({}, 0.02f), full({}, double(c.zx), TensorOptions().dtype(c.x_dtype))};
  Tensor w_scale = empty({c.O}, DType::Float32);
  std::uniform_real_distribution<float> sd(0.001f, 0.02f);
  for (int64_t i = 0; i < c.O; ++i) w_scale.data<float>()[i] = sd(rng);
  o.w = {qconv_bytes(DType::Int8, {c.O, c.C / c.groups, c.k, c.k}, rng, extremes), w_scale, zeros({c.O}, TensorOptions().dtype(DType::Int8))};
  if (c.bias) {
    o.bias = empty({c.O}, DType::Int32);
    std::uniform_int_distribution<int32_t> bd(-c.bias_bound, c.bias_bound);
    for (int64_t i = 0; i < c.O; ++i) o.bias.data<int32_t>()[i] = bd(rng);
    if (c.O > 1) o.bias.data<int32_t>()[0] = c.bias_bound;  // the bound itself
  }
  o.y_scale = full({}, 0.03f);
  o.y_zero_point = full({}, double(c.zy), TensorOptions().dtype(c.y_dtype));
  o.g.stride[0] = o.g.stride[1] = c.stride;
  o.g.pad_begin[0] = o.g.pad_begin[1] = c.pad_lo;
  o.g.pad_end[0] = o.g.pad_end[1] = c.pad_hi;
  o.g.dilation[0] = o.g.dilation[1] = c.dilation;
  o.g.groups = c.groups;
  o.y_shape = {c.N, c.O, qconv_output_size(c.H, c.k, c.stride, c.pad_lo, c.pad_hi, c.dilation),
               qconv_output_size(c.W, c.k, c.stride, c.pad_lo, c.pad_hi, c.dilation)};
  return o;
}

Tensor run_qconv(const QConvOperands& o, DType y_dtype, const char* impl) {
  ScopedEnv pin("SMELT_QCONV", impl);
  Tensor y = empty(o.y_shape, y_dtype);
  quantized_conv2d_forward(y, o.x, o.w, o.bias, o.y_scale, o.y_zero_point, o.g, /*weight_constant=*/true);
  return y;
}

bool onednn_applies(const QConvOperands& o, DType y_dtype) {
  const Tensor y = empty(o.y_shape, y_dtype);
  const Requant r = make_requant(y, o.x, o.w, o.y_scale, o.y_zero_point, o.w.values.size(0), "test");
  return qconv_onednn_applies(y, o.x, o.w, o.bias, r, o.g);
}

std::string describe_qconv(const QConvCase& c) {
  std::ostringstream s;
  s << "N" << c.N << " C" << c.C << " " << c.H << "x" << c.W << " O" << c.O << " k" << c.k << " s" << c.stride << " pad "
    << c.pad_lo << "," << c.pad_hi << " d" << c.dilation << " g" << c.groups << " x " << dtype_name(c.x_dtype) << " zx "
    << c.zx << " y " << dtype_name(c.y_dtype) << " zy " << c.zy << (c.bias ? " bias" : "");
  return s.str();
}

std::vector<QConvCase> onednn_exact_cases() {
  std::vector<QConvCase> cases = {
      {1, 16, 14, 14, 24, 1, 1, 0, 0, 1, 1},                     // 1x1 (oneDNN's 1x1 kernels)
      {1, 32, 10, 10, 17, 3, 1, 1, 1, 1, 1},                     // 3x3, padding, odd outputs
      {2, 8, 15, 13, 16, 3, 2, 1, 1, 1, 1},                      // stride 2, two images, odd sizes
      {1, 24, 12, 12, 24, 3, 1, 1, 1, 1, 24},                    // depthwise
      {1, 48, 13, 13, 48, 3, 2, 0, 1, 1, 48},                    // depthwise, stride 2, one-sided padding
      {1, 3, 32, 32, 16, 3, 2, 1, 1, 1, 1},                      // a stem on 3 channels
      {1, 16, 16, 16, 16, 3, 1, 2, 2, 2, 1},                     // dilation 2
      {1, 8, 12, 12, 12, 3, 1, 1, 1, 1, 2},                      // two groups
      {1, 4, 11, 11, 8, 5, 1, 2, 2, 1, 1},                       // 5x5
      {1, 56, 7, 7, 56, 3, 1, 1, 1, 1, 1},                       // K = 504, just under the exact bound
  };
  std::vector<QConvCase> out;
  for (QConvCase c : cases) {
    out.push_back(c);                                                                        // uint8 -> uint8, zero points 3 / 0
    QConvCase s = c; s.x_dtype = DType::Int8; s.zx = -5; s.y_dtype = DType::Int8; s.bias = false; out.push_back(s);
    QConvCase f = c; f.zx = 255; f.zy = 128; out.push_back(f);                               // uint8 zero point 128: the flip
    QConvCase z = c; z.zx = 0; z.bias_bound = 1 << 24; out.push_back(z);                      // biases at the bound
  }
  return out;
}

TEST(QConvOneDnn, WritesSmeltsBytesWhereverItApplies) {
  if (!onednn_present()) GTEST_SKIP() << "built without oneDNN, or no AVX-512 VNNI";
  int compared = 0;
  for (const QConvCase& c : onednn_exact_cases()) {
    for (bool extremes : {false, true}) {
      SCOPED_TRACE(describe_qconv(c) + (extremes ? " extremes" : ""));
      const QConvOperands o = make_qconv(c, 1000 + compared, extremes);
      ASSERT_TRUE(onednn_applies(o, c.y_dtype)) << "oneDNN should run this convolution";
      const Tensor own = run_qconv(o, c.y_dtype, "smelt"), theirs = run_qconv(o, c.y_dtype, "onednn");
      testing::expect_same_bytes(theirs, own, describe_qconv(c));
      ++compared;
    }
  }
  EXPECT_EQ(compared, 80);
}

TEST(QConvOneDnn, StaysOffWhereItWouldRoundDifferently) {
  if (!onednn_present()) GTEST_SKIP() << "built without oneDNN, or no AVX-512 VNNI";
  const QConvCase base{1, 16, 10, 10, 16, 3, 1, 1, 1, 1, 1};
  ASSERT_TRUE(onednn_applies(make_qconv(base, 1, false), base.y_dtype));
  QConvCase zy = base; zy.zy = 7;  // a result zero point oneDNN would add before rounding
  EXPECT_FALSE(onednn_applies(make_qconv(zy, 1, false), zy.y_dtype));
  QConvCase s8 = base; s8.y_dtype = DType::Int8; s8.zy = 5;
  EXPECT_FALSE(onednn_applies(make_qconv(s8, 1, false), s8.y_dtype));
  QConvCase wide = base; wide.C = 64;  // K = 576: accumulators past 2^24
  EXPECT_FALSE(onednn_applies(make_qconv(wide, 1, false), wide.y_dtype));
  QConvCase big_bias = base; big_bias.bias_bound = (1 << 24) + 1;
  EXPECT_FALSE(onednn_applies(make_qconv(big_bias, 1, false), big_bias.y_dtype));
  QConvOperands wzp = make_qconv(base, 1, false);  // weights with a zero point: oneDNN 2.6 has none
  wzp.w.zero_point = full({base.O}, 1, TensorOptions().dtype(DType::Int8));
  EXPECT_FALSE(onednn_applies(wzp, base.y_dtype));
  QConvOperands uw = make_qconv(base, 1, false);  // uint8 weights
  uw.w.values = uw.w.values.to(DType::UInt8);
  uw.w.zero_point = zeros({base.O}, TensorOptions().dtype(DType::UInt8));
  EXPECT_FALSE(onednn_applies(uw, base.y_dtype));
  // ConvInteger's int32 accumulators stay smelt's.
  QConvOperands acc = make_qconv(base, 1, false);
  const Tensor y32 = empty(acc.y_shape, DType::Int32);
  const Requant r = make_requant(y32, acc.x, acc.w, Tensor(), Tensor(), base.O, "test");
  EXPECT_FALSE(qconv_onednn_applies(y32, acc.x, acc.w, Tensor(), r, acc.g));
}

TEST(QConvOneDnn, TheMeasuredChoiceGivesTheSameBytesAndIsKept) {
  const QConvCase c{1, 32, 14, 14, 32, 3, 1, 1, 1, 1, 32};
  const QConvOperands o = make_qconv(c, 7, false);
  const Tensor pinned = run_qconv(o, c.y_dtype, "smelt");
  ScopedEnv no_pin("SMELT_QCONV", nullptr);
  for (int call = 0; call < 3; ++call) {  // the first call measures both and keeps the faster
    Tensor y = empty(o.y_shape, c.y_dtype);
    quantized_conv2d_forward(y, o.x, o.w, o.bias, o.y_scale, o.y_zero_point, o.g, true);
    testing::expect_same_bytes(y, pinned, "call " + std::to_string(call));
  }
  testing::expect_error([&] { run_qconv(o, c.y_dtype, "fastest"); }, {"SMELT_QCONV", "onednn"});
}

// `smelt tune` measures a shape again even where the tuning file has a record; after the first
// call the choice is kept with the shape, so later calls measure nothing.
TEST(QConvOneDnn, RemeasuringTimesEachShapeOnceAndKeepsTheBytes) {
  if (!onednn_present()) GTEST_SKIP() << "built without oneDNN, or no AVX-512 VNNI";
  const QConvCase c{1, 24, 9, 11, 40, 3, 1, 1, 1, 1, 1};  // a shape no other test runs
  const QConvOperands o = make_qconv(c, 11, false);
  const Tensor pinned = run_qconv(o, c.y_dtype, "smelt");
  ScopedEnv no_pin("SMELT_QCONV", nullptr);
  qconv_take_measurements();
  qconv_remeasure_choices(true);
  for (int call = 0; call < 3; ++call) {
    Tensor y = empty(o.y_shape, c.y_dtype);
    quantized_conv2d_forward(y, o.x, o.w, o.bias, o.y_scale, o.y_zero_point, o.g, true);
    testing::expect_same_bytes(y, pinned, "call " + std::to_string(call));
  }
  qconv_remeasure_choices(false);
  const std::vector<std::string> measured = qconv_take_measurements();
  ASSERT_EQ(measured.size(), 1u);
  EXPECT_NE(measured[0].find("w=(40, 24, 3, 3)"), std::string::npos) << measured[0];
  EXPECT_TRUE(measured[0].find("-> smelt") != std::string::npos || measured[0].find("-> onednn") != std::string::npos)
      << measured[0];
}

}  // namespace
}  // namespace smelt::kernels
