// The op table's honesty: what ops.def says about each row's outputs, aliasing, mutation and
// differentiability is what its kernel and gradient rule do. Passes trust these columns (CSE
// merges pure ops, the memory planner reuses buffers of fresh outputs, DCE drops unused ones), so
// a column that lies is a silent wrong answer somewhere else.
//
// A workload calls every op through the public API, backward included (the *_grad ops are only
// reached there), with a dispatch hook that runs each kernel itself and checks the call: the
// inputs are real, valid inputs for that op, made by the code that normally makes them.
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "ops/dispatch.h"
#include "smelt/autograd.h"
#include "smelt/quantize.h"
#include "support/check.h"

namespace smelt {
namespace {

using ops::OpId;

struct RecordedCall {
  std::vector<Tensor> inputs;  // copies taken before the kernel ran
  ops::Attrs attrs;
};

// The bytes of a tensor's elements in row-major order (dtype-exact for every dtype smelt has).
std::vector<double> elements(const Tensor& t) { return t.to_vector(); }

bool same_elements(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(&a[i], &b[i], sizeof(double)) != 0) return false;
  }
  return true;
}

class HookScope {
 public:
  explicit HookScope(ops::DispatchHook* hook) : prev_(ops::set_dispatch_hook(hook)) {}
  ~HookScope() { ops::set_dispatch_hook(prev_); }

 private:
  ops::DispatchHook* prev_;
};

// Runs every kernel itself (as the dispatcher would without a hook) and checks its row.
class CheckingHook final : public ops::DispatchHook {
 public:
  std::vector<Tensor> record(OpId op, const std::vector<Tensor>& inputs, const ops::Attrs& attrs,
                             const std::vector<ops::TensorMeta>& metas) override {
    HookScope eager(nullptr);  // the checks' own clones and copies are not workload calls
    const ops::OpInfo& info = ops::op_info(op);
    const std::string name = info.name;
    std::vector<std::vector<double>> before;
    for (const Tensor& t : inputs) before.push_back(elements(t));

    std::vector<Tensor> outs = ops::compute(op, inputs, attrs, metas);

    // outputs: as many as the row and the shape rule say, with the shape rule's metas
    EXPECT_EQ(int(outs.size()), info.num_outputs) << name << ": the kernel's output count";
    EXPECT_EQ(outs.size(), metas.size()) << name << ": the shape rule's output count";
    for (size_t k = 0; k < outs.size() && k < metas.size(); ++k) {
      EXPECT_TRUE(outs[k].shape() == metas[k].shape && outs[k].dtype() == metas[k].dtype)
          << name << ": output " << k << " is " << dtype_name(outs[k].dtype()) << " "
          << shape_str(outs[k].shape()) << ", the shape rule says " << dtype_name(metas[k].dtype)
          << " " << shape_str(metas[k].shape);
    }
    // aliasing: an output shares storage only with the input its row names
    for (size_t k = 0; k < outs.size(); ++k) {
      const int declared = ops::aliases(op, int(k));
      for (size_t j = 0; j < inputs.size(); ++j) {
        if (int(j) == declared) continue;
        EXPECT_NE(outs[k].storage().get(), inputs[j].storage().get())
            << name << ": output " << k << " shares storage with input " << j << ", but the row "
            << (declared < 0 ? "declares it fresh" : "names input " + std::to_string(declared));
      }
      for (size_t m = 0; m < k; ++m) {
        if (declared >= 0 && ops::aliases(op, int(m)) == declared) continue;
        EXPECT_NE(outs[k].storage().get(), outs[m].storage().get())
            << name << ": outputs " << m << " and " << k << " share storage";
      }
    }
    // mutation: an input the row does not declare written is bitwise unchanged
    for (size_t j = 0; j < inputs.size(); ++j) {
      if (ops::mutates(op, int(j))) continue;
      EXPECT_TRUE(same_elements(elements(inputs[j]), before[j]))
          << name << ": input " << j << " changed, but the row declares no write to it";
    }
    std::vector<Tensor> copies;
    for (const Tensor& t : inputs) copies.push_back(t.detach().clone());
    calls[op].push_back({copies, attrs});
    return outs;
  }

  // Random ops run eagerly under this hook: they read and advance the default generator.
  Tensor random_state() override { return generator_state_tensor(default_generator().state()); }
  void set_random_state(const Tensor& state) override {
    default_generator().set_state(generator_state_from_tensor(state));
  }

  std::map<OpId, std::vector<RecordedCall>> calls;
};

Tensor leaf(const Tensor& t) { return t.detach().clone().set_requires_grad(); }

