// The ops of quantized inference (docs/quantization.md), ONNX's semantics: quantize_linear,
// dequantize_linear, qlinear_matmul / matmul_integer and qlinear_conv2d / conv2d_integer. None
// is differentiable (quantization-aware training is not built). Their kernels refuse scales
// that are not positive and finite (kRefusesValues).
#include "kernels/quantize.h"

#include "ops/op_util.h"
#include "smelt/quantize.h"

namespace smelt::ops {
namespace {

bool quantized(DType d) { return d == DType::UInt8 || d == DType::Int8; }

void check_quantized(const TensorMeta& m, const char* op, const char* what) {
  SMELT_CHECK(quantized(m.dtype)) << op << ": " << what << " is " << dtype_name(m.dtype)
                                  << "; valid: uint8 or int8";
}

// A scale (float32; null for the Integer ops, which have none) and zero point (`values` dtype)
// with one element, or `per` elements along one dim (a 1-D tensor) when `per` > 0.
void check_params(const TensorMeta* scale, const TensorMeta& zero_point, DType values, int64_t per,
                  const char* op, const char* what) {
  if (scale) check_dtype(*scale, DType::Float32, op, (std::string(what) + " scale").c_str());
  SMELT_CHECK(zero_point.dtype == values || (values == DType::Int32 && quantized(zero_point.dtype)))
      << op << ": " << what << " zero point is " << dtype_name(zero_point.dtype) << "; valid: "
      << dtype_name(values) << ", the values' dtype";
  for (const TensorMeta* m : {scale, &zero_point}) {
    if (!m) continue;
    const int64_t n = shape_numel(m->shape);
    const bool ok = n == 1 ? m->shape.size() <= 1 : (per > 0 && m->shape == Shape{per});
    SMELT_CHECK(ok) << op << ": " << what << (m == scale ? " scale" : " zero point") << " has shape "
                    << shape_str(m->shape) << "; valid: one element"
                    << (per > 0 ? " or (" + std::to_string(per) + ")" : std::string());
  }
  SMELT_CHECK(!scale || shape_numel(scale->shape) == shape_numel(zero_point.shape) ||
              shape_numel(zero_point.shape) == 1)
      << op << ": " << what << " scale and zero point differ in length";
}

int64_t quant_axis(const Attrs& attrs, const TensorMeta& x, const TensorMeta& scale, const char* op) {
  int64_t axis = attrs.get_int("axis", 1);
  const int64_t rank = int64_t(x.shape.size());
  if (axis < 0) axis += rank;
  SMELT_CHECK(shape_numel(scale.shape) == 1 || (axis >= 0 && axis < rank))
      << op << ": axis " << attrs.get_int("axis", 1) << " is outside a rank-" << rank << " tensor";
  return axis;
}

int64_t per_axis_size(const TensorMeta& x, int64_t axis) {
  return axis >= 0 && axis < int64_t(x.shape.size()) ? x.shape[size_t(axis)] : 0;
}

// ---- quantize_linear (x, scale, zero_point) -> zero_point's dtype
std::vector<TensorMeta> quantize_linear_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const char* op = "quantize_linear";
  check_floating(in[0], op, "x");
  check_quantized(in[2], op, "the zero point");
  const int64_t axis = quant_axis(attrs, in[0], in[1], op);
  check_params(&in[1], in[2], in[2].dtype, per_axis_size(in[0], axis), op, "the");
  return {{in[0].shape, in[2].dtype}};
}
void quantize_linear_kernel(const std::vector<Tensor>& in, const Attrs& attrs, const std::vector<Tensor>& out) {
  const int64_t axis = quant_axis(attrs, meta_of(in[0]), meta_of(in[1]), "quantize_linear");
  kernels::quantize_linear_forward(out[0], in[0], in[1], in[2], axis);
}

// ---- dequantize_linear (q, scale, zero_point) -> float32
std::vector<TensorMeta> dequantize_linear_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const char* op = "dequantize_linear";
  SMELT_CHECK(quantized(in[0].dtype) || in[0].dtype == DType::Int32)
      << op << ": q is " << dtype_name(in[0].dtype) << "; valid: uint8, int8 or int32";
  const int64_t axis = quant_axis(attrs, in[0], in[1], op);
  check_params(&in[1], in[2], in[0].dtype, per_axis_size(in[0], axis), op, "the");
  return {{in[0].shape, DType::Float32}};
}
void dequantize_linear_kernel(const std::vector<Tensor>& in, const Attrs& attrs, const std::vector<Tensor>& out) {
  const int64_t axis = quant_axis(attrs, meta_of(in[0]), meta_of(in[1]), "dequantize_linear");
  kernels::dequantize_linear_forward(out[0], in[0], in[1], in[2], axis);
}

