// 2-D pooling kernels over (N, C, H, W) planes; every (n, c) plane is independent, so threads split
// the N C planes. Indices of max pooling are flat positions ih * W + iw within the input plane
// (as PyTorch), -1 for a window that holds no input pixel.
//
// Letters: P = N C planes, H W input size, Ho Wo output size.
#pragma once

#include <cstdint>

#include "smelt/tensor.h"

namespace smelt::kernels {

// Max pooling's winner rule (max_forward_row, kernels/pool.cpp): a larger value, or the first NaN,
// wins; v is the candidate, best the value so far. The block form applies it lane by lane to GCC
// vectors.
template <class T>
inline T max_pool_take(T v, T best) {
  return (v > best || (v != v && best == best)) ? v : best;
}
template <class V>
inline V max_pool_take_block(V v, V best) {
  return ((v > best) | ((v != v) & (best == best))) ? v : best;
}

struct Pool2dWindow {
  int64_t kH = 1, kW = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
};

// All tensors contiguous; outputs allocated by the caller. `indices` undefined (Tensor()): the
// values only (a graph that never reads the indices), the same values bit for bit.
void max_pool2d_forward(const Pool2dWindow& win, const Tensor& y /*(N, C, Ho, Wo)*/,
                        const Tensor& indices /*(N, C, Ho, Wo) Int64*/,
                        const Tensor& x /*(N, C, H, W)*/);
// max_pool2d_forward's values only (kernels/pool_max_values.cpp): the same bits.
void max_pool2d_values_forward(const Pool2dWindow& win, const Tensor& y /*(N, C, Ho, Wo)*/,
                               const Tensor& x /*(N, C, H, W)*/);
// dx = 0, then dx[p, indices[p, o]] += dy[p, o].
void max_pool2d_backward(const Tensor& dx /*(N, C, H, W)*/, const Tensor& dy /*(N, C, Ho, Wo)*/,
                         const Tensor& indices /*(N, C, Ho, Wo) Int64*/);
// out[p, o] = g[p, indices[p, o]] (0 where the index is -1): the adjoint of max_pool2d_backward.

// Window taps dil apart. count_include_pad: the divisor counts the taps on padding positions too
// (those inside the padded image), else only the taps on input pixels.
void avg_pool2d_forward(const Pool2dWindow& win, bool count_include_pad,
                        const Tensor& y /*(N, C, Ho, Wo)*/, const Tensor& x /*(N, C, H, W)*/);
void avg_pool2d_backward(const Pool2dWindow& win, bool count_include_pad,
                         const Tensor& dx /*(N, C, H, W)*/, const Tensor& dy /*(N, C, Ho, Wo)*/);

// Output cell (i, j) averages rows [floor(i H / Ho), ceil((i + 1) H / Ho)) and likewise columns.
void adaptive_avg_pool2d_forward(const Tensor& y /*(N, C, Ho, Wo)*/, const Tensor& x /*(N, C, H, W)*/);
void adaptive_avg_pool2d_backward(const Tensor& dx /*(N, C, H, W)*/,
                                  const Tensor& dy /*(N, C, Ho, Wo)*/);

}  // namespace smelt::kernels
