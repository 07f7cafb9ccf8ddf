// Elementwise loops over strided, broadcast operands.
//
// An elementwise op sees N operands (output first) with the same logical shape; broadcast inputs
// have stride 0 in the broadcast dims. `ElementwiseLoop` coalesces dims that are adjacent in every
// operand, then walks the outer dims and hands each contiguous run to an inner loop. Inner loops
// get byte strides; the common cases (all unit stride, or an input with stride 0) are
// special-cased by `map*` so the compiler vectorizes them.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/parallel.h"
#include "smelt/tensor.h"

namespace smelt::kernels {

inline constexpr int kMaxDims = 16;

// On an inner loop: inline every call in it, recursively. The loops below are instantiated for
// every row of the elementwise table in one translation unit, and GCC's per-unit inlining budget
// would otherwise leave the larger scalar functions (gelu, erf) as calls, which stops
// vectorization (gelu went 10x slower).
#if defined(__GNUC__)
#define SMELT_FLATTEN __attribute__((flatten))
#else
#define SMELT_FLATTEN
#endif

template <int N>
struct ElementwiseLoop {
  int ndim = 0;
  int64_t shape[kMaxDims];
  int64_t strides[N][kMaxDims];  // bytes
  char* base[N];

  // `operands[0]` is the output; inputs are broadcast to its shape (by stride 0).
  explicit ElementwiseLoop(const std::array<const Tensor*, N>& operands) {
    const Shape& out_shape = operands[0]->shape();
    const int rank = int(out_shape.size());
    SMELT_CHECK(rank <= kMaxDims) << "elementwise kernels support up to " << kMaxDims
                                  << " dims, got " << rank;
    int64_t raw[N][kMaxDims];
    for (int k = 0; k < N; ++k) {
      const Tensor& t = *operands[k];
      const int lead = rank - int(t.dim());
      const int64_t es = int64_t(dtype_size(t.dtype()));
      for (int d = 0; d < rank; ++d) {
        raw[k][d] = (d < lead || t.shape()[d - lead] == 1) ? 0 : t.strides()[d - lead] * es;
      }
      base[k] = static_cast<char*>(t.raw_data());
    }
    // Drop size-1 dims and merge dim d into d-1 when every operand is contiguous across them.
    for (int d = 0; d < rank; ++d) {
      if (out_shape[d] == 1) continue;
      bool merge = ndim > 0;
      for (int k = 0; k < N && merge; ++k) {
        merge = strides[k][ndim - 1] == raw[k][d] * out_shape[d];
      }
      if (merge) {
        shape[ndim - 1] *= out_shape[d];
        for (int k = 0; k < N; ++k) strides[k][ndim - 1] = raw[k][d];
      } else {
        shape[ndim] = out_shape[d];
        for (int k = 0; k < N; ++k) strides[k][ndim] = raw[k][d];
        ++ndim;
      }
    }
    if (ndim == 0) {  // a single element
      shape[0] = 1;
      for (int k = 0; k < N; ++k) strides[k][0] = 0;
      ndim = 1;
    }
  }

  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= shape[d];
    return n;
  }

  // inner(ptrs, byte_strides, n) processes n elements along the innermost dim.
  template <class Inner>
  void run(const Inner& inner, int64_t grain = kParallelGrain) const {
    const int64_t inner_n = shape[ndim - 1];
    const int64_t outer_n = numel() / std::max<int64_t>(inner_n, 1);
    if (inner_n == 0 || outer_n == 0) return;
    int64_t inner_strides[N];
    for (int k = 0; k < N; ++k) inner_strides[k] = strides[k][ndim - 1];
    // Split the flattened index range; each chunk starts mid-row if it must.
    parallel_for(outer_n * inner_n, grain, [&](int64_t begin, int64_t end) {
      int64_t idx[kMaxDims];
      int64_t rem = begin / inner_n;
      for (int d = ndim - 2; d >= 0; --d) {
        idx[d] = rem % shape[d];
        rem /= shape[d];
      }
      int64_t col = begin % inner_n;
      int64_t pos = begin;
      while (pos < end) {
        char* ptrs[N];
        for (int k = 0; k < N; ++k) {
          int64_t off = col * inner_strides[k];
          for (int d = 0; d < ndim - 1; ++d) off += idx[d] * strides[k][d];
          ptrs[k] = base[k] + off;
        }
        int64_t n = std::min(inner_n - col, end - pos);
        inner(ptrs, inner_strides, n);
        pos += n;
        col = 0;
        for (int d = ndim - 2; d >= 0; --d) {
          if (++idx[d] < shape[d]) break;
          idx[d] = 0;
        }
      }
    });
  }
};