// ---- matmuls: a (..., M, K), b (..., K, N), rank >= 2
Shape quantized_matmul_out(const TensorMeta& a, const TensorMeta& b, const char* op) {
  SMELT_CHECK(a.shape.size() >= 2 && b.shape.size() >= 2)
      << op << ": operands " << shape_str(a.shape) << " and " << shape_str(b.shape)
      << " need at least 2 dims each";
  SMELT_CHECK(a.shape.back() == b.shape[b.shape.size() - 2])
      << op << ": inner dims differ: " << shape_str(a.shape) << " and " << shape_str(b.shape);
  Shape out = broadcast_shapes(Shape(a.shape.begin(), a.shape.end() - 2),
                               Shape(b.shape.begin(), b.shape.end() - 2), op);
  out.push_back(a.shape[a.shape.size() - 2]);
  out.push_back(b.shape.back());
  return out;
}

// (a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp, bias): bias (N) int32 in a_scale * b_scale
// units, added before requantizing (a linear layer's; ONNX's QLinearMatMul has none: (0)).
std::vector<TensorMeta> qlinear_matmul_shape(const std::vector<TensorMeta>& in, const Attrs&) {
  const char* op = "qlinear_matmul";
  check_quantized(in[0], op, "a");
  check_quantized(in[3], op, "b");
  check_quantized(in[7], op, "the output zero point");
  const Shape out = quantized_matmul_out(in[0], in[3], op);
  check_params(&in[1], in[2], in[0].dtype, out[out.size() - 2], op, "a's");
  check_params(&in[4], in[5], in[3].dtype, out.back(), op, "b's");
  check_params(&in[6], in[7], in[7].dtype, 0, op, "the output");
  check_dtype(in[8], DType::Int32, op, "bias");
  SMELT_CHECK(in[8].shape == Shape{out.back()} || in[8].shape == Shape{0})
      << op << ": bias " << shape_str(in[8].shape) << "; valid: (" << out.back() << ") or (0) for none";
  return {{out, in[7].dtype}};
}
// "weight_constant" (ops/constant_weight.h): the weight's packing is kept between calls.
bool constant_weight(const Attrs& attrs) { return attrs.get_int("weight_constant", 0) != 0; }

void qlinear_matmul_kernel(const std::vector<Tensor>& in, const Attrs& attrs, const std::vector<Tensor>& out) {
  const Tensor bias = in[8].numel() ? in[8] : Tensor();
  kernels::quantized_matmul_forward(out[0], {in[0], in[1], in[2]}, {in[3], in[4], in[5]}, bias, in[6], in[7],
                                    constant_weight(attrs));
}

// (a, b, a_zp, b_zp) -> int32
std::vector<TensorMeta> matmul_integer_shape(const std::vector<TensorMeta>& in, const Attrs&) {
  const char* op = "matmul_integer";
  check_quantized(in[0], op, "a");
  check_quantized(in[1], op, "b");
  const Shape out = quantized_matmul_out(in[0], in[1], op);
  check_params(nullptr, in[2], in[0].dtype, out[out.size() - 2], op, "a's");
  check_params(nullptr, in[3], in[1].dtype, out.back(), op, "b's");
  return {{out, DType::Int32}};
}
void matmul_integer_kernel(const std::vector<Tensor>& in, const Attrs& attrs, const std::vector<Tensor>& out) {
  kernels::quantized_matmul_forward(out[0], {in[0], Tensor(), in[2]}, {in[1], Tensor(), in[3]}, Tensor(), Tensor(),
                                    Tensor(), constant_weight(attrs));
}

