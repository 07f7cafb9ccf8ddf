// The raw-pointer core of the elementwise loops: iteration over (shape, byte strides, base
// pointers), with no Tensor and no threading library, so generated kernels can #include it (with
// scalar.h) and reuse the same loops. kernels/loops.h adapts it to Tensors and threads it.
//
// An elementwise op sees N operands (output first) with the same logical shape; broadcast inputs
// have stride 0 in the broadcast dims. `StridedLoop` drops size-1 dims and coalesces dims that are
// adjacent in every operand, then walks the outer dims and hands each contiguous run to an inner
// loop. The `Map*Inner` bodies special-case unit strides and stride-0 inputs so the compiler
// vectorizes them.
#pragma once

#include <algorithm>
#include <cstdint>

namespace smelt::kernels {

inline constexpr int kMaxDims = 16;

// On an inner loop: inline every call in it, recursively. The loops are instantiated for every row
// of the elementwise table in one translation unit, and GCC's per-unit inlining budget would
// otherwise leave the larger scalar functions (gelu, erf) as calls, which stops vectorization
// (gelu ran 10x slower).
#if defined(__GNUC__)
#define SMELT_FLATTEN __attribute__((flatten))
#else
#define SMELT_FLATTEN
#endif

template <int N>
struct StridedLoop {
  int ndim = 0;
  int64_t shape[kMaxDims];
  int64_t strides[N][kMaxDims];  // bytes
  char* base[N];

  // `shape` (rank <= kMaxDims) is the output's; byte_strides[k][d] is operand k's stride in dim d
  // (0 where it is broadcast).
  StridedLoop(int rank, const int64_t* out_shape, const int64_t (*byte_strides)[kMaxDims],
              char* const* bases) {
    for (int k = 0; k < N; ++k) base[k] = bases[k];
    // Drop size-1 dims and merge dim d into d-1 when every operand is contiguous across them.
    for (int d = 0; d < rank; ++d) {
      if (out_shape[d] == 1) continue;
      bool merge = ndim > 0;
      for (int k = 0; k < N && merge; ++k) {
        merge = strides[k][ndim - 1] == byte_strides[k][d] * out_shape[d];
      }
      if (merge) {
        shape[ndim - 1] *= out_shape[d];
        for (int k = 0; k < N; ++k) strides[k][ndim - 1] = byte_strides[k][d];
      } else {
        shape[ndim] = out_shape[d];
        for (int k = 0; k < N; ++k) strides[k][ndim] = byte_strides[k][d];
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

  // inner(ptrs, byte_strides, n) over the flat (row-major) element range [begin, end); a range
  // may start and end mid-row. Callers split [0, numel()) across threads as they like.
  template <class Inner>
  void run_range(const Inner& inner, int64_t begin, int64_t end) const {
    const int64_t inner_n = shape[ndim - 1];
    if (inner_n == 0 || begin >= end) return;
    int64_t inner_strides[N];
    for (int k = 0; k < N; ++k) inner_strides[k] = strides[k][ndim - 1];
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
  }
};

// out[i] = f(a[i]) over one run
template <class Out, class A, class F>
struct Map1Inner {
  F f;
  void operator()(char** p, const int64_t* s, int64_t n) const SMELT_FLATTEN {
    Out* o = reinterpret_cast<Out*>(p[0]);
    const A* x = reinterpret_cast<const A*>(p[1]);
    if (s[0] == sizeof(Out) && s[1] == sizeof(A)) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) {
        *reinterpret_cast<Out*>(p[0] + i * s[0]) = f(*reinterpret_cast<const A*>(p[1] + i * s[1]));
      }
    }
  }
};

// out[i] = f(a[i], b[i]) over one run; an operand of stride 0 is loaded once
template <class Out, class A, class B, class F>
struct Map2Inner {
  F f;
  void operator()(char** p, const int64_t* s, int64_t n) const SMELT_FLATTEN {
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
  }
};

// out[i] = f(a[i], b[i], c[i]) over one run
template <class Out, class A, class B, class C, class F>
struct Map3Inner {
  F f;
  void operator()(char** p, const int64_t* s, int64_t n) const SMELT_FLATTEN {
    for (int64_t i = 0; i < n; ++i) {
      *reinterpret_cast<Out*>(p[0] + i * s[0]) =
          f(*reinterpret_cast<const A*>(p[1] + i * s[1]), *reinterpret_cast<const B*>(p[2] + i * s[2]),
            *reinterpret_cast<const C*>(p[3] + i * s[3]));
    }
  }
};

}  // namespace smelt::kernels
