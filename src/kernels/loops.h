// Elementwise loops over strided, broadcast Tensors: the Tensor-facing, threaded adapter of the
// raw-pointer loops in kernels/loop_core.h.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "base/parallel.h"
#include "kernels/loop_core.h"
#include "smelt/tensor.h"

namespace smelt::kernels {

// A StridedLoop over Tensors: `operands[0]` is the output; inputs are broadcast to its shape (by
// stride 0).
template <int N>
struct ElementwiseLoop : StridedLoop<N> {
  explicit ElementwiseLoop(const std::array<const Tensor*, N>& operands)
      : StridedLoop<N>(checked_rank(*operands[0]), operands[0]->shape().data(),
                       byte_strides(operands).data, bases(operands).data) {}

  // Splits the flat index range across threads; each chunk starts mid-row if it must.
  template <class Inner>
  void run(const Inner& inner, int64_t grain = kParallelGrain) const {
    const int64_t total = this->numel();
    if (total == 0) return;
    parallel_for(total, grain, [&](int64_t begin, int64_t end) { this->run_range(inner, begin, end); });
  }

 private:
  struct Strides {
    int64_t data[N][kMaxDims];
  };
  struct Bases {
    char* data[N];
  };
  static int checked_rank(const Tensor& out) {
    const int rank = int(out.dim());
    SMELT_CHECK(rank <= kMaxDims) << "elementwise kernels support up to " << kMaxDims
                                  << " dims, got " << rank;
    return rank;
  }
  static Strides byte_strides(const std::array<const Tensor*, N>& operands) {
    Strides s;
    const Shape& out_shape = operands[0]->shape();
    const int rank = int(out_shape.size());
    for (int k = 0; k < N; ++k) {
      const Tensor& t = *operands[k];
      const int lead = rank - int(t.dim());
      const int64_t es = int64_t(dtype_size(t.dtype()));
      for (int d = 0; d < rank; ++d) {
        s.data[k][d] = (d < lead || t.shape()[d - lead] == 1) ? 0 : t.strides()[d - lead] * es;
      }
    }
    return s;
  }
  static Bases bases(const std::array<const Tensor*, N>& operands) {
    Bases b;
    for (int k = 0; k < N; ++k) b.data[k] = static_cast<char*>(operands[k]->raw_data());
    return b;
  }
};

// out[i] = f(a[i])
template <class Out, class A, class F>
void map1(const Tensor& out, const Tensor& a, F f) {
  ElementwiseLoop<2>({&out, &a}).run(Map1Inner<Out, A, F>{f});
}

// out[i] = f(a[i], b[i]) with broadcasting
template <class Out, class A, class B, class F>
void map2(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  ElementwiseLoop<3>({&out, &a, &b}).run(Map2Inner<Out, A, B, F>{f});
}

// out[i] = f(a[i], b[i], c[i]) with broadcasting
template <class Out, class A, class B, class C, class F>
void map3(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, F f) {
  ElementwiseLoop<4>({&out, &a, &b, &c}).run(Map3Inner<Out, A, B, C, F>{f});
}

// Calls fn.template operator()<T>() with T the C++ type of `dtype`.
#define SMELT_DISPATCH_FLOATING(dtype, where, ...)                                          \
  [&] {                                                                                    \
    switch (dtype) {                                                                       \
      case ::smelt::DType::Float32: { using scalar_t = float; return __VA_ARGS__(); }      \
      case ::smelt::DType::Float64: { using scalar_t = double; return __VA_ARGS__(); }     \
      default:                                                                             \
        SMELT_CHECK(false) << where << ": dtype " << ::smelt::dtype_name(dtype)            \
                           << " is not supported; valid: float32, float64";                \
    }                                                                                      \
  }()

// Floats and the byte dtypes of quantized values (max pooling: max commutes with dequantizing).
#define SMELT_DISPATCH_FLOATING_OR_BYTES(dtype, where, ...)                                 \
  [&] {                                                                                    \
    switch (dtype) {                                                                       \
      case ::smelt::DType::Float32: { using scalar_t = float; return __VA_ARGS__(); }      \
      case ::smelt::DType::Float64: { using scalar_t = double; return __VA_ARGS__(); }     \
      case ::smelt::DType::UInt8: { using scalar_t = uint8_t; return __VA_ARGS__(); }      \
      case ::smelt::DType::Int8: { using scalar_t = int8_t; return __VA_ARGS__(); }       \
      default:                                                                             \
        SMELT_CHECK(false) << where << ": dtype " << ::smelt::dtype_name(dtype)            \
                           << " is not supported; valid: float32, float64, uint8, int8";   \
    }                                                                                      \
  }()

// The identity of max: -inf for floats, the lowest value for integers.
template <class T>
constexpr T lowest_value() {
  if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::lowest();
}

#define SMELT_DISPATCH_ALL(dtype, where, ...)                                              \
  [&] {                                                                                    \
    switch (dtype) {                                                                       \
      case ::smelt::DType::Float32: { using scalar_t = float; return __VA_ARGS__(); }      \
      case ::smelt::DType::Float64: { using scalar_t = double; return __VA_ARGS__(); }     \
      case ::smelt::DType::Int64: { using scalar_t = int64_t; return __VA_ARGS__(); }     \
      case ::smelt::DType::Bool: { using scalar_t = bool; return __VA_ARGS__(); }          \
      case ::smelt::DType::UInt8: { using scalar_t = uint8_t; return __VA_ARGS__(); }      \
      case ::smelt::DType::Int32: { using scalar_t = int32_t; return __VA_ARGS__(); }      \
      case ::smelt::DType::Int8: { using scalar_t = int8_t; return __VA_ARGS__(); }       \
    }                                                                                      \
  }()

#define SMELT_DISPATCH_NUMERIC(dtype, where, ...)                                          \
  [&] {                                                                                    \
    switch (dtype) {                                                                       \
      case ::smelt::DType::Float32: { using scalar_t = float; return __VA_ARGS__(); }      \
      case ::smelt::DType::Float64: { using scalar_t = double; return __VA_ARGS__(); }     \
      case ::smelt::DType::Int64: { using scalar_t = int64_t; return __VA_ARGS__(); }     \
      case ::smelt::DType::Int32: { using scalar_t = int32_t; return __VA_ARGS__(); }      \
      default:                                                                             \
        SMELT_CHECK(false) << where << ": dtype " << ::smelt::dtype_name(dtype)            \
                           << " is not supported; valid: float32, float64, int64, int32";  \
    }                                                                                      \
  }()

}  // namespace smelt::kernels
