#include "kernels/index.h"

#include <array>
#include <cstring>

#include "kernels/loops.h"
#include "kernels/reduce.h"

namespace smelt::kernels {
namespace {

// `t` itself when row-major, else a row-major copy.
Tensor contiguous_data(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor c = empty(t.shape(), t.dtype());
  copy_strided(c, t);
  return c;
}

int64_t prod(const Shape& s, int64_t begin, int64_t end) {
  int64_t n = 1;
  for (int64_t d = begin; d < end; ++d) n *= s[d];
  return n;
}

// The view t[..., i, ...] along dim (dim dropped).
Tensor select_view(const Tensor& t, int64_t dim, int64_t i) {
  Shape shape = t.shape(), strides = t.strides();
  int64_t offset = t.offset() + i * strides[dim];
  shape.erase(shape.begin() + dim);
  strides.erase(strides.begin() + dim);
  return make_tensor(t.storage(), shape, strides, offset, t.dtype());
}

// Calls line(base) for every "line" of `shape` along `dim`: each combination of the other
// dims' coordinates. base[k] is the element offset of the line's first element in operand k
// (whose strides are strides[k]); the caller walks the line with strides[k][dim]. Lines never
// share an output element in gather/scatter, so they run in parallel.
template <int N, class Line>
void for_each_line(const Shape& shape, int64_t dim, const std::array<const Shape*, N>& strides,
                   const Line& line) {
  const int64_t len = shape[dim];
  Shape outer_shape;
  std::array<Shape, N> outer_strides;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    if (d == dim) continue;
    outer_shape.push_back(shape[d]);
    for (int k = 0; k < N; ++k) outer_strides[k].push_back((*strides[k])[d]);
  }
  const int64_t lines = shape_numel(outer_shape);
  if (lines == 0 || len == 0) return;
  const int64_t rank = int64_t(outer_shape.size());
  parallel_for(lines, std::max<int64_t>(1, kParallelGrain / len), [&](int64_t begin, int64_t end) {
    std::vector<int64_t> coord(size_t(rank), 0);
    int64_t rem = begin;
    for (int64_t d = rank - 1; d >= 0; --d) {
      coord[d] = rem % outer_shape[d];
      rem /= outer_shape[d];
    }
    for (int64_t l = begin; l < end; ++l) {
      std::array<int64_t, N> base{};
      for (int k = 0; k < N; ++k) {
        for (int64_t d = 0; d < rank; ++d) base[k] += coord[d] * outer_strides[k][d];
      }
      line(base);
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++coord[d] < outer_shape[d]) break;
        coord[d] = 0;
      }
    }
  });
}

}  // namespace

void check_index_range(const Tensor& index, int64_t bound, const char* op,
                       const std::string& target) {
  Tensor idx = contiguous_data(index);
  const int64_t* p = idx.data<int64_t>();
  const int64_t n = idx.numel();
  // One branch-free pass (vectorizes); the slow search runs only when something is wrong.
  bool bad = false;
  for (int64_t i = 0; i < n; ++i) bad |= uint64_t(p[i]) >= uint64_t(bound);
  if (!bad) return;
  int64_t at = 0;
  while (uint64_t(p[at]) < uint64_t(bound)) ++at;
  Shape position(idx.shape().size());
  for (int64_t d = int64_t(position.size()) - 1, rem = at; d >= 0; --d) {
    position[d] = rem % idx.shape()[d];
    rem /= idx.shape()[d];
  }
  SMELT_CHECK(false) << op << ": index " << p[at] << " at position " << shape_str(position)
                     << " is out of range for " << target << " of size " << bound << "; valid: "
                     << (bound > 0 ? "[0, " + std::to_string(bound - 1) + "]"
                                   : std::string("none (the dim is empty)"));
}

namespace {

// index_select of single elements: y[o, k] = x[o, index[k]] over `outer` rows of n elements.
template <class T>
void select_elements(T* y, const T* x, int64_t outer, int64_t n, const int64_t* index, int64_t k_count) {
  parallel_for(outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(k_count, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      const T* row = x + o * n;
      T* out = y + o * k_count;
      for (int64_t k = 0; k < k_count; ++k) out[k] = row[index[k]];
    }
  });
}

}  // namespace

void index_select_forward(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor idx = contiguous_data(index);
  const int64_t* ip = idx.data<int64_t>();
  const int64_t k_count = idx.numel();
  if (!x.is_contiguous()) {
    // A small source is cheaper to copy once; a large one is read slice by slice.
    if (x.numel() <= 2 * out.numel()) {
      index_select_forward(out, contiguous_data(x), dim, idx);
      return;
    }
    for (int64_t k = 0; k < k_count; ++k) copy_strided(select_view(out, dim, k), select_view(x, dim, ip[k]));
    return;
  }
  const int64_t outer = prod(x.shape(), 0, dim), n = x.shape()[dim];
  const int64_t inner = prod(x.shape(), dim + 1, x.dim());
  const size_t row_bytes = size_t(inner) * dtype_size(x.dtype());
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  if (row_bytes == 0) return;
  // Rows of one element (the last dim selected: a resize's columns) are copied as typed elements,
  // not a memcpy call each.
  switch (row_bytes) {
    case 1: return select_elements(reinterpret_cast<uint8_t*>(dst), reinterpret_cast<const uint8_t*>(src), outer, n, ip, k_count);
    case 2: return select_elements(reinterpret_cast<uint16_t*>(dst), reinterpret_cast<const uint16_t*>(src), outer, n, ip, k_count);
    case 4: return select_elements(reinterpret_cast<uint32_t*>(dst), reinterpret_cast<const uint32_t*>(src), outer, n, ip, k_count);
    case 8: return select_elements(reinterpret_cast<uint64_t*>(dst), reinterpret_cast<const uint64_t*>(src), outer, n, ip, k_count);
    default: break;
  }
  parallel_for(outer * k_count, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(inner, 1)),
               [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t o = r / k_count, k = r % k_count;
      std::memcpy(dst + size_t(r) * row_bytes, src + size_t(o * n + ip[k]) * row_bytes, row_bytes);
    }
  });
}

