// TensorOptions: what a creation function may be told besides the values and the shape.
//
//   zeros({2, 3}, Float64)
//   ones({3}, TensorOptions().dtype(Float64).requires_grad(true))
//   tensor({{1, 2}, {3, 4}}, Float64)
//
// A DType converts implicitly, so every creation function that took a DType still takes one.
// An unset dtype means the function's own default (float32 for zeros, int64 for integer lists).
#pragma once

#include <optional>

#include "smelt/dtype.h"

namespace smelt {

// The dtypes by short names, as PyTorch's torch.float32 ...: `a.to(Float64)`.
inline constexpr DType Float32 = DType::Float32;
inline constexpr DType Float64 = DType::Float64;
inline constexpr DType Int64 = DType::Int64;
inline constexpr DType Bool = DType::Bool;
inline constexpr DType UInt8 = DType::UInt8;
inline constexpr DType Int8 = DType::Int8;
inline constexpr DType Int32 = DType::Int32;

class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(DType dtype) : dtype_(dtype) {}  // NOLINT: implicit, so a DType is an option

  TensorOptions dtype(DType d) const {
    TensorOptions o = *this;
    o.dtype_ = d;
    return o;
  }
  TensorOptions requires_grad(bool on) const {
    TensorOptions o = *this;
    o.requires_grad_ = on;
    return o;
  }

  std::optional<DType> dtype() const { return dtype_; }
  DType dtype_or(DType fallback) const { return dtype_.value_or(fallback); }
  bool requires_grad() const { return requires_grad_; }

 private:
  std::optional<DType> dtype_;
  bool requires_grad_ = false;
};

}  // namespace smelt