// ---- convolutions: stride (2), padding (4: top, left, bottom, right), dilation (2), groups
kernels::QConvGeometry conv_geometry(const Attrs& attrs, const char* op) {
  kernels::QConvGeometry g;
  const std::vector<int64_t> stride = pair_attr(attrs, "stride", op, 1);
  const std::vector<int64_t> dilation = pair_attr(attrs, "dilation", op, 1);
  const std::vector<int64_t>& padding = get_ints_of_size(attrs, op, "padding", 4);
  for (int d = 0; d < 2; ++d) {
    g.stride[d] = stride[size_t(d)];
    g.dilation[d] = dilation[size_t(d)];
    g.pad_begin[d] = padding[size_t(d)];
    g.pad_end[d] = padding[size_t(d) + 2];
    SMELT_CHECK(g.pad_begin[d] >= 0 && g.pad_end[d] >= 0 && g.pad_begin[d] < (int64_t(1) << 31) &&
                g.pad_end[d] < (int64_t(1) << 31))
        << op << ": padding " << g.pad_begin[d] << ", " << g.pad_end[d] << "; valid: [0, 2^31)";
  }
  g.groups = attrs.get_int("groups", 1);
  SMELT_CHECK(g.groups >= 1) << op << ": groups " << g.groups << " must be >= 1";
  return g;
}

Shape quantized_conv_out(const TensorMeta& x, const TensorMeta& w, const Attrs& attrs, const char* op) {
  SMELT_CHECK(x.shape.size() == 4 && w.shape.size() == 4)
      << op << ": x " << shape_str(x.shape) << " and w " << shape_str(w.shape)
      << " must be (N, C, H, W) and (O, C / groups, kH, kW)";
  const kernels::QConvGeometry g = conv_geometry(attrs, op);
  SMELT_CHECK(x.shape[1] == w.shape[1] * g.groups && w.shape[0] % g.groups == 0)
      << op << ": " << x.shape[1] << " input channels, weight " << shape_str(w.shape) << " and "
      << g.groups << " groups do not fit; valid: C = w.size(1) * groups, O divisible by groups";
  Shape out{x.shape[0], w.shape[0], 0, 0};
  for (int d = 0; d < 2; ++d) {
    out[size_t(d) + 2] = kernels::qconv_output_size(x.shape[size_t(d) + 2], w.shape[size_t(d) + 2], g.stride[d],
                                                    g.pad_begin[d], g.pad_end[d], g.dilation[d]);
  }
  return out;
}

// (x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias)
std::vector<TensorMeta> qlinear_conv2d_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const char* op = "qlinear_conv2d";
  check_quantized(in[0], op, "x");
  check_quantized(in[3], op, "w");
  check_quantized(in[7], op, "the output zero point");
  const Shape out = quantized_conv_out(in[0], in[3], attrs, op);
  check_params(&in[1], in[2], in[0].dtype, 0, op, "x's");
  check_params(&in[4], in[5], in[3].dtype, out[1], op, "w's");
  check_params(&in[6], in[7], in[7].dtype, 0, op, "the output");
  check_dtype(in[8], DType::Int32, op, "bias");
  SMELT_CHECK(in[8].shape == Shape{out[1]} || in[8].shape == Shape{0})
      << op << ": bias " << shape_str(in[8].shape) << "; valid: (" << out[1] << ") or (0) for none";
  return {{out, in[7].dtype}};
}
void qlinear_conv2d_kernel(const std::vector<Tensor>& in, const Attrs& attrs, const std::vector<Tensor>& out) {
  const Tensor bias = in[8].numel() ? in[8] : Tensor();
  kernels::quantized_conv2d_forward(out[0], {in[0], in[1], in[2]}, {in[3], in[4], in[5]}, bias, in[6], in[7],
                                    conv_geometry(attrs, "qlinear_conv2d"), constant_weight(attrs));
}

