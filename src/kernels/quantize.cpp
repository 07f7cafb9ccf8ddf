#include "kernels/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <list>
#include <memory>
#include <mutex>

#include "base/parallel.h"
#include "kernels/qgemm.h"
#include "kernels/transpose.h"
#include "smelt/tensor.h"
#include "smelt/error.h"

namespace smelt::kernels {
namespace {

bool is_quantized_dtype(DType d) { return d == DType::UInt8 || d == DType::Int8; }

// The scale's values, each checked positive and finite.
std::vector<float> scale_values(const Tensor& scale, const char* op, const char* what) {
  SMELT_CHECK(scale.dtype() == DType::Float32)
      << op << ": " << what << " is " << dtype_name(scale.dtype()) << "; valid: float32";
  const Tensor s = contiguous_copy(scale);
  std::vector<float> v(s.data<float>(), s.data<float>() + s.numel());
  for (float f : v) {
    SMELT_CHECK(std::isfinite(f) && f > 0)
        << op << ": " << what << " " << f << " is not a positive finite number";
  }
  return v;
}

std::vector<int32_t> zero_point_values(const Tensor& zp) {
  const Tensor z = contiguous_copy(zp);
  std::vector<int32_t> v(size_t(z.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (z.dtype()) {
      case DType::UInt8: v[i] = z.data<uint8_t>()[i]; break;
      case DType::Int8: v[i] = z.data<int8_t>()[i]; break;
      case DType::Int32: v[i] = z.data<int32_t>()[i]; break;
      default: SMELT_INTERNAL_CHECK(false) << "a zero point of dtype " << dtype_name(z.dtype());
    }
  }
  return v;
}

// The value of per-tensor or per-index parameters at index i.
template <class T>
T at(const std::vector<T>& v, int64_t i) {
  return v.size() == 1 ? v[0] : v[size_t(i)];
}

template <class X, class Q>
void quantize_loop(const X* x, Q* y, int64_t outer, int64_t channels, int64_t inner,
                   const std::vector<float>& scale, const std::vector<int32_t>& zp) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t c = 0; c < channels; ++c) {
      const X s = X(at(scale, c));
      const int32_t z = at(zp, c);
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
      const float s = at(scale, c);
      const int64_t z = at(zp, c);
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
  std::memcpy(out.data(), v.raw_data(), out.size());
  if (v.dtype() == DType::Int8) {
    for (uint8_t& b : out) b ^= 0x80;
    for (int32_t& z : *zp) z += 128;
  }
  return out;
}

// How the products are stored: int32, or requantized with per-column multipliers (and per-row
// ones when A's scale is per row).
struct Requant {
  QGemmOutput::Type type = QGemmOutput::Type::Int32;
  std::vector<float> column, row;
  int32_t zero_point = 0;
};

Requant make_requant(const Tensor& y, const QuantizedTensor& a, const QuantizedTensor& b,
                     const Tensor& y_scale, const Tensor& y_zero_point, int64_t columns,
                     const char* op) {
  Requant r;
  if (y.dtype() == DType::Int32) return r;
  SMELT_CHECK(is_quantized_dtype(y.dtype())) << op << ": output dtype " << dtype_name(y.dtype());
  r.type = y.dtype() == DType::UInt8 ? QGemmOutput::Type::UInt8 : QGemmOutput::Type::Int8;
  const std::vector<float> sa = scale_values(a.scale, op, "the first operand's scale");
  const std::vector<float> sb = scale_values(b.scale, op, "the second operand's scale");
  const std::vector<float> sy = scale_values(y_scale, op, "the output scale");
  SMELT_CHECK(sy.size() == 1) << op << ": the output scale has " << sy.size() << " values; valid: one";
  r.zero_point = zero_point_values(y_zero_point).at(0);
  for (int64_t n = 0; n < columns; ++n) {
    r.column.push_back(sa.size() == 1 ? sa[0] * at(sb, n) / sy[0] : at(sb, n) / sy[0]);
  }
  if (sa.size() != 1) r.row = sa;
  return r;
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

// The packed form of a constant weight (qgemm_pack_b) is kept between calls, as a plan's constant
// weights are read on every run. Only weights the caller marks constant (ops/constant_weight.h)
// in memory smelt owns: a plan's fused kernels write its arena without bumping versions, and
// caller-owned memory (from_blob, NumPy) changes unseen, so anything else is packed afresh. The
// key: the storage (held, so that its address is not reused while cached) and its version (an
// in-place smelt op repacks), the view, how it was packed (op, K, N, groups), the zero points.
class PackedWeights {
 public:
  using Pack = std::function<QPackedB()>;
  struct Packing {
    bool conv = false;
    int64_t k = 0, n = 0, groups = 1, group = 0;
    bool operator==(const Packing&) const = default;
  };
  std::shared_ptr<const QPackedB> get(const Tensor& w, bool weight_constant, const std::vector<int32_t>& zero_points,
                                      const Packing& packing, const Pack& pack) {
    if (!weight_constant || !w.storage()->owned()) return std::make_shared<const QPackedB>(pack());
    Key key{w.storage().get(), w.storage()->version(), w.offset(), w.shape(), w.strides(), w.dtype(),
            zero_points, packing, qgemm_best_isa()};
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (it->key == key) {
          entries_.splice(entries_.begin(), entries_, it);
          return it->packed;
        }
      }
    }
    auto packed = std::make_shared<const QPackedB>(pack());
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.push_front({key, w.storage(), packed});
    if (entries_.size() > kCapacity) entries_.pop_back();
    return packed;
  }

