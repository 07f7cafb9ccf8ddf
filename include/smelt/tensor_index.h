// What Tensor::index takes, one entry per indexed dim, as Python's `a[1:, ::2, 0, None, ...]`:
//
//   a.index({Slice(1, None), Slice(None, None, 2), 0, None, Ellipsis})
//
// Slice(start, stop, step): Python's bounds: None (std::nullopt) is the whole extent on that
// side, negative counts from the end, out-of-range bounds clamp; step >= 1 (PyTorch refuses
// negative steps too). An integer picks one element and drops the dim (negative counts from the
// end; out of range is an error). None inserts a dim of size 1; Ellipsis stands for every dim not
// named. The result is a view (no copy).
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <variant>

namespace smelt {

inline constexpr std::nullopt_t None = std::nullopt;

struct EllipsisIndex {};
inline constexpr EllipsisIndex Ellipsis{};

struct Slice {
  Slice(std::optional<int64_t> start = std::nullopt, std::optional<int64_t> stop = std::nullopt,
        std::optional<int64_t> step = std::nullopt)
      : start(start), stop(stop), step(step) {}
  std::optional<int64_t> start, stop, step;
};

class TensorIndex {
 public:
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  TensorIndex(T i) : value_(static_cast<int64_t>(i)) {}  // NOLINT
  TensorIndex(Slice s) : value_(s) {}                     // NOLINT
  TensorIndex(std::nullopt_t) : value_(std::nullopt) {}   // NOLINT: a new dim of size 1
  TensorIndex(EllipsisIndex) : value_(EllipsisIndex{}) {} // NOLINT

  bool is_integer() const { return std::holds_alternative<int64_t>(value_); }
  bool is_slice() const { return std::holds_alternative<Slice>(value_); }
  bool is_none() const { return std::holds_alternative<std::nullopt_t>(value_); }
  bool is_ellipsis() const { return std::holds_alternative<EllipsisIndex>(value_); }
  int64_t integer() const { return std::get<int64_t>(value_); }
  const Slice& slice() const { return std::get<Slice>(value_); }

 private:
  std::variant<int64_t, Slice, std::nullopt_t, EllipsisIndex> value_;
};

}  // namespace smelt
