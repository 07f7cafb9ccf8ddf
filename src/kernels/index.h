// Indexing and joining kernels: gathers and scatters along one dim, one-hot, concatenation.
//
// Letters: along the indexed dim, N is the source's size and K the number of indices; "outer"
// is the product of the dims before it and "inner" of the dims after it.
//
// The kernels assume valid indices: callers run check_index_range first, which throws (from the
// calling thread, never from inside a parallel region) when an index is out of range.
#pragma once

#include <string>
#include <vector>

#include "smelt/tensor.h"

namespace smelt::kernels {

// Throws smelt::Error unless every value of `index` (Int64, any shape and strides) is in
// [0, bound). The message names `op`, the first bad value, its position in `index`, what it
// indexes (`target`, e.g. "dim 1 of x (4, 5)") and the valid range.
void check_index_range(const Tensor& index, int64_t bound, const char* op,
                       const std::string& target);

// out (outer, K, inner) = x (outer, N, inner) at rows index[k]; index (any shape) is read as a
// flat list of K values. `out` is contiguous; x may have any strides; any dtype.
void index_select_forward(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index);

// out (outer, N, inner) = x, then out[:, index[k], :] += src[:, k, :] for every k (duplicates
// accumulate, in order of k). `out` contiguous; x, index (K), src (outer, K, inner) any strides.
void index_add_forward(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index,
                       const Tensor& src);

// out[p] = x[p with p[dim] := index[p]] for every position p of index; out (index's shape)
// contiguous; x and index any strides; any dtype.
void gather_forward(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index);

// out = x, then out[p with p[dim] := index[p]] += src[p] for every position p of index.
// out (x's shape) contiguous; x, index, src any strides.
void scatter_add_forward(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index,
                         const Tensor& src);

// out (..., C) Int64 = 1 at [..., indices[...]], 0 elsewhere; out contiguous.
void one_hot_forward(const Tensor& out, const Tensor& indices, int64_t num_classes);

// out = the xs joined along dim; out contiguous; xs any strides, same dtype as out.
void cat_forward(const Tensor& out, const std::vector<Tensor>& xs, int64_t dim);

}  // namespace smelt::kernels
