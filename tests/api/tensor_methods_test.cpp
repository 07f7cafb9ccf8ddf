// Tensor's op methods against the op table and the free functions: every row of ops.def has a
// method or is listed as functional-only (checked at compile time), and every method gives
// bit-for-bit what its free function gives (checked at run time, one call per method).
#include <cmath>
#include <set>
#include <string_view>

#include "support/check.h"
#include "support/helpers.h"

namespace smelt {
namespace {

using testing::identical;

// Detects a member `name` of Tensor, overloaded or not: a class deriving from Tensor and from a
// struct with a data member `name` makes `&Probe::name` ambiguous exactly when Tensor has one.
#define SMELT_OP(name, ...)                                                        \
  struct NameOnly_##name {                                                         \
    int name;                                                                      \
  };                                                                               \
  struct Probe_##name : Tensor, NameOnly_##name {};                                \
  template <class P>                                                               \
  concept Unambiguous_##name = requires { &P::name; };                             \
  constexpr bool kHasMethod_##name = !Unambiguous_##name<Probe_##name>;
#include "ops/ops.def"
#undef SMELT_OP

// The detector itself: a method it must see, a row it must not.
static_assert(kHasMethod_exp && kHasMethod_sum && kHasMethod_slice);
static_assert(!kHasMethod_conv2d_grad_input && !kHasMethod_group);

// Rows with no method, as in PyTorch (F.conv2d, F.embedding, torch.cat, ... are functions only),
// or internal (gradient ops, group). Each must still lack a method: a row is either here or has one.
constexpr std::string_view kFunctionalOnly[] = {
    "cast",  // the method is to(dtype)
    "nll_loss", "conv2d", "conv2d_grad_input", "conv2d_grad_weight", "max_pool2d",
    "max_pool2d_grad", "avg_pool2d", "avg_pool2d_grad", "adaptive_avg_pool2d",
    "adaptive_avg_pool2d_grad", "layer_norm", "batch_norm", "dropout", "embedding", "one_hot",
    "cat", "slice_grad", "group", "conv2d_blocked", "to_blocked", "from_blocked", "max_pool2d_blocked",
    // quantized inference (smelt/quantize.h)
    "quantize_linear", "dequantize_linear", "qlinear_matmul", "matmul_integer", "qlinear_conv2d",
    "conv2d_integer"};

constexpr bool functional_only(std::string_view name) {
  for (std::string_view n : kFunctionalOnly) {
    if (n == name) return true;
  }
  return false;
}

#define SMELT_OP(name, ...)                                                                     \
  static_assert(kHasMethod_##name != functional_only(#name),                                    \
                "op " #name ": add a Tensor method (include/smelt/tensor.h, "                   \
                "src/ops/tensor_op_methods.cpp) or list it in kFunctionalOnly, not both");
#include "ops/ops.def"
#undef SMELT_OP

using testing::random_tensor;

struct MethodCase {
  const char* op;  // the ops.def row it covers
  std::function<Tensor()> method, function;
};

std::vector<MethodCase> method_cases() {
  Tensor a = random_tensor({3, 4}, -2, 2, 1), b = random_tensor({3, 4}, 0.5, 2, 2);
  Tensor pos = random_tensor({3, 4}, 0.1, 3, 3), m = random_tensor({4, 2}, -1, 1, 4);
  Tensor cond = gt(a, b);
  Tensor idx = from_vector({2, 0, 2}, {3});
  Tensor gidx = from_vector({0, 3, 1, 1, 2, 0}, {3, 2});
  Tensor src = random_tensor({3, 3}, -1, 1, 5);
  Tensor unit = random_tensor({3, 4}, -0.9, 0.9, 6), one_plus = random_tensor({3, 4}, 1, 4, 7);
  return {
      {"neg", [=] { return a.neg(); }, [=] { return neg(a); }},
      {"exp", [=] { return a.exp(); }, [=] { return exp(a); }},
      {"log", [=] { return pos.log(); }, [=] { return log(pos); }},
      {"sqrt", [=] { return pos.sqrt(); }, [=] { return sqrt(pos); }},
      {"rsqrt", [=] { return pos.rsqrt(); }, [=] { return rsqrt(pos); }},
      {"abs", [=] { return a.abs(); }, [=] { return abs(a); }},
      {"sign", [=] { return a.sign(); }, [=] { return sign(a); }},
      {"erf", [=] { return a.erf(); }, [=] { return erf(a); }},
      {"relu", [=] { return a.relu(); }, [=] { return relu(a); }},
      {"leaky_relu", [=] { return a.leaky_relu(0.2); }, [=] { return leaky_relu(a, 0.2); }},
      {"sigmoid", [=] { return a.sigmoid(); }, [=] { return sigmoid(a); }},
      {"tanh", [=] { return a.tanh(); }, [=] { return tanh(a); }},
      {"gelu", [=] { return a.gelu(GeluApprox::Tanh); }, [=] { return gelu(a, GeluApprox::Tanh); }},
      {"silu", [=] { return a.silu(); }, [=] { return silu(a); }},
      {"floor", [=] { return a.floor(); }, [=] { return floor(a); }},
      {"ceil", [=] { return a.ceil(); }, [=] { return ceil(a); }},
      {"round", [=] { return a.round(); }, [=] { return round(a); }},
      {"sin", [=] { return a.sin(); }, [=] { return sin(a); }},
      {"cos", [=] { return a.cos(); }, [=] { return cos(a); }},
      {"tan", [=] { return a.tan(); }, [=] { return tan(a); }},
      {"asin", [=] { return unit.asin(); }, [=] { return asin(unit); }},
      {"acos", [=] { return unit.acos(); }, [=] { return acos(unit); }},
      {"atan", [=] { return a.atan(); }, [=] { return atan(a); }},
      {"sinh", [=] { return a.sinh(); }, [=] { return sinh(a); }},
      {"cosh", [=] { return a.cosh(); }, [=] { return cosh(a); }},
      {"asinh", [=] { return a.asinh(); }, [=] { return asinh(a); }},
      {"acosh", [=] { return one_plus.acosh(); }, [=] { return acosh(one_plus); }},
      {"atanh", [=] { return unit.atanh(); }, [=] { return atanh(unit); }},
      {"softplus", [=] { return a.softplus(2.0, 1.0); }, [=] { return softplus(a, 2.0, 1.0); }},
      {"clamp", [=] { return a.clamp(-0.5, std::nullopt); }, [=] { return clamp(a, -0.5, std::nullopt); }},
      {"add", [=] { return a.add(b); }, [=] { return add(a, b); }},
      {"add", [=] { return a.add(2); }, [=] { return add(a, 2); }},
      {"sub", [=] { return a.sub(b); }, [=] { return sub(a, b); }},
      {"mul", [=] { return a.mul(b); }, [=] { return mul(a, b); }},
      {"div", [=] { return a.div(b); }, [=] { return div(a, b); }},
      {"pow", [=] { return pos.pow(b); }, [=] { return pow(pos, b); }},
      {"pow", [=] { return pos.pow(2.5); }, [=] { return pow(pos, 2.5); }},
      {"maximum", [=] { return a.maximum(b); }, [=] { return maximum(a, b); }},
      {"minimum", [=] { return a.minimum(b); }, [=] { return minimum(a, b); }},
      {"eq", [=] { return a.eq(a); }, [=] { return eq(a, a); }},
      {"ne", [=] { return a.ne(b); }, [=] { return ne(a, b); }},
      {"lt", [=] { return a.lt(b); }, [=] { return lt(a, b); }},
      {"le", [=] { return a.le(0); }, [=] { return le(a, 0); }},
      {"gt", [=] { return a.gt(b); }, [=] { return gt(a, b); }},
      {"ge", [=] { return a.ge(0.5); }, [=] { return ge(a, 0.5); }},
      {"where", [=] { return a.where(cond, b); }, [=] { return where(cond, a, b); }},
      {"sum", [=] { return a.sum({1}, true); }, [=] { return sum(a, {1}, true); }},
      {"mean", [=] { return a.mean({0}); }, [=] { return mean(a, {0}); }},
      {"amax", [=] { return a.amax({1}); }, [=] { return amax(a, {1}); }},
      {"amax", [=] { return a.max(); }, [=] { return max(a); }},
      {"amin", [=] { return a.amin({0}, true); }, [=] { return amin(a, {0}, true); }},
      {"amin", [=] { return a.min({1}); }, [=] { return min(a, {1}); }},
      {"prod", [=] { return a.prod({1}, true); }, [=] { return prod(a, {1}, true); }},
      {"var", [=] { return a.var({1}, 0); }, [=] { return var(a, {1}, 0); }},
      {"argmax", [=] { return a.argmax(1, true); }, [=] { return argmax(a, 1, true); }},
      {"cumsum", [=] { return a.cumsum(1, true, false); }, [=] { return cumsum(a, 1, true, false); }},
      {"topk", [=] { return a.topk(2).values; }, [=] { return topk(a, 2).values; }},
      {"topk", [=] { return a.topk(3, 0, false).indices; }, [=] { return topk(a, 3, 0, false).indices; }},
      {"softmax", [=] { return a.softmax(-1); }, [=] { return softmax(a, -1); }},
      {"log_softmax", [=] { return a.log_softmax(0); }, [=] { return log_softmax(a, 0); }},
      {"matmul", [=] { return a.matmul(m); }, [=] { return matmul(a, m); }},
      {"index_select", [=] { return a.index_select(1, idx); }, [=] { return index_select(a, 1, idx); }},
      {"index_add", [=] { return a.index_add(1, idx, src); }, [=] { return index_add(a, 1, idx, src); }},
      {"gather", [=] { return a.gather(1, gidx); }, [=] { return gather(a, 1, gidx); }},
      {"scatter_add", [=] { return a.scatter_add(1, gidx, b.slice(1, 0, 2)); },
       [=] { return scatter_add(a, 1, gidx, b.slice(1, 0, 2)); }},
      {"reshape", [=] { return a.reshape({4, 3}); }, [=] { return reshape(a, {4, 3}); }},
      {"permute", [=] { return a.permute({1, 0}); }, [=] { return permute(a, {1, 0}); }},
      {"slice", [=] { return a.slice(1, 1, 4, 2); }, [=] { return slice(a, 1, 1, 4, 2); }},
      {"expand", [=] { return a.slice(0, 0, 1).expand({5, 4}); },
       [=] { return expand(a.slice(0, 0, 1), {5, 4}); }},
      {"contiguous", [=] { return a.t().contiguous(); }, [=] { return contiguous(a.t()); }},
  };
}

TEST(TensorMethods, EachMethodGivesItsFreeFunctionsResult) {
  for (const MethodCase& c : method_cases()) {
    EXPECT_TRUE(identical(c.method(), c.function())) << c.op;
  }
  // and a float64 / non-contiguous operand goes through the same path
  Tensor x = random_tensor({4, 3}, -1, 1, 9).t();
  EXPECT_TRUE(identical(x.exp().sum({1}, true), sum(exp(x), {1}, true)));
  EXPECT_TRUE(identical(x.to(Float32), cast(x, DType::Float32)));
}

TEST(TensorMethods, EveryOpWithAMethodIsCovered) {
  std::set<std::string> covered;
  for (const MethodCase& c : method_cases()) covered.insert(c.op);
  std::vector<std::string> with_method;
#define SMELT_OP(name, ...) \
  if (kHasMethod_##name) with_method.push_back(#name);
#include "ops/ops.def"
#undef SMELT_OP
  for (const std::string& op : with_method) {
    EXPECT_TRUE(covered.count(op)) << "Tensor::" << op << " has no case in method_cases()";
  }
}

TEST(TensorMethods, ChainsReadLikePyTorch) {
  // (x.exp() / x.exp().sum(-1, keepdim=True)) == x.softmax(-1)
  Tensor x = random_tensor({2, 5}, -3, 3, 11);
  Tensor manual = x.exp() / x.exp().sum({-1}, true);
  EXPECT_TRUE(testing::all_close(manual, x.softmax(-1), 1e-12, 1e-12));
}

}  // namespace
}  // namespace smelt
