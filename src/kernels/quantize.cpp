#include "kernels/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/qgemm.h"
#include "kernels/quantize_params.h"
#include "kernels/transpose.h"
#include "smelt/tensor.h"
#include "smelt/error.h"

namespace smelt::kernels {
namespace {

template <class X, class Q>
void quantize_loop(const X* x, Q* y, int64_t outer, int64_t channels, int64_t inner,
                   const std::vector<float>& scale, const std::vector<int32_t>& zp) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t c = 0; c < channels; ++c) {
      const X s = X(param_at(scale, c));
      const int32_t z = param_at(zp, c);
      const X lo = X(int32_t(std::numeric_limits<Q>::min()) - z);
      const X hi = X(int32_t(std::numeric_limits<Q>::max()) - z);
      const int64_t base = (o * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        X v = std::nearbyint(x[base + i] / s);  // half to even: the default rounding mode
        v = v != v ? X(0) : std::min(std::max(v, lo), hi);
        y[base + i] = Q(int32_t(v) + z);
      }
    }
  }
}

template <class Q>
void dequantize_loop(const Q* q, float* y, int64_t outer, int64_t channels, int64_t inner,
                     const std::vector<float>& scale, const std::vector<int32_t>& zp) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t c = 0; c < channels; ++c) {
      const float s = param_at(scale, c);
      const int64_t z = param_at(zp, c);
      const int64_t base = (o * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i) y[base + i] = float(int64_t(q[base + i]) - z) * s;
    }
  }
}

// (outer, channels, inner) of `shape` around `axis`; channels 1 for per-tensor parameters.
void axis_split(const Shape& shape, int64_t axis, int64_t params, const char* op, int64_t* outer,
                int64_t* channels, int64_t* inner) {
  *outer = 1, *channels = 1, *inner = 1;
  if (params == 1) {
    *inner = shape_numel(shape);
    return;
  }
  SMELT_CHECK(axis >= 0 && axis < int64_t(shape.size()) && shape[size_t(axis)] == params)
      << op << ": " << params << " scales for axis " << axis << " of " << shape_str(shape)
      << "; valid: one, or one per index of the axis";
  for (int64_t d = 0; d < axis; ++d) *outer *= shape[size_t(d)];
  *channels = params;
  for (size_t d = size_t(axis) + 1; d < shape.size(); ++d) *inner *= shape[d];
}

// Values as uint8 with their zero points: int8 is shifted by +128 (exact: a - za is unchanged).
std::vector<uint8_t> as_unsigned(const Tensor& values, std::vector<int32_t>* zp) {
  const Tensor v = contiguous_copy(values);
  std::vector<uint8_t> out(size_t(v.numel()));
  if (!out.empty()) std::memcpy(out.data(), v.raw_data(), out.size());  // (an empty tensor has no data)
  if (v.dtype() == DType::Int8) {
    for (uint8_t& b : out) b ^= 0x80;
    for (int32_t& z : *zp) z += 128;
  }
  return out;
}

QGemmOutput output_of(const Requant& r, void* data, int64_t ldc, const int32_t* bias,
                      int64_t row0) {
  QGemmOutput out;
  out.type = r.type;
  out.data = data;
  out.ldc = ldc;
  out.bias = bias;
  if (r.type != QGemmOutput::Type::Int32) {
    out.scale = r.column.data();
    out.per_column_scale = true;
    out.zero_point = r.zero_point;
    if (!r.row.empty()) out.row_scale = r.row.data() - row0;  // indexed by the batch's rows
  }
  return out;
}

}  // namespace

void quantize_linear_forward(const Tensor& y, const Tensor& x, const Tensor& scale,
                             const Tensor& zero_point, int64_t axis) {
  const std::vector<float> s = scale_values(scale, "quantize_linear", "scale");
  const std::vector<int32_t> z = zero_point_values(zero_point);
  int64_t outer, channels, inner;
  axis_split(x.shape(), axis, int64_t(s.size()), "quantize_linear", &outer, &channels, &inner);
  const Tensor xc = contiguous_copy(x);
  auto run = [&](auto* q) {
    using Q = std::remove_pointer_t<decltype(q)>;
    if (xc.dtype() == DType::Float64) {
      quantize_loop<double, Q>(xc.data<double>(), q, outer, channels, inner, s, z);
    } else {
      quantize_loop<float, Q>(xc.data<float>(), q, outer, channels, inner, s, z);
    }
  };
  if (y.dtype() == DType::UInt8) {
    run(y.data<uint8_t>());
  } else {
    run(y.data<int8_t>());
  }
}