// Calls every op of the table at least once, on small valid inputs.
void workload() {
  Generator gen(11);
  const DType f64 = DType::Float64;
  Tensor x = uniform({3, 4}, 0.5, 2.0, f64, &gen), y = uniform({4}, 0.5, 2.0, f64, &gen);
  for (auto fn : {neg, exp, log, sqrt, rsqrt, abs, sign, erf, relu, sigmoid, tanh, silu}) fn(x);
  // x in [0.5, 2): acosh needs >= 1 and asin/acos/atanh |x| < 1, so those get their own inputs.
  for (auto fn : {floor, ceil, round, sin, cos, tan, atan, sinh, cosh, asinh}) fn(x);
  for (auto fn : {asin, acos, atanh}) fn(x * 0.4);
  acosh(x + 1.0);
  leaky_relu(x, 0.1);
  gelu(x, GeluApprox::None);
  gelu(x, GeluApprox::Tanh);
  softplus(x, 2.0, 10.0);
  clamp(x, 0.8, 1.5);
  clamp(x, std::nullopt, 1.0);
  cast(x, DType::Float32);
  cast(x, DType::Int64);
  using Binary = Tensor (*)(const Tensor&, const Tensor&);
  for (Binary fn : std::initializer_list<Binary>{add, sub, mul, div, maximum, minimum, eq, ne, lt,
                                                 le, gt, ge}) {
    fn(x, y);
  }
  pow(x, y);
  where(gt(x, y), x, y);

  for (auto fn : {sum, mean, amax, amin, prod}) fn(x, {1}, false);
  var(x, {0}, 1, true);
  argmax(x, 1, false);
  softmax(x, 1);
  nll_loss(log_softmax(x, 1), from_vector(std::vector<int64_t>{0, 3, 1}, {3}));
  matmul(x, uniform({4, 2}, -1, 1, f64, &gen));

  // contractions, pools and views with their backward: the *_grad ops
  Tensor image = leaf(uniform({2, 2, 6, 6}, -1, 1, f64, &gen));
  Tensor weight = leaf(uniform({3, 2, 3, 3}, -1, 1, f64, &gen));
  Tensor conv = conv2d(image, weight, Tensor(), {1, 1}, {1, 1});
  Tensor pooled = max_pool2d(conv, {2, 2}) + avg_pool2d(conv, {2, 2}) +
                  adaptive_avg_pool2d(conv, {3, 3});
  Tensor moved = contiguous(permute(slice(pooled, 3, 0, 2), {0, 1, 3, 2}));
  Tensor flat = reshape(moved, {-1});
  sum(expand(reshape(sum(flat), {1, 1}), {2, 3})).backward();
  contiguous(x);  // already contiguous: the input itself

  Tensor features = uniform({4, 3, 2, 2}, -1, 1, f64, &gen);
  Tensor scale = uniform({3}, 0.5, 1.5, f64, &gen), shift = uniform({3}, -1, 1, f64, &gen);
  Tensor running_mean = zeros({3}, f64), running_var = ones({3}, f64);
  batch_norm_functional(features, running_mean, running_var, scale, shift, true);
  batch_norm_functional(features, running_mean, running_var, scale, shift, false);
  layer_norm(x, {4}, y, y);
  dropout(x, 0.5, true);

  Tensor index = from_vector(std::vector<int64_t>{2, 0, 1}, {3});
  embedding(index, x);
  index_select(x, 0, index);
  index_add(x, 0, index, uniform({3, 4}, -1, 1, f64, &gen));
  Tensor gather_index = from_vector(std::vector<int64_t>{0, 3, 1, 2, 2, 1}, {3, 2});
  gather(x, 1, gather_index);
  scatter_add(x, 1, gather_index, uniform({3, 2}, -1, 1, f64, &gen));
  one_hot(index, 4);
  cumsum(x, 1, true, true);
  topk(x, 2, 1, false);
  cat({x, x}, 0);

  // quantized inference
  const Tensor qs = full({}, 0.05, DType::Float32), qz = full({}, 3.0, DType::UInt8);
  const Tensor q = quantize_linear(cast(x, DType::Float32), qs, qz, 1);
  dequantize_linear(q, qs, qz, 1);
  const Tensor qw = full({4, 2}, 2.0, DType::Int8), qwz = zeros({}, DType::Int8);
  qlinear_matmul({q, qs, qz}, {qw, qs, qwz}, qs, qz);
  matmul_integer(q, qw, qz, qwz);
  const Tensor qimage = quantize_linear(cast(image.detach(), DType::Float32), qs, qz, 1);
  const Tensor qkernel = full({3, 2, 3, 3}, 1.0, DType::Int8);
  qlinear_conv2d({qimage, qs, qz}, {qkernel, qs, qwz}, qs, qz);
  conv2d_integer(qimage, qkernel, qz, qwz);

  // the blocked channel layout (internal rows of compiled plans): 2 channels in, 3 out, blocks of 2
  Tensor blocked = ops::call1(OpId::to_blocked, {image}, {{"block", int64_t(2)}});
  Tensor blocked_conv = ops::call1(OpId::conv2d_blocked, {blocked.detach(), weight.detach()},
                                   {{"channels", int64_t(2)}, {"stride", std::vector<int64_t>{1, 1}},
                                    {"padding", std::vector<int64_t>{1, 1}}, {"dilation", std::vector<int64_t>{1, 1}},
                                    {"groups", int64_t(1)}});
  sum(ops::call1(OpId::from_blocked, {blocked_conv}, {{"channels", int64_t(3)}})).detach();
  sum(ops::call1(OpId::from_blocked, {blocked}, {{"channels", int64_t(2)}})).backward();
  ops::call1(OpId::max_pool2d_blocked, {blocked_conv}, {{"kernel", std::vector<int64_t>{3, 3}},
                                                       {"stride", std::vector<int64_t>{2, 2}},
                                                       {"padding", std::vector<int64_t>{1, 1}}});
}

