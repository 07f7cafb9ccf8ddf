// Every elementwise op's shape rule accepts exactly the dtypes its kernel runs. A rule that
// accepts more lets a graph verify and then fail inside a pass (fold runs the kernel at compile
// time): smelt fuzz found pow accepting int64. Swept over every op and dtype rather than waiting
// for the fuzzer to draw the combination.
#include <string>

#include "ops/dispatch.h"
#include "ops/elementwise_bind.h"
#include "smelt/creation.h"
#include "support/check.h"

namespace smelt {
namespace {

// Attributes that make each elementwise op well formed; ops not named need none.
ops::Attrs attrs_for(const std::string& name) {
  if (name == "leaky_relu") return {{"negative_slope", 0.1}};
  if (name == "softplus") return {{"beta", 1.0}, {"threshold", 20.0}};
  if (name == "clamp") return {{"min", -1.0}, {"max", 1.0}};
  if (name == "gelu") return {{"approximate", int64_t(0)}};
  if (name == "cast") return {{"dtype", DType::Float32}};
  return {};
}

TEST(ShapeRuleSweep, ElementwiseRulesAgreeWithKernels) {
  int checked = 0;
  for (int i = 0; i < ops::kOpCount; ++i) {
    const auto op = static_cast<ops::OpId>(i);
    const ops::OpInfo& info = ops::op_info(op);
    if (info.kind != ops::OpKind::Elementwise || info.arity < 1 || ops::mutates_any(op)) continue;
    const ops::Attrs attrs = attrs_for(info.name);
    for (DType dtype : {DType::Float32, DType::Float64, DType::Int64, DType::Bool}) {
      // where's condition is bool; every other operand has the dtype under test. Ones: no data
      // the kernels refuse (an integer divisor of zero).
      std::vector<Tensor> inputs;
      for (int k = 0; k < info.arity; ++k) {
        inputs.push_back(ones({2, 3}, std::string(info.name) == "where" && k == 0 ? DType::Bool : dtype));
      }
      std::vector<ops::TensorMeta> metas;
      for (const Tensor& t : inputs) metas.push_back(ops::meta_of(t));
      bool rule_accepts = true;
      try {
        ops::infer_shape(op, metas, attrs);
      } catch (const Error&) {
        rule_accepts = false;
      }
      if (!rule_accepts) continue;
      ++checked;
      try {
        ops::call(op, inputs, attrs);
      } catch (const Error& e) {
        ADD_FAILURE() << info.name << " on " << dtype_name(dtype)
                      << ": the shape rule accepts it but the kernel refuses: " << e.what();
      }
    }
  }
  EXPECT_GT(checked, 40);  // the sweep reached the ops
}

}  // namespace
}  // namespace smelt
