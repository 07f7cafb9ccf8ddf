// Scalar: a plain number where PyTorch takes a Python number (`a + 1`, `a > 0.5`, `a *= 2`).
//
// It remembers whether the number was written as a bool, an integer or a floating-point value,
// because that decides the result's dtype as in PyTorch: the tensor's dtype, unless the number is
// of a higher category (bool < integer < floating), then that category's default (int64,
// float32). So an int64 tensor + 1 stays int64, an int64 tensor + 1.5 is float32, a float64
// tensor + 1 stays float64. Integers are kept exactly (int64 extremes survive).
#pragma once

#include <concepts>
#include <cstdint>
#include <limits>

#include "smelt/dtype.h"
#include "smelt/error.h"

namespace smelt {

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Float };

  Scalar(bool v) : kind_(Kind::Bool), int_(v ? 1 : 0), float_(v ? 1.0 : 0.0) {}  // NOLINT
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  Scalar(T v) : kind_(Kind::Int), int_(static_cast<int64_t>(v)), float_(static_cast<double>(v)) {  // NOLINT
    if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(int64_t)) {
      SMELT_CHECK(v <= static_cast<T>(std::numeric_limits<int64_t>::max()))
          << "Scalar: the unsigned value " << v << " does not fit int64 (at most 2^63 - 1)";
    }
  }
  template <std::floating_point T>
  Scalar(T v) : kind_(Kind::Float), int_(0), float_(static_cast<double>(v)) {}  // NOLINT

  Kind kind() const { return kind_; }
  bool is_floating() const { return kind_ == Kind::Float; }
  double to_double() const { return float_; }
  int64_t to_int() const { return int_; }  // integers and bools only (exact)

 private:
  Kind kind_;
  int64_t int_;
  double float_;
};

// The dtype of `tensor op number` under PyTorch's promotion (see above).
DType promote_with_scalar(DType tensor, const Scalar& number);

}  // namespace smelt
