// Permutations as the permute op uses them: out dim i reads input dim perm[i]. Shared by the
// transpose passes.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace smelt::passes {

using Permutation = std::vector<int64_t>;

// The permute node's "dims" attribute with negative dims wrapped.
inline Permutation permutation_of(const ir::Node* permute) {
  Permutation p = permute->attrs.get_ints("dims");
  for (int64_t& d : p) d = wrap_dim(d, int64_t(p.size()), "permute");
  return p;
}

inline bool is_identity(const Permutation& p) {
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] != int64_t(i)) return false;
  }
  return true;
}

// inverse(p)[p[i]] = i: permuting by p then by inverse(p) gives back the input.
inline Permutation inverse(const Permutation& p) {
  Permutation inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[size_t(p[i])] = int64_t(i);
  return inv;
}

// permute(permute(x, first), then) == permute(x, compose(first, then)).
inline Permutation compose(const Permutation& first, const Permutation& then) {
  Permutation c(then.size());
  for (size_t i = 0; i < then.size(); ++i) c[i] = first[size_t(then[i])];
  return c;
}

}  // namespace smelt::passes
