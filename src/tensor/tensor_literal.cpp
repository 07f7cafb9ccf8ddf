// tensor({{1, 2}, {3, 4}}): a tensor from a nested list, as torch.tensor.
#include <cstring>
#include <string>

#include "smelt/creation.h"

namespace smelt {
namespace {

// Walks the list depth-first: the shape comes from the first path, and every other list at the
// same depth must have the same length (and be a list, not a number). `path` names where a
// mismatch sits, as Python would index it.
void collect(const NestedList& node, size_t depth, Shape& shape, std::vector<Scalar>& leaves,
             const std::string& path) {
  if (node.is_leaf()) {
    SMELT_CHECK(depth == shape.size())
        << "tensor: ragged nested list: a number at " << (path.empty() ? "the top" : path)
        << " where a list of " << shape[depth] << " was expected";
    leaves.push_back(node.value());
    return;
  }
  const int64_t n = int64_t(node.items().size());
  if (depth == shape.size()) {
    SMELT_CHECK(leaves.empty()) << "tensor: ragged nested list: a list at " << path
                                << " where a number was expected";
    shape.resize(depth + 1, n);  // (not push_back: GCC 12 warns -Warray-bounds on it, wrongly)
  } else {
    SMELT_CHECK(shape[depth] == n) << "tensor: ragged nested list: " << (path.empty() ? "the top" : path)
                                   << " has " << n << " items, other lists at that depth have "
                                   << shape[depth];
  }
  for (int64_t i = 0; i < n; ++i) {
    collect(node.items()[size_t(i)], depth + 1, shape, leaves, path + "[" + std::to_string(i) + "]");
  }
}

// PyTorch's inference: float32 if any value is floating, else int64 if any is an integer, else
// bool (and float32 for an empty list).
DType infer_dtype(const std::vector<Scalar>& leaves) {
  if (leaves.empty()) return DType::Float32;
  bool any_int = false;
  for (const Scalar& s : leaves) {
    if (s.kind() == Scalar::Kind::Float) return DType::Float32;
    any_int |= s.kind() == Scalar::Kind::Int;
  }
  return any_int ? DType::Int64 : DType::Bool;
}

}  // namespace

Tensor tensor(const NestedList& values, TensorOptions options) {
  Shape shape;
  std::vector<Scalar> leaves;
  collect(values, 0, shape, leaves, "");
  // a list whose first path ends in an empty list has no numbers to fix the deeper dims
  SMELT_CHECK(int64_t(leaves.size()) == shape_numel(shape, "tensor"))
      << "tensor: ragged nested list: " << leaves.size() << " numbers for shape " << shape_str(shape);
  const DType dtype = options.dtype_or(infer_dtype(leaves));
  Tensor t = empty(shape, dtype);
  for (size_t i = 0; i < leaves.size(); ++i) {
    // each number through full(), which keeps integers exact and refuses what the dtype cannot hold
    Tensor one = full({}, leaves[i], dtype);
    std::memcpy(static_cast<char*>(t.raw_data()) + i * dtype_size(dtype), one.raw_data(),
                dtype_size(dtype));
  }
  if (options.requires_grad()) t.set_requires_grad(true);
  return t;
}

}  // namespace smelt
