// What the quantized kernels (kernels/quantize.cpp, kernels/qconv.cpp) share: their parameters
// read and checked, the requantization multipliers, and the packed forms of constant weights
// kept between calls (docs/quantization.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "kernels/qgemm.h"
#include "kernels/quantize.h"

namespace smelt::kernels {

// The scale's values, each checked positive and finite (`op`, `what` name it in the error).
std::vector<float> scale_values(const Tensor& scale, const char* op, const char* what);
// A zero point's values (uint8, int8 or int32) as int32.
std::vector<int32_t> zero_point_values(const Tensor& zp);

// How products are stored: int32, or requantized with per-column multipliers
// `a_scale * b_scale[n] / y_scale` (and per-row ones `a_scale[m]` when A's scale is per row).
struct Requant {
  QGemmOutput::Type type = QGemmOutput::Type::Int32;
  std::vector<float> column, row;
  int32_t zero_point = 0;
};
Requant make_requant(const Tensor& y, const QuantizedTensor& a, const QuantizedTensor& b,
                     const Tensor& y_scale, const Tensor& y_zero_point, int64_t columns,
                     const char* op);

// The packed form of a constant weight is kept between calls, as a plan's constant weights are
// read on every run. Only weights the caller marks constant (ops/constant_weight.h) in memory
// smelt owns: a plan's fused kernels write its arena without bumping versions, and caller-owned
// memory (from_blob, NumPy) changes unseen, so anything else is packed afresh. The key: the
// storage (held, so that its address is not reused while cached) and its version (an in-place
// smelt op repacks), the view, how it was packed, the zero points and the instruction set.
struct WeightPacking {
  enum class Kind : uint8_t { MatmulB, ConvW, ConvWQuads, OneDnnConvW } kind = Kind::MatmulB;
  int64_t k = 0, n = 0, groups = 1, group = 0;
  uint64_t layout = 0;  // OneDnnConvW: which of oneDNN's weight formats (kernels/qconv_onednn.cpp)
  bool operator==(const WeightPacking&) const = default;
};
std::shared_ptr<const void> kept_packing(const Tensor& w, bool weight_constant,
                                         const std::vector<int32_t>& zero_points,
                                         const WeightPacking& packing,
                                         const std::function<std::shared_ptr<const void>()>& pack);

// The typed form: each Kind is packed into one type, so the cast back is the one that was made.
template <class Packed, class F>
std::shared_ptr<const Packed> kept_packing_of(const Tensor& w, bool weight_constant,
                                              const std::vector<int32_t>& zero_points,
                                              const WeightPacking& packing, const F& pack) {
  return std::static_pointer_cast<const Packed>(kept_packing(
      w, weight_constant, zero_points, packing,
      [&]() -> std::shared_ptr<const void> { return std::make_shared<const Packed>(pack()); }));
}

}  // namespace smelt::kernels