TEST(OpTable, EveryRowIsHonestAboutItsKernel) {
  CheckingHook hook;
  {
    HookScope scope(&hook);
    workload();
  }
  // Every row was exercised; group holds a subgraph and has no kernel of its own (its body's
  // nodes are ordinary rows).
  std::vector<std::string> missing;
  for (int i = 0; i < ops::kOpCount; ++i) {
    const OpId op = static_cast<OpId>(i);
    if (op == OpId::group) continue;
    if (!hook.calls.count(op)) missing.push_back(ops::op_name(op));
  }
  EXPECT_TRUE(missing.empty()) << "add a call of these ops to workload(): " << ::testing::PrintToString(missing);
}

// An op with a gradient rule is reported differentiable and its rule yields a gradient; one
// without a rule gives outputs that carry no history.
TEST(OpTable, DifferentiableRowsHaveWorkingGradientRules) {
  CheckingHook hook;
  {
    HookScope scope(&hook);
    workload();
  }
  for (const auto& [op, calls] : hook.calls) {
    const std::string name = ops::op_name(op);
    EXPECT_EQ(ops::is_differentiable(op), ops::op_impl(op).grad != nullptr) << name;
    const RecordedCall& call = calls.front();
    std::vector<Tensor> inputs, float_inputs;
    for (const Tensor& t : call.inputs) {
      inputs.push_back(dtype_is_floating(t.dtype()) ? leaf(t) : t);
      if (dtype_is_floating(t.dtype())) float_inputs.push_back(inputs.back());
    }
    if (float_inputs.empty()) continue;  // one_hot, comparisons of integers: nothing to differentiate
    std::vector<Tensor> outs = ops::call(op, inputs, call.attrs);
    std::vector<Tensor> differentiable;
    for (const Tensor& o : outs) {
      if (o.requires_grad()) differentiable.push_back(o);
    }
    if (!ops::is_differentiable(op)) {
      EXPECT_TRUE(differentiable.empty()) << name << " has no gradient rule but its output requires grad";
      continue;
    }
    ASSERT_FALSE(differentiable.empty()) << name << " is differentiable but no output requires grad";
    Tensor loss = zeros({}, DType::Float64);
    for (const Tensor& o : differentiable) loss = loss + sum(cast(o, DType::Float64));
    std::vector<Tensor> grads = autograd::grad({loss}, float_inputs, {}, false, false, true);
    bool any = false;
    for (const Tensor& g : grads) any |= g.defined();
    EXPECT_TRUE(any) << name << ": the gradient rule gave no gradient for any input";
  }
}

// Every flag of the table is read by some pass; this lists the readers so that a flag nobody
// reads shows up here (kCommutative: canonicalize, cse, the pattern matcher; kRandom: is_pure,
// hence cse, dce and fold; kRefusesValues: may_refuse_values, hence Node::must_run, dce and fusion).
TEST(OpTable, FlagsDescribeOps) {
  std::set<std::string> commutative, random, refusing;
  for (int i = 0; i < ops::kOpCount; ++i) {
    const ops::OpInfo& info = ops::op_info(static_cast<OpId>(i));
    if (info.flags & ops::kCommutative) {
      commutative.insert(info.name);
      EXPECT_EQ(info.arity, 2) << info.name << ": commutative ops swap two operands";
    }
    if (info.flags & ops::kRandom) {
      random.insert(info.name);
      EXPECT_FALSE(ops::is_pure(static_cast<OpId>(i))) << info.name;
    }
    if (info.flags & ops::kRefusesValues) refusing.insert(info.name);
  }
  EXPECT_EQ(commutative, (std::set<std::string>{"add", "mul", "maximum", "minimum", "eq", "ne"}));
  EXPECT_EQ(random, (std::set<std::string>{"dropout"}));
  EXPECT_EQ(refusing, (std::set<std::string>{"div", "nll_loss", "max_pool2d_grad", "embedding", "index_select",
                                             "index_add", "gather", "scatter_add", "one_hot",
                                             "quantize_linear", "dequantize_linear", "qlinear_matmul",
                                             "qlinear_conv2d"}));
}