// out[i] = f(a[i])
template <class Out, class A, class F>
void map1(const Tensor& out, const Tensor& a, F f) {
  ElementwiseLoop<2> loop({&out, &a});
  loop.run([&](char** p, const int64_t* s, int64_t n) SMELT_FLATTEN {
    Out* o = reinterpret_cast<Out*>(p[0]);
    const A* x = reinterpret_cast<const A*>(p[1]);
    if (s[0] == sizeof(Out) && s[1] == sizeof(A)) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) {
        *reinterpret_cast<Out*>(p[0] + i * s[0]) = f(*reinterpret_cast<const A*>(p[1] + i * s[1]));
      }
    }
  });
}

// out[i] = f(a[i], b[i]) with broadcasting
template <class Out, class A, class B, class F>
void map2(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  ElementwiseLoop<3> loop({&out, &a, &b});
  loop.run([&](char** p, const int64_t* s, int64_t n) SMELT_FLATTEN {
    Out* o = reinterpret_cast<Out*>(p[0]);
    const A* x = reinterpret_cast<const A*>(p[1]);
    const B* y = reinterpret_cast<const B*>(p[2]);
    if (s[0] == sizeof(Out) && s[1] == sizeof(A) && s[2] == sizeof(B)) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
    } else if (s[0] == sizeof(Out) && s[1] == sizeof(A) && s[2] == 0) {
      const B y0 = *y;
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y0);
    } else if (s[0] == sizeof(Out) && s[1] == 0 && s[2] == sizeof(B)) {
      const A x0 = *x;
      for (int64_t i = 0; i < n; ++i) o[i] = f(x0, y[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) {
        *reinterpret_cast<Out*>(p[0] + i * s[0]) =
            f(*reinterpret_cast<const A*>(p[1] + i * s[1]), *reinterpret_cast<const B*>(p[2] + i * s[2]));
      }
    }
  });
}

// out[i] = f(a[i], b[i], c[i]) with broadcasting
template <class Out, class A, class B, class C, class F>
void map3(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, F f) {
  ElementwiseLoop<4> loop({&out, &a, &b, &c});
  loop.run([&](char** p, const int64_t* s, int64_t n) SMELT_FLATTEN {
    for (int64_t i = 0; i < n; ++i) {
      *reinterpret_cast<Out*>(p[0] + i * s[0]) =
          f(*reinterpret_cast<const A*>(p[1] + i * s[1]), *reinterpret_cast<const B*>(p[2] + i * s[2]),
            *reinterpret_cast<const C*>(p[3] + i * s[3]));
    }
  });
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

#define SMELT_DISPATCH_ALL(dtype, where, ...)                                              \
  [&] {                                                                                    \
    switch (dtype) {                                                                       \
      case ::smelt::DType::Float32: { using scalar_t = float; return __VA_ARGS__(); }      \
      case ::smelt::DType::Float64: { using scalar_t = double; return __VA_ARGS__(); }     \
      case ::smelt::DType::Int64: { using scalar_t = int64_t; return __VA_ARGS__(); }     \
      case ::smelt::DType::Bool: { using scalar_t = bool; return __VA_ARGS__(); }          \
      case ::smelt::DType::UInt8: { using scalar_t = uint8_t; return __VA_ARGS__(); }      \
    }                                                                                      \
  }()

#define SMELT_DISPATCH_NUMERIC(dtype, where, ...)                                          \
  [&] {                                                                                    \
    switch (dtype) {                                                                       \
      case ::smelt::DType::Float32: { using scalar_t = float; return __VA_ARGS__(); }      \
      case ::smelt::DType::Float64: { using scalar_t = double; return __VA_ARGS__(); }     \
      case ::smelt::DType::Int64: { using scalar_t = int64_t; return __VA_ARGS__(); }     \
      default:                                                                             \
        SMELT_CHECK(false) << where << ": dtype " << ::smelt::dtype_name(dtype)            \
                           << " is not supported; valid: float32, float64, int64";         \
    }                                                                                      \
  }()

}  // namespace smelt::kernels