void dequantize_linear_forward(const Tensor& y, const Tensor& q, const Tensor& scale,
                               const Tensor& zero_point, int64_t axis) {
  const std::vector<float> s = scale_values(scale, "dequantize_linear", "scale");
  const std::vector<int32_t> z = zero_point_values(zero_point);
  if (q.dtype() == DType::Int32) {
    for (int32_t v : z) SMELT_CHECK(v == 0) << "dequantize_linear: int32 values need a zero point of 0, got " << v;
  }
  int64_t outer, channels, inner;
  axis_split(q.shape(), axis, int64_t(s.size()), "dequantize_linear", &outer, &channels, &inner);
  const Tensor qc = contiguous_copy(q);
  float* out = y.data<float>();
  switch (qc.dtype()) {
    case DType::UInt8: dequantize_loop(qc.data<uint8_t>(), out, outer, channels, inner, s, z); break;
    case DType::Int8: dequantize_loop(qc.data<int8_t>(), out, outer, channels, inner, s, z); break;
    default: dequantize_loop(qc.data<int32_t>(), out, outer, channels, inner, s, z); break;
  }
}

void quantized_matmul_forward(const Tensor& y, const QuantizedTensor& a, const QuantizedTensor& b,
                              const Tensor& bias, const Tensor& y_scale, const Tensor& y_zero_point,
                              bool weight_constant) {
  const char* op = y.dtype() == DType::Int32 ? "matmul_integer" : "qlinear_matmul";
  // Batch dims: y's leading dims; each operand's, aligned right, broadcast where of size 1.
  const Shape& ys = y.shape();
  const int64_t M = ys[ys.size() - 2], N = ys.back();
  const int64_t K = a.values.shape().back();
  const Shape batch(ys.begin(), ys.end() - 2);
  auto batch_offset = [&](const Tensor& t, int64_t flat) {  // in matrices
    const int64_t lead = int64_t(batch.size()) - (t.dim() - 2);
    int64_t offset = 0, stride = 1;
    for (int64_t d = int64_t(batch.size()) - 1; d >= 0; --d) {
      const int64_t idx = flat % batch[size_t(d)];
      flat /= batch[size_t(d)];
      if (d < lead) continue;
      const int64_t size = t.size(d - lead);
      if (size != 1) offset += idx * stride;
      stride *= size;
    }
    return offset;
  };
  std::vector<int32_t> za = zero_point_values(a.zero_point);
  const std::vector<int32_t> zb = zero_point_values(b.zero_point);
  const std::vector<uint8_t> av = as_unsigned(a.values, &za);
  // B in contiguous memory, made only when some packing is not kept (copying a constant weight
  // on every call would cost as much as the product itself when M is 1).
  Tensor b_contiguous;
  auto contiguous_b = [&]() -> const Tensor& {
    if (!b_contiguous.defined()) b_contiguous = contiguous_copy(b.values);
    return b_contiguous;
  };
  const Requant r = make_requant(y, a, b, y_scale, y_zero_point, N, op);
  const int64_t batches = shape_numel(batch);
  const size_t out_bytes = dtype_size(y.dtype());
  const Tensor b32 = bias.defined() ? contiguous_copy(bias) : Tensor();
  const int32_t* bias_data = b32.defined() ? b32.data<int32_t>() : nullptr;
  for (int64_t i = 0; i < batches; ++i) {
    const int64_t at = batch_offset(b.values, i);
    const WeightPacking packing{WeightPacking::Kind::MatmulB, K, N, 1, at, 0};
    const std::shared_ptr<const QPackedB> packed = kept_packing_of<QPackedB>(b.values, weight_constant, zb, packing, [&] {
      const Tensor& bv = contiguous_b();
      return qgemm_pack_b(static_cast<const uint8_t*>(bv.raw_data()) + at * K * N, bv.dtype() == DType::UInt8, K,
                          N, N, 1, zb, qgemm_best_isa());
    });
    QGemmA operand;
    operand.data = av.data() + batch_offset(a.values, i) * M * K;
    operand.lda = K;
    operand.zero_points = za.data();
    operand.per_row = za.size() != 1;
    qgemm_u8s8(M, operand, *packed,
               output_of(r, static_cast<char*>(y.raw_data()) + size_t(i * M * N) * out_bytes, N,
                         bias_data, 0));
  }
}

}  // namespace smelt::kernels
