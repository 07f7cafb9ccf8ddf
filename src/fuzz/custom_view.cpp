#include "fuzz/custom_view.h"

#include <algorithm>

#include "ops/custom_ops.h"
#include "smelt/creation.h"
#include "smelt/ops.h"

namespace smelt::fuzz {

const CustomOp& diagonal_view_op() {
  static const CustomOp op = [] {
    OpDefinition def;
    def.name = "fuzz_diagonal";
    def.shape = [](const std::vector<TensorMeta>& in, const Attrs&) {
      Shape s = in[0].shape;
      SMELT_CHECK(s.size() >= 2) << "fuzz_diagonal takes a matrix or a batch of them";
      const int64_t n = std::min(s[s.size() - 2], s.back());
      s.pop_back();
      s.back() = n;
      return std::vector<TensorMeta>{{s, in[0].dtype}};
    };
    def.view = [](const Shape&, const Shape& strides, int64_t offset, const Shape&, const Attrs&) {
      StridedLayout l{Shape(strides.begin(), strides.end() - 1), offset};
      l.strides.back() = strides[strides.size() - 2] + strides.back();
      return l;
    };
    def.backward = [](const GradContext& c) -> std::vector<Tensor> {
      const Shape& in = c.inputs[0].shape();
      const int64_t n = in[in.size() - 2], m = in.back(), k = c.grads[0].shape().back();
      Tensor g = c.grads[0];
      if (n > k) {  // rows past the diagonal's end get no gradient
        Shape pad = g.shape();
        pad.back() = n - k;
        g = cat({g, zeros(pad, g.dtype())}, -1);
      }
      const Tensor on = eq(arange(n).unsqueeze(1), arange(m).unsqueeze(0));
      return {where(on, g.unsqueeze(-1), scalar_like(g, 0.0))};
    };
    def.backward_reads_inputs = false;
    def.backward_reads_outputs = false;
    return register_op(def);
  }();
  return op;
}

ops::OpId diagonal_view_id() {
  ops::OpId id;
  const bool found = ops::custom_op_from_name(diagonal_view_op().name(), &id);
  SMELT_INTERNAL_CHECK(found) << "fuzz: the diagonal view op is not registered";
  return id;
}

}  // namespace smelt::fuzz