 private:
  static constexpr size_t kCapacity = 256;  // a model's layers (and groups)
  struct Key {
    const Storage* storage;
    uint64_t version;
    int64_t offset;
    Shape shape, strides;
    DType dtype;
    std::vector<int32_t> zero_points;
    Packing packing;
    QGemmIsa isa;
    bool operator==(const Key&) const = default;
  };
  struct Entry {
    Key key;
    Ref<Storage> keep;
    std::shared_ptr<const QPackedB> packed;
  };
  std::mutex mutex_;
  std::list<Entry> entries_;
};

PackedWeights& packed_weights() {
  static PackedWeights cache;
  return cache;
}

// dst (cols, rows) = src (rows, cols)^T, in parallel over blocks of destination rows.
template <class T>
void transpose_tile(const T* src, T* dst, int64_t rows, int64_t cols) {
  constexpr int64_t kBlock = 32;
  parallel_for(cols, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(rows, 1)), [&](int64_t c0, int64_t c1) {
    for (int64_t rb = 0; rb < rows; rb += kBlock) {
      const int64_t re = std::min(rows, rb + kBlock);
      for (int64_t c = c0; c < c1; ++c) {
        for (int64_t r = rb; r < re; ++r) dst[c * rows + r] = src[r * cols + c];
      }
    }
  });
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
                              const Tensor& y_scale, const Tensor& y_zero_point, bool weight_constant) {
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
  const Tensor bv = contiguous_copy(b.values);
  const Requant r = make_requant(y, a, b, y_scale, y_zero_point, N, op);
  const int64_t batches = shape_numel(batch);
  const size_t out_bytes = dtype_size(y.dtype());
  for (int64_t i = 0; i < batches; ++i) {
    const int64_t at = batch_offset(bv, i);
    const PackedWeights::Packing packing{false, K, N, 1, at};
    const std::shared_ptr<const QPackedB> packed = packed_weights().get(b.values, weight_constant, zb, packing, [&] {
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
                         nullptr, 0));
  }
}

int64_t qconv_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin,
                          int64_t pad_end, int64_t dilation) {
  const int64_t room = in + pad_begin + pad_end - dilation * (kernel - 1) - 1;
  return room < 0 ? 0 : room / stride + 1;
}