// Each row flagged kRefusesValues does refuse a value (so the flag is not a guess), and div only
// with an integer divisor: may_refuse_values says so by the operands' dtypes.
TEST(OpTable, RefusingRowsRefuseAValue) {
  auto i64 = [](std::vector<int64_t> v, Shape s) { return from_vector(v, s); };
  const Tensor x = testing::random_tensor({3, 4}, -1, 1, 7);
  const Tensor zero_scale = zeros({}, DType::Float32), one_scale = ones({}, DType::Float32);
  const Tensor u8_zero = zeros({}, DType::UInt8), u8_matrix = zeros({2, 2}, DType::UInt8);
  const Tensor u8_image = zeros({1, 1, 2, 2}, DType::UInt8);
  const std::vector<std::pair<OpId, std::pair<std::vector<Tensor>, ops::Attrs>>> cases = {
      {OpId::div, {{i64({1, 2}, {2}), i64({1, 0}, {2})}, {}}},
      {OpId::nll_loss, {{x, i64({0, 4, 1}, {3})}, {{"ignore_index", int64_t(-100)}, {"reduction", std::string("mean")}}}},
      {OpId::max_pool2d_grad, {{testing::random_tensor({1, 1, 1, 1}, -1, 1, 8), i64({4}, {1, 1, 1, 1})},
                               {{"input_shape", std::vector<int64_t>{1, 1, 2, 2}}}}},
      {OpId::embedding, {{x, i64({3}, {1})}, {}}},
      {OpId::index_select, {{x, i64({4}, {1})}, {{"dim", int64_t(1)}}}},
      {OpId::index_add, {{x, i64({-1}, {1}), testing::random_tensor({3, 1}, -1, 1, 9)}, {{"dim", int64_t(1)}}}},
      {OpId::gather, {{x, i64({0, 5}, {1, 2})}, {{"dim", int64_t(1)}}}},
      {OpId::scatter_add, {{x, i64({3}, {1, 1}), testing::random_tensor({1, 1}, -1, 1, 10)}, {{"dim", int64_t(0)}}}},
      {OpId::one_hot, {{i64({0, 3}, {2})}, {{"num_classes", int64_t(3)}}}},
      // quantized ops: a scale of 0
      {OpId::quantize_linear, {{x.to(DType::Float32), zero_scale, u8_zero}, {}}},
      {OpId::dequantize_linear, {{u8_zero, zero_scale, u8_zero}, {}}},
      {OpId::qlinear_matmul, {{u8_matrix, one_scale, u8_zero, u8_matrix, zero_scale, u8_zero, one_scale, u8_zero,
                               zeros({0}, DType::Int32)},
                              {}}},
      {OpId::qlinear_conv2d, {{u8_image, one_scale, u8_zero, u8_image, one_scale, u8_zero, zero_scale, u8_zero,
                               zeros({0}, DType::Int32)},
                              {{"stride", std::vector<int64_t>{1, 1}}, {"padding", std::vector<int64_t>{0, 0, 0, 0}},
                               {"dilation", std::vector<int64_t>{1, 1}}, {"groups", int64_t(1)}}}},
  };
  std::set<OpId> seen;
  for (const auto& [op, call] : cases) {
    seen.insert(op);
    std::vector<ops::TensorMeta> metas;
    for (const Tensor& t : call.first) metas.push_back(ops::meta_of(t));
    EXPECT_TRUE(ops::may_refuse_values(op, metas)) << ops::op_name(op);
    EXPECT_THROW(ops::call(op, call.first, call.second), Error) << ops::op_name(op) << " accepted a bad value";
  }
  for (int i = 0; i < ops::kOpCount; ++i) {
    if (ops::op_info(static_cast<OpId>(i)).flags & ops::kRefusesValues) {
      EXPECT_TRUE(seen.count(static_cast<OpId>(i))) << ops::op_info(static_cast<OpId>(i)).name << ": no case here";
    }
  }
  EXPECT_FALSE(ops::may_refuse_values(OpId::div, {ops::meta_of(x), ops::meta_of(x)})) << "float division is IEEE";
  const Tensor u8 = i64({1, 0}, {2}).to(DType::UInt8);
  // (div refuses uint8 operands by dtype, in its shape rule, never by value)
  EXPECT_FALSE(ops::may_refuse_values(OpId::div, {ops::meta_of(u8), ops::meta_of(u8)}));
  EXPECT_FALSE(ops::may_refuse_values(OpId::add, {ops::meta_of(x), ops::meta_of(x)}));
}

}  // namespace
}  // namespace smelt