// (x, w, x_zp, w_zp) -> int32
std::vector<TensorMeta> conv2d_integer_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const char* op = "conv2d_integer";
  check_quantized(in[0], op, "x");
  check_quantized(in[1], op, "w");
  const Shape out = quantized_conv_out(in[0], in[1], attrs, op);
  check_params(nullptr, in[2], in[0].dtype, 0, op, "x's");
  check_params(nullptr, in[3], in[1].dtype, out[1], op, "w's");
  return {{out, DType::Int32}};
}
void conv2d_integer_kernel(const std::vector<Tensor>& in, const Attrs& attrs, const std::vector<Tensor>& out) {
  kernels::quantized_conv2d_forward(out[0], {in[0], Tensor(), in[2]}, {in[1], Tensor(), in[3]}, Tensor(),
                                    Tensor(), Tensor(), conv_geometry(attrs, "conv2d_integer"), constant_weight(attrs));
}

}  // namespace

SMELT_OP_IMPL(quantize_linear) = {quantize_linear_shape, quantize_linear_kernel, nullptr, kSaveNothing};
SMELT_OP_IMPL(dequantize_linear) = {dequantize_linear_shape, dequantize_linear_kernel, nullptr, kSaveNothing};
SMELT_OP_IMPL(qlinear_matmul) = {qlinear_matmul_shape, qlinear_matmul_kernel, nullptr, kSaveNothing};
SMELT_OP_IMPL(matmul_integer) = {matmul_integer_shape, matmul_integer_kernel, nullptr, kSaveNothing};
SMELT_OP_IMPL(qlinear_conv2d) = {qlinear_conv2d_shape, qlinear_conv2d_kernel, nullptr, kSaveNothing};
SMELT_OP_IMPL(conv2d_integer) = {conv2d_integer_shape, conv2d_integer_kernel, nullptr, kSaveNothing};

}  // namespace smelt::ops

// ---- public API (smelt/quantize.h)
namespace smelt {

using ops::call1;
using ops::OpId;

namespace {
ops::Attrs conv_attrs(const QConvOptions& o) {
  return {{"stride", o.stride}, {"padding", o.padding}, {"dilation", o.dilation}, {"groups", o.groups}};
}
}  // namespace

Tensor quantize_linear(const Tensor& x, const Tensor& scale, const Tensor& zero_point, int64_t axis) {
  return call1(OpId::quantize_linear, {x, scale, zero_point}, {{"axis", axis}});
}
Tensor dequantize_linear(const Tensor& q, const Tensor& scale, const Tensor& zero_point, int64_t axis) {
  return call1(OpId::dequantize_linear, {q, scale, zero_point}, {{"axis", axis}});
}
Tensor qlinear_matmul(const QTensor& a, const QTensor& b, const Tensor& y_scale, const Tensor& y_zero_point,
                      const Tensor& bias) {
  const Tensor c = bias.defined() ? bias : zeros({0}, DType::Int32);
  return call1(OpId::qlinear_matmul,
               {a.values, a.scale, a.zero_point, b.values, b.scale, b.zero_point, y_scale, y_zero_point, c});
}
Tensor matmul_integer(const Tensor& a, const Tensor& b, const Tensor& a_zero_point, const Tensor& b_zero_point) {
  return call1(OpId::matmul_integer, {a, b, a_zero_point, b_zero_point});
}
Tensor qlinear_conv2d(const QTensor& x, const QTensor& w, const Tensor& y_scale, const Tensor& y_zero_point,
                      const Tensor& bias, const QConvOptions& options) {
  const Tensor b = bias.defined() ? bias : zeros({0}, DType::Int32);
  return call1(OpId::qlinear_conv2d,
               {x.values, x.scale, x.zero_point, w.values, w.scale, w.zero_point, y_scale, y_zero_point, b},
               conv_attrs(options));
}
Tensor conv2d_integer(const Tensor& x, const Tensor& w, const Tensor& x_zero_point, const Tensor& w_zero_point,
                      const QConvOptions& options) {
  return call1(OpId::conv2d_integer, {x, w, x_zero_point, w_zero_point}, conv_attrs(options));
}

}  // namespace smelt
