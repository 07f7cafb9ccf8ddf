#include "codegen/lower_space.h"

#include "codegen/lower.h"

namespace smelt::codegen::detail {

Map reshape_input_map(const Shape& in, const Shape& out, const Map& m, size_t space) {
  const size_t r = space;
  Map res{std::vector<std::vector<int64_t>>(in.size(), std::vector<int64_t>(r, 0)),
          std::vector<int64_t>(in.size(), 0), {}};
  size_t i = 0, o = 0;
  while (i < in.size() || o < out.size()) {
    // One chunk: input dims [i, i2) and output dims [o, o2) with equal products.
    size_t i2 = i, o2 = o;
    int64_t pi = 1, po = 1;
    do {
      if (pi <= po && i2 < in.size()) {
        pi *= in[i2++];
      } else if (o2 < out.size()) {
        po *= out[o2++];
      } else {
        pi *= in[i2++];
      }
    } while ((pi != po || (i2 < in.size() && in[i2] == 1) || (o2 < out.size() && out[o2] == 1)) &&
             (i2 < in.size() || o2 < out.size()));
    int big = -1, count = 0;
    for (size_t d = i; d < i2; ++d) {
      if (in[d] != 1) big = int(d), ++count;
    }
    if (count > 1) throw CannotLower{"reshape of a computed value merges dims " + shape_str(in) + " -> " + shape_str(out)};
    if (big >= 0) {
      int64_t scale = 1;
      for (size_t d = o2; d-- > o;) {
        for (size_t j = 0; j < r; ++j) res.rows[size_t(big)][j] += scale * m.rows[d][j];
        res.base[size_t(big)] += scale * m.base[d];
        scale *= out[d];
      }
    }
    i = i2;
    o = o2;
  }
  return res;
}

void simplify_space(LoopKernel& k, const std::vector<int64_t>& space, size_t n_outer_in, bool reductions,
                    bool split) {
  std::vector<int64_t> dims = space;
  size_t n_outer = n_outer_in;
  auto strides = [&](size_t a, size_t j) -> int64_t& {
    Access& acc = k.accesses[a];
    return j < n_outer ? acc.outer_strides[j] : acc.inner_strides[j - n_outer];
  };
  auto erase_dim = [&](size_t j) {
    for (Access& acc : k.accesses) {
      if (j < n_outer) {
        acc.outer_strides.erase(acc.outer_strides.begin() + std::ptrdiff_t(j));
      } else {
        acc.inner_strides.erase(acc.inner_strides.begin() + std::ptrdiff_t(j - n_outer));
      }
    }
    dims.erase(dims.begin() + std::ptrdiff_t(j));
    if (j < n_outer) --n_outer;
  };
  for (size_t j = dims.size(); j-- > 0;) {
    if (dims[j] == 1) erase_dim(j);
  }
  for (size_t j = dims.size(); j-- > 1;) {
    if (j == n_outer && n_outer != 0) continue;  // never merge across the outer/inner boundary
    bool mergeable = true;
    for (size_t a = 0; a < k.accesses.size(); ++a) {
      if (strides(a, j - 1) != strides(a, j) * dims[j]) mergeable = false;
    }
    if (!mergeable) continue;
    for (size_t a = 0; a < k.accesses.size(); ++a) strides(a, j - 1) = strides(a, j);
    dims[j - 1] *= dims[j];
    erase_dim(j);
  }
  if (!reductions && !dims.empty()) {
    // Without reductions every dim starts outer: the last becomes the inner loop, and a single
    // long dim splits in two so that the outer loop has something to share between threads.
    for (Access& acc : k.accesses) {
      const int64_t last = acc.outer_strides.back();
      acc.outer_strides.pop_back();
      acc.inner_strides = {last};
    }
    n_outer = dims.size() - 1;
    const int64_t block = split_block(dims.back(), 4096);
    if (split && n_outer == 0 && block >= 256 && block < dims.back()) {
      for (Access& acc : k.accesses) acc.outer_strides = {acc.inner_strides[0] * block};
      dims = {dims[0] / block, block};
      n_outer = 1;
    }
  }
  k.outer.assign(dims.begin(), dims.begin() + std::ptrdiff_t(n_outer));
  k.inner.assign(dims.begin() + std::ptrdiff_t(n_outer), dims.end());
}

void tile_space(LoopKernel& k, const std::vector<int64_t>& space, size_t cols, bool reductions) {
  if (reductions) throw CannotLower{"the tile form has no reductions"};
  if (space.size() < cols) {
    throw CannotLower{"the tile form needs " + std::to_string(cols) + " column dims, the space " +
                      shape_str(space) + " has fewer"};
  }
  const size_t first = space.size() - cols;
  int64_t extent = 1;
  for (size_t j = first; j < space.size(); ++j) extent *= space[j];
  for (Access& a : k.accesses) {
    // The column dims, size 1 ones skipped, must be walked as one: stride[j] = stride[j+1] * n[j+1].
    int64_t inner = 0, expected = 0;
    bool seen = false;
    for (size_t j = space.size(); j-- > first;) {
      if (space[j] == 1) continue;
      if (!seen) {
        inner = expected = a.outer_strides[j];
        seen = true;
      } else if (a.outer_strides[j] != expected) {
        throw CannotLower{"an access does not walk the tile's column dims " + shape_str(space) + " as one"};
      }
      expected *= space[j];
    }
    a.outer_strides.resize(first);
    a.inner_strides = {inner};
  }
  k.outer.assign(space.begin(), space.begin() + std::ptrdiff_t(first));
  k.inner = {extent};
  k.tiled = true;
}

}  // namespace smelt::codegen::detail