void quantized_conv2d_forward(const Tensor& y, const QuantizedTensor& x, const QuantizedTensor& w,
                              const Tensor& bias, const Tensor& y_scale,
                              const Tensor& y_zero_point, const QConvGeometry& g, bool weight_constant) {
  const char* op = y.dtype() == DType::Int32 ? "conv2d_integer" : "qlinear_conv2d";
  const int64_t N = x.values.size(0), C = x.values.size(1), H = x.values.size(2), W = x.values.size(3);
  const int64_t O = w.values.size(0), Cg = w.values.size(1), kH = w.values.size(2), kW = w.values.size(3);
  const int64_t Ho = y.size(2), Wo = y.size(3), P = Ho * Wo;
  const int64_t groups = g.groups, Og = O / groups, K = Cg * kH * kW;
  std::vector<int32_t> zx = zero_point_values(x.zero_point);
  const std::vector<uint8_t> xv = as_unsigned(x.values, &zx);
  const uint8_t pad_value = uint8_t(zx.at(0));
  const std::vector<int32_t> zw = zero_point_values(w.zero_point);
  const Tensor bias_c = bias.defined() ? contiguous_copy(bias) : Tensor();
  const Requant r = make_requant(y, x, w, y_scale, y_zero_point, O, op);
  const size_t out_bytes = dtype_size(y.dtype());
  // The window of an output pixel is gathered in (kh, kw, c) order from a channels-last copy of
  // the image, so each tap is one run of Cg contiguous bytes; the weight is packed in that order.
  std::vector<uint8_t> image(size_t(std::max<int64_t>(H * W * C, 1)));
  std::vector<uint8_t> patches(size_t(std::max<int64_t>(P * K, 1)));
  std::vector<char> tile(size_t(std::max<int64_t>(P * Og, 1)) * out_bytes);
  std::vector<std::shared_ptr<const QPackedB>> packed(static_cast<size_t>(groups));
  for (int64_t grp = 0; grp < groups; ++grp) {
    std::vector<int32_t> zw_group(1, zw.at(0));
    if (zw.size() != 1) zw_group.assign(zw.begin() + grp * Og, zw.begin() + (grp + 1) * Og);
    const PackedWeights::Packing packing{true, K, Og, groups, grp};
    packed[size_t(grp)] = packed_weights().get(w.values, weight_constant, zw_group, packing, [&] {
      const Tensor wv = contiguous_copy(w.values);
      const uint8_t* src = static_cast<const uint8_t*>(wv.raw_data()) + grp * Og * K;  // (Og, Cg, kH, kW)
      std::vector<uint8_t> taps(size_t(std::max<int64_t>(Og * K, 1)));                 // (Og, kH, kW, Cg)
      for (int64_t o = 0; o < Og; ++o) {
        for (int64_t c = 0; c < Cg; ++c) {
          for (int64_t t = 0; t < kH * kW; ++t) taps[size_t(o * K + t * Cg + c)] = src[(o * Cg + c) * kH * kW + t];
        }
      }
      return qgemm_pack_b(taps.data(), wv.dtype() == DType::UInt8, K, Og, 1, K, zw_group, qgemm_best_isa());
    });
  }
  for (int64_t n = 0; n < N; ++n) {
    transpose_tile(xv.data() + n * C * H * W, image.data(), C, H * W);  // (C, HW) -> (HW, C)
    for (int64_t grp = 0; grp < groups; ++grp) {
      // patches[p][(i, j, c)]: output pixel p's window over the group's channels; outside the
      // image the zero point. Rows of output pixels in parallel.
      parallel_for(Ho, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(Wo * K, 1)), [&](int64_t h0, int64_t h1) {
        for (int64_t oh = h0; oh < h1; ++oh) {
          for (int64_t ow = 0; ow < Wo; ++ow) {
            uint8_t* row = patches.data() + (oh * Wo + ow) * K;
            for (int64_t i = 0; i < kH; ++i) {
              const int64_t ih = oh * g.stride[0] - g.pad_begin[0] + i * g.dilation[0];
              for (int64_t j = 0; j < kW; ++j, row += Cg) {
                const int64_t iw = ow * g.stride[1] - g.pad_begin[1] + j * g.dilation[1];
                const bool inside = ih >= 0 && ih < H && iw >= 0 && iw < W;
                const uint8_t* src = image.data() + (inside ? (ih * W + iw) * C + grp * Cg : 0);
                if (Cg >= 16) {  // a library copy; a few channels (an RGB input) inline
                  inside ? (void)std::memcpy(row, src, size_t(Cg)) : (void)std::memset(row, pad_value, size_t(Cg));
                } else {
                  for (int64_t c = 0; c < Cg; ++c) row[c] = inside ? src[c] : pad_value;
                }
              }
            }
          }
        }
      });
      Requant rg = r;
      if (!rg.column.empty()) rg.column.assign(r.column.begin() + grp * Og, r.column.begin() + (grp + 1) * Og);
      const int32_t* bias_g = bias_c.defined() ? bias_c.data<int32_t>() + grp * Og : nullptr;
      qgemm_u8s8(P, patches.data(), K, zx.at(0), *packed[size_t(grp)], output_of(rg, tile.data(), Og, bias_g, 0));
      // (P, Og) -> y[n, grp * Og + o, p]
      char* out = static_cast<char*>(y.raw_data()) + size_t((n * O + grp * Og) * P) * out_bytes;
      if (out_bytes == 1) {
        transpose_tile(reinterpret_cast<const uint8_t*>(tile.data()), reinterpret_cast<uint8_t*>(out), P, Og);
      } else {
        transpose_tile(reinterpret_cast<const int32_t*>(tile.data()), reinterpret_cast<int32_t*>(out), P, Og);
      }
    }
  }
}

}  // namespace smelt::kernels
