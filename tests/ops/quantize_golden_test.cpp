// smelt's quantized ops against PyTorch's (tests/golden/quantize.json, written by
// tests/golden/golden_quantize.py with torch's oneDNN engine): quantize_per_tensor/per_channel
// and quantized linear and conv2d, compared byte for byte.
#include <gtest/gtest.h>

#include <fstream>

#include "smelt/quantize.h"
#include "support/json_tensor.h"

namespace smelt {
namespace {

using nlohmann::json;
using testing::tensor_from_json;

Tensor f32_values(const json& v) {
  std::vector<float> out;
  for (const json& e : v) out.push_back(e.get<float>());
  return from_vector(out, {int64_t(out.size())});
}

Tensor values_of(const json& v, DType dtype) {
  std::vector<double> out;
  for (const json& e : v) out.push_back(e.get<double>());
  return from_vector(out, {int64_t(out.size())}, dtype);
}

void expect_same_bytes(const Tensor& got, const Tensor& want, const std::string& name) {
  ASSERT_EQ(got.shape(), want.shape()) << name;
  ASSERT_EQ(got.dtype(), want.dtype()) << name;
  const Tensor g = contiguous(got);
  int64_t differ = 0;
  for (int64_t i = 0; i < g.numel(); ++i) {
    const uint8_t a = static_cast<const uint8_t*>(g.raw_data())[i];
    const uint8_t b = static_cast<const uint8_t*>(want.raw_data())[i];
    if (a != b && differ++ < 5) ADD_FAILURE() << name << ": element " << i << " is " << int(a) << ", PyTorch " << int(b);
  }
  EXPECT_EQ(differ, 0) << name;
}

TEST(QuantizeGolden, EveryCaseMatchesPyTorchByteForByte) {
  std::ifstream in(std::string(SMELT_TEST_DIR) + "/golden/quantize.json");
  ASSERT_TRUE(in) << "tests/golden/quantize.json is missing";
  const json doc = json::parse(in);
  int cases = 0;
  for (const json& c : doc.at("cases")) {
    const std::string name = c.at("name");
    const std::string kind = c.at("kind");
    ++cases;
    if (kind == "quantize") {
      const Tensor want = tensor_from_json(c.at("q"));
      const Tensor q = quantize_linear(tensor_from_json(c.at("x")), f32_values(c.at("scale")),
                                       values_of(c.at("zero_point"), want.dtype()), c.at("axis").get<int64_t>());
      expect_same_bytes(q, want, name);
      continue;
    }
    const Tensor x = tensor_from_json(c.at("x")), w = tensor_from_json(c.at("w"));
    const QTensor xq{x, full({}, c.at("x_scale").get<double>(), DType::Float32),
                     full({}, c.at("x_zero_point").get<double>(), DType::UInt8)};
    const QTensor wq{w, f32_values(c.at("w_scale")), values_of(c.at("w_zero_point"), DType::Int8)};
    const Tensor ys = full({}, c.at("y_scale").get<double>(), DType::Float32);
    const Tensor yz = full({}, c.at("y_zero_point").get<double>(), DType::UInt8);
    Tensor y;
    if (kind == "linear") {
      // PyTorch's linear is x @ w^T with w (out, in): per-channel scales are per column of w^T
      y = qlinear_matmul(xq, {w.t(), wq.scale, wq.zero_point}, ys, yz);
    } else {
      const int64_t s = c.at("stride"), p = c.at("padding"), d = c.at("dilation");
      QConvOptions o;
      o.stride = {s, s};
      o.padding = {p, p, p, p};
      o.dilation = {d, d};
      o.groups = c.at("groups");
      y = qlinear_conv2d(xq, wq, ys, yz, Tensor(), o);
    }
    expect_same_bytes(y, tensor_from_json(c.at("y")), name);
  }
  EXPECT_EQ(cases, 12);
}

}  // namespace
}  // namespace smelt
