// Helpers for the naive reference implementations in tests/ops: walk every position of a shape
// and build tensors from a function of the position. Slow on purpose: obviously right.
#pragma once

#include <functional>
#include <vector>

#include "support/check.h"
#include "support/errors.h"

namespace smelt::testing {

// Every position of `shape`, in row-major order (one empty position for a 0-dim shape).
inline std::vector<Shape> positions(const Shape& shape) {
  std::vector<Shape> out;
  const int64_t n = shape_numel(shape);
  Shape pos(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(pos);
    for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
      if (++pos[d] < shape[d]) break;
      pos[d] = 0;
    }
  }
  return out;
}

// Row-major offset of `pos` in `shape`.
inline int64_t flat_index(const Shape& shape, const Shape& pos) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + pos[d];
  return f;
}

// A contiguous tensor with value f(position) at each position.
inline Tensor tensor_from(const Shape& shape, DType dtype,
                          const std::function<double(const Shape&)>& f) {
  std::vector<double> values;
  for (const Shape& p : positions(shape)) values.push_back(f(p));
  return from_vector(values, shape, dtype);
}

// d loss(x) / dx with create_graph, so that gradcheck of it checks second derivatives. Works
// inside gradcheck's no-grad finite differences too (x then becomes a fresh leaf).
inline Tensor grad_of(const std::function<Tensor(const Tensor&)>& loss, const Tensor& x) {
  autograd::EnableGradGuard grad_mode;
  Tensor leaf = x;
  if (!leaf.requires_grad()) {
    leaf = x.detach();
    leaf.set_requires_grad();
  }
  return autograd::grad({loss(leaf)}, {leaf}, {}, false, /*create_graph=*/true)[0];
}

}  // namespace smelt::testing