void index_add_forward(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index,
                       const Tensor& src) {
  copy_strided(out, x);
  Tensor idx = contiguous_data(index);
  Tensor s = contiguous_data(src);
  const int64_t* ip = idx.data<int64_t>();
  const int64_t k_count = idx.numel();
  const int64_t outer = prod(out.shape(), 0, dim), n = out.shape()[dim];
  const int64_t inner = prod(out.shape(), dim + 1, out.dim());
  SMELT_DISPATCH_NUMERIC(out.dtype(), "index_add", [&] {
    using T = scalar_t;
    T* y = out.data<T>();
    const T* sp = s.data<T>();
    // Adds columns [i0, i1) of every selected row of block o; k ascending keeps sums repeatable.
    auto add_block = [&](int64_t o, int64_t i0, int64_t i1) {
      for (int64_t k = 0; k < k_count; ++k) {
        T* yr = y + (o * n + ip[k]) * inner;
        const T* sr = sp + (o * k_count + k) * inner;
        for (int64_t i = i0; i < i1; ++i) yr[i] += sr[i];
      }
    };
    // Different blocks (or columns) never touch the same output element.
    const int64_t work = std::max<int64_t>(k_count * inner, 1);
    if (outer > 1) {
      parallel_for(outer, std::max<int64_t>(1, kParallelGrain / work), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) add_block(o, 0, inner);
      });
    } else if (outer == 1) {
      parallel_for(inner, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(k_count, 1)),
                   [&](int64_t b, int64_t e) { add_block(0, b, e); });
    }
  });
}

void gather_forward(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  const int64_t* ip = index.strided_data<int64_t>();
  const int64_t os = out.strides()[dim], is = index.strides()[dim], xs = x.strides()[dim];
  // x's strides serve for the non-indexed dims: there index's coordinates are valid in x too.
  SMELT_DISPATCH_ALL(x.dtype(), "gather", [&] {
    using T = scalar_t;
    T* y = out.strided_data<T>();
    const T* xp = x.strided_data<T>();
    for_each_line<3>(index.shape(), dim, {&out.strides(), &index.strides(), &x.strides()},
                     [&](const std::array<int64_t, 3>& base) {
      for (int64_t j = 0; j < index.shape()[dim]; ++j) {
        y[base[0] + j * os] = xp[base[2] + ip[base[1] + j * is] * xs];
      }
    });
  });
}

void scatter_add_forward(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index,
                         const Tensor& src) {
  copy_strided(out, x);
  const int64_t* ip = index.strided_data<int64_t>();
  const int64_t ys = out.strides()[dim], is = index.strides()[dim], ss = src.strides()[dim];
  SMELT_DISPATCH_NUMERIC(out.dtype(), "scatter_add", [&] {
    using T = scalar_t;
    T* y = out.strided_data<T>();
    const T* sp = src.strided_data<T>();
    // A line's targets differ from every other line's in a non-indexed coordinate.
    for_each_line<3>(index.shape(), dim, {&out.strides(), &index.strides(), &src.strides()},
                     [&](const std::array<int64_t, 3>& base) {
      for (int64_t j = 0; j < index.shape()[dim]; ++j) {
        y[base[0] + ip[base[1] + j * is] * ys] += sp[base[2] + j * ss];
      }
    });
  });
}

void one_hot_forward(const Tensor& out, const Tensor& indices, int64_t num_classes) {
  Tensor idx = contiguous_data(indices);
  const int64_t* ip = idx.data<int64_t>();
  int64_t* y = out.data<int64_t>();
  const int64_t n = idx.numel();
  std::memset(y, 0, size_t(n * num_classes) * sizeof(int64_t));
  for (int64_t i = 0; i < n; ++i) y[i * num_classes + ip[i]] = 1;
}

void cat_forward(const Tensor& out, const std::vector<Tensor>& xs, int64_t dim) {
  const int64_t outer = prod(out.shape(), 0, dim), out_n = out.shape()[dim];
  const int64_t inner = prod(out.shape(), dim + 1, out.dim());
  const size_t esize = dtype_size(out.dtype());
  char* dst = static_cast<char*>(out.raw_data());
  int64_t at = 0;  // where the current input starts along dim
  for (const Tensor& x : xs) {
    const int64_t n = x.shape()[dim];
    if (x.numel() > 0 && x.is_contiguous()) {
      // Each outer block of x is one contiguous run of n * inner elements.
      const size_t run = size_t(n * inner) * esize;
      const char* src = static_cast<const char*>(x.raw_data());
      parallel_for(outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n * inner, 1)),
                   [&](int64_t b, int64_t e) {
        // memmove: memory that overlaps the output is a planner's bug (the compile fuzzer plants
        // lifetimes too short to catch them); it must give wrong values, not undefined behaviour
        for (int64_t o = b; o < e; ++o) {
          char* to = dst + size_t((o * out_n + at) * inner) * esize;
          const char* from = src + size_t(o) * run;
          if (to != from) std::memmove(to, from, run);
        }
      });
    } else if (x.numel() > 0) {
      Shape strides = out.strides();
      Tensor window = make_tensor(out.storage(), x.shape(), strides,
                                  out.offset() + at * strides[dim], out.dtype());
      copy_strided(window, x);
    }
    at += n;
  }
}

}  // namespace smelt::kernels
