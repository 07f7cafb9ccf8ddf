// IntOr2: a 2-D size (kernel, stride, padding, dilation, output size) given as PyTorch takes it:
// one number for both spatial dims (`3`), or one per dim (`{3, 1}`).
//
//   conv2d(x, w, b, /*stride=*/2, /*padding=*/1)
//   max_pool2d(x, 2)
//
// A value of another length passes through unchanged, so that the op's own check reports it
// with the argument's name ("conv2d: stride must have 2 values"). Empty means "not given" (a
// pooling stride then defaults to the kernel size).
#pragma once

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace smelt {

class IntOr2 {
 public:
  IntOr2() = default;
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  IntOr2(T v) : values_{static_cast<int64_t>(v)} {}                // NOLINT: implicit, as in PyTorch
  IntOr2(std::initializer_list<int64_t> v) : values_(v) {}         // NOLINT
  IntOr2(std::vector<int64_t> v) : values_(std::move(v)) {}        // NOLINT

  bool empty() const { return values_.empty(); }
  // The per-dim values: one number repeated for both dims, anything else as given.
  std::vector<int64_t> pair() const {
    if (values_.size() == 1) return {values_[0], values_[0]};
    return values_;
  }

 private:
  std::vector<int64_t> values_;
};

}  // namespace smelt
