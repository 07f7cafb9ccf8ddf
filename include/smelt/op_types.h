// What an op's rules see: its attributes, the shape and dtype of its operands, and the context of
// its gradient rule. Built-in ops (src/ops/) and ops users register (smelt/custom_op.h) share them.
//
// Attributes are a small ordered list of named values (ints, floats, int lists, strings, dtypes),
// ordered so that printing is deterministic; lookups are linear (an op has a handful). Reading an
// attribute that is missing or has another type is the caller's mistake: smelt::Error naming the
// attribute and the type wanted.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "smelt/dtype.h"
#include "smelt/tensor.h"

namespace smelt {

// A dtype is its own alternative, printed as its short name (`{dtype=f32}`).
using AttrValue = std::variant<int64_t, double, std::vector<int64_t>, std::string, DType>;

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items) : items_(items) {}

  Attrs& set(const std::string& name, AttrValue value);
  bool has(const std::string& name) const { return find(name) != nullptr; }
  int64_t get_int(const std::string& name) const;
  int64_t get_int(const std::string& name, int64_t fallback) const;
  double get_float(const std::string& name) const;  // ints convert
  double get_float(const std::string& name, double fallback) const;
  const std::vector<int64_t>& get_ints(const std::string& name) const;
  const std::string& get_string(const std::string& name) const;
  DType get_dtype(const std::string& name) const;

  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  bool operator==(const Attrs& o) const { return items_ == o.items_; }

 private:
  const AttrValue* find(const std::string& name) const;
  const AttrValue& require(const std::string& name) const;
  std::vector<std::pair<std::string, AttrValue>> items_;
};

// Shape and dtype of a tensor, without data: what shape rules compute.
struct TensorMeta {
  Shape shape;
  DType dtype = DType::Float32;
  int64_t nbytes() const { return shape_numel(shape) * int64_t(dtype_size(dtype)); }
  bool operator==(const TensorMeta& o) const { return shape == o.shape && dtype == o.dtype; }
};

// What a gradient rule sees. `grads[k]` is the gradient of output k (zeros when none flowed);
// `needs(i)`: whether input i wants a gradient (a rule may skip the work of the others).
struct GradContext {
  const std::vector<Tensor>& inputs;
  const std::vector<Tensor>& outputs;
  const std::vector<Tensor>& grads;
  const Attrs& attrs;
  const std::vector<bool>& needs_input_grad;
  bool needs(size_t i) const { return i < needs_input_grad.size() && needs_input_grad[i]; }
};

}  // namespace smelt
