#include "kernels/quantize_params.h"
#include "kernels/transpose.h"

#include <algorithm>
#include <cmath>
#include <list>
#include <mutex>

#include "smelt/error.h"

namespace smelt::kernels {
namespace {

bool is_quantized_dtype(DType d) { return d == DType::UInt8 || d == DType::Int8; }

class PackedWeights {
 public:
  std::shared_ptr<const void> get(const Tensor& w, bool weight_constant, const std::vector<int32_t>& zero_points,
                                  const WeightPacking& packing,
                                  const std::function<std::shared_ptr<const void>()>& pack) {
    if (!weight_constant || !w.storage()->owned()) return pack();
    Key key{w.storage().get(), w.storage()->version(), w.offset(), w.shape(), w.strides(), w.dtype(),
            zero_points, packing,
            packing.kind == WeightPacking::Kind::MatmulB ? qgemm_best_isa() : qgemm_s8u8_best_isa()};
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (it->key == key) {
          entries_.splice(entries_.begin(), entries_, it);
          return it->packed;
        }
      }
    }
    std::shared_ptr<const void> packed = pack();
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
    WeightPacking packing;
    QGemmIsa isa;
    bool operator==(const Key&) const = default;
  };
  struct Entry {
    Key key;
    Ref<Storage> keep;
    std::shared_ptr<const void> packed;
  };
  std::mutex mutex_;
  std::list<Entry> entries_;
};

}  // namespace

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
  // (data<T>() checks the tensor on every call: once per dtype, not once per value)
  switch (z.dtype()) {
    case DType::UInt8: return std::vector<int32_t>(z.data<uint8_t>(), z.data<uint8_t>() + z.numel());
    case DType::Int8: return std::vector<int32_t>(z.data<int8_t>(), z.data<int8_t>() + z.numel());
    case DType::Int32: return std::vector<int32_t>(z.data<int32_t>(), z.data<int32_t>() + z.numel());
    default: SMELT_INTERNAL_CHECK(false) << "a zero point of dtype " << dtype_name(z.dtype());
  }
  return {};
}

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
    r.column.push_back(sa.size() == 1 ? sa[0] * param_at(sb, n) / sy[0] : param_at(sb, n) / sy[0]);
    // Each scale is finite, their product need not be (1e20 * 1e20): requantizing by inf or 0
    // has no meaning.
    SMELT_CHECK(std::isfinite(r.column.back()) && r.column.back() > 0)
        << op << ": the requantization multiplier (first scale * second scale / output scale) of column " << n
        << " is " << r.column.back() << "; valid: a positive finite number";
  }
  if (sa.size() != 1 && !r.column.empty()) {
    r.row = sa;  // multipliers row[m] * column[n]: their extremes are the extremes' products
    const auto [rlo, rhi] = std::minmax_element(r.row.begin(), r.row.end());
    const auto [clo, chi] = std::minmax_element(r.column.begin(), r.column.end());
    SMELT_CHECK(std::isfinite(*rhi * *chi) && *rlo * *clo > 0)
        << op << ": a requantization multiplier (first scale[m] * second scale[n] / output scale) is "
        << (std::isfinite(*rhi * *chi) ? *rlo * *clo : *rhi * *chi) << "; valid: a positive finite number";
  }
  return r;
}

std::shared_ptr<const void> kept_packing(const Tensor& w, bool weight_constant,
                                         const std::vector<int32_t>& zero_points,
                                         const WeightPacking& packing,
                                         const std::function<std::shared_ptr<const void>()>& pack) {
  static PackedWeights cache;
  return cache.get(w, weight_constant, zero_points, packing, pack);
}

}  // namespace smelt::kernels
